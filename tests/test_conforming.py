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
import torch

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


def _spy(calls: list):
    """``tests.conforming`` under another name, recording each call's q, k and v."""
    import types

    conforming = load_kernel("tests.conforming")

    def attention_with_lse(q, k, v, is_causal=False, **features):
        calls.append((q, k, v))
        return conforming.attention_with_lse(q, k, v, is_causal, **features)

    def attention(q, k, v, is_causal=False, **features):  # differentiable, as the contract's
        calls.append((q, k, v))
        return conforming.attention(q, k, v, is_causal, **features)

    return types.SimpleNamespace(
        __name__="spy", FEATURES=conforming.FEATURES, SUPPORTED_DTYPES=conforming.SUPPORTED_DTYPES,
        attention_with_lse=attention_with_lse, attention=attention,
    )


def test_key_translation_moves_scores_by_the_case_s_own_size():
    """``check_key_translation`` shifts every key by ``u``, "up to KEY_SHIFT times the largest key
    element", so that scores move by a few times their own size. The GPU fuzz report of 2026-12-05
    (docs/findings.md, finding 20) drew a float32 ``large`` case (k about 2^-40, q about 2^40)
    where a fixed floor of 2^-14 on that largest element made ``u`` 2^26 times too large: the
    grid rounded all of k to 0 and the shifted scores reached 4e10, where flash returned NaN.
    With uniform data, ``|q.u| <= 2 KEY_SHIFT max|k| sum|q|``, a small multiple of the case's
    score magnitude ``S``: the shifted call's own ``S`` stays within ``4 (1 + 2 KEY_SHIFT) S``."""
    from properties import Case, check_key_translation
    from properties import error_model as em
    from properties.symmetry import KEY_SHIFT

    calls = []
    case = Case(n_q=40, n_k=40, head_dim=24, leading=(), dtype="float32", is_causal=True,
                distribution="large", scale=2.0**40, seed=555, softmax_scale=7.5)
    check_key_translation(_spy(calls), case, "cpu")
    (q, k, _), (_, k2, _) = calls
    assert k.count_nonzero() == k.numel(), "the grid rounded keys of the case to 0"
    s, s2 = (em.score_magnitude(q, t, scale=7.5) for t in (k, k2))
    assert s2 <= 4 * (1 + 2 * KEY_SHIFT) * s, f"shifted scores of size {s2:.3g}, the case's {s:.3g}"


def test_large_logits_reach_the_large_score_from_tiny_values():
    """``check_large_logits_stable`` scales q (and k) until the scores' size reaches
    ``large_score``; a float32 ``tiny`` case at scale 2^-63 has scores of about 1e-37, and a floor
    of 1e-30 under that size (as the check had) stopped the scaling with scores near 1e-3."""
    from properties import Case, check_large_logits_stable
    from properties import error_model as em
    from properties.stability import large_score

    calls = []
    case = Case(n_q=16, n_k=16, head_dim=16, leading=(), dtype="float32", distribution="tiny",
                scale=2.0**-63, seed=3)
    check_large_logits_stable(_spy(calls), case, "cpu")
    ((q, k, _),) = calls
    size = em.score_magnitude(q, k)
    assert size >= large_score(torch.float32) / 2, f"scaled scores of size {size:.3g}"


@pytest.mark.parametrize("distribution, scale", [("normal", 1.0), ("large", 2.0**40), ("tiny", 2.0**-63)])
def test_extreme_scores_reach_their_targets(distribution, scale):
    """``check_extreme_scores_finite`` scales q and k until the largest scaled score is each of
    ``EXTREME_SCORES`` (the first, 1e10, is past the 1.5e9 where a fused exponent overflows), with
    q and k about equally large: a q near float32's top would overflow gradients whose exact value
    is 0 (a single key's ``dk``), as the check's first version did with a ``large`` case."""
    from properties import Case, check_extreme_scores_finite
    from properties.stability import EXTREME_SCORES

    calls = []
    case = Case(n_q=16, n_k=24, head_dim=16, leading=(), dtype="float32", distribution=distribution,
                scale=scale, seed=3, softmax_scale=0.3)
    check_extreme_scores_finite(_spy(calls), case, "cpu")
    assert len(calls) == len(EXTREME_SCORES)
    for (q, k, _), target in zip(calls, EXTREME_SCORES):
        peak = float((0.3 * q.double() @ k.double().transpose(-2, -1)).abs().max())
        assert target / 2 <= peak <= target * 2, f"largest scaled score {peak:.3g}, target {target:g}"
        ratio = float(q.abs().max() / k.abs().max())
        assert 1 / 64 <= ratio <= 64, f"max|q| / max|k| = {ratio:.3g}"


def test_value_affine_keeps_tiny_values():
    """``check_value_affine`` puts v on a grid that holds ``a v + b`` exactly; with a fixed floor
    of 2^-14 under its size, a float32 ``tiny`` case's v (about 1e-30) went to 0 on that grid, and
    the check compared two calls on v = 0."""
    from properties import Case, check_value_affine

    calls = []
    case = Case(n_q=16, n_k=16, head_dim=16, leading=(), dtype="float32", distribution="tiny",
                scale=1e-30, seed=3)
    check_value_affine(_spy(calls), case, "cpu")
    (_, _, v), (_, _, v2) = calls
    assert v.count_nonzero() == v.numel() and v2.count_nonzero() == v2.numel(), \
        "the grid rounded values of the case to 0"
