"""Varlen kernel module with one bug: it runs the packed batch's sequences in a random order (a
load-balancing schedule with random tie-breaks), drawn from the caller's default generator
(``torch.randperm`` without a generator of its own), so every packed call advances the caller's
random state.

Each sequence is computed alone, so the order changes no bit of any result. What it breaks is the
caller's reproducibility (dropout masks, sampled tokens after it). Smallest input that shows it:
``torch.get_rng_state()`` before and after one packed call.
"""

import torch

from tests.broken._varlen import attention, attention_with_lse, run_sequences, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    schedule = spans(cu_seqlens_q, cu_seqlens_k)
    order = torch.randperm(len(schedule)).tolist()  # the bug: the caller's generator
    results = {b: run_sequences(q, k, v, [schedule[b]], is_causal) for b in order}
    return tuple(torch.cat([results[b][i] for b in range(len(schedule))]) for i in (0, 1))

def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
