"""Kernel module: PyTorch's ``scaled_dot_product_attention``, whatever backend it picks.

It has no ``attention_with_lse`` (SDPA does not return the lse), so tests that need one skip for
this module and say why. Inputs and the upstream gradient whose data are not 16-byte aligned are
copied first: see :func:`_aligned` for the SDPA failure that made this necessary. Its
``attention_varlen`` pads the packed batch, passes the varlen mask
(:func:`oracle.varlen.varlen_mask`) as a boolean ``attn_mask`` and unpacks; it has no
``attention_varlen_with_lse`` either.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oracle.varlen import pad_packed, unpad, varlen_mask

ALIGNMENT = 16
"""Bytes at which the adapter hands SDPA its tensors' first elements (see :func:`_aligned`)."""


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """``t``, or a copy of it in fresh storage when its first element is not 16-byte aligned.

    Why: on an H100 with torch 2.11 (CUDA 13), the suite's GPU run found SDPA returning NaN and then
    raising "CUDA error: misaligned address" (which poisons the CUDA context) for float16 inputs of
    the ``offset`` layout, whose data start 37 elements (74 bytes) into their allocation. That is a
    bug of SDPA's kernel selection, not of the math this adapter exists to provide; the copy keeps
    the reference usable on such inputs (a copy changes no value).
    """
    return t if t.data_ptr() % ALIGNMENT == 0 else t.clone()


class _AlignedGrad(torch.autograd.Function):
    """Identity whose backward hands on an aligned upstream gradient (SDPA's backward reads it)."""

    @staticmethod
    def forward(ctx, o):
        return o.view_as(o)

    @staticmethod
    def backward(ctx, do):
        return _aligned(do)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
) -> torch.Tensor:
    q, k, v = (_aligned(t) for t in (q, k, v))
    return _AlignedGrad.apply(F.scaled_dot_product_attention(q, k, v, is_causal=is_causal))


def attention_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool = False,
) -> torch.Tensor:
    qp, valid_q = pad_packed(q, cu_seqlens_q, max_seqlen_q)
    kp, _ = pad_packed(k, cu_seqlens_k, max(max_seqlen_k, 1))
    vp, _ = pad_packed(v, cu_seqlens_k, max(max_seqlen_k, 1))
    # No row of this mask is all False (a padded row sees key 0 of its block), so SDPA gives no NaN
    # there, and none reaches the gradients through the dropped rows.
    mask = varlen_mask(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max(max_seqlen_k, 1), is_causal)
    return unpad(F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask), valid_q)
