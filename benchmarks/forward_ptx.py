"""Where each ``exp2`` of flash's forward gets its argument, read from the PTX: no GPU needed.

    python -m benchmarks.forward_ptx                                  # finding 20's call
    python -m benchmarks.forward_ptx --dtype bfloat16 --head-dim 128 --no-causal --ptx /tmp/f.ptx

Builds one dense forward call's launch exactly as ``flash.forward.launch_forward`` does (on CPU
tensors of the given shape; nothing runs), compiles ``_flash_forward_kernel`` with those
arguments for an NVIDIA target (``triton.compile`` with an explicit target, Triton's own LLVM),
and prints, for each ``ex2`` instruction, the instruction that computes its argument, by source
line. ``fma.rn.f32`` there means the compiler fused ``s * qk_scale - m`` into one FMA whose product
is not rounded, while the row max ``m`` was taken over the rounded ``s``: the row's largest key
then gets ``exp2`` of its score's rounding error, not ``exp2(0)`` (docs/findings.md, finding 20:
NaN past scores of about 1.5e9). ``sub.f32`` means a rounded score minus ``m``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys

os.environ["TRITON_INTERPRET"] = "0"  # compile, never interpret (nothing is launched), before flash

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402

from flash import forward, replay  # noqa: E402
from flash.scores import resolve  # noqa: E402

_POINTER = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32",
            torch.int64: "*i64", torch.int32: "*i32"}


def launch_arguments(n_q: int, n_k: int, d: int, dtype: torch.dtype, is_causal: bool) -> tuple:
    """``(kernel, args, meta)`` of the forward launch for one ``[n, d]`` slice, as flash builds it."""
    q = torch.zeros(n_q, d, dtype=dtype)
    k = v = torch.zeros(n_k, d, dtype=dtype)
    o, lse = torch.empty_like(q), torch.empty(n_q, dtype=torch.float32)
    captured = []
    real, replay.launch = replay.launch, lambda kernel, grid, args, meta, *rest: captured.append(
        (kernel, args, meta))
    try:
        features = resolve(d, is_causal, None, None, None, "top_left")
        offsets = forward.slice_offsets(q), forward.slice_offsets(k, 1), forward.slice_offsets(v, 1)
        forward.launch_forward(q, k, v, o, lse, *offsets, None, None, o_strides=(n_q * d, d),
                               lse_strides=(n_q, 1), n_q=n_q, n_k=n_k, slices=1, sequences=1,
                               features=features)
    finally:
        replay.launch = real
    (launch,) = captured
    return launch


def compile_ptx(kernel, args: tuple, meta: dict, arch: int, fp_fusion: bool = True) -> str:
    """The PTX of ``kernel`` for these arguments (tensors by dtype, ints as i32, floats as fp32);
    ``fp_fusion=False`` compiles as a launch with ``enable_fp_fusion=False`` would."""
    names = kernel.arg_names
    values = list(args) + [meta[name] for name in names[len(args):]]
    signature, constexprs = {}, {}
    for param, name, value in zip(kernel.params, names, values):
        if param.is_constexpr:
            signature[name], constexprs[name] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            signature[name] = _POINTER[value.dtype]
        else:
            signature[name] = "fp32" if isinstance(value, float) else "i32"
    options = {key: meta[key] for key in ("num_warps", "num_stages")}
    options["enable_fp_fusion"] = fp_fusion
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options).asm["ptx"]


def exp2_arguments(ptx: str) -> collections.Counter:
    """``(source line, opcode)`` of the instruction that defines each ``ex2``'s argument, counted."""
    defined, line, found = {}, "?", collections.Counter()
    for text in ptx.splitlines():
        loc = re.search(r"// forward\.py:(\d+):\d+(?: @\[ forward\.py:(\d+))?", text)
        if loc:
            line = loc.group(1) + (f" (from {loc.group(2)})" if loc.group(2) else "")
        match = re.match(r"\s*([a-z][\w.]*)\s+(%r\d+),", text)
        if not match:
            continue
        opcode, register = match.groups()
        if opcode.startswith("ex2"):
            source = re.search(r",\s*(%r\d+)", text).group(1)
            found[(line, defined.get(source, "?"))] += 1
        defined[register] = opcode
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="float32", choices=("float16", "bfloat16", "float32"))
    parser.add_argument("--head-dim", type=int, default=202)
    parser.add_argument("--n", type=int, default=1024, help="n_q = n_k (default 1024)")
    parser.add_argument("--no-causal", dest="causal", action="store_false")
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10 (default 90)")
    parser.add_argument("--no-fp-fusion", dest="fp_fusion", action="store_false",
                        help="compile with enable_fp_fusion=False (Triton's launch option)")
    parser.add_argument("--ptx", help="also write the PTX to this file")
    args = parser.parse_args(argv)
    kernel, launch, meta = launch_arguments(args.n, args.n, args.head_dim, getattr(torch, args.dtype),
                                            args.causal)
    ptx = compile_ptx(kernel, launch, meta, args.arch, args.fp_fusion)
    if args.ptx:
        with open(args.ptx, "w") as out:
            out.write(ptx)
    print(f"sm_{args.arch}, Triton {triton.__version__}, {args.dtype} d = {args.head_dim}, "
          f"{'causal' if args.causal else 'not causal'}, tiles {meta['BLOCK_Q']}x{meta['BLOCK_K']}, "
          f"fp fusion {'on' if args.fp_fusion else 'off'}")
    print("| forward.py line | defines ex2's argument | ex2 count |\n| ---: | --- | ---: |")
    for (line, opcode), n in sorted(exp2_arguments(ptx).items()):
        print(f"| {line} | {opcode} | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
