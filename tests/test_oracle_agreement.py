"""The kernel under test against the float64 oracle: outputs, lse and gradients, on the fixed grids."""

import pytest

from properties import ORACLE_CHECKS
from properties.grids import cpu_cases, gpu_cases
from tests.helpers import case_params, run_check

CHECKS = [pytest.param(check, id=check.__name__) for check in ORACLE_CHECKS]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(cpu_cases()))
def test_matches_oracle(kernel, check, case):
    run_check(check, kernel, case)


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(gpu_cases(), gpu=True))
def test_matches_oracle_gpu(kernel, check, case):
    run_check(check, kernel, case)
