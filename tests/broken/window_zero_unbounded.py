"""Kernel module with one bug: a window bound of 0 is taken as no bound (``if right:`` where
``if right >= 0:`` was meant), so ``window=(-1, 0)`` sees the future and ``(w, 0)`` too.

Windows whose bounds are all nonzero are right; the smallest input that shows it is
``window=(-1, 0)`` without ``is_causal`` (it should be causal attention).
"""

from tests import conforming
from tests.broken._features import variant


def visible(n_q, n_k, is_causal, window, causal_alignment, device):
    if window is not None:
        window = tuple(bound if bound else -1 for bound in window)  # the bug: 0 means unbounded
    return conforming.visible(n_q, n_k, is_causal, window, causal_alignment, device)


_module = variant(__name__ + "._impl", visible=visible)
FEATURES, SUPPORTED_DTYPES = _module.FEATURES, _module.SUPPORTED_DTYPES
attention, attention_with_lse = _module.attention, _module.attention_with_lse
