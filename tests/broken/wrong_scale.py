"""Kernel module with one bug: scores scaled by 1/d instead of 1/sqrt(d).

It is the correct kernel on inputs of head dim 1 (where 1/d = 1/sqrt(d)) and wrong elsewhere:
the smallest input that shows it is any case with d >= 2 whose scores are not all equal.
"""

import math

import torch

import flash


def attention_with_lse(q, k, v, is_causal=False):
    # Pre-scaling q by 1/sqrt(d) makes the kernel's 1/sqrt(d) into 1/d overall.
    o, lse = flash.attention_with_lse(q / math.sqrt(q.shape[-1]), k, v, is_causal)
    return o, lse


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False):
    return attention_with_lse(q, k, v, is_causal)[0]
