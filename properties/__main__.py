"""``python -m properties``: the suite's verdict on a kernel module, as a table.

Runs every check on the fixed grid of cases (the CPU grid without a GPU, else the GPU grid) and
prints, per check, how many cases passed, failed, or did not apply; then each failure as its case
line and message. Exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import sys
import time

from properties import ALL_CHECKS, NotApplicable, load_kernel
from properties.grids import cpu_cases, gpu_cases
from properties.kernels import DEFAULT_KERNEL


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m properties", description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default=DEFAULT_KERNEL, help="kernel module (default: flash)")
    parser.add_argument("--grid", choices=("auto", "cpu", "gpu"), default="auto",
                        help="which fixed grid of cases (default: gpu if CUDA is available)")
    parser.add_argument("--limit", type=int, default=None, help="run only the first N cases")
    args = parser.parse_args(argv)

    import torch

    kernel = load_kernel(args.kernel)
    grid = args.grid if args.grid != "auto" else ("gpu" if torch.cuda.is_available() else "cpu")
    cases = (gpu_cases() if grid == "gpu" else cpu_cases())[: args.limit]
    print(f"kernel {args.kernel}: {len(ALL_CHECKS)} checks x {len(cases)} cases ({grid} grid)")

    failures: list[tuple[str, object, str]] = []
    rows = []
    start = time.perf_counter()
    for check in ALL_CHECKS:
        passed = failed = skipped = 0
        for case in cases:
            try:
                check(kernel, case)
                passed += 1
            except NotApplicable:
                skipped += 1
            except Exception as exc:  # noqa: BLE001 - a crash is this case's failure, not the run's end
                failed += 1
                failures.append((check.__name__, case, f"{type(exc).__name__}: {exc}"))
        rows.append((check.__name__, passed, failed, skipped))
        print(f"  {check.__name__:<40} passed {passed:4d}  failed {failed:4d}  n/a {skipped:4d}",
              flush=True)

    elapsed = time.perf_counter() - start
    for name, case, message in failures:
        print(f"\nFAILED {name}\n  replay: {case}\n  {message.splitlines()[0]}")
    n_failed = sum(r[2] for r in rows)
    print(f"\n{'FAIL' if n_failed else 'PASS'}: {n_failed} failed, "
          f"{sum(r[1] for r in rows)} passed, {sum(r[3] for r in rows)} not applicable "
          f"in {elapsed:.0f} s")
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
