"""Invariants of attention as plain check functions, and the one error model they share.

A check is ``check_<property>(kernel, case, device=None)``: it runs the kernel module on the case and
raises ``AssertionError`` naming the check, kernel, case, worst element and bound, or
:class:`~properties.kernels.NotApplicable` when the kernel lacks what the check needs. No pytest
inside: the tests, the fuzzer and ``python -m properties`` all call the same functions. The
invariants, their math and which hold bit-for-bit are listed in ``properties/README.md``.
"""

from properties.case import Case
from properties.causality import (
    check_causal_future_ignored,
    check_causal_gradients_ignore_future,
    check_window_hides_keys,
)
from properties.determinism import check_backward_repeatable, check_deterministic
from properties.features import (
    check_bottom_right_square_exact,
    check_empty_rows,
    check_gqa_matches_repeated_kv,
    check_scale_matches_prescaled_q,
    check_softcap,
    check_window_extremes_exact,
)
from properties.gradients import check_gradcheck_float64, check_gradients_with_frozen_inputs
from properties.inference import check_inference_mode
from properties.kernels import NotApplicable, load_kernel
from properties.oracle_agreement import (
    check_gradients_match_oracle,
    check_lse_matches_oracle,
    check_output_matches_oracle,
    default_device,
)
from properties.side_effects import (
    check_default_dtype_ignored,
    check_inputs_unchanged,
    check_inputs_updated_in_place,
    check_shared_inputs,
)
from properties.softmax import check_lse_normalizes_rows, check_rows_normalized
from properties.stability import (
    check_convex_hull,
    check_extreme_scores_finite,
    check_identical_keys,
    check_large_logits_stable,
    check_single_key,
)
from properties.streams import check_current_stream
from properties.symmetry import (
    check_batch_independent,
    check_key_translation,
    check_key_value_permutation,
    check_query_permutation,
    check_value_affine,
)
from properties.varlen import VARLEN_CHECKS
from properties.varlen_case import VarlenCase

ORACLE_CHECKS = (check_output_matches_oracle, check_lse_matches_oracle, check_gradients_match_oracle)
"""Every check that compares against the float64 oracle."""

INVARIANT_CHECKS = (
    check_rows_normalized,
    check_lse_normalizes_rows,
    check_causal_future_ignored,
    check_causal_gradients_ignore_future,
    check_value_affine,
    check_key_translation,
    check_key_value_permutation,
    check_query_permutation,
    check_batch_independent,
    check_convex_hull,
    check_single_key,
    check_identical_keys,
    check_deterministic,
    check_backward_repeatable,
    check_large_logits_stable,
    check_extreme_scores_finite,
    check_gradcheck_float64,
    check_gradients_with_frozen_inputs,
    check_inputs_unchanged,
    check_inputs_updated_in_place,
    check_shared_inputs,
    check_default_dtype_ignored,
    check_inference_mode,
    check_current_stream,
)
"""Every check of a property that holds for any correct kernel, with or without a reference."""

FEATURE_CHECKS = (
    check_gqa_matches_repeated_kv,
    check_window_hides_keys,
    check_window_extremes_exact,
    check_bottom_right_square_exact,
    check_empty_rows,
    check_softcap,
    check_scale_matches_prescaled_q,
)
"""Every check of a feature of the extended contract (``properties/features.py``, and the window's
in ``properties/causality.py``): n/a for a module that does not declare the feature."""

ALL_CHECKS = ORACLE_CHECKS + INVARIANT_CHECKS + FEATURE_CHECKS
"""Every check of a :class:`Case`, in the order reports list them. The checks of packed
(variable-length) batches take a :class:`VarlenCase` instead and are :data:`VARLEN_CHECKS`
(``properties/varlen.py``), not in here."""

BAND_EDGE_CHECKS = (
    check_output_matches_oracle,
    check_lse_matches_oracle,
    check_gradients_match_oracle,
    check_causal_future_ignored,
    check_causal_gradients_ignore_future,
    check_window_hides_keys,
    check_empty_rows,
)
"""The checks that see a key shown or hidden wrongly (the oracle's, and hidden keys perturbed):
what the band-edge grids (``properties.grids.band_edge_*_cases``) run, where the feature grids
run every check."""

EVERY_CHECK = ALL_CHECKS + VARLEN_CHECKS
"""Every check, of cases and of packed batches: what the fuzzer and the corpus can name."""


def checks_for(case: Case | VarlenCase) -> tuple:
    """The checks that take ``case``'s kind: :data:`VARLEN_CHECKS` or :data:`ALL_CHECKS`."""
    return VARLEN_CHECKS if isinstance(case, VarlenCase) else ALL_CHECKS


__all__ = [
    "ALL_CHECKS",
    "BAND_EDGE_CHECKS",
    "EVERY_CHECK",
    "FEATURE_CHECKS",
    "INVARIANT_CHECKS",
    "ORACLE_CHECKS",
    "VARLEN_CHECKS",
    "Case",
    "VarlenCase",
    "checks_for",
    "NotApplicable",
    "default_device",
    "load_kernel",
    *(check.__name__ for check in ALL_CHECKS),
]
# The varlen checks are reached as properties.varlen.check_*; their names are not re-exported.
