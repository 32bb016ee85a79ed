"""``python -m fuzz sensitivity``: how sharp is each bound of the error model?

The error model (:mod:`properties.error_model`) says how far a correct kernel may be from the
float64 oracle; this says how far a wrong one may be and still pass. Two measurements, per check,
per dtype and per output (``o``, ``lse``, ``dq``, ``dk``, ``dv``):

- **Headroom**: each correct kernel's worst error as a fraction of its bound
  (:func:`properties.error_model.record_margins`), over the fixed grids the suite runs the check on
  (``properties/grids.py``) and over a seeded fuzz sample (:func:`fuzz.strategies.cases`: every
  value distribution, and the features the kernel declares). A bound that correct kernels never
  use more than a sliver of (the rule of thumb: less than :data:`LOOSE`, 1/8, everywhere) lets
  whole classes of precision bugs through.
- **Threshold**: the smallest error the check detects, injected into a correct kernel's result
  (the first ``--kernel``). Its result ``x`` becomes ``x (1 + eps r)`` (``o``, ``dq``, ``dk``,
  ``dv``) or ``lse + eps r`` (an absolute error in the lse is a relative one in every
  probability), ``r`` a fixed tensor of random signs, and the check is run again on the same case
  for each ``eps``, searched on a log scale (doubling or halving from the bound's own estimate,
  then bisection to within :data:`RESOLUTION`) for the smallest ``eps`` it fails. Given in units of
  the output dtype's unit roundoff ``u`` (the lse's dtype is float32 whatever the inputs'), over the
  threshold cases (``--threshold-cases`` of the grid per dtype, evenly spread): ``detected from``
  (the smallest ``eps`` that fails some case) and ``on every case from``; and the injected error
  over the same-precision reference's own error on that case. Also: rounding the result through a
  lower precision (float16, bfloat16), detected on how many of the cases.

The kernel runs once per case and quantity: the perturbed module (:class:`Perturbed`) caches its
base kernel's results by the inputs' bytes, so the search costs the checks' oracles only.
"""

from __future__ import annotations

import hashlib
import math
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch

from oracle.dense import dense_attention
from properties import ORACLE_CHECKS, _common
from properties import error_model as em
from properties.case import DTYPES, Case
from properties.kernels import NotApplicable, default_device, features, load_kernel, require_case

__all__ = [
    "QUANTITIES",
    "Headroom",
    "Perturbed",
    "Threshold",
    "grid_for",
    "headroom",
    "markdown",
    "sample_cases",
    "threshold",
    "thresholds",
]

QUANTITIES = ("o", "lse", "dq", "dk", "dv")
"""The outputs a check can compare with the oracle, in the order the tables list them."""

MARGIN_QUANTITIES = {"output o": "o", "log-sum-exp": "lse", "gradient dq": "dq", "gradient dk": "dk",
                     "gradient dv": "dv"}
""":class:`properties.error_model.Margin` names of the oracle checks' quantities, as outputs."""

SEES = {"check_output_matches_oracle": ("o",), "check_lse_matches_oracle": ("lse",),
        "check_gradients_match_oracle": ("dq", "dk", "dv")}
"""The outputs each oracle check compares; another check (``--check``) is tried with every output,
and an output whose largest perturbation (:data:`MAX_EPS`) it does not detect is left out."""

LOOSE = 1 / 8
"""The rule of thumb (issue #19): a bound is loose if no correct kernel uses this much of it on any
grid or fuzz case."""

RESOLUTION = 2 ** (1 / 16)
"""Thresholds are bisected to within this factor (4.4 %)."""

MAX_EPS = {"o": 1.0, "dq": 1.0, "dk": 1.0, "dv": 1.0, "lse": 1.0}
"""The largest perturbation tried: 100 % relative, or an lse off by 1 (a factor e in every
probability). A check that passes it does not see that output."""

LOWER = (torch.float16, torch.bfloat16)
"""The precisions a result is rounded through (each only where it has fewer significand bits than
the output's dtype)."""

SIGNS_SEED = 19
"""Seed of the perturbation's random signs ``r`` (the same tensor for every ``eps``)."""


def output_dtype(quantity: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype the contract gives ``quantity`` for inputs of ``dtype``: the lse is float32."""
    return em.LSE_DTYPE if quantity == "lse" else dtype


# -- cases ------------------------------------------------------------------------------------------


def sample_cases(n: int, *, seed: int, size, kernel_features: frozenset[str] = frozenset()) -> list[Case]:
    """``n`` cases drawn by :func:`fuzz.strategies.cases` from a fixed Hypothesis seed (the same
    arguments and Hypothesis version give the same cases; duplicates dropped)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from fuzz.strategies import cases

    drawn: list[Case] = []

    @hypothesis_seed(seed)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(size=size, features=kernel_features))
    def collect(case):
        drawn.append(case)

    collect()
    return list(dict.fromkeys(drawn))


def grid_for(check_name: str, size_name: str) -> list[Case]:
    """The fixed cases the suite runs ``check_name`` on, for ``cpu`` or ``gpu`` sizes: the oracle
    checks on :func:`~properties.grids.cpu_cases` (and the backward grid, for the gradients) and the
    feature grid; any other check on :func:`~properties.grids.property_cpu_cases` and the feature grid."""
    from properties import grids

    gpu = size_name == "gpu"
    if check_name in SEES:
        cases = grids.gpu_cases() if gpu else grids.cpu_cases()
        if check_name == "check_gradients_match_oracle":
            cases += grids.backward_gpu_cases() if gpu else grids.backward_cpu_cases()
    else:
        cases = grids.property_gpu_cases() if gpu else grids.property_cpu_cases()
    cases += grids.feature_gpu_cases() if gpu else grids.feature_cpu_cases()
    return list(dict.fromkeys(cases))


def retyped(cases: Iterable[Case], dtypes: Sequence[str] | None) -> list[Case]:
    """``cases`` as they are (``dtypes`` None), or each in every one of ``dtypes`` (duplicates dropped)."""
    cases = list(cases)
    if dtypes is None:
        return cases
    return list(dict.fromkeys(c.replace(dtype=d) for c in cases for d in dtypes))


def work(case: Case) -> int:
    """``prod(leading) n_q n_k``: what the float64 oracle's score matrix holds."""
    return math.prod(case.leading) * case.n_q * case.n_k


# -- headroom ---------------------------------------------------------------------------------------


@dataclass
class Worst:
    """The worst fraction of the bound seen for one (check, dtype, output, kernel), and where."""

    fraction: float = 0.0
    case: Case | None = None
    cases: int = 0
    failed: bool = False

    def add(self, fraction: float, case: Case) -> None:
        if self.case is None or fraction > self.fraction:
            self.fraction, self.case = fraction, case
        self.failed |= fraction > 1

    def cell(self) -> str:
        if not self.cases:
            return "n/a"
        return ("FAIL " if self.failed else "") + f"{self.fraction:.2g}"


@dataclass
class Headroom:
    """Per (check, dtype, output), per kernel, the worst fraction on the grid and on the sample."""

    grid: dict[tuple, Worst] = field(default_factory=dict)
    sample: dict[tuple, Worst] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def keys(self) -> list[tuple[str, str, str]]:
        """(check, dtype, output) rows, in check order, then dtype, then output."""
        rows = {key[:3] for key in (*self.grid, *self.sample)}
        return sorted(rows, key=lambda r: (_CHECK_ORDER.get(r[0], 99), r[0], r[1], QUANTITIES.index(r[2])))


_CHECK_ORDER = {check.__name__: i for i, check in enumerate(ORACLE_CHECKS)}


def _measure(kernel, check, cases: Iterable[Case], into: dict[tuple, Worst], name: str, device,
             progress: Callable[[str], None]) -> None:
    for case in cases:
        with em.record_margins() as margins:
            try:
                check(kernel, case, device)
            except NotApplicable:
                continue
            except AssertionError as exc:
                progress(f"  FAIL {check.__name__} on {case}: {str(exc).splitlines()[0][:200]}")
        seen = set()
        for margin in margins:
            quantity = MARGIN_QUANTITIES.get(margin.quantity)
            if quantity is None:
                continue
            worst = into.setdefault((check.__name__, case.dtype, quantity, name), Worst())
            worst.add(margin.fraction, case)
            if quantity not in seen:
                worst.cases += 1
                seen.add(quantity)


def headroom(kernel_names: Sequence[str], checks: Sequence, *, size, sample: int, seed: int,
             dtypes: Sequence[str] | None = None, max_work: int | None = None, device=None,
             progress: Callable[[str], None] = lambda line: None, into: Headroom | None = None) -> Headroom:
    """Each kernel's worst fraction of the bound, per (check, dtype, output), on the grids and on a
    fuzz sample of ``sample`` cases (per kernel, drawn with its features), recorded ``into`` (a new
    :class:`Headroom` by default) as it goes, so an interrupted run keeps what it measured."""
    result = Headroom() if into is None else into
    for name in kernel_names:
        kernel = load_kernel(name)
        start = time.monotonic()
        drawn = [c for c in retyped(sample_cases(sample, seed=seed, size=size,
                                                 kernel_features=features(kernel)), dtypes)
                 if max_work is None or work(c) <= max_work] if sample else []
        for check in checks:
            grid = [c for c in retyped(grid_for(check.__name__, size.name), dtypes)
                    if max_work is None or work(c) <= max_work]
            progress(f"{name}: {check.__name__}, {len(grid)} grid cases, {len(drawn)} drawn")
            _measure(kernel, check, grid, result.grid, name, device, progress)
            _measure(kernel, check, drawn, result.sample, name, device, progress)
        result.seconds[name] = time.monotonic() - start
    return result


# -- thresholds -------------------------------------------------------------------------------------


def _digest(tensors: Sequence[torch.Tensor], extra) -> bytes:
    h = hashlib.blake2b(repr(extra).encode(), digest_size=16)
    for t in tensors:
        h.update(repr((tuple(t.shape), t.stride(), t.dtype)).encode())
        h.update(t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.digest()


def _signs(t: torch.Tensor) -> torch.Tensor:
    """The fixed random signs ``r`` for a result shaped like ``t`` (float64, on its device)."""
    gen = torch.Generator().manual_seed(SIGNS_SEED)
    return (torch.randint(0, 2, t.shape, generator=gen).double() * 2 - 1).to(t.device)


@dataclass(frozen=True)
class Perturbation:
    """What is done to the base kernel's result for ``quantity``: ``x (1 + eps r)`` (``lse + eps r``),
    or, with ``through`` set, ``x`` rounded through that dtype and back."""

    quantity: str
    eps: float = 0.0
    through: torch.dtype | None = None

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        if self.through is not None:
            return x.to(self.through).to(x.dtype)
        if self.eps == 0:
            return x
        r = _signs(x)
        moved = x.double() + self.eps * r if self.quantity == "lse" else x.double() * (1 + self.eps * r)
        return moved.to(x.dtype)

    def __str__(self) -> str:
        if self.through is not None:
            return f"{self.quantity} rounded through {str(self.through).removeprefix('torch.')}"
        how = "+ eps r" if self.quantity == "lse" else "x (1 + eps r)"
        return f"{self.quantity} {how}, eps={self.eps:.3g}"


class Perturbed:
    """A kernel module: ``base`` with its result for one output perturbed (:attr:`perturbation`, set
    between calls), its results cached by the inputs' bytes so that ``base`` runs once per input."""

    def __init__(self, base: types.ModuleType) -> None:
        self.base = base
        self.perturbation = Perturbation("o")
        self._forward: dict[bytes, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self._grads: dict[bytes, tuple[torch.Tensor, ...]] = {}
        self.module = self._module()

    def clear(self) -> None:
        self._forward.clear()
        self._grads.clear()

    def _module(self) -> types.ModuleType:
        module = types.ModuleType(f"{self.base.__name__} (perturbed)")
        for attr in ("FEATURES", "SUPPORTED_DTYPES", "MIN_HEAD_DIM", "MAX_HEAD_DIM", "DEVICE_TYPES",
                     "unsupported"):
            if hasattr(self.base, attr):
                setattr(module, attr, getattr(self.base, attr))
        outer = self

        class _Attention(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, is_causal, features):
                ctx.save_for_backward(q, k, v)
                ctx.call = (is_causal, features)
                return outer._perturb("o", outer._run(q, k, v, is_causal, features)[0])

            @staticmethod
            def backward(ctx, do):
                grads = outer._backward(*ctx.saved_tensors, do, *ctx.call)
                return (*(outer._perturb(n, g) for n, g in zip(("dq", "dk", "dv"), grads)), None, None)

        def attention(q, k, v, is_causal=False, **features):
            return _Attention.apply(q, k, v, is_causal, tuple(sorted(features.items())))

        module.attention = attention
        if hasattr(self.base, "attention_with_lse"):
            def attention_with_lse(q, k, v, is_causal=False, **features):
                o, lse = self._run(q, k, v, is_causal, tuple(sorted(features.items())))
                return self._perturb("o", o), self._perturb("lse", lse)

            module.attention_with_lse = attention_with_lse
        return module

    def _perturb(self, quantity: str, x: torch.Tensor) -> torch.Tensor:
        return self.perturbation.apply(x) if self.perturbation.quantity == quantity else x

    def _run(self, q, k, v, is_causal, features):
        key = _digest((q, k, v), (is_causal, features))
        if key not in self._forward:
            with torch.no_grad():
                fn = getattr(self.base, "attention_with_lse", None)
                if fn is not None:
                    o, lse = fn(q, k, v, is_causal, **dict(features))
                else:
                    o, lse = self.base.attention(q, k, v, is_causal, **dict(features)), None
            self._forward[key] = (o.detach(), None if lse is None else lse.detach())
        return self._forward[key]

    def _backward(self, q, k, v, do, is_causal, features):
        key = _digest((q, k, v, do), (is_causal, features))
        if key not in self._grads:
            with torch.enable_grad():
                leaves = [t.detach().requires_grad_() for t in (q, k, v)]
                o = self.base.attention(*leaves, is_causal, **dict(features))
                self._grads[key] = tuple(g.detach() for g in torch.autograd.grad(o, leaves, do))
        return self._grads[key]


def _fails(check, perturbed: Perturbed, case: Case, perturbation: Perturbation, device) -> bool:
    perturbed.perturbation = perturbation
    try:
        check(perturbed.module, case, device)
    except AssertionError:
        return True
    finally:
        perturbed.perturbation = Perturbation("o")
    return False


def threshold(check, perturbed: Perturbed, case: Case, quantity: str, device=None) -> float | None:
    """The smallest ``eps`` at which ``check`` fails ``case`` with ``quantity`` perturbed (within
    :data:`RESOLUTION`); 0.0 if it fails unperturbed; None if it passes even :data:`MAX_EPS`.
    :class:`NotApplicable` propagates."""
    with em.record_margins() as margins:
        if _fails(check, perturbed, case, Perturbation(quantity), device):
            return 0.0
    if not _fails(check, perturbed, case, Perturbation(quantity, MAX_EPS[quantity]), device):
        return None
    # Start from the bound's own estimate: the eps that moves the largest element by the bound.
    bounds = [m.bound for m in margins if MARGIN_QUANTITIES.get(m.quantity) == quantity]
    u = em.UNIT_ROUNDOFF[output_dtype(quantity, case.torch_dtype)]
    x_max = _largest(perturbed, case, quantity, device)
    guess = min(bounds) / x_max if bounds and x_max > 0 else u
    eps = min(max(guess, u / 16), MAX_EPS[quantity])
    if _fails(check, perturbed, case, Perturbation(quantity, eps), device):
        high = eps
        low = high / 2
        while low > u / 1024 and _fails(check, perturbed, case, Perturbation(quantity, low), device):
            high, low = low, low / 2
    else:
        low = eps
        high = min(low * 2, MAX_EPS[quantity])
        while not _fails(check, perturbed, case, Perturbation(quantity, high), device):
            low, high = high, min(high * 2, MAX_EPS[quantity])
    while high / low > RESOLUTION:
        mid = math.sqrt(low * high)
        if _fails(check, perturbed, case, Perturbation(quantity, mid), device):
            high = mid
        else:
            low = mid
    return high


def _largest(perturbed: Perturbed, case: Case, quantity: str, device) -> float:
    """``max |x|`` of the base kernel's ``quantity`` on ``case`` (finite elements; the lse's is 1:
    its perturbation is absolute)."""
    if quantity == "lse":
        return 1.0
    x = _result(perturbed, case, quantity, device)
    finite = x[torch.isfinite(x)]
    return float(finite.double().abs().max()) if finite.numel() else 0.0


def _result(perturbed: Perturbed, case: Case, quantity: str, device) -> torch.Tensor:
    """The base kernel's ``quantity`` on ``case``, as the oracle checks build its inputs."""
    q, k, v = case.make_qkv(device)
    f = tuple(sorted(case.features().items()))
    if quantity in ("o", "lse"):
        o, lse = perturbed._run(q, k, v, case.is_causal, f)
        return o if quantity == "o" else lse
    grads = perturbed._backward(q, k, v, case.make_grad_out(q.device), case.is_causal, f)
    return grads[("dq", "dk", "dv").index(quantity)]


def _takes(kernel, case: Case, device) -> bool:
    """Whether ``kernel`` declares what ``case`` needs (:func:`require_case`)."""
    try:
        require_case(kernel, case, device)
    except NotApplicable:
        return False
    return True


def _exactly_zero(case: Case, quantity: str, device) -> bool:
    """Whether the oracle's ``quantity`` (a gradient) is 0 everywhere on ``case``."""
    if quantity in ("o", "lse"):
        return False
    q, k, v = case.make_qkv(device)
    g = _common.oracle_gradients(q, k, v, case.make_grad_out(q.device), case.is_causal, **case.features())
    return not bool(g.want[("dq", "dk", "dv").index(quantity)].abs().max() > 0)


def reference_error(case: Case, quantity: str, device) -> float:
    """``max |reference - oracle|`` of ``quantity`` on ``case``: the same-precision reference's own
    error, as the oracle checks make it (the lse's in float32, :func:`em.lse_reference_dtype`)."""
    q, k, v = case.make_qkv(device)
    f = case.features()
    with torch.no_grad():
        o64, lse64 = dense_attention(q, k, v, case.is_causal, **f)
        if quantity == "o":
            return em.max_abs_error(dense_attention(q, k, v, case.is_causal, compute_dtype=None, **f)[0], o64)
        if quantity == "lse":
            ref = dense_attention(q, k, v, case.is_causal, compute_dtype=em.lse_reference_dtype(q.dtype), **f)
            return em.max_abs_error(ref[1], lse64)
    g = _common.oracle_gradients(q, k, v, case.make_grad_out(q.device), case.is_causal, **f)
    i = ("dq", "dk", "dv").index(quantity)
    return em.max_abs_error(g.ref[i], g.want[i])


@dataclass
class Threshold:
    """One (check, dtype, output): the threshold ``eps`` of each case that detects it, the injected
    error over the reference's on each, and per lower precision, the cases that rounding through
    it failed and how many were tried."""

    unit: float
    eps: list[float] = field(default_factory=list)
    over_reference: list[float] = field(default_factory=list)
    cases: int = 0
    undetected: int = 0
    zero: int = 0
    rounded: dict[torch.dtype, list[int]] = field(default_factory=dict)


def thresholds(kernel_name: str, checks: Sequence, *, size, per_dtype: int, dtypes: Sequence[str] | None,
               max_work: int | None = None, device=None,
               progress: Callable[[str], None] = lambda line: None,
               into: dict | None = None) -> dict[tuple[str, str, str], Threshold]:
    """Per (check, dtype, output), :func:`threshold` over ``per_dtype`` grid cases of each dtype
    (evenly spread over the grid cases the kernel takes), and whether rounding through each of
    :data:`LOWER` is detected;
    recorded ``into`` (a new dict by default) as it goes."""
    perturbed = Perturbed(load_kernel(kernel_name))
    device = device or default_device()
    out: dict[tuple[str, str, str], Threshold] = {} if into is None else into
    for check in checks:
        grid = [c for c in retyped(grid_for(check.__name__, size.name), dtypes)
                if (max_work is None or work(c) <= max_work) and _takes(perturbed.module, c, device)]
        for dtype in dict.fromkeys(c.dtype for c in grid):
            of_dtype = [c for c in grid if c.dtype == dtype]
            chosen = [of_dtype[round(i * (len(of_dtype) - 1) / max(per_dtype - 1, 1))]
                      for i in range(min(per_dtype, len(of_dtype)))]
            progress(f"{kernel_name}: thresholds of {check.__name__}, {dtype}, {len(chosen)} cases")
            for case in dict.fromkeys(chosen):
                for quantity in SEES.get(check.__name__, QUANTITIES):
                    out_dtype = output_dtype(quantity, DTYPES[dtype])
                    try:
                        if _exactly_zero(case, quantity, device):
                            # x (1 + eps r) of a result that should be 0 (dq with one key) is no test
                            # of the bound: the kernel's x is rounding noise, or 0.
                            out.setdefault((check.__name__, dtype, quantity),
                                           Threshold(em.UNIT_ROUNDOFF[out_dtype])).zero += 1
                            continue
                        eps = threshold(check, perturbed, case, quantity, device)
                    except NotApplicable:
                        break
                    row = out.setdefault((check.__name__, dtype, quantity),
                                         Threshold(em.UNIT_ROUNDOFF[out_dtype]))
                    row.cases += 1
                    if eps is None:
                        row.undetected += 1
                        continue
                    row.eps.append(eps)
                    ref = reference_error(case, quantity, device)
                    injected = eps * _largest(perturbed, case, quantity, device)
                    row.over_reference.append(injected / ref if ref > 0 else math.inf)
                    for low in LOWER:
                        if torch.finfo(low).eps <= torch.finfo(out_dtype).eps:
                            continue
                        hit = _fails(check, perturbed, case, Perturbation(quantity, through=low), device)
                        tally = row.rounded.setdefault(low, [0, 0])
                        tally[0] += hit
                        tally[1] += 1
            perturbed.clear()
    # A check other than the oracle checks may not see every output: drop those it never detected.
    for key in [key for key, row in out.items() if key[0] not in SEES and not row.eps]:
        del out[key]
    return out


# -- the page ---------------------------------------------------------------------------------------


def _u(eps: float, unit: float) -> str:
    x = eps / unit
    return f"{x:.3g} u" if x < 1e4 else f"{x:.2e} u"


def markdown(room: Headroom, limits: dict[tuple[str, str, str], Threshold], kernels: Sequence[str], *,
             header: str = "", threshold_kernel: str | None = None) -> str:
    """The page: header, legend, the headroom table (a row per check, dtype and output, a column per
    kernel, and the rule of thumb's verdict), the threshold table, then notes on where each row's
    worst fraction was seen."""
    lines = [header, ""] if header else []
    lines += [
        "## Headroom",
        "",
        "Each correct kernel's worst error as a fraction of its bound (`properties/error_model.py`): "
        "`grid / sample`, the fixed grids the suite runs the check on, then the seeded fuzz sample. "
        f"`loose` marks a row where no kernel reaches {LOOSE:g} of its bound anywhere (the rule of "
        "thumb of issue #19); the note gives the case of the row's worst fraction.",
        "",
    ]
    head = ["check", "dtype", "output", *(f"`{k}`" for k in kernels), "max", "verdict"]
    rows, notes = [], []
    for check, dtype, quantity in room.keys():
        cells, best, where = [], 0.0, None
        for kernel in kernels:
            g = room.grid.get((check, dtype, quantity, kernel), Worst())
            s = room.sample.get((check, dtype, quantity, kernel), Worst())
            cells.append(f"{g.cell()} / {s.cell()}")
            for w in (g, s):
                if w.cases and w.fraction > best:
                    best, where = w.fraction, (kernel, w.case)
        verdict = "FAIL" if best > 1 else "loose" if best < LOOSE else "ok"
        note = ""
        if where is not None:
            notes.append(f"`{check}`, {dtype}, `{quantity}`: {best:.3g} of the bound, `{where[0]}` on "
                         f"`{where[1]}`")
            note = f" [{len(notes)}]"
        rows.append([f"`{check}`", dtype, quantity, *cells, f"{best:.2g}{note}", verdict])
    lines += _table(head, rows)
    if limits:
        lines += [
            "",
            "## Thresholds",
            "",
            f"The smallest perturbation each check detects, injected into `{threshold_kernel}`'s result: "
            "`x (1 + eps r)` (for `lse`: `lse + eps r`), `r` random signs, in units of the output "
            "dtype's unit roundoff `u` (the lse is float32 whatever the inputs: `u` = 6.0e-8). "
            "`detected from`: the smallest `eps` that fails some threshold case; `on every case from`: "
            "the smallest that fails them all; `injected / reference`: the injected error "
            "(`eps max|x|`) over the same-precision reference's own error, median over the cases. "
            "`rounded through`: the result rounded through a lower precision and back, the cases "
            "it fails of those tried.",
            "",
        ]
        head = ["check", "dtype", "output", "cases", "detected from", "on every case from",
                "injected / reference", "rounded through float16", "rounded through bfloat16"]
        rows = []
        for (check, dtype, quantity), t in sorted(
                limits.items(), key=lambda kv: (_CHECK_ORDER.get(kv[0][0], 99), kv[0][0], kv[0][1],
                                                QUANTITIES.index(kv[0][2]))):
            if t.eps:
                lo, hi = min(t.eps), max(t.eps)
                every = _u(hi, t.unit) if not t.undetected else f"never ({t.undetected} undetected)"
                finite = [r for r in t.over_reference if math.isfinite(r)]
                exact = len(t.over_reference) - len(finite)
                ratio = f"{statistics.median(finite):.3g}" if finite else "-"
                if exact:
                    ratio += f" ({exact} with an exact reference)"
                cells = [_u(lo, t.unit), every, ratio]
            else:
                cells = ["never", "never", "-"]
            rounded = [f"{t.rounded[low][0]} of {t.rounded[low][1]}" if low in t.rounded else "-"
                       for low in LOWER]
            cases = str(t.cases) + (f" (+{t.zero} where it is exactly 0)" if t.zero else "")
            rows.append([f"`{check}`", dtype, quantity, cases, *cells, *rounded])
        lines += _table(head, rows)
    if notes:
        lines += ["", "## Where each row's worst fraction was seen", ""]
        lines += [f"{i}. {text}" for i, text in enumerate(notes, 1)]
    seconds = ", ".join(f"`{k}` {s:.0f} s" for k, s in room.seconds.items())
    if seconds:
        lines += ["", f"Headroom run times: {seconds}."]
    return "\n".join(lines) + "\n"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]

    def line(row):
        return "| " + " | ".join(x.ljust(w) for x, w in zip(row, widths)) + " |"

    return [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
