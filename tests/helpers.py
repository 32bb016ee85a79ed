"""Glue between the check functions and pytest: parametrizing over cases, skipping what cannot run."""

from __future__ import annotations

import os

import pytest

from properties.kernels import NotApplicable


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


def shell_env(**extra: str) -> dict[str, str]:
    """The environment for a command run as a person runs it, in a subprocess: this one's, less the
    ``TRITON_INTERPRET`` that conftest.py set here (flash._runtime, on a machine without CUDA), which
    a person's shell does not have: each command must make that choice itself (inherited, it hid
    ``python -m fuzz repro ... --kernel flash`` failing every check on the CPU); plus ``extra``."""
    inherited = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    return {**inherited, **extra}
