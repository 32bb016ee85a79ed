"""Kernel module: FlexAttention (``torch.nn.attention.flex_attention``) under ``torch.compile``: the
Triton kernels that Inductor generates for it on CUDA.

Features: every one of the contract's but varlen, each in flex's own terms:

- ``scale``: flex's ``scale=`` (``None`` becomes ``1 / sqrt(d)`` here, as flex does itself, so that
  both spellings are one compiled graph);
- ``gqa``: ``enable_gqa=True`` (see the heads, below);
- ``is_causal``, ``window``, ``bottom_right``: one ``mask_mod`` (:func:`_visible`) whose bounds and
  alignment offset ``n_k - n_q`` are captured 0-d tensors, made into a block mask by
  ``create_block_mask`` (cached per shape and bounds, :func:`_block_mask`);
- ``softcap``: a ``score_mod`` ``c tanh(s / c)`` (:func:`_capped`), ``c`` a captured float32 tensor;
- the lse: ``return_aux=AuxRequest(lse=True)``. Flex's kernels keep their statistics in base 2, and
  ``flex_attention`` multiplies the lse by ln 2 before returning it (``_finalize_outputs`` in torch
  2.13's ``torch/nn/attention/flex_attention.py``; natural log since pytorch/pytorch#133159, torch
  2.5), so it is the contract's lse as it comes. ``tests/test_adapters.py`` holds it to the oracle
  on the GPU (torch 2.11 there).

Declared limits: float16, bfloat16 and float32, the dtypes PyTorch's own flex tests run on CUDA
(``test_dtypes`` in ``test/inductor/test_flex_attention.py``); head dims from 16 (Inductor's lowering
raises "NYI: embedding dimension of the query, key, and value must be at least 16"), with no upper
bound and no power-of-two rule (flex pads other head dims itself, ``SAFE_HEAD_DIM``); CUDA only: in
torch 2.13 flex has no backward on the CPU ("FlexAttention does not support backward on CPU") and
its compiled CPU kernel no lse, and its eager path is the unfused reference, not a kernel.

A row that sees no key: the forward kernel writes ``o = 0`` and ``lse = -inf`` (it sets a row sum
of 0 to 1, "[Note] Handle fully masked out rows" in ``flex_attention.py.jinja``) and the backward
reads an lse of ``-inf`` as 0, so such a row sends no gradient: the contract's convention, with
nothing for the adapter to do. Determinism: the backward computes ``dq`` in one program per query
block and ``dk``, ``dv`` in one per key block, looping over a GQA group's heads, without atomics
(only gradients of captured tensors are scattered with atomic adds, and this adapter's need none),
so ``check_deterministic`` is expected to pass.

Compile cost, which the suite must afford (hundreds of shapes, dtypes and masks in one GPU run):

- ``flex_attention`` is compiled once, with ``dynamic=True``: lengths and batch are symbolic;
- flex marks the heads and the head dim static, so the adapter hands it ``[batch x kv heads, group,
  n, d]``: each kv head with its group of query heads is one batch entry, and the static head count
  is the GQA group (1 without GQA), whatever the case's leading dims. Each dtype and head dim still
  compiles kernels of its own: that is flex's design;
- inputs are handed over as fresh contiguous copies (a copy changes no value; one stride pattern
  and no view's base to guard, so one graph), so flex's own handling of strided inputs is not what
  this module tests;
- every call goes through a block mask made from :func:`_visible`, masked or not (a call with no
  mask sees every key), so one graph serves every causal flag, window and alignment;
- on CUDA a call without gradients runs as if q, k and v all wanted them (:class:`_Flex`): the
  forward kernel is the same, and one graph serves both;
- Dynamo traces under :func:`_settings`: a raised recompile limit that fails loudly when hit
  (rather than silently running flex's unfused eager path), no duck sizing (which would tie a batch
  to an equal head count, and so make it static), and size-oblivious sizes (else a length of 1, or
  of one mask block, 128, or less, would be specialized into a graph of its own). Inductor then
  compiles (:func:`_inductor`, and the backward in :class:`_Flex`) with sizes evaluated by value:
  compiled size-obliviously, the backward kept the first call's strides, and on the H200
  (2026-12-01, torch 2.11) 345 tests of the flex suite failed with "expected size 4==4, stride
  16368==2048" in the backward of a later length, a failure of this module's settings, not of flex.
  With :func:`_inductor` the same suite passed whole (``docs/findings.md``). An earlier run under
  the old settings had also had two compile failures ("AssertionError: failed to set ranges [1,
  64]"); the run with :func:`_inductor` had none;
- flex's decoding kernel is never chosen (``kernel_options={"FORCE_USE_FLEX_ATTENTION": True}``):
  on the same H200 run its lowering failed under dynamic shapes for every ``n_q < 128`` call
  ("LoweringException: TypeError: unsupported operand type(s) for &: 'floor' and 'Add'", in
  ``flex_decoding.py``), so the decoding kernel is not what this module tests. That error comes
  from the heads being symbolic (the option is read after them), so the head counts are also
  marked static (:class:`_Flex`), and the flex suite's ``n_q < 128`` calls passed on the H200
  (2026-12-01).

What still compiles anew: each dtype, head dim and GQA group; a batch of 1 (flex's lowering guards
on it); each explicit scale value (Inductor makes a float argument a constant of the graph); a
softcap the first time (a ``score_mod`` at all, not its value); and, from Inductor's lowering on
CUDA, ``n_q < 128`` or not. With Dynamo's eager backend
on the CPU, new lengths, batches, leading dims, layouts, causal flags, windows and alignments make no
new graph (``tests/test_adapters.py``). Not tested through this module, by these choices: flex on
strided inputs, and its forward without an lse (what a call under ``no_grad`` would run).
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.fx.experimental._config as fx_config
from torch.nn.attention.flex_attention import AuxRequest, create_block_mask, flex_attention

from oracle.dense import ALIGNMENTS, softmax_scale

FEATURES = frozenset({"scale", "gqa", "window", "softcap", "bottom_right"})
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MIN_HEAD_DIM = 16
DEVICE_TYPES = frozenset({"cuda"})

RECOMPILE_LIMIT = 1024
"""Graphs Dynamo may compile for ``flex_attention``: one per dtype, head dim, GQA group and the few
length classes flex's lowering tells apart, times the scales the suite passes; its default (8) would
be spent by the first few head dims."""

MASKS = 64
"""Block masks kept (:func:`_block_mask`): a check calls a case's shape a handful of times, and a
mask is a few int32 tensors of ``n / 128`` blocks a side."""

KERNEL_OPTIONS = {"FORCE_USE_FLEX_ATTENTION": True}
"""Never flex's decoding kernel (see the module docstring)."""

def _inductor(gm: torch.fx.GraphModule, example_inputs: list):
    """Inductor, with backed sizes evaluated by their values again (not size-obliviously) while it
    compiles: Dynamo traces under :func:`_settings`, but under ``backed_size_oblivious`` AOTAutograd
    cannot prove a saved tensor's symbolic stride equal to the one Inductor reports (torch 2.11's
    ``_guard_or`` then answers "different"), and so it compiles the backward for the first call's
    concrete strides: on the H200 (2026-12-01) every later length with that graph failed the
    backward with "expected size 4==4, stride 16368==2048 at dim=0" (345 of the flex suite's
    tests). Evaluated by value, a specialization Inductor needs becomes a guard of the graph."""
    from torch._inductor.compile_fx import compile_fx

    with fx_config.patch(backed_size_oblivious=False):
        return compile_fx(gm, example_inputs)


_flex = torch.compile(flex_attention, dynamic=True, backend=_inductor)


@contextlib.contextmanager
def _settings():
    """Dynamo's settings for the adapter's calls (module docstring, "Compile cost")."""
    with (torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT,
                                     accumulated_recompile_limit=RECOMPILE_LIMIT,
                                     fail_on_recompile_limit_hit=True),
          fx_config.patch(use_duck_shape=False, backed_size_oblivious=True)):
        yield


def _visible(causal: torch.Tensor, offset: torch.Tensor, left: torch.Tensor, right: torch.Tensor):
    """A ``mask_mod``: query ``i`` sees key ``j`` by the contract's rule, with ``c_i = i + offset``
    (``offset``: 0, or ``n_k - n_q`` bottom-right) and a bound below 0 dropped; all four are 0-d
    int32 tensors, so new values reuse the compiled graph."""

    def visible(b, h, q_idx, kv_idx):
        c = q_idx + offset
        seen = (causal == 0) | (kv_idx <= c)
        seen = seen & ((left < 0) | (kv_idx >= c - left))
        return seen & ((right < 0) | (kv_idx <= c + right))

    return visible


@functools.lru_cache(maxsize=MASKS)
def _block_mask(n_q: int, n_k: int, device: torch.device, causal: bool, offset: int, left: int, right: int):
    # Outside inference mode whatever the caller's: the mask is kept, and autograd refuses to save an
    # inference tensor, so one built by a first call under torch.inference_mode() would break every
    # later call at this shape that records gradients (check_inference_mode).
    with torch.inference_mode(False):
        bounds = (torch.tensor(x, dtype=torch.int32, device=device) for x in (causal, offset, left, right))
        return create_block_mask(_visible(*bounds), None, None, n_q, n_k, device=device)


def _capped(cap: torch.Tensor):
    """A ``score_mod``: the scaled score ``s`` becomes ``cap tanh(s / cap)``."""

    def softcap(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    return softcap


class _Flex(torch.autograd.Function):
    """One compiled flex call, forward and backward under :func:`_settings` (Inductor compiles the
    backward at its first call, so that, too, must see them).

    On CUDA the forward always runs on leaves that want gradients, whether or not the caller's do:
    the forward kernel is the same either way, and so one compiled graph serves both (module
    docstring). Not on the CPU, where flex refuses inputs that want gradients (it has no CPU
    backward), so there only a call that wants them asks for them, and flex raises.
    """

    @staticmethod
    def forward(ctx, q, k, v, score_mod, block_mask, scale, group):
        with torch.enable_grad(), _settings():
            leaves = [t.detach().requires_grad_(t.device.type != "cpu" or wanted)
                      for t, wanted in zip((q, k, v), ctx.needs_input_grad)]
            for t in leaves:
                # The head counts (the GQA group on q, 1 on k and v) static: Inductor's choice of
                # flex's decoding kernel (_use_flex_decoding, torch 2.11 and 2.13) computes
                # `ratio & (ratio - 1)` on the heads before it reads FORCE_USE_FLEX_ATTENTION, and
                # raised "unsupported operand type(s) for &: 'floor' and 'Add'" on symbolic ones
                # (the H200 runs of 2026-12-01). A graph per group size, as the docstring says.
                torch._dynamo.mark_static(t, 1)
            o, aux = _flex(*leaves, score_mod=score_mod, block_mask=block_mask, scale=scale,
                           enable_gqa=group > 1, return_aux=AuxRequest(lse=True),
                           kernel_options=KERNEL_OPTIONS)
        ctx.graph = (leaves, o)
        lse = aux.lse.detach()
        ctx.mark_non_differentiable(lse)
        return o.detach(), lse

    @staticmethod
    def backward(ctx, do, _dlse):
        leaves, o = ctx.graph
        wanted = [t for t in leaves if t.requires_grad]
        # A backward compiled here (AOTAutograd may defer it to the first call) is compiled as
        # :func:`_inductor` compiles, sizes evaluated by value.
        with _settings(), fx_config.patch(backed_size_oblivious=False):
            # No retain_graph: Inductor donates the compiled backward's buffers, which a retained
            # graph forbids (the H200 run of 2026-12-01 raised "non-empty donated buffers ...
            # requires ... retain_graph=False"); each forward of the suite gets one backward.
            # A contiguous upstream gradient: the compiled backward guards the strides it was
            # compiled for, and the suite's layouts hand it others (the H200 run failed on them).
            grads = iter(torch.autograd.grad(o, wanted, do.contiguous()))
        return (*(next(grads) if t.requires_grad else None for t in leaves), None, None, None, None)


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, *,
    scale: float | None = None, window: tuple[int, int] | None = None, softcap: float | None = None,
    causal_alignment: str = "top_left",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``o`` (differentiable) and the lse (float32, not differentiable) of one flex call; shapes as
    the contract says (``q [..., h_q, n_q, d]``, ``k, v [..., h_kv, n_k, d]``)."""
    if causal_alignment not in ALIGNMENTS:
        raise ValueError(f"causal_alignment must be one of {ALIGNMENTS}, got {causal_alignment!r}")
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    group = (q.shape[-3] // k.shape[-3]) if q.dim() >= 3 else 1
    # Fresh contiguous copies, never views: Dynamo guards a view's base too (its rank, its strides),
    # so a view of each of the suite's layouts would compile a graph of its own.
    q4 = q.reshape(-1, group, n_q, d).clone(memory_format=torch.contiguous_format)
    k4, v4 = (t.reshape(-1, 1, n_k, t.shape[-1]).clone(memory_format=torch.contiguous_format)
              for t in (k, v))
    masked = is_causal or window is not None
    offset = n_k - n_q if masked and causal_alignment == "bottom_right" else 0
    left, right = window if window is not None else (-1, -1)
    mask = _block_mask(n_q, n_k, q.device, bool(is_causal), offset, left, right)
    score_mod = _capped(torch.tensor(float(softcap), device=q.device)) if softcap else None
    scale = softmax_scale(d, scale)
    o, lse = _Flex.apply(q4, k4, v4, score_mod, mask, scale, group)
    return o.reshape(*q.shape[:-1], v.shape[-1]), lse.reshape(q.shape[:-1])


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, **features
) -> torch.Tensor:
    return attention_with_lse(q, k, v, is_causal, **features)[0]
