"""Kernel module with one bug: outside autograd, when every row sees one and the same key (``n_k == 1``,
no causal mask, no window) it returns ``v`` broadcast over the rows, a view of the caller's ``v``.
Every value is right (one key's softmax weight is exactly 1), but the output is not the caller's: a
KV cache written in place changes the ``o`` already returned.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-first session); the grids' only one-key cases were causal then, so no check met the shortcut.
Smallest input that shows it: q ``[1, 2, 16]``, k and v ``[1, 1, 16]``, under ``torch.no_grad()``,
then ``v.add_(1)``: the returned ``o`` changes.
"""

import torch

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]

attention_with_lse = conforming.attention_with_lse


def attention(q, k, v, is_causal=False, *, window=None, **features):
    recording = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if (k.shape[-2] == 1 and not is_causal and window is None and not recording
            and v.shape[:-2] == q.shape[:-2] and v.dtype == q.dtype):
        return v.expand(*q.shape[:-1], v.shape[-1])  # the bug: a view of the caller's v
    return conforming.attention(q, k, v, is_causal, window=window, **features)
