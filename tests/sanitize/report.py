"""Reading compute-sanitizer's output: its errors, its summaries, and the case each error came in.

The output is one stream: compute-sanitizer's lines start with its prefix (``=========``) and the
lines of :mod:`tests.sanitize.cases` (``CASE i/n SOURCE Case(...)``, ``  ok``, the final ``done``
line) come in between. An error is a prefixed line that is not indented (``Invalid __global__ read
of size 2 bytes``, ``Program hit cudaErrorIllegalAddress ...``) with the indented prefixed lines
under it (where: kernel and source line, thread and block, address); it is credited to the last case
line before it. The count that decides is the sum of the ``ERROR SUMMARY: N errors`` lines (one per
process the sanitizer tracked): errors past ``--print-limit`` are counted there but not printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["SanitizerError", "SanitizerReport", "parse"]

PREFIX = "========="

_PREFIXED = re.compile(rf"^{PREFIX}(?P<indent>\s*)(?P<body>.*?)\s*$")
_SUMMARY = re.compile(r"^ERROR SUMMARY:\s*(?P<n>[\d,]+)\s+errors?$")
_NOT_PRINTED = re.compile(r"^ERROR SUMMARY:\s*(?P<n>[\d,]+)\s+errors? (?:was|were) not printed")
_TOOL_PROBLEM = re.compile(r"^(?:Error|Internal Sanitizer Error)\b:?")
_NOT_AN_ERROR = re.compile(
    r"^(?:COMPUTE-SANITIZER|(?:ERROR|LEAK|RACECHECK) SUMMARY\b|Target application returned an error"
    r"|Warning\b|Note\b|Info\b)"
)
_WHERE = re.compile(r"^at\s+(?:0x[0-9a-fA-F]+\s+in\s+)?(?P<fn>[A-Za-z_$][\w$]*)")
_CASE = re.compile(r"^CASE (?P<i>\d+)/(?P<n>\d+) (?P<source>\S+) (?P<case>Case\(.*\))\s*$")
_OK = re.compile(r"^  ok\b")
_DONE = re.compile(r"^SANITIZE-CASES done\b")


@dataclass
class SanitizerError:
    """One error as printed: its first line (``kind``), every line of it, the kernel, the case."""

    kind: str
    lines: list[str] = field(default_factory=list)
    kernel: str | None = None
    case: str | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class SanitizerReport:
    """What one sanitized run printed."""

    errors: list[SanitizerError] = field(default_factory=list)
    summaries: list[int] = field(default_factory=list)
    not_printed: int = 0
    tool_problems: list[str] = field(default_factory=list)
    cases_started: list[str] = field(default_factory=list)
    cases_finished: int = 0
    cases_total: int | None = None
    done: bool = False

    @property
    def error_count(self) -> int:
        """Errors found: the sum of the ERROR SUMMARY lines, else the errors printed."""
        return sum(self.summaries) if self.summaries else len(self.errors)

    @property
    def has_summary(self) -> bool:
        return bool(self.summaries)

    def cases_with_errors(self) -> list[str]:
        """The case lines that printed errors came in, in order, each once."""
        out: list[str] = []
        for e in self.errors:
            if e.case and e.case not in out:
                out.append(e.case)
        return out

    def kinds(self) -> dict[str, int]:
        """How many printed errors of each kind (first line), in order of first appearance."""
        counts: dict[str, int] = {}
        for e in self.errors:
            counts[e.kind] = counts.get(e.kind, 0) + 1
        return counts

    def kernels(self) -> list[str]:
        out: list[str] = []
        for e in self.errors:
            if e.kernel and e.kernel not in out:
                out.append(e.kernel)
        return out


def parse(text: str) -> SanitizerReport:
    """Read the combined output of compute-sanitizer and :mod:`tests.sanitize.cases`."""
    report = SanitizerReport()
    case: str | None = None
    current: SanitizerError | None = None
    for raw in text.splitlines():
        m = _PREFIXED.match(raw)
        if m is None:
            current = None
            line = raw.rstrip()
            if c := _CASE.match(line):
                case = line
                report.cases_started.append(line)
                report.cases_total = int(c["n"])
            elif _OK.match(line):
                report.cases_finished += 1
            elif _DONE.match(line):
                report.done = True
            continue
        indent, body = m["indent"], m["body"]
        if not body:
            current = None
            continue
        if indent.strip(" ") or len(indent) > 1:  # an indented detail line of the current error
            if current is not None:
                current.lines.append(raw.rstrip())
                if current.kernel is None and (w := _WHERE.match(body)):
                    current.kernel = w["fn"]
            continue
        current = None
        if s := _SUMMARY.match(body):
            report.summaries.append(int(s["n"].replace(",", "")))
        elif s := _NOT_PRINTED.match(body):
            report.not_printed += int(s["n"].replace(",", ""))
        elif _TOOL_PROBLEM.match(body):
            report.tool_problems.append(body)
        elif not _NOT_AN_ERROR.match(body):
            current = SanitizerError(kind=body, lines=[raw.rstrip()], case=case)
            report.errors.append(current)
    return report
