"""``python -m tests.mutants``: run the test suite against every mutant, each in its own process.

Prints a table (mutant, killed or survived, the first test that failed, time to kill) and exits
non-zero if the correct kernel fails or any mutant survives. ``--only NAME`` runs one mutant;
``--gpu`` runs ``pytest -m gpu`` instead (for mutants only a GPU can show). Extra arguments after
``--`` go to pytest. Uses the ``ci`` Hypothesis profile (``CI=1``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from tests.mutants.catalogue import CATALOGUE

RUN_ONE = (
    "import sys, pytest\n"
    "from tests.mutants import activate\n"
    "from tests.mutants.catalogue import CATALOGUE\n"
    "name = sys.argv[1]\n"
    "if name != '-': activate(next(m for m in CATALOGUE if m.name == name))\n"
    "sys.exit(pytest.main(sys.argv[2:]))\n"
)


def run(name: str, pytest_args: list[str]) -> tuple[int, str, float]:
    env = {**os.environ, "CI": "1"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", RUN_ONE, name, *pytest_args], env=env,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    out = proc.stdout + proc.stderr
    failed = re.search(r"^(?:FAILED|ERROR) (.+?)(?: - |$)", out, re.M)
    if failed:
        return proc.returncode, failed.group(1), elapsed
    # A crash (a segfault from an out-of-bounds store in the interpreter, say): faulthandler's
    # traceback names the test function that was running.
    frames = re.findall(r'File "[^"]*/(tests/test_\w+\.py)", line \d+ in (\w+)', out)
    if frames:
        return proc.returncode, "process crashed in {}::{}".format(*frames[-1]), elapsed
    lines = out.strip().splitlines()
    return proc.returncode, lines[-1] if lines else "", elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants")
    parser.add_argument("--only", action="append", help="mutant name (repeatable)")
    parser.add_argument("--gpu", action="store_true", help="run `pytest -m gpu` (GPU-only mutants)")
    parser.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments")
    args = parser.parse_args(argv)

    if any(a in ("-n", "--numprocesses", "--dist") or a.startswith(("-n", "--numprocesses=", "--dist="))
           for a in args.pytest_args):
        # A mutant is activated in the process that runs pytest; xdist's workers are new processes
        # that import the correct kernel, so every mutant would "survive" (seen 2026-12-02).
        parser.error("pytest-xdist (-n, --dist) cannot run mutants: the workers would test the "
                     "correct kernel; run without it")
    base = ["-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=--strict-markers -rf"]
    if args.gpu:
        base += ["-m", "gpu"]
    base += args.pytest_args
    mutants = [m for m in CATALOGUE if not args.only or m.name in args.only]
    if not args.gpu:
        mutants = [m for m in mutants if not m.gpu_only]

    start = time.perf_counter()
    rc, summary, elapsed = run("-", base)
    print(f"correct kernel: {'PASS' if rc == 0 else 'FAIL'} in {elapsed:.0f} s ({summary})", flush=True)
    survivors = []
    print(f"{'mutant':<34} {'verdict':<9} {'time':>6}  killed by")
    for m in mutants:
        rc_m, test, t = run(m.name, base)
        # pytest exits 1 when a test failed; any other non-zero code (a crash at import or
        # collection) still means the suite refused the mutant, and the table says which.
        verdict = "SURVIVED" if rc_m == 0 else ("killed" if rc_m == 1 else f"killed({rc_m})")
        if rc_m < 0:
            verdict = f"crashed({-rc_m})"  # killed by a signal: the suite still refused it
        if rc_m == 0:
            survivors.append(m.name)
        print(f"{m.name:<34} {verdict:<9} {t:5.0f}s  {test}", flush=True)
    total = time.perf_counter() - start
    print(f"\n{len(mutants) - len(survivors)}/{len(mutants)} mutants killed; correct kernel "
          f"{'passes' if rc == 0 else 'FAILS'}; total {total:.0f} s")
    return 0 if rc == 0 and not survivors else 1


if __name__ == "__main__":
    sys.exit(main())
