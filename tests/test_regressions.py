"""The regression corpus: every pinned case, against the kernel under test.

Entries live in ``fuzz/corpus.txt`` (or ``$FLASH_FUZZ_CORPUS``), one ``CHECK<TAB>Case(...)`` or
``CHECK<TAB>VarlenCase(...)`` per line, added by ``python -m fuzz pin``. Unlike the example
database, they do not depend on any test's body, so a case that once failed is run on every suite
run, whatever becomes of the fuzz tests.
"""

import pytest

from fuzz import corpus
from properties import EVERY_CHECK
from tests.helpers import run_check

_BY_NAME = {check.__name__: check for check in EVERY_CHECK}


def _params():
    params = []
    for entry in corpus.read():
        for name in corpus.check_names(entry):
            params.append(pytest.param(name, entry.case, id=f"line{entry.line_no}-{name}"))
    return params


@pytest.mark.parametrize("check_name, case", _params())
def test_pinned_case(kernel, check_name, case):
    if check_name not in _BY_NAME:
        pytest.fail(f"{corpus.corpus_path()} pins {case} for check {check_name!r}, which no longer "
                    f"exists; known checks: {sorted(_BY_NAME)}")
    run_check(_BY_NAME[check_name], kernel, case)
