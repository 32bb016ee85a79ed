"""How one speed benchmark runs: inputs, warm-up, GPU timing with pytest-benchmark, TFLOP/s.

Timing (``benchmark.pedantic``, not ``triton.testing.do_bench``): CUDA calls are asynchronous, so
a timer around a call measures its launch, not its work. Each pytest-benchmark *round* is
``calls`` back-to-back calls of the step followed by one ``torch.cuda.synchronize()``: the
target counts its calls and synchronizes on every ``calls``-th, and ``pedantic`` is asked for
``iterations=calls``, so each round's wall time (``time.perf_counter``) spans exactly the launch
of its first call to the completion of its last, and pytest-benchmark divides it by ``calls``.
Stats are therefore per call, and the launch overhead of one call is hidden behind the GPU work
of the others, as in a real training step; the one synchronization per round costs well under 1%
of a round (``calls`` is chosen so a round lasts at least :data:`ROUND_SECONDS`).

Warm-up: the first call runs untimed (Triton compiles, ``torch.compile`` traces and compiles the
forward and, in its first backward, the backward; cuDNN builds its plan; a backend that cannot run
the shape says so here and the benchmark skips), a second untimed call sizes the rounds, and
``pedantic`` runs one untimed warm-up round before the :data:`MIN_ROUNDS` to :data:`MAX_ROUNDS`
timed ones. Inputs are allocated once per benchmark (seeded); L2 is not flushed between calls
(q, k, v are re-read by every call, as in a model).

Forward+backward steps call ``torch.autograd.grad(o, (q, k, v), do)``, so no gradient
accumulates in ``.grad`` between calls.

Nothing here asserts a time: the gate is ``--benchmark-compare-fail`` and ``benchmarks/gate.py``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import pytest
import torch

from benchmarks.backends import DENSE_BACKENDS, SDPA_BACKENDS, dense_memory_reason, get_backend
from benchmarks.shapes import DecodeShape, Pass, Shape

ROUND_SECONDS = 0.010
"""Shortest round: calls per round are chosen so that a round lasts at least this long."""
MAX_CALLS = 1000
ROUNDS_SECONDS = 0.15
"""Timed rounds per benchmark: as many as fit in this many seconds, within the bounds below."""
MIN_ROUNDS, MAX_ROUNDS = 5, 10


@dataclass(frozen=True)
class Settings:
    """Everything a benchmark needs besides its shape: device, kernel module, timing sizes."""

    device: torch.device
    kernel: ModuleType
    round_seconds: float = ROUND_SECONDS
    rounds_seconds: float = ROUNDS_SECONDS
    min_rounds: int = MIN_ROUNDS
    max_rounds: int = MAX_ROUNDS

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


# -- collection --

def grid_name(config: pytest.Config) -> str:
    """The grid of this session: ``--bench-grid``, or ``cpu`` under ``--bench-allow-cpu``."""
    return "cpu" if config.getoption("--bench-allow-cpu") else config.getoption("--bench-grid")


def split_names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parametrize(metafunc: pytest.Metafunc, shapes: list[Shape], backends: tuple[str, ...]) -> None:
    """Parametrize ``shape`` (a :attr:`Shape.id`) and ``backend``, one shape's backends together.

    Names are ``test_forward[bf16-d64-n1024-b16-h32-full-kernel]``: shape, then backend; the
    saved JSON's ``params`` are those two strings. Backends of a shape run one after the other,
    seconds apart, so their ratios see the same GPU state. ``--bench-backends`` keeps some.
    """
    chosen = metafunc.config.getoption("--bench-backends")
    if chosen:
        backends = tuple(b for b in backends if b in split_names(chosen))
    metafunc.parametrize(
        ("shape", "backend"), [pytest.param(s.id, b, id=f"{s.id}-{b}") for s in shapes for b in backends]
    )


# -- one benchmark --

def make_step(fn, shape: Shape, pass_: Pass, device: torch.device) -> Callable[[], object]:
    """One call of ``fn`` on random inputs of ``shape`` (made once): forward, or forward+backward."""
    gen = torch.Generator(device=device).manual_seed(0)
    dims = (shape.batch, shape.heads, shape.seq_len, shape.head_dim)

    def randn():
        return torch.randn(dims, generator=gen, device=device, dtype=shape.torch_dtype)

    q, k, v = randn(), randn(), randn()
    if pass_ == "fwd":
        return lambda: fn(q, k, v, shape.causal)
    do = randn()
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()

    def forward_backward():
        return torch.autograd.grad(fn(q, k, v, shape.causal), (q, k, v), do)

    return forward_backward


def time_step(benchmark, step: Callable[[], object], settings: Settings) -> dict:
    """Time a warmed-up ``step`` with ``benchmark.pedantic`` (see the module docstring)."""
    settings.synchronize()
    start = time.perf_counter()
    step()
    settings.synchronize()
    single = max(time.perf_counter() - start, 1e-9)
    calls = max(1, min(MAX_CALLS, math.ceil(settings.round_seconds / single)))
    rounds = int(settings.rounds_seconds / (calls * single))
    rounds = max(settings.min_rounds, min(settings.max_rounds, rounds))
    counter = itertools.count(1)

    def target():
        step()
        if next(counter) % calls == 0:  # the last call of a round: wait for the GPU to finish
            settings.synchronize()

    benchmark.pedantic(target, iterations=calls, rounds=rounds, warmup_rounds=1)
    settings.synchronize()
    return {"calls_per_round": calls, "rounds": rounds}


def run(benchmark, settings: Settings, shape_id: str, backend_name: str, pass_: Pass) -> None:
    """Benchmark one backend on one shape (a :attr:`Shape.id`) and pass; record it and its TFLOP/s."""
    shape = Shape.parse(shape_id)
    benchmark.group = shape.group(pass_)
    info = benchmark.extra_info
    info.update({"backend": backend_name, "pass": pass_, "dtype": shape.dtype, "head_dim": shape.head_dim,
                 "seq_len": shape.seq_len, "batch": shape.batch, "heads": shape.heads,
                 "causal": shape.causal, "flops": shape.flops(pass_), "device": device_name(settings.device)})
    if backend_name == "kernel":
        info["kernel_module"] = settings.kernel.__name__

    if backend_name == "flex" and pass_ == "fwd+bwd" and settings.device.type == "cpu":
        pytest.skip("flex_attention has no backward on the CPU (torch raises NotImplementedError)")
    backend = get_backend(backend_name, settings.kernel)
    if backend_name in DENSE_BACKENDS and settings.device.type == "cuda":
        torch.cuda.empty_cache()
        reason = dense_memory_reason(shape, pass_, torch.cuda.mem_get_info(settings.device)[0])
        if reason:
            pytest.skip(reason)

    try:
        with backend.context(), _skip_if_out_of_memory(backend_name, shape, pass_):
            step = make_step(backend.fn, shape, pass_, settings.device)
            with skip_if_refused(backend_name, shape, pass_):
                step()  # the first call compiles
            info.update(time_step(benchmark, step, settings))
    finally:
        step = None
        if settings.device.type == "cuda":
            torch.cuda.empty_cache()

    record_median(benchmark, info)


def run_decode(benchmark, settings: Settings, shape_id: str, backend_name: str) -> None:
    """Benchmark one backend on one decode step (a :attr:`DecodeShape.id`); record its median time
    and the KV cache's read bandwidth (``kv_bytes`` over the median, TB/s) in ``extra_info``.
    ``extra_info["kind"] == "decode"`` keeps it out of the attention grid's readers
    (:mod:`benchmarks.runs`)."""
    shape = DecodeShape.parse(shape_id)
    benchmark.group = shape.group()
    info = benchmark.extra_info
    info.update({"kind": "decode", "backend": backend_name, "dtype": shape.dtype,
                 "head_dim": shape.head_dim, "n_q": 1, "n_k": shape.n_k, "batch": shape.batch,
                 "heads": shape.heads, "kv_heads": shape.kv_heads, "kv_bytes": shape.kv_bytes,
                 "device": device_name(settings.device)})
    if backend_name == "kernel":
        info["kernel_module"] = settings.kernel.__name__
    backend = get_backend(backend_name, settings.kernel)
    gen = torch.Generator(device=settings.device).manual_seed(0)

    def randn(heads: int, n: int) -> torch.Tensor:
        return torch.randn((shape.batch, heads, n, shape.head_dim), generator=gen, device=settings.device,
                           dtype=shape.torch_dtype)

    q, k, v = randn(shape.heads, 1), randn(shape.kv_heads, shape.n_k), randn(shape.kv_heads, shape.n_k)
    try:
        with backend.context():
            def step():
                return backend.fn(q, k, v, False)

            with skip_if_refused(backend_name, shape, "fwd"):
                step()  # the first call compiles
            info.update(time_step(benchmark, step, settings))
    finally:
        q = k = v = None
        if settings.device.type == "cuda":
            torch.cuda.empty_cache()
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        info["median_ms"] = stats.stats.median * 1e3
        info["kv_tbps"] = shape.kv_bytes / stats.stats.median / 1e12


def record_median(benchmark, info: dict) -> None:
    """Put the median time (ms) and its TFLOP/s (from ``info["flops"]``) into ``info``, when the
    benchmark has stats (it has none under ``--benchmark-disable``)."""
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        median = stats.stats.median
        info["median_ms"] = median * 1e3
        info["tflops"] = info["flops"] / median / 1e12


@contextlib.contextmanager
def _skip_if_out_of_memory(backend_name: str, shape: Shape, pass_: Pass):
    """A dense backend that runs out of device memory skips and says so; the others fail."""
    try:
        yield
    except torch.OutOfMemoryError as error:
        if backend_name not in DENSE_BACKENDS:
            raise
        pytest.skip(f"{backend_name} ran out of device memory at {shape.id} {pass_}: {_first_line(error)}")


@contextlib.contextmanager
def skip_if_refused(backend_name: str, shape, pass_: Pass):
    """An SDPA backend that refuses a shape or dtype skips, quoting why; anything else still fails.
    (``shape``: anything with an ``id``, a :class:`Shape` or a :class:`benchmarks.features.Case`.)

    SDPA held to one backend raises ``RuntimeError`` ("No available kernel") after warnings that
    say why that backend could not run; the skip reason carries them.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except torch.OutOfMemoryError:
            raise
        except RuntimeError as error:
            if backend_name not in SDPA_BACKENDS:
                raise
            why = "; ".join(_first_line(w.message) for w in caught)
            pytest.skip(f"{backend_name} cannot run {shape.id} {pass_}: {_first_line(error)}"
                        + (f" ({why})" if why else ""))
    for w in caught:  # warnings of a call that went through are shown as usual
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _first_line(error: BaseException | Warning) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
