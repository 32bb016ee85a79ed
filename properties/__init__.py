"""Invariants of attention as plain check functions, and the one error model they share.

A check is ``check_<property>(kernel, case, device=None)``: it runs the kernel module on the case and
raises ``AssertionError`` naming the check, kernel, case, worst element and bound, or
:class:`~properties.kernels.NotApplicable` when the kernel lacks what the check needs. No pytest
inside: the tests, the fuzzer and ``python -m properties`` all call the same functions.
"""

from properties.case import Case
from properties.kernels import NotApplicable, load_kernel
from properties.oracle_agreement import (
    check_gradients_match_oracle,
    check_lse_matches_oracle,
    check_output_matches_oracle,
    default_device,
)

ORACLE_CHECKS = (check_output_matches_oracle, check_lse_matches_oracle, check_gradients_match_oracle)
"""Every check that compares against the float64 oracle."""

ALL_CHECKS = ORACLE_CHECKS
"""Every check, in the order reports list them."""

__all__ = [
    "ALL_CHECKS",
    "ORACLE_CHECKS",
    "Case",
    "NotApplicable",
    "check_gradients_match_oracle",
    "check_lse_matches_oracle",
    "check_output_matches_oracle",
    "default_device",
    "load_kernel",
]
