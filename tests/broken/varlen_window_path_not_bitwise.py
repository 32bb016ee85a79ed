"""Varlen kernel module with one bug: a packed call with a ``window`` goes through a sliding-window
path (an online softmax over blocks of 16 keys, skipping the blocks no row sees), chosen by ``window
is not None``; the unbounded spellings are not normalized first, so ``window=(-1, -1)`` takes it
while ``window=None`` does not, and ``window=(-1, 0)`` takes it while ``is_causal=True`` does not.
Both paths are right to rounding; they round differently once a sequence has more than 16 keys.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-third session): the contract's "computes ``window=(-1, -1)`` exactly as ``window=None``" was
checked on dense calls only. Smallest input that shows it: one sequence of one query and 17 keys,
``window=(-1, -1)`` against no window (in the last bits, for about half of random draws).
"""

import torch

from tests import conforming as C
from tests.broken import _varlen_features as base
from tests.broken._varlen_features import FEATURES, SUPPORTED_DTYPES, attention, attention_with_lse

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse", "attention_varlen",
           "attention_varlen_with_lse"]

BLOCK = 16


def _blockwise(qh, kh, vh, is_causal, scale=None, window=None, softcap=None, causal_alignment="top_left"):
    """One sequence by an online softmax over key blocks: the sliding-window path."""
    q, k, v = C.up(qh), C.kv_heads(qh, C.up(kh)), C.kv_heads(qh, C.up(vh))
    seen = C.visible(q.shape[-2], k.shape[-2], is_causal, window, causal_alignment, q.device)
    m = q.new_full((*q.shape[:-1], 1), float("-inf"))
    l_i, acc = q.new_zeros((*q.shape[:-1], 1)), q.new_zeros((*q.shape[:-1], v.shape[-1]))
    for j in range(0, k.shape[-2], BLOCK):
        if not bool(seen[:, j:j + BLOCK].any()):
            continue  # no row sees this block
        s = torch.matmul(q, k[..., j:j + BLOCK, :].transpose(-2, -1)) * C.softmax_scale(qh, scale)
        if softcap:
            s = C.cap(s, softcap)
        s = s.masked_fill(~seen[:, j:j + BLOCK], C.HIDDEN)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = m_new.masked_fill(torch.isneginf(m_new), 0.0)
        p = torch.exp(s - safe)
        alpha = torch.exp(m - safe)
        l_i = l_i * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + torch.matmul(p, v[..., j:j + BLOCK, :])
        m = m_new
    o = acc / l_i.masked_fill(l_i == 0, 1.0)
    lse = torch.where(l_i == 0, torch.full_like(l_i, float("-inf")), m + torch.log(l_i))
    return o.to(qh.dtype), lse.squeeze(-1).float()


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False, *, window=None, **features):
    # The bug: (-1, -1) is no window and (-1, 0) is causal; both should take the other path.
    one = _blockwise if window is not None else base.sequence
    return base.packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, one=one, window=window, **features)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
                     **features):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal, **features)[0]
