"""The kernel under test against every varlen check (properties/varlen.py), on the fixed grids of
packed variable-length cases; a kernel module without ``attention_varlen`` skips, saying so. Then
the varlen case and the padded oracle themselves.

bfloat16 is on the GPU grid only: the Triton interpreter's bfloat16 ``tl.dot`` returns garbage.
"""

import pytest
import torch

from oracle.dense import dense_attention
from oracle.varlen import dense_attention_varlen, sequence_rows, varlen_mask
from properties.varlen import VARLEN_CHECKS
from properties.varlen_case import VARLEN_LAYOUTS, VarlenCase, parse_case
from properties.varlen_grids import varlen_cpu_cases, varlen_gpu_cases
from tests.helpers import case_params, run_check

CHECKS = [pytest.param(check, id=check.__name__) for check in VARLEN_CHECKS]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(varlen_cpu_cases()))
def test_varlen(kernel, check, case):
    run_check(check, kernel, case)


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(varlen_gpu_cases(), gpu=True))
def test_varlen_gpu(kernel, check, case):
    run_check(check, kernel, case)


# -- the varlen case and the padded oracle themselves: no kernel calls below --


def test_case_line_replays_and_rejects_anything_but_literals():
    for case in varlen_cpu_cases() + varlen_gpu_cases():
        assert VarlenCase.parse(str(case)) == case
        assert parse_case(str(case)) == case
    with pytest.raises(ValueError):
        VarlenCase.parse("VarlenCase(seqlens_q=__import__('os').getpid(), seqlens_k=(1,))")
    with pytest.raises(ValueError, match="expected a line like 'VarlenCase"):
        VarlenCase.parse("Case(n_q=1, n_k=1)")


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


def test_padded_oracle_matches_each_sequence_alone():
    """In float64 all the way, the padded batch differs from one dense call per sequence only in
    summation order (~1e-12, as tests/test_oracle.py holds the mock to); padding adds no NaN, even
    to the gradients, and keys that no query sees get exactly zero gradient."""
    for case in (VarlenCase((0, 1, 65, 64, 0), (3, 64, 1, 63, 0), 2, 16, is_causal=True),
                 VarlenCase((5, 0, 7), (9, 4, 2), 1, 8, is_causal=False)):
        q, k, v, cu_q, cu_k, _, _ = case.make_qkv("cpu")
        q, k, v = (t.double().requires_grad_() for t in (q, k, v))
        o, lse = dense_attention_varlen(q, k, v, cu_q, cu_k, case.is_causal)
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
                                           ((q, rows_q), (k, rows_k), (v, rows_k))), case.is_causal)
            assert (o[rows_q].detach().transpose(0, 1) - o_b).abs().max() < 1e-12, (case, b)
            assert (lse[rows_q].detach().transpose(0, 1) - lse_b).abs().max() < 1e-12, (case, b)


def test_varlen_mask_leaves_no_row_fully_masked():
    mask = varlen_mask(torch.tensor([0, 0, 2]), torch.tensor([0, 0, 3]), 2, 3, True)
    assert mask.any(-1).all()
    assert mask[0, 0].tolist() == [[True, False, False], [True, False, False]]  # padded rows: key 0
    assert mask[1, 0].tolist() == [[True, False, False], [True, True, False]]


def test_sequence_rows_skips_sequences_without_queries_and_rejects_ones_without_keys():
    cu_q, cu_k = torch.tensor([0, 2, 2, 5], dtype=torch.int32), torch.tensor([0, 1, 4, 7], dtype=torch.int32)
    assert sequence_rows(cu_q, cu_k) == [(slice(0, 2), slice(0, 1)), (slice(2, 5), slice(4, 7))]
    with pytest.raises(ValueError, match="sequence 1 has 3 queries and no keys"):
        sequence_rows(torch.tensor([0, 2, 5]), torch.tensor([0, 1, 1]))
