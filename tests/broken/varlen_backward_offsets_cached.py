"""Varlen kernel module with one bug: its backward keeps each ``cu_seqlens`` it has seen (a copy,
from which it would build its schedule of sequences and tiles) and finds it again by tensor object
(cached by identity, as ``functools.lru_cache`` on a tensor argument would), so offsets overwritten
in place since (a training loop refilling its buffers for the next batch) are read as they were.
The forward reads its offsets afresh. (By identity, not by address: see
``backward_kv_cached_by_tensor``.)

Every output is right, and so is every backward of offsets it has not seen before. Smallest input
that shows it: a batch of two sequences of lengths 1 and 2, a forward and backward, then the same
buffers refilled with lengths 2 and 1, and the same forward and backward again.
"""

import torch

from tests.broken import _varlen
from tests.broken._kept import kept
from tests.broken._varlen import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

_OFFSETS: dict = {}


def _offsets(cu_seqlens: torch.Tensor) -> torch.Tensor:
    # the bug: a new copy for a new tensor object only, not for new offsets
    return kept(_OFFSETS, (cu_seqlens,), cu_seqlens.clone)


class _Varlen(_varlen.SavedForward):
    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
        grads = _varlen.backward(q, k, v, o, lse, do, _offsets(cu_seqlens_q), _offsets(cu_seqlens_k),
                                 ctx.is_causal)
        return *grads, None, None, None


attention_varlen_with_lse, attention_varlen = _varlen.entry_points(_Varlen)
