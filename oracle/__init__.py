"""References for the kernel: the float64 dense oracle and the readable blockwise mock.

``oracle.adapters`` wraps each reference (and PyTorch's ``scaled_dot_product_attention``) as a
kernel module, so the whole suite can run against it with ``--kernel oracle.adapters.<name>``.
"""

from oracle.dense import causal_mask, dense_attention, dense_scores
from oracle.mock import FlashAttentionMock

__all__ = ["FlashAttentionMock", "causal_mask", "dense_attention", "dense_scores"]
