"""A minimal kernel module that meets the documented contract (``properties/kernels.py``) and no more.

It is the suite's own guard against false failures: ``tests/test_conforming.py`` runs every check
on it, and a check that fails it asks for something the contract does not promise. So it takes
every liberty the contract allows: dense PyTorch in float32 (not the oracle's float64), an
``attention_with_lse`` that is forward-only (its ``o`` has no ``grad_fn``), no ``BATCH_INVARIANT``,
no packed (varlen) entry points, and every feature declared, implemented the plain way (keys
masked with ``-inf``; a row that sees no key gets 0 and ``-inf``). The broken modules in
``tests/broken/`` that test the features start from it.
"""

from __future__ import annotations

import math

import torch

FEATURES = frozenset({"scale", "gqa", "window", "softcap", "bottom_right"})
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def up(t: torch.Tensor) -> torch.Tensor:
    """``t`` in float32, or float64 for float64 inputs (gradcheck needs them)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def kv_heads(q: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """k or v with its heads repeated per query group (query head h uses kv head h // group)."""
    if t.dim() < 3 or t.shape[-3] == q.shape[-3]:
        return t
    return t.repeat_interleave(q.shape[-3] // t.shape[-3], dim=-3)


def visible(n_q: int, n_k: int, is_causal: bool, window, causal_alignment: str, device) -> torch.Tensor:
    """``[n_q, n_k]`` bool: query i sees key j (the contract's rule, written out).

    Written again here rather than imported from ``oracle.dense.visible_keys`` on purpose: this
    module stands for someone else's kernel, written from the contract's text alone, so a mistake in
    the oracle's mask shows as a disagreement instead of being shared.
    """
    i = torch.arange(n_q, device=device)[:, None]
    j = torch.arange(n_k, device=device)[None, :]
    c = i + (n_k - n_q if causal_alignment == "bottom_right" else 0)
    seen = torch.ones(n_q, n_k, dtype=torch.bool, device=device)
    if is_causal:
        seen &= j <= c
    if window is not None:
        left, right = window
        if left >= 0:
            seen &= j >= c - left
        if right >= 0:
            seen &= j <= c + right
    return seen


def softmax_scale(q: torch.Tensor, scale: float | None) -> float:
    return 1 / math.sqrt(q.shape[-1]) if scale is None else scale


def cap(s: torch.Tensor, softcap: float) -> torch.Tensor:
    return softcap * torch.tanh(s / softcap)


HIDDEN = float("-inf")
"""The score of a key a row does not see."""


def scores(q, k, is_causal, scale, window, softcap, causal_alignment):
    """Scaled, capped, masked scores in the accumulator dtype."""
    s = torch.matmul(up(q), kv_heads(q, up(k)).transpose(-2, -1)) * softmax_scale(q, scale)
    if softcap:
        s = cap(s, softcap)
    seen = visible(q.shape[-2], k.shape[-2], is_causal, window, causal_alignment, q.device)
    return s.masked_fill(~seen, HIDDEN)


def attend(s: torch.Tensor, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``softmax(s) v`` in the accumulator dtype, cast to q's; a row of ``s`` that is all ``-inf``
    (it sees no key) gives 0."""
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m.masked_fill(torch.isneginf(m), 0.0))  # a row with no key: all weights 0
    l_i = p.sum(-1, keepdim=True)
    o = torch.matmul(p, kv_heads(q, up(v))) / l_i.masked_fill(l_i == 0, 1.0)
    return o.to(q.dtype)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, *,
    scale: float | None = None, window: tuple[int, int] | None = None, softcap: float | None = None,
    causal_alignment: str = "top_left",
) -> torch.Tensor:
    return attend(scores(q, k, is_causal, scale, window, softcap, causal_alignment), q, v)


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, *,
    scale: float | None = None, window: tuple[int, int] | None = None, softcap: float | None = None,
    causal_alignment: str = "top_left",
) -> tuple[torch.Tensor, torch.Tensor]:
    # Forward-only, as the contract allows: no graph is recorded for o.
    with torch.no_grad():
        s = scores(q, k, is_causal, scale, window, softcap, causal_alignment)
        return attend(s, q, v), torch.logsumexp(s, -1).float()
