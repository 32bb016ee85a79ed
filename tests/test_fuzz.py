"""Hypothesis fuzzing of every check against the kernel under test (``--kernel``), and the fuzzer's
own machinery (strategies, profiles, database keys).

One test per check in :data:`properties.ALL_CHECKS` (whatever it holds), on cases from
:mod:`fuzz.strategies`: lengths weighted to tile edges, ``n_q != n_k``, odd head dims, every layout
and value distribution; and one per check of packed batches (:data:`properties.varlen.VARLEN_CHECKS`),
on :func:`fuzz.strategies.varlen_cases` (skipped, with the reason, for a kernel without
``attention_varlen``). The Hypothesis profile (:mod:`fuzz.profiles`) sets how many cases, and on
the CPU a few seconds per test (``--hypothesis-profile nightly``: many cases, no time cap).
Failures are saved under keys shared with ``python -m fuzz``, so ``python -m fuzz replay`` replays
them too; each failure notes the command that reproduces it.
"""

import math

import pytest
import torch
from hypothesis import find, given, note, reject, settings
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Unsatisfiable

from fuzz import profiles
from fuzz.engine import database_key, fuzz_given, stored_cases
from fuzz.runner import NOT_APPLICABLE_AFTER, OUTSIDE_LIMITS_AFTER
from fuzz.strategies import BLOCK, CPU, CPU_QUICK, DECODE_ROWS, GPU, cases, varlen_cases
from oracle.dense import dense_attention
from oracle.varlen import varlen_mask
from properties import ALL_CHECKS
from properties.case import DISTRIBUTIONS, Case
from properties.kernels import NotApplicable, OutsideLimits, features, require_varlen
from properties.varlen import VARLEN_CHECKS
from properties.varlen_case import VarlenCase

CHECKS = [pytest.param(check, id=check.__name__) for check in ALL_CHECKS]
VARLEN = [pytest.param(check, id=check.__name__) for check in VARLEN_CHECKS]


def _seconds() -> float | None:
    # Read at run time: pytest_configure may load another profile after this module is imported.
    # Shared among the CPU fuzz tests, or (gpu profile) among the GPU ones.
    return profiles.test_seconds(tests=len(CHECKS) + len(VARLEN))


def _fuzz(kernel, check, size) -> None:
    """Fuzz ``check`` against ``kernel`` on cases of ``size``; each case notes how to replay it.

    A case the kernel cannot take (n/a: a declared limit, say float32 for a 16-bit-only module) is
    rejected and another drawn, so one such draw does not end the test; only when the first
    ``NOT_APPLICABLE_AFTER`` cases are all n/a (``OUTSIDE_LIMITS_AFTER`` for cases outside the
    module's declared limits), and none ran, is the test a skip with the reason (as ``python -m
    fuzz run`` reports a check n/a).
    """
    seen = {"ran": 0, "n/a": 0, "why": ""}

    @fuzz_given(check.__name__, size=size, seconds=_seconds(), features=features(kernel))
    def fuzz(case):
        note(f'replay: python -m fuzz repro "{case}" --check {check.__name__} --kernel {kernel.__name__}')
        try:
            check(kernel, case)
        except NotApplicable as exc:
            seen["n/a"] += 1
            seen["why"] = str(exc)
            after = OUTSIDE_LIMITS_AFTER if isinstance(exc, OutsideLimits) else NOT_APPLICABLE_AFTER
            if not seen["ran"] and seen["n/a"] >= after:
                pytest.skip(seen["why"])
            reject()
        seen["ran"] += 1

    try:
        fuzz()
    except Unsatisfiable:
        pytest.skip(f"too few cases the kernel takes: {seen['n/a']} n/a, {seen['ran']} run; "
                    f"last: {seen['why']}")


@pytest.mark.parametrize("check", CHECKS)
def test_fuzz(kernel, check):
    _fuzz(kernel, check, CPU_QUICK)


@pytest.mark.gpu
@pytest.mark.parametrize("check", CHECKS)
def test_fuzz_gpu(kernel, check):
    _fuzz(kernel, check, GPU)


def _require_varlen(kernel) -> None:
    # Skip before drawing anything: every case of a varlen check would be NotApplicable.
    try:
        require_varlen(kernel)
    except NotApplicable as reason:
        pytest.skip(str(reason))


@pytest.mark.parametrize("check", VARLEN)
def test_fuzz_varlen(kernel, check):
    """Packed batches: per-sequence lengths at tile edges, 1, a long one among length-1 ones,
    ``n_q != n_k`` per sequence, now and then a sequence without queries."""
    _require_varlen(kernel)
    _fuzz(kernel, check, CPU_QUICK)


@pytest.mark.gpu
@pytest.mark.parametrize("check", VARLEN)
def test_fuzz_varlen_gpu(kernel, check):
    _require_varlen(kernel)
    _fuzz(kernel, check, GPU)


# -- the fuzzer itself: no kernel calls below --


def test_cases_start_from_the_simplest_and_shrink_to_tile_edges():
    seen = []

    @fuzz_given("check_demo", size=CPU, settings_=settings(database=None, max_examples=3))
    def fuzz(case):
        seen.append(case)

    fuzz()
    assert seen[0] == Case(1, 1, 16, (), "float32", False, "contiguous", "normal", 1.0, 0)
    tail = find(cases(size=CPU), lambda case: case.n_k % 64 == 1 and case.n_k > 1,
                settings=settings(database=None, max_examples=2000))
    assert (tail.n_k, tail.head_dim, tail.leading) == (65, 16, ())


@pytest.mark.parametrize("size", [CPU, GPU], ids=lambda size: f"size={size.name}")
def test_cases_draw_decode_shapes_often(size):
    """A decode pair (a few query rows over a long cache: the calls a split-KV path takes) is one
    pair in eight by the strategy's weights, one in 9-12 as Hypothesis draws them (independent
    lengths alone: about one in 50 on the GPU size), so a fuzz run of a few dozen cases meets
    several; shrunk, one row over the shortest long cache the size draws."""
    shortest = size.max_len // (2 * BLOCK) * BLOCK - 1
    decode = lambda case: case.n_q <= DECODE_ROWS and case.n_k >= shortest
    seen = []

    @given(cases(size=size))
    @settings(database=None, max_examples=400, derandomize=True, deadline=None)
    def draw(case):
        seen.append(decode(case))

    draw()
    assert sum(seen) >= len(seen) // 16, (sum(seen), len(seen))  # drawn: 34-47 of 400
    small = find(cases(size=size), decode, settings=settings(database=None, max_examples=2000))
    assert small.n_q == 1 and shortest <= small.n_k <= shortest + 2, small


def test_varlen_cases_start_from_one_sequence_of_length_1_and_shrink_there():
    seen = []

    @fuzz_given("check_varlen_matches_oracle", size=CPU, settings_=settings(database=None, max_examples=3))
    def fuzz(case):
        seen.append(case)

    fuzz()
    assert seen[0] == VarlenCase((1,), (1,), 1, 16, "float32", False, "contiguous", "normal", 1.0, 0)
    # From a fixed start: from some random ones the shrinker stops at (0, 1, 1, 1, 1, 1) (a long
    # sequence of length 1 among ones), still small, but not the smallest.
    settings_ = settings(database=None, max_examples=2000, derandomize=True)
    empty = find(varlen_cases(size=CPU), lambda case: 0 in case.seqlens_q, settings=settings_)
    assert (empty.seqlens_q, empty.seqlens_k, empty.heads, empty.head_dim) == ((0, 1), (0, 1), 1, 16), empty
    edge = find(varlen_cases(size=CPU), lambda case: any(n % 64 == 1 and n > 1 for n in case.seqlens_k),
                settings=settings_)
    assert edge.seqlens_k == (65,) and edge.seqlens_q in ((1,), (65,)) and edge.heads == 1, edge
    # Equal query lengths over unequal keys (a batch of decoding steps): a kernel that runs equal
    # query lengths as a dense batch must not take the keys for equal too.
    equal = find(varlen_cases(size=CPU), lambda case: len(case.seqlens_q) > 1 and 0 not in case.seqlens_q
                 and len(set(case.seqlens_q)) == 1 and len(set(case.seqlens_k)) > 1, settings=settings_)
    assert (equal.seqlens_q, equal.seqlens_k, equal.heads) == ((1, 1), (1, 2), 1), equal
    longer = find(varlen_cases(size=CPU), lambda case: len(case.seqlens_q) > 1 and min(case.seqlens_q) > 1
                  and len(set(case.seqlens_q)) == 1, settings=settings_)
    assert len(longer.seqlens_q) == 2 and longer.heads == 1, longer


@pytest.mark.parametrize("size", [CPU, GPU], ids=lambda size: f"size={size.name}")
def test_varlen_cases_fit_the_work_cap(size):
    """Sequences past the cap are dropped: the kernel's work and the padded oracle's (every
    sequence padded to the longest) stay within the size's limits; a lone sequence may exceed them,
    as a lone Case may."""
    from fuzz.strategies import PADDED_WORK_RATIO

    @fuzz_given("check_varlen_no_leakage", size=size, settings_=settings(database=None, max_examples=200))
    def fuzz(case):
        # The query-less sequence goes in after the fit; it adds no work to the kernel.
        pairs = [(a, b) for a, b in zip(case.seqlens_q, case.seqlens_k) if a]
        work = case.heads * sum(a * b for a, b in pairs)
        padded = case.heads * len(pairs) * max(a for a, _ in pairs) * max(b for _, b in pairs)
        if len(pairs) > 1:
            assert work <= size.max_work and padded <= PADDED_WORK_RATIO * size.max_work, case

    fuzz()


def _drawn(strategy, n: int) -> list:
    """``n`` examples of ``strategy``, from a fixed start."""
    seen = []

    @settings(database=None, max_examples=n, derandomize=True)
    @given(strategy)
    def collect(example):
        seen.append(example)

    collect()
    return seen


def _sees_nothing(case: VarlenCase) -> bool:
    """Whether some real query row of ``case`` sees no key."""
    cu_q, cu_k = (torch.tensor(c) for c in case.offsets())
    seen = varlen_mask(cu_q, cu_k, max(case.seqlens_q), max(case.seqlens_k), case.is_causal,
                       window=case.window, causal_alignment=case.causal_alignment)
    real = torch.arange(max(case.seqlens_q)) < torch.tensor(case.seqlens_q)[:, None]
    return bool((~seen[:, 0].any(-1) & real).any())


def test_varlen_cases_draw_features_only_when_asked():
    """Without ``features`` no drawn case uses one; given every feature, 300 cases from a fixed
    start hold each of them, 8 query heads per kv head, a window side at a tile edge, a one-sided
    window and a real row that sees no key."""
    assert not any(case.needs() or case.kv_heads for case in _drawn(varlen_cases(size=CPU), 100))
    every = frozenset({"scale", "gqa", "window", "softcap", "bottom_right", "varlen"})
    drawn = _drawn(varlen_cases(size=CPU, features=every), 300)
    wanted = {name: lambda case, name=name: name in case.needs() for name in every - {"varlen"}}
    wanted.update({
        "8 query heads per kv head": lambda case: case.kv_heads and case.heads == 8 * case.kv_heads,
        "a window side at a tile edge": lambda case: bool({63, 64, 65} & set(case.window or ())),
        "a one-sided window": lambda case: min(case.window or (0,)) == -1 < max(case.window),
        "a row that sees no key": _sees_nothing,
    })
    missing = [what for what, holds in wanted.items() if not any(holds(case) for case in drawn)]
    assert not missing, f"no case among {len(drawn)} has {missing}"


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_every_drawn_scale_keeps_inputs_and_oracle_finite(distribution, dtype):
    """The largest and smallest scale the strategies draw for each distribution and dtype."""
    from fuzz.strategies import _LARGE, _TINY

    scales = {"large": _LARGE[dtype], "tiny": _TINY[dtype], "outliers": (100.0,)}.get(distribution, (4.0,))
    for scale in scales:
        case = Case(65, 130, 64, (2,), dtype, True, "contiguous", distribution, scale, seed=5)
        q, k, v = case.make_qkv("cpu")
        assert all(bool(torch.isfinite(t).all()) for t in (q, k, v)), case
        qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
        o, lse = dense_attention(qd, kd, vd, True)
        o.backward(case.make_grad_out("cpu").double())
        largest = torch.finfo(q.dtype).max
        for name, t in (("o", o), ("lse", lse), ("dq", qd.grad), ("dk", kd.grad), ("dv", vd.grad)):
            assert float(t.detach().abs().max()) < largest / 16, f"{name} nearly overflows {dtype} on {case}"
        if distribution == "equal_scores":
            assert torch.equal(k, k[..., :1, :].expand_as(k))
        if distribution == "ties":
            assert k[0].unique(dim=0).shape[0] <= 3
        if distribution == "large":
            assert math.isclose(float(v.abs().max()), scale, rel_tol=0.1)


def test_ci_profile_is_derandomized_and_still_saves_failures(tmp_path):
    """Under ``ci``: the same cases in the same order on every run, and failures land in the
    database (Hypothesis' derandomize=True would refuse a database)."""
    def run(db_dir):
        seen = []

        @fuzz_given("check_demo", size=CPU, database=DirectoryBasedExampleDatabase(str(db_dir)),
                    settings_=settings(profiles_ci(), max_examples=300))
        def fuzz(case):
            seen.append(case)
            assert not (case.n_k % 64 == 1 and case.n_k > 1)

        with pytest.raises(AssertionError):
            fuzz()
        return seen

    previous = profiles.active()
    profiles.load("ci")
    try:
        first, second = run(tmp_path / "a"), run(tmp_path / "b")
    finally:
        profiles.load(previous)
    assert first == second
    db = DirectoryBasedExampleDatabase(str(tmp_path / "a"))
    assert list(db.fetch(database_key("check_demo", CPU)))
    assert [case.n_k for case in stored_cases("check_demo", CPU, db)] == [65]


def profiles_ci():
    return settings.get_profile("ci")


def test_repro_plot_shows_where_the_error_is(tmp_path):
    pytest.importorskip("matplotlib", reason="--plot needs the 'plot' extra (matplotlib)")
    from fuzz.plot import plot_output_error
    from tests.broken import fuzz_tail_key

    case = Case(70, 65, 16, (), "float32", True)
    summary = plot_output_error(fuzz_tail_key, case, str(tmp_path / "error.png"), device="cpu")
    assert (tmp_path / "error.png").stat().st_size > 10_000
    # Causal: only rows >= 64 see the doubled key 64, so the worst row is there.
    row = int(summary.split(", row ")[1].split(";")[0])
    assert row >= 64 and "elements over the bound" in summary, summary
