"""Glue between the check functions and pytest: parametrizing over cases, skipping what cannot run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from properties.kernels import NotApplicable

ROOT = Path(__file__).resolve().parents[1]


def case_params(cases, *, gpu: bool = False):
    """``pytest.param`` per case, with the case line as its id, marked ``gpu`` when asked."""
    marks = [pytest.mark.gpu] if gpu else []
    return [pytest.param(case, id=str(case), marks=marks) for case in cases]


def run_check(check, kernel, case) -> None:
    """Run a check; a kernel that lacks what it needs is a skip that says why, not a pass."""
    try:
        check(kernel, case)
    except NotApplicable as reason:
        pytest.skip(str(reason))


def run_as_a_person(*args: str, timeout: float, cwd: Path = ROOT,
                    **extra_env: str) -> subprocess.CompletedProcess:
    """``python *args`` in ``cwd`` (the repository root unless given) in a subprocess, as a person
    runs it, printed for the test's log. The environment is this one's, less what a person's shell
    does not have: the ``TRITON_INTERPRET`` that conftest.py set here (flash._runtime, on a machine
    without CUDA), as each command must make that choice itself (inherited, it hid ``python -m fuzz
    repro ... --kernel flash`` failing every check on the CPU), and ``PYTEST_XDIST_WORKER``, which
    would make a pytest run inside act as this worker; plus ``extra_env``."""
    inherited = {name: value for name, value in os.environ.items()
                 if name not in ("TRITON_INTERPRET", "PYTEST_XDIST_WORKER")}
    result = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, env={**inherited, **extra_env})
    print(f"$ python {' '.join(args)}  (exit {result.returncode})\n{result.stdout}{result.stderr}")
    return result
