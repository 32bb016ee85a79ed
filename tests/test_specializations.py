"""The grids reach every compiled specialization of flash's kernels.

Each Triton kernel of :mod:`flash` compiles one program per value of its ``tl.constexpr`` flags
(``SOFTCAP``, ``HAS_LEFT``, ``VARLEN``, ``SPLIT_RUNS``, ``TMA``, ...). A bug inside one of those
programs shows only on a case that compiles it: a flag that no case of a grid sets (or clears) is
code that grid ships untested, however many cases it has. (The fourteenth session found its new
one-loop backward reached by no CPU gradient case.)

So each grid's cases are run through flash's forward and backward as the checks call them, with
every kernel launch recorded and **not executed**: which program a call compiles is decided on the
host, from shapes, dtypes, strides and features, so a dry run answers the question in seconds
instead of the grids' minutes of interpreted kernels. The GPU grids are dry-run here too, without
a GPU: the host code that picks a specialization is the same on both platforms but for one test
(``flash.decode.INTERPRET``), which the dry run sets as the grid's platform has it.

The assertion: every boolean flag of every launched kernel takes both values somewhere in the CPU
grids, and again in the GPU grids (``ONE_VALUE`` lists the exceptions, each with its reason);
every pair of a kernel's boolean flags is compiled in all four combinations (``INFEASIBLE`` lists
those no call can make, with the reason): two features meet inside one program, and a bug where
they meet shows only there; and the flags of ``REQUIRED`` reach the values it names. A compiled
kernel is specialized further by Triton itself, on whether each pointer is 16-byte aligned and
each integer is 1 or a multiple of 16: for the GPU grids, every argument the caller's tensors
decide (``FROM_CALLER``) must fall on both sides. This is a statement about flash's code and
this suite's grids, not about the kernel contract, so it runs for flash whatever ``--kernel`` says.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest
import torch
from triton.runtime.jit import KernelInterface

import flash
from flash import backward_triton, decode, forward, replay, split_kv
from properties import default_device, grids, varlen_grids
from properties.case import feature_kwargs
from tests import test_decode

KERNEL_MODULES = (forward, backward_triton, decode)
"""The modules whose Triton kernels are launched (device helpers are never launched themselves)."""

DEVICE = default_device()
"""Where the dry run's tensors live: the CPU here, the GPU on a machine that has one (flash takes
CPU tensors only in the interpreter). Nothing runs on them."""

Grid = tuple[ModuleType, Callable[[], list], bool]
"""A kernel module, the cases the suite runs through it, and whether their checks take gradients."""

CPU_GRIDS: tuple[Grid, ...] = (
    *((flash, grid, True) for grid in (
        grids.cpu_cases, grids.backward_cpu_cases, grids.property_cpu_cases, grids.feature_cpu_cases,
        grids.band_edge_cpu_cases, grids.band_edge_decode_cpu_cases, grids.decode_cpu_cases,
        varlen_grids.varlen_cpu_cases, varlen_grids.varlen_feature_cpu_cases,
        varlen_grids.varlen_decode_cpu_cases)),
    # test_decode_long_cache takes the gradients of the first long case only
    (flash, lambda: grids.decode_long_cpu_cases()[:1], True),
    (flash, lambda: grids.decode_long_cpu_cases()[1:], False),
    (split_kv, lambda: test_decode.SPLIT_CPU + test_decode.SPLIT_PACKED_CPU, True),
    (split_kv, grids.band_edge_decode_cpu_cases, True),
)
GPU_GRIDS: tuple[Grid, ...] = (
    *((flash, grid, True) for grid in (
        grids.gpu_cases, grids.backward_gpu_cases, grids.property_gpu_cases, grids.feature_gpu_cases,
        grids.band_edge_gpu_cases, grids.band_edge_decode_gpu_cases, grids.decode_gpu_cases,
        varlen_grids.varlen_gpu_cases, varlen_grids.varlen_decode_gpu_cases)),
    (split_kv, lambda: test_decode.SPLIT_GPU + test_decode.SPLIT_PACKED_GPU, True),
    (split_kv, grids.band_edge_decode_gpu_cases, True),
)

REQUIRED: dict[str, Callable[[set], bool]] = {
    "OFFSET_ALIGN": lambda values: 16 in values and min(values) < 16,
    "INPUT_PRECISION": lambda values: values == {"ieee", "tf32"},
}
"""Flags that are not booleans, and the values a grid must reach: ``OFFSET_ALIGN`` (the alignment
the kernel may assume of a slice's start, :func:`flash.forward.offset_alignment`) both the aligned
16 and less (a layout whose slices start anywhere), ``INPUT_PRECISION`` float32's and the 16-bit
types'. Tile sizes (``BLOCK_*``) are not required: they change the shape of the same code."""

ONE_VALUE: dict[tuple[str, str], str] = {
    ("_split_kv_kernel", "ONE_HEAD_PER_TILE"):
        "fixed by the platform, not the case (flash.decode.PACK_HEADS: off in the interpreter, "
        "whose matmul may round a row by its place in the tile, unless a test sets it; on on a "
        "GPU); each grid set compiles its own",
}
"""``(kernel, flag)`` pairs allowed to take one value in a grid set, each with the reason."""

Seen = dict[str, dict[str, set]]
"""Per kernel: each keyword's values over the launches, and under :data:`PROGRAMS` each launch's
boolean flags together (a tuple of ``(flag, value)``)."""
PROGRAMS = "(programs)"

INFEASIBLE: dict[tuple[str, bool, str, bool], str] = {
    ("EMPTY_ROWS", False, "HAS_LEFT", True):
        "every lower window bound sets EMPTY_ROWS (flash.scores.Features.empty_rows)",
    ("SPLIT_KV", True, "VARLEN", False):
        "the forward skips split sequences of packed input only; a dense call that splits runs the "
        "split-KV kernels alone",
    ("SOFTCAP", True, "SPLIT_RUNS", False):
        "a softcap keeps the backward's split (flash.backward_triton.loop_shape: one loop measured "
        "slower with one)",
    ("SPLIT_RUNS", False, "VARLEN", True):
        "packed input keeps the backward's split (flash.backward_triton.loop_shape)",
}
"""Pairs of flag values no call can compile together, each with the reason."""

FROM_CALLER = ("Q", "K", "V", "DO", "N_Q", "N_K", "HEAD_DIM")
"""Kernel arguments the caller's tensors decide (with the strides of q, k, v and do): Triton
specializes a compiled program on them (:func:`_divisibility`). flash's own buffers are left out:
flash allocates them, aligned, every time."""


def _from_caller(name: str) -> bool:
    return name in FROM_CALLER or name.startswith(("stride_q", "stride_k", "stride_v", "stride_do"))


def _divisibility(value: object) -> str:
    """What a compiled Triton program is specialized on (the interpreter specializes nothing): a
    pointer on whether it is 16-byte aligned, an integer on whether it is 1 or a multiple of 16."""
    if isinstance(value, torch.Tensor):
        return "aligned" if value.data_ptr() % 16 == 0 else "unaligned"
    return "1" if value == 1 else "multiple of 16" if value % 16 == 0 else "other"


@contextlib.contextmanager
def dry_launches() -> Iterator[Seen]:
    """Record each launch's keyword arguments per kernel instead of running it (replay off, so
    every call goes through the launch path)."""
    seen: Seen = defaultdict(lambda: defaultdict(set))
    kernels = {id(obj): obj for module in KERNEL_MODULES for obj in vars(module).values()
               if isinstance(obj, KernelInterface)}

    def recorder(kernel):
        def run(*args, grid, warmup, **kwargs):
            flags = seen[kernel.fn.__name__]
            for name, value in kwargs.items():
                flags[name].add(value)
            flags[PROGRAMS].add(tuple(sorted((name, value) for name, value in kwargs.items()
                                             if isinstance(value, bool))))
            for name, value in zip(kernel.arg_names, args):
                if _from_caller(name):
                    flags[name].add(_divisibility(value))
        return run

    with replay.disabled():
        try:
            for kernel in kernels.values():
                kernel.run = recorder(kernel)
            yield seen
        finally:
            for kernel in kernels.values():
                del kernel.run


def _call(kernel: ModuleType, case, backward: bool) -> None:
    """Forward (and backward) of ``case`` through ``kernel``, as the checks call them."""
    kwargs = feature_kwargs(case)
    if hasattr(case, "seqlens_q"):
        q, k, v, *rest = case.make_qkv(DEVICE)
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        o = kernel.attention_varlen(q, k, v, *rest, case.is_causal, **kwargs)
    else:
        q, k, v = (t.detach().requires_grad_() for t in case.make_qkv(DEVICE))
        o = kernel.attention(q, k, v, case.is_causal, **kwargs)
    if backward:
        o.backward(case.make_grad_out(DEVICE))


def specializations(grid_set: tuple[Grid, ...], interpret: bool) -> Seen:
    """Every value of every keyword each kernel was launched with, over the grids' cases, with
    the host's choices made as in the interpreter or (``interpret=False``) on a GPU."""
    with dry_launches() as seen, _platform(interpret):
        for kernel, grid, backward in grid_set:
            for case in grid():
                _call(kernel, case, backward)
    return {kernel: dict(flags) for kernel, flags in seen.items()}


@contextlib.contextmanager
def _platform(interpret: bool) -> Iterator[None]:
    """Make the host code choose as it would in the interpreter or on a GPU: ``flash.decode``'s
    ``INTERPRET`` is the one platform test among the choices of a specialization."""
    saved, decode.INTERPRET = decode.INTERPRET, interpret
    try:
        yield
    finally:
        decode.INTERPRET = saved


def _gaps(seen: Seen) -> list[str]:
    gaps = []
    for kernel, flags in sorted(seen.items()):
        for flag, values in sorted(flags.items()):
            if (kernel, flag) in ONE_VALUE:
                continue
            if all(isinstance(v, bool) for v in values) and len(values) == 1:
                gaps.append(f"{kernel}.{flag} only {next(iter(values))}")
            elif flag in REQUIRED and not REQUIRED[flag](values):
                gaps.append(f"{kernel}.{flag} only {sorted(values, key=str)}")
    return gaps


def _pair_gaps(seen: Seen) -> list[str]:
    """The pairs of boolean flags of one kernel (the platform's flags of ``ONE_VALUE`` aside) whose
    four combinations are not all compiled by some launch, but those of :data:`INFEASIBLE`: a bug
    in how two features meet shows only where one program has both."""
    gaps = []
    for kernel, flags in sorted(seen.items()):
        programs = [dict(program) for program in flags.get(PROGRAMS, ())]
        names = sorted({name for program in programs for name in program} - {
            flag for (owner, flag) in ONE_VALUE if owner == kernel})
        for a, b in itertools.combinations(names, 2):
            reached = {(program[a], program[b]) for program in programs}
            for va, vb in itertools.product((False, True), repeat=2):
                if (va, vb) not in reached and (a, va, b, vb) not in INFEASIBLE:
                    gaps.append(f"{kernel}: {a}={va} with {b}={vb}")
    return gaps


def _compiled_gaps(seen: Seen) -> list[str]:
    """The arguments of :data:`FROM_CALLER` whose every value fell on one side of Triton's
    specialization: a head-dim stride always 1 (or never), any other always aligned or a multiple
    of 16 (or never)."""
    gaps = []
    for kernel, args in sorted(seen.items()):
        for name, values in sorted(args.items()):
            if not _from_caller(name):
                continue
            if name.startswith("stride_") and name.endswith("d"):
                sides = {value == "1" for value in values}
            else:
                sides = {value in ("aligned", "multiple of 16") for value in values}
            if len(sides) == 1:
                gaps.append(f"{kernel}.{name} only {sorted(values)}")
    return gaps


@pytest.mark.parametrize("grid_set, interpret", [(CPU_GRIDS, True), (GPU_GRIDS, False)],
                         ids=["cpu_grids", "gpu_grids"])
def test_grids_reach_every_specialization(grid_set, interpret):
    seen = specializations(grid_set, interpret)
    assert set(seen) >= {"_flash_forward_kernel", "_backward_dkdv_kernel", "_backward_dq_kernel",
                         "_split_kv_kernel", "_merge_kernel"}, sorted(seen)
    gaps = _gaps(seen) + _pair_gaps(seen) + ([] if interpret else _compiled_gaps(seen))
    assert not gaps, "specializations no case of the grids compiles: " + "; ".join(gaps)


def test_dry_launches_record_and_restore():
    """The spy sees a launch's flags, and afterwards the kernels launch for real again."""
    q = torch.randn(1, 17, 16, device=DEVICE)
    with dry_launches() as seen, torch.no_grad():
        flash.attention(q, q, q, True)
    assert seen["_flash_forward_kernel"]["HAS_RIGHT"] == {True}
    assert "run" not in vars(forward._flash_forward_kernel)
    with torch.no_grad():
        o = flash.attention(q, q, q, False)
    assert torch.allclose(o, torch.softmax(q @ q.mT / 4, -1) @ q, atol=1e-5)


def fuzz_draws(strategy, n: int) -> list:
    """``n`` derandomized draws of a Hypothesis strategy (the same draws on every run)."""
    from hypothesis import HealthCheck, Phase, given, settings

    drawn = []

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(strategy)
    def collect(case):
        drawn.append(case)

    collect()
    return drawn


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.test_specializations [--fuzz N]``: each kernel's flags as the grids reach
    them, and as N dense and N packed fuzz draws (every feature) of each size reach them."""
    import argparse

    from fuzz import strategies

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--fuzz", type=int, default=0, metavar="N")
    args = parser.parse_args(argv)
    sets = [("cpu grids", CPU_GRIDS, True), ("gpu grids", GPU_GRIDS, False)]
    for size in (strategies.CPU_QUICK, strategies.CPU, strategies.GPU) if args.fuzz else ():
        dense = fuzz_draws(strategies.cases(size=size, features=flash.FEATURES), args.fuzz)
        packed = fuzz_draws(strategies.varlen_cases(size=size, features=flash.FEATURES), args.fuzz)
        sets.append((f"fuzz {size.name}", ((flash, lambda d=dense + packed: d, True),),
                     size is not strategies.GPU))
    for name, grid_set, interpret in sets:
        seen = specializations(grid_set, interpret)
        gaps = _gaps(seen) + _pair_gaps(seen) + ([] if interpret else _compiled_gaps(seen))
        print(f"{name}: gaps {gaps or 'none'}")
        for kernel, flags in sorted(seen.items()):
            shown = {flag: sorted(values, key=str) for flag, values in flags.items() if flag.isupper()}
            print(f"  {kernel} {shown}")


if __name__ == "__main__":
    main()
