"""The kernel under test against every varlen check (properties/varlen.py), on the fixed grids of
packed variable-length cases; a kernel module without ``attention_varlen``, or one that does not
declare a feature a case uses, skips, saying so. The feature cases also run against the reference
modules that declare every feature (the mock and the dense oracle), whatever the kernel under test.
Then the varlen case and the padded oracle themselves.

bfloat16 is on the GPU grid only: the Triton interpreter's bfloat16 ``tl.dot`` returns garbage.
"""

import math
import types

import pytest
import torch

from oracle.adapters import dense as dense_adapter
from oracle.dense import dense_attention
from oracle.varlen import dense_attention_varlen, sequence_rows, varlen_mask
from properties.case import FEATURE_FIELDS, Case
from properties.kernels import load_kernel
from properties.varlen import VARLEN_CHECKS, check_varlen_current_stream
from properties.varlen_case import VARLEN_LAYOUTS, VarlenCase, parse_case
from properties.varlen_grids import varlen_cpu_cases, varlen_feature_cpu_cases, varlen_gpu_cases
from tests.helpers import case_params, run_check

CHECKS = [pytest.param(check, id=check.__name__) for check in VARLEN_CHECKS]
CPU_CHECKS = [param for param in CHECKS if param.values[0] is not check_varlen_current_stream]
"""The checks the CPU tests below hold to pass without a skip: all but the one that is n/a off CUDA
(no streams; ``test_varlen_gpu`` and tests/test_broken_kernels.py run it on a GPU)."""

REFERENCES = ["oracle.adapters.mock", "oracle.adapters.dense"]
"""Modules that declare every feature, varlen included: the feature cases run against them always."""


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(varlen_cpu_cases()))
def test_varlen(kernel, check, case):
    run_check(check, kernel, case)


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(varlen_gpu_cases(), gpu=True))
def test_varlen_gpu(kernel, check, case):
    run_check(check, kernel, case)


@pytest.mark.parametrize("module", REFERENCES)
@pytest.mark.parametrize("check", CPU_CHECKS)
@pytest.mark.parametrize("case", case_params(varlen_feature_cpu_cases()))
def test_varlen_features_on_references(module, check, case):
    check(load_kernel(module), case)  # no skip: these modules declare everything the cases use


def _forward_only_lse(fn):
    """``fn`` (an ``..._with_lse`` entry point) with no graph recorded, as the contract allows."""
    def forward_only(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)
    return forward_only


@pytest.mark.parametrize("check", CPU_CHECKS)
def test_varlen_checks_take_gradients_through_attention_varlen(check):
    """A module whose ``attention_varlen_with_lse`` and ``attention_with_lse`` are forward-only (their
    ``o`` has no ``grad_fn``) passes: gradients come from ``attention_varlen`` and ``attention``."""
    module = types.ModuleType("forward_only_lse")
    for name in ("FEATURES", "attention", "attention_varlen"):
        setattr(module, name, getattr(dense_adapter, name))
    module.attention_with_lse = _forward_only_lse(dense_adapter.attention_with_lse)
    module.attention_varlen_with_lse = _forward_only_lse(dense_adapter.attention_varlen_with_lse)
    check(module, VarlenCase((3, 0, 5), (2, 4, 5), 2, 8, is_causal=True, kv_heads=1, window=(2, -1)))


# -- the varlen case and the padded oracle themselves: no kernel calls below --


def test_case_line_replays_and_rejects_anything_but_literals():
    for case in varlen_cpu_cases() + varlen_gpu_cases():
        assert VarlenCase.parse(str(case)) == case
        assert parse_case(str(case)) == case
    with pytest.raises(ValueError):
        VarlenCase.parse("VarlenCase(seqlens_q=__import__('os').getpid(), seqlens_k=(1,))")
    with pytest.raises(ValueError, match="expected a line like 'VarlenCase"):
        VarlenCase.parse("Case(n_q=1, n_k=1)")
    with pytest.raises(ValueError, match="expected a line like 'Case"):  # the docs' placeholder
        Case.parse("Case(...)")


def test_feature_fields_are_left_out_at_their_defaults_and_old_lines_draw_as_before():
    old = ("VarlenCase(seqlens_q=(3, 0, 5), seqlens_k=(2, 4, 5), heads=2, head_dim=8, dtype='float32', "
           "is_causal=True, layout='contiguous', distribution='normal', scale=1.0, seed=3)")
    case = VarlenCase.parse(old)
    assert str(case) == old and case.needs() == frozenset() and case.features() == {}
    # kv_heads equal to heads is no GQA: the same tensors as the line without it
    for got, want in zip(case.replace(kv_heads=2).draw(), case.draw()):
        assert torch.equal(got, want)
    grouped = case.replace(heads=4, kv_heads=2, window=(3, -1), causal_alignment="bottom_right",
                           softmax_scale=0.5, softcap=5.0)
    assert all(f"{name}=" in str(grouped) for name in FEATURE_FIELDS)
    assert VarlenCase.parse(str(grouped)) == grouped
    assert grouped.needs() == {"gqa", "window", "bottom_right", "scale", "softcap"}
    assert grouped.features() == {"scale": 0.5, "window": (3, -1), "softcap": 5.0,
                                  "causal_alignment": "bottom_right"}
    q, k, v, do = grouped.draw()
    assert (q.shape, k.shape, v.shape, do.shape) == ((8, 4, 8), (11, 2, 8), (11, 2, 8), (8, 4, 8))


@pytest.mark.parametrize("changes", [{"kv_heads": 2}, {"kv_heads": 0}, {"window": (1,)}, {"window": (-2, 0)},
                                     {"softmax_scale": float("inf")}, {"softmax_scale": float("nan")},
                                     {"softcap": -1.0}, {"causal_alignment": "bottom"}])
def test_case_rejects_bad_features(changes):
    with pytest.raises(ValueError):
        VarlenCase((1, 2), (1, 2), heads=3, **changes)


@pytest.mark.parametrize("scale", [0.0, -0.5])
def test_case_takes_any_finite_softmax_scale(scale):
    # The contract's scale is any finite real (properties/kernels.py): 0 and negative ones too.
    assert VarlenCase((1, 2), (1, 2), heads=3, softmax_scale=scale).features() == {"scale": scale}


@pytest.mark.parametrize("seqlens_q, seqlens_k",
                         [((1, 2), (1, 0)), ((1,), (1, 1)), ((0,), (3,)), ((-1, 2), (1, 2)), ((), ())])
def test_case_rejects_what_no_kernel_can_take(seqlens_q, seqlens_k):
    with pytest.raises(ValueError):
        VarlenCase(seqlens_q, seqlens_k)


@pytest.mark.parametrize("layout", VARLEN_LAYOUTS)
def test_layouts_hold_the_same_values(layout):
    case = VarlenCase((3, 0, 5), (2, 4, 5), 2, 8, layout=layout)
    plain = case.replace(layout="contiguous")
    x, ref = case.make_qkv("cpu"), plain.make_qkv("cpu")
    for got, want in zip(list(x) + [case.make_grad_out("cpu")], list(ref) + [plain.make_grad_out("cpu")]):
        assert torch.equal(got, want) if isinstance(got, torch.Tensor) else got == want
    assert x.cu_seqlens_q.dtype == torch.int32 and x.cu_seqlens_q.tolist() == [0, 3, 3, 8]
    assert (x.max_seqlen_q, x.max_seqlen_k) == (5, 5)
    if layout == "strided":  # every element of the buffer that q does not view is NaN
        storage = x.q.as_strided((x.q.untyped_storage().nbytes() // x.q.element_size(),), (1,), 0)
        assert int(torch.isnan(storage).sum()) == storage.numel() - x.q.numel() == 7 * x.q.numel()
    if layout == "heads_first":
        assert x.q.stride() == (8, 8 * 8, 1)
    if layout == "column_slice":  # each head's row is followed by NaN, the last one too
        assert x.q.stride() == (2 * 24, 24, 1)
        assert torch.isnan(x.q.as_strided((8, 2, 24), (48, 24, 1))[..., 8:]).all()


def test_padded_oracle_matches_each_sequence_alone():
    """In float64 all the way, the padded batch differs from one dense call per sequence only in
    summation order (~1e-12, the lse's relative to its size, as tests/test_oracle.py holds the mock
    to); padding adds no NaN, even to the gradients, and keys that no query sees get exactly zero
    gradient."""
    for case in (VarlenCase((0, 1, 65, 64, 0), (3, 64, 1, 63, 0), 2, 16, is_causal=True),
                 VarlenCase((5, 0, 7), (9, 4, 2), 1, 8, is_causal=False),
                 *varlen_feature_cpu_cases()):
        q, k, v, cu_q, cu_k, _, _ = case.make_qkv("cpu")
        q, k, v = (t.double().requires_grad_() for t in (q, k, v))
        f = case.features()
        o, lse = dense_attention_varlen(q, k, v, cu_q, cu_k, case.is_causal, **f)
        o.backward(case.make_grad_out("cpu").double())
        assert all(bool(torch.isfinite(g).all()) for g in (q.grad, k.grad, v.grad)), case
        starts_q, starts_k = case.offsets()
        for b, n_q in enumerate(case.seqlens_q):
            rows_k = slice(starts_k[b], starts_k[b + 1])
            if n_q == 0:
                assert not k.grad[rows_k].any() and not v.grad[rows_k].any(), (case, b)
                continue
            rows_q = slice(starts_q[b], starts_q[b + 1])
            o_b, lse_b = dense_attention(*(t.detach()[r].transpose(0, 1) for t, r in
                                           ((q, rows_q), (k, rows_k), (v, rows_k))), case.is_causal, **f)
            o_p, lse_p = o[rows_q].detach().transpose(0, 1), lse[rows_q].detach().transpose(0, 1)
            assert (o_p - o_b).abs().max() < 1e-12, (case, b)
            assert torch.equal(lse_p.isneginf(), lse_b.isneginf()), (case, b)
            finite = lse_b.isfinite()
            # Relative to the lse's size past 1: a float64 unit at an lse of 1e4 (scores near a
            # softcap of 1e4) is 1.8e-12.
            size = lse_b[finite].abs().clamp(min=1.0)
            assert ((lse_p[finite] - lse_b[finite]).abs() / size).max() < 1e-12, (case, b)


def test_padded_oracle_rows_that_see_no_key_are_zero_and_send_no_gradient():
    """Bottom-right causal, (3 queries, 1 key) next to (1, 2): the first two rows of sequence 0 see
    nothing (o = 0, lse = -inf, dq = 0); their upstream gradient reaches no key."""
    case = VarlenCase((3, 1), (1, 2), 1, 4, is_causal=True, causal_alignment="bottom_right")
    q, k, v, cu_q, cu_k, _, _ = case.make_qkv("cpu")
    q, k, v = (t.double().requires_grad_() for t in (q, k, v))
    o, lse = dense_attention_varlen(q, k, v, cu_q, cu_k, True, causal_alignment="bottom_right")
    assert not o[:2].any() and lse[:2, 0].tolist() == [-math.inf, -math.inf] and lse[2:].isfinite().all()
    do = torch.zeros_like(o)
    do[:2] = 1.0
    o.backward(do)
    assert not q.grad.any() and not k.grad.any() and not v.grad.any()


def test_varlen_mask_per_sequence_alignment_and_padded_rows():
    cu_q, cu_k = torch.tensor([0, 0, 2, 3]), torch.tensor([0, 0, 3, 4])
    mask = varlen_mask(cu_q, cu_k, 2, 3, True)
    assert not mask[0].any() and not mask[2, 0, 1].any()  # no queries; a padded row sees nothing
    assert mask[1, 0].tolist() == [[True, False, False], [True, True, False]]
    assert mask[2, 0, 0].tolist() == [True, False, False]
    right = varlen_mask(cu_q, cu_k, 2, 3, True, window=(0, -1), causal_alignment="bottom_right")
    # sequence 1 (2 queries, 3 keys) shifts by 1, sequence 2 (1 query, 1 key) by 0, not by the
    # packed batch's 4 - 3 = 1
    assert right[1, 0].tolist() == [[False, True, False], [False, False, True]]
    assert right[2, 0].tolist() == [[True, False, False], [False, False, False]]


def test_sequence_rows_skips_sequences_without_queries_and_rejects_ones_without_keys():
    cu_q, cu_k = torch.tensor([0, 2, 2, 5], dtype=torch.int32), torch.tensor([0, 1, 4, 7], dtype=torch.int32)
    assert sequence_rows(cu_q, cu_k) == [(slice(0, 2), slice(0, 1)), (slice(2, 5), slice(4, 7))]
    with pytest.raises(ValueError, match="sequence 1 has 3 queries and no keys"):
        sequence_rows(torch.tensor([0, 2, 5]), torch.tensor([0, 1, 1]))
