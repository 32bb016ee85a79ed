"""Two versions of the kernel timed in one run: is a kernel change faster or slower than main's?

Absolute GPU times drift 25-35% between runs, so a change is judged only against the old kernel
timed on the same card in the same lease, alternating the two (A B A B) and keeping each shape's
fastest median per side. The old kernel is a copy of its ``flash/`` folder, which ``--flash``
puts first on ``sys.path`` (``PYTHONPATH`` cannot: ``python -m`` puts the working directory, and
its ``flash/``, before it); everything else comes from the tree::

    mkdir -p /tmp/A && git archive main flash | tar -x -C /tmp/A       # the old kernel
    for i in 1 2; do
      PYTHONPATH=. python3 -m benchmarks.compare_trees measure --flash /tmp/A > A$i.jsonl
      PYTHONPATH=. python3 -m benchmarks.compare_trees measure > B$i.jsonl
    done
    python3 -m benchmarks.compare_trees compare A1.jsonl A2.jsonl -- B1.jsonl B2.jsonl

``measure`` (CUDA only) prints one JSON line per shape: the backward's median time (the gradient
of a saved forward, ``triton.testing.do_bench``), the forward's, and the ``flash`` package timed.
The shapes are the quick grid's (bf16 at n = 1024, 4096, 16384; fp16 at 4096 and 16384; d = 64
and 128; causal and not), n = 4097, and the feature benchmarks' scenarios (GQA 8:1, window
(1023, 0), softcap 30).
``compare`` prints a Markdown table of new / old per shape and their geometric mean (below 1:
the new kernel is faster). No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable
from dataclasses import asdict

from benchmarks.features import Case


def shapes() -> list[Case]:
    """The shapes ``measure`` times (see the module docstring), as the feature benchmarks' cases."""
    out = []
    for dtype in ("bfloat16", "float16"):
        for d in (64, 128):
            h = 2048 // d
            for n, b in ((1024, 16), (4096, 4), (16384, 1)):
                if dtype == "float16" and n == 1024:
                    continue
                out += [Case("plain", dtype, d, n, b, h, h, causal) for causal in (False, True)]
        out += [
            Case("plain", dtype, 128, 4097, 4, 16, 16, True),
            Case("gqa", dtype, 128, 4096, 4, 32, 4, True),
            Case("gqa", dtype, 64, 4096, 4, 32, 4, False),
            Case("window", dtype, 128, 16384, 1, 16, 16, True, window=(1023, 0)),
            Case("window", dtype, 64, 16384, 1, 32, 32, True, window=(1023, 0)),
            Case("softcap", dtype, 128, 4096, 4, 16, 16, True, softcap=30.0),
        ]
    return out


def time_shape(shape: Case) -> dict:
    """One JSON-able row: the backward's and the forward's median time (ms) of ``shape``."""
    import torch
    import triton.testing

    import flash

    dtype = shape.torch_dtype
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn((shape.batch, heads, shape.seq_len, shape.head_dim), device="cuda", dtype=dtype,
                           generator=gen).requires_grad_()
               for heads in (shape.heads, shape.kv_heads, shape.kv_heads))
    features = {"window": shape.window, "softcap": shape.softcap}
    o = flash.attention(q, k, v, shape.causal, **features)
    do = torch.randn_like(o)
    backward = triton.testing.do_bench(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True),
                                       warmup=25, rep=150, return_mode="median")
    with torch.no_grad():
        forward = triton.testing.do_bench(lambda: flash.attention(q, k, v, shape.causal, **features),
                                          warmup=25, rep=150, return_mode="median")
    return {"id": shape.id, "bwd_ms": backward, "fwd_ms": forward, "shape": asdict(shape),
            "flash": os.path.dirname(flash.__file__)}


def measure(select: str = "", flash_dir: str | None = None) -> None:
    """Print :func:`time_shape` of every shape whose id contains ``select``, one JSON line each;
    memory is handed back between shapes (n = 16384 tensors). ``flash_dir``: a folder holding the
    ``flash/`` to time (default: the one ``import flash`` finds)."""
    if flash_dir is not None:
        if "flash" in sys.modules:
            raise RuntimeError("flash is already imported; --flash must come first")
        sys.path.insert(0, os.path.abspath(flash_dir))
        import flash

        if not os.path.abspath(flash.__file__).startswith(os.path.abspath(flash_dir) + os.sep):
            raise RuntimeError(f"--flash {flash_dir}: imported {flash.__file__} instead")
    import torch

    for shape in shapes():
        if select in shape.id:
            print(json.dumps(time_shape(shape)), flush=True)
            torch.cuda.empty_cache()


def fastest(lines: Iterable[str]) -> dict[str, dict[str, float]]:
    """Per shape id, the smallest ``bwd_ms`` and ``fwd_ms`` over every line (JSON) given."""
    best: dict[str, dict[str, float]] = {}
    for line in lines:
        if not line.strip():
            continue
        row = json.loads(line)
        entry = best.setdefault(row["id"], {"bwd_ms": math.inf, "fwd_ms": math.inf})
        for key in ("bwd_ms", "fwd_ms"):
            entry[key] = min(entry[key], float(row[key]))
    return best


def compare(old: dict[str, dict[str, float]], new: dict[str, dict[str, float]]) -> str:
    """Markdown: each shape both sides measured, new / old per pass, and their geometric means."""
    rows = ["| shape | old bwd ms | new bwd ms | new / old | old fwd ms | new fwd ms | new / old |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    logs: dict[str, list[float]] = {"bwd_ms": [], "fwd_ms": []}
    for shape_id, a in old.items():
        if shape_id not in new:
            continue
        b = new[shape_id]
        for key in logs:
            logs[key].append(math.log(b[key] / a[key]))
        rows.append(f"| {shape_id} | {a['bwd_ms']:.3f} | {b['bwd_ms']:.3f} | {b['bwd_ms'] / a['bwd_ms']:.3f} "
                    f"| {a['fwd_ms']:.3f} | {b['fwd_ms']:.3f} | {b['fwd_ms'] / a['fwd_ms']:.3f} |")
    if not logs["bwd_ms"]:
        return "no shape measured on both sides\n"
    means = {key: math.exp(sum(v) / len(v)) for key, v in logs.items()}
    rows.append("")
    rows.append(f"geometric mean new / old over {len(logs['bwd_ms'])} shapes: backward "
                f"{means['bwd_ms']:.3f}, forward {means['fwd_ms']:.3f}")
    return "\n".join(rows) + "\n"


def _read(paths: list[str]) -> dict[str, dict[str, float]]:
    lines: list[str] = []
    for path in paths:
        with open(path) as f:
            lines += f.readlines()
    return fastest(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare_trees",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="time flash (CUDA only)")
    m.add_argument("-k", dest="select", default="", help="only shapes whose id contains this")
    m.add_argument("--flash", dest="flash_dir", help="a folder holding the flash/ to time (the old kernel)")
    c = sub.add_parser("compare", help="old runs' JSON lines, then --, then the new runs'")
    c.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "measure":
        measure(args.select, args.flash_dir)
        return 0
    raw = list(argv if argv is not None else sys.argv[1:])
    if raw.count("--") != 1:
        parser.error("compare: give the old runs' files, then --, then the new runs'")
    split = raw.index("--")
    old_files, new_files = raw[raw.index("compare") + 1:split], raw[split + 1:]
    print(compare(_read(old_files), _read(new_files)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
