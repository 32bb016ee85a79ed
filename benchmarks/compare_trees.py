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
    python3 -m benchmarks.compare_trees compare --old A1.jsonl A2.jsonl --new B1.jsonl B2.jsonl

``measure`` (CUDA only) prints one JSON line per shape: the backward's median time (the gradient
of a saved forward, ``triton.testing.do_bench``), the forward's, and the ``flash`` package timed.
The shapes are the speed gate's quick grid, n = 4097, two packed batches (``packed``: lengths
multiples of 16, ``packed_odd``: not) and the feature benchmarks' cases (GQA 8:1, window
(1023, 0), softcap 30); ``-k`` picks some by id.
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

from benchmarks.features import Case, cases
from benchmarks.shapes import attention_grid
from benchmarks.tune import _time
from properties.varlen_case import VarlenCase


def shapes() -> list[Case]:
    """The shapes ``measure`` times: the speed gate's quick grid (:func:`benchmarks.shapes.attention_grid`),
    n = 4097 (d = 128 causal, both dtypes) and the feature benchmarks' cases
    (:func:`benchmarks.features.cases`), so an A/B row is a row the gate or ``features.sh`` reports."""
    out = [Case("plain", s.dtype, s.head_dim, s.seq_len, s.batch, s.heads, s.heads, s.causal)
           for s in attention_grid("quick")]
    out += [Case("plain", dtype, 128, 4097, 4, 16, 16, True) for dtype in ("bfloat16", "float16")]
    # Packed batches (flash.attention_varlen), 16 sequences of 4096 down to 256 rows (``packed``:
    # every length a multiple of 16) or one row fewer each (``packed_odd``): a kernel may choose
    # its code per sequence by such lengths (flash's backward does, docs/speed.md).
    out += [Case(scenario, "bfloat16", 128, 4096, 16, 16, 16, True) for scenario in PACKED]
    return out + cases("quick")


PACKED = ("packed", "packed_odd")
"""The scenarios of packed batches: ``batch`` sequences, the longest ``seq_len`` (see
:func:`packed_lengths`)."""


def packed_lengths(shape: Case) -> list[int]:
    """A packed shape's sequence lengths: ``seq_len`` down in ``batch`` even steps (4096, 3840, ...,
    256), one fewer each for ``packed_odd``."""
    step = shape.seq_len // shape.batch
    odd = int(shape.scenario == "packed_odd")
    return [shape.seq_len - step * i - odd for i in range(shape.batch)]


def time_shape(shape: Case) -> dict:
    """One JSON-able row: the backward's and the forward's median time (ms) of ``shape``."""
    import torch

    import flash

    features = {"window": shape.window, "softcap": shape.softcap}
    if shape.scenario in PACKED:
        # The suite's packed inputs (q, k, v, cu_seqlens and the longest lengths, in order).
        lengths = tuple(packed_lengths(shape))
        inputs = VarlenCase(lengths, lengths, shape.heads, shape.head_dim, shape.dtype, shape.causal,
                            kv_heads=shape.kv_heads).make_qkv("cuda")
        q, k, v = (t.requires_grad_() for t in inputs[:3])

        def call():
            return flash.attention_varlen(*inputs, shape.causal, **features)
    else:
        gen = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn((shape.batch, heads, shape.seq_len, shape.head_dim), device="cuda",
                               dtype=shape.torch_dtype, generator=gen).requires_grad_()
                   for heads in (shape.heads, shape.kv_heads, shape.kv_heads))

        def call():
            return flash.attention(q, k, v, shape.causal, **features)
    o = call()
    do = torch.randn_like(o)
    backward = _time(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
    with torch.no_grad():
        forward = _time(call)
    return {"id": shape.id, "bwd_ms": backward, "fwd_ms": forward, "shape": asdict(shape),
            "flash": os.path.dirname(flash.__file__)}


def measure(select: list[str] | None = None, flash_dir: str | None = None) -> int:
    """Print :func:`time_shape` of every shape whose id contains one of ``select`` (all when none),
    one JSON line each; memory is handed back between shapes (n = 16384 tensors). ``flash_dir``: a
    folder holding the ``flash/`` to time (default: the one ``import flash`` finds). Returns the
    exit status: 2 when shapes are selected and there is no CUDA GPU."""
    if flash_dir is not None:
        if "flash" in sys.modules:
            raise RuntimeError("flash is already imported; --flash must come first")
        sys.path.insert(0, os.path.abspath(flash_dir))
        import flash

        if not os.path.abspath(flash.__file__).startswith(os.path.abspath(flash_dir) + os.sep):
            raise RuntimeError(f"--flash {flash_dir}: imported {flash.__file__} instead")
    import torch

    chosen = [shape for shape in shapes() if not select or any(part in shape.id for part in select)]
    if chosen and not torch.cuda.is_available():
        print("compare_trees measure needs a CUDA GPU", file=sys.stderr)
        return 2
    for shape in chosen:
        print(json.dumps(time_shape(shape)), flush=True)
        torch.cuda.empty_cache()
    return 0


def fastest(lines: Iterable[str]) -> tuple[dict[str, dict[str, float]], set[str]]:
    """Per shape id, the smallest ``bwd_ms`` and ``fwd_ms`` over every line (JSON) given; and the
    ``flash`` packages the lines name."""
    best: dict[str, dict[str, float]] = {}
    packages: set[str] = set()
    for line in lines:
        if not line.strip():
            continue
        row = json.loads(line)
        if "flash" in row:  # rows written before measure named its package have none
            packages.add(row["flash"])
        entry = best.setdefault(row["id"], {"bwd_ms": math.inf, "fwd_ms": math.inf})
        for key in ("bwd_ms", "fwd_ms"):
            entry[key] = min(entry[key], float(row[key]))
    return best, packages


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


def _read(paths: list[str]) -> tuple[dict[str, dict[str, float]], set[str]]:
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
    m.add_argument("-k", dest="select", action="append",
                   help="only shapes whose id contains this (repeat for several; default: all)")
    m.add_argument("--flash", dest="flash_dir", help="a folder holding the flash/ to time (the old kernel)")
    c = sub.add_parser("compare", help="a table of the new runs' times over the old runs'")
    c.add_argument("--old", nargs="+", required=True, help="the old kernel's measure output(s)")
    c.add_argument("--new", nargs="+", required=True, help="the new kernel's measure output(s)")
    args = parser.parse_args(argv)
    if args.command == "measure":
        return measure(args.select, args.flash_dir)
    (old, old_packages), (new, new_packages) = _read(args.old), _read(args.new)
    if old_packages & new_packages:
        same = ", ".join(sorted(old_packages & new_packages))
        print(f"warning: both sides timed the same flash package ({same}): "
              "was --flash given to the old runs?", file=sys.stderr)
    print(compare(old, new), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
