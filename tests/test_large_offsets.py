"""Calls past 2^31 elements (``properties.large.check_large_offsets``): one case on the GPU
(``pytest -m gpu --large tests/test_large_offsets.py``: it takes 34 GiB, so the plain GPU suite,
several processes to a card, leaves it out), and on the CPU the same check at a small ``elements``
against a module whose offsets wrap there and against correct modules, which pass it at any size."""

import pytest

from properties import Case, load_kernel
from properties.large import check_large_offsets
from tests.helpers import run_check

GPU_CASES = [
    # One case: q, k, v a little over 2^31 elements each (4 GiB in float16; with o and the
    # gradients, 34 GiB), causal so that the masked and unmasked loops both run. One, because the GPU
    # suite runs several processes on one card and each such case needs half a card's worth more.
    Case(256, 256, 128, (1,), "float16", True),
]

CPU_ELEMENTS = 2**14
"""Where the CPU tests put the threshold: 32 leading slices of 16 x 32, and two more."""

CPU_CASE = Case(16, 16, 32, (1,), "float32", True)


@pytest.mark.gpu
@pytest.mark.large  # with --large only; passed on one H200 (2026-12-01, 5.7 s)
@pytest.mark.parametrize("case", [pytest.param(c, id=str(c)) for c in GPU_CASES])
def test_large_offsets_gpu(kernel, case):
    run_check(check_large_offsets, kernel, case)


@pytest.mark.parametrize("module", ["tests.conforming", "flash"])
def test_correct_modules_pass_the_check_at_a_small_threshold(module):
    check_large_offsets(load_kernel(module), CPU_CASE, elements=CPU_ELEMENTS)


def test_offsets_that_wrap_fail_it(monkeypatch):
    broken = load_kernel("tests.broken.offsets_wrap_int32")
    monkeypatch.setattr(broken, "WRAP", CPU_ELEMENTS)
    with pytest.raises(AssertionError, match=r"check_large_offsets failed for kernel "
                                             r"tests\.broken\.offsets_wrap_int32 .*leading slice 33 of 34"):
        check_large_offsets(broken, CPU_CASE, elements=CPU_ELEMENTS)
    monkeypatch.setattr(broken, "WRAP", 2**31)  # below its threshold the module is correct
    check_large_offsets(broken, CPU_CASE, elements=CPU_ELEMENTS)
