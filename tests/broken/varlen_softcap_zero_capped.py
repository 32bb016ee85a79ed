"""Varlen kernel module with one bug: the packed path turns the softcap on with ``softcap is not
None``, so ``softcap=0`` (the contract's other spelling of off, and FlashAttention's default) caps
every score at 0: ``0 * tanh(s / 0)`` is 0, every visible key weighs the same. The dense path and
every ``softcap > 0`` are right.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-third session): no case passed ``softcap=0`` to a kernel (the cases dropped it as off).
Smallest input that shows it: one sequence, a query and two keys, ``softcap=0.0``.
"""

from tests.broken import _varlen_features as base
from tests.broken._varlen_features import FEATURES, SUPPORTED_DTYPES, attention, attention_with_lse
from tests.broken.softcap_zero_capped import _scores  # the bug: softcap=0 caps every score at 0

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse", "attention_varlen",
           "attention_varlen_with_lse"]

attention_varlen_with_lse, attention_varlen = base.with_scores(_scores)
