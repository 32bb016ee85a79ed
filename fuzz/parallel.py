"""``fuzz run --workers N``: the checks shared among N runner processes, each on its own GPU.

:func:`deal` hands out the checks round robin (shares differ by one check at most; with more workers
than checks, the extra workers would have nothing to do and are not started) and gives worker ``i``
visible GPU ``i % count`` through :mod:`fuzz.gpus` (none with 0 or 1 GPU). :func:`fuzz_spread` then
runs :func:`fuzz.runner.fuzz_checks` on each share, in its own process, for the whole budget, and
returns the results in the order the checks were named, as one ``fuzz_checks`` would.

Every worker saves to one example database directory: Hypothesis' ``DirectoryBasedExampleDatabase``
is safe to share among processes of one machine, and no two workers fuzz the same check, so no
two write under one key. Each worker keeps its own :class:`~fuzz.isolation.IsolatedChecker`,
which inherits the worker's ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fuzz import gpus
from fuzz.isolation import CARD_HOLD_DIR

if TYPE_CHECKING:
    from fuzz.runner import CheckResult
    from fuzz.strategies import Size

__all__ = ["deal", "fuzz_spread"]


def deal(check_names: Sequence[str], workers: int, *,
         devices: Sequence[str | None] | None = None) -> list[tuple[list[str], str | None]]:
    """Each worker's checks and ``CUDA_VISIBLE_DEVICES`` (None: left as it is); ``devices``
    defaults to :func:`fuzz.gpus.worker_devices`."""
    shares = [list(check_names[i::workers]) for i in range(min(workers, len(check_names)))]
    devices = gpus.worker_devices(len(shares)) if devices is None else devices
    return list(zip(shares, devices))


def fuzz_spread(
    kernel_name: str,
    *,
    plan: Sequence[tuple[list[str], str | None]],
    budget: float,
    size: Size,
    database_dir: str,
    profile: str,
    shrink_budget: float | None = None,
    case_timeout: float = 600.0,
    random_seed: int | None = None,
) -> list[CheckResult]:
    """Run :func:`fuzz.runner.fuzz_checks` on each share of ``plan`` in a worker process of its
    own, all at once, and return the results in the order the checks were named (before
    :func:`deal` dealt them); the other arguments are ``fuzz_checks``' (the database by its
    directory)."""
    context = multiprocessing.get_context("spawn")
    options = dict(budget=budget, size=size, shrink_budget=shrink_budget, case_timeout=case_timeout,
                   random_seed=random_seed)
    hold_dir = tempfile.mkdtemp(prefix="fuzz-card-hold-")
    started = []
    try:
        for i, (share, device) in enumerate(plan):
            receiver, sender = context.Pipe(duplex=False)
            tag = f"[worker {i}{'' if device is None else f', GPU {device}'}]"
            # Not a daemon: a daemonic process may not start the IsolatedChecker under it.
            process = context.Process(target=_work, args=(sender, device, tag, kernel_name, share,
                                                          database_dir, profile, options, hold_dir))
            process.start()
            sender.close()
            started.append((process, receiver))
        results = {}
        for i, (process, receiver) in enumerate(started):
            try:
                status, payload = receiver.recv()
            except EOFError:
                process.join()
                raise RuntimeError(f"fuzz worker {i} died (exit code {process.exitcode}) "
                                   "before it reported") from None
            if status == "error":
                raise RuntimeError(f"fuzz worker {i} failed:\n{payload}")
            results.update((result.name, result) for result in payload)
            process.join()  # it has reported and closed its checker: it is exiting
    finally:
        for process, receiver in started:
            receiver.close()
            if process.is_alive():  # only when another worker failed, or on Ctrl-C
                process.kill()
            process.join()
        shutil.rmtree(hold_dir, ignore_errors=True)
    return [results[name] for name in _dealt_order(plan)]


def _dealt_order(plan: Sequence[tuple[list[str], str | None]]) -> list[str]:
    """The names in the order :func:`deal` had them: the first of each share, then the second, ..."""
    shares = [share for share, _ in plan]
    return [share[j] for j in range(max(map(len, shares), default=0)) for share in shares if j < len(share)]


def _work(sender, device: str | None, tag: str, kernel_name: str, check_names: list[str],
          database_dir: str, profile: str, options: dict, hold_dir: str) -> None:
    """One worker: pin it, fuzz its share, send back ``("done", results)`` or ``("error", text)``."""
    # Before the imports below: nothing imported so far has touched CUDA, and nothing may first.
    if device is not None:
        os.environ[gpus.VISIBLE] = device
    # The workers on one card share its hold (fuzz.isolation.run_check: a check that ran the card
    # out of memory runs again alone); the checker's process inherits this.
    os.environ[CARD_HOLD_DIR] = os.path.join(hold_dir, device or "all")
    from fuzz import profiles
    from fuzz.runner import Progress, fuzz_checks

    try:
        profiles.load(profile)  # a spawned process starts with no profile registered
        progress = Progress(options["budget"], stream=_Tagged(sys.stderr, tag))
        results = fuzz_checks(kernel_name, check_names=check_names, database=profiles.database(database_dir),
                              profile=profile, progress=progress, **options)
    except Exception as exc:  # noqa: BLE001 - the parent reports it, with this traceback
        sender.send(("error", "".join(traceback.format_exception(exc))))
        return
    sender.send(("done", results))


class _Tagged:
    """A worker's stderr: a line per finished check, tagged with the worker (a progress bar per
    worker would overwrite the others')."""

    def __init__(self, stream, tag: str) -> None:
        self._stream, self._tag = stream, tag

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> None:
        self._stream.write(f"{self._tag} {text}")

    def flush(self) -> None:
        self._stream.flush()
