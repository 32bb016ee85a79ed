"""The kernel under test against every invariant in properties/ (the oracle checks are in
test_oracle_agreement.py), on grids of cases at tile edges.

bfloat16 is on the GPU grid only: the Triton interpreter's bfloat16 ``tl.dot`` returns garbage.
"""

import pytest

from properties import INVARIANT_CHECKS
from properties.grids import property_cpu_cases, property_gpu_cases
from tests.helpers import case_params, run_check

CHECKS = [pytest.param(check, id=check.__name__) for check in INVARIANT_CHECKS]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(property_cpu_cases()))
def test_invariant(kernel, check, case):
    run_check(check, kernel, case)


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(property_gpu_cases(), gpu=True))
def test_invariant_gpu(kernel, check, case):
    run_check(check, kernel, case)
