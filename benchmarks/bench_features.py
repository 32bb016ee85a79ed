"""Entry point 3: the contract's features (issue #15) against FlexAttention, SDPA and our own calls.

The cases and their backends are :mod:`benchmarks.features`'s: GQA 8:1 prefill (causal and not),
a 1024-key window at n = 16384 and softcap 30 at n = 16384, at bf16 and fp16, d = 64 and 128,
forward and forward+backward. Each benchmark is timed by :func:`benchmarks.harness.time_step`
(``benchmark.pedantic``, synchronized rounds, the first calls untimed: Triton's and
``torch.compile``'s compilation, FlexAttention's included, happen there), with the backend's
function and FlexAttention's block mask built before any timing. ``extra_info`` holds the scenario,
backend, pass, case, FLOPs of the visible pairs and TFLOP/s; ``group`` is the case and pass.

This file is not named ``test_*.py`` on purpose: ``pytest benchmarks -m gpu`` (the speed gate's
``record`` and "everything") does not collect it, so the gate's baseline and its run time stay as
they were; name it to run it::

    PYTHONPATH=. python3 -m pytest benchmarks/bench_features.py -m gpu --benchmark-json=features.json
    python -m benchmarks.report_features features.json

or ``benchmarks/features.sh OUTDIR``, which does both. Where SDPA refuses a case (cuDNN and GQA,
say) that benchmark skips and quotes why. Nothing here asserts a time.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

import pytest
import torch

from benchmarks.features import BACKENDS, Case, build, case_by_id, cases, flops, variants
from benchmarks.harness import (
    Settings,
    device_name,
    grid_name,
    record_median,
    skip_if_refused,
    split_names,
    time_step,
)
from benchmarks.shapes import Pass

pytestmark = pytest.mark.gpu


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    chosen = metafunc.config.getoption("--bench-backends")
    keep = set(split_names(chosen)) if chosen else None
    metafunc.parametrize(("case", "backend"), [
        pytest.param(c.id, b, id=f"{c.id}-{b}")
        for c in cases(grid_name(metafunc.config)) for b in BACKENDS[c.scenario] if keep is None or b in keep
    ])


def test_forward(benchmark, settings, case, backend, pytestconfig):
    run(benchmark, settings, case, backend, "fwd", command(pytestconfig))


def test_forward_backward(benchmark, settings, case, backend, pytestconfig):
    run(benchmark, settings, case, backend, "fwd+bwd", command(pytestconfig))


def command(config: pytest.Config) -> str:
    """The pytest command line of this run, for the report's header. Kept in each benchmark's
    ``extra_info``, not the machine info, which the speed gate's compare-fail run also writes."""
    return shlex.join(["pytest", *config.invocation_params.args])


def make_step(fn, case: Case, kv_heads: int, pass_: Pass, device: torch.device) -> Callable[[], object]:
    """One call of ``fn`` on random inputs of ``case`` (made once, k and v with ``kv_heads`` heads)."""
    gen = torch.Generator(device=device).manual_seed(0)

    def randn(heads):
        return torch.randn((case.batch, heads, case.seq_len, case.head_dim), generator=gen, device=device,
                           dtype=case.torch_dtype)

    q, k, v = randn(case.heads), randn(kv_heads), randn(kv_heads)
    if pass_ == "fwd":
        return lambda: fn(q, k, v)
    do = randn(case.heads)
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    return lambda: torch.autograd.grad(fn(q, k, v), (q, k, v), do)


def run(benchmark, settings: Settings, case_id: str, backend: str, pass_: Pass, command: str = "?") -> None:
    """Benchmark one backend of one case (a :attr:`Case.id`) and pass; record it and its TFLOP/s."""
    case = case_by_id(case_id)
    variant = variants(case)[backend]
    call = variant.call
    benchmark.group = case.group(pass_)
    info = benchmark.extra_info
    info.update({"scenario": case.scenario, "case": case.id, "title": case.title, "backend": backend,
                 "engine": variant.engine, "pass": pass_, "dtype": case.dtype, "head_dim": case.head_dim,
                 "seq_len": case.seq_len, "batch": case.batch, "heads": case.heads,
                 "kv_heads": variant.kv_heads, "causal": call.is_causal, "window": call.window,
                 "softcap": call.softcap, "flops": flops(case, call, pass_),
                 "device": device_name(settings.device), "command": command})
    if variant.engine == "flex" and pass_ == "fwd+bwd" and settings.device.type == "cpu":
        pytest.skip("flex_attention has no backward on the CPU (torch raises NotImplementedError)")

    step = built = None
    try:
        built = build(variant, case, settings.kernel, settings.device)  # block masks: before any timing
        info.update(built.info)
        with built.context():
            step = make_step(built.fn, case, variant.kv_heads, pass_, settings.device)
            with skip_if_refused(variant.engine, case, pass_):
                step()  # the first call compiles
            info.update(time_step(benchmark, step, settings))
    finally:
        step = built = None
        if settings.device.type == "cuda":
            torch.cuda.empty_cache()

    record_median(benchmark, info)
