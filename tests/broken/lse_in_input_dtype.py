"""Kernel module with one bug: the lse is stored in the input dtype (a float16 or bfloat16 buffer,
read back as float32), for the caller and for the backward.

Online softmax over tiles of 16 keys (``tests/broken/_blockwise.py``); the output is right, the lse
is off by up to ``u |lse|`` (float16: 2e-3 for an lse of 4), and the backward's ``P = exp(S - lse)``
by that much, relative. Smallest input that shows it: float16, any row whose lse is not a float16
number, e.g. one query and three keys. An lse held to the input dtype's accuracy (before issue #19)
let it through.
"""

from tests.broken._blockwise import in_input_dtype, kernel

attention, attention_with_lse = kernel(in_input_dtype("lse"))
