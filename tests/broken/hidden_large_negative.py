"""Kernel module with one bug: hidden keys get a score of ``-1e30`` instead of ``-inf``.

Every row that sees at least one key is right (``exp(-1e30 - m)`` is 0); a row that sees no key gets
uniform weights over all keys (the mean of v, a finite lse near -1e30) instead of 0 and ``-inf``.
The smallest input that shows it: a window or bottom-right alignment that leaves a row empty.
"""

from tests.broken._features import variant

_module = variant(__name__ + "._impl", HIDDEN=-1e30)
FEATURES, SUPPORTED_DTYPES = _module.FEATURES, _module.SUPPORTED_DTYPES
attention, attention_with_lse = _module.attention, _module.attention_with_lse
