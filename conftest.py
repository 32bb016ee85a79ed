"""Suite-wide pytest setup: the kernel under test, the ``gpu`` marker, and Hypothesis profiles.

- ``--kernel MODULE`` (or ``FLASH_KERNEL=MODULE``) picks the kernel module every correctness test
  runs against; the default is ``flash``.
- ``gpu``-marked tests need CUDA and are skipped, with that reason, on a machine without it.
  ``pytest -m gpu`` runs only them.
- Hypothesis profiles ``dev`` (default), ``ci`` (default when ``CI`` is set), ``nightly`` and
  ``gpu`` all save to one example database, ``$FLASH_HYPOTHESIS_DB`` (default
  ``.hypothesis/examples``), so failures found anywhere can be replayed from a copy of it.
  Hypothesis' own ``ci`` profile saves nothing; ours replaces it.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from properties.kernels import DEFAULT_KERNEL, load_kernel

HYPOTHESIS_DB = os.environ.get("FLASH_HYPOTHESIS_DB", os.path.join(".hypothesis", "examples"))

_database = DirectoryBasedExampleDatabase(HYPOTHESIS_DB)
_slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("dev", database=_database, max_examples=10, deadline=None,
                          suppress_health_check=_slow_ok)
settings.register_profile("ci", database=_database, deadline=None,
                          max_examples=25, suppress_health_check=_slow_ok, print_blob=True)
settings.register_profile("nightly", database=_database, max_examples=500, deadline=None,
                          suppress_health_check=_slow_ok, print_blob=True)
settings.register_profile("gpu", database=_database, max_examples=100, deadline=None,
                          suppress_health_check=_slow_ok, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kernel",
        default=os.environ.get("FLASH_KERNEL", DEFAULT_KERNEL),
        help="kernel module under test (default: $FLASH_KERNEL, else 'flash'); any importable "
        "module with attention(q, k, v, is_causal) and optionally attention_with_lse",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; `pytest -m gpu` runs only these")


def pytest_report_header(config: pytest.Config) -> list[str]:
    import flash

    where = "Triton interpreter on CPU" if flash.INTERPRET else torch.cuda.get_device_name()
    return [f"kernel under test: {config.getoption('--kernel')} ({where})"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The mock is judged against the dense oracle before anything is judged against the mock.
    items.sort(key=lambda item: 0 if item.path.name == "test_oracle.py" else 1)
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (gpu marker)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def kernel(request: pytest.FixtureRequest):
    """The kernel module under test (``--kernel`` / ``FLASH_KERNEL``)."""
    return load_kernel(request.config.getoption("--kernel"))
