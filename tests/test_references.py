"""References a call keeps (:mod:`properties.references`): after a round of calls, none of the
caller's tensors, nor the results it was handed, stay alive once dropped. The kernel under test on
a case per path (dense causal, one query row over many keys, a packed batch), on the CPU and on a
GPU; correct modules pass; modules that keep a reference fail, naming the tensors."""

import pytest

from properties import Case, load_kernel
from properties.references import check_no_references_kept
from properties.varlen_case import VarlenCase
from tests.helpers import case_params, run_check

CPU_CASES = [
    Case(33, 40, 16, (2, 2), "float32", True, layout="gapped"),
    Case(1, 1100, 32, (1, 4), "float32", False, kv_heads=2),  # flash's split-KV path (two 512-key splits)
    VarlenCase((5, 0, 17), (9, 3, 17), 2, 16, "float32", True),
]

GPU_CASES = [
    Case(65, 130, 64, (2, 2), "float16", True, layout="gapped"),
    Case(1, 4097, 128, (1, 8), "bfloat16", False, kv_heads=2),
    VarlenCase((5, 0, 17, 200), (9, 3, 17, 300), 4, 64, "float16", True),
]


@pytest.mark.parametrize("case", case_params(CPU_CASES))
def test_no_references_kept(kernel, case):
    run_check(check_no_references_kept, kernel, case)


@pytest.mark.parametrize("case", case_params(GPU_CASES, gpu=True))
def test_no_references_kept_gpu(kernel, case):
    run_check(check_no_references_kept, kernel, case)


@pytest.mark.parametrize("module", ["tests.conforming", "oracle.adapters.mock", "oracle.adapters.sdpa",
                                    "flash.with_dense_backward"])
@pytest.mark.parametrize("case", case_params(CPU_CASES))
def test_correct_modules_pass(module, case):
    run_check(check_no_references_kept, load_kernel(module), case)


def test_a_module_that_keeps_the_last_inputs_fails():
    with pytest.raises(AssertionError, match=r"check_no_references_kept failed for kernel "
                                             r"tests\.broken\.last_call_kept on Case\(.*: the memory of q, "
                                             r"k, v is still alive .*\(bound: none kept\)"):
        check_no_references_kept(load_kernel("tests.broken.last_call_kept"), CPU_CASES[0], device="cpu")


def test_a_module_that_caches_offsets_by_tensor_fails():
    with pytest.raises(AssertionError, match=r"tests\.broken\.varlen_spans_lru_cached on VarlenCase\(.*: "
                                             r"the memory of cu_seqlens_q, cu_seqlens_k is still alive"):
        check_no_references_kept(load_kernel("tests.broken.varlen_spans_lru_cached"), CPU_CASES[2],
                                 device="cpu")
