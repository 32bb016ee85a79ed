"""Kernel module with one bug: it folds the softmax scale into ``q`` in place (``q.mul_(scale)``,
to save a multiply per score), so the caller's ``q`` comes back scaled.

Each call's output is right for the ``q`` it was given; the next use of ``q`` (a second call, the
oracle, the rest of the model) sees ``q / sqrt(d)``. Smallest input that shows it: any head dim
d > 1 (at d = 1 the scale is 1).
"""

import math

import torch

from tests.broken import _float32


def _fold_scale(q):
    with torch.no_grad():
        q.mul_(1 / math.sqrt(q.shape[-1]))  # the bug: in place, on the caller's tensor
    return q


def attention_with_lse(q, k, v, is_causal=False):
    original = q.detach().clone()
    _fold_scale(q)
    # Right for the q it was given: the scores of the (now scaled) q at scale 1 are the scores of
    # the original q at scale 1/sqrt(d).
    o, lse = _float32.attention_with_lse(original, k, v, is_causal)
    return o, lse


def attention(q, k, v, is_causal=False):
    leaf = q
    q = q.clone() if q.requires_grad else q  # autograd's graph stays the original's
    o = _float32.attention(q, k, v, is_causal)
    _fold_scale(leaf)
    return o
