"""The speed gate on ratios: the kernel's time over SDPA's, measured in the same run, against a baseline.

Absolute GPU times drift from run to run (25-35% was seen between runs on one warm H100: clocks,
power, the machine a job lands on), so comparing a kernel's time with a baseline recorded in
another run needs a wide margin. The time of PyTorch's SDPA (FlashAttention backend) on the same
shape, measured seconds before the kernel's in the same run, drifts with it; the ratio
``kernel median / sdpa_flash median`` cancels what they share, and a change in it is a change in
the kernel. So, for every (pass, shape) with both backends in both files::

    change = (kernel / sdpa_flash in the run) / (kernel / sdpa_flash in the baseline) - 1

and the gate fails when any shape's change exceeds ``--margin`` (default 25%) or the geometric
mean of ``1 + change`` over all shapes exceeds ``1 + --mean-margin`` (default 10%): the first
catches a regression confined to a few shapes, the second a small one everywhere. It also fails
when no shape could be compared (a gate that compared nothing must not pass). The reference must
stay put for the ratio to mean the kernel: a new PyTorch (or cuDNN, or driver) that speeds SDPA up
reads as a kernel regression, so record a new baseline when the software under SDPA changes.

    python -m benchmarks.gate check RUN.json --baseline benchmarks/baseline/h200.json
    python -m benchmarks.gate record RUN.json --out benchmarks/baseline/h200

``record`` writes the committed baseline from a run: ``h200.json`` (the whole run, which this
check, ``report.py`` and ``plot.py`` read) and ``h200.kernel.json`` (only the kernel's
benchmarks), the file given to pytest-benchmark's ``--benchmark-compare``: pytest-benchmark's
``--benchmark-compare-fail`` checks every benchmark that has a namesake in the compared file, so
a baseline holding only the kernel's keeps SDPA's own drift out of that gate.

Exit status of ``check``: 0 pass, 1 regression, 2 nothing to compare or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from benchmarks.runs import RunError, describe, load

DEFAULT_BASELINE = Path(__file__).resolve().parent / "baseline" / "h200.json"
KERNEL = "kernel"


def kernel_only_path(baseline: Path) -> Path:
    """``h200.json`` -> ``h200.kernel.json``."""
    return baseline.with_name(baseline.stem + ".kernel.json")


def record(run_path: Path, out: Path) -> int:
    """Write ``out.json`` (the whole run) and ``out.kernel.json`` (the kernel's benchmarks only)."""
    run = load(run_path)
    backends = run.backends()
    if KERNEL not in backends:
        print(f"{run_path}: no benchmarks of backend 'kernel'; nothing to record", file=sys.stderr)
        return 2
    if run.kernel_module != "flash":
        print(f"warning: the baseline's kernel module is {run.kernel_module}, not flash", file=sys.stderr)
    data = json.loads(run_path.read_text())
    full = out.with_suffix(".json") if out.suffix != ".json" else out
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(json.dumps(data, indent=1) + "\n")
    kernel = dict(data, benchmarks=[b for b in data["benchmarks"]
                                    if (b.get("extra_info") or {}).get("backend") == KERNEL])
    kernel_path = kernel_only_path(full)
    kernel_path.write_text(json.dumps(kernel, indent=1) + "\n")
    print(f"recorded {describe(run)}\n  {full} ({len(data['benchmarks'])} benchmarks: {', '.join(backends)})"
          f"\n  {kernel_path} ({len(kernel['benchmarks'])} benchmarks of the kernel)")
    return 0


def check(run_path: Path, baseline_path: Path, *, reference: str, margin: float, mean_margin: float) -> int:
    """Compare the kernel/reference time ratios of a run with the baseline's; print and return the status."""
    run, base = load(run_path), load(baseline_path)
    print(f"run:      {describe(run)}\nbaseline: {describe(base)}")
    now_table, base_table = run.by_key(), base.by_key()
    rows = []
    for key, now in now_table.items():
        then = base_table.get(key)
        if then is None or not all(b in now and b in then for b in (KERNEL, reference)):
            continue
        ratio_now = now[KERNEL].median / now[reference].median
        ratio_then = then[KERNEL].median / then[reference].median
        rows.append((key, ratio_then, ratio_now, ratio_now / ratio_then - 1,
                     now[KERNEL].median / then[KERNEL].median - 1))
    if not rows:
        print(f"\nFAIL: no (pass, shape) has both '{KERNEL}' and '{reference}' in the run and in the "
              "baseline; nothing was compared", file=sys.stderr)
        return 2

    print(f"\n{'pass':<8} {'shape':<34} {'baseline':>9} {'run':>9} {'change':>8} {'kernel time':>12}")
    print(f"{'':<8} {'':<34} {f'k/{reference[:4]}':>9} {f'k/{reference[:4]}':>9} {'':>8} {'(absolute)':>12}")
    failed = []
    for (pass_, shape), then, now, change, absolute in rows:
        flag = ""
        if change > margin:
            failed.append(f"{pass_} {shape.id}: kernel/{reference} {then:.3f} -> {now:.3f} ({change:+.1%})")
            flag = "  << regressed"
        print(f"{pass_:<8} {shape.id:<34} {then:9.3f} {now:9.3f} {change:+8.1%} {absolute:+12.1%}{flag}")

    mean = math.exp(sum(math.log1p(change) for *_, change, _ in rows) / len(rows)) - 1
    missing = len([k for k, v in base_table.items() if KERNEL in v]) - len(rows)
    print(f"\n{len(rows)} shapes compared ({missing} of the baseline's kernel shapes not in this run); "
          f"geometric mean change {mean:+.1%}")
    print(f"limits: any shape +{margin:.0%}, geometric mean +{mean_margin:.0%}")
    if mean > mean_margin:
        failed.append(f"geometric mean of kernel/{reference} changes {mean:+.1%} > +{mean_margin:.0%}")
    if failed:
        print(f"\nFAIL: the kernel is slower than the baseline, relative to {reference}:", file=sys.stderr)
        for line in failed:
            print("  " + line, file=sys.stderr)
        return 1
    print("\nPASS")
    return 0


def _percent(text: str) -> float:
    value = float(text.rstrip("%"))
    if value < 0:
        raise argparse.ArgumentTypeError("a margin is a non-negative percentage")
    return value / 100


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gate",
        description="The ratio speed gate: kernel time / SDPA time against a baseline's.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="compare a run with the baseline; exit 1 on a regression")
    c.add_argument("run", type=Path, help="pytest-benchmark JSON of the run to judge")
    c.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE, help=f"default {DEFAULT_BASELINE}")
    c.add_argument("--reference", default="sdpa_flash", help="backend the kernel is divided by (sdpa_flash)")
    c.add_argument("--margin", type=_percent, default=0.25, help="largest change of one shape, %% (25)")
    c.add_argument("--mean-margin", type=_percent, default=0.10,
                   help="largest geometric-mean change over all shapes, %% (10)")
    r = sub.add_parser("record", help="write the baseline files from a run")
    r.add_argument("run", type=Path, help="pytest-benchmark JSON of a run of flash")
    r.add_argument("--out", type=Path, default=DEFAULT_BASELINE,
                   help=f"baseline to write (default {DEFAULT_BASELINE})")
    args = parser.parse_args(argv)
    try:
        if args.command == "record":
            return record(args.run, args.out)
        return check(args.run, args.baseline, reference=args.reference, margin=args.margin,
                     mean_margin=args.mean_margin)
    except RunError as error:
        print(f"FAIL: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
