"""Packed (varlen) attention against the same sequences padded to the longest, on a CUDA GPU.

Run from the repository root::

    PYTHONPATH=. python3 benchmarks/bench_varlen.py [--sequences 64] [--max-len 4096]

It draws ``--sequences`` lengths from 1 to ``--max-len`` (seeded: log-uniform, so short and long
sequences both occur, with one sequence of exactly ``--max-len``), packs them, and times with
``triton.testing.do_bench`` (median, in one run):

- ``flash.attention_varlen`` on the packed batch (forward, and forward+backward), and
- ``flash.attention`` on the batch padded to the longest length, ``[batch, heads, max_len, d]``:
  the cost a caller without a varlen path pays. (Its padded rows are wasted work, and without a
  key-padding mask its real rows would also see the padding keys: the padded call is timed for
  its cost, not its values.)

It prints both times, their ratio (varlen / padded: below 1 is faster), and the useful work as
TFLOP/s (FLOPs of the real sequences only: ``4 * heads * d * sum(n_q * n_k)``, halved when
causal; forward+backward counts 3.5x the forward). No assertions: the numbers are for issue 6.
"""

from __future__ import annotations

import argparse
import math

import torch
import triton.testing

import flash


def draw_lengths(count: int, max_len: int, seed: int) -> list[int]:
    """``count`` lengths in ``[1, max_len]``, log-uniform, the first one exactly ``max_len``."""
    gen = torch.Generator().manual_seed(seed)
    logs = torch.rand(count - 1, generator=gen) * math.log(max_len)
    return [max_len] + [max(1, min(max_len, int(math.exp(x)))) for x in logs.tolist()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=64)
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--dtype", default="bfloat16", choices=("float16", "bfloat16"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    heads, d = args.heads, args.head_dim
    lengths = draw_lengths(args.sequences, args.max_len, args.seed)
    total = sum(lengths)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    q, k, v, do = (torch.randn((total, heads, d), generator=gen, device="cuda", dtype=dtype)
                   for _ in range(4))
    padded = [torch.zeros((len(lengths), heads, args.max_len, d), device="cuda", dtype=dtype)
              for _ in range(4)]
    for b, (start, n) in enumerate(zip(cu.tolist(), lengths)):
        for src, dst in zip((q, k, v, do), padded):
            dst[b, :, :n] = src[start:start + n].transpose(0, 1)
    print(f"{len(lengths)} sequences, lengths 1..{args.max_len} (min {min(lengths)}, median "
          f"{sorted(lengths)[len(lengths) // 2]}, total {total}; padded total "
          f"{len(lengths) * args.max_len}), heads {heads}, d {d}, {args.dtype}, "
          f"{torch.cuda.get_device_name()}")
    print(f"{'pass':<18}{'causal':<8}{'varlen ms':>10}{'padded ms':>11}{'ratio':>7}{'varlen TFLOP/s':>16}")
    for is_causal in (False, True):
        useful = 4 * heads * d * sum(n * n for n in lengths) * (0.5 if is_causal else 1.0)
        for name, factor in (("forward", 1.0), ("forward+backward", 3.5)):
            fns = {}
            for label, tensors, call in (
                ("varlen", (q, k, v, do), lambda a, b_, c, causal=is_causal: flash.attention_varlen(
                    a, b_, c, cu, cu, args.max_len, args.max_len, causal)),
                ("padded", padded, lambda a, b_, c, causal=is_causal: flash.attention(a, b_, c, causal)),
            ):
                leaves = [t.detach().requires_grad_(factor > 1) for t in tensors[:3]]
                grad = tensors[3]
                if factor > 1:
                    def step(call=call, leaves=leaves, grad=grad):
                        torch.autograd.grad(call(*leaves), leaves, grad)
                else:
                    def step(call=call, leaves=leaves):
                        with torch.no_grad():
                            call(*leaves)
                fns[label] = triton.testing.do_bench(step, warmup=50, rep=300)
            tflops = useful * factor / (fns["varlen"] * 1e-3) / 1e12
            print(f"{name:<18}{str(is_causal):<8}{fns['varlen']:>10.3f}{fns['padded']:>11.3f}"
                  f"{fns['varlen'] / fns['padded']:>7.2f}{tflops:>16.1f}")


if __name__ == "__main__":
    main()
