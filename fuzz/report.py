"""``python -m fuzz report``: a conformance table, checks (rows) x kernel modules (columns), in markdown.

Each kernel is fuzzed by :func:`fuzz.runner.fuzz_checks`, as ``fuzz run`` fuzzes it; this module
turns the :class:`~fuzz.runner.CheckResult` lists into the page. A cell is one of:

- ``pass (N cases; F of bound, Q)``: N examples passed. ``F of bound, Q`` appears for a check whose
  bound is the error model's (:func:`properties.error_model.assert_within_error_model`: the oracle
  checks, the varlen oracle checks, and the stability checks that compare with the oracle): the
  worst error over those examples as a fraction of its bound, and the quantity it was in;
- ``FAIL [n]``: note ``n`` gives the status, the first line of the message, and the command that
  replays the smallest failing case found;
- ``n/a [n]``: the check applied to none of the cases; note ``n`` gives the first reason seen (one
  note per distinct reason);
- ``not run``: the kernel's share of the time was spent before the check judged a case.

The page opens with the date, the machine (GPU or CPU name, torch and triton versions) and the
command that regenerates it.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
from collections.abc import Callable, Mapping, Sequence

from fuzz.runner import CheckResult

__all__ = ["header", "machine", "markdown"]

LEGEND = (
    "`pass (N cases; F of bound, Q)`: N fuzzed examples passed; F is the worst error over them as a "
    "fraction of the error model's bound (`properties/error_model.py`), Q the quantity it was in, for "
    "the checks that compare with the float64 oracle. `FAIL` and `n/a`: see the note. A pass is "
    "evidence from the examples run, not a proof."
)


class _Notes:
    """Numbered notes below the table; the same text gets the same number. A note's later lines are
    indented under its first, so that markdown keeps them in the one list item."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}

    def ref(self, text: str) -> str:
        number = self.numbers.setdefault(text, len(self.numbers) + 1)
        return f"[{number}]"

    def lines(self) -> list[str]:
        return [f"{number}. " + text.replace("\n", "\n" + " " * (len(str(number)) + 2))
                for text, number in self.numbers.items()]


def _cell(result: CheckResult, kernel: str, notes: _Notes, replay: Callable[..., str]) -> str:
    """The table cell for ``result`` (``kernel``'s run of one check); notes go into ``notes``.

    ``replay(case, check_name, kernel)`` is the command line that reproduces a failure.
    """
    if result.failure is not None:
        case, verdict = result.failure
        first = verdict.first_line
        cut = ""
        if result.shrink_cut_short:
            cut = " (shrinking cut short by the budget: a smaller case may fail)"
        return "FAIL " + notes.ref(
            f"`{result.name}` on `{kernel}`: {verdict.status}: {first}{cut}\n"
            f"replay: `{replay(case, result.name, kernel)}`" + _first_of_another_kind(result, kernel, replay)
        )
    if result.verdict == "n/a":
        return "n/a " + notes.ref(f"n/a: {result.not_applicable_reason}")
    if result.passed == 0:
        return "not run"
    cases = f"{result.passed} case{'s' if result.passed != 1 else ''}"
    margin = result.worst_margin
    replayed = ""
    if result.replayed:  # a pass that needed a second run says so
        replayed = " " + notes.ref(f"`{result.name}` on `{kernel}`: {result.replayed} case(s) run "
                                   f"twice, the first: {result.replayed_note}")
    if margin is None:
        return f"pass ({cases}){replayed}"
    return f"pass ({cases}; {margin.fraction:.2g} of bound, {margin.quantity}){replayed}"


def _first_of_another_kind(result: CheckResult, kernel: str, replay: Callable[..., str]) -> str:
    """The failing examples by status, and the first failure found where shrinking ended on another
    kind (its replay line too): empty for a check with one kind of failure."""
    if not result.another_kind_summary:
        return ""
    case, _ = result.first_failure_of_another_kind
    return f"\n{result.another_kind_summary}\nits replay: `{replay(case, result.name, kernel)}`"


def _summary(results: Sequence[CheckResult]) -> str:
    """``'31 pass, 2 FAIL, 1 n/a'`` for one kernel's results (and ``not run``, if any)."""
    counts = {"pass": 0, "FAIL": 0, "n/a": 0, "not run": 0}
    for r in results:
        counts[r.verdict] += 1
    parts = [f"{n} {name}" for name, n in counts.items() if n or name != "not run"]
    examples = sum(r.examples for r in results)
    seconds = sum(r.seconds for r in results)
    return f"{', '.join(parts)} ({examples} cases, {seconds:.0f} s)"


def markdown(
    columns: Mapping[str, Sequence[CheckResult]], *, replay: Callable[..., str], header: str = "",
) -> str:
    """The page: ``header``, the legend, the table (a row per check, a column per kernel of
    ``columns``, each kernel's results in the same check order), a summary row, then the notes.

    ``replay(case, check_name, kernel)`` is the command line that reproduces a failure.
    """
    kernels = list(columns)
    names = [r.name for r in columns[kernels[0]]] if kernels else []
    for kernel in kernels:
        if [r.name for r in columns[kernel]] != names:
            raise ValueError(f"kernel {kernel}'s checks differ from {kernels[0]}'s")
    notes = _Notes()
    rows = [[name, *(_cell(columns[k][i], k, notes, replay) for k in kernels)]
            for i, name in enumerate(names)]
    rows.append(["**summary**", *(_summary(columns[k]) for k in kernels)])
    head = ["check", *(f"`{k}`" for k in kernels)]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(x.ljust(w) for x, w in zip(row, widths)) + " |"

    table = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]
    parts = [header, LEGEND, "\n".join(table)] if header else [LEGEND, "\n".join(table)]
    if notes.numbers:
        parts.append("\n".join(notes.lines()))
    return "\n\n".join(parts) + "\n"


def machine() -> str:
    """The GPU (or, without one, the CPU) and the torch and triton versions, as one phrase."""
    import torch

    if torch.cuda.is_available():
        where = f"GPU {torch.cuda.get_device_name()} (CUDA {torch.version.cuda})"
    else:
        where = f"CPU {_cpu_name()} ({os.cpu_count()} cores), no GPU"
    try:
        triton = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        triton = "not installed"
    return f"{where}; torch {torch.__version__}, triton {triton}"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for row in info:
                if row.startswith("model name"):
                    return row.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def header(command: str, *, when: datetime.datetime | None = None, title: str = "Conformance report") -> str:
    """The page's title and its first line: date, :func:`machine`, and ``command``, which regenerates it."""
    when = when or datetime.datetime.now(datetime.UTC)
    return (f"# {title}\n\n{when:%Y-%m-%d %H:%M %Z}, {machine()}. "
            f"Regenerate with `{command}`.")
