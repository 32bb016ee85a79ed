"""Varlen kernel module with one bug: the packed path takes a softcap of 1e4 or more as off (the
tanh skipped, since ``c tanh(s / c)`` is ``s`` while ``|s|`` is far below ``c``): wrong when the
scores come near the cap (a large ``scale``, large q and k). The dense path is right.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-fourth session): every softcap any case passed was at most 50, or a thousand times the
scores. Smallest input that shows it: one sequence, a query and two keys with scores 2e4 and
1.999e4 (``scale=1``), ``softcap=1e4``.
"""

from tests.broken import _varlen_features as base
from tests.broken._varlen_features import FEATURES, SUPPORTED_DTYPES, attention, attention_with_lse
from tests.broken.softcap_large_as_identity import scores  # the bug: a cap of 1e4 or more is off

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse", "attention_varlen",
           "attention_varlen_with_lse"]

attention_varlen_with_lse, attention_varlen = base.with_scores(scores)
