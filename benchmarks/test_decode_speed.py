"""Entry point 3: decoding, one query row per head over a long KV cache (issue #16's decode step).

For each decode shape (:func:`benchmarks.shapes.decode_grid`: b=8, h_q=32, h_kv=8, d=128, bfloat16,
4k to 128k keys, in every grid), the backends ``kernel`` (``flash.attention`` as a caller gets it:
GQA in place, the split-KV path when the call qualifies), ``sdpa_flash`` and ``sdpa_cudnn``
(``enable_gqa=True``) and ``flex`` (compiled, ``enable_gqa=True``, no mask) run one after the
other, each timed by :func:`benchmarks.harness.run_decode` (back-to-back calls, as a decoding loop
without CUDA graphs makes them: the host's time per call counts where it exceeds the GPU's).
``extra_info`` holds the shape, the bytes of k and v a call reads, and that read's bandwidth
(``kv_tbps``, from the median time).

    PYTHONPATH=. python3 -m pytest benchmarks/test_decode_speed.py -m gpu --benchmark-json=decode.json
    python -m benchmarks.report_speed decode.json

``benchmarks/bench_decode.py`` is the same step as a script (``do_bench``, more backends: the
split lengths, the host time a replay saves, a device copy for scale). Nothing here asserts a time.
"""

import pytest

from benchmarks.harness import grid_name, run_decode, split_names
from benchmarks.shapes import decode_grid

pytestmark = pytest.mark.gpu

DECODE_BACKENDS = ("kernel", "sdpa_flash", "sdpa_cudnn", "flex")
"""Backends of the decode benchmarks, in the order they run for each shape."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "decode_shape" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("--bench-backends")
        backends = [b for b in DECODE_BACKENDS if not chosen or b in split_names(chosen)]
        shapes = decode_grid(grid_name(metafunc.config))
        metafunc.parametrize(("decode_shape", "backend"),
                             [pytest.param(s.id, b, id=f"{s.id}-{b}") for s in shapes for b in backends])


def test_decode(benchmark, settings, decode_shape, backend):
    run_decode(benchmark, settings, decode_shape, backend)
