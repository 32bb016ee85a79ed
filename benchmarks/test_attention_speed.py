"""Entry point 1: the kernel against the baselines, forward and forward+backward, in one run.

For each shape of the grid (dtype x head dim x sequence length x batch, causal and not; see
:mod:`benchmarks.shapes`), the backends ``kernel`` (``--bench-kernel``, default ``flash``),
``sdpa_flash`` and ``sdpa_cudnn`` (PyTorch's ``scaled_dot_product_attention`` held to its
FlashAttention and cuDNN backends) and ``dense`` (the oracle's formula in the inputs' dtype) run
one after the other, each timed by :func:`benchmarks.harness.run` (``benchmark.pedantic``,
synchronized rounds; see there). ``extra_info`` holds the shape, the backend, the FLOPs and the
TFLOP/s; ``group`` puts one shape's backends together in pytest-benchmark's table.

    PYTHONPATH=. python3 -m pytest benchmarks/test_attention_speed.py -m gpu --benchmark-autosave
    python -m benchmarks.report benchmarks/results/<machine>/<NNNN>_*.json

Where ``dense`` cannot fit its ``n x n`` matrices in memory, or an SDPA backend refuses a shape,
that benchmark skips and says why. Nothing here asserts a time.
"""

import pytest

from benchmarks.backends import ATTENTION_BACKENDS
from benchmarks.harness import grid_name, parametrize, run
from benchmarks.shapes import attention_grid

pytestmark = pytest.mark.gpu


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "shape" in metafunc.fixturenames:
        parametrize(metafunc, attention_grid(grid_name(metafunc.config)), ATTENTION_BACKENDS)


def test_forward(benchmark, settings, shape, backend):
    run(benchmark, settings, shape, backend, "fwd")


def test_forward_backward(benchmark, settings, shape, backend):
    run(benchmark, settings, shape, backend, "fwd+bwd")
