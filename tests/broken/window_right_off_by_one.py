"""Kernel module with one bug: the window's right bound is off by one, ``j <= c_i + right + 1``, so
each row also sees the key just past its window.

Without a window (or with ``right = -1``) it is correct; the smallest input that shows it is any
window with ``right >= 0`` and a key past some row's window.
"""

from tests import conforming
from tests.broken._features import variant


def visible(n_q, n_k, is_causal, window, causal_alignment, device):
    if window is not None and window[1] >= 0:
        window = (window[0], window[1] + 1)  # the bug
    return conforming.visible(n_q, n_k, is_causal, window, causal_alignment, device)


_module = variant(__name__ + "._impl", visible=visible)
FEATURES, SUPPORTED_DTYPES = _module.FEATURES, _module.SUPPORTED_DTYPES
attention, attention_with_lse = _module.attention, _module.attention_with_lse
