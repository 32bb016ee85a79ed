"""Print the feature benchmarks' speed ratios (issue #15) as Markdown, ready for docs/speed.md.

    python -m benchmarks.report_features FEATURES.json [MORE.json ...] [--command "what ran"]

``FEATURES.json`` is pytest-benchmark's JSON of ``bench_features.py`` (``--benchmark-json``); several
files (a run split by dtype, say) are read as one, each named in the header. The output opens with
the date, the machine, the versions and the command that ran (``--command`` replaces the pytest
line the benchmarks recorded, e.g. with the script that called it), then one table per scenario:
a row per dtype, head dim, causal flag and pass, the median time of each backend, and the speed
ratios of :data:`benchmarks.features.COMPARISONS`, each ``peer's median time / ours`` from the same
run (above 1: ours is faster). A ratio below the issue's target is marked ``(miss)``, and each
table ends with how many rows meet each target. A backend that skipped shows ``-``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.features import BACKENDS, COMPARISONS, SCENARIOS, Comparison
from benchmarks.runs import RunError, read_json
from benchmarks.shapes import PASSES, SHORT_DTYPE


@dataclass(frozen=True)
class Timing:
    """One feature benchmark of a run: a backend's median time on one row of a scenario's table."""

    scenario: str
    title: str
    dtype: str
    head_dim: int
    causal: bool
    pass_: str
    backend: str
    median: float  # seconds per call

    @property
    def row(self) -> tuple:
        return (self.dtype, self.head_dim, self.causal, self.pass_)


@dataclass(frozen=True)
class Source:
    """What a header says about one file: where, when, on what, by which command."""

    path: Path
    datetime: str
    machine: dict
    command: str
    kernel_modules: tuple[str, ...]
    flex_compiled: tuple[bool, ...]


def load(path: str | Path) -> tuple[Source, list[Timing]]:
    """A feature run's header facts and timings; :class:`RunError` if the file is not a run."""
    path = Path(path)
    data = read_json(path)
    timings, commands, modules, flex = [], [], [], []
    for bench in data["benchmarks"]:
        info = bench.get("extra_info") or {}
        if "scenario" not in info or not bench.get("stats"):
            continue
        timings.append(Timing(info["scenario"], info["title"], info["dtype"], info["head_dim"],
                              bool(info["causal"]), info["pass"], info["backend"],
                              float(bench["stats"]["median"])))
        commands.append(info.get("command", "?"))
        if info.get("kernel_module"):
            modules.append(info["kernel_module"])
        if "flex_compiled" in info:
            flex.append(bool(info["flex_compiled"]))
    source = Source(path, data.get("datetime", "?"), data.get("machine_info") or {},
                    commands[0] if commands else "?", tuple(dict.fromkeys(modules)),
                    tuple(dict.fromkeys(flex)))
    return source, timings


def speed_ratio(ours: float | None, peer: float | None) -> float | None:
    """``peer / ours`` of two median times (above 1: ours is faster), None if either is missing."""
    return None if ours is None or peer is None else peer / ours


def meets(ratio: float, comparison: Comparison) -> bool:
    # A hair of slack for float noise only: a ratio shown as the target (1.00) meets it.
    return comparison.target is None or ratio >= comparison.target * (1 - 1e-9)


def column(comparison: Comparison) -> str:
    target = f" (>= {comparison.target:.2f})" if comparison.target is not None else ""
    return f"{comparison.ours} vs {comparison.peer}{target}"


def header(sources: list[Source], command: str | None) -> list[str]:
    """The lines above the tables: date, machine, versions, command, and how to read the ratios."""
    first = sources[0]
    gpu = (first.machine.get("flash_bench") or {}).get("gpu") or "cpu"
    out = [f"## Feature benchmarks (issue #15): {gpu}, {first.datetime[:10]}", ""]
    for s in sources:
        bench = s.machine.get("flash_bench") or {}
        versions = ", ".join(f"{k} {bench[k]}" for k in ("torch", "triton", "cuda") if bench.get(k))
        modules = ", ".join(f"`{m}`" for m in s.kernel_modules) or "?"
        out.append(f"- run `{s.path.name}`: {s.datetime} on {bench.get('gpu') or 'cpu'} (node "
                   f"`{s.machine.get('node', '?')}`); {versions}; kernel module {modules}")
    if command:
        out.append(f"- command: `{command}`")
    for s in sources:
        out.append(f"- pytest: `{s.command}`")
    out.append(f"- report: `python -m benchmarks.report_features {' '.join(s.path.name for s in sources)}`")
    out.append("- ratios: a peer's median time over ours, both from the same run (above 1: ours is "
               "faster); `(miss)`: below the issue's target; `-`: not measured (skipped).")
    flex = {f for s in sources for f in s.flex_compiled}
    if flex:
        how = {True: "`torch.compile(flex_attention, dynamic=False)` (default kernel options, no "
                     "max-autotune), compiled before timing",
               False: "eager `flex_attention` (on the CPU: forward only, and not a fused kernel)"}
        out.append(f"- FlexAttention: {'; '.join(how[f] for f in sorted(flex, reverse=True))}; its "
                   "block masks built before timing. `window=(left, 0)`, causal: query i sees keys "
                   "i - left .. i (left + 1 keys, the diagonal included), and FlexAttention's "
                   "mask_mod is that set: `q_idx - kv_idx <= left & kv_idx <= q_idx`.")
    return out


def table(scenario: str, timings: list[Timing]) -> list[str]:
    """One scenario's table (a row per dtype, head dim, causal flag, pass) and its targets' tally."""
    ours = [t for t in timings if t.scenario == scenario]
    if not ours:
        return []
    # Every backend of the scenario, so one that skipped everywhere still shows as "-".
    backends = list(dict.fromkeys([*BACKENDS.get(scenario, ()), *(t.backend for t in ours)]))
    comparisons = [c for c in COMPARISONS if c.scenario == scenario]
    median = {(t.row, t.backend): t.median for t in ours}
    rows = sorted({t.row for t in ours},
                  key=lambda r: (r[0], r[1], r[2], PASSES.index(r[3]) if r[3] in PASSES else 9))
    titles = " / ".join(dict.fromkeys(t.title for t in ours))
    out = ["", f"### {titles}", ""]
    cells = ["dtype", "d", "causal", "pass", *(f"{b} ms" for b in backends), *map(column, comparisons)]
    out.append("| " + " | ".join(cells) + " |")
    out.append("|" + "|".join(" --- " if i < 4 else " ---: " for i in range(len(cells))) + "|")
    tally: dict[Comparison, list[tuple[float, tuple]]] = {c: [] for c in comparisons}
    for row in rows:
        dtype, d, causal, pass_ = row
        cells = [SHORT_DTYPE.get(dtype, dtype), str(d), "yes" if causal else "no", pass_]
        for b in backends:
            t = median.get((row, b))
            cells.append("-" if t is None else f"{t * 1e3:.3f}")
        for c in comparisons:
            r = speed_ratio(median.get((row, c.ours)), median.get((row, c.peer)))
            if r is None:
                cells.append("-")
                continue
            tally[c].append((r, row))
            cells.append(f"{r:.2f}" + ("" if meets(r, c) else " (miss)"))
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for c in comparisons:
        if c.target is None:
            continue
        got = tally[c]
        note = f" ({c.note})" if c.note else ""
        line = f"- {column(c)}{note}: "
        if not got:
            out.append(line + f"not measured in any of {rows_(len(rows))}")
            continue
        low, where = min(got)
        line += (f"met in {sum(meets(r, c) for r, _ in got)} of {rows_(len(got))}; lowest {low:.2f} "
                 f"({SHORT_DTYPE.get(where[0], where[0])} d={where[1]}"
                 f"{' causal' if where[2] else ''} {where[3]})")
        if len(got) < len(rows):
            line += f"; {rows_(len(rows) - len(got))} not measured"
        out.append(line)
    return out


def rows_(n: int) -> str:
    return f"{n} row" + ("" if n == 1 else "s")


def report(paths: list[str | Path], command: str | None = None) -> str:
    """The Markdown of the runs in ``paths`` (read as one)."""
    sources, timings = [], []
    for path in paths:
        source, found = load(path)
        sources.append(source)
        timings += found
    out = header(sources, command)
    if not timings:
        out += ["", "(no feature benchmarks in these files)"]
    for scenario in SCENARIOS:
        out += table(scenario, timings)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report_features",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", help="pytest-benchmark JSON files of bench_features.py")
    parser.add_argument("--command", help="the command line to name in the header (default: none; "
                        "the pytest line each run recorded is always shown)")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(report(args.runs, args.command))
    except RunError as error:
        print(error, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
