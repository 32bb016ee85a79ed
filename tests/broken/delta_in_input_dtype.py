"""Kernel module with one bug: the backward's ``D = rowsum(do * o)`` is kept in the input dtype.

The forward is right (``tests/broken/_blockwise.py``); the backward rounds ``D`` to float16
(bfloat16), so ``dS = P (dP - D)`` no longer sums to zero over a row. Where a row sees one key,
``dP = D`` exactly and ``dq = dk = 0``: the rounding of ``D`` is then the whole of ``dq`` and
``dk``. Smallest input that shows it: float16, one key (``n_k = 1``), a few queries; elsewhere the
error is about what the float16 reference makes itself.
"""

from tests.broken._blockwise import in_input_dtype, kernel

attention, attention_with_lse = kernel(in_input_dtype("D"))
