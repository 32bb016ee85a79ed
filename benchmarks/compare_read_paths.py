"""The forward's two read paths at d = 128, 16-bit, on a GPU: how ``forward_config``'s tensor-descriptor
row was chosen (docs/speed.md, "Tensor descriptors").

    PYTHONPATH=. python3 -m benchmarks.compare_read_paths

For each shape (MHA and GQA 8:1, bf16 and fp16, causal or not) it times, with
``triton.testing.do_bench`` (medians, one run): the pointer path with its 128x64 tiles, the pointer
path with 128x128 tiles, and the default (tensor descriptors, 128x128 tiles), against SDPA's cuDNN
backend in the same run. TFLOP/s count the causal half only.
"""

from __future__ import annotations

import functools
import sys

import torch

SHAPES = [  # batch, query heads, kv heads, length, head dim, dtype
    (4, 16, 16, 4096, 128, torch.bfloat16), (4, 16, 16, 4096, 128, torch.float16),
    (4, 32, 4, 4096, 128, torch.bfloat16), (16, 16, 16, 1024, 128, torch.bfloat16),
]


def main() -> int:
    if not torch.cuda.is_available():
        print("compare_read_paths needs a CUDA GPU", file=sys.stderr)
        return 2
    import torch.nn.functional as fn
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flash
    import flash.forward as forward
    from flash import replay

    default_config, default_tma = forward.forward_config, forward.TMA

    def bench(call) -> float:
        return triton.testing.do_bench(call, warmup=50, rep=300)

    paths = (("pointers 128x64", False, None), ("pointers 128x128", False, (128, 128, 8, 3)),
             ("descriptors 128x128 (default)", True, None))
    for b, h, h_kv, n, d, dtype in SHAPES:
        for causal in (False, True):
            q = torch.randn(b, h, n, d, device="cuda", dtype=dtype)
            k, v = (torch.randn(b, h_kv, n, d, device="cuda", dtype=dtype) for _ in range(2))
            flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                cudnn = bench(functools.partial(fn.scaled_dot_product_attention, q, k, v,
                                                is_causal=causal, enable_gqa=h_kv != h))
            cells = []
            for name, tma, tiles in paths:
                forward.TMA = tma
                if tiles is not None:
                    forward.forward_config = lambda *_, tiles=tiles: forward.ForwardConfig(*tiles)
                replay.forget()  # a recorded launch would keep the previous path
                try:
                    ms = bench(functools.partial(flash.attention, q, k, v, causal))
                    cells.append(f"{name} {flops / ms * 1e-9:.0f} (x{cudnn / ms:.2f} cuDNN)")
                except Exception as e:  # noqa: BLE001  (a path that does not compile is reported)
                    cells.append(f"{name} failed: {type(e).__name__}")
                finally:
                    forward.forward_config, forward.TMA = default_config, default_tma
            print(f"{str(dtype)[6:]} b={b} h={h}/{h_kv} n={n} d={d} causal={causal}: "
                  f"cuDNN {flops / cudnn * 1e-9:.0f} | " + " | ".join(cells), flush=True)
    replay.forget()
    return 0


if __name__ == "__main__":
    sys.exit(main())
