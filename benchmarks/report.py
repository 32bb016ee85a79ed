"""Print a saved benchmark run as tables: TFLOP/s per backend and the kernel's speed ratios.

    python -m benchmarks.report RUN.json [RUN2.json ...]

``RUN.json`` is any pytest-benchmark JSON of ``benchmarks/`` (``--benchmark-json``, or a file
under ``benchmarks/results/<machine>/``). One Markdown table per pass (forward, forward+backward):
a row per shape, a column of TFLOP/s (from the median time) per backend that ran, and the ratios
``kernel / sdpa_flash``, ``kernel / sdpa_cudnn`` and ``kernel / flex`` of TFLOP/s (= the peer's time
over the kernel's; above 1 the kernel is faster). A backend that skipped a shape shows ``-``.
:mod:`benchmarks.report_speed` judges the same files against issue #16's targets.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.runs import Run, RunError, describe, load
from benchmarks.shapes import PASSES, SHORT_DTYPE, Shape

RATIOS = (("kernel", "sdpa_flash", "kernel/flash"), ("kernel", "sdpa_cudnn", "kernel/cudnn"),
          ("kernel", "flex", "kernel/flex"))


def number(x: float) -> str:
    """TFLOP/s to one decimal, or three significant digits below 10 (CPU dev runs are tiny)."""
    return f"{x:.1f}" if x >= 10 else f"{x:.3g}"


def shape_cells(s: Shape) -> list[str]:
    return [SHORT_DTYPE[s.dtype], str(s.head_dim), str(s.seq_len), str(s.batch), str(s.heads),
            "yes" if s.causal else "no"]


def tables(run: Run) -> str:
    """The run's tables, as Markdown."""
    backends = run.backends()
    ratios = [(a, b, title) for a, b, title in RATIOS if a in backends and b in backends]
    out = []
    table = run.by_key()
    for pass_ in PASSES:
        rows = [(key[1], results) for key, results in table.items() if key[0] == pass_]
        if not rows:
            continue
        out.append(f"\n### {pass_}: TFLOP/s (median)\n")
        header = ["dtype", "d", "n", "batch", "heads", "causal", *backends, *(t for _, _, t in ratios)]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(" --- " if i < 6 else " ---: " for i in range(len(header))) + "|")
        for s, results in rows:
            cells = shape_cells(s)
            cells += [number(results[b].tflops) if b in results else "-" for b in backends]
            for a, b, _ in ratios:
                both = a in results and b in results
                cells.append(f"{results[a].tflops / results[b].tflops:.2f}" if both else "-")
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="pytest-benchmark JSON files")
    args = parser.parse_args(argv)
    for path in args.runs:
        try:
            run = load(path)
        except RunError as error:
            raise SystemExit(str(error)) from None
        print(f"## {describe(run)}")
        if not run.results:
            print("\n(no speed benchmarks of benchmarks/ in this file)")
            continue
        print(tables(run))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
