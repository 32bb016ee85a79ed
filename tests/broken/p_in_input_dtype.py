"""Kernel module with one bug: the backward recomputes ``P = exp(S - lse)`` from an exponent rounded
to the input dtype (exp2 of a half-precision argument).

The forward is right (``tests/broken/_blockwise.py``); in the backward each probability moves by up
to ``u |S - lse|``, relative. A flash kernel rounds ``P`` itself to the input dtype before its
products (so does the float16 reference), which costs ``u``; this costs up to ``|S - lse|`` times
that, about ``log n_k`` for a spread row. That is still the size of what the float16 reference makes
from its float16 scores (``u |S|``), which the bound must allow (PyTorch's own composite attention
computes them so), so only an error the same for a whole row shows: equal scores, every exponent
``-log n_k``. Smallest input that shows it: float16 or bfloat16, equal scores over 3697 keys
(``log 3697`` is rounded by 7 u in both), a few queries, in ``dk``; over 361 keys (3.5 u) it
passes in bfloat16.
"""

from tests.broken._blockwise import in_input_dtype, kernel

attention, attention_with_lse = kernel(in_input_dtype("P"))
