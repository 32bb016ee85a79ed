"""Kernel module with one bug: a softcap of 1e4 or more is taken as off (the tanh skipped, since
``c tanh(s / c)`` is ``s`` while ``|s|`` is far below ``c``). Right for scores far below the cap,
wrong when they come near it: a large ``scale``, or large q and k (the contract bounds neither).

The dense twin of ``varlen_softcap_large_as_identity`` (a held-out module of the thirty-fourth
session, docs/mutation.md): every softcap any case passed was at most 50, or a thousand times the
scores (``check_softcap``'s limit, where the identity is right). Smallest input that shows it: one
query, two keys with scores 2e4 and 1.999e4 (``scale=1``), ``softcap=1e4``.
"""

from tests import conforming as C
from tests.broken._features import variant

AS_OFF = 1e4


def cap(s, softcap):
    return s if softcap >= AS_OFF else C.cap(s, softcap)  # the bug: a large cap is taken as none


_module = variant(__name__ + "._impl", cap=cap)
FEATURES, SUPPORTED_DTYPES = _module.FEATURES, _module.SUPPORTED_DTYPES
attention, attention_with_lse, scores = _module.attention, _module.attention_with_lse, _module.scores
