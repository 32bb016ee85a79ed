"""Kernel modules: the contract a module meets, loading one by name, and what a check does when a
module lacks a capability.

A *kernel module* is any importable module with::

    attention(q, k, v, is_causal=False, *, scale=None, window=None, softcap=None,
              causal_alignment="top_left") -> o

differentiable in q, k, v, and in any of them alone: the gradient of an input that requires grad
is right whichever of the others do (``check_gradients_with_frozen_inputs``), and for an upstream
gradient in any layout autograd hands over (any strides, stride 0 included: ``o.sum()``'s is
stride 0 in every dim). Optionally,
``attention_with_lse(...same arguments...) -> (o, lse)`` with ``lse`` float32 of shape
``q.shape[:-1]``. ``attention_with_lse`` may be forward-only (its ``o``
need not carry a ``grad_fn``): gradients are always taken through ``attention``.

The keyword arguments are the *features*; a module declares those it takes in ``FEATURES``, and a
check that needs an undeclared one is :class:`NotApplicable` (with the reason), never a failure.
A module without ``FEATURES`` takes none of them, and is only ever called as
``attention(q, k, v, is_causal)``:

- ``FEATURES = frozenset({...})``, a subset of :data:`FEATURE_NAMES`:

  - ``"scale"``: ``scale`` is the softmax scale, any finite real: scores are ``scale * q.k``, so 0
    weighs every visible key alike and a negative scale favours the least similar keys (a row's
    largest score is then its smallest ``q.k``); ``None`` means ``1 / sqrt(d)``;
  - ``"gqa"``: grouped/multi-query heads: q ``[..., h_q, n_q, d]``, k and v ``[..., h_kv, n_k, d]``
    with ``h_q % h_kv == 0`` and every other leading dim equal; query head ``h`` uses kv head
    ``h // (h_q // h_kv)`` (SDPA's ``enable_gqa`` and FlashAttention's convention);
  - ``"bottom_right"``: ``causal_alignment="bottom_right"``. Let ``c_i = i`` (``"top_left"``, the
    default: query ``i`` sees key ``j`` iff ``j <= i``) or ``c_i = i + n_k - n_q``
    (``"bottom_right"``, FlashAttention-2's); it applies to ``is_causal`` and to windows alike;
  - ``"window"``: ``window=(left, right)``, ints, ``-1`` unbounded on that side: query ``i`` sees
    key ``j`` iff ``c_i - left <= j <= c_i + right`` (bounds of -1 dropped); with ``is_causal``,
    also ``j <= c_i``. ``None`` means no window;
  - ``"softcap"``: ``None`` or ``0`` is off; ``c > 0`` replaces each scaled score ``s`` by
    ``c tanh(s / c)`` before the softmax, in the lse too; gradients include tanh's derivative;
  - ``"varlen"``: the packed entry points below.

- A row that sees no key (possible with windows, or bottom-right with ``n_q > n_k``) has ``o`` row
  0, ``lse`` -inf, and no gradient flows from it. Never NaN.
- Masks are exact, as everywhere in this contract: a hidden key contributes exactly nothing. So a
  module with ``"window"`` computes ``window=(-1, -1)`` exactly as ``window=None``, and
  ``window=(-1, 0)`` without ``is_causal`` exactly as ``is_causal=True``; and one with
  ``"bottom_right"`` computes ``causal_alignment="bottom_right"`` exactly as ``"top_left"`` when
  ``n_q == n_k`` (the same mask either way), bit for bit.

- A call (a packed one too) returns ``o`` shaped like ``q`` (``[..., n_q, d]``), in q's dtype and
  on q's device, and computes the same attention whether or not autograd records it (inputs that
  require grad or not, grad mode on or off, or under ``torch.inference_mode()`` on inference
  tensors); nothing a call under inference mode leaves behind breaks a later call that records
  gradients (``check_inference_mode``). It never writes to its arguments: q, k, v, and in the
  backward the upstream gradient, hold the same bits afterwards, and so does the rest of the
  memory they are views of (the gaps between the rows of a strided tensor). Nor does it change the
  process's state: the random generators (torch's CPU and device ones, and Python's and
  numpy's global ones; a kernel without dropout draws nothing from them), grad and inference
  mode, autocast, the default dtype, the thread count, the matmul precision and TF32 switches,
  determinism (deterministic algorithms and their ``warn_only``), SDPA's backend switches, and on
  CUDA the current device and stream are as they were after the forward and after the backward,
  whatever they were before: a call that saves a setting restores the caller's value, not torch's
  default (``check_inputs_unchanged``, on dense calls; ``check_varlen_inputs_unchanged``). Nor does
  what it returns depend on torch's default dtype: under ``torch.set_default_dtype(torch.float64)``
  or ``(torch.bfloat16)`` a call returns the bits, dtypes and shapes it returns under float32
  (``check_default_dtype_ignored``; ``check_varlen_default_dtype_ignored``). And
  it reads them as they are when it is made: nothing kept from an earlier call (keyed by where the
  inputs live) stands in for inputs since overwritten in place, as a KV cache is between decoding
  steps (``check_inputs_updated_in_place``; for packed calls, ``cu_seqlens`` too:
  ``check_varlen_inputs_updated_in_place``). What it returns (``o``, the lse, and the gradients of
  its backward) is the caller's: memory of its own, not a view of its inputs nor a buffer a later
  call writes, so neither later calls nor writes to the inputs change it (the same two checks: the
  first round's results keep their bits). And a call keeps none of the caller's tensors: once the
  caller drops its arguments and the results (and their autograd graph), no reference the module
  holds keeps their memory alive (``check_no_references_kept``, on a case per path; the module may
  keep memory of its own).
  One tensor may fill several roles: ``k`` may be ``v`` (a memory that is both keys and values), and
  where the shapes match, ``q`` may be ``k`` and ``v`` (self-attention on ``x``); the call computes
  what it computes on separate copies, and the shared tensor's gradient is the sum of its roles'
  (``check_shared_inputs``, on dense calls).
- On CUDA, a call is ordered like a PyTorch op on the caller's current stream: it reads its inputs
  after the work queued before it on that stream, and its results (the backward's gradients too)
  are written before the work queued after it (``check_current_stream``; for packed calls,
  ``cu_seqlens`` too: ``check_varlen_current_stream``). A
  module that runs elsewhere orders itself against that stream (``torch.cuda.current_stream()``),
  not the default one.
- The forward is finite at any scores a float32 computation can hold: for float32 and bfloat16
  inputs whose scaled scores reach 1e10 or 1e30, ``o`` is finite and in the convex hull of the
  visible values and ``lse`` within the error model (``check_extreme_scores_finite``; float16's
  range ends near the 1e3 of ``check_large_logits_stable``, so its cases run there as float32).
  Gradients are promised only at the scores of the other checks: past about 1e7 the float32 lse
  they are recomputed from is itself off by many units (PyTorch's own CPU SDPA returns inf there).
- Calls are deterministic: the same call on the same inputs returns the same bits, outputs, lse and
  gradients (``check_deterministic``); and the backward of one forward may run more than once
  (``retain_graph=True``: a second loss on the same activations), each time with the gradients of
  its own upstream gradient, bit for bit those a fresh call gets for it (``check_backward_repeatable``).
  Every bit-for-bit promise here compares two calls, so it rests on this one too; a check that
  finds two calls differ says whether the same call repeated differs as well. (cuDNN's SDPA
  backward is not deterministic, and PyTorch says so: it fails here, ``docs/findings.md``.)

Optional declared limits make a documented limit "n/a" with the reason, not a failure:
``SUPPORTED_DTYPES`` (torch dtypes; default: any), ``MIN_HEAD_DIM`` and ``MAX_HEAD_DIM`` (default:
none), and ``DEVICE_TYPES`` (e.g. ``{"cuda"}`` for a module that runs on GPUs only; default: any).
A limit that depends on the whole call (SDPA's flash backend takes no top-left causal call with
``n_q != n_k`` on CUDA, say) is declared by an optional ``unsupported(q, k, v, is_causal=False,
**features) -> str | None``: given (uninitialized) tensors of a call's shapes, dtype and device, it
returns why the module does not take that call, or ``None``. It must answer from what it documents,
never by trying the call.

Optionally, ``BATCH_INVARIANT = True``: a promise that each leading-dim slice is computed on its
own, so a slice computed alone is bit-for-bit its part of a batched call (``check_batch_independent``
then demands exactly that, and ``check_gqa_matches_repeated_kv`` demands that a GQA call equals
bit-for-bit the call with k and v repeated per group).

Optionally too, packed variable-length batches (:mod:`properties.varlen` checks them):
``attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
*, <the features above>) -> o`` and ``attention_varlen_with_lse(...) -> (o, lse)``, with
``q [total_q, h_q, d]``, ``k, v [total_k, h_kv, d]`` (any strides), ``cu_seqlens_*`` int32
``[batch + 1]`` offsets on q's device (0 first, non-decreasing, ``total`` last), ``max_seqlen_*``
ints at least the longest sequence (bounds, not the lengths: a call with larger ones computes the
same attention, ``check_varlen_loose_max_seqlen``); ``o`` like q, in q's dtype, differentiable in q, k, v;
``lse [total_q, h_q]`` float32. Sequence ``b``'s queries (rows ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]``)
see only its keys, with causal alignment and windows per sequence; a sequence may have no queries (it
produces nothing, its keys get zero gradients), but one with queries and no keys is a
``ValueError``. A batch with no queries at all (``total_q == 0``) a module may refuse with a
``ValueError`` (flash does, as it refuses a dense ``n_q = 0``); one that takes it returns ``o``
``[0, h_q, d]`` (lse ``[0, h_q]``) that autograd records from q, k and v, whose gradients through
it are zero (``check_varlen_no_queries``). ``BATCH_INVARIANT = True`` then also promises that a
sequence computed alone through ``attention`` is bit-for-bit its rows of the packed call
(``check_varlen_matches_separate``).
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import torch

from properties import program_order

DEFAULT_KERNEL = "flash"

FEATURE_NAMES = ("scale", "gqa", "window", "softcap", "bottom_right", "varlen")
"""Every feature a module may declare in ``FEATURES`` (see the module docstring)."""


class NotApplicable(Exception):
    """A check cannot run against this kernel (for example, it has no ``attention_with_lse``)."""


class OutsideLimits(NotApplicable):
    """This case is outside what the kernel module declares (a feature, a dtype, a head dim, a
    device, a call it does not take), though another case may not be: a fuzzer draws again."""


def load_kernel(name: str) -> ModuleType:
    """Import the kernel module ``name`` and check that it has ``attention``.

    Also makes Triton's interpreter run each launch's programs in a shuffled order, as a GPU may
    (:mod:`properties.program_order`), for every check that runs through a loaded module.
    """
    program_order.install()
    module = importlib.import_module(name)
    if not callable(getattr(module, "attention", None)):
        raise TypeError(f"kernel module {name!r} has no callable attention(q, k, v, is_causal)")
    return module


def kernel_name(kernel: ModuleType) -> str:
    return kernel.__name__


def require_lse(kernel: ModuleType):
    """The module's ``attention_with_lse``, or :class:`NotApplicable` saying it has none."""
    fn = getattr(kernel, "attention_with_lse", None)
    if fn is None:
        raise NotApplicable(
            f"kernel module {kernel_name(kernel)} has no attention_with_lse, so its lse cannot be checked"
        )
    return fn


def require_varlen(kernel: ModuleType, with_lse: bool = False):
    """The module's ``attention_varlen`` (``attention_varlen_with_lse`` if ``with_lse``), or
    :class:`NotApplicable` saying it has none."""
    name = "attention_varlen_with_lse" if with_lse else "attention_varlen"
    fn = getattr(kernel, name, None)
    if fn is None:
        what = "the lse of packed batches" if with_lse else "packed variable-length batches"
        raise NotApplicable(f"kernel module {kernel_name(kernel)} has no {name}, so {what} cannot be checked")
    return fn


def features(kernel: ModuleType) -> frozenset[str]:
    """The features ``kernel`` declares (``FEATURES``; none if it has no such attribute)."""
    declared = frozenset(getattr(kernel, "FEATURES", frozenset()))
    unknown = declared - set(FEATURE_NAMES)
    if unknown:
        raise TypeError(f"kernel module {kernel_name(kernel)} declares unknown features {sorted(unknown)}; "
                        f"known: {list(FEATURE_NAMES)}")
    return declared


def require_case(kernel: ModuleType, case, device: torch.device | str | None = None) -> None:
    """Raise :class:`NotApplicable` unless ``kernel`` declares every feature ``case`` uses and the
    case is inside its declared limits (dtype, head dim, device type)."""
    missing = sorted(case.needs() - features(kernel))
    if missing:
        raise OutsideLimits(f"kernel module {kernel_name(kernel)} does not declare feature(s) "
                            f"{', '.join(missing)} (FEATURES), which this case uses")
    dtypes = getattr(kernel, "SUPPORTED_DTYPES", None)
    if dtypes is not None and case.torch_dtype not in tuple(dtypes):
        raise OutsideLimits(f"kernel module {kernel_name(kernel)} declares SUPPORTED_DTYPES "
                            f"{[str(d).removeprefix('torch.') for d in dtypes]}, not {case.dtype}")
    low, high = getattr(kernel, "MIN_HEAD_DIM", None), getattr(kernel, "MAX_HEAD_DIM", None)
    if (low is not None and case.head_dim < low) or (high is not None and case.head_dim > high):
        raise OutsideLimits(f"kernel module {kernel_name(kernel)} declares head dims "
                            f"[{low or 1}, {high or 'any'}], not {case.head_dim}")
    types = getattr(kernel, "DEVICE_TYPES", None)
    if device is not None and types is not None and torch.device(device).type not in types:
        raise OutsideLimits(f"kernel module {kernel_name(kernel)} runs on {sorted(types)} only "
                            f"(DEVICE_TYPES), not {torch.device(device).type}")
    unsupported = getattr(kernel, "unsupported", None)
    if unsupported is not None and hasattr(case, "kv_leading"):
        at = torch.device(device) if device is not None else torch.device("cpu")
        q, k = (torch.empty((*lead, n, case.head_dim), dtype=case.torch_dtype, device=at)
                for lead, n in ((case.leading, case.n_q), (case.kv_leading, case.n_k)))
        why = unsupported(q, k, k, case.is_causal, **case.features())
        if why:
            raise OutsideLimits(f"kernel module {kernel_name(kernel)} does not take this call "
                                f"(unsupported): {why}")


def default_device() -> torch.device:
    """CUDA when there is a GPU, else the CPU (where Triton kernels run in the interpreter)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def gated(check):
    """Decorate a check so that it first asks :func:`require_case` of the case it is given.

    A check that transforms its case (makes it causal, adds a window) calls :func:`require_case`
    again on what it built.
    """

    @functools.wraps(check)
    def gated_check(kernel: ModuleType, case, device=None) -> None:
        require_case(kernel, case, device or default_device())
        return check(kernel, case, device)

    return gated_check
