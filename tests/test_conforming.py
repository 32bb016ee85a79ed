"""The suite's guard against false failures: every check on modules that meet the contract.

``tests.conforming`` is the minimal conforming module (dense float32 PyTorch, a forward-only
``attention_with_lse``, no ``BATCH_INVARIANT``, no varlen, every feature declared): the CPU suite
runs every check on it, over the feature grid and the first half of the property grid, whatever
``--kernel`` is, and nothing may fail. The references that declare the features, the blockwise mock
and the dense oracle adapter, run half the feature grid the same way (each is also the kernel under
test of its own suite run, ``--kernel oracle.adapters.mock``). ``python -m fuzz run --kernel
tests.conforming`` fuzzes it with every feature drawn. A check that fails one of them demands more than the
contract in ``properties/kernels.py`` promises: fix the check, or write the promise into the
contract first.
"""

import pytest

from properties import ALL_CHECKS, BAND_EDGE_CHECKS, load_kernel
from properties.grids import band_edge_cpu_cases, feature_cpu_cases, property_cpu_cases
from properties.varlen import VARLEN_CHECKS
from properties.varlen_grids import varlen_cpu_cases
from tests.helpers import case_params, run_check

CHECKS = [pytest.param(check, id=check.__name__) for check in ALL_CHECKS]
EDGE_CHECKS = [pytest.param(check, id=check.__name__) for check in BAND_EDGE_CHECKS]
REFERENCES = ("oracle.adapters.mock", "oracle.adapters.dense")


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(property_cpu_cases()[:4] + feature_cpu_cases()))
def test_conforming_module_passes(check, case):
    run_check(check, load_kernel("tests.conforming"), case)


@pytest.mark.parametrize("check", EDGE_CHECKS)
@pytest.mark.parametrize("case", case_params(band_edge_cpu_cases()))
def test_conforming_module_passes_band_edges(check, case):
    run_check(check, load_kernel("tests.conforming"), case)


def test_conforming_module_sums_a_group_s_gradients_in_float32():
    """The CPU report of 2026-12-01 failed this module: it repeated float16 k and v per group before
    casting them up, so autograd summed the group's float16 gradients in float16, and a partial sum
    past 65504 gave ``dk = -inf`` where the exact one is -51129. It now repeats them in float32."""
    from properties import Case, check_gradients_match_oracle

    case = Case(n_q=203, n_k=256, head_dim=146, leading=(7,), dtype="float16", is_causal=True,
                layout="offset", distribution="large", scale=32.0, seed=271, kv_heads=1,
                softmax_scale=10.0, causal_alignment="bottom_right")
    run_check(check_gradients_match_oracle, load_kernel("tests.conforming"), case)


def test_conforming_module_has_no_varlen():
    # Its varlen checks must be n/a, never failures: the contract makes varlen optional.
    from properties.kernels import NotApplicable

    kernel = load_kernel("tests.conforming")
    for check in VARLEN_CHECKS:
        with pytest.raises(NotApplicable):
            check(kernel, varlen_cpu_cases()[0], "cpu")


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(feature_cpu_cases()[::2]))  # half: the CPU suite's time
@pytest.mark.parametrize("module", REFERENCES)
def test_references_take_the_features(module, check, case):
    run_check(check, load_kernel(module), case)


def test_declared_limits_make_a_case_not_applicable():
    # Every declared limit of the contract is n/a with its reason, never a call of the kernel.
    import types

    import torch

    from properties import Case, check_output_matches_oracle
    from properties.kernels import NotApplicable

    def refuse(*args, **kwargs):
        raise AssertionError("the kernel was called on a case outside its declared limits")

    module = types.SimpleNamespace(
        __name__="limited", attention=refuse, FEATURES=frozenset({"window"}),
        SUPPORTED_DTYPES=(torch.float16,), MIN_HEAD_DIM=16, MAX_HEAD_DIM=64, DEVICE_TYPES={"cpu"},
        unsupported=lambda q, k, v, is_causal=False, **f: "n_k = 1" if k.shape[-2] == 1 else None,
    )
    for case, why in [
        (Case(8, 8, 16, (2,), "float16", softcap=2.0), "softcap"),
        (Case(8, 8, 16, (2,), "float32"), "SUPPORTED_DTYPES"),
        (Case(8, 8, 8, (2,), "float16"), "head dims"),
        (Case(8, 8, 128, (2,), "float16"), "head dims"),
        (Case(8, 1, 16, (2,), "float16"), "n_k = 1"),
    ]:
        with pytest.raises(NotApplicable, match=why):
            check_output_matches_oracle(module, case, "cpu")
    with pytest.raises(NotApplicable, match="DEVICE_TYPES"):
        check_output_matches_oracle(module, Case(8, 8, 16, (2,), "float16"), "meta")
