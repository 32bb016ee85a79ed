"""Draw TFLOP/s against sequence length from a saved benchmark run, as a PNG.

    python -m benchmarks.plot RUN.json -o tflops.png

One panel per (dtype, head dim, causal, pass), one line per backend (per backend and tokens per
batch, ``batch x length``, when the run has several batch sizes for a length, as the full grid
does); lengths on a log scale. Needs matplotlib (``pip install matplotlib``, or the project's
``plot`` extra); it is imported only when a plot is drawn.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.runs import Run, RunError, describe, load
from benchmarks.shapes import PASSES, SHORT_DTYPE

STYLES = {
    "kernel": dict(color="tab:red", marker="o", linewidth=2.2),
    "sdpa_flash": dict(color="tab:blue", marker="s"),
    "sdpa_cudnn": dict(color="tab:green", marker="^"),
    "dense": dict(color="tab:gray", marker="x"),
    "torch_eager": dict(color="tab:brown", marker="v"),
    "torch_compile": dict(color="tab:purple", marker="D"),
}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("benchmarks/plot.py needs matplotlib: pip install matplotlib "
                         "(or the project's extra: pip install -e '.[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def series(run: Run) -> dict[tuple, dict[str, list[tuple[int, float]]]]:
    """``{(dtype, head_dim, causal, pass): {line label: [(seq_len, tflops), ...]}}``, panels in
    the order dtype, head dim, causal, pass (so a row of four panels is one dtype and head dim)."""
    def tokens(s) -> int:  # batch x length, rounded up to the grid's power of two (1023 x 16 -> 16384)
        return 1 << (s.batch * s.seq_len - 1).bit_length()

    per_point: dict[tuple, set[int]] = {}
    for r in run.results:
        s = r.shape
        point = (r.pass_, s.dtype, s.head_dim, s.causal, s.seq_len, r.backend)
        per_point.setdefault(point, set()).add(s.batch)
    several = any(len(b) > 1 for b in per_point.values())
    panels: dict[tuple, dict[str, list[tuple[int, float]]]] = {}
    for r in run.results:
        s = r.shape
        label = f"{r.backend}, {tokens(s)} tokens" if several else r.backend
        panel = panels.setdefault((s.dtype, s.head_dim, s.causal, r.pass_), {})
        panel.setdefault(label, []).append((s.seq_len, r.tflops))
    for panel in panels.values():
        for points in panel.values():
            points.sort()
    order = sorted(panels, key=lambda k: (k[0], k[1], k[2], PASSES.index(k[3]) if k[3] in PASSES else 9))
    return {k: panels[k] for k in order}


def draw(run: Run, out: Path) -> Path:
    plt = _pyplot()
    panels = series(run)
    if not panels:
        raise SystemExit(f"{run.path}: no speed benchmarks of benchmarks/ to plot")
    cols = min(4, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, ((dtype, d, causal, pass_), lines) in zip(axes.flat, panels.items()):
        for label, points in lines.items():
            style = STYLES.get(label.split(",")[0], {})
            ax.plot([n for n, _ in points], [t for _, t in points], label=label, markersize=4, **style)
        ax.set_xscale("log", base=2)
        lengths = sorted({n for points in lines.values() for n, _ in points})
        ax.set_xticks(lengths, [str(n) for n in lengths], fontsize=7)
        ax.minorticks_off()
        ax.set_title(f"{pass_}  {SHORT_DTYPE[dtype]}  d={d}{'  causal' if causal else ''}", fontsize=10)
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"{run.device}: kernel {run.kernel_module} ({run.datetime[:19]})", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plot", description=__doc__.split("\n")[0])
    parser.add_argument("run", help="a pytest-benchmark JSON file of benchmarks/")
    parser.add_argument("-o", "--output", type=Path, default=Path("tflops.png"), help="PNG to write")
    args = parser.parse_args(argv)
    try:
        run = load(args.run)
    except RunError as error:
        raise SystemExit(str(error)) from None
    print(f"{describe(run)}\nwrote {draw(run, args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
