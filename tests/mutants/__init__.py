"""Mutants: realistic Flash Attention bugs, each one source edit away from the correct kernel.

A mutant names a module of ``flash``, a snippet of its source and what replaces it. Activating a
mutant (:func:`activate`) installs an import hook so that, in this process, ``import flash`` loads
the edited module instead of the real one; everything else, tests included, runs unchanged. The
catalogue lives in :mod:`tests.mutants.catalogue`; ``python -m tests.mutants`` runs the suite
against each mutant in its own process and prints who killed it.

A snippet that no longer occurs in the source is an error, not a silent pass: when the kernel
changes, the catalogue must be updated with it.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutant:
    """One bug: in ``module`` (dotted name), replace ``find`` (must occur exactly once) by ``replace``.

    ``doc`` says what the bug is and the smallest input that shows it; ``gpu_only`` marks bugs the
    Triton interpreter cannot show (e.g. TF32 products: the interpreter computes in fp32 anyway).
    """

    name: str
    module: str
    find: str
    replace: str
    doc: str
    gpu_only: bool = False

    def source(self) -> str:
        path = ROOT / (self.module.replace(".", "/") + ".py")
        text = path.read_text()
        count = text.count(self.find)
        if count != 1:
            raise LookupError(
                f"mutant {self.name}: snippet occurs {count} times in {path.name}, expected once; "
                f"update tests/mutants/catalogue.py to the kernel's current source:\n{self.find}"
            )
        return text.replace(self.find, self.replace)


class _MutantFinder(importlib.abc.MetaPathFinder):
    def __init__(self, mutant: Mutant) -> None:
        self.mutant = mutant
        # Triton's @jit reads kernel source with inspect, so the edited module must be a real file.
        folder = Path(tempfile.mkdtemp(prefix=f"mutant-{mutant.name}-"))
        self.path = folder / (mutant.module.rsplit(".", 1)[-1] + ".py")
        self.path.write_text(mutant.source())

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.mutant.module:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path)


def activate(mutant: Mutant) -> None:
    """Make ``import <mutant.module>`` load the mutated source in this process."""
    if mutant.module in sys.modules:
        raise RuntimeError(f"{mutant.module} is already imported; activate mutants before importing flash")
    sys.meta_path.insert(0, _MutantFinder(mutant))
