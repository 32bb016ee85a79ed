"""The mutation gate's catalogue stays in step with the kernel: every mutant's snippet occurs
exactly once in its module (``Mutant.source`` raises otherwise), and names are unique. Running the
mutants is ``python -m tests.mutants`` (docs/mutation.md); this only keeps them applicable."""

import pytest

from tests.mutants import ROOT
from tests.mutants.catalogue import CATALOGUE


def test_mutant_names_are_unique():
    names = [m.name for m in CATALOGUE]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


@pytest.mark.parametrize("mutant", CATALOGUE, ids=lambda m: m.name)
def test_mutant_applies_to_the_current_source(mutant):
    original = (ROOT / (mutant.module.replace(".", "/") + ".py")).read_text()
    assert mutant.source() != original, f"mutant {mutant.name} changes nothing"


@pytest.mark.parametrize("xdist", [["-n", "2"], ["-n2"], ["--numprocesses=auto"], ["--dist", "load"]])
def test_mutants_refuse_xdist(xdist, capsys):
    # Mutants are activated in the process that runs pytest; xdist's workers would test the correct
    # kernel and every mutant would survive, so the runner refuses before running anything.
    from tests.mutants.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["--only", "merge_output_not_rescaled", "--", "tests/test_decode.py", *xdist])
    assert exit_.value.code == 2 and "xdist" in capsys.readouterr().err
