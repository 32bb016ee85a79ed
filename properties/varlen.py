"""Checks of packed variable-length batches (``attention_varlen``), for a kernel module that has them.

Each check takes a kernel module and a :class:`~properties.varlen_case.VarlenCase` and raises an
``AssertionError`` naming the check, the kernel, the case line, the worst element (as sequence,
head, row within the sequence, column) and the bound; or
:class:`~properties.kernels.NotApplicable` for a module without ``attention_varlen``, or one that
does not declare a feature the case uses (every check is :func:`~properties.kernels.gated`). The
case's features go to every call, packed and dense, as ``**case.features()``; gradients are always
taken through ``attention_varlen`` (the contract lets ``attention_varlen_with_lse`` be
forward-only). Results are compared in the padded form ``[batch, heads, max_len, ...]``
(:func:`oracle.varlen.pad_packed`) so that a message locates an element by sequence; positions past
a sequence's end are NaN in every tensor compared (the error model skips them) or 0 in both (the
exact comparisons).

The bounds are the error model's (:mod:`properties.error_model`), with the case's softmax scale and
the scores' size (``score_magnitude``) taken per sequence on the padded batch: queries and keys of
different sequences never meet, so their products bound no score.
"""

from __future__ import annotations

from types import ModuleType

import torch

from oracle.varlen import dense_attention_varlen, pad_packed, seqlens, varlen_mask
from properties import _common
from properties import error_model as em
from properties.features import _assert_same_bits
from properties.gradients import FROZEN
from properties.inference import FRESH_LENGTHS
from properties.kernels import default_device, gated, require_case, require_varlen
from properties.process_state import default_dtype
from properties.side_effects import Snapshot, assert_same_under_default_dtypes, overwrite_in_place
from properties.streams import cuda_device, inconclusive, on_side_stream
from properties.varlen_case import VarlenCase, VarlenInputs

ROWS = ("sequence", "head", "row", "col")
KEYS = ("sequence", "head", "key", "col")
LSE_ROWS = ("sequence", "head", "row")


def _pad(x: torch.Tensor, cu_seqlens: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """Packed ``x [total, heads, ...]`` as ``[batch, heads, max_len, ...]``, ``fill`` past each end."""
    padded, valid = pad_packed(x.detach(), cu_seqlens, max(seqlens(cu_seqlens)))
    valid = valid.view(valid.shape[0], 1, valid.shape[1], *(1,) * (padded.dim() - 3))
    return torch.where(valid, padded, torch.full((), fill, dtype=padded.dtype, device=padded.device))


def _scales(x: VarlenInputs, case: VarlenCase, lse64: torch.Tensor | None = None) -> dict[str, float]:
    """The error model's ``magnitude`` and ``scores`` for the output (or, given ``lse64``, the lse),
    with the case's softmax scale and the scores' size per sequence (zero padding adds nothing to
    ``sum |q| |k|``)."""
    qp, kp = _pad(x.q, x.cu_seqlens_q), _pad(x.k, x.cu_seqlens_k)
    if lse64 is not None:
        return em.lse_scales(qp, kp, lse64, scale=case.softmax_scale)
    return em.output_scales(qp, kp, _pad(x.v, x.cu_seqlens_k), scale=case.softmax_scale)


def _forward(kernel: ModuleType, x: VarlenInputs, case: VarlenCase):
    """``(o, lse)`` of the packed call, without gradients (``lse`` None for a module without the lse
    entry point)."""
    fn = getattr(kernel, "attention_varlen_with_lse", None)
    with torch.no_grad():
        if fn is None:
            return require_varlen(kernel)(*x, case.is_causal, **case.features()), None
        return fn(*x, case.is_causal, **case.features())


def _run(kernel: ModuleType, x: VarlenInputs, do: torch.Tensor, case: VarlenCase) -> dict:
    """Forward and backward of the packed call: ``o, lse, dq, dk, dv`` (``lse`` may be None).

    The gradients, and ``o``, come from ``attention_varlen``; the lse from
    ``attention_varlen_with_lse`` (which may be forward-only), where the module has it."""
    fn = getattr(kernel, "attention_varlen_with_lse", None)
    lse = None if fn is None else _forward(kernel, x, case)[1]
    o, dq, dk, dv = _with_gradients(kernel, x, do, case)
    return {"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dv}


def _results(kernel: ModuleType, x: VarlenInputs, do: torch.Tensor, case: VarlenCase, leaves=None) -> dict:
    """:func:`properties._common.results` for a packed call, under the same names: ``o`` and the lse
    outside autograd (:func:`_forward`), then ``o`` of ``attention_varlen`` with gradients recorded
    and its ``dq, dk, dv`` for ``do``, through ``leaves`` (as there)."""
    o, lse = _forward(kernel, x, case)
    o_grad, dq, dk, dv = _with_gradients(kernel, x, do, case, leaves)
    return {"o": o, "lse": lse, "o with gradients recorded": o_grad, "dq": dq, "dk": dk, "dv": dv}


def _with_gradients(kernel: ModuleType, x: VarlenInputs, do: torch.Tensor, case: VarlenCase,
                    leaves=None) -> tuple[torch.Tensor, ...]:
    """``o`` of ``attention_varlen`` with gradients recorded (detached), and ``dq, dk, dv`` for
    ``do``, through ``leaves`` (default: new leaves sharing x's q, k, v memory)."""
    leaves = leaves or [t.detach().requires_grad_() for t in x[:3]]
    o = require_varlen(kernel)(*leaves, *x[3:], case.is_causal, **case.features())
    return (o.detach(), *torch.autograd.grad(o, leaves, do))


def _references(x: VarlenInputs, case: VarlenCase):
    """``(o64, lse64, o_ref, lse_ref)``: the padded float64 oracle's output and lse, the output
    computed in the inputs' dtype and the lse in float32 (its own dtype), the references of the
    error model's bounds."""
    f = case.features()
    with torch.no_grad():
        o64, lse64 = dense_attention_varlen(*x[:5], case.is_causal, **f)
        o_ref, _ = dense_attention_varlen(*x[:5], case.is_causal, compute_dtype=None, **f)
        _, lse_ref = dense_attention_varlen(*x[:5], case.is_causal,
                                            compute_dtype=em.lse_reference_dtype(x.q.dtype), **f)
    return o64, lse64, o_ref, lse_ref


def _check_shapes(o: torch.Tensor, lse: torch.Tensor | None, q: torch.Tensor, context: str) -> None:
    if o.shape != q.shape or o.dtype != q.dtype or o.device != q.device:
        raise AssertionError(f"output o: {context}: shape {tuple(o.shape)} {o.dtype} on {o.device}, "
                             f"expected {tuple(q.shape)} {q.dtype} on {q.device} (bound: the contract's "
                             f"shape, dtype and device)")
    if lse is not None and (lse.shape != q.shape[:-1] or lse.dtype != torch.float32):
        raise AssertionError(f"log-sum-exp: {context}: shape {tuple(lse.shape)} {lse.dtype}, expected "
                             f"{tuple(q.shape[:-1])} torch.float32 (bound: the contract's shape and dtype)")


def _assert_output(o, o64, o_ref, x: VarlenInputs, case: VarlenCase, context: str) -> None:
    """Packed ``o`` within the error model of the padded oracle's ``o64`` (reference ``o_ref``)."""
    cu_q, nan = x.cu_seqlens_q, float("nan")
    em.assert_within_error_model(
        em.OUTPUT, _pad(o, cu_q, nan), _pad(o64, cu_q, nan), _pad(o_ref, cu_q, nan), dtype=x.q.dtype,
        **_scales(x, case), context=context, axes=ROWS,
    )


def _blind(case: VarlenCase, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``[total_q]`` bool, the rows that see no key (a window or bottom-right alignment leaves some
    with none), and ``[total_k]`` bool, the keys that no query sees (every key of a sequence without
    queries; causal, the keys past each sequence's last row's ``c_i``; keys outside every window)."""
    cu_q, cu_k = (torch.tensor(c) for c in case.offsets())
    max_q, max_k = max(case.seqlens_q), max(case.seqlens_k)
    seen = varlen_mask(cu_q, cu_k, max_q, max_k, case.is_causal, window=case.window,
                       causal_alignment=case.causal_alignment)[:, 0]  # [batch, max_q, max_k]
    real_q = torch.arange(max_q) < torch.tensor(case.seqlens_q)[:, None]
    real_k = torch.arange(max_k) < torch.tensor(case.seqlens_k)[:, None]
    return (~seen.any(2))[real_q].to(device), (~seen.any(1))[real_k].to(device)


def _assert_zero_at(name: str, t: torch.Tensor, where: torch.Tensor, cu: torch.Tensor, ctx: str,
                    axes: tuple[str, ...]) -> None:
    """``t [total, heads, d]`` is exactly 0 at the packed rows ``where`` (``[total]`` bool) marks."""
    at = torch.where(where[:, None, None], t, torch.zeros_like(t))
    em.assert_bit_equal(f"{name} ({int(where.sum())} of them)", _pad(at, cu), _pad(torch.zeros_like(t), cu),
                        context=ctx, axes=axes)


@gated
def check_varlen_matches_oracle(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """The packed output ``o`` (and ``lse``, where the module has ``attention_varlen_with_lse``) is
    within the error model of the padded float64 oracle, :func:`oracle.varlen.dense_attention_varlen`;
    a row that sees no key has ``o = 0`` exactly (and ``lse = -inf``, as the oracle's).

    Catches a wrong mask between sequences: a sequence that sees one key past its end (its
    neighbour's first), a causal diagonal offset by the sequence's start, bottom-right alignment
    or a window measured from the packed batch instead of the sequence, an lse written to another
    sequence's rows, or a varlen path that ignores a stride.
    """
    require_varlen(kernel)
    ctx = _common.context("check_varlen_matches_oracle", kernel, case)
    _assert_forward_matches(kernel, case.make_qkv(device or default_device()), case, ctx)


def _assert_forward_matches(kernel: ModuleType, x: VarlenInputs, case: VarlenCase, ctx: str) -> None:
    """The packed call on ``x``: ``o`` (and the lse, where the module has it) within the error model of
    the padded oracle, ``o = 0`` exactly at rows that see no key."""
    o, lse = _forward(kernel, x, case)
    o64, lse64, o_ref, lse_ref = _references(x, case)
    _check_shapes(o, lse, x.q, ctx)
    _assert_output(o, o64, o_ref, x, case, ctx)
    cu_q = x.cu_seqlens_q
    nan = float("nan")
    blind_rows, _ = _blind(case, o.device)
    if bool(blind_rows.any()):
        _assert_zero_at("o is 0 at rows that see no key", o, blind_rows, cu_q, ctx, ROWS)
    if lse is not None:
        em.assert_within_error_model(
            em.LSE, _pad(lse, cu_q, nan), _pad(lse64, cu_q, nan), _pad(lse_ref, cu_q, nan),
            dtype=em.LSE_DTYPE, **_scales(x, case, _pad(lse64, cu_q)), context=ctx, axes=LSE_ROWS,
        )


@gated
def check_varlen_gradients_match_oracle(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """``dq, dk, dv`` of the packed call for a random upstream gradient are within the error model
    of the padded oracle's autograd; keys that no query sees (every key of a sequence without
    queries; causal, keys past the last row's diagonal; keys outside every window) get
    ``dk = dv = 0`` exactly, and rows that see no key ``dq = 0``: no term reaches them.

    Catches a backward whose mask differs from its forward's (gradient sent to the next sequence's
    first key), offsets of the wrong tensor, and ``dk``/``dv`` left unwritten (``torch.empty``) for
    key tiles no query tile visits.
    """
    require_varlen(kernel)
    ctx = _common.context("check_varlen_gradients_match_oracle", kernel, case)
    _assert_backward_matches(kernel, case.make_qkv(device or default_device()), case, ctx)


def _assert_backward_matches(kernel: ModuleType, x: VarlenInputs, case: VarlenCase, ctx: str) -> None:
    """The packed call on ``x`` with gradients recorded: its ``o`` and its ``dq, dk, dv`` for the
    case's upstream gradient within the error model of the padded oracle's autograd (and 0 exactly
    where no term reaches them: :func:`_assert_gradients`)."""
    do = case.make_grad_out(x.q.device)
    leaves = [t.detach().requires_grad_() for t in x[:3]]
    o = require_varlen(kernel)(*leaves, *x[3:], case.is_causal, **case.features())
    got = torch.autograd.grad(o, leaves, do)
    oracle = _oracle_gradients(x, do, case)
    # The output of the call autograd recorded, too: a kernel may take another path when its inputs
    # require grad, and the contract promises the same attention either way.
    out_ctx = ctx + " (the output of the call with gradients recorded)"
    _check_shapes(o.detach(), None, x.q, out_ctx)
    _assert_output(o.detach(), oracle[0], oracle[2], x, case, out_ctx)
    _assert_gradients(got, oracle, x, do, case, ctx)


LOOSE_MAX_SEQLEN = (2, 65)
""":func:`check_varlen_loose_max_seqlen` calls with ``max_seqlen = 2 * longest + 65``: past the
longest by at least one more tile of any size up to 64, and past twice it."""


@gated
def check_varlen_loose_max_seqlen(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """``max_seqlen_q`` and ``max_seqlen_k`` are bounds, not the longest lengths: the contract takes
    any ints at least the longest sequences (a caller may pass its context length, or one bound for
    every batch). With both raised to ``2 n + 65`` (``n`` the longest; :data:`LOOSE_MAX_SEQLEN`), the
    packed ``o`` and lse, and ``o`` and ``dq, dk, dv`` of the call with gradients recorded, are within
    the error model of the padded oracle, as :func:`check_varlen_matches_oracle` and
    :func:`check_varlen_gradients_match_oracle` hold the call with the exact bounds.

    Catches a module that takes a bound for the longest length: one that pads a batch to
    ``max_seqlen`` and unpads (the lse, say) with the longest sequence's length, sizes a buffer or
    a loop by one where the other is meant, or picks a path (one query row, one key tile) by it.
    """
    require_varlen(kernel)
    exact = case.make_qkv(device or default_device())
    times, extra = LOOSE_MAX_SEQLEN
    x = exact._replace(max_seqlen_q=times * exact.max_seqlen_q + extra,
                       max_seqlen_k=times * exact.max_seqlen_k + extra)
    ctx = (_common.context("check_varlen_loose_max_seqlen", kernel, case)
           + f" (max_seqlen_q = {x.max_seqlen_q}, max_seqlen_k = {x.max_seqlen_k}; the longest sequences "
           f"{exact.max_seqlen_q} and {exact.max_seqlen_k})")
    _assert_forward_matches(kernel, x, case, ctx)
    _assert_backward_matches(kernel, x, case, ctx)


def _oracle_gradients(x: VarlenInputs, do: torch.Tensor, case: VarlenCase):
    """``(o64, (dq, dk, dv) float64, o_ref, (dq, dk, dv) in the inputs' dtype)`` of the padded oracle
    and its same-dtype reference, for upstream gradient ``do``."""
    cu, f = x[3:5], case.features()

    def grads(compute_dtype, dtype):
        leaves = [t.detach().to(dtype or t.dtype).requires_grad_() for t in x[:3]]
        out = dense_attention_varlen(*leaves, *cu, case.is_causal, compute_dtype=compute_dtype, **f)[0]
        return out.detach(), torch.autograd.grad(out, leaves, do.to(out.dtype))

    return (*grads(torch.float64, torch.float64), *grads(None, None))


def _assert_gradients(got, oracle, x: VarlenInputs, do: torch.Tensor, case: VarlenCase, ctx: str) -> None:
    """Packed ``got = (dq, dk, dv)`` (``None`` for one not asked for) within the error model of the
    oracle's (:func:`_oracle_gradients`), and exactly 0 where no term reaches them."""
    _, want, _, ref = oracle
    cu = x[3:5]
    nan = float("nan")
    magnitudes, scores, terms = _gradient_scales(x, do, want, case)
    for name, g, g64, g_ref, magnitude, c, axes, n in zip(
        ("dq", "dk", "dv"), got, want, ref, magnitudes, (cu[0], cu[1], cu[1]), (ROWS, KEYS, KEYS), terms
    ):
        if g is None:
            continue
        if g.shape != g64.shape:
            raise AssertionError(f"gradient {name}: {ctx}: shape {tuple(g.shape)}, expected "
                                 f"{tuple(g64.shape)}")
        em.assert_within_error_model(
            em.Quantity(f"gradient {name}", em.GRADIENT.factor), _pad(g, c, nan), _pad(g64, c, nan),
            _pad(g_ref, c, nan), dtype=x.q.dtype, magnitude=magnitude, scores=scores, terms=n,
            context=ctx, axes=axes,
        )
    blind_rows, unseen = _blind(case, x.q.device)
    for name, g in (("dk", got[1]), ("dv", got[2])):
        if g is not None:
            _assert_zero_at(f"{name} is 0 at keys no query sees", g, unseen, cu[1], ctx, KEYS)
    if got[0] is not None and bool(blind_rows.any()):
        _assert_zero_at("dq is 0 at rows that see no key", got[0], blind_rows, cu[0], ctx, ROWS)


@gated
def check_varlen_gradients_with_frozen_inputs(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """As :func:`properties.gradients.check_gradients_with_frozen_inputs`, for the packed call: with
    only q, only k, only v, then only k and v requiring grad, each gradient asked for is within the
    error model of the padded oracle's (and 0 where no term reaches it)."""
    attention_varlen = require_varlen(kernel)
    x = case.make_qkv(device or default_device())
    do = case.make_grad_out(x.q.device)
    f = case.features()
    oracle = _oracle_gradients(x, do, case)
    for wanted in FROZEN:
        names = " and ".join("qkv"[i] for i in wanted)
        ctx = (_common.context("check_varlen_gradients_with_frozen_inputs", kernel, case)
               + f" (only {names} requiring grad)")
        got = _common.gradients_with(lambda *a: attention_varlen(*a, *x[3:], case.is_causal, **f), x[:3],
                                     wanted, do, ctx)
        _assert_gradients(got, oracle, x, do, case, ctx)


@gated
def check_varlen_backward_repeatable(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """As :func:`properties.determinism.check_backward_repeatable`, for the packed call: the backward
    of one packed forward, run a second time (``retain_graph=True``) for another upstream gradient,
    gives the ``dq, dk, dv`` a fresh packed call gets for it, bit for bit."""
    attention_varlen = require_varlen(kernel)
    ctx = _common.context("check_varlen_backward_repeatable", kernel, case)
    x = case.make_qkv(device or default_device())
    do = case.make_grad_out(x.q.device)
    again = _common.another_upstream(do)
    f = case.features()
    second = _common.second_backward(lambda *a: attention_varlen(*a, *x[3:], case.is_causal, **f),
                                     x[:3], do, again, ctx)
    fresh = _with_gradients(kernel, x, again, case)[1:]
    try:
        for name, got, want, c, axes in zip(("dq", "dk", "dv"), second, fresh, (x[3], x[4], x[4]),
                                            (ROWS, KEYS, KEYS)):
            em.assert_bit_equal(f"{name} of the second backward of one packed forward (another upstream "
                                "gradient) vs a fresh packed call's", _pad(got, c), _pad(want, c),
                                context=ctx, axes=axes)
    except AssertionError as error:
        why = _common.fresh_calls_say(lambda: _run(kernel, x, again, case))
        raise AssertionError(f"{error}{why}") from None


@gated
def check_varlen_inputs_unchanged(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """The packed forward (with and without gradients recorded) and backward leave q, k, v,
    ``cu_seqlens_q``, ``cu_seqlens_k`` and the upstream gradient bit-identical, and the rest of the
    memory they are views of too, and the process's torch settings and random generators as they
    were (the contract; :mod:`properties.side_effects`).

    One ``cu_seqlens`` usually serves every layer of a model, so a kernel that turns it into lengths
    in place (to save an allocation) is right once and wrong in every layer after.
    """
    require_varlen(kernel)
    ctx = _common.context("check_varlen_inputs_unchanged", kernel, case)
    x = case.make_qkv(device or default_device())
    do = case.make_grad_out(x.q.device)
    # Packed rows are located by sequence with the offsets as they were before the call.
    where = {"q": ("cu_seqlens_q", ROWS), "do": ("cu_seqlens_q", ROWS),
             "k": ("cu_seqlens_k", KEYS), "v": ("cu_seqlens_k", KEYS)}

    def compare(name, label, now, before, context):
        if name not in where:  # cu_seqlens: entry b is where sequence b starts
            em.assert_bit_equal(label, now, before, context=context, axes=("sequence",))
            return
        offsets, axes = where[name]
        cu = snapshot.views[offsets]
        em.assert_bit_equal(label, _pad(now, cu), _pad(before, cu), context=context, axes=axes)

    snapshot = Snapshot({"q": x.q, "k": x.k, "v": x.v, "cu_seqlens_q": x.cu_seqlens_q,
                         "cu_seqlens_k": x.cu_seqlens_k, "do": do}, compare)
    _forward(kernel, x, case)
    snapshot.assert_unchanged("the packed forward", ctx)
    leaves = [t.detach().requires_grad_() for t in x[:3]]
    o = require_varlen(kernel)(*leaves, *x[3:], case.is_causal, **case.features())
    snapshot.assert_unchanged("the packed forward with gradients recorded", ctx)
    torch.autograd.grad(o, leaves, do)
    snapshot.assert_unchanged("the packed backward", ctx)

    def calls() -> None:
        _forward(kernel, x, case)
        torch.autograd.grad(require_varlen(kernel)(*leaves, *x[3:], case.is_causal, **case.features()),
                            leaves, do)

    snapshot.assert_unchanged_off_default(calls, "the packed forward and backward", ctx)


@gated
def check_varlen_inputs_updated_in_place(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """:func:`properties.side_effects.check_inputs_updated_in_place` for packed batches, offsets
    included: after a round of calls (the packed forward, one with gradients recorded and its
    backward), q, k, v, ``cu_seqlens_q`` and ``cu_seqlens_k`` are overwritten in place with those of
    the same batch in reverse order and another seed's values (the same totals, so the same buffers:
    a serving loop refills its buffers for the next batch); the same calls again agree with calls on
    fresh tensors holding the new batch, within twice the output's (lse's, gradients') bound, the
    second backward's ``dq, dk, dv`` too. A kernel that keeps something built from ``cu_seqlens`` (a
    schedule of sequences and tiles, in the forward or only in the backward) keyed by the tensor or
    its address runs the old batch's sequences over the new one's rows. The first round's results
    must keep their bits through it all: what a call returns is the caller's (the contract)."""
    require_varlen(kernel)
    ctx = _common.context("check_varlen_inputs_updated_in_place", kernel, case)
    x = case.make_qkv(device or default_device())
    do = case.make_grad_out(x.q.device)
    leaves = [t.detach().requires_grad_() for t in x[:3]]  # share q, k, v's memory
    with _common.crash_is_failure(ctx, "the first round of calls"):
        first = _results(kernel, x, do, case, leaves)
    kept = _common.kept_bits(first)
    offsets = {"q": x.cu_seqlens_q.clone(), "k": x.cu_seqlens_k.clone()}  # the first round's
    new = case.replace(seqlens_q=case.seqlens_q[::-1], seqlens_k=case.seqlens_k[::-1], seed=case.seed + 1)
    fresh = new.make_qkv(x.q.device)
    new_do = new.make_grad_out(x.q.device)  # the new batch's rows: its own upstream gradient
    overwrite_in_place(x[:5], fresh[:5])  # the totals fix the buffers, whatever the order and seed
    with _common.crash_is_failure(ctx, "the calls after the update"):
        got = _results(kernel, x, new_do, new, leaves)  # the same objects
    want = _results(kernel, fresh, new_do, new)
    _assert_packed_results_agree(got, want, fresh, new_do, new, (
        f"the packed call after q, k, v and cu_seqlens were overwritten in place with {new}'s batch vs "
        "a call on fresh tensors"), ctx)

    def by_sequence(name: str, t: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        side, axes = _SIDE.get(name, _SIDE["o"])
        return _pad(t, offsets[side]), axes

    _common.assert_results_kept(first, kept, f"q, k, v and cu_seqlens were overwritten in place with "
                                f"{new}'s batch and the calls made again", ctx, by_sequence)


def _assert_packed_results_agree(got: dict, want: dict, x: VarlenInputs, do: torch.Tensor,
                                 case: VarlenCase, what: str, ctx: str) -> None:
    """Each packed result in ``got`` (``lse``, ``dq``, ``dk``, ``dv``, or any other name: an output
    ``o``; None skipped) within twice its error-model bound for the inputs ``x`` of ``want``'s of the
    same name: two calls, each within its bound of the oracle, so a bug that shows in every call is
    the oracle checks' to report. Compared padded, so that a message names the sequence."""
    o64, lse64, o_ref, lse_ref = _references(x, case)
    cu_q, nan = x.cu_seqlens_q, float("nan")
    grad_bounds = None
    for name, result in got.items():
        if result is None or want[name] is None:
            continue
        side, axes = _SIDE.get(name, _SIDE["o"])
        cu = x.cu_seqlens_k if side == "k" else cu_q
        if name == "lse":
            scales = _scales(x, case, _pad(lse64, cu_q))
            (bound, how), kind = em.error_bound(em.LSE, _pad(lse_ref, cu_q), _pad(lse64, cu_q),
                                                dtype=em.LSE_DTYPE, **scales), "lse's"
        elif name in ("dq", "dk", "dv"):
            grad_bounds = grad_bounds or _gradient_bounds(x, do, case)
            (bound, how), kind = grad_bounds[("dq", "dk", "dv").index(name)], "gradient's"
        else:
            (bound, how), kind = em.error_bound(em.OUTPUT, _pad(o_ref, cu_q), _pad(o64, cu_q),
                                                dtype=x.q.dtype, **_scales(x, case)), "output's"
        em.assert_within_bound(f"{name}: {what}", _pad(result, cu, nan), _pad(want[name], cu, nan),
                               em.two_sided_bound(bound, bound), f"the {kind} bound twice; each = {how}",
                               context=ctx, axes=axes)


@gated
def check_varlen_inference_mode(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """:func:`properties.inference.check_inference_mode` for packed batches: on the case with every
    sequence :data:`~properties.inference.FRESH_LENGTHS` rows and keys longer, the packed forward
    (``attention_varlen_with_lse`` where the module has it) under ``torch.inference_mode()`` on
    inference copies of q, k, v and the offsets (laid out alike), then a packed call recording
    gradients and its backward outside it, agree with the same calls made after them outside
    inference mode within twice each result's bound; a call that raises fails. A kernel that keeps
    what it builds from a batch's layout (a mask, a schedule of sequences and tiles) and uses it
    in an op autograd records built it as an inference tensor, and raises from then on."""
    require_varlen(kernel)
    fresh = case.replace(seqlens_q=tuple(n + FRESH_LENGTHS for n in case.seqlens_q),
                         seqlens_k=tuple(n + FRESH_LENGTHS for n in case.seqlens_k))
    ctx = (f"{_common.context('check_varlen_inference_mode', kernel, case)} (every sequence "
           f"{FRESH_LENGTHS} rows and keys longer)")
    x = fresh.make_qkv(device or default_device())
    do = fresh.make_grad_out(x.q.device)
    with torch.inference_mode():
        copies, fills = _common.nan_twins(dict(zip(_INPUT_NAMES, x[:5])))
        for source, twin in fills:
            twin.copy_(source)
        inference = x._replace(**copies)
        with _common.crash_is_failure(ctx, "a packed call under torch.inference_mode()"):
            o_inf, lse_inf = _forward(kernel, inference, fresh)
    after = "a packed call recording gradients, after a call under torch.inference_mode()"
    with _common.crash_is_failure(ctx, after):
        o_grad, dq, dk, dv = _with_gradients(kernel, x, do, fresh)
    got = {"o": o_inf, "lse": lse_inf, "o with gradients recorded": o_grad, "dq": dq, "dk": dk, "dv": dv}
    want = _results(kernel, x, do, fresh)
    _assert_packed_results_agree(got, want, x, do, fresh, "the packed call under torch.inference_mode() "
                                 "(o, lse) and the training call after it vs calls made after, outside it",
                                 ctx)


NO_QUERIES = "(every sequence's queries dropped)"
"""What :func:`check_varlen_no_queries` adds to its case: its failures have no sequence with rows to
name."""


@gated
def check_varlen_no_queries(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """A packed batch in which no sequence has queries (``total_q == 0``; the case's keys, heads,
    layout and features kept, ``max_seqlen_q = 0``): the module refuses it with a ``ValueError``
    (as flash does), or returns ``o [0, h_q, d]`` in q's dtype and on q's device (and lse
    ``[0, h_q]`` float32) that autograd records from q, k and v when they require grad, with zero
    gradients for k and v (autograd's ``None`` counts as zero), as the contract says of a sequence
    without queries. Any other exception fails.

    Catches an empty batch answered with fresh tensors outside autograd: right shapes, and then a
    training step whose loss is that ``o`` (``o.sum().backward()``) raises, though its inputs
    require grad (the fifth held-out round, ``docs/mutation.md``)."""
    fn = require_varlen(kernel)
    ctx = f"{_common.context('check_varlen_no_queries', kernel, case)} {NO_QUERIES}"
    x = case.make_qkv(device or default_device())
    x = x._replace(q=x.q[:0], cu_seqlens_q=torch.zeros_like(x.cu_seqlens_q), max_seqlen_q=0)
    leaves = [t.detach().requires_grad_() for t in x[:3]]
    with _common.crash_is_failure(ctx, "a packed call with no queries"):
        try:
            o = fn(*leaves, *x[3:], case.is_causal, **case.features())
        except ValueError:
            return  # a refusal, as the contract allows
    with_lse = getattr(kernel, "attention_varlen_with_lse", None)
    lse = None
    if with_lse is not None:
        with torch.no_grad(), _common.crash_is_failure(ctx, "attention_varlen_with_lse with no queries"):
            lse = with_lse(*x, case.is_causal, **case.features())[1]
    _check_shapes(o, lse, x.q, ctx)
    if o.grad_fn is None:
        raise AssertionError(f"output o: {ctx}: not recorded by autograd (no grad_fn) though q, k and v "
                             f"require grad, so a loss made of it alone cannot be differentiated "
                             f"(bound: the contract's o, differentiable in q, k, v)")
    with _common.crash_is_failure(ctx, "the backward of a packed call with no queries"):
        grads = torch.autograd.grad(o, leaves, torch.zeros_like(o), allow_unused=True)
    for name, g, t in zip("qkv", grads, x[:3]):
        want = torch.zeros_like(t)
        em.assert_bit_equal(f"d{name} of a batch with no queries", want if g is None else g, want,
                            context=ctx, axes=("row" if name == "q" else "key", "head", "col"))


@gated
def check_varlen_default_dtype_ignored(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """:func:`properties.side_effects.check_default_dtype_ignored` for packed batches: under each
    default dtype of :data:`~properties.process_state.DEFAULT_DTYPES`, the packed forward (``o``,
    the lse) and its backward give the bits, dtypes and shapes they give under float32. Catches a
    packed lse buffer allocated without a dtype, as the dense check does for the dense one."""
    require_varlen(kernel)
    ctx = _common.context("check_varlen_default_dtype_ignored", kernel, case)
    x = case.make_qkv(device or default_device())
    do = case.make_grad_out(x.q.device)

    def run(dtype: torch.dtype) -> dict:
        with default_dtype(dtype), _common.crash_is_failure(ctx, f"a packed call, default dtype {dtype}"):
            return _run(kernel, x, do, case)

    assert_same_under_default_dtypes(run, "packed results", ctx, _padded_compare(x, ctx))


_INPUT_NAMES = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")


@gated
def check_varlen_current_stream(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """:func:`properties.streams.check_current_stream` for the packed call: on CUDA, its forward
    (``attention_varlen_with_lse`` where the module has it) and its backward, inside
    ``torch.cuda.stream(side)`` behind a sleep and the copies that fill q, k, v, the upstream
    gradient (NaN until then) and ``cu_seqlens_q``, ``cu_seqlens_k`` (0 until then: every sequence
    empty), agree with the same calls on the default stream within twice each result's error-model
    bound. n/a off CUDA, and where the calls wait on the host for the caller's stream (a kernel that
    reads ``cu_seqlens`` back to the host, as flash's checks do): then no order is left to test."""
    require_varlen(kernel)
    device = cuda_device("check_varlen_current_stream", device)
    ctx = _common.context("check_varlen_current_stream", kernel, case)
    x = case.make_qkv(device)
    do = case.make_grad_out(device)
    want = _run(kernel, x, do, case)
    inputs = {"q": x.q, "k": x.k, "v": x.v, "do": do, "cu_seqlens_q": x.cu_seqlens_q,
              "cu_seqlens_k": x.cu_seqlens_k}

    def calls(twins: dict) -> dict:
        packed = x._replace(**{name: twins[name] for name in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")})
        return _run(kernel, packed, twins["do"], case)

    got, conclusive = on_side_stream(calls, inputs, ctx)
    _assert_packed_results_agree(got, want, x, do, case, "the packed calls inside torch.cuda.stream(side), "
                                 "behind a sleep and their inputs' copies, vs on the default stream", ctx)
    if not conclusive:
        raise inconclusive("check_varlen_current_stream", kernel, case)


def _gradient_bounds(x: VarlenInputs, do: torch.Tensor, case: VarlenCase) -> list[tuple[float, str]]:
    """The error model's bounds on packed ``dq, dk, dv`` (as :func:`_assert_gradients` makes them)."""
    _, want, _, ref = _oracle_gradients(x, do, case)
    cu = (x.cu_seqlens_q, x.cu_seqlens_k, x.cu_seqlens_k)
    magnitudes, scores, terms = _gradient_scales(x, do, want, case)
    return [em.error_bound(em.GRADIENT, _pad(g_ref, c), _pad(g64, c), dtype=x.q.dtype, magnitude=m,
                           scores=scores, terms=n)
            for g64, g_ref, m, c, n in zip(want, ref, magnitudes, cu, terms)]


def _gradient_scales(x: VarlenInputs, do: torch.Tensor, want, case: VarlenCase):
    """The error model's ``magnitude`` per gradient, ``scores`` and summed ``terms`` per gradient of
    a packed call, from the oracle's float64 gradients ``want``."""
    magnitudes = em.gradient_magnitudes(*x[:3], do, want, scale=case.softmax_scale)
    terms = em.sum_lengths(max(case.seqlens_q), max(case.seqlens_k), x.q.shape[1] // x.k.shape[1])
    return magnitudes, _scales(x, case)["scores"], terms


def _sequences_to_change(case: VarlenCase) -> list[int]:
    """The first, a middle and the last sequence."""
    return sorted({0, case.batch // 2, case.batch - 1})


@gated
def check_varlen_no_leakage(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """Changing every input of one sequence (its q, k, v rows and its upstream gradient rows) leaves
    every other sequence's ``o``, ``lse``, ``dq``, ``dk`` and ``dv`` unchanged, bit for bit; tried
    for the first, a middle and the last sequence. A case of one sequence is checked next to a copy
    of its lengths (the message shows that case).

    Exact: another sequence's keys are masked out (probability ``exp(-inf) = 0``, adding exactly 0),
    and nothing else about them may reach this sequence. Catches reads across a sequence boundary
    that the oracle check may miss (a neighbour's key that happens to score low, a tile of the
    neighbour loaded but masked late, gradients accumulated into the next sequence's ``dk``).
    """
    require_varlen(kernel)
    if case.batch == 1:
        case = case.replace(seqlens_q=case.seqlens_q * 2, seqlens_k=case.seqlens_k * 2)
    device = device or default_device()
    ctx = _common.context("check_varlen_no_leakage", kernel, case)
    x = case.make_qkv(device)
    cu_q, cu_k = case.offsets()
    base = _run(kernel, x, case.make_grad_out(device), case)
    original = case.draw()
    fresh = case.replace(seed=case.seed + 104729).draw()  # other values, in the case's own regime
    for b in _sequences_to_change(case):
        rows = {"q": slice(cu_q[b], cu_q[b + 1]), "k": slice(cu_k[b], cu_k[b + 1])}
        changed = []
        for name, t, new in zip(("q", "k", "v", "do"), original, fresh):
            t = t.clone()
            side = "k" if name in ("k", "v") else "q"
            t[rows[side]] = new[rows[side]]
            changed.append(case.place(t, name, device))
        other = _run(kernel, VarlenInputs(*changed[:3], *x[3:]), changed[3], case)
        for name, want in base.items():
            if want is None:
                continue
            side, axes = _SIDE[name]
            cu = x.cu_seqlens_k if side == "k" else x.cu_seqlens_q
            mine = torch.zeros(want.shape[0], dtype=torch.bool, device=want.device)
            mine[rows[side]] = True
            mine = mine.view(-1, *(1,) * (want.dim() - 1))
            # Sequence b's own rows may change; they are copied from the first run. A NaN in both
            # runs is the same result here (the oracle checks report NaN), so both become 0.
            got = torch.where(mine, want, other[name])
            same_nan = got.isnan() & want.isnan()
            got, want = (torch.where(same_nan, torch.zeros_like(t), t) for t in (got, want))
            em.assert_bit_equal(
                f"{name} of the other sequences (after changing every input of sequence {b})",
                _pad(got, cu), _pad(want, cu), context=ctx, axes=axes,
            )


_SIDE = {"o": ("q", ROWS), "lse": ("q", LSE_ROWS), "dq": ("q", ROWS), "dk": ("k", KEYS), "dv": ("k", KEYS)}
"""Per result: whether its rows are queries or keys, and the axes of its padded form."""


def _padded_compare(x: VarlenInputs, ctx: str):
    """A ``compare`` for :func:`~properties.features._assert_same_bits` that pads packed results by
    sequence (:data:`_SIDE`), so a difference is named by sequence, head, row and column."""
    cu = {"q": x.cu_seqlens_q, "k": x.cu_seqlens_k}

    def compare(label, key, got, want):
        side, axes = _SIDE[key]
        em.assert_bit_equal(label, _pad(got, cu[side]), _pad(want, cu[side]), context=ctx, axes=axes)
    return compare


@gated
def check_varlen_window_extremes_exact(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """:func:`properties.features.check_window_extremes_exact` for packed batches: ``window=(-1,
    -1)`` is no window, and ``window=(-1, 0)`` without ``is_causal`` is ``is_causal=True`` with no
    window; the packed ``o``, lse, ``dq, dk, dv`` bit for bit (the contract's masks are exact, so two
    spellings of one mask may not take paths that round differently). The case's own window is
    dropped; its other features are kept. n/a for a module without ``"window"``."""
    require_varlen(kernel)
    device = device or default_device()
    plain = case.replace(window=None)
    require_case(kernel, plain.replace(window=(-1, -1)), device)
    ctx = _common.context("check_varlen_window_extremes_exact", kernel, case)
    x = plain.make_qkv(device)
    do = plain.make_grad_out(x.q.device)
    for name, spelled, meant in (
        ("window=(-1, -1) = no window", plain.replace(window=(-1, -1)), plain),
        ("window=(-1, 0) = is_causal", plain.replace(is_causal=False, window=(-1, 0)),
         plain.replace(is_causal=True)),
    ):
        _assert_same_bits(name, _run(kernel, x, do, spelled), _run(kernel, x, do, meant), ctx,
                          again=lambda meant=meant: _run(kernel, x, do, meant),
                          compare=_padded_compare(x, ctx))


@gated
def check_varlen_matches_separate(kernel: ModuleType, case: VarlenCase, device=None) -> None:
    """Each sequence computed alone through the module's dense ``attention`` (the lse from
    ``attention_with_lse`` where it has one), on ``[heads, n, d]`` views of the packed tensors and
    with the case's features, equals its rows of the packed call: ``o``, ``lse``, ``dq``, ``dk`` and
    ``dv``. Alone, a sequence is its own ``n_q x n_k`` problem, so its bottom-right alignment and
    window come from its own lengths, as the packed call's must. Bit for bit for a module that
    declares ``BATCH_INVARIANT = True`` (both paths run the same per-sequence programs); else within
    twice the sequence's error-model bound (both calls carry error). Sequences without queries are
    skipped (the dense API takes no empty call).

    Catches a varlen path that differs from the dense one, even where both stay within the error
    model: key tiles cut at other places (aligned to the packed rows, not to the sequence's start),
    a causal diagonal placed with another tensor's offset, an alignment from the packed totals, an
    lse or gradient of another sequence.
    """
    require_varlen(kernel)
    device = device or default_device()
    ctx = _common.context("check_varlen_matches_separate", kernel, case)
    x = case.make_qkv(device)
    do = case.make_grad_out(device)
    packed = _run(kernel, x, do, case)
    exact = getattr(kernel, "BATCH_INVARIANT", False)
    f = case.features()
    cu_q, cu_k = case.offsets()
    for b, (n_q, n_k) in enumerate(zip(case.seqlens_q, case.seqlens_k)):
        if n_q == 0:
            continue
        rows_q, rows_k = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        alone = [t.detach()[rows].transpose(0, 1).requires_grad_()
                 for t, rows in zip(x[:3], (rows_q, rows_k, rows_k))]
        do_b = do[rows_q].transpose(0, 1)
        fn = getattr(kernel, "attention_with_lse", None)  # the lse only: it may be forward-only
        lse = None if fn is None else _common.forward(kernel, *alone, case.is_causal, **f)[1]
        o = kernel.attention(*alone, case.is_causal, **f)
        grads = torch.autograd.grad(o, alone, do_b)
        mine = {"o": (o.detach(), rows_q), "lse": (lse, rows_q), "dq": (grads[0], rows_q),
                "dk": (grads[1], rows_k), "dv": (grads[2], rows_k)}
        bounds = {} if exact else _separate_bounds(case, *(t.detach() for t in alone), do_b)
        for name, (got, rows) in mine.items():
            if got is None or packed[name] is None:
                continue
            want = packed[name][rows].transpose(0, 1)
            where = f"{name} of sequence {b} (n_q={n_q}, n_k={n_k}) alone vs packed"
            axes = _SIDE[name][1][1:]  # [heads, n, ...]: no sequence axis
            if exact:
                em.assert_bit_equal(where, got.detach(), want, context=ctx, axes=axes)
                continue
            bound, how = bounds[name]
            em.assert_within_bound(where, got.detach(), want, em.two_sided_bound(bound, bound),
                                   f"twice the sequence's bound, {how}", context=ctx, axes=axes)


def _separate_bounds(case: VarlenCase, q, k, v, do) -> dict[str, tuple[float, str]]:
    """Per quantity, the error model's bound for one sequence of ``case`` computed densely."""
    f = case.features()
    output, grads = _common.output_and_gradient_bounds(q, k, v, do, case.is_causal, **f)
    return {"o": output, "lse": _common.lse_bound(q, k, case.is_causal, **f),
            **dict(zip(("dq", "dk", "dv"), grads))}


VARLEN_CHECKS = (
    check_varlen_matches_oracle,
    check_varlen_gradients_match_oracle,
    check_varlen_loose_max_seqlen,
    check_varlen_no_leakage,
    check_varlen_matches_separate,
    check_varlen_window_extremes_exact,
    check_varlen_inputs_unchanged,
    check_varlen_inputs_updated_in_place,
    check_varlen_gradients_with_frozen_inputs,
    check_varlen_backward_repeatable,
    check_varlen_inference_mode,
    check_varlen_current_stream,
    check_varlen_no_queries,
    check_varlen_default_dtype_ignored,
)
"""Every check of packed variable-length batches, in the order reports list them."""
