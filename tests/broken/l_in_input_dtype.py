"""Kernel module with one bug: the running row sum ``l`` is kept in the input dtype between key tiles.

Online softmax over tiles of 16 keys (``tests/broken/_blockwise.py``), with ``l = alpha l + sum p``
rounded to float16 (bfloat16) after each tile: the lse is off by the accumulated roundings of ``l``
(``u`` per tile), and every weight of the output by the same relative amount, which the row sums
show once it passes their bound (some hundreds of keys). Smallest input that shows it: float16, one
row over two tiles (17 keys), in the lse.
"""

from tests.broken._blockwise import in_input_dtype, kernel

attention, attention_with_lse = kernel(in_input_dtype("l"))
