"""Decoding speed: one query row per head over a long KV cache, as KV-cache read bandwidth, on a GPU.

Run from the repository root::

    PYTHONPATH=. python3 benchmarks/bench_decode.py [--batch 8] [--heads 32] [--kv-heads 8]
        [--head-dim 128] [--dtype bfloat16] [--n-k 4096 16384 32768 131072] [--n-q 1]

Decoding reads the whole cache once per generated token, so its speed is the bandwidth at which
it reads k and v: ``2 * batch * kv_heads * n_k * d * itemsize`` bytes over the median time
(``triton.testing.do_bench``, all backends in one run, so ratios compare like with like). Backends:

- ``kernel``: ``flash.attention`` as a caller gets it (GQA in place; the split-KV path,
  :mod:`flash.decode`, when the call qualifies);
- ``kernel_split<N>``: the same with ``split_keys=N`` (``0``: the one-program-per-query-tile forward);
- ``kernel_full``: ``kernel`` with :mod:`flash.replay` off, so that every call runs its checks,
  tables and Triton's launcher in full (the host time a replay saves);
- ``sdpa_flash``, ``sdpa_cudnn``: SDPA held to one backend, ``enable_gqa=True``;
- ``flex``: ``torch.compile(flex_attention)``, ``enable_gqa=True``, no mask (compiled outside
  the timing);
- ``copy``: ``torch.Tensor.copy_`` of k and v into preallocated tensors, the device's read
  bandwidth for scale (it also writes as much as it reads: its figure counts the reads only).

No causal mask: one row at the end of the cache sees every key (bottom-right alignment, which is
what decoding means by causal, hides nothing). It prints TB/s per backend and ``kernel`` over
``sdpa_cudnn`` (issue #16 asks >= 0.9 at n_k >= 32768 and >= 0.8 at 4096). No assertions.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
import triton.testing

import flash
from flash import replay


def backends(split_keys: list[int]) -> dict:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import flex_attention

    flex = torch.compile(flex_attention, dynamic=False)

    def sdpa(which):
        def run(q, k, v):
            with sdpa_kernel(which):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return run

    out = {"kernel": lambda q, k, v: flash.attention(q, k, v)}

    def full(q, k, v):
        with replay.disabled():
            return flash.attention(q, k, v)

    out["kernel_full"] = full
    for n in split_keys:
        out[f"kernel_split{n}"] = lambda q, k, v, n=n: flash.attention(q, k, v, split_keys=n)
    out["sdpa_flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
    out["sdpa_cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
    out["flex"] = lambda q, k, v: flex(q, k, v, enable_gqa=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--n-q", type=int, default=1)
    parser.add_argument("--n-k", type=int, nargs="+", default=[4096, 16384, 32768, 131072])
    parser.add_argument("--split-keys", type=int, nargs="*", default=[0, 512, 1024, 2048])
    parser.add_argument("--dtype", default="bfloat16", choices=("float16", "bfloat16"))
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    b, h, h_kv, d = args.batch, args.heads, args.kv_heads, args.head_dim
    fns = backends(args.split_keys)
    print(f"decode: b={b}, h_q={h}, h_kv={h_kv}, d={d}, n_q={args.n_q}, {args.dtype}, "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    names = list(fns) + ["copy"]
    print(f"KV read bandwidth, TB/s\n{'n_k':>7}" + "".join(f"{n:>16}" for n in names)
          + f"{'kernel/cudnn':>14}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for n_k in args.n_k:
        q = torch.randn((b, h, args.n_q, d), generator=gen, device="cuda", dtype=dtype)
        k, v = (torch.randn((b, h_kv, n_k, d), generator=gen, device="cuda", dtype=dtype)
                for _ in range(2))
        read = 2 * k.numel() * k.element_size()
        speeds = {}
        for name, fn in fns.items():
            try:
                with torch.no_grad():
                    fn(q, k, v)  # compiles (flex, Triton) outside the timing
                    ms = triton.testing.do_bench(lambda fn=fn, q=q, k=k, v=v: fn(q, k, v),
                                                 warmup=25, rep=200)
                speeds[name] = read / (ms * 1e-3) / 1e12
            except RuntimeError as error:  # a backend that refuses the shape
                speeds[name] = float("nan")
                print(f"  {name}: {str(error).splitlines()[0][:100]}")
        k2, v2 = torch.empty_like(k), torch.empty_like(v)
        ms = triton.testing.do_bench(lambda k=k, v=v, k2=k2, v2=v2: (k2.copy_(k), v2.copy_(v)),
                                     warmup=25, rep=200)
        speeds["copy"] = read / (ms * 1e-3) / 1e12
        ratio = speeds["kernel"] / speeds["sdpa_cudnn"]
        print(f"{n_k:>7}" + "".join(f"{speeds[n]:>16.2f}" for n in names) + f"{ratio:>14.2f}")


if __name__ == "__main__":
    main()
