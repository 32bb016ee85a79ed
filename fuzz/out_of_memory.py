"""A test that runs the GPU out of memory beside other workers runs again, alone on the card.

The workers of one ``pytest -m gpu -n N`` share a card (:mod:`fuzz.gpus`), and what the others hold
when a test allocates depends on which tests meet. GPU runs of the suite failed tests that way
(docs/running.md): 14 and 8 with two adapters' suites side by side (H200, 2026-12-01), 7 at
``-n 12`` beside the sanitizer (H200, 2026-12-03), 12 at ``-n 15`` beside a fuzz report (H100,
2026-12-05; all 12 passed when run again alone). Such a failure says nothing about the kernel, and
a gate that raises it teaches people to rerun until green.

So this pytest plugin (the suite's ``conftest.py`` loads it; ``-p fuzz.out_of_memory`` elsewhere)
runs each test's call phase inside a *shared* hold of the card
(:class:`CardHold`), and when the call raises CUDA out of memory (:func:`is_out_of_memory`: a
``torch.OutOfMemoryError``, or an error that says CUDA or Triton ran out of memory, anywhere in its
causes or, as Hypothesis wraps it, its exception groups), it lets go of what the failed call held
(:func:`drop_frames`, then :func:`release`), takes the *exclusive* hold (the other workers finish
the test they are in and start no other until it is done) and runs the call again. The verdict is
the second run's: a kernel that needs more memory than the card has fails alone too. The terminal
summary lists every test run again so, with the first error (:data:`PROPERTY` in the test's
report, which junitxml keeps).

The hold is two ``flock`` files shared by the run's workers, in the directory above their
``--basetemp`` (the controller's, which pytest's retention cleans): a turnstile taken
exclusively on the way in, so that a waiting exclusive hold is not starved by a stream of shared
ones, and the room, shared or exclusive. Outside a pytest-xdist worker (one process) nothing else
of the run is on the card, and the hold is a no-op: the call is only run again after the release.

``python -m fuzz run/report --workers N`` does the same in its checker processes
(:func:`fuzz.isolation.run_check`, with a hold directory per card that :mod:`fuzz.parallel` makes):
there a verdict is the run alone, marked ``replayed``.
"""

from __future__ import annotations

import contextlib
import gc
import re
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import torch

PROPERTY = "rerun_alone_after_cuda_out_of_memory"
"""The ``user_properties`` key of a test whose call was run again alone; its value is the first
run's error, one line."""

T = TypeVar("T")

_MESSAGE = re.compile(r"(CUDA|Triton)\b.*\bout of memory", re.IGNORECASE | re.DOTALL)
"""How errors from outside PyTorch's allocator say it: ``Triton Error [CUDA]: out of memory`` (a
kernel's module load), ``CUDA error: out of memory``."""


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error``, its ``__cause__`` or ``__context__`` chain, or any member of an exception
    group among them (Hypothesis raises ``FlakyFailure`` or an ``ExceptionGroup`` around the
    errors it met) is the GPU running out of memory."""
    return any(isinstance(e, torch.OutOfMemoryError) or _MESSAGE.search(str(e)) for e in _linked(error))


def _linked(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every error chained to it or grouped in it, each once."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]


def first_line(error: BaseException) -> str:
    """``Type: first line of the message`` of ``error``, for a report."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


def drop_frames(error: BaseException) -> None:
    """Clear the local variables of every finished frame in the tracebacks of ``error`` and of the
    errors chained to or grouped in it: the failed call's tensors are among them, and the caller
    (pluggy, Hypothesis) may keep the exception itself alive while the call runs again."""
    for e in _linked(error):
        if e.__traceback__ is not None:
            traceback.clear_frames(e.__traceback__)


def release() -> None:
    """Collect garbage and hand PyTorch's cached GPU memory back to the driver (the other workers
    may need it as much as the call run again). Never starts CUDA."""
    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


class CardHold:
    """The card's hold among the workers of one run (module docstring). ``directory``: where the
    two lock files go, the same for every worker; ``None``: a single process, no locking."""

    def __init__(self, directory: Path | None) -> None:
        self._files = None
        if directory is not None:
            import fcntl  # POSIX only; Triton's GPU backends run nowhere else

            self._flock = fcntl.flock
            self._ex, self._sh, self._un = fcntl.LOCK_EX, fcntl.LOCK_SH, fcntl.LOCK_UN
            directory.mkdir(parents=True, exist_ok=True)
            self._files = tuple(open(directory / f"card-{name}.lock", "a") for name in ("turnstile", "room"))

    @classmethod
    def for_worker(cls, basetemp: str | None, in_worker: bool) -> CardHold:
        """The hold for this process: a pytest-xdist worker's ``--basetemp`` is the controller's
        base directory with the worker's name appended, so its parent is shared by the run."""
        return cls(Path(basetemp).parent if in_worker and basetemp else None)

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Held by every test's call: any number at once, none while an exclusive hold is held or
        waited for."""
        if self._files is None:
            yield
            return
        turnstile, room = self._files
        self._flock(turnstile, self._ex)  # waits while an exclusive hold is held or waited for
        self._flock(room, self._sh)
        self._flock(turnstile, self._un)
        try:
            yield
        finally:
            self._flock(room, self._un)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Alone: waits for the shared holds to end, and keeps new ones out until it ends."""
        if self._files is None:
            yield
            return
        turnstile, room = self._files
        self._flock(turnstile, self._ex)
        try:
            self._flock(room, self._ex)
            try:
                yield
            finally:
                self._flock(room, self._un)
        finally:
            self._flock(turnstile, self._un)

    def rerun_alone(self, call: Callable[[], T]) -> T:
        """The call again, after a first run that ran the card out of memory: what this process
        cached is handed back (:func:`release`; the caller drops the failed run's frames first),
        then ``call()`` runs inside the exclusive hold. The suite's plugin and
        :func:`fuzz.isolation.run_check` both rerun so."""
        release()
        with self.exclusive():
            return call()

    def close(self) -> None:
        for f in self._files or ():
            f.close()
        self._files = None


# The plugin.

_CARD = pytest.StashKey[CardHold]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_CARD] = CardHold.for_worker(config.option.basetemp, hasattr(config, "workerinput"))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _CARD in config.stash:
        config.stash[_CARD].close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    card = item.config.stash[_CARD]
    try:
        with card.shared():
            return (yield)
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        first = first_line(error)
        drop_frames(error)
    # Outside the except block: nothing here refers to the failed call's frames any more.
    item.user_properties.append((PROPERTY, first))
    card.rerun_alone(item.runtest)
    return None


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Runs in the controller too: pytest-xdist sends each worker's reports, user_properties included.
    if report.when == "call":
        for key, value in report.user_properties:
            if key == PROPERTY:
                _reports.append((report.nodeid, report.outcome, value))


_reports: list[tuple[str, str, str]] = []
"""(node id, outcome, first error) of each test run again, as this process received their reports."""


def pytest_terminal_summary(terminalreporter) -> None:
    if _reports:
        terminalreporter.section("run again alone after running the GPU out of memory")
        for nodeid, outcome, first in _reports:
            terminalreporter.write_line(f"{outcome.upper()} alone: {nodeid} (first run: {first})")
