"""The regression corpus: cases pinned in a data file that a plain test always runs.

Hypothesis keys its saved examples by test, so a change to a fuzz test's body or strategy orphans
them; a pinned case stays caught regardless. The file (``fuzz/corpus.txt``, or
``$FLASH_FUZZ_CORPUS``) holds one entry per line, ``CHECK<TAB>Case(...)`` or
``CHECK<TAB>VarlenCase(...)`` (a packed batch, for the varlen checks), where ``CHECK`` is a check's
name or ``*`` for every check that takes that kind of line (:func:`check_names`); ``#`` starts a
comment. ``tests/test_regressions.py`` runs every entry against the kernel under test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from properties.case import Case
from properties.varlen_case import VarlenCase, parse_case

__all__ = ["ALL", "CORPUS_ENV", "Entry", "append", "check_names", "corpus_path", "read"]

CORPUS_ENV = "FLASH_FUZZ_CORPUS"
ALL = "*"
"""The check name of an entry that every check runs."""


@dataclass(frozen=True)
class Entry:
    """One pinned case: the check that runs it (or :data:`ALL`), the case, where it was read."""

    check: str
    case: Case | VarlenCase
    line_no: int = 0

    def __str__(self) -> str:
        return f"{self.check}\t{self.case}"


def corpus_path() -> Path:
    """``$FLASH_FUZZ_CORPUS``, else ``corpus.txt`` next to this module."""
    return Path(os.environ.get(CORPUS_ENV) or Path(__file__).with_name("corpus.txt"))


def read(path: Path | None = None) -> list[Entry]:
    """Every entry of the corpus at ``path`` (default :func:`corpus_path`); an absent file is empty."""
    path = path or corpus_path()
    if not path.exists():
        return []
    entries = []
    for line_no, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        check, sep, case_line = line.partition("\t")
        if not sep:
            check, _, case_line = line.partition(" ")
        try:
            entries.append(Entry(check.strip(), parse_case(case_line), line_no))
        except (ValueError, SyntaxError, TypeError) as exc:
            raise ValueError(f"{path}:{line_no}: not 'CHECK<TAB>Case(...)' or 'CHECK<TAB>VarlenCase(...)': "
                             f"{raw!r} ({exc})") from exc
    return entries


def check_names(entry: Entry) -> list[str]:
    """The checks an entry runs: its own, or for :data:`ALL` every check that takes its kind of
    line (``properties.ALL_CHECKS`` for a ``Case``, ``properties.varlen.VARLEN_CHECKS`` for a
    ``VarlenCase``)."""
    if entry.check != ALL:
        return [entry.check]
    from properties import checks_for

    return [check.__name__ for check in checks_for(entry.case)]


def append(case: Case | VarlenCase, *, check: str = ALL, comment: str = "", path: Path | None = None) -> bool:
    """Pin ``case`` for ``check``; False (and nothing written) if that entry is already there."""
    path = path or corpus_path()
    if any(e.check == check and e.case == case for e in read(path)):
        return False
    text = path.read_text() if path.exists() else ""
    with path.open("a") as f:
        if text and not text.endswith("\n"):
            f.write("\n")
        if comment:
            f.write(f"# {comment}\n")
        f.write(f"{check}\t{case}\n")
    return True
