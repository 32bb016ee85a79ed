"""Helpers shared by the invariant checks: messages, placing new tensors, bounds for one output."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import NamedTuple

import torch

from oracle.dense import dense_attention, dense_scores, visible_mask
from properties import error_model as em
from properties.case import MIXED, Case, arrange
from properties.kernels import kernel_name, require_case


def context(check: str, kernel: ModuleType, case: Case) -> str:
    """The start of every message: which check, which kernel, which case (a replayable line)."""
    return f"{check} failed for kernel {kernel_name(kernel)} on {case}"


@contextlib.contextmanager
def crash_is_failure(context: str, what: str) -> Iterator[None]:
    """Around a kernel call on valid inputs: an exception there is the check's finding, raised as an
    ``AssertionError`` that names the check's context and ``what`` raised (its first line)."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - any exception of the kernel here is the failure
        first = (str(exc).strip().splitlines() or [""])[0]
        raise AssertionError(f"{context}: {what} raised {type(exc).__name__}: {first}") from exc


def gradients_with(call: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor], wanted: tuple[int, ...],
                   do: torch.Tensor, context: str) -> list[torch.Tensor | None]:
    """``[dq, dk, dv]`` of ``call(q, k, v)`` for upstream ``do`` with only the inputs at the positions
    ``wanted`` requiring grad (``None`` for the others); a crash is the failure."""
    leaves = [t.detach().requires_grad_(i in wanted) for i, t in enumerate(inputs)]
    with crash_is_failure(context, "the call or its backward"):
        asked = torch.autograd.grad(call(*leaves), [leaves[i] for i in wanted], do)
    got: list[torch.Tensor | None] = [None, None, None]
    for i, g in zip(wanted, asked):
        got[i] = g
    return got


def second_backward(call: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor], do: torch.Tensor,
                    again: torch.Tensor, context: str) -> tuple[torch.Tensor, ...]:
    """The gradients of the second of two backwards of one forward ``call(q, k, v)``
    (``retain_graph=True``): the first for the upstream gradient ``do``, the second for ``again``;
    a crash of the second is the failure."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    o = call(*leaves)
    torch.autograd.grad(o, leaves, do, retain_graph=True)
    with crash_is_failure(context, "the second backward of one forward"):
        return torch.autograd.grad(o, leaves, again)


def another_upstream(do: torch.Tensor) -> torch.Tensor:
    """A second upstream gradient unlike ``do`` (each row's entries rotated and scaled by -0.75), for
    a second backward of one forward: a second loss on the same activations has its own gradient,
    and a backward that kept something of the first (its ``rowsum(do * o)``, its result) returns
    the first's gradients, or a mix, where the same upstream gradient twice would agree."""
    return -0.75 * do.roll(1, -1)


def fresh_calls_say(run: Callable[[], dict]) -> str:
    """What two fresh calls (``run()``: a forward and one backward, giving ``dq, dk, dv``) say of a
    second backward that differed from the first: the kernel is not deterministic, or only the
    second backward of one forward differs."""
    fresh = [run() for _ in range(2)]
    unstable = [name for name in ("dq", "dk", "dv") if not torch.equal(fresh[0][name], fresh[1][name])]
    if unstable:
        return (f"; two fresh calls differ too (in {', '.join(unstable)}): the kernel is not deterministic "
                "on this case (check_deterministic)")
    return ("; two fresh calls (a forward and one backward each) give the same bits: only the second "
            "backward of one forward differs")


def memory_of(t: torch.Tensor) -> torch.Tensor:
    """Every byte of the storage ``t`` is a view of, as a flat uint8 tensor (a view, not a copy)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def nan_twins(tensors: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list]:
    """For each tensor, one laid out alike (same shape, strides, storage offset, and the same memory
    shared among them, as k and v share one buffer under ``broadcast_kv``) in new memory whose every
    byte is ``0xFF`` (NaN in float16, bfloat16 and float32), or 0 for an integer tensor (offsets
    ``cu_seqlens`` all 0: every sequence empty, where -1s would send a kernel that reads them too
    early out of bounds); and the ``(source, twin)`` memory pairs whose copy fills them."""
    twins: dict[str, torch.Tensor] = {}
    memory: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    for name, t in tensors.items():
        key = t.untyped_storage().data_ptr()
        if key not in memory:
            source = memory_of(t)
            memory[key] = (source, torch.full_like(source, 0xFF if t.is_floating_point() else 0))
        twin = torch.empty(0, dtype=t.dtype, device=t.device)
        twins[name] = twin.set_(memory[key][1].untyped_storage(), t.storage_offset(), t.shape, t.stride())
    return twins, list(memory.values())


def results(kernel: ModuleType, q, k, v, do, is_causal: bool, features: dict, leaves=None) -> dict:
    """``o`` and the lse outside autograd (:func:`forward`), then ``o`` with gradients recorded and
    its ``dq, dk, dv`` for ``do``, through ``leaves`` (default: new leaves sharing q, k, v's memory;
    pass the same ones again to call with the same tensor objects): what the checks that compare two
    rounds of calls compare (:func:`assert_results_agree`)."""
    o, lse = forward(kernel, q, k, v, is_causal, **features)
    leaves = leaves or [t.detach().requires_grad_() for t in (q, k, v)]
    o_grad = kernel.attention(*leaves, is_causal, **features)
    dq, dk, dv = torch.autograd.grad(o_grad, leaves, do)
    return {"o": o, "lse": lse, "o with gradients recorded": o_grad.detach(), "dq": dq, "dk": dk, "dv": dv}


def results_and_plain_call(kernel: ModuleType, q, k, v, do, is_causal: bool, features: dict,
                           leaves=None) -> dict:
    """:func:`results`, and ``o`` of ``attention`` outside autograd (a module may serve that call by
    another path than ``attention_with_lse``)."""
    out = results(kernel, q, k, v, do, is_causal, features, leaves=leaves)
    with torch.no_grad():
        out["o of attention()"] = kernel.attention(q, k, v, is_causal, **features)
    return out


def kept_bits(results: dict) -> dict:
    """A copy of each result (None skipped), to hold :func:`assert_results_kept` against later."""
    return {name: t.detach().clone() for name, t in results.items() if t is not None}


def assert_results_kept(results: dict, copies: dict, after: str, context: str,
                        arrange: Callable[[str, torch.Tensor], tuple[torch.Tensor, tuple]] | None = None,
                        ) -> None:
    """Each of ``results`` bit-identical (NaN payloads too) to its copy taken when the call returned
    it (:func:`kept_bits`): a call's results are the caller's (the contract), so no later call and no
    write to the inputs may change them. A module that reuses one output buffer per shape, or returns
    a view of an input, fails here. ``arrange(name, t)``: the result laid out for the message, with
    its axes' names (the packed checks pad by sequence); by default as it is."""
    arrange = arrange or (lambda name, t: (t, ("row",) if name == "lse" else ("row", "col")))
    for name, kept in copies.items():
        (now, axes), (copy, _) = arrange(name, results[name].detach()), arrange(name, kept)
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[now.element_size()]
        differ = (now.view(bits) != copy.view(bits)).reshape(-1)
        if not bool(differ.any()):
            continue
        first = int(differ.nonzero()[0])
        where = em._index(first, tuple(copy.shape), axes)
        raise AssertionError(
            f"{name}, as returned by an earlier call, changed after {after}: {context}: "
            f"{int(differ.sum())} of {differ.numel()} elements; first at {where}: now "
            f"{now.reshape(-1)[first].item()!r}, returned as {copy.reshape(-1)[first].item()!r} (bound: "
            f"bit-for-bit equality; a call's results are the caller's, no later call may write to them)")


def assert_results_agree(got: dict, want: dict, q, k, v, do, is_causal: bool, what: str, context: str,
                         bounds=None, **features) -> None:
    """Each result in ``got`` (named as :func:`results` names them; any other name is an output
    ``o``) within twice its error-model bound of ``want``'s of the same name: two calls, each within
    its bound of the oracle for these inputs, so a bug that shows in every call is the oracle
    checks' to report, and a kernel whose bits vary from call to call is not held to bits here.
    ``bounds``: :func:`output_and_gradient_bounds` of these inputs, when the caller has them."""
    (bound, how), grad_bounds = bounds or output_and_gradient_bounds(q, k, v, do, is_causal, **features)
    grad_bound_of = dict(zip(("dq", "dk", "dv"), grad_bounds))
    for name, result in got.items():
        if result is None:
            continue
        if name == "lse":
            (b, h), kind = lse_bound(q, k, is_causal, **features), "lse's"
        elif name in grad_bound_of:
            (b, h), kind = grad_bound_of[name], "gradient's"
        else:
            (b, h), kind = (bound, how), "output's"
        em.assert_within_bound(f"{name}: {what}", result, want[name], em.two_sided_bound(b, b),
                               f"the {kind} bound twice; each = {h}", context=context,
                               axes=("row",) if name == "lse" else ("row", "col"))


def place(t: torch.Tensor, case: Case, device, name: str) -> torch.Tensor:
    """A new input tensor ``name`` (q, k, v or do; built on the CPU, row-major) in the case's layout.

    ``broadcast_kv`` describes how k and v share memory, which a made-up tensor cannot; it is
    placed contiguously. Under ``mixed``, each tensor takes its own layout from ``case.MIXED``.
    """
    layout = case.layout
    if layout == "broadcast_kv":
        layout = "contiguous"
    elif layout == "mixed":
        layout = MIXED[name]
    return arrange(t, layout, device)


def forward(kernel: ModuleType, q, k, v, is_causal: bool, **features):
    """``(o, lse)``, or ``(o, None)`` for a kernel module without ``attention_with_lse``.

    ``features`` are the call's feature keywords (:meth:`Case.features`), passed on as they are.
    """
    with torch.no_grad():
        fn = getattr(kernel, "attention_with_lse", None)
        if fn is None:
            return kernel.attention(q, k, v, is_causal, **features), None
        return fn(q, k, v, is_causal, **features)


def output_bound(q, k, v, is_causal: bool, **features) -> tuple[float, str]:
    """The error model's bound on one kernel output for these inputs (as the oracle check uses)."""
    with torch.no_grad():
        o64, _ = dense_attention(q, k, v, is_causal, **features)
        o_ref, _ = dense_attention(q, k, v, is_causal, compute_dtype=None, **features)
    return _output_bound(o64, o_ref, q, k, v, features.get("scale"))


def _output_bound(o64, o_ref, q, k, v, scale) -> tuple[float, str]:
    return em.error_bound(em.OUTPUT, o_ref, o64, dtype=q.dtype, **em.output_scales(q, k, v, scale=scale))


def lse_bound(q, k, is_causal: bool, **features) -> tuple[float, str]:
    """The error model's bound on one kernel lse for these inputs (as the oracle check uses): the
    reference in float32, the lse's own dtype (:func:`properties.error_model.lse_reference_dtype`)."""
    with torch.no_grad():  # the lse does not depend on v; k stands in for it
        _, lse64 = dense_attention(q, k, k, is_causal, **features)
        _, lse_ref = dense_attention(q, k, k, is_causal, compute_dtype=em.lse_reference_dtype(q.dtype),
                                     **features)
    return em.error_bound(em.LSE, lse_ref, lse64, dtype=em.LSE_DTYPE,
                          **em.lse_scales(q, k, lse64, scale=features.get("scale")))


class OracleGradients(NamedTuple):
    """What a gradient bound is made of (:func:`oracle_gradients`)."""

    want: tuple[torch.Tensor, ...]
    ref: tuple[torch.Tensor, ...]
    magnitudes: tuple[float, float, float]
    scores: float
    rounded: tuple[float | None, float | None, None]
    inherited: tuple[float, float, float]
    outputs: tuple[torch.Tensor, torch.Tensor]
    """The oracle's and the reference's forward output ``o`` (float64, same dtype), which the
    gradients came through."""


def oracle_gradients(q, k, v, do, is_causal: bool, **features) -> OracleGradients:
    """The float64 oracle's and the same-dtype reference's ``(dq, dk, dv)`` for upstream gradient
    ``do``, with the error model's floor magnitudes for each, the scores' size, and for dq and dk
    what a kernel may round and what each inherits from the stored output
    (:func:`properties.error_model.gradient_terms`; dv keeps the floor's magnitude for both)."""

    def grads(dtype, compute_dtype):
        leaves = [t.detach().to(dtype or t.dtype).requires_grad_() for t in (q, k, v)]
        out = dense_attention(*leaves, is_causal, compute_dtype=compute_dtype, **features)[0]
        return out.detach(), torch.autograd.grad(out, leaves, do.to(out.dtype))

    (o64, want), (o_ref, ref) = grads(torch.float64, torch.float64), grads(None, None)
    scale = features.get("scale")
    with torch.no_grad():
        p, _ = probabilities(q, k, v, is_causal, **features)
        sizes = em.gradient_terms(q, k, v, do, p, o64, scale=scale)
    magnitudes = em.gradient_magnitudes(q, k, v, do, want, scale=scale, probabilities=p, output=o64)
    # What dq and dk round: the terms of their products, at least the result stored itself.
    rounded = tuple(max(t, float(g.abs().max()) if g.numel() else 0.0) for t, g in zip(sizes.terms, want[:2]))
    return OracleGradients(want, ref, magnitudes, em.score_magnitude(q, k, scale=scale),
                           (*rounded, None), (*sizes.inherited, 0.0), (o64, o_ref))


def probabilities(q, k, v, is_causal: bool, **features) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 oracle's probabilities ``P`` (``[..., h_q, n_q, n_k]``, 0 at hidden keys and on
    rows that see none) and output ``o``."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    o64, lse64 = dense_attention(q64, k64, v64, is_causal, **features)
    seen = torch.isfinite(lse64).unsqueeze(-1)
    shift = torch.where(seen, lse64.unsqueeze(-1), torch.zeros_like(lse64.unsqueeze(-1)))
    p = dense_scores(q64, k64, is_causal, **features).sub_(shift).exp_()  # in place: one n_q x n_k
    return p.masked_fill_(~seen, 0.0), o64


def output_and_gradient_bounds(q, k, v, do, is_causal: bool,
                               **features) -> tuple[tuple[float, str], list[tuple[float, str]]]:
    """The error model's bounds on one call's ``o`` (as :func:`output_bound`) and on its ``dq, dk,
    dv`` (as the oracle check makes them), from one oracle forward: the one the gradients come
    through (:attr:`OracleGradients.outputs`)."""
    g = oracle_gradients(q, k, v, do, is_causal, **features)
    lengths = em.sum_lengths(q.shape[-2], k.shape[-2], em.group_of(q, k))
    grads = [em.error_bound(em.GRADIENT, g_ref, g64, dtype=q.dtype, magnitude=m, scores=g.scores, terms=n,
                            rounded=r, inherited=i)
             for g_ref, g64, m, n, r, i in zip(g.ref, g.want, g.magnitudes, lengths, g.rounded, g.inherited)]
    return _output_bound(*g.outputs, q, k, v, features.get("scale")), grads


def assert_output_matches_oracle(o, q, k, v, is_causal: bool, context: str, **features) -> None:
    """``o`` (a kernel's, for these inputs) in q's dtype and on q's device, as the contract says
    (``properties/kernels.py``), and within the error model of the float64 oracle."""
    with torch.no_grad():
        o64, _ = dense_attention(q, k, v, is_causal, **features)
        o_ref, _ = dense_attention(q, k, v, is_causal, compute_dtype=None, **features)
    _assert_output(o, o64, o_ref, q, k, v, context, features.get("scale"))


def _assert_output(o, o64, o_ref, q, k, v, context: str, scale) -> None:
    if o.dtype != q.dtype or o.device != q.device:
        raise AssertionError(f"output o: {context}: dtype {o.dtype} on {o.device}, expected q's, "
                             f"{q.dtype} on {q.device} (bound: the contract's dtype and device)")
    em.assert_within_error_model(em.OUTPUT, o, o64, o_ref, dtype=q.dtype,
                                 **em.output_scales(q, k, v, scale=scale), context=context)


def assert_lse_matches_oracle(lse, q, k, v, is_causal: bool, context: str, **features) -> None:
    """``lse`` float32 and within the error model of the oracle's, its reference in float32 (the
    lse's own dtype, :func:`properties.error_model.lse_reference_dtype`)."""
    with torch.no_grad():
        _, lse64 = dense_attention(q, k, v, is_causal, **features)
    _assert_lse(lse, lse64, q, k, v, is_causal, context, **features)


def assert_forward_matches_oracle(o, lse, q, k, v, is_causal: bool, context: str, **features) -> None:
    """:func:`assert_output_matches_oracle`, then (``lse`` not None) :func:`assert_lse_matches_oracle`,
    with the float64 oracle computed once for both."""
    with torch.no_grad():
        o64, lse64 = dense_attention(q, k, v, is_causal, **features)
        o_ref, _ = dense_attention(q, k, v, is_causal, compute_dtype=None, **features)
    _assert_output(o, o64, o_ref, q, k, v, context, features.get("scale"))
    if lse is not None:
        _assert_lse(lse, lse64, q, k, v, is_causal, context, **features)


def _assert_lse(lse, lse64, q, k, v, is_causal: bool, context: str, **features) -> None:
    if lse.dtype != em.LSE_DTYPE:
        raise AssertionError(f"log-sum-exp: {context}: dtype {lse.dtype}, expected {em.LSE_DTYPE}")
    with torch.no_grad():
        _, lse_ref = dense_attention(q, k, v, is_causal, compute_dtype=em.lse_reference_dtype(q.dtype),
                                     **features)
    em.assert_within_error_model(em.LSE, lse, lse64, lse_ref, dtype=em.LSE_DTYPE,
                                 **em.lse_scales(q, k, lse64, scale=features.get("scale")), context=context,
                                 axes=("row",))


def assert_gradients_match_oracle(got, q, k, v, do, is_causal: bool, context: str, o=None,
                                  oracle: OracleGradients | None = None, **features) -> None:
    """``got = (dq, dk, dv)`` (a kernel's, for upstream gradient ``do``; ``None`` for one not asked
    for) within the error model of the oracle's; first, if given, the output ``o`` of the call they
    came from (against the oracle forward the gradients came through: no forward is computed twice).
    ``oracle``: :func:`oracle_gradients` of these inputs, when the caller has it already."""
    oracle = oracle or oracle_gradients(q, k, v, do, is_causal, **features)
    if o is not None:
        _assert_output(o, *oracle.outputs, q, k, v, context + " (the output of the call with "
                       "gradients recorded)", features.get("scale"))
    lengths = em.sum_lengths(q.shape[-2], k.shape[-2], em.group_of(q, k))
    for i, name in enumerate(("dq", "dk", "dv")):
        if got[i] is None:
            continue
        em.assert_within_error_model(
            em.Quantity(f"gradient {name}", em.GRADIENT.factor), got[i], oracle.want[i], oracle.ref[i],
            dtype=q.dtype, magnitude=oracle.magnitudes[i], scores=oracle.scores, terms=lengths[i],
            context=context, rounded=oracle.rounded[i], inherited=oracle.inherited[i],
        )


def visible(case: Case, device) -> torch.Tensor:
    """``[n_q, n_k]`` bool: True where a query of ``case`` sees a key (causal mask and window)."""
    mask = visible_mask(case.n_q, case.n_k, device, is_causal=case.is_causal, window=case.window,
                        causal_alignment=case.causal_alignment)
    return torch.ones(case.n_q, case.n_k, dtype=torch.bool, device=device) if mask is None else mask


def transformed(kernel: ModuleType, case: Case, device, **changes) -> Case:
    """``case.replace(**changes)``, after asking the kernel's contract for it (:func:`require_case`):
    a check that builds its own case from the one it is given needs what the new one uses."""
    new = case.replace(**changes)
    require_case(kernel, new, device)
    return new


def rows_to_keep(case: Case) -> int:
    """A split row ``t`` inside both lengths: rows ``<= t`` and keys ``> t`` both exist when possible."""
    return max(0, (min(case.n_q, case.n_k) - 1) // 2)
