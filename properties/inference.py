"""Inference mode: a call under ``torch.inference_mode()`` is right, and leaves nothing behind that
breaks a later call recording gradients.

Serving code runs attention under ``torch.inference_mode()``, and a training loop evaluates under
it between steps. Every tensor made there is an *inference tensor*, which autograd refuses to save
for backward. A kernel that keeps something it builds on first use (a mask, a table, a bias, per
shape, as ``functools.lru_cache`` would) and later uses it in an op autograd records builds it as
an inference tensor when its first call is an inference one, and from then on every call that
records gradients raises ("Inference tensors cannot be saved for backward"); a rotary-embedding
cache of this kind is a known bug of that sort. Every other check calls outside inference mode.
"""

from __future__ import annotations

from types import ModuleType

import torch

from properties import _common
from properties.case import Case
from properties.kernels import default_device, gated, require_case

FRESH_LENGTHS = 3
"""Added to both lengths: what a kernel keeps per shape is then built first by this check's own
calls under inference mode, not by another check's earlier calls on the case in the same process.
The same amount on both keeps ``n_k - n_q`` (bottom-right alignment, a kernel's limits on it)."""


@gated
def check_inference_mode(kernel: ModuleType, case: Case, device=None) -> None:
    """On the case with both lengths :data:`FRESH_LENGTHS` longer, the forward (``attention_with_lse``
    if the module has it, and ``attention``) under ``torch.inference_mode()`` on inference copies of
    q, k, v (laid out alike), then a call recording gradients and its backward outside it, agree
    with the same calls made after them outside inference mode within twice each result's
    error-model bound; a call that raises fails (the contract, ``properties/kernels.py``)."""
    device = device or default_device()
    fresh = case.replace(n_q=case.n_q + FRESH_LENGTHS, n_k=case.n_k + FRESH_LENGTHS)
    require_case(kernel, fresh, device)
    ctx = (f"{_common.context('check_inference_mode', kernel, case)} (lengths {fresh.n_q}, {fresh.n_k}: "
           f"{FRESH_LENGTHS} more each)")
    q, k, v = fresh.make_qkv(device)
    do = fresh.make_grad_out(q.device)
    f = fresh.features()
    with torch.inference_mode():
        copies, fills = _common.nan_twins({"q": q, "k": k, "v": v})
        for source, twin in fills:
            twin.copy_(source)
        qi, ki, vi = copies["q"], copies["k"], copies["v"]
        with _common.crash_is_failure(ctx, "a call under torch.inference_mode()"):
            o_inf, lse_inf = _common.forward(kernel, qi, ki, vi, fresh.is_causal, **f)
            o_inf_attention = kernel.attention(qi, ki, vi, fresh.is_causal, **f)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    after = "a call recording gradients, after calls under torch.inference_mode()"
    with _common.crash_is_failure(ctx, after):
        o_grad = kernel.attention(*leaves, fresh.is_causal, **f)
        dq, dk, dv = torch.autograd.grad(o_grad, leaves, do)
    got = {"o": o_inf, "lse": lse_inf, "o of attention()": o_inf_attention,
           "o with gradients recorded": o_grad.detach(), "dq": dq, "dk": dk, "dv": dv}
    want = _common.results(kernel, q, k, v, do, fresh.is_causal, f)
    want["o of attention()"] = want["o"]
    _common.assert_results_agree(got, want, q, k, v, do, fresh.is_causal, "the calls under "
                                 "torch.inference_mode() (o, lse) and the training call after them vs "
                                 "calls made after, outside it", ctx, **f)
