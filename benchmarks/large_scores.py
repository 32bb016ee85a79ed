"""Attention at very large scores, and what turning off Triton's FP fusion would cost: finding 20's data.

    PYTHONPATH=. python3 -m benchmarks.large_scores                   # on a CUDA GPU
    PYTHONPATH=. python3 -m benchmarks.large_scores --no-fp-fusion    # the same, fusion off

On a GPU, flash's forward gives NaN past scaled scores of about 1.5e9 because the compiler fuses
``s * scale - m`` into one FMA (docs/findings.md, finding 20). Before the contract states a bound
or the kernel changes, two tables per run:

- *accuracy*: for each largest scaled score ``M`` (1e5 .. 1e10), float32 and bfloat16, the worst
  error of each implementation against the float64 oracle on the same (rounded) inputs, as a
  fraction of ``max |v|`` (``nan`` when any output is not finite): flash, SDPA's flash, cuDNN and
  efficient backends, and FlexAttention (compiled). Inputs: one batch, 2 heads, n = 512, d = 64,
  causal; q and k standard normal, then q multiplied so that the largest scaled score of the
  float64 product is ``M``;
- *speed*: flash's and SDPA cuDNN's forward and forward+backward, bf16, timed with
  ``triton.testing.do_bench`` (medians, ms), and flash's time as a multiple of cuDNN's.

``--no-fp-fusion`` sets ``TRITON_DEFAULT_FP_FUSION=0`` before anything compiles, so every Triton
kernel of the process (flash's, FlexAttention's) is built with ``enable_fp_fusion=False``. It must
be a separate process: Triton's in-memory kernel cache is keyed on a launch's explicit options, not
on that default, so flipping it inside a process would keep running the kernels already built.
Compare the two runs through the ratio to cuDNN (timings drift between runs; ratios less).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
from collections.abc import Callable

import torch

MAGNITUDES = (1e5, 1e6, 1e7, 1e8, 1e9, 3e9, 1e10)
SPEED_SHAPES = ((4, 16, 4096, 64, True), (4, 16, 4096, 128, True), (4, 16, 4096, 128, False))
"""batch, heads, n, head dim, causal (bf16)."""


def inputs_at(magnitude: float, dtype: torch.dtype, device: str, seed: int = 0) -> tuple:
    """``(q, k, v)`` in ``dtype``, ``[1, 2, 512, 64]``, whose largest scaled score is about ``magnitude``."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, 512, 64, generator=gen, dtype=torch.float64) for _ in range(3))
    peak = (q @ k.transpose(-2, -1)).abs().max().item() / math.sqrt(64)
    q = q * (magnitude / peak)
    return tuple(t.to(dtype).to(device) for t in (q, k, v))


def worst_error(out: torch.Tensor, reference: torch.Tensor, v: torch.Tensor) -> float:
    """``max |out - reference| / max |v|``; ``nan`` when ``out`` has a non-finite element."""
    out = out.double()
    if not torch.isfinite(out).all():
        return math.nan
    return ((out - reference).abs().max() / v.double().abs().max()).item()


def sdpa(backend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> torch.Tensor:
    """``scaled_dot_product_attention`` held to one of its backends (``SDPBackend``)."""
    import torch.nn.functional as fn
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(backend):
        return fn.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


def implementations(device: str) -> dict[str, Callable]:
    """Each implementation by its column name: ``fn(q, k, v) -> o``, causal."""
    from torch.nn.attention import SDPBackend
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    import flash

    def held(backend):
        return functools.partial(sdpa, backend, is_causal=True)

    flex = torch.compile(flex_attention, dynamic=False)
    mask = create_block_mask(lambda b, h, i, j: j <= i, 1, 2, 512, 512, device=device)
    return {"flash": lambda q, k, v: flash.attention(q, k, v, is_causal=True),
            "sdpa flash": held(SDPBackend.FLASH_ATTENTION), "sdpa cudnn": held(SDPBackend.CUDNN_ATTENTION),
            "sdpa efficient": held(SDPBackend.EFFICIENT_ATTENTION),
            "flex": lambda q, k, v: flex(q, k, v, block_mask=mask)}


def accuracy(device: str) -> None:
    from oracle.dense import dense_attention

    impls = implementations(device)
    print("| dtype | largest score | " + " | ".join(impls) + " |")
    print("| --- | ---: |" + " ---: |" * len(impls))
    for dtype in (torch.float32, torch.bfloat16):
        for magnitude in MAGNITUDES:
            q, k, v = inputs_at(magnitude, dtype, device)
            reference, _ = dense_attention(q.cpu(), k.cpu(), v.cpu(), True)
            cells = []
            for call in impls.values():
                try:
                    cells.append(f"{worst_error(call(q, k, v).cpu(), reference, v):.2e}")
                except Exception as error:  # a backend that refuses this dtype, or fails to compile
                    cells.append(f"{type(error).__name__}: " + str(error).splitlines()[0][:40])
            print(f"| {str(dtype).removeprefix('torch.')} | {magnitude:.0e} | " + " | ".join(cells) + " |")


def speed(device: str) -> None:
    import triton
    from torch.nn.attention import SDPBackend

    import flash

    def milliseconds(attend, q, k, v, grad, backward: bool) -> float:
        def step():
            o = attend(q, k, v)
            return torch.autograd.grad(o, (q, k, v), grad) if backward else o
        return triton.testing.do_bench(step, warmup=25, rep=200)

    print("| shape (b, h, n, d, causal), bf16 | pass | flash, ms | cuDNN, ms | flash / cuDNN |")
    print("| --- | --- | ---: | ---: | ---: |")
    for b, h, n, d, causal in SPEED_SHAPES:
        q, k, v = (torch.randn(b, h, n, d, device=device, dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        grad = torch.randn_like(q)
        ours = functools.partial(flash.attention, is_causal=causal)
        theirs = functools.partial(sdpa, SDPBackend.CUDNN_ATTENTION, is_causal=causal)
        for name, backward in (("forward", False), ("forward+backward", True)):
            times = [milliseconds(attend, q, k, v, grad, backward) for attend in (ours, theirs)]
            print(f"| {(b, h, n, d, causal)} | {name} | {times[0]:.3f} | {times[1]:.3f} | "
                  f"{times[0] / times[1]:.3f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("accuracy", "speed", "both"), default="both")
    parser.add_argument("--no-fp-fusion", dest="fp_fusion", action="store_false",
                        help="compile every Triton kernel with enable_fp_fusion=False")
    args = parser.parse_args(argv)
    if not args.fp_fusion:
        os.environ["TRITON_DEFAULT_FP_FUSION"] = "0"  # read by Triton at each compile
    if not torch.cuda.is_available():
        print("large_scores needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton {triton.__version__}, "
          f"FP fusion {'on' if triton.knobs.language.default_fp_fusion else 'off'}")
    if args.part in ("accuracy", "both"):
        accuracy("cuda")
    if args.part in ("speed", "both"):
        speed("cuda")
    return 0


if __name__ == "__main__":
    sys.exit(main())
