"""Varlen kernel module with one bug: when every sequence has the same number of queries, it runs the
batch as a dense ``[batch, heads, n, d]`` call, reshaping k and v the same way, without checking that
the key lengths are equal too.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md): no
packed grid case then had equal query lengths over unequal keys (a batch of decoding steps over
caches of different lengths); only the fuzzer found it, after minutes. Smallest input that shows
it: two sequences of one query, over 1 and 2 keys (sequence 0 then sees keys 0 and 1). Where
``total_k`` is not a multiple of the batch the reshape raises instead.
"""

from tests.broken import _float32
from tests.broken._varlen import attention, attention_with_lse
from tests.broken._varlen import attention_varlen_with_lse as _packed

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    lengths = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).tolist()
    if len(lengths) > 1 and min(lengths) > 0 and len(set(lengths)) == 1:  # the bug: keys not checked
        b = len(lengths)
        dense = [t.reshape(b, t.shape[0] // b, *t.shape[1:]).transpose(1, 2) for t in (q, k, v)]
        o, lse = _float32.attention_with_lse(*dense, is_causal)
        return o.transpose(1, 2).reshape(q.shape), lse.transpose(1, 2).reshape(q.shape[:2])
    return _packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
