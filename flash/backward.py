"""The backward pass as the spec describes it: dense attention rebuilt in PyTorch from the saved lse.

Given the saved ``q, k, v, o``, the forward's row log-sum-exp ``lse`` and the upstream gradient
``do``, with ``P = exp(S - lse)``, ``S = scale * q k^T`` (softcapped and masked as the forward's):

    dv = P^T do,   dP = do v^T,   D = rowsum(do * o),   dS = P * (dP - D),
    dq = scale * dS k,   dk = scale * dS^T q

All of it runs in float32 and materializes ``n_q x n_k`` per leading index: the memory cost the
Triton backward, :mod:`flash.backward_triton`, avoids. That one is ``flash``'s default; this one is
chosen with ``backward="dense"`` or the kernel module :mod:`flash.with_dense_backward`.

Under CUDA it runs through ``torch.compile``; on the CPU (Triton interpreter) it runs eagerly,
because inductor would recompile for every new shape the suite sweeps, at seconds each on a small
machine. ``FLASH_COMPILE_BACKWARD=1`` or ``=0`` forces the
choice; if compiling fails, the eager path is used and a warning says so once.
"""

from __future__ import annotations

import os
import warnings

import torch

from flash.scores import Features, resolve
from oracle.dense import expand_kv, visible_mask


def dense_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    do: torch.Tensor,
    is_causal: bool,
    features: Features | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients ``dq, dk, dv`` (in the dtype of q) of attention, recomputed densely from ``lse``.

    ``features`` as the forward resolved them (:func:`flash.scores.resolve`; default none).
    Grouped heads are expanded (k, v repeated per group) and their kv gradients summed per group.
    """
    f = resolve(q.shape[-1], is_causal) if features is None else features
    qf, of, dof = (t.float() for t in (q, o, do))
    kf, vf = (expand_kv(q, t).float() for t in (k, v))
    s = torch.matmul(qf, kf.transpose(-2, -1)) * f.scale
    if f.softcap:
        t = torch.tanh(s / f.softcap)
        s = t * f.softcap
    window = None if f.left == f.right == -1 else (f.left, f.right)
    seen = visible_mask(q.shape[-2], k.shape[-2], q.device, window=window,
                        causal_alignment="bottom_right" if f.bottom_right else "top_left")
    if seen is not None:
        s = s.masked_fill(~seen, float("-inf"))
    # P from the saved lse, as the spec says, not a softmax recomputed here: a wrong lse must show
    # in the gradients. Its rounding (the forward's order, base 2) against these scores is what the
    # error model's score term (properties.error_model.score_magnitude) allows for. A row that
    # sees no key has lse = -inf and scores at -inf: subtracting 0 instead makes its P 0, not NaN.
    p = torch.exp(s - lse.masked_fill(lse == float("-inf"), 0.0).unsqueeze(-1))
    dv = torch.matmul(p.transpose(-2, -1), dof)
    dp = torch.matmul(dof, vf.transpose(-2, -1))
    delta = (dof * of).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    if f.softcap:
        ds = ds * (1.0 - t * t)  # d/dx c tanh(x / c) = 1 - tanh^2
    dq = torch.matmul(ds, kf) * f.scale
    dk = torch.matmul(ds.transpose(-2, -1), qf) * f.scale
    if k.dim() >= 3 and k.shape[-3] != q.shape[-3]:  # grouped heads: sum over each group
        dk, dv = (g.unflatten(-3, (k.shape[-3], -1)).sum(-3) for g in (dk, dv))
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


_compiled = None
_compile_failed = False


def _want_compile(device: torch.device) -> bool:
    forced = os.environ.get("FLASH_COMPILE_BACKWARD")
    if forced is not None:
        return forced not in ("", "0")
    return device.type == "cuda"


def flash_attention_backward(q, k, v, o, lse, do, is_causal: bool, *, features: Features | None = None):
    """:func:`dense_backward`, compiled where that is wanted and works (see the module docstring)."""
    global _compiled, _compile_failed
    if _want_compile(q.device) and not _compile_failed:
        if _compiled is None:
            _compiled = torch.compile(dense_backward, dynamic=True)
        try:
            return _compiled(q, k, v, o, lse, do, is_causal, features)
        except Exception as exc:  # noqa: BLE001 - any compiler failure means: run eagerly
            _compile_failed = True
            warnings.warn(
                f"torch.compile of the dense backward failed ({type(exc).__name__}: {exc}); "
                "using the eager backward from now on",
                RuntimeWarning,
                stacklevel=2,
            )
    return dense_backward(q, k, v, o, lse, do, is_causal, features)
