"""What the feature benchmarks (issue #15) measure: cases, the backends of each, their targets.

Three scenarios, each at bf16 and fp16, head dim 64 and 128, forward and forward+backward
(``bench_features.py`` times them, ``report_features.py`` prints the ratios):

- ``gqa``: grouped-query prefill, 8:1: ``b=4, h_q=32, h_kv=4, n=4096``, causal and not. Backends:
  ``kernel`` (the GQA call), ``kernel_mha`` (our own MHA call: k and v with ``h_q`` heads, same n),
  ``sdpa_flash`` and ``sdpa_cudnn`` (SDPA held to that backend, ``enable_gqa=True``), ``flex``
  (FlexAttention, ``enable_gqa=True``, a causal block mask when causal, none otherwise);
- ``window``: a sliding window of 1024 keys at ``n=16384``, causal, ``b=1, h=16``. The window
  counts the diagonal: ``window=(1023, 0)``, so query ``i`` sees keys ``i - 1023 .. i``
  (FlashAttention's ``window_size=(1023, 0)``); FlexAttention's mask is the same set,
  ``q_idx - kv_idx <= 1023 and kv_idx <= q_idx``. Backends: ``kernel`` (window), ``kernel_causal``
  (our full causal call), ``flex`` (the window's block mask), ``flex_causal`` (causal block mask);
- ``softcap``: ``softcap=30``, causal, ``n=16384, b=1, h=16``. Backends: ``kernel`` (softcap),
  ``kernel_nocap`` (the same call without it), ``flex`` (a ``30 tanh(s / 30)`` ``score_mod`` and
  the causal block mask), ``flex_nocap`` (the causal block mask alone).

Each backend is a :class:`Variant`: which implementation (``engine``), which contract call it
computes (:class:`Call`: causal, window, softcap; the oracle's meaning, :mod:`oracle.dense`) and
how many kv heads its inputs have. :func:`build` turns one into a function of ``(q, k, v)``, made
once per case outside the timing (FlexAttention's block mask included). FlexAttention is
``torch.compile(flex_attention, dynamic=False)`` on CUDA, one static graph per shape, dtype, mask
and grad mode, compiled by the benchmark's untimed first call; its ``mask_mod`` and ``score_mod``
are cached per call (:func:`mask_mod`, :func:`score_mod`), so a case that asks for the same mask
(``window``'s ``flex_causal`` and ``softcap``'s ``flex_nocap``) reuses the compiled graph. On the
CPU (``--bench-allow-cpu``, and the tests) it is eager ``flex_attention``, forward only.

The issue's targets are :data:`COMPARISONS`: speed ratios ``peer time / our time`` from one run.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import torch
import torch.nn.functional as F

from benchmarks.shapes import BACKWARD_FLOP_FACTOR, DTYPES, GRIDS, SHORT_DTYPE, Pass

SCENARIOS = ("gqa", "window", "softcap")
WINDOW = (1023, 0)
"""The window scenario's ``window=(left, right)``: 1024 keys, the diagonal included."""
SOFTCAP = 30.0
RECOMPILE_LIMIT = 512
"""Dynamo graphs of ``flex_attention`` allowed: the quick cases compile about 40 (5 masks and
score_mods x 2 dtypes x 2 head dims x with and without gradients), the attention grid's ``flex``
backend one per shape and grad mode (80 in the ``targets`` grid, 224 in the ``full`` one), the
decode step 4; its default, 8, would send the rest to flex's unfused eager path. Past this limit a
call raises instead."""

BACKENDS = {
    "gqa": ("kernel", "kernel_mha", "sdpa_flash", "sdpa_cudnn", "flex"),
    "window": ("kernel", "kernel_causal", "flex", "flex_causal"),
    "softcap": ("kernel", "kernel_nocap", "flex", "flex_nocap"),
}
"""Backends of each scenario, in the order they run for each case."""
FEATURE_BACKENDS = tuple(dict.fromkeys(itertools.chain(*BACKENDS.values())))
ENGINES = ("kernel", "sdpa_flash", "sdpa_cudnn", "flex")


@dataclass(frozen=True)
class Call:
    """One call of the contract: ``attention(q, k, v, is_causal, window=..., softcap=...)``."""

    is_causal: bool
    window: tuple[int, int] | None = None
    softcap: float | None = None

    def features(self) -> dict:
        """The keyword arguments of the call: only those it sets (a plain call passes none)."""
        out = {}
        if self.window is not None:
            out["window"] = self.window
        if self.softcap is not None:
            out["softcap"] = self.softcap
        return out


@dataclass(frozen=True)
class Case:
    """One benchmarked problem: q ``[batch, heads, seq_len, head_dim]``, k and v with ``kv_heads``
    heads (a backend may ask for ``heads``: :attr:`Variant.kv_heads`), in ``dtype``. ``window`` and
    ``softcap`` are the window and softcap scenarios' settings."""

    scenario: str
    dtype: str
    head_dim: int
    seq_len: int
    batch: int
    heads: int
    kv_heads: int
    causal: bool
    window: tuple[int, int] | None = None
    softcap: float | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def id(self) -> str:
        """The case's part of a benchmark's name: ``gqa-bf16-d64-n4096-b4-h32-kv4-causal``."""
        out = (f"{self.scenario}-{SHORT_DTYPE[self.dtype]}-d{self.head_dim}-n{self.seq_len}"
               f"-b{self.batch}-h{self.heads}-kv{self.kv_heads}-{'causal' if self.causal else 'full'}")
        if self.window is not None:
            out += f"-w{self.window[0]}_{self.window[1]}"
        if self.softcap is not None:
            out += f"-cap{self.softcap:g}"
        return out

    def group(self, pass_: Pass) -> str:
        """pytest-benchmark group: every backend of one case and pass is reported together."""
        return f"{pass_} {self.id}"

    @property
    def title(self) -> str:
        """The scenario and its sizes, for a report's heading (dtype and head dim vary under it)."""
        kv = f", h_kv={self.kv_heads}" if self.kv_heads != self.heads else ""
        if self.scenario == "gqa":
            what = f"GQA {self.heads // self.kv_heads}:1 prefill"
        else:
            what = f"window={self.window}" if self.scenario == "window" else f"softcap={self.softcap:g}"
            what += ", causal" if self.causal else ""
        return f"{what}: b={self.batch}, h_q={self.heads}{kv}, n={self.seq_len}"


@dataclass(frozen=True)
class Variant:
    """One backend of a case: ``engine`` computing ``call`` on k, v with ``kv_heads`` heads."""

    name: str
    engine: str
    call: Call
    kv_heads: int


@dataclass(frozen=True)
class Comparison:
    """A speed ratio the report prints: ``peer``'s median time over ``ours``'s, per dtype, head dim,
    pass (and causal flag); ``target`` is the least ratio the issue accepts (None: context only)."""

    scenario: str
    ours: str
    peer: str
    target: float | None
    note: str = ""


COMPARISONS = (
    Comparison("gqa", "kernel", "kernel_mha", 1.0, "no slower than our MHA call"),
    Comparison("gqa", "kernel", "sdpa_flash", 1.0),
    Comparison("gqa", "kernel", "flex", 1.0),
    Comparison("gqa", "kernel", "sdpa_cudnn", None),
    Comparison("window", "kernel", "flex", 1.0, "FlexAttention with the same block mask"),
    Comparison("window", "kernel", "kernel_causal", 5.0, "our full causal call"),
    Comparison("window", "flex", "flex_causal", None, "what the window gains FlexAttention"),
    Comparison("softcap", "kernel", "kernel_nocap", 1 / 1.15, "at most 15% slower than without softcap"),
    Comparison("softcap", "flex", "flex_nocap", None, "what softcap costs FlexAttention"),
    Comparison("softcap", "kernel", "flex", None),
)


def cases(grid: str) -> list[Case]:
    """The cases of a grid: the issue's (``quick``; ``targets`` and ``full`` are the same), or ``cpu``
    (tiny float32 ones for ``--bench-allow-cpu``: odd lengths, a window narrower than the length)."""
    if grid == "cpu":
        return [Case("gqa", "float32", 32, 80, 1, 8, 2, False), Case("gqa", "float32", 32, 80, 1, 8, 2, True),
                Case("window", "float32", 32, 80, 1, 2, 2, True, window=(15, 0)),
                Case("softcap", "float32", 32, 80, 1, 2, 2, True, softcap=SOFTCAP)]
    if grid not in GRIDS:
        raise ValueError(f"unknown grid {grid!r}")
    out = []
    for dtype, d in itertools.product(("bfloat16", "float16"), (64, 128)):
        out += [Case("gqa", dtype, d, 4096, 4, 32, 4, causal) for causal in (False, True)]
        out.append(Case("window", dtype, d, 16384, 1, 16, 16, True, window=WINDOW))
        out.append(Case("softcap", dtype, d, 16384, 1, 16, 16, True, softcap=SOFTCAP))
    return out


def variants(case: Case) -> dict[str, Variant]:
    """The case's backends (:data:`BACKENDS`), by name."""
    plain = Call(case.causal)
    if case.scenario == "gqa":
        table = {"kernel": ("kernel", plain), "kernel_mha": ("kernel", plain),
                 "sdpa_flash": ("sdpa_flash", plain), "sdpa_cudnn": ("sdpa_cudnn", plain),
                 "flex": ("flex", plain)}
    elif case.scenario == "window":
        windowed = Call(case.causal, window=case.window)
        table = {"kernel": ("kernel", windowed), "kernel_causal": ("kernel", plain),
                 "flex": ("flex", windowed), "flex_causal": ("flex", plain)}
    elif case.scenario == "softcap":
        capped = Call(case.causal, softcap=case.softcap)
        table = {"kernel": ("kernel", capped), "kernel_nocap": ("kernel", plain),
                 "flex": ("flex", capped), "flex_nocap": ("flex", plain)}
    else:
        raise ValueError(f"unknown scenario {case.scenario!r}")
    assert tuple(table) == BACKENDS[case.scenario]
    return {name: Variant(name, engine, call, case.heads if name == "kernel_mha" else case.kv_heads)
            for name, (engine, call) in table.items()}


# -- FLOPs --

def visible_pairs(n: int, call: Call) -> int:
    """(query, key) pairs an ``n x n`` call sees (top-left aligned), counted exactly."""
    left, right = call.window if call.window is not None else (-1, -1)
    total = 0
    for i in range(n):  # n <= 16384: cheap, and obviously the contract's rule
        lo = 0 if left < 0 else max(0, i - left)
        hi = n - 1
        if call.is_causal:
            hi = i
        if right >= 0:
            hi = min(hi, i + right)
        total += max(0, hi - lo + 1)
    return total


def flops(case: Case, call: Call, pass_: Pass) -> float:
    """FLOPs of the pairs the call sees: ``4 d`` per pair and head forward (two matmuls), 3.5x that
    forward+backward (as :mod:`benchmarks.shapes`, but the causal half counted exactly)."""
    forward = 4.0 * case.batch * case.heads * case.head_dim * visible_pairs(case.seq_len, call)
    return forward * (BACKWARD_FLOP_FACTOR if pass_ == "fwd+bwd" else 1.0)


# -- FlexAttention's masks and score_mods --

@functools.cache
def mask_mod(is_causal: bool, window: tuple[int, int] | None = None) -> Callable | None:
    """FlexAttention's ``mask_mod`` for the contract's causal flag and window (top-left aligned),
    or None when every key is visible. Cached: one function object per mask, so Dynamo's guards see
    the same mask_mod in every case that asks for it. Only the bounds that cut are written: with
    ``is_causal``, a right bound >= 0 hides nothing that causality does not."""
    left, right = window if window is not None else (-1, -1)
    terms = []
    if is_causal:
        terms.append(lambda q_idx, kv_idx: kv_idx <= q_idx)
    if left >= 0:
        terms.append(lambda q_idx, kv_idx: q_idx - kv_idx <= left)
    if right >= 0 and not is_causal:
        terms.append(lambda q_idx, kv_idx: kv_idx - q_idx <= right)
    if not terms:
        return None

    def visible(b, h, q_idx, kv_idx):
        seen = terms[0](q_idx, kv_idx)
        for term in terms[1:]:
            seen = seen & term(q_idx, kv_idx)
        return seen

    return visible


@functools.cache
def score_mod(softcap: float | None) -> Callable | None:
    """FlexAttention's ``score_mod`` for softcap ``c``: the scaled score ``s`` -> ``c tanh(s / c)``."""
    if not softcap:
        return None

    def capped(score, b, h, q_idx, kv_idx):
        return softcap * torch.tanh(score / softcap)

    return capped


@functools.cache
def compiled_flex() -> Callable:
    """``torch.compile(flex_attention, dynamic=False)``: a static graph per shape, as a model that
    compiles its attention gets; the recompile limit raised so every case gets its own graph, and a
    call past it raises rather than silently running flex's unfused eager path."""
    import torch._dynamo.config as dynamo_config
    from torch.nn.attention.flex_attention import flex_attention

    dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, RECOMPILE_LIMIT)
    dynamo_config.accumulated_recompile_limit = max(dynamo_config.accumulated_recompile_limit,
                                                    4 * RECOMPILE_LIMIT)
    dynamo_config.fail_on_recompile_limit_hit = True
    return torch.compile(flex_attention, dynamic=False)


# -- building a backend --

@dataclass(frozen=True)
class Built:
    """A variant made ready for one case: ``fn(q, k, v) -> o``, run inside ``context``."""

    variant: Variant
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    info: dict = field(default_factory=dict)


def build(variant: Variant, case: Case, kernel: ModuleType, device: torch.device) -> Built:
    """``variant`` as a function of ``(q, k, v)`` for ``case`` on ``device``; whatever it needs
    beyond the inputs (FlexAttention's block mask, the compiled function) is made here, once."""
    call = variant.call
    gqa = variant.kv_heads != case.heads
    if variant.engine == "kernel":
        features = call.features()
        return Built(variant, lambda q, k, v: kernel.attention(q, k, v, call.is_causal, **features),
                     info={"kernel_module": kernel.__name__})
    if variant.engine in ("sdpa_flash", "sdpa_cudnn"):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if call.features():
            raise ValueError(f"SDPA takes no window or softcap: {variant}")
        which = SDPBackend.FLASH_ATTENTION if variant.engine == "sdpa_flash" else SDPBackend.CUDNN_ATTENTION
        return Built(variant, lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, is_causal=call.is_causal, enable_gqa=gqa), functools.partial(sdpa_kernel, which))
    if variant.engine == "flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        mask = mask_mod(call.is_causal, call.window)
        n = case.seq_len
        block_mask = None if mask is None else create_block_mask(mask, None, None, n, n, device=device)
        scores = score_mod(call.softcap)
        flex = compiled_flex() if device.type == "cuda" else flex_attention
        info = {"flex_compiled": device.type == "cuda",
                "block_sparsity": None if block_mask is None else round(block_mask.sparsity(), 2)}
        return Built(variant, lambda q, k, v: flex(q, k, v, score_mod=scores, block_mask=block_mask,
                                                   enable_gqa=gqa), info=info)
    raise ValueError(f"unknown engine {variant.engine!r}")


def case_by_id(case_id: str) -> Case:
    """The case of any grid whose :attr:`Case.id` is ``case_id``."""
    for case in itertools.chain(cases("quick"), cases("cpu")):
        if case.id == case_id:
            return case
    raise KeyError(f"no feature case {case_id!r}")
