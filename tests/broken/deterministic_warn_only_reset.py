"""Kernel module with one bug: a grouped-query call runs under ``torch.use_deterministic_algorithms(True)``
(the author's guard for an atomic reduction over each group) and restores only the on/off flag,
``use_deterministic_algorithms(was)``, which also resets ``warn_only`` to False. From torch's
defaults (off, ``warn_only`` off) that restores the state exactly; a caller who had set ``warn_only``
comes out of the call with it off, and a later nondeterministic op raises instead of warning.
Every value is right.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-second session; there in the backward's reduction): the state checks compared the settings
from the defaults only, and did not read ``warn_only``. Smallest input that shows it: q ``[2, 1, 1]``,
k and v ``[1, 1, 1]``, after ``torch.use_deterministic_algorithms(False, warn_only=True)``.
"""

import torch

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]


def _guarded(call, q, k, *args, **features):
    if q.dim() < 3 or q.shape[-3] == k.shape[-3]:
        return call(q, k, *args, **features)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        return call(q, k, *args, **features)
    finally:
        torch.use_deterministic_algorithms(was)  # the bug: the caller's warn_only is lost


def attention(q, k, v, is_causal=False, **features):
    return _guarded(conforming.attention, q, k, v, is_causal, **features)


def attention_with_lse(q, k, v, is_causal=False, **features):
    return _guarded(conforming.attention_with_lse, q, k, v, is_causal, **features)
