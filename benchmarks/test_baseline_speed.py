"""Entry point 2: plain PyTorch attention, eagerly and under ``torch.compile``.

The baseline a Triton kernel is trying to beat: ``softmax(q k^T / sqrt(d)) v`` written out in
PyTorch in the inputs' dtype (:func:`benchmarks.backends.plain_attention`, the oracle's formula),
as ``torch_eager`` and as ``torch_compile`` (``torch.compile(dynamic=True)``: one compilation per
dtype, mask and grad mode serves every shape; its compilation happens in the warm-up, outside the
measurement). Forward and forward+backward, on the quick grid's bfloat16 shapes (all of the full
grid with ``--bench-grid full``). Its groups are the same as ``test_attention_speed.py``'s, so a
run of both shows each shape's six backends together.

    PYTHONPATH=. python3 -m pytest benchmarks/test_baseline_speed.py -m gpu --benchmark-autosave

Shapes whose ``n x n`` matrices do not fit in memory skip and say so. Nothing here asserts a time.
"""

import pytest

from benchmarks.backends import BASELINE_BACKENDS
from benchmarks.harness import grid_name, parametrize, run
from benchmarks.shapes import baseline_grid

pytestmark = pytest.mark.gpu


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "shape" in metafunc.fixturenames:
        parametrize(metafunc, baseline_grid(grid_name(metafunc.config)), BASELINE_BACKENDS)


def test_forward(benchmark, settings, shape, backend):
    run(benchmark, settings, shape, backend, "fwd")


def test_forward_backward(benchmark, settings, shape, backend):
    run(benchmark, settings, shape, backend, "fwd+bwd")
