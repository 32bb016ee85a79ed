"""Kernel module with one bug: the running row max ``m`` is kept in the input dtype between key tiles.

Online softmax over tiles of 16 keys (``tests/broken/_blockwise.py``), with ``m`` stored as float16
(bfloat16) after each tile, as a kernel that holds its row statistics in a half-precision buffer
would. The tile's own ``p`` used the float32 max, but the next tile rescales ``acc`` and ``l`` from
the rounded one, and the lse adds the rounded one, so the lse is off by up to ``u |m|`` (the output
hardly moves: ``acc`` and ``l`` carry the same factor). Smallest input that shows it: float16, one
row over two tiles (17 keys) whose largest score is not a float16 number; the float32 reference
bounds the lse to ~1e-5 where the error is ~1e-3. An lse held to the input dtype's accuracy (before
issue #19) let it through.
"""

from tests.broken._blockwise import in_input_dtype, kernel

attention, attention_with_lse = kernel(in_input_dtype("m"))
