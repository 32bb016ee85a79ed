"""Suite-wide pytest setup: the kernel under test, the ``gpu`` marker, and Hypothesis profiles.

- ``--kernel MODULE`` (or ``FLASH_KERNEL=MODULE``) picks the kernel module every correctness test
  runs against; the default is ``flash``.
- ``gpu``-marked tests need CUDA and are skipped, with that reason, on a machine without it.
  ``pytest -m gpu`` runs only them.
- Hypothesis profiles ``dev`` (default), ``ci`` (default when ``CI`` is set), ``nightly`` and
  ``gpu`` live in :mod:`fuzz.profiles`, shared with ``python -m fuzz``; all save to one example
  database, ``$FLASH_HYPOTHESIS_DB`` (default ``.hypothesis/examples``), so failures found anywhere
  can be replayed from a copy of it. ``--hypothesis-profile P`` picks another.
- In Triton's interpreter (the CPU), each launch's programs run in a fixed shuffled order, as a GPU
  may run them in any (:mod:`properties.program_order`: a store outside a program's own rows
  shows); ``--program-order launch`` (or ``FLASH_PROGRAM_ORDER=launch``) keeps the interpreter's
  0, 1, 2, ... for debugging.
- Under pytest-xdist, each worker runs on one GPU of several (``-n 16`` on 8 GPUs: two per card);
  ``--max-workers-per-gpu K`` (or ``FLASH_WORKERS_PER_GPU=K``) caps them; see :mod:`fuzz.gpus`.
- A test whose call runs the GPU out of memory is run again alone on the card, and the terminal
  summary lists it (:mod:`fuzz.out_of_memory`): beside other workers that says nothing about the
  kernel; alone, it fails as it should.
"""

from __future__ import annotations

import os

import pytest
import torch

from fuzz import gpus, profiles
from properties import program_order
from properties.kernels import DEFAULT_KERNEL, load_kernel

gpus.pin_xdist_worker()  # first, before anything here touches CUDA
# Then where the Triton kernels run (TRITON_INTERPRET=1 without CUDA), before any test module
# imports torch._dynamo (the flex adapter does): importing Dynamo first imports Triton in a way
# that makes the interpreted flash kernels fail ("Cannot call @triton.jit'd outside of the scope
# of a kernel"), as `pytest tests/test_adapters.py tests/test_properties.py` showed on the CPU.
import flash._runtime  # noqa: E402,F401

profiles.load()

# A test that runs the GPU out of memory runs again alone on the card (a pytest plugin).
pytest_plugins = ("fuzz.out_of_memory",)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kernel",
        default=os.environ.get("FLASH_KERNEL", DEFAULT_KERNEL),
        help="kernel module under test (default: $FLASH_KERNEL, else 'flash'); any importable "
        "module with attention(q, k, v, is_causal) and optionally attention_with_lse",
    )
    parser.addoption(
        "--max-workers-per-gpu", metavar="K", type=gpus.parse_cap, default=os.environ.get(gpus.CAP_ENV),
        help=f"refuse -n above K xdist workers per visible GPU (default: ${gpus.CAP_ENV}, else no cap)",
    )
    parser.addoption(
        "--program-order", choices=program_order.ORDERS,
        default=os.environ.get(program_order.ENV, "shuffled"),
        help="in Triton's interpreter, the order of a launch's programs (default shuffled, as a GPU "
        "may run them; launch: 0, 1, 2, ...)",
    )
    parser.addoption(
        "--large", action="store_true",
        help="also run the `large` tests: calls past 2^31 elements, 34 GiB of GPU memory each "
        "(tests/test_large_offsets.py); off by default, as other processes on the card could run out",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Hypothesis' plugin has loaded --hypothesis-profile by now; record it (fuzz.profiles fixes
    # the seed of fuzz tests under `ci`) and check that it is one of ours.
    chosen = config.getoption("hypothesis_profile", default=None)
    if chosen:
        profiles.load(chosen)
    # Through the environment, so that every process the suite starts (fuzz workers) inherits it;
    # installed here as well as by load_kernel, for the tests that call flash without loading it.
    os.environ[program_order.ENV] = config.getoption("--program-order")
    program_order.install()
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; `pytest -m gpu` runs only these")
    config.addinivalue_line("markers", "large: needs tens of GiB of GPU memory; runs only with --large")
    # -n is a number by now (pytest-xdist resolved `auto`), and None inside a worker.
    problem = gpus.too_many_workers(config.getoption("numprocesses", None),
                                    config.getoption("--max-workers-per-gpu"))
    if problem:
        raise pytest.UsageError(problem)


def pytest_report_header(config: pytest.Config) -> list[str]:
    import flash

    where = "Triton interpreter on CPU" if flash.INTERPRET else torch.cuda.get_device_name()
    if flash.INTERPRET:
        where += f", programs in {config.getoption('--program-order')} order"
    return [f"kernel under test: {config.getoption('--kernel')} ({where})"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The mock is judged against the dense oracle before anything is judged against the mock.
    items.sort(key=lambda item: 0 if item.path.name == "test_oracle.py" else 1)
    if not torch.cuda.is_available():
        _skip_marked(items, "gpu", "needs a CUDA GPU (gpu marker)")
    if not config.getoption("--large"):
        _skip_marked(items, "large", "a `large` test (tens of GiB of GPU memory): run with --large")


@pytest.hookimpl(trylast=True)  # after the fixtures' teardown: what they held is free by now
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # Workers sharing a GPU must not each keep their largest test's memory cached (fuzz.gpus). Not
    # in a single process (the benchmarks): there the cache is no one else's loss.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        gpus.release_cached_memory()


def _skip_marked(items: list[pytest.Item], marker: str, reason: str) -> None:
    # By the marker, not `marker in item.keywords`: keywords hold parameter ids too, so a test
    # parametrized with an id "gpu" (a fuzz size, say) would be skipped as if it needed CUDA.
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker(marker) is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kernel(request: pytest.FixtureRequest):
    """The kernel module under test (``--kernel`` / ``FLASH_KERNEL``)."""
    return load_kernel(request.config.getoption("--kernel"))
