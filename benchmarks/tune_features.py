"""Forward tiles for the features on a GPU: how ``forward_config``'s softcap and window rows are chosen
(docs/speed.md, "Tiles for the features").

    PYTHONPATH=. python3 -m benchmarks.tune_features

``benchmarks.tune`` sweeps plain attention; a softcap (its tanh makes the scores' arithmetic the
bound) and a narrow window (a program's query rows span more of the band than one row does) move
the best tiles. For b=1, h=16, n=16384, causal, bf16, d = 128 and 64, it times the forward
(``flash_attention_forward``, replay off, ``triton.testing.do_bench`` medians, one run) with the
default tiles and each candidate, with softcap 30 and with the window (1023, 0), and the same call
without the feature for scale. A candidate that does not compile (ptxas has crashed on some) is
reported as such; each call reads k and v as its layout allows (descriptors where
``tma_eligible``), and ``forward_config``'s tiles are the same on either read path.
"""

from __future__ import annotations

import functools
import sys

import torch

CANDIDATES = (  # block_q, block_k, num_warps, num_stages
    (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (64, 64, 4, 2), (64, 32, 4, 3),
    (64, 128, 4, 3), (128, 32, 4, 3),
)
FEATURES = (("none", {}), ("softcap 30", {"softcap": 30.0}), ("window (1023, 0)", {"window": (1023, 0)}))


def main() -> int:
    if not torch.cuda.is_available():
        print("tune_features needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton

    from flash import replay
    from flash.forward import flash_attention_forward

    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}")
    torch.manual_seed(0)
    for d in (128, 64):
        q, k, v = (torch.randn(1, 16, 16384, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for name, options in FEATURES:
            for tiles in (None, *CANDIDATES):
                launch = {} if tiles is None else dict(zip(("block_q", "block_k", "num_warps", "num_stages"),
                                                           tiles))

                call = functools.partial(flash_attention_forward, q, k, v, True, **options, **launch)

                label = f"d={d} {name:16s} {'default' if tiles is None else str(tiles):18s}"
                try:
                    with replay.disabled():
                        call()
                        torch.cuda.synchronize()
                        ms = triton.testing.do_bench(call, warmup=30, rep=200)
                except Exception as error:  # a candidate that does not compile or launch
                    print(f"{label} failed: {type(error).__name__}: {str(error)[:120]}", flush=True)
                    continue
                print(f"{label} {ms:8.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
