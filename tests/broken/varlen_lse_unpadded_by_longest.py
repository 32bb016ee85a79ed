"""Varlen kernel module with one bug: the lse is unpadded with the longest sequence's length.

As a padded kernel does, the packed lse goes through a ``[batch * max_seqlen_q, heads]`` buffer,
sequence ``b``'s rows at ``b * max_seqlen_q + i``; it is read back from ``b * longest + i``, with
``longest`` the longest query sequence of the batch. Right whenever ``max_seqlen_q`` is the longest
length, which is what a caller who computes it passes; wrong for every sequence after the first
when ``max_seqlen_q`` is a bound above it (the contract takes any, and a caller may pass its context
length). ``o`` and the gradients are right.
"""

import math

import torch

from tests.broken import _varlen
from tests.broken._varlen import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    o, lse = _varlen.attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                               max_seqlen_k, is_causal)
    cu = cu_seqlens_q.tolist()
    lengths = [end - start for start, end in zip(cu, cu[1:])]
    padded = torch.full((len(lengths) * max_seqlen_q, lse.shape[1]), -math.inf, dtype=torch.float32,
                        device=lse.device)
    written = [b * max_seqlen_q + i for b, n in enumerate(lengths) for i in range(n)]
    padded[torch.tensor(written, dtype=torch.long, device=lse.device)] = lse
    longest = max(lengths)
    read = [b * longest + i for b, n in enumerate(lengths) for i in range(n)]  # the bug: not max_seqlen_q
    return o, padded[torch.tensor(read, dtype=torch.long, device=lse.device)]


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return _varlen.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    is_causal)
