"""Sweep the kernel's launch parameters on a GPU: how the tables in ``forward_config`` and
``backward_config`` were chosen, and how to choose them again on another GPU or Triton.

    PYTHONPATH=. python3 -m benchmarks.tune --json tune.json            # the quick grid's shapes
    PYTHONPATH=. python3 -m benchmarks.tune --pass fwd -k bf16-d128     # a subset

For each shape of the benchmark grid (:mod:`benchmarks.shapes`) it times the forward with each
candidate :class:`~flash.forward.ForwardConfig` and the backward (the three backward kernels,
given the forward's saved tensors) with each candidate :class:`~flash.backward_triton.BackwardConfig`,
with ``triton.testing.do_bench`` (median of repeated calls, L2 not flushed, as in a model), and
SDPA's FlashAttention and cuDNN backends in the same run for scale. A candidate that does not
fit (too much shared memory) is reported as such. Every candidate's output is compared with the
default configuration's (a tuning run must not pick a configuration that computes something
else; the test suite, not this tool, is what says a configuration is right).

Offline on purpose: the tables are constants in the code, so a call never pays for tuning, and
the same inputs always run the same tiles (a property the determinism check relies on).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time

import torch

from benchmarks.shapes import Shape, attention_grid

FORWARD_CANDIDATES = (
    # block_q, block_k, num_warps, num_stages
    (64, 64, 4, 2),
    (64, 64, 4, 3),
    (128, 64, 4, 3),
    (128, 64, 8, 3),
    (128, 128, 8, 2),
    (128, 128, 8, 3),
    (128, 32, 4, 3),
    (64, 128, 4, 3),
)
BACKWARD_CANDIDATES = (
    # block_q_dkdv, block_k_dkdv, block_q_dq, block_k_dq, num_warps, num_stages
    (32, 64, 64, 32, 4, 2),
    (32, 64, 64, 32, 4, 3),
    (32, 128, 128, 32, 8, 2),
    (32, 128, 128, 32, 8, 3),
    (64, 128, 128, 64, 8, 2),
    (64, 64, 64, 64, 4, 2),
    (64, 64, 64, 64, 8, 2),
    (64, 64, 64, 64, 4, 3),
    (32, 128, 128, 32, 4, 3),
    (64, 128, 64, 64, 8, 2),
)


def _inputs(shape: Shape, device: torch.device):
    gen = torch.Generator(device=device).manual_seed(0)
    dims = (shape.batch, shape.heads, shape.seq_len, shape.head_dim)
    return [torch.randn(dims, generator=gen, device=device, dtype=shape.torch_dtype) for _ in range(4)]


def _time(fn) -> float:
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def _sdpa_forward_backward(q, k, v, do, causal):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return torch.autograd.grad(o, (q, k, v), do)


def _try(fn):
    """``(result, None)`` or ``(None, reason)`` when the configuration cannot run (out of resources)."""
    try:
        return fn(), None
    except Exception as error:  # noqa: BLE001 - any compile or launch failure disqualifies a candidate
        return None, f"{type(error).__name__}: {str(error).splitlines()[0][:120] if str(error) else ''}"


def tune_shape(shape: Shape, passes: set[str]) -> dict:
    """Times (ms) of every candidate and of SDPA for one shape."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from flash.backward_triton import BackwardConfig, flash_attention_backward
    from flash.forward import flash_attention_forward

    device = torch.device("cuda")
    q, k, v, do = _inputs(shape, device)
    causal = shape.causal
    result: dict = {"shape": shape.id, "fwd_flops": shape.flops("fwd"), "fwd": {}, "bwd": {}, "sdpa": {}}
    f = torch.nn.functional.scaled_dot_product_attention
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        with sdpa_kernel(backend):
            ms, why = _try(functools.partial(_time, functools.partial(f, q, k, v, is_causal=causal)))
            result["sdpa"][f"{name}_fwd"] = ms if why is None else why
            if "bwd" in passes:
                fwd_bwd = functools.partial(_sdpa_forward_backward, q, k, v, do, causal)
                ms, why = _try(functools.partial(_time, fwd_bwd))
                result["sdpa"][f"{name}_fwd+bwd"] = ms if why is None else why

    o_ref, lse_ref = flash_attention_forward(q, k, v, causal)
    if "fwd" in passes:
        for cand in FORWARD_CANDIDATES:
            bq, bk, w, st = cand
            run = functools.partial(flash_attention_forward, q, k, v, causal, block_q=bq, block_k=bk,
                                    num_warps=w, num_stages=st)
            out, why = _try(run)
            if why is None:
                diff = (out[0].float() - o_ref.float()).abs().max().item()
                ms = _time(run)
                result["fwd"][str(cand)] = {"ms": ms, "max_diff_vs_default": diff,
                                            "tflops": shape.flops("fwd") / ms / 1e9}
            else:
                result["fwd"][str(cand)] = {"error": why}
    if "bwd" in passes:
        ref = flash_attention_backward(q, k, v, o_ref, lse_ref, do, causal)
        for cand in BACKWARD_CANDIDATES:
            run = functools.partial(flash_attention_backward, q, k, v, o_ref, lse_ref, do, causal,
                                    config=BackwardConfig(*cand))
            out, why = _try(run)
            if why is None:
                diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(out, ref))
                ms = _time(run)
                result["bwd"][str(cand)] = {"ms": ms, "max_diff_vs_default": diff,
                                            "tflops": 2.5 * shape.flops("fwd") / ms / 1e9}
            else:
                result["bwd"][str(cand)] = {"error": why}
    return result


def _summary(result: dict) -> str:
    lines = [f"== {result['shape']}"]
    sdpa = result["sdpa"]
    flops = result["fwd_flops"]
    for key, ms in sdpa.items():
        mult = 3.5 if "bwd" in key else 1.0
        lines.append(f"   sdpa {key:14s} " + (f"{ms:8.3f} ms {mult * flops / ms / 1e9:6.0f} TFLOP/s"
                                                if isinstance(ms, float) else ms))
    for pass_ in ("fwd", "bwd"):
        rows = [(c, r) for c, r in result[pass_].items()]
        ok = sorted((r["ms"], c) for c, r in rows if "ms" in r)
        for c, r in rows:
            mark = " <- best" if ok and c == ok[0][1] else ""
            text = (f"{r['ms']:8.3f} ms {r['tflops']:6.0f} TFLOP/s diff {r['max_diff_vs_default']:.1e}"
                    if "ms" in r else r["error"])
            lines.append(f"   {pass_} {c:28s} {text}{mark}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tune", description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write every measurement to this file (rewritten after each shape)")
    parser.add_argument("--pass", dest="passes", choices=("fwd", "bwd", "both"), default="both")
    parser.add_argument("-k", dest="select", default="", help="only shapes whose id contains this")
    parser.add_argument("--budget", type=float, default=math.inf, help="stop after this many seconds")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks.tune needs a CUDA GPU", file=sys.stderr)
        return 2
    passes = {"fwd", "bwd"} if args.passes == "both" else {args.passes}
    start, results = time.monotonic(), []
    for shape in attention_grid("quick"):
        if args.select not in shape.id:
            continue
        if time.monotonic() - start > args.budget:
            print(f"budget of {args.budget:.0f} s spent; stopping", flush=True)
            break
        results.append(tune_shape(shape, passes))
        print(_summary(results[-1]), flush=True)
        if args.json:
            with open(args.json, "w") as file:
                json.dump({"device": torch.cuda.get_device_name(), "results": results}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
