"""Forward+backward of ``flash``: the Triton backward vs the compiled dense backward vs SDPA's flash backend.

Run on a CUDA GPU from the repository root::

    PYTHONPATH=. python3 benchmarks/bench_backward.py

It prints, from this one run, at bfloat16 and head dim 128, batch 1:

1. peak memory (``torch.cuda.max_memory_allocated`` after a reset, with q, k, v and the upstream
   gradient already allocated) of one forward+backward, at n = 4096 and 16384, for the three
   backends; the total peak, the part above the inputs, and the total as a ratio to SDPA flash's;
2. forward+backward time (``triton.testing.do_bench``, median) at n = 1024, 4096 and 16384, causal
   and not, as ratios to SDPA flash's time measured in the same run (> 1: slower than SDPA).

The dense backward materializes four float32 ``n x n`` matrices per head; where it runs out of
memory the table says ``OOM``. Heads: :data:`HEADS` (16), and 4 at n = 16384 as well, where the
dense backward fits. It makes no assertions; the numbers are for the closing note of issue 5.
"""

from __future__ import annotations

import functools
import sys

import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

import flash

DTYPE = torch.bfloat16
HEAD_DIM = 128
HEADS = 16
MEMORY_SHAPES = ((4096, HEADS), (16384, HEADS), (16384, 4))  # (n, heads), batch 1
TIME_SHAPES = ((1024, HEADS), (4096, HEADS), (16384, 4))


def sdpa_flash(q, k, v, is_causal):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


BACKENDS = {
    "triton backward": lambda q, k, v, c: flash.attention(q, k, v, c),
    "dense backward": lambda q, k, v, c: flash.attention(q, k, v, c, backward="dense"),
    "sdpa flash": sdpa_flash,
}


def inputs(n: int, heads: int):
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn((1, heads, n, HEAD_DIM), generator=gen, device="cuda", dtype=DTYPE)
                   for _ in range(4))
    return [t.requires_grad_() for t in (q, k, v)], do


def step(fn, q, k, v, do, is_causal):
    """One forward+backward; gradients go to ``.grad`` (cleared by the caller)."""
    fn(q, k, v, is_causal).backward(do)


def free():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def peak_memory(fn, n: int, heads: int, is_causal: bool) -> tuple[int, int] | None:
    """(total peak, peak above the inputs) in bytes of one forward+backward, or None on OOM."""
    try:
        (q, k, v), do = inputs(n, heads)
        step(fn, q, k, v, do, is_causal)  # compile and warm up outside the measurement
        for t in (q, k, v):
            t.grad = None
        free()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(fn, q, k, v, do, is_causal)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        return peak, peak - base
    except torch.OutOfMemoryError:
        return None
    finally:
        q = k = v = do = None
        free()


def fwd_bwd_ms(fn, n: int, heads: int, is_causal: bool) -> float | None:
    try:
        (q, k, v), do = inputs(n, heads)
        run = functools.partial(step, fn, q, k, v, do, is_causal)
        return triton.testing.do_bench(run, warmup=25, rep=100, grad_to_none=[q, k, v], return_mode="median")
    except torch.OutOfMemoryError:
        return None
    finally:
        q = k = v = do = run = None
        free()


def gib(x: int) -> str:
    return f"{x / 2**30:8.3f} GiB"


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}")
    print(f"dtype bfloat16, head dim {HEAD_DIM}, batch 1; flash backward config at d={HEAD_DIM}: "
          f"{flash.backward_config(HEAD_DIM, DTYPE)}")

    print("\n== peak memory of one forward+backward (non-causal; inputs q, k, v, do included) ==")
    print(f"{'n':>6} {'heads':>5}  {'backend':<16} {'peak':>12} {'above inputs':>14}  {'vs sdpa':>8}")
    for n, heads in MEMORY_SHAPES:
        results = {name: peak_memory(fn, n, heads, False) for name, fn in BACKENDS.items()}
        sdpa = results["sdpa flash"]
        for name, r in results.items():
            if r is None:
                print(f"{n:>6} {heads:>5}  {name:<16} {'OOM':>12}")
                continue
            ratio = f"{r[0] / sdpa[0]:7.2f}x" if sdpa else "     n/a"
            print(f"{n:>6} {heads:>5}  {name:<16} {gib(r[0])} {gib(r[1]):>14}  {ratio}")

    print("\n== forward+backward time, as a ratio to sdpa flash in this run (> 1: slower) ==")
    print(f"{'n':>6} {'heads':>5} {'causal':>6}  {'sdpa ms':>9}  {'triton bwd':>10}  {'dense bwd':>10}")
    for (n, heads), is_causal in [(s, c) for s in TIME_SHAPES for c in (False, True)]:
        ms = {name: fwd_bwd_ms(fn, n, heads, is_causal) for name, fn in BACKENDS.items()}
        sdpa = ms["sdpa flash"]

        def ratio(name, ms=ms, sdpa=sdpa):
            t = ms[name]
            return "OOM" if t is None else f"{t / sdpa:.2f}x ({t:.2f} ms)"

        print(f"{n:>6} {heads:>5} {is_causal!s:>6}  {sdpa:9.3f}  {ratio('triton backward'):>10}  "
              f"{ratio('dense backward'):>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
