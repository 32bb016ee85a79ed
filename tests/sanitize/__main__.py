"""``python -m tests.sanitize``: the memory-safety gate, a kernel module under compute-sanitizer memcheck.

Runs :mod:`tests.sanitize.cases` (the regression corpus, exactly-sized edge cases and a seeded fuzz
sample, forward and backward) in one process under
``compute-sanitizer --tool memcheck``, with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` so that every tensor
is its own allocation (inside PyTorch's cached blocks a read past a tensor's end is a read of valid
memory, and memcheck cannot see it). Prints a summary (cases run, errors found, the first error and
the case it came in) and exits 0 when the sanitizer found no error and every case ran, 1 otherwise,
2 when it cannot run (no CUDA device, no compute-sanitizer).

The sanitizer runs with ``--destroy-on-device-error kernel``: a kernel that faults is stopped and the
process goes on, so one run names every case that faults, not only the first. Before the sanitized
run, ``--warm-jobs`` plain processes run the same cases to compile every kernel specialization
in parallel into Triton's cache (compiling is most of the time otherwise); ``--warm-jobs 0`` skips
that.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.sanitize.cases import add_case_arguments
from tests.sanitize.report import SanitizerReport, parse

ROOT = Path(__file__).resolve().parents[2]

SANITIZER_ERROR_EXIT = 86
"""compute-sanitizer's exit code when it found errors (``--error-exitcode``): distinct from the
child's own failures (1, or a signal)."""

SANITIZER_ENV = "COMPUTE_SANITIZER"
"""An environment variable that may name the compute-sanitizer executable."""


def find_sanitizer(explicit: str | None = None) -> tuple[str | None, list[str]]:
    """The compute-sanitizer to use and the places looked in.

    ``explicit`` (``--sanitizer``) if given, else ``$COMPUTE_SANITIZER``, ``PATH``,
    ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``/usr/local/cuda/bin``,
    ``/usr/local/cuda/compute-sanitizer``, then the newest ``/usr/local/cuda-*/bin``. (PyTorch's
    pip wheels of the CUDA libraries do not ship it: it comes with the CUDA toolkit.)
    """
    looked: list[str] = []
    if explicit:
        looked.append(explicit)
        path = shutil.which(explicit) or (explicit if os.access(explicit, os.X_OK) else None)
        return path, looked
    candidates = []
    if os.environ.get(SANITIZER_ENV):
        candidates.append(os.environ[SANITIZER_ENV])
    candidates.append("compute-sanitizer")  # on PATH
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "compute-sanitizer"))
    candidates += ["/usr/local/cuda/bin/compute-sanitizer",
                   "/usr/local/cuda/compute-sanitizer/compute-sanitizer"]
    candidates += sorted(glob.glob("/usr/local/cuda-*/bin/compute-sanitizer"), reverse=True)
    for candidate in candidates:
        looked.append("PATH" if candidate == "compute-sanitizer" else candidate)
        path = shutil.which(candidate) if os.sep not in candidate else (
            candidate if os.access(candidate, os.X_OK) else None)
        if path:
            return path, looked
    return None, looked


def sanitizer_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "version unknown"
    lines = [line.strip() for line in out.splitlines() if "ersion" in line]
    return lines[-1] if lines else "version unknown"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _cases_args(args: argparse.Namespace) -> list[str]:
    out = ["--kernel", args.kernel, "--sample", str(args.sample), "--seed", str(args.seed),
           "--size", args.size]
    if args.no_corpus:
        out.append("--no-corpus")
    if args.no_edge:
        out.append("--no-edge")
    return out


def _child_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


_LIVE: list[subprocess.Popen] = []
"""The processes this driver started that may still run (each leads its own session)."""


def _start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", start_new_session=True)
    _LIVE.append(proc)
    return proc


def _kill(proc: subprocess.Popen) -> None:
    """End ``proc`` and the processes it started (it leads its own session)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    if proc in _LIVE:
        _LIVE.remove(proc)


def _on_signal(signum, _frame) -> None:
    """SIGTERM or SIGINT (``timeout``, Ctrl-C): end what was started, then exit."""
    for proc in list(_LIVE):
        _kill(proc)
    print(f"python -m tests.sanitize: stopped by signal {signum}", file=sys.stderr, flush=True)
    os._exit(128 + signum)


def warm_up(args: argparse.Namespace, budget: float) -> tuple[float, list[str]]:
    """Run the cases, unsanitized, in ``args.warm_jobs`` processes at once: this compiles every kernel
    specialization into Triton's on-disk cache, so the sanitized run only loads them (within
    ``budget`` seconds; what is not compiled by then, the sanitized run compiles). Returns the
    time taken and, for each process that failed, a few lines saying how (the sanitized run still
    decides: a memory-unsafe kernel may crash here, where nothing checks it)."""
    start = time.perf_counter()
    procs = []
    for shard in range(args.warm_jobs):
        cmd = [sys.executable, "-m", "tests.sanitize.cases", *_cases_args(args),
               "--shard", f"{shard}/{args.warm_jobs}"]
        procs.append(_start(cmd, _child_env()))
    problems = []
    deadline = time.monotonic() + budget
    for shard, proc in enumerate(procs):
        try:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill(proc)
            out, _ = proc.communicate()
            problems.append(f"warm-up shard {shard}: stopped after {budget:.0f} s")
            continue
        _LIVE.remove(proc)
        if proc.returncode != 0:
            tail = "\n    ".join(out.strip().splitlines()[-4:])
            problems.append(f"warm-up shard {shard}: exit code {proc.returncode}\n    {tail}")
    return time.perf_counter() - start, problems


def sanitizer_command(args: argparse.Namespace, sanitizer: str) -> list[str]:
    return [
        sanitizer, "--tool", "memcheck",
        "--error-exitcode", str(SANITIZER_ERROR_EXIT),
        "--print-limit", str(args.print_limit),
        "--target-processes", args.target_processes,
        "--destroy-on-device-error", "kernel",
        "--show-backtrace", "device",
        "--launch-timeout", "120",
        *args.sanitizer_arg,
        sys.executable, "-m", "tests.sanitize.cases", *_cases_args(args),
    ]


def run_sanitized(cmd: list[str], *, timeout: float, verbose: bool, log: Path | None
                  ) -> tuple[int | None, str]:
    """Run ``cmd``; echo its output as it comes (every line with ``verbose``, else the case lines and
    the first line of each error); return its exit code (None: killed at ``timeout``) and output."""
    proc = _start(cmd, _child_env(PYTORCH_NO_CUDA_MEMORY_CACHING="1"))
    lines: list[str] = []
    sink = log.open("w") if log else None

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if sink:
                sink.write(line)
                sink.flush()
            if verbose or not line.startswith("=========") or (
                    line.startswith("========= ") and not line[10:11].isspace()):
                print(line, end="", flush=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        code: int | None = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    _kill(proc)
    proc.wait()
    reader.join(timeout=30)
    if sink:
        sink.close()
    return code, "".join(lines)


def summarize(report: SanitizerReport, *, code: int | None, timeout: float, n_cases: int
              ) -> tuple[bool, list[str]]:
    """The verdict and the summary's lines."""
    out = []
    started, finished = len(report.cases_started), report.cases_finished
    out.append(f"cases: {n_cases}; started {started}, finished {finished}")
    if report.has_summary:
        printed = f"; {len(report.errors)} printed" if report.error_count else ""
        out.append(f"sanitizer errors: {report.error_count} (ERROR SUMMARY lines: "
                   f"{' + '.join(map(str, report.summaries))}{printed})")
    else:
        out.append(f"sanitizer errors: no ERROR SUMMARY line in the output "
                   f"({len(report.errors)} errors printed)")
    for kind, count in report.kinds().items():
        out.append(f"  {count} x {kind}")
    if report.kernels():
        out.append(f"in kernels: {', '.join(report.kernels())}")
    cases = report.cases_with_errors()
    if cases:
        out.append(f"cases with printed errors ({len(cases)}; errors past --print-limit are "
                   "counted, not placed):")
        out += [f"  {c}" for c in cases]
    if report.errors:
        first = report.errors[0]
        out.append(f"first error, in: {first.case or '(before the first case)'}")
        out += [f"  {line}" for line in first.lines[:12]]
    for problem in report.tool_problems:
        out.append(f"compute-sanitizer problem: {problem}")
    out.append("child/sanitizer exit code: " + ("killed after the timeout" if code is None
                                                else str(code)))

    reasons = []
    if code is None:
        reasons.append(f"timed out after {timeout:g} s (raise --timeout, or lower --sample)")
    if report.error_count:
        reasons.append(f"compute-sanitizer reported {report.error_count} errors")
    if report.tool_problems:
        reasons.append("compute-sanitizer reported a problem of its own")
    if code is not None and not report.has_summary:
        reasons.append("no ERROR SUMMARY: the sanitizer did not finish normally")
    if code not in (0, None) and not report.error_count:
        reasons.append(f"the sanitized process failed (exit code {code})")
    if code is not None and not report.done:
        reasons.append(f"the cases did not all run ({finished} of {n_cases} finished)")
    ok = not reasons
    out.append("PASS: no memory errors" if ok else "FAIL: " + "; ".join(reasons))
    return ok, out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.sanitize",
        description="Run a kernel module on the regression corpus and a fuzz sample under "
                    "compute-sanitizer memcheck; fail on any memory error.")
    add_case_arguments(parser)
    parser.add_argument("--sanitizer", metavar="PATH",
                        help=f"compute-sanitizer executable (default: ${SANITIZER_ENV}, PATH, "
                             "$CUDA_HOME/bin, /usr/local/cuda/bin, ...)")
    parser.add_argument("--sanitizer-arg", action="append", default=[], metavar="ARG",
                        help="extra compute-sanitizer option, e.g. --sanitizer-arg=--report-api-errors=no "
                             "(repeatable)")
    parser.add_argument("--print-limit", type=int, default=100,
                        help="errors compute-sanitizer prints in full; all are counted (default 100)")
    parser.add_argument("--target-processes", choices=("all", "application-only"), default="all",
                        help="processes the sanitizer tracks (default all)")
    parser.add_argument("--warm-jobs", type=int, default=min(8, os.cpu_count() or 1),
                        help="plain processes that compile the kernels first (0: none; "
                             "default min(8, cores))")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds for everything; the warm-up gets at most half (default 900)")
    parser.add_argument("--log", type=Path, help="write the sanitized run's full output here")
    parser.add_argument("--verbose", action="store_true",
                        help="echo every line of the sanitizer's output, not only each error's first")
    parser.add_argument("--list", action="store_true", help="print the case lines and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    prog = "python -m tests.sanitize"
    if args.list:
        from tests.sanitize.cases import main as cases_main

        return cases_main([*_cases_args(args), "--list"])
    if not cuda_available():
        print(f"{prog}: no CUDA device here (torch.cuda.is_available() is False). The memory-safety "
              "gate runs the compiled kernels under compute-sanitizer, which checks GPU code: run it "
              "on a CUDA machine (`--list` prints its cases anywhere).", file=sys.stderr)
        return 2
    sanitizer, looked = find_sanitizer(args.sanitizer)
    if sanitizer is None:
        print(f"{prog}: compute-sanitizer not found (looked in: {', '.join(looked)}). It comes with "
              "the CUDA toolkit, not with PyTorch's pip wheels; pass --sanitizer PATH or set "
              f"${SANITIZER_ENV}.", file=sys.stderr)
        return 2

    from tests.sanitize.cases import all_cases

    cases = all_cases(sample=args.sample, seed=args.seed, size=args.size,
                      corpus=not args.no_corpus, edge=not args.no_edge)
    by_source: dict[str, int] = {}
    for c in cases:
        by_source[c.source] = by_source.get(c.source, 0) + 1
    described = ", ".join(f"{n} {s}" for s, n in by_source.items())
    print(f"{prog}: kernel {args.kernel}, {len(cases)} cases ({described}; seed {args.seed}, "
          f"size {args.size})\nsanitizer: {sanitizer} ({sanitizer_version(sanitizer)})", flush=True)

    handlers = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _run(args, sanitizer, n_cases=len(cases))
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace, sanitizer: str, *, n_cases: int) -> int:
    """Warm up, run the cases under the sanitizer, print the summary; the exit code."""
    start = time.perf_counter()
    warm_s, warm_problems = (0.0, [])
    if args.warm_jobs > 0:
        warm_s, warm_problems = warm_up(args, budget=args.timeout / 2)
        print(f"warm-up: {args.warm_jobs} processes ran the cases unsanitized (compiling the kernels) "
              f"in {warm_s:.0f} s", flush=True)
        for problem in warm_problems:
            print(f"warm-up note (not a verdict): {problem}", flush=True)

    cmd = sanitizer_command(args, sanitizer)
    print("running: PYTORCH_NO_CUDA_MEMORY_CACHING=1 " + " ".join(cmd), flush=True)
    remaining = max(1.0, args.timeout - (time.perf_counter() - start))
    code, text = run_sanitized(cmd, timeout=remaining, verbose=args.verbose, log=args.log)
    report = parse(text)
    ok, lines = summarize(report, code=code, timeout=args.timeout, n_cases=n_cases)
    total = time.perf_counter() - start
    print(f"\n== memory-safety gate: kernel {args.kernel}, compute-sanitizer memcheck ==")
    print("\n".join(lines))
    print(f"time: {total:.0f} s (warm-up {warm_s:.0f} s)" + (f"; full output in {args.log}"
                                                            if args.log else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
