"""Each invariant check, shown to fail: a deliberately broken kernel module per check.

Every module in tests/broken/ has one realistic bug (its docstring names it and the smallest input
that shows it). On one small case, the intended check must fail with a message that names the
check, the module, the case and the bound; and exactly the listed checks must fail, so that a check
that stops seeing its bug, or starts failing correct code, shows up here. Where the list holds only
the intended check, no other check sees that bug. These tests run the broken modules, never the
``--kernel`` under test.

The varlen checks (properties/varlen.py) have their own broken modules, ``tests/broken/varlen_*.py``,
each a bug of the packed path on top of a correct dense one, judged on one packed case.
"""

import math

import pytest

from properties import ALL_CHECKS, FEATURE_CHECKS, INVARIANT_CHECKS, Case, NotApplicable, load_kernel
from properties.grids import (
    decode_gpu_cases,
    feature_cpu_cases,
    feature_gpu_cases,
    property_cpu_cases,
    property_gpu_cases,
)
from properties.oracle_agreement import check_output_matches_oracle
from properties.side_effects import DTYPE_BOUND, check_inputs_unchanged, check_inputs_updated_in_place
from properties.varlen import (
    NO_QUERIES,
    VARLEN_CHECKS,
    check_varlen_inputs_unchanged,
    check_varlen_matches_oracle,
)
from properties.varlen_case import VarlenCase
from properties.varlen_grids import (
    varlen_cpu_cases,
    varlen_decode_cpu_cases,
    varlen_decode_gpu_cases,
    varlen_gpu_cases,
)

CASE = Case(33, 40, 16, (2,), "float32", False)
"""Non-causal (the causal checks make every case causal themselves), float32 (float16 output
rounds away the last-bit bugs: a nondeterministic dq), keys over two 16-key tiles."""

BROKEN = {
    # check: (module in tests/broken, every check that fails on CASE, intended one first).
    # check_gradients_with_frozen_inputs asks for the same gradients as check_gradients_match_oracle,
    # a part at a time, so it fails wherever that check's gradients are wrong; only the training
    # path's output (training_path_unscaled, below) is that check's alone.
    "check_rows_normalized": ("zero_tile_skip", {"check_rows_normalized"}),
    # Right under the default dtype float32; under float64 or bfloat16 the lse takes that dtype.
    "check_default_dtype_ignored": ("lse_in_default_dtype", {"check_default_dtype_ignored"}),
    "check_lse_normalizes_rows": ("lse_base2", {
        "check_lse_normalizes_rows", "check_lse_matches_oracle", "check_key_translation",
        "check_single_key", "check_large_logits_stable",
        "check_extreme_scores_finite"}),  # every check that looks at the lse
    "check_causal_future_ignored": ("max_before_mask", {
        "check_causal_future_ignored",
        "check_causal_gradients_ignore_future"}),  # autograd through the max reaches future keys
    "check_causal_gradients_ignore_future": ("backward_mask_off_by_one", {
        "check_causal_gradients_ignore_future"}),
    "check_value_affine": ("eps_denominator", {
        "check_value_affine", "check_rows_normalized", "check_output_matches_oracle",
        "check_gradients_match_oracle", "check_gradients_with_frozen_inputs", "check_single_key"}),
    # A scale of 1 - 1e-3 / l on every row is seen widely, but not by check_identical_keys: with
    # n_k = 40 equal keys, l = 40 and the error (2.5e-5 relative) is under the float32 floor once
    # that floor counts the scores' rounding (error_model.score_magnitude).
    "check_key_translation": ("score_clamp", {
        "check_key_translation", "check_large_logits_stable",
        "check_extreme_scores_finite"}),  # all three push scores past the clamp
    "check_key_value_permutation": ("l_not_rescaled", {
        "check_key_value_permutation", "check_output_matches_oracle", "check_lse_matches_oracle",
        "check_gradients_match_oracle", "check_gradients_with_frozen_inputs", "check_rows_normalized",
        "check_lse_normalizes_rows", "check_value_affine", "check_large_logits_stable"}),
    "check_query_permutation": ("l_carried_over", {
        "check_query_permutation", "check_output_matches_oracle", "check_gradients_match_oracle",
        "check_gradients_with_frozen_inputs", "check_rows_normalized", "check_value_affine",
        "check_single_key", "check_identical_keys", "check_large_logits_stable"}),
    "check_batch_independent": ("batch_offset", {
        "check_batch_independent", "check_output_matches_oracle", "check_gradients_match_oracle",
        "check_gradients_with_frozen_inputs", "check_rows_normalized", "check_value_affine"}),
    "check_convex_hull": ("acc_not_rescaled", {
        "check_convex_hull", "check_output_matches_oracle", "check_gradients_match_oracle",
        "check_gradients_with_frozen_inputs", "check_rows_normalized", "check_value_affine",
        "check_key_value_permutation", "check_large_logits_stable", "check_extreme_scores_finite"}),
    "check_single_key": ("padding_keys_seen", {
        "check_single_key", "check_output_matches_oracle", "check_lse_matches_oracle",
        "check_gradients_match_oracle", "check_gradients_with_frozen_inputs", "check_rows_normalized",
        "check_lse_normalizes_rows", "check_value_affine", "check_key_translation",
        "check_identical_keys"}),
    "check_identical_keys": ("first_key_twice", {
        "check_identical_keys", "check_output_matches_oracle", "check_lse_matches_oracle",
        "check_gradients_match_oracle", "check_gradients_with_frozen_inputs",
        "check_lse_normalizes_rows", "check_key_value_permutation", "check_single_key",
        "check_large_logits_stable"}),
    "check_deterministic": ("nondeterministic_backward", {
        # two backwards of one forward differ too, and calls under two default dtypes
        "check_deterministic", "check_backward_repeatable", "check_default_dtype_ignored"}),
    # gradcheck runs several backwards of one forward too, but only on a module that takes float64
    # (flash does not): for one that does not, this check is the only one that sees it.
    "check_backward_repeatable": ("lse_base2_in_place", {
        "check_backward_repeatable", "check_gradcheck_float64"}),
    "check_large_logits_stable": ("no_max_subtraction", {
        "check_large_logits_stable", "check_extreme_scores_finite"}),
    "check_extreme_scores_finite": ("fused_score_exponent", {"check_extreme_scores_finite"}),
    "check_gradcheck_float64": ("dq_unscaled", {
        "check_gradcheck_float64", "check_gradients_match_oracle", "check_gradients_with_frozen_inputs"}),
    "check_gradients_with_frozen_inputs": ("dq_only_path_unscaled", {"check_gradients_with_frozen_inputs"}),
    # q comes back scaled: every check that looks at q after a call (the oracle's, a second call's)
    # sees a q that is not the one the call was given; the causal-gradient and identical-keys checks
    # build their own q, the convex hull is indifferent to the scores' temperature. With q frozen,
    # autograd's backward finds q changed in place and raises (check_gradients_with_frozen_inputs).
    "check_inputs_unchanged": ("scale_folded_into_q", {
        "check_inputs_unchanged", "check_output_matches_oracle", "check_lse_matches_oracle",
        "check_gradients_match_oracle", "check_gradients_with_frozen_inputs", "check_rows_normalized",
        "check_lse_normalizes_rows", "check_causal_future_ignored", "check_value_affine",
        "check_key_translation", "check_key_value_permutation", "check_query_permutation",
        "check_batch_independent", "check_single_key", "check_deterministic",
        "check_backward_repeatable",  # its fresh forward gets the q the first call scaled
        "check_large_logits_stable", "check_gradcheck_float64", "check_inference_mode",
        "check_extreme_scores_finite", "check_shared_inputs",
        "check_default_dtype_ignored"}),  # every later call reads the q an earlier one scaled
    # Outside autograd, k and v are prepared once per tensor object: every fresh call is right, and
    # only a call after an input was overwritten in place reads the old values.
    "check_inputs_updated_in_place": ("cache_by_tensor", {"check_inputs_updated_in_place"}),
    # The mask is kept per shape: every check before this one built it outside inference mode, at
    # CASE's lengths; this check's own lengths are new, so its inference-mode call builds it.
    "check_inference_mode": ("mask_kept_from_inference_mode", {"check_inference_mode"}),
    # One gradient buffer per input storage, stored into: only a tensor in two roles (k is v) sums
    # the wrong gradients.
    "check_shared_inputs": ("gradients_stored_per_storage", {"check_shared_inputs"}),
}

ORACLE_BROKEN = {
    # An oracle check's part that no invariant covers: the output of the call autograd records
    # (inputs that require grad), which the no-grad output check never sees. gradcheck compares the
    # same forward with the backward, which recomputes correctly from q, k, v, so it sees it too.
    "check_gradients_match_oracle": ("training_path_unscaled", {
        "check_gradients_match_oracle", "check_gradcheck_float64"}),
}

FEATURE_BROKEN = {
    # The feature checks give CASE the feature they need (the window check a window, the GQA
    # check grouped heads...), so the same plain case serves. Each module is tests/conforming.py
    # with one step replaced (tests/broken/_features.py); the oracle checks see none of these bugs
    # on CASE, which uses no feature: the bugs live where only the feature checks look.
    "check_gqa_matches_repeated_kv": ("gqa_kv_head_modulo", {"check_gqa_matches_repeated_kv"}),
    "check_window_hides_keys": ("window_right_off_by_one", {
        "check_window_hides_keys",
        "check_window_extremes_exact"}),  # (-1, 0) becomes (-1, 1): not the causal mask
    "check_window_extremes_exact": ("window_zero_unbounded", {"check_window_extremes_exact"}),
    "check_bottom_right_square_exact": ("bottom_right_strict", {"check_bottom_right_square_exact"}),
    "check_empty_rows": ("hidden_large_negative", {"check_empty_rows"}),
    "check_softcap": ("softcap_last_tile_only", {"check_softcap"}),
    "check_scale_matches_prescaled_q": ("scale_ignored", {"check_scale_matches_prescaled_q"}),
}

PART_BROKEN = {
    # module in tests/broken: (the check, every check that fails on CASE): a part of a check that
    # its module above does not reach.
    # Only the backward keeps k and v, per tensor object: every output is right, and every backward but
    # the one after an in-place update.
    "backward_kv_cached_by_tensor": ("check_inputs_updated_in_place", {"check_inputs_updated_in_place"}),
    # Inputs deduplicated by address, q's copy scaled: only self-attention (q is k) reads k scaled.
    "inputs_deduplicated_by_address": ("check_shared_inputs", {"check_shared_inputs"}),
    # One output buffer per shape outside autograd, in attention() alone: every output is right when
    # its call returns, and only a check that holds one while calling again sees it overwritten.
    "output_buffer_per_shape": ("check_inputs_updated_in_place", {"check_inputs_updated_in_place"}),
    # Heads visited in an order drawn from the caller's generator: every bit of every output is right,
    # and the caller's random state advances at each call (properties.process_state).
    "rng_drawn_per_call": ("check_inputs_unchanged", {"check_inputs_unchanged"}),
    # The same through Python's global random (a call sampled for a timing log), which torch's
    # generators do not show.
    "python_rng_drawn": ("check_inputs_unchanged", {"check_inputs_unchanged"}),
    # rowsum(do * o) kept from the first backward of one forward: a second backward for the same
    # upstream gradient is right, one for another gets the first's (no float64: no gradcheck).
    "delta_kept_for_second_backward": ("check_backward_repeatable", {"check_backward_repeatable"}),
}

SETTINGS_BROKEN = {
    # module in tests/broken: a setting saved and restored to torch's default, not the caller's value,
    # in grouped-query calls; it shows only from a caller's state off the defaults (its round of
    # check_inputs_unchanged under properties.process_state.settings_off_default).
    "deterministic_warn_only_reset": "torch.is_deterministic_algorithms_warn_only_enabled()",
    # SDPA's cuDNN backend turned off for each call and back on after it, whatever the caller had.
    "sdpa_cudnn_reset": "torch.backends.cuda.cudnn_sdp_enabled()",
}

GPU_BROKEN = {
    # check: module in tests/broken, for the checks that run on CUDA devices only (n/a on the CPU,
    # where these tests run; test_gpu_broken_module_fails_its_check runs them on a GPU).
    "check_current_stream": "default_stream_only",
}

CHECKS = {check.__name__: check for check in ALL_CHECKS}


def test_every_invariant_has_a_broken_module():
    assert not set(BROKEN) & set(GPU_BROKEN)
    assert set(BROKEN) | set(GPU_BROKEN) == {check.__name__ for check in INVARIANT_CHECKS}
    assert set(FEATURE_BROKEN) == {check.__name__ for check in FEATURE_CHECKS}
    modules = [module for module, _ in (*BROKEN.values(), *FEATURE_BROKEN.values(), *ORACLE_BROKEN.values())]
    modules += list(GPU_BROKEN.values())
    assert len(set(modules)) == len(modules), "one bug per check"
    assert not set(PART_BROKEN) & set(modules)


def _failures(kernel, case):
    failed = {}
    for check in ALL_CHECKS:
        try:
            check(kernel, case)
        except NotApplicable:
            pass
        except AssertionError as exc:
            failed[check.__name__] = str(exc)
    return failed


@pytest.mark.parametrize("check_name", [*BROKEN, *FEATURE_BROKEN, *ORACLE_BROKEN])
def test_broken_module_fails_its_check(check_name):
    module, expected = {**BROKEN, **FEATURE_BROKEN, **ORACLE_BROKEN}[check_name]
    _assert_fails(check_name, module, expected)


@pytest.mark.parametrize("module", list(PART_BROKEN))
def test_broken_module_fails_the_part_of_its_check(module):
    check_name, expected = PART_BROKEN[module]
    _assert_fails(check_name, module, expected)


@pytest.mark.parametrize("module", list(SETTINGS_BROKEN))
def test_a_setting_restored_to_its_default_fails(module):
    """Right in every output, and from torch's defaults it leaves the state as it found it: only
    the round under moved settings names the setting it reset."""
    case = CASE.replace(leading=(4,), kv_heads=2)
    check_inputs_unchanged(load_kernel("tests.conforming"), case)
    with pytest.raises(AssertionError) as failure:
        check_inputs_unchanged(load_kernel(f"tests.broken.{module}"), case)
    message = str(failure.value)
    assert "the caller having set" in message and SETTINGS_BROKEN[module] in message, message


@pytest.mark.gpu
@pytest.mark.parametrize("check_name", list(GPU_BROKEN))
def test_gpu_broken_module_fails_its_check(check_name):
    """On a GPU, the module fails its check with a full message, and the correct module it is built
    on (tests/conforming.py) passes it, as flash does (the property grids): the check's own false
    alarm would show here. Only this check is asked: the others are the CPU tests' to hold."""
    module = GPU_BROKEN[check_name]
    check = CHECKS[check_name]
    check(load_kernel("tests.conforming"), CASE)
    with pytest.raises(AssertionError) as failure:
        check(load_kernel(f"tests.broken.{module}"), CASE)
    _assert_full_message(check_name, module, str(failure.value))


@pytest.mark.gpu
def test_property_gpu_grid_has_more_slices_than_a_grid_axis_takes():
    """The GPU property grid's case with more than 65535 leading-dim slices fails a kernel that puts
    them on a grid's second axis (tests/broken/slices_on_grid_y.py) and passes the same kernel's
    correct twin (tests/conforming.py): CUDA, not the interpreter, caps that axis."""
    many = [case for case in property_gpu_cases() if math.prod(case.leading) > 65535]
    assert many, "no GPU property case has more slices than a grid's second axis takes"
    check = CHECKS["check_output_matches_oracle"]
    check(load_kernel("tests.conforming"), many[0])
    with pytest.raises(Exception) as failure:  # the launch's error, as a gate sees it
        check(load_kernel("tests.broken.slices_on_grid_y"), many[0])
    assert "invalid argument" in str(failure.value) or "grid" in str(failure.value).lower(), failure.value


def _assert_full_message(check_name: str, module: str, message: str) -> None:
    """The failure names the check, the module, the case, and (unless a call raised, which has none)
    the worst element and the bound; a change of the process's state names the setting."""
    for fragment in (check_name, f"kernel tests.broken.{module}", "Case(n_q="):
        assert fragment in message, f"{fragment!r} missing from: {message}"
    if _is_a_setting_failure(message):
        _assert_names_a_setting(message)
        return
    if DTYPE_BOUND in message:  # a result of another dtype or shape: no element to name
        return
    if " raised " not in message:
        assert "bound" in message or "non-finite values" in message, f"no bound in: {message}"
        assert "batch (" in message or "d o[" in message, f"no worst element in: {message}"


def _is_a_setting_failure(message: str) -> bool:
    """A failure of the process's state (``properties.process_state``): it has no element."""
    return "process-wide state after" in message


def _assert_names_a_setting(message: str) -> None:
    """Such a failure names each setting that changed ("was ..., is now ...", or a generator that
    "changed") and the bound."""
    assert "bound" in message and (" is now " in message or ") changed" in message), message


def _assert_fails(check_name: str, module: str, expected: set[str]) -> None:
    """``tests.broken.<module>`` fails ``check_name`` on CASE with a full message, and fails exactly
    the checks ``expected``."""
    kernel = load_kernel(f"tests.broken.{module}")
    failed = _failures(kernel, CASE)
    assert check_name in failed, f"{check_name} did not catch tests.broken.{module}"
    _assert_full_message(check_name, module, failed[check_name])
    assert set(failed) == expected, (
        f"tests.broken.{module}: failing checks {sorted(failed)}, expected {sorted(expected)}"
    )


PRECISION_BROKEN = {
    # module in tests/broken: (the check it is meant for, the float16 case, every check that fails
    # on it). Each keeps one float32 intermediate of tests/broken/_blockwise.py (online softmax over
    # 16-key tiles, a backward from the saved lse) in the input dtype; each case is the smallest
    # that shows it (the module's docstring says why).
    "m_in_input_dtype": ("check_lse_matches_oracle", Case(1, 17, 16, (), "float16", False), {
        "check_lse_matches_oracle", "check_lse_normalizes_rows", "check_key_translation",
        "check_single_key", "check_large_logits_stable"}),  # every check that looks at the lse
    "l_in_input_dtype": ("check_lse_matches_oracle", Case(1, 17, 16, (), "float16", False), {
        "check_lse_matches_oracle", "check_lse_normalizes_rows"}),
    "lse_in_input_dtype": ("check_lse_matches_oracle", Case(1, 3, 16, (), "float16", False), {
        "check_lse_matches_oracle", "check_lse_normalizes_rows", "check_key_translation",
        "check_single_key", "check_large_logits_stable"}),
    # 65 tiles of roundings, about sqrt(65) u of the output: within the output's own bound (twice
    # the float16 reference's error); a v scaled and shifted, compared with the exact a o + b, shows it.
    "acc_in_input_dtype": ("check_value_affine", Case(129, 1025, 64, (1,), "float16", False), {
        "check_value_affine"}),
    "delta_in_input_dtype": ("check_gradients_match_oracle", Case(4, 1, 16, (), "float16", False), {
        "check_gradients_match_oracle", "check_gradients_with_frozen_inputs"}),
    # Equal scores: every exponent is -log(3697), which float16 and bfloat16 both round by 7 u.
    "p_in_input_dtype": ("check_gradients_match_oracle",
                         Case(4, 3697, 16, (), "float16", False, distribution="equal_scores"), {
                             "check_gradients_match_oracle", "check_gradients_with_frozen_inputs"}),
}
"""Precision bugs: a float32 step of a flash kernel (running max, running sum, accumulator, the lse,
the backward's ``D`` and its recomputed probabilities) kept in the input dtype. None changes the
math, so only the error model's bounds can see them: these fail only if each bound is as sharp as
the measurement in docs/sensitivity-cpu.md says (``python -m fuzz sensitivity``)."""


@pytest.mark.parametrize("module", list(PRECISION_BROKEN))
def test_precision_broken_module_fails(module):
    check_name, case, expected = PRECISION_BROKEN[module]
    assert _failures(load_kernel("tests.broken._blockwise"), case) == {}, (
        "the correct blockwise kernel the precision bugs start from fails")
    failed = _failures(load_kernel(f"tests.broken.{module}"), case)
    assert check_name in failed, f"{check_name} did not catch tests.broken.{module} on {case}"
    assert set(failed) == expected, (
        f"tests.broken.{module}: failing checks {sorted(failed)}, expected {sorted(expected)}"
    )


@pytest.mark.gpu
@pytest.mark.parametrize("module", list(PRECISION_BROKEN))
def test_precision_broken_module_fails_in_bfloat16_on_a_gpu(module):
    """The same bugs in bfloat16, against the GPU's own bfloat16 reference (cuBLAS and its softmax)."""
    check_name, case, _ = PRECISION_BROKEN[module]
    case = case.replace(dtype="bfloat16")
    assert _failures(load_kernel("tests.broken._blockwise"), case) == {}
    failed = _failures(load_kernel(f"tests.broken.{module}"), case)
    assert check_name in failed, (
        f"{check_name} did not catch tests.broken.{module} on {case}; failing: {sorted(failed)}")


VARLEN_CASE = VarlenCase((40, 0, 17, 33), (31, 3, 17, 40), 2, 16, "float32", True)
"""Causal (the per-sequence diagonal is where packed offsets go wrong), float32 (the bit-level bugs
would round away in float16); sequence 0 has more queries than keys (rows 31..39 reach past its
keys); sequence 1 has keys and no queries; from sequence 2 on, ``cu_q[b] - cu_k[b] = 6``."""

VARLEN_FEATURE_CASE = VARLEN_CASE.replace(causal_alignment="bottom_right")
""":data:`VARLEN_CASE` aligned bottom-right, for the modules whose bug is in a feature (they declare
it; the others do not, so it would be n/a for them): per sequence ``n_k - n_q`` is -9, 3, 0 and 7,
where the packed batch's ``total_k - total_q`` is 1."""

VARLEN_BROKEN = {
    # module in tests/broken: (the check it is meant for, every varlen check that fails on its case).
    # check_varlen_gradients_with_frozen_inputs asks for the gradients that
    # check_varlen_gradients_match_oracle compares, a part at a time: it fails wherever they are wrong.
    "varlen_key_past_end": ("check_varlen_matches_oracle", {
        "check_varlen_matches_oracle", "check_varlen_gradients_match_oracle", "check_varlen_loose_max_seqlen",
        "check_varlen_gradients_with_frozen_inputs", "check_varlen_no_leakage",
        "check_varlen_matches_separate"}),  # a wrong key is seen by all
    # The diagonal moves within the sequence's own keys, so nothing leaks across sequences.
    "varlen_causal_offset": ("check_varlen_matches_oracle", {
        "check_varlen_matches_oracle", "check_varlen_gradients_match_oracle", "check_varlen_loose_max_seqlen",
        "check_varlen_gradients_with_frozen_inputs", "check_varlen_matches_separate"}),
    # The forward is right; the backward reaches into the next sequence's dk, dv.
    "varlen_dk_into_next_sequence": ("check_varlen_gradients_match_oracle", {
        "check_varlen_gradients_match_oracle", "check_varlen_loose_max_seqlen",
        "check_varlen_gradients_with_frozen_inputs",
        "check_varlen_no_leakage", "check_varlen_matches_separate"}),
    # A batch of no queries is a batch of such sequences: its dk, dv keep k's and v's values.
    "varlen_empty_sequence_grads": ("check_varlen_gradients_match_oracle", {
        "check_varlen_gradients_match_oracle", "check_varlen_loose_max_seqlen",
        "check_varlen_gradients_with_frozen_inputs",
        "check_varlen_no_queries"}),
    "varlen_max_over_tile": ("check_varlen_no_leakage", {"check_varlen_no_leakage"}),
    # Right when max_seqlen_q is the longest length, as every other check passes it.
    "varlen_lse_unpadded_by_longest": ("check_varlen_loose_max_seqlen", {"check_varlen_loose_max_seqlen"}),
    # Right under the default dtype float32; under float64 or bfloat16 the packed lse takes that dtype.
    "varlen_lse_in_default_dtype": ("check_varlen_default_dtype_ignored",
                                    {"check_varlen_default_dtype_ignored"}),
    # Right on every batch with a query; a batch with none gets o outside autograd.
    "varlen_no_queries_detached": ("check_varlen_no_queries", {"check_varlen_no_queries"}),
    "varlen_packed_tiles": ("check_varlen_matches_separate", {"check_varlen_matches_separate"}),
    # The call is right for the offsets it was given; every check that calls the kernel twice or
    # builds the oracle from cu_seqlens_k afterwards reads lengths as offsets (the oracle checks and
    # the leakage check then stop on offsets that no longer end at total_k: an error, not a pass).
    "varlen_cu_seqlens_in_place": ("check_varlen_inputs_unchanged", {
        "check_varlen_inputs_unchanged", "check_varlen_matches_oracle",
        "check_varlen_gradients_match_oracle", "check_varlen_loose_max_seqlen",
        "check_varlen_gradients_with_frozen_inputs",
        "check_varlen_no_leakage", "check_varlen_matches_separate", "check_varlen_backward_repeatable",
        "check_varlen_inputs_updated_in_place", "check_varlen_inference_mode",
        "check_varlen_default_dtype_ignored"}),
    "varlen_dq_only_path_unscaled": ("check_varlen_gradients_with_frozen_inputs", {
        "check_varlen_gradients_with_frozen_inputs"}),
    "varlen_lse_base2_in_place": ("check_varlen_backward_repeatable", {"check_varlen_backward_repeatable"}),
    # Every call on fresh offsets is right; only offsets refilled in place are read stale.
    "varlen_spans_cached": ("check_varlen_inputs_updated_in_place", {"check_varlen_inputs_updated_in_place"}),
    # The same in the backward alone: every output is right, every gradient but after the refill.
    "varlen_backward_offsets_cached": ("check_varlen_inputs_updated_in_place",
                                       {"check_varlen_inputs_updated_in_place"}),
    # Results written into buffers kept per shape outside autograd: right when each call returns.
    "varlen_output_buffer_per_shape": ("check_varlen_inputs_updated_in_place",
                                       {"check_varlen_inputs_updated_in_place"}),
    # Sequences run in an order drawn from the caller's generator: every result right, the caller's
    # random state advanced by each packed call.
    "varlen_rng_drawn": ("check_varlen_inputs_unchanged", {"check_varlen_inputs_unchanged"}),
    # The thread count restored to torch's default, not the caller's: right from the defaults, so
    # only the round under moved settings fails (test_a_packed_setting_restored_to_its_default_fails).
    "varlen_threads_reset": ("check_varlen_inputs_unchanged", {"check_varlen_inputs_unchanged"}),
    # A layout's row mask kept from a first call under inference mode: every check that calls outside
    # it passes.
    "varlen_mask_kept_from_inference_mode": ("check_varlen_inference_mode", {"check_varlen_inference_mode"}),
    # The packed path with a window rounds otherwise than without: (-1, -1) is not bit for bit no
    # window, nor (-1, 0) causal, and both within the error model.
    "varlen_window_path_not_bitwise": ("check_varlen_window_extremes_exact",
                                       {"check_varlen_window_extremes_exact"}),
    # On VARLEN_FEATURE_CASE. The shift is the packed totals' in every run, whatever the values, so
    # nothing leaks across sequences; the dense call alone aligns by the sequence's own lengths.
    "varlen_bottom_right_packed": ("check_varlen_matches_oracle", {
        "check_varlen_matches_oracle", "check_varlen_gradients_match_oracle", "check_varlen_loose_max_seqlen",
        "check_varlen_gradients_with_frozen_inputs", "check_varlen_matches_separate"}),
}

VARLEN_CASE_OF = {"varlen_bottom_right_packed": VARLEN_FEATURE_CASE}
"""The case a broken varlen module is judged on, where it is not :data:`VARLEN_CASE`."""


VARLEN_GPU_BROKEN = {
    # check: module in tests/broken, for the varlen checks that run on CUDA devices only.
    "check_varlen_current_stream": "varlen_default_stream_only",
}


def test_every_varlen_check_has_a_broken_module():
    assert ({check for check, _ in VARLEN_BROKEN.values()} | set(VARLEN_GPU_BROKEN)
            == {check.__name__ for check in VARLEN_CHECKS})


@pytest.mark.parametrize("module", list(VARLEN_GPU_BROKEN.values()))
def test_gpu_broken_varlen_module_is_right_off_cuda(module):
    """Its bug is the stream it runs on: on the CPU it passes every varlen check (so on a GPU, with
    its one line mended, it is a correct module)."""
    for check in VARLEN_CHECKS:
        try:
            check(load_kernel(f"tests.broken.{module}"), VARLEN_CASE)
        except NotApplicable:
            pass


@pytest.mark.gpu
@pytest.mark.parametrize("check_name", list(VARLEN_GPU_BROKEN))
def test_gpu_broken_varlen_module_fails_its_check(check_name, monkeypatch):
    """On a GPU, the module fails its check with a full message; and the same module with its one bug
    mended passes it, conclusively (flash and tests/broken/_varlen.py read cu_seqlens back on the
    caller's stream, which makes the check n/a for them: this is the check's pass that a false alarm
    would break)."""
    import torch

    module = f"tests.broken.{VARLEN_GPU_BROKEN[check_name]}"
    check = {c.__name__: c for c in VARLEN_CHECKS}[check_name]
    with pytest.raises(AssertionError) as failure:
        check(load_kernel(module), VARLEN_CASE)
    _assert_full_varlen_message(check_name, module, str(failure.value))
    monkeypatch.setattr(load_kernel(module), "ordered_against", torch.cuda.current_stream)
    check(load_kernel(module), VARLEN_CASE)


def _assert_full_varlen_message(check_name: str, module: str, message: str) -> None:
    """A varlen failure names the check, the module, the packed case, the sequence and the bound (a
    change of the process's state: the setting, for it has no sequence; a call that raised: what it
    raised, for it has neither)."""
    fragments = [check_name, f"kernel {module}", "VarlenCase(seqlens_q="]
    setting = _is_a_setting_failure(message)
    if setting:
        _assert_names_a_setting(message)
    if " raised " not in message:
        # A batch with no queries has no sequence with rows to name, a dtype failure no element.
        no_rows = setting or NO_QUERIES in message or DTYPE_BOUND in message
        fragments += ["bound"] if no_rows else ["bound", "sequence "]
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from: {message}"


def test_a_packed_setting_restored_to_its_default_fails():
    """The packed twin of test_a_setting_restored_to_its_default_fails: the packed round under
    moved settings (check_varlen_inputs_unchanged) names the thread count the call reset."""
    with pytest.raises(AssertionError) as failure:
        check_varlen_inputs_unchanged(load_kernel("tests.broken.varlen_threads_reset"), VARLEN_CASE)
    message = str(failure.value)
    assert "the caller having set" in message and "torch.get_num_threads()" in message, message


@pytest.mark.parametrize("module", list(VARLEN_BROKEN))
def test_broken_varlen_module_fails_its_check(module):
    check_name, expected = VARLEN_BROKEN[module]
    kernel = load_kernel(f"tests.broken.{module}")
    case = VARLEN_CASE_OF.get(module, VARLEN_CASE)
    failed = {}
    for check in VARLEN_CHECKS:
        try:
            check(kernel, case)
        except NotApplicable:
            pass
        except Exception as exc:  # a check that stops on what the kernel did refuses it too
            failed[check.__name__] = str(exc)
    assert check_name in failed, f"{check_name} did not catch tests.broken.{module}"
    _assert_full_varlen_message(check_name, f"tests.broken.{module}", failed[check_name])
    assert set(failed) == expected, (
        f"tests.broken.{module}: failing varlen checks {sorted(failed)}, expected {sorted(expected)}"
    )


GRID_BROKEN = {
    # module in tests/broken: (the check, the grid, which of its cases are of the kind that shows the
    # bug). Bugs of other people's kernels, written blind to the suite, that its fixed grids missed
    # (docs/mutation.md, "A held-out round of other people's kernels"); each grid now has cases of
    # that kind, and this holds them to it: drop them, and the bug goes unseen again.
    "pads_into_row_gap": (check_inputs_unchanged, property_cpu_cases,
                          lambda case: case.layout == "column_slice" and case.head_dim % 16),
    "varlen_equal_queries_dense": (check_varlen_matches_oracle, varlen_decode_cpu_cases,
                                   lambda case: len(set(case.seqlens_q)) == 1 < len(set(case.seqlens_k))),
    "single_key_view": (check_inputs_updated_in_place, property_cpu_cases,
                        lambda case: case.n_k == 1 and not case.is_causal and case.window is None),
    "varlen_single_query_causal_dropped": (check_varlen_matches_oracle, varlen_decode_cpu_cases,
                                           lambda case: case.is_causal and set(case.seqlens_q) == {1}
                                           and case.causal_alignment == "top_left"),
    "decode_gqa_heads_as_rows": (check_output_matches_oracle, feature_cpu_cases,
                                 lambda case: case.n_q == 1 and case.is_causal
                                 and case.kv_heads is not None and case.kv_heads < case.leading[-1]),
    "softcap_zero_capped": (check_output_matches_oracle, feature_cpu_cases, lambda case: case.softcap == 0),
    "varlen_softcap_zero_capped": (check_varlen_matches_oracle, varlen_cpu_cases,
                                   lambda case: case.softcap == 0),
    "varlen_single_sequence_alignment_dropped": (check_varlen_matches_oracle, varlen_cpu_cases,
                                                 lambda case: len(case.seqlens_q) == 1 and case.is_causal
                                                 and case.causal_alignment == "bottom_right"
                                                 and case.seqlens_q != case.seqlens_k),
    "softcap_large_as_identity": (check_output_matches_oracle, feature_cpu_cases,
                                  lambda case: (case.softcap or 0) >= 1e4),
    "varlen_softcap_large_as_identity": (check_varlen_matches_oracle, varlen_cpu_cases,
                                         lambda case: (case.softcap or 0) >= 1e4),
    "varlen_decode_rows_as_sequences": (check_varlen_matches_oracle, varlen_decode_cpu_cases,
                                        lambda case: max(case.seqlens_q) == 1 and 0 in case.seqlens_q[:-1]),
    "varlen_padded_softcap_bias": (check_varlen_matches_oracle, varlen_cpu_cases,
                                   lambda case: 0 < (case.softcap or 0) <= 5
                                   and _unequal_keys_in_a_bucket(case)),
    "varlen_window_wider_than_keys_dropped": (check_varlen_matches_oracle, varlen_cpu_cases,
                                              lambda case: case.window is not None and any(
                                                  side >= max(case.seqlens_k) for side in case.window)
                                              and any(n_q > n_k for n_q, n_k in zip(case.seqlens_q,
                                                                                      case.seqlens_k))),
}


def _unequal_keys_in_a_bucket(case) -> bool:
    """Two sequences with queries whose lengths round up to the same powers of two (the buckets of
    tests/broken/varlen_padded_softcap_bias.py), with unequal key lengths."""
    keys: dict[tuple[int, int], set[int]] = {}
    for n_q, n_k in zip(case.seqlens_q, case.seqlens_k):
        if n_q:
            keys.setdefault((1 << (n_q - 1).bit_length(), 1 << (n_k - 1).bit_length()), set()).add(n_k)
    return any(len(lengths) > 1 for lengths in keys.values())


@pytest.mark.parametrize("module", list(GRID_BROKEN))
def test_the_grids_have_cases_that_show_held_out_bugs(module):
    check, grid, of_the_kind = GRID_BROKEN[module]
    cases = [case for case in grid() if of_the_kind(case)]
    assert cases, f"{grid.__name__} has no case of the kind that shows tests.broken.{module}"
    refusal = _first_refusal(check, module, cases)
    assert refusal, f"{check.__name__} on {grid.__name__}'s cases did not catch tests.broken.{module}"
    assert f"kernel tests.broken.{module}" in refusal and "bound" in refusal, refusal


def _first_refusal(check, module: str, cases, device=None, crash_refuses: bool = False) -> str | None:
    """The message of the first of ``cases`` on which ``check`` refuses ``tests.broken.<module>`` (an
    ``AssertionError``; n/a cases skipped), or None if none does. With ``crash_refuses``, a check
    stopped by any other exception (raised by what the module did) refuses it too, with the message
    ``"crash: <exception>"``; without it, that exception propagates (a test error, which the CPU test
    wants to see: there a crash would hide a check that no longer catches)."""
    broken = load_kernel(f"tests.broken.{module}")
    for case in cases:
        try:
            check(broken, case, device=device)
        except NotApplicable:
            continue
        except AssertionError as exc:
            return str(exc)
        except Exception as exc:
            if not crash_refuses:
                raise
            return f"crash: {type(exc).__name__}: {exc}"
    return None


GPU_GRIDS = {
    # The GPU grids that `pytest -m gpu` runs the same checks over, for each CPU grid of GRID_BROKEN:
    # a module that runs only on CUDA is gated by these alone.
    property_cpu_cases: (property_gpu_cases,),
    feature_cpu_cases: (feature_gpu_cases, decode_gpu_cases),
    varlen_cpu_cases: (varlen_gpu_cases,),
    varlen_decode_cpu_cases: (varlen_decode_gpu_cases,),
}


@pytest.mark.gpu
@pytest.mark.parametrize("module", list(GRID_BROKEN))
def test_the_gpu_grids_have_cases_that_show_held_out_bugs(module):
    """The GPU twin of test_the_grids_have_cases_that_show_held_out_bugs: the GPU grids have cases of
    the kind, and the check refuses the module (written in PyTorch, it runs on CUDA tensors too) on
    one of them. The correct kernel's pass on the same cases is the GPU suite's."""
    check, grid, of_the_kind = GRID_BROKEN[module]
    cases = [case for gpu_grid in GPU_GRIDS[grid] for case in gpu_grid() if of_the_kind(case)]
    grids = " + ".join(gpu_grid.__name__ for gpu_grid in GPU_GRIDS[grid])
    assert cases, f"{grids} has no case of the kind that shows tests.broken.{module}"
    refusal = _first_refusal(check, module, cases, device="cuda", crash_refuses=True)
    assert refusal, (f"{check.__name__} on {grids}'s {len(cases)} cases of the kind did not catch "
                     f"tests.broken.{module}")
    named = f"kernel tests.broken.{module}" in refusal and "bound" in refusal
    assert refusal.startswith("crash: ") or named, refusal


def test_an_exactness_failure_says_whether_the_kernel_is_deterministic():
    """A bit-for-bit feature check that finds two calls differ reruns the first: a kernel that
    differs from itself is named non-deterministic, not wrong in its masks (cuDNN's backward, on the
    H200, 2026-12-01)."""
    import torch

    from properties.features import _assert_same_bits

    zeros, ones = {"o": torch.zeros(2, 3), "lse": None}, {"o": torch.ones(2, 3), "lse": None}
    with pytest.raises(AssertionError, match=r"differs too \(in o\): the kernel is not deterministic"):
        _assert_same_bits("masks", ones, zeros, "ctx", again=lambda: ones)
    with pytest.raises(AssertionError, match="repeated gives the same bits: the two calls differ"):
        _assert_same_bits("masks", ones, zeros, "ctx", again=lambda: zeros)
    _assert_same_bits("masks", zeros, {"o": torch.zeros(2, 3), "lse": None}, "ctx", again=lambda: ones)


def test_a_write_into_the_gaps_of_an_input_fails_check_inputs_unchanged():
    """Memory between the rows of a gapped input is the caller's: a kernel that stores there (with
    an input's strides into the wrong tensor, say) leaves every element of q as it was, and
    ``check_inputs_unchanged`` still names the byte and the element it follows."""
    import types

    import torch

    from properties._common import memory_of
    from properties.side_effects import check_inputs_unchanged
    from tests import conforming

    def attention(q, k, v, is_causal=False, **features):
        o = conforming.attention(q, k, v, is_causal, **features)
        with torch.no_grad():
            memory_of(q)[-1] ^= 1  # the last byte of q's buffer: a gap after its last slice
        return o

    kernel = types.ModuleType("writes_into_gaps")
    kernel.attention = attention
    case = Case(5, 7, 16, (2,), "float32", False, layout="gapped")
    with pytest.raises(AssertionError, match="a gap of its layout.*just after its element at batch"):
        check_inputs_unchanged(kernel, case)
    check_inputs_unchanged(conforming, case)  # the same case, and no write: passes


def test_a_kernel_that_raises_inside_gradcheck_fails_check_gradcheck_float64_by_name():
    """A kernel's own exception inside gradcheck (here autograd's "modified by an inplace
    operation": ``pads_into_row_gap`` writes into its input) is the check's failure, named as the
    check's and the case's, as the other checks name a crash (``_common.crash_is_failure``)."""
    from properties.gradients import check_gradcheck_float64

    case = Case(8, 8, 15, (2,), "float32", False, layout="column_slice")
    with pytest.raises(AssertionError, match=r"check_gradcheck_float64 failed for kernel "
                       r"tests\.broken\.pads_into_row_gap on Case\(.*inside gradcheck raised RuntimeError"):
        check_gradcheck_float64(load_kernel("tests.broken.pads_into_row_gap"), case)
