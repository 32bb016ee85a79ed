"""Glue between the check functions and pytest: parametrizing over cases, skipping what cannot run."""

from __future__ import annotations

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
