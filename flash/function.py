"""The autograd wrapper and the public functions of the kernel-module contract.

``FlashAttention.apply(q, k, v, is_causal=False, backward="triton")`` runs the Triton forward, saves
q, k, v, o and the row log-sum-exp, and backpropagates with one of two backward passes:

- ``"triton"`` (the default): :func:`flash.backward_triton.flash_attention_backward`, the Triton
  kernels (FlashAttention-2 style), memory linear in the sequence length, deterministic;
- ``"dense"``: :func:`flash.backward.flash_attention_backward`, the spec's dense backward in
  PyTorch (``torch.compile``-d under CUDA), which materializes ``n_q x n_k`` per leading index.

Choose per call with ``flash.attention(..., backward="dense")``, or use the kernel module
:mod:`flash.with_dense_backward` (``pytest --kernel flash.with_dense_backward`` gates it).
"""

from __future__ import annotations

import torch

from flash.backward import flash_attention_backward as dense_backward
from flash.backward_triton import flash_attention_backward as triton_backward
from flash.forward import flash_attention_forward
from flash.scores import resolve

BACKWARDS = {"triton": triton_backward, "dense": dense_backward}
"""The backward passes ``FlashAttention`` can use, by name; the first is the default."""


def _check_backward(backward: object) -> None:
    if backward not in BACKWARDS:
        raise ValueError(f"backward must be one of {sorted(BACKWARDS)}, got {backward!r}")


def _run_forward(q, k, v, is_causal, backward, scale, window, softcap, causal_alignment,
                 split_keys):
    """Check ``backward``, then run the forward kernel: ``(o, lse)``."""
    _check_backward(backward)
    return flash_attention_forward(q, k, v, is_causal, scale=scale, window=window, softcap=softcap,
                                   causal_alignment=causal_alignment, split_keys=split_keys)


def _forward(ctx, q, k, v, is_causal, backward, scale, window, softcap, causal_alignment,
             split_keys):
    o, lse = _run_forward(q, k, v, is_causal, backward, scale, window, softcap, causal_alignment,
                          split_keys)
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.is_causal = is_causal
    ctx.features = resolve(q.shape[-1], is_causal, scale, window, softcap, causal_alignment)
    ctx.backward_name = backward
    return o, lse


def _backward(ctx, do):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = BACKWARDS[ctx.backward_name](q, k, v, o, lse, do, ctx.is_causal, features=ctx.features)
    return dq, dk, dv, None, None, None, None, None, None, None


def _needs_graph(q: object, k: object, v: object) -> bool:
    """Whether a call must build an autograd graph: grad mode on and an input requiring grad.

    A call that needs none runs the forward without ``Function.apply``: the same output (which
    then requires no grad either way), without autograd's host time per call (about 10 us on the
    H200's host: a decode step's GPU work is 45 us, docs/speed.md).
    """
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in (q, k, v))


class FlashAttention(torch.autograd.Function):
    """Flash Attention: Triton forward; Triton (default) or dense backward. Returns ``o``.

    ``FlashAttention.apply(q, k, v, is_causal=False, backward="triton", scale=None, window=None,
    softcap=None, causal_alignment="top_left", split_keys=None)``; ``backward`` is ``"triton"`` or
    ``"dense"`` (see the module docstring), ``split_keys`` the forward's split-KV option
    (:func:`attention`), the rest are the contract's features.
    """

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, backward="triton", scale=None, window=None,
                softcap=None, causal_alignment="top_left", split_keys=None):
        o, _ = _forward(ctx, q, k, v, is_causal, backward, scale, window, softcap, causal_alignment,
                        split_keys)
        return o

    @staticmethod
    def backward(ctx, do):
        return _backward(ctx, do)


class _FlashAttentionWithLse(torch.autograd.Function):
    """As :class:`FlashAttention`, also returning the lse (not differentiable)."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, backward="triton", scale=None, window=None,
                softcap=None, causal_alignment="top_left", split_keys=None):
        o, lse = _forward(ctx, q, k, v, is_causal, backward, scale, window, softcap, causal_alignment,
                          split_keys)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        return _backward(ctx, do)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, *,
    scale: float | None = None, window: tuple[int, int] | None = None,
    softcap: float | None = None, causal_alignment: str = "top_left", backward: str = "triton",
    split_keys: int | None = None,
) -> torch.Tensor:
    """``softmax(scale q k^T) v`` over ``[..., h, n, d]`` inputs; differentiable in q, k, v.

    The contract's features (``properties/kernels.py``), as FlashAttention-2's
    ``flash_attn_func(..., softmax_scale, causal, window_size, softcap)`` takes them:

    - ``scale``: the softmax scale; ``None`` is ``1/sqrt(d)``;
    - grouped-query heads: k and v ``[..., h_kv, n_k, d]`` with ``h_q % h_kv == 0``; query head
      ``h`` uses kv head ``h // (h_q // h_kv)``, read in place (no copy);
    - ``causal_alignment``: ``"top_left"`` (query ``i`` sees key ``j`` iff ``j <= i``, as
      ``scaled_dot_product_attention(is_causal=True)``) or ``"bottom_right"`` (``j <= i + n_k - n_q``);
    - ``window=(left, right)``: query ``i`` sees keys ``c_i - left ..= c_i + right`` (-1:
      unbounded), intersected with the causal mask; only the key tiles a window reaches are read;
    - ``softcap``: ``c > 0`` replaces each scaled score ``s`` by ``c tanh(s / c)``.

    A row that sees no key gets ``o = 0`` (lse ``-inf``) and no gradient. See :mod:`flash.forward`
    for what else is supported. Bad arguments raise ``TypeError``/``ValueError`` naming the
    argument, before any launch.

    ``backward`` picks the gradient pass: ``"triton"`` (default; Triton kernels, memory linear in
    the lengths, deterministic) or ``"dense"`` (the spec's dense PyTorch backward, ``n_q x n_k``
    memory per leading index). Both give gradients within the suite's error model.

    ``split_keys`` is the forward's split-KV option (:mod:`flash.decode`, FlashDecoding): a call with
    at most 16 query rows over many keys splits them in pieces of ``split_keys`` keys (default
    512, 1024 from 16k visible keys, 2048 from 32k: :func:`flash.decode.default_split_keys`)
    computed side by side and merged by their lse; ``0`` never splits.
    Results agree within rounding either way.
    """
    if not _needs_graph(q, k, v):
        return _run_forward(q, k, v, is_causal, backward, scale, window, softcap, causal_alignment,
                            split_keys)[0]
    return FlashAttention.apply(q, k, v, is_causal, backward, scale, window, softcap, causal_alignment,
                                split_keys)


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, *,
    scale: float | None = None, window: tuple[int, int] | None = None,
    softcap: float | None = None, causal_alignment: str = "top_left", backward: str = "triton",
    split_keys: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`attention`, plus the row log-sum-exp of the (capped) scaled scores (float32,
    ``q.shape[:-1]``; ``-inf`` for a row that sees no key).

    The lse is returned for inspection and is not differentiable; gradients flow through ``o``.
    """
    if not _needs_graph(q, k, v):
        return _run_forward(q, k, v, is_causal, backward, scale, window, softcap, causal_alignment,
                            split_keys)
    return _FlashAttentionWithLse.apply(q, k, v, is_causal, backward, scale, window, softcap,
                                        causal_alignment, split_keys)
