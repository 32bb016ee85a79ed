"""What a softcap costs per score, counted in the machine code: no GPU needed.

    python -m benchmarks.score_sass                  # sm_90 (H100/H200), d = 64 and 128
    python -m benchmarks.score_sass --arch 100 --head-dims 128

Compiles, offline with Triton's own ``ptxas`` (``triton.compile`` with an explicit target), one
tile step of flash's forward and one of its backward, each with ``flash.scores.scores`` (the
kernels' own score function) for three score variants: no softcap; flash's softcap (its float32
``tanh``, :func:`flash.scores.tanh`); and, for comparison only, the GPU's one-instruction
``tanh.approx.f32`` (FlashAttention-2's softcap; the suite refuses it under the contract, see
``flash.scores.scores``). It disassembles each with Triton's ``nvdisasm`` and counts the
instructions of the units that run the per-score math:

- ``MUFU``: the special-function unit (``exp2``, reciprocal, ``tanh.approx``). On Hopper it
  retires 16 results per clock per SM, against 128 float32 FMA-pipe results and 4096 dense
  16-bit tensor-core FLOPs (989 TFLOP/s against 3.9 TFLOP/s of special functions on an H100
  SXM5, FlashAttention-3's paper, section 3.1);
- the float32 pipe (``FFMA``, ``FMUL``, ``FADD``, ``FMNMX``, ``FSEL``, ``FSETP``).

Each count is divided by the scores a thread holds (``BLOCK_M * BLOCK_N / (32 * num_warps)``), so
it reads "instructions per score"; the tile's fixed work (addresses, loads, the store) is in every
variant alike, so the differences between rows are the softcap's. The last columns turn them into
a lower bound on SM clocks per score (``MUFU / 16``, ``FP32 / 128``) beside the tensor cores'
for the products around it (``4 d / 4096``: the forward's two; ``8 d / 4096``: the four of flash's
dk/dv kernel, whose dq kernel repeats the step with three): a step whose bound exceeds the
products' cannot hide behind them. Counts, not times: the times are in docs/speed.md's feature benchmarks.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys

os.environ["TRITON_INTERPRET"] = "0"  # compile, never interpret (nothing is launched), before flash

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.tools.disasm import get_sass  # noqa: E402

from flash.scores import scores  # noqa: E402

FP32_PIPE = ("FFMA", "FMUL", "FADD", "FMNMX", "FSEL", "FSETP")
VARIANTS = {0: "no softcap", 1: "softcap: flash's tanh", 2: "softcap: tanh.approx.f32"}


@triton.jit
def _scores_tanh_approx(q, kt, qk_scale, cap_log2):
    s = tl.dot(q, kt)
    t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [s * qk_scale],
                                  dtype=tl.float32, is_pure=True, pack=1)
    return t * cap_log2, t


@triton.jit
def _tile_step(Q, K, DP, OUT, qk_scale, cap_log2, VARIANT: tl.constexpr, BACKWARD: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """One query tile against one key tile: the forward's ``p = exp2(s - rowmax)``, or the
    backward's ``ds = p (dp - delta)`` (times ``1 - t^2`` with a softcap), from the scores."""
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_D)
    q = tl.load(Q + rows[:, None] * BLOCK_D + dims[None, :])
    kt = tl.load(K + cols[None, :] * BLOCK_D + dims[:, None])
    if VARIANT == 2:
        s, t = _scores_tanh_approx(q, kt, qk_scale, cap_log2)
    elif BACKWARD:  # as the backward kernels: the product fused into s - lse
        s, t = scores(q, kt, qk_scale, cap_log2, VARIANT == 1, "tf32", ROUNDED=False)
    else:
        s, t = scores(q, kt, qk_scale, cap_log2, VARIANT == 1, "tf32")
    tile = rows[:, None] * BLOCK_N + cols[None, :]
    if BACKWARD:
        lse = tl.load(DP + rows)  # stand-ins for the saved lse and delta
        p = tl.exp2(s - lse[:, None])
        ds = p * (tl.load(DP + tile) - lse[:, None])
        if VARIANT != 0:
            ds = ds * (1.0 - t * t)
        tl.store(OUT + tile, ds.to(tl.bfloat16))
    else:
        p = tl.exp2(s - tl.max(s, 1)[:, None])
        tl.store(OUT + tile, p.to(tl.bfloat16))


def count(arch: int, variant: int, backward: bool, block_m: int, block_n: int, block_d: int,
          num_warps: int) -> collections.Counter:
    """SASS opcodes of one compiled tile step, with their counts (per thread)."""
    signature = {"Q": "*bf16", "K": "*bf16", "DP": "*fp32", "OUT": "*bf16", "qk_scale": "fp32",
                 "cap_log2": "fp32", "VARIANT": "constexpr", "BACKWARD": "constexpr",
                 "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_D": "constexpr"}
    constexprs = {"VARIANT": variant, "BACKWARD": backward, "BLOCK_M": block_m, "BLOCK_N": block_n,
                  "BLOCK_D": block_d}
    src = triton.compiler.ASTSource(fn=_tile_step, signature=signature, constexprs=constexprs)
    compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps})
    ops: collections.Counter = collections.Counter()
    for line in get_sass(compiled.asm["cubin"]).splitlines():
        # nvdisasm's lines: "<control>\t[@predicate ]OPCODE[.modifiers] operands;"
        match = re.match(r"[-0-9A-Fa-fY:]+:\d+\t(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
        if match:
            ops[match.group(1)] += 1
    return ops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10 (default 90)")
    parser.add_argument("--head-dims", default="64,128", help="comma-separated (default 64,128)")
    args = parser.parse_args(argv)
    head_dims = [int(d) for d in args.head_dims.split(",")]
    block_m, block_n, num_warps = 128, 64, 4
    per_thread = block_m * block_n / (32 * num_warps)
    print(f"sm_{args.arch}, Triton {triton.__version__}; a {block_m}x{block_n} tile, {num_warps} warps "
          f"({per_thread:g} scores per thread); instructions per score\n")
    print("| pass | d | scores | MUFU | FP32 pipe | all | clk/score: MUFU / 16 | FP32 / 128 "
          "| products / 4096 |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for backward in (False, True):
        for block_d in head_dims:
            products = 8 if backward else 4  # FLOPs per score / d: 2 (fwd) or 4 (dk/dv kernel) products
            for variant, name in VARIANTS.items():
                ops = count(args.arch, variant, backward, block_m, block_n, block_d, num_warps)
                mufu = ops["MUFU"] / per_thread
                fp32 = sum(ops[op] for op in FP32_PIPE) / per_thread
                every = sum(ops.values()) / per_thread
                print(f"| {'bwd' if backward else 'fwd'} | {block_d} | {name} | {mufu:.2f} | {fp32:.2f} | "
                      f"{every:.1f} | {mufu / 16:.3f} | {fp32 / 128:.3f} | {products * block_d / 4096:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
