"""Kernel module with one bug: a decode fast path (one query row, grouped kv heads) folds each
group's query heads into the rows of one kv head's call, as FlashAttention does for
``seqlen_q == 1``, but keeps the causal mask and the window on those rows: head ``g`` of a group is
masked as query position ``g`` (top-left: it sees keys ``0 ..= g``; bottom-right: it misses the last
``group - 1 - g`` keys). Without a mask, with MHA or with more than one query row it is right.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-first session); it was caught only by a pinned case of ``tests/test_regressions.py`` after
the feature grid passed it: that grid had no one-row GQA causal case. Smallest input that shows it:
q ``[2, 1, 16]``, k and v ``[1, 8, 16]``, causal: query head 1 sees keys 0 and 1, not 0 alone.
"""

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]


def _folded(call, q, k, v, is_causal, window, features):
    """``call`` with each group's query heads as the rows of its kv head, when the fast path
    applies (else ``None``)."""
    if q.dim() < 3 or q.shape[-2] != 1 or q.shape[-3] == k.shape[-3]:
        return None
    if not (is_causal or window is not None):
        return None  # (unmasked, the fold is right)
    *lead, h_q, _, d = q.shape
    h_kv = k.shape[-3]
    rows = q.reshape(*lead, h_kv, h_q // h_kv, d)
    return call(rows, k, v, is_causal, window=window, **features)  # the bug: the mask sees rows


def attention(q, k, v, is_causal=False, *, window=None, **features):
    o = _folded(conforming.attention, q, k, v, is_causal, window, features)
    if o is None:
        return conforming.attention(q, k, v, is_causal, window=window, **features)
    return o.reshape(q.shape[:-1] + o.shape[-1:])


def attention_with_lse(q, k, v, is_causal=False, *, window=None, **features):
    folded = _folded(conforming.attention_with_lse, q, k, v, is_causal, window, features)
    if folded is None:
        return conforming.attention_with_lse(q, k, v, is_causal, window=window, **features)
    o, lse = folded
    return o.reshape(q.shape[:-1] + o.shape[-1:]), lse.reshape(q.shape[:-1])
