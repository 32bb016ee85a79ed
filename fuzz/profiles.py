"""Hypothesis profiles and the one example database, shared by pytest and ``python -m fuzz``.

Profiles (select with ``--hypothesis-profile P`` in pytest, ``--profile P`` in ``python -m fuzz``,
or ``HYPOTHESIS_PROFILE=P``; ``CI`` set in the environment makes ``ci`` the default):

- ``dev`` (default): a few examples per test, quick;
- ``ci``: derandomized (a fixed seed per test), deadline off, and still saving to the database;
- ``nightly``: many examples;
- ``gpu``: for the GPU strategies (bigger shapes): fewer, costlier examples.

Every profile saves to one directory, ``$FLASH_HYPOTHESIS_DB`` (default ``.hypothesis/examples``),
so a CI system can cache or upload it and a person can replay its failures from a copy
(``python -m fuzz replay --db COPY``).

Why ``ci`` is not ``derandomize=True``: Hypothesis refuses ``derandomize=True`` with a database
(InvalidArgument), and its own ``ci`` profile saves nothing, so a failure found in CI would be lost.
Instead :func:`fuzz.engine.fuzz_given` gives each fuzz test a fixed seed (``@hypothesis.seed``,
derived from the test's database key and ``$FLASH_FUZZ_SEED``) when the active profile is in
:data:`DERANDOMIZED` and then re-applies the database (``@seed`` alone also turns the database
off). Same seed and same database contents give the same examples, and failures are saved.
``pytest --hypothesis-seed`` is no route: a global seed makes Hypothesis drop the database unless
the test has a fixed key, which ours do.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

DB_ENV = "FLASH_HYPOTHESIS_DB"
DEFAULT_DB_DIR = os.path.join(".hypothesis", "examples")

PROFILES = ("dev", "ci", "nightly", "gpu")
DERANDOMIZED = frozenset({"ci"})
"""Profiles under which :func:`fuzz.engine.fuzz_given` fixes each test's seed."""

SUITE_SECONDS = {"dev": 40.0, "ci": 50.0, "gpu": 900.0}
"""Per profile, the seconds the CPU suite's fuzz tests may take together, shared equally: after its
share, a fuzz test stops drawing new cases (it always runs at least one, and a failure found is
always shrunk). A check that costs many kernel calls per case would otherwise take minutes in the
Triton interpreter. Under ``ci`` the cap can make the number of cases depend on the machine's
speed, never which cases come first. ``gpu``: 15 minutes for ``pytest -m gpu``'s fuzz tests;
``nightly`` has no cap."""

SEED_ENV = "FLASH_FUZZ_SEED"
"""Under a derandomized profile, mixed into every fuzz test's fixed seed (default 0): the same
value gives the same examples; another value gives a different, equally reproducible run (how
the suite is shown free of false failures across seeds: ``FLASH_FUZZ_SEED=1..5``)."""

SECONDS_ENV = "FLASH_FUZZ_SECONDS"
"""Overrides :data:`SUITE_SECONDS` for the active profile when set (seconds, all fuzz tests together)."""

# A case takes up to seconds in the Triton interpreter, and one draw is a few numbers.
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

_active = "dev"


def database_dir() -> str:
    """The example database directory: ``$FLASH_HYPOTHESIS_DB``, else ``.hypothesis/examples``."""
    return os.environ.get(DB_ENV, DEFAULT_DB_DIR)


def database(path: str | None = None) -> ExampleDatabase:
    """The example database in ``path`` (default :func:`database_dir`)."""
    return DirectoryBasedExampleDatabase(path or database_dir())


def register() -> None:
    """Register ``dev``, ``ci``, ``nightly`` and ``gpu``, all saving to :func:`database`."""
    db = database()
    common = dict(database=db, deadline=None, suppress_health_check=_SLOW_OK)
    settings.register_profile("dev", max_examples=10, **common)
    settings.register_profile("ci", max_examples=10, print_blob=True, **common)
    settings.register_profile("nightly", max_examples=500, print_blob=True, **common)
    settings.register_profile("gpu", max_examples=100, print_blob=True, **common)


def default_profile() -> str:
    """``$HYPOTHESIS_PROFILE``, else ``ci`` when ``$CI`` is set, else ``dev``."""
    return os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


def load(name: str | None = None) -> str:
    """Register the profiles and load ``name`` (default :func:`default_profile`); returns it."""
    global _active
    name = name or default_profile()
    if name not in PROFILES:
        raise ValueError(f"unknown Hypothesis profile {name!r}; expected one of {PROFILES}")
    register()
    settings.load_profile(name)
    _active = name
    return name


def active() -> str:
    """The name of the profile :func:`load` loaded last."""
    return _active


def seed_salt() -> int:
    """``$FLASH_FUZZ_SEED`` as an int (0 when unset)."""
    return int(os.environ.get(SEED_ENV) or 0)


def test_seconds(*, tests: int) -> float | None:
    """One fuzz test's share of the active profile's :data:`SUITE_SECONDS` among ``tests``, or None."""
    total = SUITE_SECONDS.get(_active)
    if os.environ.get(SECONDS_ENV):  # a CI job with its own time limit sets its own share
        total = float(os.environ[SECONDS_ENV])
    return None if total is None else total / max(1, tests)
