"""The references themselves: the blockwise mock against the dense float64 oracle.

These run first (see conftest): every later test trusts the oracle, and the mock is an adapter the
whole suite must pass, so both are checked here, in float64, where they must agree to ~1e-12.
"""

import pytest
import torch

from oracle import FlashAttentionMock, dense_attention
from properties.case import Case

CASES = [
    Case(1, 1, 16, (2,)), Case(65, 97, 24, (2, 3), is_causal=True), Case(129, 64, 64, (1,), is_causal=True),
    Case(64, 130, 8, (3,)), Case(200, 65, 16, (), is_causal=True),
]


@pytest.mark.parametrize("block", [(64, 64), (16, 32), (32, 16), (7, 5)])
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("naive", [False, True], ids=["blockwise", "naive"])
def test_mock_matches_dense_oracle(case, block, naive):
    q, k, v = (t.double() for t in case.make_qkv("cpu"))
    o, lse = FlashAttentionMock(*block, naive=naive)(q, k, v, case.is_causal)
    o64, lse64 = dense_attention(q, k, v, case.is_causal)
    # float64 all the way through: only the summation order differs.
    assert (o.double() - o64).abs().max() < 1e-12, case
    assert (lse.double() - lse64).abs().max() < 1e-12, case


def test_dense_oracle_matches_definition():
    # softmax(q k^T / sqrt(d)) v written out with explicit loops over one row, in float64.
    q, k, v = (t.double() for t in Case(5, 7, 3, (), is_causal=True).make_qkv("cpu"))
    o, lse = dense_attention(q, k, v, is_causal=True)
    for i in range(5):
        s = torch.tensor([float(q[i] @ k[j]) / 3**0.5 for j in range(min(i + 1, 7))], dtype=torch.float64)
        w = torch.exp(s - s.max())
        assert torch.allclose(o[i], (w[:, None] * v[: len(s)]).sum(0) / w.sum(), rtol=0, atol=1e-14)
        assert abs(float(lse[i]) - float(torch.logsumexp(s, 0))) < 1e-14


def test_causal_is_top_left_aligned_like_sdpa():
    q, k, v = (t.double() for t in Case(7, 4, 8, (1,), is_causal=True).make_qkv("cpu"))
    o, _ = dense_attention(q, k, v, is_causal=True)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(o, sdpa, rtol=0, atol=1e-12)
    # row 0 sees only key 0: its output is v's row 0 exactly
    assert torch.equal(o[0, 0], v[0, 0])
