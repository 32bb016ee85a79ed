"""Kernel module with one bug: the ``scale`` argument is accepted and ignored (``1 / sqrt(d)`` is
always used).

With ``scale=None`` or ``scale=1/sqrt(d)`` it is right; the smallest input that shows it is any call
with another scale and scores that are not all equal.
"""

import math

from tests.broken._features import variant


def softmax_scale(q, scale):
    return 1 / math.sqrt(q.shape[-1])  # the bug


_module = variant(__name__ + "._impl", softmax_scale=softmax_scale)
FEATURES, SUPPORTED_DTYPES = _module.FEATURES, _module.SUPPORTED_DTYPES
attention, attention_with_lse = _module.attention, _module.attention_with_lse
