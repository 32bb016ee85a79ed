"""The kernel under test against every check, on the grids of the contract's features.

Every case uses at least one feature, so a module that declares none is n/a here,
with the reason; a module that declares them (``flash``, ``oracle.adapters.mock``, ``.dense``, ``.flex``, the
SDPA backends for what they take) is held to every check. bfloat16 is on the GPU grid only: the
Triton interpreter's bfloat16 ``tl.dot`` returns garbage.
"""

import pytest

from properties import ALL_CHECKS, BAND_EDGE_CHECKS
from properties.grids import band_edge_cpu_cases, band_edge_gpu_cases, feature_cpu_cases, feature_gpu_cases
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


EDGE_CHECKS = [pytest.param(check, id=check.__name__) for check in BAND_EDGE_CHECKS]


@pytest.mark.parametrize("check", EDGE_CHECKS)
@pytest.mark.parametrize("case", case_params(band_edge_cpu_cases()))
def test_band_edge_case(kernel, check, case):
    """A band's edges one or two keys either side of a tile boundary: the checks that see a key
    shown or hidden wrongly (the oracle's, and hidden keys perturbed)."""
    run_check(check, kernel, case)


@pytest.mark.parametrize("check", EDGE_CHECKS)
@pytest.mark.parametrize("case", case_params(band_edge_gpu_cases(), gpu=True))
def test_band_edge_case_gpu(kernel, check, case):
    run_check(check, kernel, case)
