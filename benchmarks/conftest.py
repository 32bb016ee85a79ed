"""pytest setup of the speed benchmarks: which kernel, which grid, which backends, where results go.

Options (all benchmarks are ``gpu``-marked; without CUDA they skip, with the root conftest's reason):

- ``--bench-kernel MODULE`` (or ``FLASH_BENCH_KERNEL``; default ``flash``): the kernel module
  timed as backend ``kernel``. The module is not part of any benchmark's name, so a run of
  ``--bench-kernel benchmarks.slowed`` is compared, name by name, with a baseline of ``flash``.
- ``--bench-grid quick|targets|full`` (or ``FLASH_BENCH_GRID``; default ``quick``): the quick grid
  is the gate's (24 shapes; everything in 150 s of pytest on an H100, measured 2026-11-29);
  ``targets`` is issue #16's, the quick grid with n = 1023 and 4097 beside 1024 and 4096 (40
  shapes; :mod:`benchmarks.report_speed` judges it); ``full`` adds lengths 1023, 2048, 4097, 8192
  and 4x the batch (112 shapes, several times longer). The decode benchmarks
  (``test_decode_speed.py``) have the same four shapes in every grid.
- ``--bench-backends a,b``: only these backends (default: all); the gate runs
  ``kernel,sdpa_flash``.

Results go to pytest-benchmark's storage, ``benchmarks/results`` unless ``--benchmark-storage``
says otherwise (``--benchmark-autosave`` / ``--benchmark-save NAME`` to write there). Each run's
machine info also records the GPU, the CUDA, torch and triton versions and the grid; the kernel
module is in each kernel benchmark's ``extra_info``.

``--bench-allow-cpu`` (hidden, for developing these files without a GPU) runs tiny float32 shapes
on the CPU, the kernel in Triton's interpreter: it checks the plumbing, and its times mean nothing.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
from pathlib import Path

import pytest
import torch

from benchmarks.backends import ATTENTION_BACKENDS, BASELINE_BACKENDS
from benchmarks.features import FEATURE_BACKENDS
from benchmarks.harness import Settings, grid_name, split_names
from benchmarks.shapes import GRIDS
from properties.kernels import DEFAULT_KERNEL, load_kernel

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
_PYTEST_BENCHMARK_DEFAULT_STORAGE = "file://./.benchmarks"
_ROOT_SKIP_REASON = "needs a CUDA GPU"
KNOWN_BACKENDS = tuple(dict.fromkeys(ATTENTION_BACKENDS + BASELINE_BACKENDS + FEATURE_BACKENDS))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flash speed benchmarks (benchmarks/)")
    group.addoption(
        "--bench-kernel",
        default=os.environ.get("FLASH_BENCH_KERNEL", DEFAULT_KERNEL),
        help="kernel module timed as backend 'kernel' (default: $FLASH_BENCH_KERNEL, else 'flash'); "
        "benchmarks.slowed is the deliberately slowed one that shows the gate works",
    )
    group.addoption(
        "--bench-grid",
        default=os.environ.get("FLASH_BENCH_GRID", "quick"),
        choices=GRIDS,
        help="shapes to benchmark: 'quick' (the gate's, default: $FLASH_BENCH_GRID, else quick), "
             "'targets' (issue #16's: the quick grid with n = 1023 and 4097) or 'full'",
    )
    group.addoption(
        "--bench-backends",
        default=None,
        help="comma-separated backends to run (default: all): " + ", ".join(KNOWN_BACKENDS),
    )
    group.addoption("--bench-allow-cpu", action="store_true", default=False, help=argparse.SUPPRESS)


def pytest_configure(config: pytest.Config) -> None:
    # pytest-benchmark reads its storage in its own (trylast) pytest_configure, after this one.
    if getattr(config.option, "benchmark_storage", None) == _PYTEST_BENCHMARK_DEFAULT_STORAGE:
        config.option.benchmark_storage = f"file://{RESULTS}"
    chosen = config.getoption("--bench-backends")
    if chosen:
        unknown = set(split_names(chosen)) - set(KNOWN_BACKENDS)
        if unknown:
            raise pytest.UsageError(f"--bench-backends: unknown backend(s) {sorted(unknown)}; known: "
                                    f"{', '.join(KNOWN_BACKENDS)}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    grid = grid_name(config)
    return [f"benchmarked kernel: {config.getoption('--bench-kernel')}; grid: {grid}; "
            f"storage: {getattr(config.option, 'benchmark_storage', '?')}"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # --bench-allow-cpu: undo the root conftest's "needs a CUDA GPU" skip, for benchmarks only.
    if not config.getoption("--bench-allow-cpu"):
        return
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.own_markers[:] = [
                m for m in item.own_markers
                if not (m.name == "skip" and str(m.kwargs.get("reason", "")).startswith(_ROOT_SKIP_REASON))
            ]


@pytest.fixture(scope="session")
def settings(request: pytest.FixtureRequest) -> Settings:
    """Device, kernel module and timing sizes of this run."""
    config = request.config
    kernel = load_kernel(config.getoption("--bench-kernel"))
    if config.getoption("--bench-allow-cpu") and not torch.cuda.is_available():
        return Settings(torch.device("cpu"), kernel, round_seconds=0.001, rounds_seconds=0.0,
                        min_rounds=2, max_rounds=2)
    return Settings(torch.device("cuda"), kernel)


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    # Called as early as pytest_configure when --benchmark-compare is given: importing triton
    # here, before flash._runtime has set TRITON_INTERPRET on a CPU machine, would build
    # triton.language for the compiler instead of the interpreter. Ask the metadata instead.
    machine_info["flash_bench"] = {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": _version("triton"),
        "grid": grid_name(config),
    }


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
