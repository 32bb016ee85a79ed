"""Varlen kernel module with one bug: it keeps each batch layout's mask of rows that belong to no
sequence with keys (built from the ``cu_seqlens`` values on first use, as ``functools.lru_cache``
on them would) and zeroes those rows with ``masked_fill``, which autograd saves for backward. A
first packed call under ``torch.inference_mode()`` builds the mask as an inference tensor, and
every later packed call that records gradients, with that layout, raises ("Inference tensors
cannot be saved for backward").

Every call is right as long as a layout's first call is not an inference one. Written blind to the
suite in a held-out round of other people's kernels (docs/mutation.md, the thirty-second session):
the dense calls had an inference-mode check, the packed ones none. Smallest input that shows it:
one sequence of one row and one key under inference mode, then the same layout with gradients.
"""

import torch

from tests.broken._varlen import attention, attention_with_lse, run_sequences, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

_KEYLESS_ROWS: dict = {}


def _keyless_rows(q, cu_seqlens_q, cu_seqlens_k) -> torch.Tensor:
    key = (tuple(cu_seqlens_q.tolist()), tuple(cu_seqlens_k.tolist()), q.device)
    if key not in _KEYLESS_ROWS:  # the bug: kept whatever mode the first call ran in
        rows = torch.zeros(q.shape[0], 1, 1, dtype=torch.bool, device=q.device)
        for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
            rows[rows_q] = rows_k.start == rows_k.stop
        _KEYLESS_ROWS[key] = rows
    return _KEYLESS_ROWS[key]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    o, lse = run_sequences(q, k, v, spans(cu_seqlens_q, cu_seqlens_k), is_causal)
    return o.masked_fill(_keyless_rows(q, cu_seqlens_q, cu_seqlens_k), 0.0), lse


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
