"""``python -m fuzz sensitivity``: the perturbed kernel, the threshold search, the error model's
sharper bounds it measured, and the command end to end (on the dense oracle, a fast correct kernel).

The thresholds are tested where they are made: a perturbation a little above the one found fails
the check, a little below passes; rounding the lse through float16 is detected (issue #19: it was
not, while the lse's reference was computed in float16).
"""

import math
import re
import subprocess
from pathlib import Path

import pytest
import torch

from fuzz import sensitivity
from fuzz.sensitivity import Perturbation, Perturbed
from properties import (
    Case,
    _common,
    check_gradients_match_oracle,
    check_lse_matches_oracle,
    check_output_matches_oracle,
    load_kernel,
)
from properties import error_model as em
from tests.helpers import run_as_a_person

ROOT = Path(__file__).resolve().parents[1]
CASE = Case(33, 40, 16, (2,), "float16", False)


@pytest.fixture
def dense():
    return Perturbed(load_kernel("oracle.adapters.dense"))


def test_perturbed_module_runs_its_kernel_once_per_input_and_perturbs_one_output(dense, monkeypatch):
    calls = []
    inner = dense.base.attention_with_lse
    monkeypatch.setattr(dense.base, "attention_with_lse", lambda *a, **f: calls.append(1) or inner(*a, **f))
    q, k, v = CASE.make_qkv("cpu")
    o, lse = dense.module.attention_with_lse(q, k, v, False)
    dense.perturbation = Perturbation("lse", 1e-3)
    o2, lse2 = dense.module.attention_with_lse(q, k, v, False)
    assert len(calls) == 1, "the second call should come from the cache"
    assert torch.equal(o, o2)
    assert torch.allclose((lse2 - lse).abs(), torch.full_like(lse, 1e-3), rtol=1e-3)
    dense.perturbation = Perturbation("o", through=torch.bfloat16)
    o3 = dense.module.attention(q, k, v, False)
    assert torch.equal(o3, o.to(torch.bfloat16).to(o.dtype)) and not torch.equal(o3, o)


@pytest.mark.parametrize(("check", "quantity"), [(check_output_matches_oracle, "o"),
                                                 (check_lse_matches_oracle, "lse"),
                                                 (check_gradients_match_oracle, "dq")])
def test_threshold_separates_a_failing_perturbation_from_a_passing_one(dense, check, quantity):
    eps = sensitivity.threshold(check, dense, CASE, quantity)
    assert eps is not None and eps > 0
    # RESOLUTION apart at most; a factor 1.5 either way is outside it.
    with pytest.raises(AssertionError, match="exceeds bound"):
        check(_fixed(dense, Perturbation(quantity, eps * 1.5)), CASE)
    check(_fixed(dense, Perturbation(quantity, eps / 1.5)), CASE)


def _fixed(perturbed: Perturbed, perturbation: Perturbation):
    perturbed.perturbation = perturbation
    return perturbed.module


def test_an_lse_rounded_through_float16_fails_for_float16_inputs(dense):
    """Issue #19: the lse is a float32 output; held to float16 accuracy, this rounding passed."""
    check_lse_matches_oracle(dense.module, CASE)
    with pytest.raises(AssertionError, match="log-sum-exp"):
        check_lse_matches_oracle(_fixed(dense, Perturbation("lse", through=torch.float16)), CASE)


def test_lse_reference_is_float32_for_16_bit_inputs():
    assert em.lse_reference_dtype(torch.float16) == torch.float32
    assert em.lse_reference_dtype(torch.bfloat16) == torch.float32
    assert em.lse_reference_dtype(torch.float64) == torch.float64


def test_gradient_floor_terms_vanish_where_the_gradient_cancels_exactly():
    """With one key ``dS = 0`` and ``o = v`` (a number of the dtype): nothing is rounded before the
    products of dq and dk, and D inherits nothing from the stored o; the operands do not vanish."""
    case = Case(4, 1, 16, (), "float16", False)
    q, k, v = case.make_qkv("cpu")
    do = case.make_grad_out("cpu")
    p, o64 = _common.probabilities(q, k, v, False)
    sizes = em.gradient_terms(q, k, v, do, p, o64)
    assert sizes.terms == (0.0, 0.0) and sizes.inherited == (0.0, 0.0)
    assert min(sizes.operands) > 0
    # Four equal keys: o is a mean, not a float16 number, and D inherits its rounding.
    q, k, v = case.replace(n_k=4, distribution="equal_scores").make_qkv("cpu")
    p, o64 = _common.probabilities(q, k, v, False)
    assert min(em.gradient_terms(q, k, v, do, p, o64).inherited) > 0


def test_gradient_magnitudes_never_exceed_the_cauchy_schwarz_bound():
    for case in (Case(17, 33, 24, (2, 4), "float32", True, kv_heads=2),
                 Case(17, 33, 64, (2, 4), "float16", False, kv_heads=2)):
        q, k, v = case.make_qkv("cpu")
        do = case.make_grad_out("cpu")
        oracle = _common.oracle_gradients(q, k, v, do, case.is_causal)
        before = em.gradient_magnitudes(q, k, v, do, oracle.want)
        assert all(new <= old for new, old in zip(oracle.magnitudes, before))
    # Unit normal values, d = 64: about a quarter (|k_j| averaged over P instead of max |k|).
    assert oracle.magnitudes[0] < before[0] / 3 and oracle.magnitudes[1] < before[1] / 3


def test_a_second_call_near_the_dtype_top_may_saturate_but_nowhere_else():
    """``em.assert_within_bound`` (two kernel results): an infinity passes where the expected value
    is within the bound of float16's largest number (the exact one may lie beyond it), and fails
    where it is not."""
    top = torch.finfo(torch.float16).max
    expected = torch.tensor([top - 10.0, 1000.0], dtype=torch.float64)
    em.assert_within_bound("dk", torch.tensor([math.inf, 1000.0], dtype=torch.float16), expected, 20.0,
                           "test", context="test", axes=("col",))
    with pytest.raises(AssertionError, match="non-finite values where finite ones were expected"):
        em.assert_within_bound("dk", torch.tensor([math.inf, 1000.0], dtype=torch.float16), expected, 5.0,
                               "test", context="test", axes=("col",))


def test_sample_is_the_same_for_the_same_seed():
    from fuzz.strategies import CPU_QUICK

    a = sensitivity.sample_cases(5, seed=3, size=CPU_QUICK)
    assert a == sensitivity.sample_cases(5, seed=3, size=CPU_QUICK) and len(a) >= 2


def _run(*args: str) -> subprocess.CompletedProcess:
    return run_as_a_person("-m", "fuzz", "sensitivity", *args, timeout=300)


def test_command_writes_the_page_with_its_command(tmp_path):
    out = tmp_path / "s.md"
    args = ["--kernel", "oracle.adapters.dense", "--check", "check_output_matches_oracle", "--check",
            "check_lse_matches_oracle", "--size", "cpu", "--sample", "2", "--threshold-cases", "1",
            "--max-work", "5000", "--output", str(out)]
    result = _run(*args)
    assert result.returncode == 0
    page = out.read_text()
    assert page.startswith("# Sensitivity of the error model's bounds")
    assert "python -m fuzz sensitivity --kernel oracle.adapters.dense" in page
    assert "## Headroom" in page and "## Thresholds" in page
    for table in ("Headroom", "Thresholds"):
        part = page.split(f"## {table}")[1]
        assert re.search(r"\| `check_lse_matches_oracle` +\| float16 +\| lse +\|", part), table


def test_command_fails_a_kernel_that_fails_a_check():
    result = _run("--kernel", "tests.broken.lse_in_input_dtype", "--check", "check_lse_matches_oracle",
                  "--size", "cpu", "--sample", "0", "--threshold-cases", "0", "--max-work", "5000")
    assert result.returncode == 1
    assert "| FAIL" in result.stdout
