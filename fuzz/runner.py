"""``fuzz run``: every check against one kernel, for a wall-clock budget, with crash isolation.

The budget is split across the checks named (by default every check in :data:`properties.ALL_CHECKS`
and :data:`properties.varlen.VARLEN_CHECKS`, whatever they hold when the run starts): each check
gets ``time left / checks left``, so time a check does not use goes to the next. Hypothesis drives
the search and the shrinking in this process; the kernel runs in an
:class:`~fuzz.isolation.IsolatedChecker` worker, so a crash or hang is that case's failure and is
shrunk and saved like any other. Shrinking a failure may run past the check's share, up to
``shrink_budget`` seconds more. If every check finishes its examples early (the profile's
``max_examples``), the run goes round again with fresh random draws until the budget is spent,
unless the profile is derandomized.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, Verbosity, reject, settings
from hypothesis.database import ExampleDatabase

from fuzz import profiles
from fuzz.engine import fuzz_given
from fuzz.isolation import IsolatedChecker, Verdict
from fuzz.strategies import Size
from properties.case import Case
from properties.error_model import Margin
from properties.kernels import features, load_kernel
from properties.varlen_case import VarlenCase

__all__ = ["CheckResult", "Progress", "fuzz_checks"]


class _BudgetSpent(BaseException):
    """Raised in a fuzz test to end it when its time is up (a BaseException, so Hypothesis does
    not take it for a failure of the case)."""


class _NeverApplicable(BaseException):
    """Raised in a fuzz test when the check did not apply to the first cases it saw."""


class FuzzFailure(AssertionError):
    """A failing verdict, raised from one place so that Hypothesis shrinks every failure of a check
    as one bug."""


NOT_APPLICABLE_AFTER = 5
"""A check that is not applicable to this many cases, and ran on none, is reported n/a."""

OUTSIDE_LIMITS_AFTER = 50
"""The same, for cases outside the kernel module's declared limits (``OutsideLimits``): another
draw may fall inside them (a float16-only module, and a float32 case first), so many more are
tried before the check is reported n/a."""


@dataclass
class CheckResult:
    """What fuzzing one check found: counts, the smallest failing case with its verdict, the first
    reason the check did not apply, and the passing examples' worst :class:`~properties.error_model.Margin`
    (None for a check that makes no error-model comparison)."""

    name: str
    examples: int = 0
    passed: int = 0
    failed: int = 0
    not_applicable: int = 0
    failure: tuple[Case | VarlenCase, Verdict] | None = None
    shrink_cut_short: bool = False
    seconds: float = 0.0
    not_applicable_reason: str = ""
    worst_margin: Margin | None = None
    replayed: int = 0  # cases whose verdict is a second run's (fuzz.isolation: a worker killed)
    replayed_note: str = ""  # the first such case's note
    # Every failure of a check is one bug to Hypothesis (FuzzFailure), so shrinking may trade the
    # first failure found for another kind (an assertion for a worker killed from outside, as a
    # report of 2026-12-06 may have): the first and a tally by status keep what was found.
    first_failure: tuple[Case | VarlenCase, Verdict] | None = None
    failing_statuses: dict[str, int] = field(default_factory=dict)

    @property
    def failing_tally(self) -> str:
        """``'crash 2, fail 1'``: the failing examples by verdict status, most first."""
        counts = sorted(self.failing_statuses.items(), key=lambda item: (-item[1], item[0]))
        return ", ".join(f"{status} {n}" for status, n in counts)

    @property
    def first_failure_of_another_kind(self) -> tuple[Case | VarlenCase, Verdict] | None:
        """The first failure found, where its status is not the reported (smallest) failure's."""
        if self.first_failure is None or self.failure is None:
            return None
        return self.first_failure if self.first_failure[1].status != self.failure[1].status else None

    @property
    def another_kind_summary(self) -> str:
        """``'failing examples: crash 1, fail 1; the first found was a fail: <its first line>'``
        where :attr:`first_failure_of_another_kind` is one (``fuzz run`` and ``fuzz report`` add
        its replay line), else empty."""
        other = self.first_failure_of_another_kind
        if other is None:
            return ""
        _, verdict = other
        return (f"failing examples: {self.failing_tally}; the first found was a {verdict.status}: "
                f"{verdict.first_line}")

    @property
    def verdict(self) -> str:
        """``FAIL``, ``n/a`` (no example applied), ``not run`` (no example finished: the budget's
        share ran out first, or every draw fell outside what the module declares, with no reason
        recorded) or ``pass``. A check that ran nothing never reads as passing."""
        if self.failure is not None:
            return "FAIL"
        if self.passed == 0 and self.not_applicable:
            return "n/a"
        if self.passed == 0:
            return "not run"
        return "pass"

    def record(self, case: Case | VarlenCase, verdict: Verdict) -> None:
        self.examples += 1
        if verdict.replayed:
            self.replayed += 1
            self.replayed_note = self.replayed_note or verdict.replayed
        if verdict.failed:
            self.failed += 1
            self.failure = (case, verdict)  # the shrinker only tries smaller cases: the last is best
            self.first_failure = self.first_failure or self.failure
            self.failing_statuses[verdict.status] = self.failing_statuses.get(verdict.status, 0) + 1
        elif verdict.status == "n/a":
            self.not_applicable += 1
            self.not_applicable_reason = self.not_applicable_reason or verdict.message
        else:
            self.passed += 1
            for margin in verdict.margins:
                if self.worst_margin is None or margin.fraction > self.worst_margin.fraction:
                    self.worst_margin = margin


@dataclass
class Progress:
    """A one-line progress bar on stderr (a line per check when stderr is not a terminal)."""

    budget: float
    stream: object = field(default_factory=lambda: sys.stderr)
    start: float = field(default_factory=time.monotonic)
    _last: float = 0.0

    def update(self, result: CheckResult, *, force: bool = False) -> None:
        now = time.monotonic()
        if not getattr(self.stream, "isatty", lambda: False)() or (now - self._last < 0.2 and not force):
            return
        self._last = now
        done = min(1.0, (now - self.start) / self.budget) if self.budget > 0 else 1.0
        bar = "#" * int(30 * done) + "-" * (30 - int(30 * done))
        left = max(0.0, self.budget - (now - self.start))
        line = (f"\r[{bar}] {100 * done:3.0f}% {left:5.0f}s left  {result.name[:40]:<40} "
                f"ex {result.examples:4d} fail {result.failed:3d}")
        self.stream.write(line)
        self.stream.flush()

    def finish(self, result: CheckResult) -> None:
        if getattr(self.stream, "isatty", lambda: False)():
            self.update(result, force=True)
            self.stream.write("\n")
        else:
            tally = f" ({result.failing_tally})" if result.failed else ""
            self.stream.write(f"fuzzed {result.name}: {result.examples} examples, {result.failed} failing"
                              f"{tally}, {result.seconds:.0f} s\n")
        self.stream.flush()


def fuzz_checks(
    kernel_name: str,
    *,
    check_names: Sequence[str],
    budget: float,
    size: Size,
    database: ExampleDatabase,
    profile: str,
    shrink_budget: float | None = None,
    case_timeout: float = 600.0,
    random_seed: int | None = None,
    progress: Progress | None = None,
) -> list[CheckResult]:
    """Fuzz each of ``check_names`` against ``kernel_name`` for ``budget`` seconds in all.

    Args:
        kernel_name: the kernel module, imported by the worker process.
        check_names: names of checks in :data:`properties.ALL_CHECKS` or
            :data:`properties.varlen.VARLEN_CHECKS` (fuzzed with varlen cases).
        budget: wall-clock seconds for the search, split across the checks.
        size: how large cases get (:data:`fuzz.strategies.CPU` or ``GPU``).
        database: where failures are saved (and from where earlier ones are replayed first).
        profile: the Hypothesis profile (its ``max_examples`` caps one round of one check).
        shrink_budget: seconds a found failure may be shrunk past the check's share
            (default: the share, at least 60).
        case_timeout: seconds one check on one case may take before it is a ``timeout`` failure.
        random_seed: fix the random draws (round ``r`` uses ``random_seed + r``).
        progress: where to show progress (default: a bar on stderr).
    """
    # No explain phase: it reruns variations of the minimal case, and each crash costs a new worker.
    base = settings(
        settings.get_profile(profile), database=database, report_multiple_bugs=False,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        verbosity=Verbosity.quiet, print_blob=False, deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    progress = progress or Progress(budget)
    features = declared_features(kernel_name)
    results = {name: CheckResult(name) for name in check_names}
    pending = list(check_names)
    with IsolatedChecker(kernel_name, case_timeout=case_timeout) as checker:
        checker.start()
        deadline = time.monotonic() + budget
        round_no = 0
        while pending and time.monotonic() < deadline:
            finished_early = []
            for i, name in enumerate(pending):
                share = max(0.0, deadline - time.monotonic()) / (len(pending) - i)
                seed = None if random_seed is None else random_seed + round_no
                spent = _fuzz_one(name, checker, results[name], share=share, size=size, base=base,
                                  features=features,
                                  shrink_budget=max(share, 60.0) if shrink_budget is None else shrink_budget,
                                  random_seed=seed, progress=progress)
                if not spent and results[name].verdict in ("pass", "not run"):
                    finished_early.append(name)
            pending = finished_early
            round_no += 1
            if profile in profiles.DERANDOMIZED and random_seed is None:
                break  # the same seed would draw the same cases again
    return [results[name] for name in check_names]


def declared_features(kernel_name: str) -> frozenset[str]:
    """The features the kernel module declares, so that only those are drawn. The module is imported
    here too (importing runs no kernel); if that fails, the worker reports why, and none are drawn."""
    try:
        return features(load_kernel(kernel_name))
    except Exception:  # noqa: BLE001 - the worker process reports the import error itself
        return frozenset()


def _fuzz_one(name, checker, result, *, share, size, base, features, shrink_budget, random_seed,
              progress) -> bool:
    """One Hypothesis run of check ``name``; True if it stopped because its time was up."""
    start = time.monotonic()
    search_end = start + share
    shrink_end = search_end + shrink_budget
    grace = 5.0 + 0.25 * share
    examples_before = result.examples

    @fuzz_given(name, size=size, settings_=base, random_seed=random_seed, features=features)
    def fuzz(case: Case | VarlenCase) -> None:
        now = time.monotonic()
        if result.examples > examples_before and now > (shrink_end if result.failure else search_end):
            raise _BudgetSpent
        # An example still running well past the check's time is abandoned, not judged.
        give_up_at = shrink_end if result.failure else search_end + grace
        verdict = checker.check(name, case, give_up_at=give_up_at)
        if verdict.status == "abandoned":
            raise _BudgetSpent
        result.record(case, verdict)
        progress.update(result)
        if verdict.status == "n/a":
            after = OUTSIDE_LIMITS_AFTER if verdict.outside else NOT_APPLICABLE_AFTER
            if result.passed == 0 and result.failed == 0 and result.not_applicable >= after:
                raise _NeverApplicable
            reject()
        if verdict.failed:
            raise FuzzFailure(f"{verdict.status}: {verdict.first_line}")

    spent = False
    try:
        fuzz()
    except _BudgetSpent:
        spent = True
        result.shrink_cut_short = result.failure is not None and time.monotonic() > shrink_end
    except _NeverApplicable:
        pass
    except Exception:  # noqa: BLE001 - the failure (or Hypothesis' wrapping of it) is in `result`
        if result.failure is None:
            raise
    result.seconds += time.monotonic() - start
    progress.finish(result)
    return spent
