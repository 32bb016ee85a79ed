"""``python -m fuzz``: fuzz a kernel module, replay saved failures, reproduce one case, pin it,
or tabulate several kernels' conformance.

    python -m fuzz run --kernel flash --budget 600        # fuzz every check for 10 minutes
    python -m fuzz replay                                 # re-run every failure in the database
    python -m fuzz repro "Case(n_q=65, ...)" --plot e.png # one case: full report, error plot
    python -m fuzz pin "Case(n_q=65, ...)" --check NAME   # keep it in the regression corpus
    python -m fuzz report --kernel flash --kernel oracle.adapters.sdpa --output docs/conformance.md
    python -m fuzz sensitivity --kernel flash --output docs/sensitivity-cpu.md  # how sharp each bound is

Every command takes ``VarlenCase(...)`` lines too (packed batches, checked by
``properties.varlen.VARLEN_CHECKS``); ``run`` fuzzes those checks as well, and reports them n/a for
a kernel without ``attention_varlen``.

``report`` fuzzes each kernel as ``run`` does (the budget shared equally among them) and prints a
markdown table, checks x kernels: pass (with the worst error as a fraction of its bound, for the
checks that compare with the oracle), FAIL (with its replay line) or n/a (with the reason); see
:mod:`fuzz.report`. ``--output PATH`` writes it there too (without it, it is printed only).

Exit status: 1 when a check failed (``run``, ``replay``, ``repro``, ``report``: a report gates like
``run``, and is printed and written first), 2 on bad arguments; 130 when a ``report`` was
interrupted (it still prints and writes the kernels it finished).
"""

from __future__ import annotations

import argparse
import sys
import time

from fuzz import gpus
from properties.kernels import DEFAULT_KERNEL


def _checks(names: list[str] | None, case=None):
    """The checks named (default: every one), or those that take ``case``'s kind of line."""
    from properties import EVERY_CHECK, checks_for

    every = EVERY_CHECK if case is None else checks_for(case)
    by_name = {check.__name__: check for check in every}
    if not names:
        return list(every)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        kind = f" for a {type(case).__name__} line" if case is not None else ""
        raise SystemExit(f"unknown check(s) {unknown}{kind}; known: {sorted(by_name)}")
    return [by_name[n] for n in names]


def _size(name: str):
    import torch

    from fuzz.engine import size_named

    return size_named(name if name != "auto" else ("gpu" if torch.cuda.is_available() else "cpu"))


def _command(verb: str, case, check: str | None, kernel: str | None = None) -> str:
    # Case lines hold single-quoted strings only, so double quotes paste in any POSIX shell.
    parts = ["python -m fuzz", verb, f'"{case}"']
    if check:
        parts += ["--check", check]
    if kernel:
        parts += ["--kernel", kernel]
    return " ".join(parts)


def _table(rows: list[tuple], header: tuple) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w) if i == 0 else str(x).rjust(w)  # noqa: E731
                               for i, (x, w) in enumerate(zip(r, widths)))
    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *map(line, rows)])


def _bad_workers(command: str, args) -> bool:
    """Whether ``--workers`` is unusable (below 1, or above ``--max-workers-per-gpu`` per GPU); says
    why on stderr."""
    problem = (f"--workers must be at least 1, not {args.workers}" if args.workers < 1 else
               args.workers > 1 and gpus.too_many_workers(args.workers, args.max_workers_per_gpu))
    if problem:
        print(f"python -m fuzz {command}: {problem}", file=sys.stderr)
    return bool(problem)


def cmd_run(args) -> int:
    from fuzz import parallel, profiles
    from fuzz.runner import fuzz_checks

    if _bad_workers("run", args):
        return 2
    profile = profiles.load(args.profile)
    db_dir = args.db or profiles.database_dir()
    size = _size(args.size)
    checks = _checks(args.check)
    names = [c.__name__ for c in checks]
    plan = parallel.deal(names, args.workers) if args.workers > 1 else None
    spread = ""
    if plan:
        pinned = dict.fromkeys(device for _, device in plan if device is not None)
        spread = f", {len(plan)} workers" + (f" on GPUs {','.join(pinned)}" if pinned else "")
    print(f"fuzzing kernel {args.kernel}: {len(checks)} checks, {args.budget:g} s, profile {profile}, "
          f"{size.name} sizes, database {db_dir}{spread}", flush=True)
    start = time.monotonic()
    options = dict(budget=args.budget, size=size, profile=profile, shrink_budget=args.shrink_budget,
                   case_timeout=args.case_timeout, random_seed=args.seed)
    if plan:
        results = parallel.fuzz_spread(args.kernel, plan=plan, database_dir=db_dir, **options)
    else:
        results = fuzz_checks(args.kernel, check_names=names, database=profiles.database(db_dir), **options)
    rows = [(r.name, r.examples, r.failed, r.not_applicable, r.verdict) for r in results]
    print()
    print(_table(rows, ("property", "examples", "failures", "n/a", "verdict")))
    failed = [r for r in results if r.failure is not None]
    for r in failed:
        case, verdict = r.failure
        note = " (shrinking cut short by the budget)" if r.shrink_cut_short else ""
        print(f"\nFAILED {r.name}: {verdict.status}{note}")
        for line in verdict.message.splitlines()[:4]:
            print(f"  {line}")
        print(f"  minimal case: {case}")
        print(f"  replay: {_command('repro', case, r.name, args.kernel)}")
        print(f"  pin:    {_command('pin', case, r.name)}")
        if r.another_kind_summary:  # shrinking ended on another kind of failure than it began with
            first_case, _ = r.first_failure_of_another_kind
            print(f"  {r.another_kind_summary}")
            print(f"  its replay: {_command('repro', first_case, r.name, args.kernel)}")
    total = sum(r.examples for r in results)
    not_run = [r.name for r in results if r.verdict == "not run"]
    unrun = (f"; {len(not_run)} not run, no example finished in its share of the budget "
             f"({', '.join(not_run)})" if not_run else "")
    print(f"\n{'FAIL' if failed else 'PASS'}: {len(failed)} of {len(results)} checks failed, "
          f"{total} examples in {time.monotonic() - start:.0f} s (kernel {args.kernel}){unrun}")
    return 1 if failed else 0


def cmd_replay(args) -> int:
    import torch

    from fuzz import profiles
    from fuzz.engine import stored_cases
    from fuzz.isolation import IsolatedChecker
    from fuzz.strategies import SIZES

    db_dir = args.db or profiles.database_dir()
    database = profiles.database(db_dir)
    checks = _checks(args.check)
    on_gpu = torch.cuda.is_available()
    found = failing = 0
    print(f"replaying the failures saved in {db_dir} against kernel {args.kernel}", flush=True)
    with IsolatedChecker(args.kernel, case_timeout=args.case_timeout) as checker:
        for check in checks:
            for size in SIZES.values():
                cases = stored_cases(check.__name__, size, database)
                if cases and size.name == "gpu" and not on_gpu:
                    print(f"skipped {len(cases)} gpu-sized case(s) of {check.__name__}: needs CUDA")
                    continue
                for case in cases:
                    found += 1
                    verdict = checker.check(check.__name__, case)
                    failing += verdict.failed
                    print(f"{verdict.status.upper():<7} {check.__name__}\t{case}")
                    if verdict.failed:
                        print(f"        {verdict.first_line}")
                        print(f"        {_command('repro', case, check.__name__, args.kernel)}")
    print(f"\n{found} saved failure(s) replayed; {failing} still failing against {args.kernel}")
    return 1 if failing else 0


def _case(line: str):
    """The ``Case``/``VarlenCase`` of a replay line; a line that is not one ends the command with
    the reason (exit status 2, as for any bad argument), not a traceback."""
    from properties.varlen_case import parse_case

    try:
        return parse_case(line)
    except ValueError as e:
        print(f"python -m fuzz: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def cmd_repro(args) -> int:
    from fuzz.isolation import run_check
    from properties import load_kernel
    from properties.varlen_case import VarlenCase

    case = _case(args.case)
    kernel = load_kernel(args.kernel)
    checks = _checks(args.check, case)
    print(f"kernel {args.kernel}, {case}")
    failed = 0
    for check in checks:
        verdict, _ = run_check(check, kernel, case)
        failed += verdict.failed
        print(f"\n{verdict.status.upper():<7} {check.__name__}")
        for line in verdict.message.splitlines():
            print(f"  {line}")
    if args.plot and isinstance(case, VarlenCase):
        print("\n--plot draws Case lines only; no plot for a VarlenCase")
    elif args.plot:
        from fuzz.plot import plot_output_error

        print("\n" + plot_output_error(kernel, case, args.plot))
    print(f"\n{'FAIL' if failed else 'PASS'}: {failed} of {len(checks)} checks failed")
    return 1 if failed else 0


def cmd_pin(args) -> int:
    from pathlib import Path

    from fuzz import corpus

    case = _case(args.case)
    check = args.check or corpus.ALL
    if check != corpus.ALL:
        _checks([check], case)
    path = Path(args.corpus) if args.corpus else corpus.corpus_path()
    added = corpus.append(case, check=check, comment=args.comment or "", path=path)
    print(f"{'pinned' if added else 'already pinned'} in {path}: {check}\t{case}")
    return 0


REPORT_BUDGET = 120.0
"""``report``'s default budget: seconds in all, shared equally by the kernels."""

REPORT_SHRINK_BUDGET = 20.0
"""``report``'s default for the seconds a failure may be shrunk past its check's share (``run``'s
default, at least 60 s per failing check, would let one broken kernel take most of a report's time)."""


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _report_command(args, kernels: list[str], profile: str, size: str) -> str:
    """The command that regenerates a report: ``args`` with the profile and the size resolved."""
    import shlex

    parts = ["python", "-m", "fuzz", "report"]
    for kernel in kernels:
        parts += ["--kernel", kernel]
    parts += ["--budget", f"{args.budget:g}", "--profile", profile, "--size", size]
    for name in args.check or ():
        parts += ["--check", name]
    if args.seed is not None:
        parts += ["--seed", str(args.seed)]
    if args.shrink_budget != REPORT_SHRINK_BUDGET:
        parts += ["--shrink-budget", f"{args.shrink_budget:g}"]
    if args.case_timeout != 600.0:
        parts += ["--case-timeout", f"{args.case_timeout:g}"]
    if args.workers != 1:
        parts += ["--workers", str(args.workers)]
    for option, value in (("--db", args.db), ("--output", args.output)):
        if value:
            parts += [option, value]
    return shlex.join(parts)


def cmd_report(args) -> int:
    import functools
    from pathlib import Path

    from fuzz import parallel, profiles, report
    from fuzz.runner import CheckResult, fuzz_checks

    kernels = list(dict.fromkeys(args.kernel or [DEFAULT_KERNEL]))
    missing = [k for k in kernels if not _importable(k)]
    if missing or args.budget <= 0:
        why = f"no kernel module named {missing}" if missing else f"--budget must be > 0, not {args.budget:g}"
        print(f"python -m fuzz report: {why}", file=sys.stderr)
        return 2
    if _bad_workers("report", args):
        return 2
    profile = profiles.load(args.profile)
    size = _size(args.size)
    checks = [c.__name__ for c in _checks(args.check)]
    db_dir = args.db or profiles.database_dir()
    database = profiles.database(db_dir)
    share = args.budget / len(kernels)
    columns = {}
    interrupted = None
    for kernel in kernels:
        print(f"fuzzing kernel {kernel}: {len(checks)} checks, {share:g} s, profile {profile}, "
              f"{size.name} sizes", file=sys.stderr, flush=True)
        options = dict(budget=share, size=size, profile=profile, shrink_budget=args.shrink_budget,
                       case_timeout=args.case_timeout, random_seed=args.seed)
        try:
            if args.workers > 1:  # the kernel's checks shared among worker processes, as `run --workers`
                columns[kernel] = parallel.fuzz_spread(
                    kernel, plan=parallel.deal(checks, args.workers), database_dir=db_dir, **options)
            else:
                columns[kernel] = fuzz_checks(kernel, check_names=checks, database=database, **options)
        except KeyboardInterrupt:
            # Interrupted (Ctrl-C, or `timeout -s INT`): the page still shows the kernels finished,
            # and says which were not; a kernel cut short shows every check "not run".
            interrupted = kernel
            break
    for kernel in kernels:
        columns.setdefault(kernel, [CheckResult(name) for name in checks])
    header = report.header(_report_command(args, kernels, profile, size.name))
    if interrupted:
        header += (f"\n\nInterrupted while fuzzing `{interrupted}`: its column and those after it were not "
                   "run.")
    page = report.markdown(columns, replay=functools.partial(_command, "repro"), header=header)
    print(page, end="")
    if args.output:
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page)
        print(f"written to {path}", file=sys.stderr)
    failed = any(r.failure is not None for results in columns.values() for r in results)
    return 130 if interrupted else 1 if failed else 0


SENSITIVITY_SAMPLE = 40
"""``sensitivity``'s default fuzz sample: cases drawn per kernel for the headroom."""

SENSITIVITY_THRESHOLD_CASES = 4
"""``sensitivity``'s default: grid cases per dtype and check whose thresholds are searched."""


def _sensitivity_command(args, kernels: list[str], size: str) -> str:
    """The command that regenerates a sensitivity page: ``args`` with the size resolved."""
    import shlex

    parts = ["python", "-m", "fuzz", "sensitivity"]
    for kernel in kernels:
        parts += ["--kernel", kernel]
    for name in args.check or ():
        parts += ["--check", name]
    for dtype in args.dtype or ():
        parts += ["--dtype", dtype]
    parts += ["--size", size, "--sample", str(args.sample), "--seed", str(args.seed),
              "--threshold-cases", str(args.threshold_cases)]
    if args.threshold_kernel:
        parts += ["--threshold-kernel", args.threshold_kernel]
    if args.max_work is not None:
        parts += ["--max-work", str(args.max_work)]
    if args.output:
        parts += ["--output", args.output]
    return shlex.join(parts)


def cmd_sensitivity(args) -> int:
    from pathlib import Path

    from fuzz import report, sensitivity
    from properties import ORACLE_CHECKS

    kernels = list(dict.fromkeys(args.kernel or [DEFAULT_KERNEL]))
    missing = [k for k in [*kernels, args.threshold_kernel or kernels[0]] if not _importable(k)]
    if missing or args.sample < 0 or args.threshold_cases < 0:
        why = (f"no kernel module named {missing}" if missing
               else "--sample and --threshold-cases must be >= 0")
        print(f"python -m fuzz sensitivity: {why}", file=sys.stderr)
        return 2
    size = _size(args.size)
    checks = _checks(args.check) if args.check else list(ORACLE_CHECKS)
    start = time.monotonic()
    room, limits = sensitivity.Headroom(), {}
    base = args.threshold_kernel or kernels[0]
    interrupted = False
    try:
        sensitivity.headroom(kernels, checks, size=size, sample=args.sample, seed=args.seed,
                             dtypes=args.dtype, max_work=args.max_work, progress=sensitivity.log,
                             into=room)
        if args.threshold_cases:
            sensitivity.thresholds(base, checks, size=size, per_dtype=args.threshold_cases,
                                   dtypes=args.dtype, max_work=args.max_work, progress=sensitivity.log,
                                   into=limits)
    except KeyboardInterrupt:  # Ctrl-C, or `timeout -s INT`: the page shows what was measured
        interrupted = True
    header = report.header(_sensitivity_command(args, kernels, size.name),
                           title="Sensitivity of the error model's bounds")
    header += f" It took {time.monotonic() - start:.0f} s."
    if interrupted:
        header += " Interrupted: the tables hold what was measured before."
    page = sensitivity.markdown(room, limits, kernels, header=header, threshold_kernel=base)
    print(page, end="")
    if args.output:
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page)
        print(f"written to {path}", file=sys.stderr)
    failed = any(w.failed for w in (*room.grid.values(), *room.sample.values()))
    return 130 if interrupted else 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def kernel_arg(p):
        p.add_argument("--kernel", default=DEFAULT_KERNEL, help="kernel module (default: flash)")

    run = sub.add_parser("run", help="fuzz every check against a kernel for a time budget")
    kernel_arg(run)
    run.add_argument("--budget", type=float, required=True, help="wall-clock seconds for the search")
    run.add_argument("--profile", default=None, help="Hypothesis profile: dev, ci, nightly, gpu "
                     "(default: $HYPOTHESIS_PROFILE, ci if $CI is set, else dev)")
    run.add_argument("--db", default=None, help="example database directory "
                     "(default: $FLASH_HYPOTHESIS_DB, else .hypothesis/examples)")
    run.add_argument("--check", action="append", help="fuzz only this check (repeatable)")
    run.add_argument("--size", choices=("auto", "cpu", "cpu-quick", "gpu"), default="auto",
                     help="case sizes, see fuzz/strategies.py (default: gpu if CUDA is available, else cpu)")
    run.add_argument("--seed", type=int, default=None, help="fix the random draws")
    run.add_argument("--shrink-budget", type=float, default=None,
                     help="seconds a failure may be shrunk past its check's share (default: max(share, 60))")
    run.add_argument("--case-timeout", type=float, default=600.0,
                     help="seconds one check may take on one case before it fails as a timeout")
    run.add_argument("--workers", type=int, default=1, help="fuzz processes, the checks shared among "
                     "them, each on its own GPU when there are several (default: 1)")
    run.add_argument("--max-workers-per-gpu", metavar="K", type=gpus.parse_cap, default=gpus.env_cap(),
                     help=f"refuse --workers above K per visible GPU (default: ${gpus.CAP_ENV}, else no cap)")
    run.set_defaults(func=cmd_run)

    replay = sub.add_parser("replay", help="re-run every failing example saved in the database")
    kernel_arg(replay)
    replay.add_argument("--db", default=None, help="example database directory")
    replay.add_argument("--check", action="append", help="replay only this check (repeatable)")
    replay.add_argument("--case-timeout", type=float, default=600.0)
    replay.set_defaults(func=cmd_replay)

    repro = sub.add_parser("repro", help="run one case and print the full comparison report")
    repro.add_argument("case", help='a case line: "Case(n_q=..., ...)" or "VarlenCase(...)"')
    kernel_arg(repro)
    repro.add_argument("--check", action="append",
                       help="run only this check (default: every check that takes the line)")
    repro.add_argument("--plot", metavar="FILE.png", help="draw the output's error over (row, column)")
    repro.set_defaults(func=cmd_repro)

    pin = sub.add_parser("pin", help="append a case to the regression corpus")
    pin.add_argument("case", help='a case line: "Case(n_q=..., ...)" or "VarlenCase(...)"')
    pin.add_argument("--check", default=None,
                     help="the check that runs it (default: every check that takes the line)")
    pin.add_argument("--comment", default=None, help="a comment line written above it")
    pin.add_argument("--corpus", default=None, help="corpus file (default: $FLASH_FUZZ_CORPUS, "
                     "else fuzz/corpus.txt)")
    pin.set_defaults(func=cmd_pin)

    report = sub.add_parser(
        "report", help="fuzz several kernels and tabulate every check's verdict as markdown",
        description="Fuzz each kernel as `run` does, then print a markdown table, checks x kernels: "
        "'pass (N cases; F of bound, Q)' (F: the worst error as a fraction of the error model's bound, "
        "for the checks that compare with the oracle), 'FAIL [n]' (note n: the replay line of the "
        "smallest failing case) or 'n/a [n]' (note n: why the check did not apply). The page opens with "
        "the date, the machine and the command that regenerates it. Exit status: 1 if any cell is FAIL "
        "(after printing and writing the page), 2 on bad arguments, 130 if interrupted (the page, with "
        "the kernels finished, is still printed and written), else 0.")
    report.add_argument("--kernel", action="append", help="kernel module, one column each "
                        "(repeatable; default: flash)")
    report.add_argument("--budget", type=float, default=REPORT_BUDGET,
                        help=f"wall-clock seconds for the search in all, shared equally by the kernels "
                        f"(default: {REPORT_BUDGET:g}); shrinking a failure may add up to --shrink-budget")
    report.add_argument("--check", action="append", help="only this check, one row (repeatable; "
                        "default: every check)")
    report.add_argument("--output", metavar="PATH", default=None,
                        help="also write the page to PATH, e.g. docs/conformance.md (default: print only)")
    report.add_argument("--profile", default=None, help="Hypothesis profile, as for run")
    report.add_argument("--db", default=None, help="example database directory, as for run (its saved "
                        "failures are tried first, and new ones saved)")
    report.add_argument("--size", choices=("auto", "cpu", "cpu-quick", "gpu"), default="auto",
                        help="case sizes, as for run")
    report.add_argument("--seed", type=int, default=None, help="fix the random draws")
    report.add_argument("--shrink-budget", type=float, default=REPORT_SHRINK_BUDGET,
                        help="seconds a failure may be shrunk past its check's share "
                        f"(default: {REPORT_SHRINK_BUDGET:g})")
    report.add_argument("--case-timeout", type=float, default=600.0,
                        help="seconds one check may take on one case before it fails as a timeout")
    report.add_argument("--workers", type=int, default=1, help="fuzz processes per kernel, its checks "
                        "shared among them for the kernel's share of the budget, as run --workers: N times "
                        "the examples in the same time (default: 1)")
    report.add_argument("--max-workers-per-gpu", metavar="K", type=gpus.parse_cap, default=gpus.env_cap(),
                        help=f"refuse --workers above K per visible GPU (default: ${gpus.CAP_ENV}, "
                        "else no cap)")
    report.set_defaults(func=cmd_report)

    sens = sub.add_parser(
        "sensitivity", help="how sharp is each bound: correct kernels' headroom, detection thresholds",
        description="For each check (default: the oracle checks), dtype and output (o, lse, dq, dk, "
        "dv): each kernel's worst error as a fraction of its bound over the fixed grids and a seeded "
        "fuzz sample (the headroom), and the smallest perturbation of the first kernel's result that "
        "the check detects (the threshold, searched on a log scale), with whether rounding the result "
        "through float16 or bfloat16 is detected. Prints a markdown page (date, machine, the command "
        "that regenerates it). Exit status: 1 if a kernel failed a check (it is a correct kernel's "
        "measurement), 2 on bad arguments, else 0. See fuzz/sensitivity.py and docs/running.md.")
    sens.add_argument("--kernel", action="append", help="a correct kernel module, one column each "
                      "(repeatable; default: flash)")
    sens.add_argument("--check", action="append", help="only this check (repeatable; default: the "
                      "oracle checks; others report the outputs they compare through the error model)")
    sens.add_argument("--dtype", action="append", choices=("float16", "bfloat16", "float32"),
                      help="judge every case in this dtype (repeatable; default: each case's own, "
                      "float16 and float32 on the CPU grids, all three on the GPU's)")
    sens.add_argument("--size", choices=("auto", "cpu", "cpu-quick", "gpu"), default="auto",
                      help="grids and fuzz sizes: cpu or gpu (default: gpu if CUDA is available)")
    sens.add_argument("--sample", type=int, default=SENSITIVITY_SAMPLE,
                      help=f"fuzz cases drawn per kernel (default: {SENSITIVITY_SAMPLE})")
    sens.add_argument("--seed", type=int, default=0, help="the fuzz sample's Hypothesis seed (default: 0)")
    sens.add_argument("--threshold-cases", type=int, default=SENSITIVITY_THRESHOLD_CASES,
                      help="grid cases per check and dtype whose thresholds are searched (default: "
                      f"{SENSITIVITY_THRESHOLD_CASES}; 0: no thresholds)")
    sens.add_argument("--threshold-kernel", default=None,
                      help="the correct kernel perturbed for the thresholds (default: the first --kernel)")
    sens.add_argument("--max-work", type=int, default=None, metavar="W",
                      help="leave out cases with prod(leading) * n_q * n_k > W (the GPU grid's 16k cases "
                      "take seconds each in the float64 oracle)")
    sens.add_argument("--output", metavar="PATH", default=None,
                      help="also write the page to PATH, e.g. docs/sensitivity-cpu.md")
    sens.set_defaults(func=cmd_sensitivity)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
