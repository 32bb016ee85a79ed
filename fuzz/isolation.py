"""Running checks in a child process, so that a kernel crash is one case's failure, not the run's end.

An :class:`IsolatedChecker` keeps one worker process (``multiprocessing``, spawn start method) that
imports the kernel module once and runs ``check(kernel, case)`` for each case the parent sends it.
The parent gets back a :class:`Verdict`:

- ``pass``, ``fail`` (an ``AssertionError``: the kernel is wrong), ``n/a`` (``NotApplicable``);
- ``error``: any other exception from the check, with its last traceback lines;
- ``crash``: the worker died while running this case (a segfault, ``os._exit``); a fresh worker
  is started for the next case. A worker killed by ``SIGKILL``, which no kernel sends itself (the
  host's OOM killer, a person), is not the case's verdict: the case runs once more in a fresh
  worker, and that run's verdict is returned, marked ``replayed`` (one report of the kernel beside
  a full GPU suite got such a crash, 2026-12-05). That run is given its own ``case_timeout`` even
  where the caller's ``give_up_at`` has passed (a report on 2026-12-06 showed a FAIL whose only
  evidence was a kill 0.4 s into a case, because the budget ran out before the rerun): so a caller's
  budget may be overrun by one case. The message of a worker killed so says what the host's memory
  counters were (:func:`memory_evidence`), so that the next such kill says whether the OOM killer
  sent it;
- a check that ran the GPU out of memory runs once more in the same worker, alone on the card
  among the workers of the run (:func:`run_check`), and that run gives the verdict, marked
  ``replayed``;
- ``timeout``: no verdict within ``case_timeout`` seconds; the worker is killed and replaced;
- ``abandoned``: not a verdict: the caller's ``give_up_at`` time came first (its budget is spent);
  the worker is killed and replaced.

On a GPU, an illegal memory access leaves the CUDA context unusable for every later call, so after
an ``error`` on a CUDA device the worker exits and the next case gets a fresh one.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FAILING", "IsolatedChecker", "Verdict"]

FAILING = ("fail", "error", "crash", "timeout")
"""Verdict statuses that count as failures."""


@dataclass(frozen=True)
class Verdict:
    """What one check said about one case: a status (see the module docstring), its message, and
    the :class:`~properties.error_model.Margin` of each error-model comparison the check made
    (``python -m fuzz report`` shows the worst; empty for a check that makes none)."""

    status: str
    message: str = ""
    margins: tuple = ()
    outside: bool = False  # n/a because of this case only (properties.kernels.OutsideLimits)
    replayed: str = ""  # why this is a second run's verdict (a killed worker, the GPU's memory), if it is

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    @property
    def first_line(self) -> str:
        """The message's first line (empty for none): what a report or a progress line shows."""
        return (self.message.splitlines() or [""])[0]

    def replaying(self, note: str) -> Verdict:
        """This verdict, a second run's, marked ``replayed`` with ``note`` (why the first run's
        verdict was not the case's), which its message also ends with."""
        message = f"{self.message} [{note}]" if self.message else ""
        return Verdict(self.status, message, self.margins, self.outside, replayed=note)


CARD_HOLD_DIR = "FLASH_FUZZ_CARD_HOLD"
"""Environment variable: a directory that the workers of one run sharing a card hold it through
(:class:`fuzz.out_of_memory.CardHold`); :mod:`fuzz.parallel` sets it. Unset: a worker is alone."""


def run_check(check, kernel, case, card=None) -> tuple[Verdict, bool]:
    """Run one check in this process: its :class:`Verdict`, and whether the device may be poisoned.

    ``card``: a :class:`fuzz.out_of_memory.CardHold`, held shared while the check runs. A check whose
    call ran the GPU out of memory (:func:`fuzz.out_of_memory.is_out_of_memory`, also behind the
    ``AssertionError`` a check raises for a crashed call) runs once more, alone on the card (the
    exclusive hold), and that run's verdict is returned, marked ``replayed``: what the other workers
    held says nothing of the kernel, as for the suite's plugin; a kernel that needs more memory than
    the card has fails alone too."""
    from fuzz.out_of_memory import CardHold

    card = card or CardHold(None)
    with card.shared():
        verdict, poisoned, out_of_memory = _run_once(check, kernel, case)
    if not out_of_memory:
        return verdict, poisoned
    again, poisoned, _ = card.rerun_alone(lambda: _run_once(check, kernel, case))
    note = (f"{verdict.first_line[:300]}; run again alone on the card, as the memory other workers "
            f"hold is not the kernel's, this is that run's verdict")
    return again.replaying(note), poisoned


def _run_once(check, kernel, case) -> tuple[Verdict, bool, bool]:
    """:func:`run_check`'s one run: the verdict, whether the device may be poisoned, and whether it
    failed by running the GPU out of memory."""
    from fuzz.out_of_memory import is_out_of_memory
    from properties.error_model import record_margins
    from properties.kernels import NotApplicable, OutsideLimits

    try:
        with record_margins() as margins:
            check(kernel, case)
    except OutsideLimits as reason:
        return Verdict("n/a", str(reason), outside=True), False, False
    except NotApplicable as reason:
        return Verdict("n/a", str(reason)), False, False
    except AssertionError as exc:
        return Verdict("fail", str(exc), tuple(margins)), False, is_out_of_memory(exc)
    except Exception as exc:  # noqa: BLE001 - any other exception is this case's failure
        tail = "".join(traceback.format_exception(exc)[-3:]).rstrip()
        message = f"{type(exc).__name__} raised by {check.__name__}: {exc}\n{tail}"
        return Verdict("error", message, tuple(margins)), True, is_out_of_memory(exc)
    return Verdict("pass", "", tuple(margins)), False, False


def _serve(conn, kernel_name: str) -> None:
    """The worker's loop: receive ``(check_name, case_line)``, send back ``(status, message, margins)``.

    A case line is a ``Case(...)`` or a ``VarlenCase(...)`` line; a check is any of ``EVERY_CHECK``."""
    import torch

    from fuzz.out_of_memory import CardHold
    from properties import EVERY_CHECK, load_kernel
    from properties.varlen_case import parse_case

    kernel = load_kernel(kernel_name)
    checks = {check.__name__: check for check in EVERY_CHECK}
    on_gpu = torch.cuda.is_available()
    hold_dir = os.environ.get(CARD_HOLD_DIR)
    card = CardHold(Path(hold_dir) if hold_dir else None)
    conn.send(("ready", ""))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        check_name, line = request
        verdict, poisoned = run_check(checks[check_name], kernel, parse_case(line), card)
        conn.send((verdict.status, verdict.message, verdict.margins, verdict.outside, verdict.replayed))
        if poisoned and on_gpu:
            return  # the CUDA context may be unusable; the parent starts a fresh worker


class IsolatedChecker:
    """Runs checks on cases in a worker process that is replaced whenever it dies or hangs.

    Args:
        kernel_name: the kernel module the worker imports.
        case_timeout: seconds a single check may take before it counts as a ``timeout``.
    """

    def __init__(self, kernel_name: str, *, case_timeout: float = 600.0) -> None:
        self.kernel_name = kernel_name
        self.case_timeout = case_timeout
        self.restarts = 0
        self._context = multiprocessing.get_context("spawn")
        self._process = None
        self._conn = None
        self._oom_kills = oom_kill_count()

    def __enter__(self) -> IsolatedChecker:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start(self) -> None:
        """Start the worker now (it is started on the first check otherwise), so that the time its
        imports take is not charged to the first check's share of a budget."""
        if self._process is None or not self._process.is_alive():
            self._start()

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_serve, args=(child, self.kernel_name), daemon=True)
        process.start()
        child.close()
        self._process, self._conn = process, parent
        # The import of the kernel module is where a broken module fails first: say so.
        if not parent.poll(self.case_timeout):
            self._kill()
            raise RuntimeError(f"the worker did not import kernel {self.kernel_name} in time")
        try:
            parent.recv()
        except EOFError:
            code = self._kill()
            raise RuntimeError(
                f"the worker could not import kernel {self.kernel_name} (exit code {code})"
            ) from None

    def _kill(self) -> int | None:
        process, self._process = self._process, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if process is None:
            return None
        if process.is_alive():
            process.kill()
        process.join()
        return process.exitcode

    def check(self, check_name: str, case, *, give_up_at: float | None = None) -> Verdict:
        """The verdict of ``check_name`` on ``case``, run in the worker; ``abandoned`` if
        ``time.monotonic()`` passes ``give_up_at`` first. A worker killed by ``SIGKILL`` gets the
        case once more, past ``give_up_at`` if need be (module docstring)."""
        verdict, code = self._check_once(check_name, case, give_up_at)
        if verdict.status != "crash" or code != -signal.SIGKILL:
            return verdict
        again, _ = self._check_once(check_name, case, None)  # its own case_timeout (module docstring)
        note = (f"{verdict.message}; run again in a fresh worker, as SIGKILL comes from outside "
                f"(the OOM killer, a person), this is that run's verdict")
        return again.replaying(note)

    def _check_once(self, check_name: str, case, give_up_at: float | None) -> tuple[Verdict, int | None]:
        """:meth:`check`'s one run, and the worker's exit code if it died (None if not)."""
        if self._process is None or not self._process.is_alive():
            if self._process is not None:
                self.restarts += 1
                self._kill()
            self._start()
        conn = self._conn
        start = time.monotonic()
        try:
            conn.send((check_name, str(case)))
            while not conn.poll(0.5):
                now = time.monotonic()
                if give_up_at is not None and now > give_up_at:
                    self._kill()
                    return Verdict("abandoned", "the time budget ran out first"), None
                if now - start > self.case_timeout:
                    self._kill()
                    self.restarts += 1
                    return Verdict("timeout", f"{check_name} gave no verdict within "
                                              f"{self.case_timeout:g} s; the worker was killed"), None
            status, message, margins, outside, replayed = conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            elapsed = time.monotonic() - start
            code = self._kill()
            self.restarts += 1
            killed = f"; {memory_evidence(self._oom_kills)}" if code == -signal.SIGKILL else ""
            return Verdict("crash", f"the worker process died ({_exit_status(code)}) after "
                                    f"{elapsed:.1f} s running {check_name} on this case{killed}"), code
        return Verdict(status, message, margins, outside, replayed), None

    def close(self) -> None:
        """Stop the worker."""
        if self._conn is not None and self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)
            except (OSError, BrokenPipeError):
                pass
            self._process.join(timeout=5)
        self._kill()


_OOM_KILL_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
"""Where the kernel counts this cgroup's OOM kills (``oom_kill N``): cgroup v2, then v1."""


def oom_kill_count() -> int | None:
    """The OOM killer's kills in this process's memory cgroup so far, or None where not readable."""
    for path in _OOM_KILL_FILES:
        try:
            with open(path) as lines:
                for line in lines:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def memory_evidence(kills_before: int | None) -> str:
    """What the host says of its memory when a worker was found killed: the OOM killer's kills in
    this cgroup since the checker started (where the kernel counts them: the evidence that matters)
    and the memory available (read after the kill, so with the killed worker's memory freed)."""
    parts = []
    kills = oom_kill_count()
    if kills is not None and kills_before is not None:
        parts.append(f"OOM kills in this cgroup since the checker started: {kills - kills_before}")
    try:
        with open("/proc/meminfo") as lines:
            info = dict(line.split(":", 1) for line in lines)
        gib = {key: int(info[key].split()[0]) / 2**20 for key in ("MemAvailable", "MemTotal")}
        parts.append(f"host memory available {gib['MemAvailable']:.1f} of {gib['MemTotal']:.1f} GiB")
    except (OSError, KeyError, ValueError):
        pass
    return "; ".join(parts) or "the host's memory counters were not readable"


def _exit_status(code: int | None) -> str:
    """``exit code 3``, or for a process ended by a signal ``killed by SIGKILL (exit code -9)``."""
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name} (exit code {code})"
        except ValueError:
            pass
    return f"exit code {code}"
