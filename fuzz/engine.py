"""The Hypothesis test behind every fuzz run, with a database key that pytest and the CLI share.

``fuzz_given(check_name, size=...)`` turns a body ``f(case)`` into a Hypothesis test over
:func:`fuzz.strategies.cases`, or, for a check of packed batches (:data:`properties.varlen.VARLEN_CHECKS`),
over :func:`fuzz.strategies.varlen_cases`. Its database key names only the check and the size
(``flash-gate/fuzz/<check>/<size>``), not the test function around it, so a failure saved by
``pytest tests/test_fuzz.py`` (say, in CI) is replayed by ``python -m fuzz replay`` and the other
way round, and the key survives edits to the test's body. :func:`stored_cases` reads the cases
saved under a key back.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.database import ExampleDatabase, InMemoryExampleDatabase

from fuzz import profiles
from fuzz.strategies import SIZES, Size, cases, varlen_cases
from properties.case import Case
from properties.varlen import VARLEN_CHECKS
from properties.varlen_case import VarlenCase

__all__ = ["database_key", "fuzz_given", "is_varlen", "stored_cases"]

_VARLEN_NAMES = frozenset(check.__name__ for check in VARLEN_CHECKS)


def is_varlen(check_name: str) -> bool:
    """Whether ``check_name`` checks packed batches (and so is fuzzed with :class:`VarlenCase`)."""
    return check_name in _VARLEN_NAMES


def database_key(check_name: str, size: Size) -> bytes:
    """The example-database key of fuzzing ``check_name`` with cases of ``size``."""
    return f"flash-gate/fuzz/{check_name}/{size.name}".encode()


def fuzz_given(
    check_name: str,
    *,
    size: Size,
    database: ExampleDatabase | None = None,
    settings_: settings | None = None,
    random_seed: int | None = None,
    seconds: float | None = None,
    features: frozenset[str] = frozenset(),
) -> Callable[[Callable[[Case | VarlenCase], None]], Callable[[], None]]:
    """Decorator: run ``body(case)`` on cases of ``size`` as a Hypothesis test keyed by the check
    (a :class:`Case`, or a :class:`VarlenCase` for a varlen check, see :func:`is_varlen`).

    Args:
        check_name: the check being fuzzed; with ``size``, it makes the database key.
        size: :data:`fuzz.strategies.CPU` or :data:`~fuzz.strategies.GPU`.
        database: where failures are saved (default: the active profile's, see
            :mod:`fuzz.profiles`).
        settings_: settings to start from (default: the active profile's).
        random_seed: a fixed seed; without one, the ``ci`` profile fixes one per key.
        seconds: stop drawing new cases after this long (at least one is run; a failure found
            is still shrunk). None: only ``max_examples`` ends the test.
        features: the kernel module's declared features (``properties.kernels.features``): the
            cases drawn use only these. They are drawn after everything else, so the database
            key stays the check's and the size's, and a saved plain case replays the same.
    """
    key = database_key(check_name, size)
    if is_varlen(check_name):
        strategy = varlen_cases(size=size, features=features)
    else:
        strategy = cases(size=size, features=features)

    def decorate(body: Callable[[Case | VarlenCase], None]) -> Callable[[], None]:
        clock = {"start": 0.0, "runs": 0, "failed": False}

        def timed(drawn) -> None:
            if (seconds is not None and clock["runs"] and not clock["failed"]
                    and time.monotonic() - clock["start"] > seconds):
                raise _TimeUp
            clock["runs"] += 1
            try:
                body(drawn)
            except Exception:
                clock["failed"] = True
                raise

        test = given(strategy)(timed)
        base = settings_ or settings()
        fixed = random_seed
        if fixed is None and profiles.active() in profiles.DERANDOMIZED:
            salt = profiles.seed_salt()
            salted = key if not salt else key + f"#seed={salt}".encode()
            fixed = int.from_bytes(hashlib.sha256(salted).digest()[:8], "big")
        if fixed is not None:
            # @seed also sets database=None; the @settings applied after it puts the database
            # back (see fuzz.profiles for why this, and not derandomize=True).
            test = seed(fixed)(test)
        test = settings(base, database=database if database is not None else base.database)(test)
        test._hypothesis_internal_database_key = key  # shared by pytest and the CLI

        def run() -> None:
            clock.update(start=time.monotonic(), runs=0, failed=False)
            try:
                test()
            except _TimeUp:
                pass

        run.hypothesis_test = test
        return run

    return decorate


class _TimeUp(BaseException):
    """Ends a fuzz test whose time is up (a BaseException: Hypothesis re-raises it as is)."""


def stored_cases(check_name: str, size: Size, database: ExampleDatabase) -> list[Case | VarlenCase]:
    """The failing cases saved under ``check_name`` and ``size`` in ``database``, smallest first.

    Hypothesis saves choice sequences, not values; to turn them back into cases, this replays
    them through the same strategy (its reuse phase only) against an in-memory copy of the
    entries, so the real database is read and never changed.
    """
    key = database_key(check_name, size)
    entries = list(database.fetch(key))
    if not entries:
        return []
    copy = InMemoryExampleDatabase()
    for entry in entries:
        copy.save(key, entry)
    seen: list[Case | VarlenCase] = []
    replay = settings(
        database=copy, phases=[Phase.reuse], max_examples=len(entries) + 1, deadline=None,
        suppress_health_check=list(HealthCheck), report_multiple_bugs=True,
    )

    @fuzz_given(check_name, size=size, database=copy, settings_=replay, random_seed=0)
    def collect(case: Case | VarlenCase) -> None:
        seen.append(case)

    collect()
    return list(dict.fromkeys(seen))


def size_named(name: str) -> Size:
    """The :class:`Size` called ``name`` (``cpu`` or ``gpu``)."""
    try:
        return SIZES[name]
    except KeyError:
        raise ValueError(f"unknown size {name!r}; expected one of {sorted(SIZES)}") from None
