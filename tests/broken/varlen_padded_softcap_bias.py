"""Varlen kernel module with one bug: sequences are bucketed by the powers of two above their query
and key lengths, and each one's keys padded to the longest of its bucket, the padding hidden by a
bias added before the softcap, so ``c tanh(-inf / c) = -c``: padded keys score
``-c``, not ``-inf``. Their values are 0, so they add nothing to ``o``'s numerator, but they add
``exp(-c)`` each to its denominator: ``o`` shrinks, the lse grows, and the gradients follow. Right
without a softcap, for a batch whose key lengths are all equal, and in practice for a large cap
(the error is about ``exp(-c)`` of the row's sum); wrong for a small cap with key lengths that
differ within a bucket.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-seventh session, with the sequences bucketed by length): no packed case had a small cap and
key lengths that differ within a bucket. Smallest input that shows it: two sequences of one query,
3 and 4 keys, ``softcap=1``.
"""

import torch

from tests import conforming as C
from tests.broken import _varlen_features as base
from tests.broken._varlen_features import FEATURES, SUPPORTED_DTYPES, attention, attention_with_lse

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse", "attention_varlen",
           "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False, **features):
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    lengths = [(q1 - q0, k1 - k0) for q0, q1, k0, k1 in zip(cq, cq[1:], ck, ck[1:])]
    longest = {}  # bucket -> its longest key sequence
    for n_q, n_k in lengths:
        longest[_bucket(n_q, n_k)] = max(longest.get(_bucket(n_q, n_k), 0), n_k)

    def padded(qh, kh, vh, is_causal, scale=None, window=None, softcap=None, causal_alignment="top_left"):
        s = C.scores(qh, kh, is_causal, scale, window, softcap, causal_alignment)
        pad = longest[_bucket(qh.shape[-2], kh.shape[-2])] - kh.shape[-2]
        # The bug: the padding's -inf bias went through the cap with the scores: c tanh(-inf) = -c.
        hidden = -softcap if softcap else C.HIDDEN
        s = torch.cat([s, s.new_full((*s.shape[:-1], pad), hidden)], -1)
        vh = torch.cat([vh, vh.new_zeros((*vh.shape[:-2], pad, vh.shape[-1]))], -2)
        return C.attend(s, qh, vh), torch.logsumexp(s, -1).float()

    return base.packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, one=padded, **features)


def _bucket(n_q: int, n_k: int) -> tuple[int, int]:
    return 1 << max(0, n_q - 1).bit_length(), 1 << max(0, n_k - 1).bit_length()


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
                     **features):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal, **features)[0]
