"""The process's state (:mod:`properties.process_state`): the kernel under test, imported
and called first thing in a new process, leaves it as it found it (``check_fresh_process``), on a
dense case and a packed one; modules that change it fail, each with its message; correct modules
pass. The same state is compared around every call of ``check_inputs_unchanged`` and
``check_varlen_inputs_unchanged`` on the grids (``tests/test_broken_kernels.py`` holds those parts
with ``rng_drawn_per_call`` and ``varlen_rng_drawn``)."""

import pytest
import torch

from properties import Case, load_kernel
from properties.process_state import (
    assert_settings_unchanged,
    changed_settings,
    check_fresh_process,
    process_settings,
    settings_off_default,
)
from properties.varlen_case import VarlenCase
from tests.helpers import case_params, run_check

CPU_CASES = [
    Case(33, 40, 16, (2, 2), "float32", True),
    VarlenCase((5, 0, 17), (9, 3, 17), 2, 16, "float32", True),
]

GPU_CASES = [
    Case(65, 130, 64, (2, 2), "float16", True),
    VarlenCase((5, 0, 17), (9, 3, 17), 2, 64, "float16", True),
]


@pytest.mark.parametrize("case", case_params(CPU_CASES))
def test_fresh_process(kernel, case):
    run_check(check_fresh_process, kernel, case)


@pytest.mark.parametrize("case", case_params(GPU_CASES, gpu=True))
def test_fresh_process_gpu(kernel, case):
    run_check(check_fresh_process, kernel, case)


@pytest.mark.parametrize("module, says", [
    # one bug each (tests/broken/): what changed, and when
    ("tf32_set_at_import", r"after importing the kernel module .*torch\.backends\.cuda\.matmul\.allow_tf32 "
                           r"was False, is now True"),
    ("tf32_enabled_per_call", r"after the forward: .*torch\.backends\.cuda\.matmul\.allow_tf32 was False, "
                              r"is now True"),
    ("rng_drawn_per_call", r"after the forward: .*torch\.get_rng_state\(\) changed"),
])
def test_a_module_that_changes_the_state_fails(module, says):
    with pytest.raises(AssertionError, match=rf"check_fresh_process failed for kernel tests\.broken\."
                                             rf"{module} on Case\(.*: in a fresh process: process-wide "
                                             rf"state {says}"):
        check_fresh_process(load_kernel(f"tests.broken.{module}"), CPU_CASES[0], device="cpu")


def test_a_packed_call_that_draws_fails():
    with pytest.raises(AssertionError, match=r"in a fresh process: process-wide state after the packed "
                                             r"forward: .*torch\.get_rng_state\(\) changed"):
        check_fresh_process(load_kernel("tests.broken.varlen_rng_drawn"), CPU_CASES[1], device="cpu")


@pytest.mark.parametrize("module", ["tests.conforming", "oracle.adapters.sdpa", "flash.with_dense_backward"])
@pytest.mark.parametrize("case", case_params(CPU_CASES))
def test_correct_modules_pass(module, case):
    run_check(check_fresh_process, load_kernel(module), case)


def test_settings_off_default_moves_and_restores():
    """The round under moved settings moves what it says (or the checks' last round tests nothing),
    and leaves every setting as it was."""
    device = torch.device("cpu")
    before = process_settings(device)
    with settings_off_default() as moved:
        inside = process_settings(device)
    assert_settings_unchanged(before, process_settings(device), "settings_off_default", "on exit")
    assert changed_settings(before, inside).keys() == {
        "torch.get_num_threads()", "torch.is_deterministic_algorithms_warn_only_enabled()",
        "torch.backends.cuda.flash_sdp_enabled()", "torch.backends.cuda.cudnn_sdp_enabled()"}
    assert "warn_only=True" in moved and "set_num_threads" in moved and "enable_cudnn_sdp(False)" in moved
