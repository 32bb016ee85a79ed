"""Kernel module: the blockwise mock (64x64 tiles, float32 accumulators), as the kernel's twin.

The mock takes no mask, so its varlen entry points walk the sequences, one mock call each (as
``[heads, n, d]`` views of the packed tensors, with the call's features: a sequence alone is its own
``n_q x n_k`` problem, so bottom-right alignment and windows fall per sequence), and pack the
results; a sequence with no queries produces nothing.
"""

from __future__ import annotations

import torch

from oracle.mock import FlashAttentionMock
from oracle.varlen import sequence_rows

_mock = FlashAttentionMock()

FEATURES = frozenset({"scale", "gqa", "window", "softcap", "bottom_right", "varlen"})


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, **features
) -> tuple[torch.Tensor, torch.Tensor]:
    o, lse = _mock(q, k, v, is_causal, **features)
    return o, lse.float().detach()


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, **features
) -> torch.Tensor:
    return _mock(q, k, v, is_causal, **features)[0]


def _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, features):
    os, lses = [q[:0]], [q.new_zeros((0, q.shape[1]), dtype=torch.float32)]
    for rows_q, rows_k in sequence_rows(cu_seqlens_q, cu_seqlens_k):
        o, lse = _mock(q[rows_q].transpose(0, 1), k[rows_k].transpose(0, 1), v[rows_k].transpose(0, 1),
                       is_causal, **features)
        os.append(o.transpose(0, 1))
        lses.append(lse.float().detach().transpose(0, 1))
    return torch.cat(os), torch.cat(lses)


def attention_varlen_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool = False,
    **features,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, features)


def attention_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool = False,
    **features,
) -> torch.Tensor:
    return _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, features)[0]
