"""Kernel module with one bug: the output accumulator ``acc`` is kept in the input dtype between key
tiles.

Online softmax over tiles of 16 keys (``tests/broken/_blockwise.py``), with ``acc = alpha acc + p v``
rounded to float16 (bfloat16) after each tile: one rounding of the output per tile instead of one in
all, an error that grows like the square root of the number of tiles. Within the output's own bound
(twice the float16 reference's error, which rounds the probabilities and the output) for a few
tiles; shows on long rows where the value-affine check compares ``attention(a v + b)`` with
``a o + b``: 1025 keys (65 tiles) in float16 or bfloat16.
"""

from tests.broken._blockwise import in_input_dtype, kernel

attention, attention_with_lse = kernel(in_input_dtype("acc"))
