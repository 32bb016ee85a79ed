"""The kernel under test against every check, on the grids of the contract's features.

Every case uses at least one feature, so a module that declares none is n/a here,
with the reason; a module that declares them (``flash``, ``oracle.adapters.mock``, ``.dense``, ``.flex``, the
SDPA backends for what they take) is held to every check. bfloat16 is on the GPU grid only: the
Triton interpreter's bfloat16 ``tl.dot`` returns garbage.
"""

import pytest

from properties import ALL_CHECKS
from properties.grids import feature_cpu_cases, feature_gpu_cases
from tests.helpers import case_params, run_check

CHECKS = [pytest.param(check, id=check.__name__) for check in ALL_CHECKS]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(feature_cpu_cases()))
def test_feature_case(kernel, check, case):
    run_check(check, kernel, case)


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(feature_gpu_cases(), gpu=True))
def test_feature_case_gpu(kernel, check, case):
    run_check(check, kernel, case)
