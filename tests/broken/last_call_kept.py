"""Kernel module with one bug: it keeps the last call's q, k and v on the module (for a debugging
replay of the last call, should a later one fail), so the caller's last batch never leaves memory.

Every output is right, and nothing it computes reads what it keeps. What it breaks is memory: the
inputs the caller dropped stay allocated until the next call (in a serving loop, the largest batch
of a burst can stay on the card through an idle hour). Smallest input that shows it: one call, then
``del q, k, v`` and ``gc.collect()``: their storages are still alive.
"""

from tests.broken import _float32

_LAST: tuple = ()


def attention_with_lse(q, k, v, is_causal=False):
    global _LAST
    _LAST = (q, k, v)  # the bug: a strong reference to the caller's tensors, kept past the call
    return _float32.attention_with_lse(q, k, v, is_causal)


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
