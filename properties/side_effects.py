"""Side effects: a call leaves its arguments, and the memory they are views of, as they were.

A kernel that folds the softmax scale into ``q`` in place, reuses an input's buffer for its output
or for scratch, or stores with an input's strides into the wrong tensor (the gaps of a gapped or
strided layout are memory the caller owns) corrupts the caller's tensors while its own output may
be right. The oracle checks recompute the oracle from the inputs *after* the call, so they see such
a bug only by luck (and then report a wrong number, not its cause). This check compares bit for
bit: a correct call writes nothing there at all, so no rounding can differ. It also holds the
process's torch settings and random generators (:mod:`properties.process_state`): a kernel that
turns TF32 on, or draws from the caller's generator, changes what the caller computes after it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import torch

from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.features import _assert_same_bits, bits_by_row_col
from properties.kernels import default_device, gated
from properties.process_state import (
    DEFAULT_DTYPES,
    assert_settings_unchanged,
    default_dtype,
    process_settings,
    settings_off_default,
)


class Snapshot:
    """Copies of named tensors and of all the memory they are views of, and the process's torch
    settings (:func:`properties.process_state.process_settings`, on the first tensor's device), to
    compare after a call.

    ``compare(name, label, now, before, context)`` reports a tensor whose elements changed (it must
    raise if they differ); the default names the first such element as (batch, row, col). The packed
    checks pass one that names it by sequence (:mod:`properties.varlen`).
    """

    def __init__(self, tensors: dict[str, torch.Tensor], compare=None) -> None:
        self.tensors = tensors
        self.views = {name: t.detach().clone() for name, t in tensors.items()}
        self.memory = {name: _common.memory_of(t).clone() for name, t in tensors.items()}
        self.compare = compare or (lambda name, label, now, before, context: em.assert_bit_equal(
            label, now, before, context=context))
        self.device = next(iter(tensors.values())).device
        self.settings = process_settings(self.device)  # last: nothing after it may draw or set

    def assert_unchanged(self, when: str, context: str) -> None:
        for name, t in self.tensors.items():
            label = f"input {name} after {when} (a call must not write to its inputs)"
            # The elements first: the message then names the first one written.
            self.compare(name, label, t.detach(), self.views[name], context)
            now, before = _common.memory_of(t), self.memory[name]
            if not torch.equal(now, before):
                changed = (now != before).nonzero()
                raise AssertionError(
                    f"{label}: {context}: {changed.numel()} of {now.numel()} bytes of the memory "
                    f"{name} is a view of changed, none of them {name}'s own elements (a gap of its "
                    f"layout); the first, byte {int(changed[0])}, lies {_after(t, int(changed[0]))} "
                    f"(bound: bit-for-bit equality)"
                )
        assert_settings_unchanged(self.settings, process_settings(self.device), when, context)

    def assert_unchanged_off_default(self, calls, what: str, context: str) -> None:
        """``calls()`` (the round of calls just compared) once more with the caller's settings moved
        off torch's defaults (:func:`~properties.process_state.settings_off_default`), compared as
        :meth:`assert_unchanged` does: a call that saves a setting and restores torch's default
        instead of the caller's value shows only from elsewhere."""
        with settings_off_default() as moved:
            again = Snapshot(self.tensors, self.compare)
            calls()
            again.assert_unchanged(f"{what}, the caller having set {moved}", context)


def _after(t: torch.Tensor, byte: int) -> str:
    """Where ``byte`` of ``t``'s memory lies relative to ``t``'s elements: after which one."""
    offsets = torch.full((), t.storage_offset(), dtype=torch.int64)
    for size, stride in zip(t.shape, t.stride()):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride
    starts = offsets.reshape(-1) * t.element_size()
    if not bool((starts <= byte).any()):
        return "before its first element"
    flat = int(torch.where(starts <= byte, starts, -1).argmax())  # the last element starting at or before it
    return "just after its element at " + em._index(flat, tuple(t.shape), ("row", "col"))


@gated
def check_inputs_unchanged(kernel: ModuleType, case: Case, device=None) -> None:
    """The forward (``attention_with_lse`` if the module has it, and ``attention``) and the backward
    leave q, k, v and the upstream gradient bit-identical, and the rest of the memory they are views
    of too, and the process's torch settings and random generators as they were
    (:func:`properties.process_state.process_settings`; the contract, ``properties/kernels.py``)."""
    ctx = _common.context("check_inputs_unchanged", kernel, case)
    q, k, v = case.make_qkv(device or default_device())
    do = case.make_grad_out(q.device)
    snapshot = Snapshot({"q": q, "k": k, "v": v, "do": do})
    f = case.features()
    _common.forward(kernel, q, k, v, case.is_causal, **f)
    snapshot.assert_unchanged("the forward", ctx)
    # detach() shares the memory: a write through the leaves is a write to q, k, v.
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    o = kernel.attention(*leaves, case.is_causal, **f)
    snapshot.assert_unchanged("the forward with gradients recorded", ctx)
    torch.autograd.grad(o, leaves, do)
    snapshot.assert_unchanged("the backward", ctx)

    def calls() -> None:
        _common.forward(kernel, q, k, v, case.is_causal, **f)
        torch.autograd.grad(kernel.attention(*leaves, case.is_causal, **f), leaves, do)

    snapshot.assert_unchanged_off_default(calls, "the forward and the backward", ctx)


@gated
def check_default_dtype_ignored(kernel: ModuleType, case: Case, device=None) -> None:
    """What a call returns does not depend on torch's default dtype: under
    ``torch.set_default_dtype`` of each of :data:`~properties.process_state.DEFAULT_DTYPES`
    (float64, bfloat16), the forward (``o``, the lse) and the backward (``dq, dk, dv``) give the
    bits, dtypes and shapes they give under float32 (the contract: ``o`` in q's dtype, the lse
    float32, whatever else the process has set).

    Catches a buffer allocated without a dtype (``torch.full(shape, -inf)`` for the lse: float64,
    or bfloat16 and rounded), or a constant made with ``torch.tensor(...)`` (a softmax scale
    rounded to bfloat16)."""
    ctx = _common.context("check_default_dtype_ignored", kernel, case)
    q, k, v = case.make_qkv(device or default_device())
    do = case.make_grad_out(q.device)
    f = case.features()

    def run(dtype: torch.dtype) -> dict:
        with default_dtype(dtype), _common.crash_is_failure(ctx, f"a call under the default dtype {dtype}"):
            return _common.results(kernel, q, k, v, do, case.is_causal, f)

    assert_same_under_default_dtypes(run, "results", ctx, bits_by_row_col(ctx))


DTYPE_BOUND = "the contract's dtypes and shapes, whatever the default dtype"
"""The bound a dtype or shape failure of the default-dtype checks names (it has no worst element)."""


def assert_same_under_default_dtypes(run: Callable[[torch.dtype], dict], what: str, ctx: str,
                                     compare: Callable) -> None:
    """``run(dtype)`` (the calls made under that default dtype) returns, under each of
    :data:`~properties.process_state.DEFAULT_DTYPES`, what it returns under float32: a result of
    another dtype or shape fails first, naming both (bound :data:`DTYPE_BOUND`), then
    ``compare(label, key, got, want)`` compares the bits (dense checks name the element by
    (row, col), packed ones by sequence)."""
    def checked(label: str, key: str, got: torch.Tensor, want: torch.Tensor) -> None:
        if got.dtype != want.dtype or got.shape != want.shape:
            raise AssertionError(f"{label}: {ctx}: {key} is {got.dtype} {tuple(got.shape)}, under "
                                 f"float32 {want.dtype} {tuple(want.shape)} (bound: {DTYPE_BOUND})")
        compare(label, key, got, want)

    want = run(torch.float32)
    for dtype in DEFAULT_DTYPES:
        _assert_same_bits(f"{what} under the default dtype {dtype} vs under torch.float32", run(dtype),
                          want, ctx, again=lambda: run(torch.float32), compare=checked)


def overwrite_in_place(tensors, values) -> None:
    """Copy each of ``values`` over the memory of the matching one of ``tensors``, byte for byte,
    gaps included (each pair is laid out alike, in buffers of the same size): new contents in the
    same memory, as a caller refills its buffers between calls."""
    with torch.no_grad():
        for t, new in zip(tensors, values, strict=True):
            _common.memory_of(t).copy_(_common.memory_of(new))


@gated
def check_inputs_updated_in_place(kernel: ModuleType, case: Case, device=None) -> None:
    """A call reads its inputs as they are when it is made: after a first round of calls (the forward,
    and one with gradients recorded and its backward), q, k and v are overwritten in place with
    another seed's values (the same memory: a KV cache written between decoding steps); the same
    calls again (``o`` and the lse outside autograd, ``o`` with gradients recorded) agree with the
    calls on fresh tensors holding those values, within the error model's bound of each (so a bug
    that shows in every call is the oracle checks' to report, not this one's), and so do the second
    backward's ``dq, dk, dv`` with a fresh call's, within twice the gradients' bounds. A module that
    keeps something from one call to the next keyed by where its inputs live, or by which tensor
    they are (a prepared k, a transposed v, a descriptor; in the forward or only in the backward),
    answers with the old values (the contract, ``properties/kernels.py``).

    Each round also calls ``attention`` outside autograd (a module may serve that call by another
    path than ``attention_with_lse``), and the first round's results must keep their bits through
    the update and every later call: what a call returns is the caller's (a module that writes each
    call's output into one buffer per shape, or returns a view of an input, changes them)."""
    ctx = _common.context("check_inputs_updated_in_place", kernel, case)
    q, k, v = case.make_qkv(device or default_device())
    do = case.make_grad_out(q.device)
    f = case.features()
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]  # share q, k, v's memory
    round_ = _common.results_and_plain_call
    with _common.crash_is_failure(ctx, "the first round of calls"):
        first = round_(kernel, q, k, v, do, case.is_causal, f, leaves)
    kept = _common.kept_bits(first)
    new = case.replace(seed=case.seed + 1)
    fresh = new.make_qkv(q.device)
    overwrite_in_place((q, k, v), fresh)  # a case's layout fixes its buffers, whatever the seed
    with _common.crash_is_failure(ctx, "the calls after the update"):
        got = round_(kernel, q, k, v, do, case.is_causal, f, leaves)  # the same objects
    want = round_(kernel, *fresh, do, case.is_causal, f)
    what = f"the call after q, k, v were overwritten in place with {new}'s values vs a call on fresh tensors"
    _common.assert_results_agree(got, want, *fresh, do, case.is_causal, what, ctx, **f)
    _common.assert_results_kept(first, kept, f"q, k, v were overwritten in place with {new}'s values "
                                "and the calls made again (on them and on fresh tensors)", ctx)


@gated
def check_shared_inputs(kernel: ModuleType, case: Case, device=None) -> None:
    """One tensor in several roles: ``k`` is ``v``; and, unless the case groups query heads, ``q``
    is ``k`` is ``v`` (self-attention on the case's q, both lengths cut to the shorter one). ``o``,
    the lse and each gradient of a role no other shares within twice the error model of the same
    call on separate copies; the shared tensor's gradient (autograd sums its roles') within twice
    the sum of its roles' bounds of the sum of their gradients.

    A kernel that prepares each distinct input once per call (keyed by address or identity, to
    save a copy when one tensor fills several roles) and then treats the copy as belonging to one
    role, or writes two roles' gradients into one buffer, is right on separate tensors only."""
    device = device or default_device()
    q, k, _ = case.make_qkv(device)
    f = case.features()
    variants = [("k is v", (q, k, k), case.make_grad_out(device))]
    if q.shape[:-2] == k.shape[:-2]:
        # The shorter length: a decode case's (3 queries over 20001 keys) square at n_k would ask the
        # float64 bounds for n_k^2 scores per slice (9 GiB there), and sharing is no less shared
        # at n_q; the "k is v" call above keeps the case's own shapes.
        n = min(case.n_q, case.n_k)
        square = _common.transformed(kernel, case, device, n_q=n, n_k=n)
        x, _, _ = square.make_qkv(device)
        variants.append(("q is k is v", (x, x, x), square.make_grad_out(device)))
    for what, inputs, do in variants:
        ctx = f"{_common.context('check_shared_inputs', kernel, case)}, {what}"
        separate = [t.detach().clone() for t in inputs]
        bounds = _common.output_and_gradient_bounds(*separate, do, case.is_causal, **f)
        with _common.crash_is_failure(ctx, "the calls on separate copies"):
            want = _common.results(kernel, *separate, do, case.is_causal, f)
        leaf_of: dict[int, torch.Tensor] = {}
        leaves = [leaf_of.setdefault(id(t), t.detach().requires_grad_()) for t in inputs]
        with _common.crash_is_failure(ctx, "the calls on the shared tensor"):
            got = _common.results(kernel, *inputs, do, case.is_causal, f, leaves=leaves)
        outputs = {name: got[name] for name in ("o", "lse", "o with gradients recorded")}
        _common.assert_results_agree(outputs, want, *separate, do, case.is_causal,
                                     f"{what}, against separate copies", ctx, bounds=bounds, **f)
        roles = ("q", "k", "v")
        for leaf in leaf_of.values():  # each distinct tensor once
            at = [i for i, t in enumerate(leaves) if t is leaf]
            name = "d" + "+d".join(roles[i] for i in at)
            summed = sum(want["d" + roles[i]].double() for i in at)
            b = sum(bounds[1][i][0] for i in at)
            # autograd adds the roles' gradients in the leaf's dtype: one rounding per addition
            added = (len(at) - 1) * em.UNIT_ROUNDOFF[q.dtype] * float(summed.abs().max())
            how = " + ".join(bounds[1][i][1] for i in at)
            em.assert_within_bound(f"{name}: {what}, against separate copies", got["d" + roles[at[0]]],
                                   summed, em.two_sided_bound(b, b) + added,
                                   f"the gradients' bounds summed, twice, + {added:.3g} for autograd's "
                                   f"additions; each = {how}", context=ctx)
