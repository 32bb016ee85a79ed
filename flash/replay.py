"""A dense forward call's host work, done once per call signature and replayed after.

A short call spends more time in Python than on the GPU. Measured on the H200 (docs/speed.md,
"Decoding: host time"), one decode step over 4096 keys: the two split-KV kernels take 45 us of GPU
time, while the host took 130 us to launch them: Triton's launcher specializing some 40 arguments
per launch (26 us and 17 us), the tables, tiles and features recomputed (about 40 us), autograd.
The GPU waited for Python, and the call read the cache at 0.45x cuDNN's speed.

So :func:`flash.forward.flash_attention_forward` records what a call does (a :class:`Recording`):
the tensors it allocates (role, shape, dtype) and each kernel launch (its grid, its arguments, and
which of them are the call's own tensors: q, k, v and those it allocated). A later call with the
same *signature* (:func:`signature`) replays it: the same allocations, then each launch with the
new call's tensors put in their places. On a GPU a launch is then a call of the compiled kernel
(``CompiledKernel[grid](*args)``, as Triton's own tests call it), without Triton's specialization;
in the interpreter (nothing is compiled) it is ``kernel[grid](...)`` again, so the CPU suite runs
the recording, the signature and the substitution on every repeated call.

Why a replay computes what the full call would:

- everything but the call's tensors is a function of the signature: the argument checks passed
  for it (they read only types, shapes, dtypes, devices and the options), and the tables, tiles,
  plans and launch arguments derive from shapes, strides, dtypes and the options;
- Triton compiled each kernel for its arguments' specialization: every int's value (in the
  signature), each tensor's dtype and its data pointer's alignment to 16 bytes. The signature holds
  q's, k's and v's ``data_ptr() % 256``; the tensors a call allocates come from PyTorch's allocator,
  aligned to 256 bytes or more, in every call alike.

``FLASH_REPLAY=0`` in the environment (or :data:`ENABLED` set to ``False``) turns it off: every
call then runs in full. The direct call of compiled kernels is used with the Triton versions it was
measured on (:data:`DIRECT_TRITON`); with others a replay still skips the Python above, and
launches through ``kernel[grid]``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import torch
import triton

from flash._runtime import INTERPRET, ensure_scratch_allocator

__all__ = ["ENABLED", "Recording", "disabled", "empty", "launch", "signature"]

ENABLED: bool = os.environ.get("FLASH_REPLAY", "1") != "0"
"""Replay calls of a recorded signature (``FLASH_REPLAY=0``: never)."""
MAX_SIGNATURES = 256
"""Recordings kept; past that the oldest goes (each holds a few small tables, no input or output)."""
DIRECT_TRITON = ("3.6.",)
"""Triton versions whose ``CompiledKernel[grid]`` takes every argument, constexprs included."""

_RECORDINGS: dict[tuple, Recording] = {}


class _Launch:
    """One recorded launch: ``runner(*head, *tail, **kwargs)``, the head's roles filled per call."""

    __slots__ = ("head", "kwargs", "runner", "tail")

    def __init__(self, runner: Callable, head: tuple, tail: tuple, kwargs: dict[str, Any]):
        self.runner, self.head, self.tail, self.kwargs = runner, head, tail, kwargs

    def __call__(self, tensors: dict[str, torch.Tensor]) -> None:
        self.runner(*[tensors[role] if role else value for role, value in self.head], *self.tail,
                    **self.kwargs)


class Recording:
    """What one call allocated and launched, in order, to be replayed by :meth:`replay`."""

    def __init__(self) -> None:
        self.allocations: list[tuple[str, tuple[int, ...], torch.dtype, torch.device]] = []
        self.launches: list[_Launch] = []
        self.scratch = False
        """Whether a launch needs Triton's scratch allocator (tensor descriptors built on the GPU)."""

    def replay(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
        """Run the recorded call on new inputs; returns every tensor by role (``"o"``, ``"lse"``, ...)."""
        tensors = {"q": q, "k": k, "v": v}
        if self.scratch:
            ensure_scratch_allocator()  # per thread (flash._runtime): this one may not have it yet
        for role, shape, dtype, device in self.allocations:
            tensors[role] = torch.empty(shape, dtype=dtype, device=device)
        for run in self.launches:
            run(tensors)
        return tensors


def signature(q: object, k: object, v: object, *options: object) -> tuple | None:
    """The key under which a dense call is recorded, or ``None``: this call is not replayed.

    Every property of q, k and v that a check or a launch argument reads (type, shapes, strides,
    dtypes, devices, the data pointers' alignment), the current CUDA device (where Triton
    launches), and each option with its type, and its items' (``True`` and ``1`` are different
    calls: the checks accept one and refuse the other). ``None`` when replay is off, an input is not exactly a
    ``torch.Tensor`` (a subclass may behave otherwise). A key with an unhashable option is
    neither found nor kept (:func:`recorded`, :func:`remember`): hashing it here too would cost
    every call a second hash on the hot path.
    """
    if not ENABLED or type(q) is not torch.Tensor or type(k) is not torch.Tensor \
            or type(v) is not torch.Tensor:
        return None
    key = (q.shape, q.stride(), q.dtype, q.device, q.data_ptr() % 256,
           k.shape, k.stride(), k.dtype, k.device, k.data_ptr() % 256,
           v.shape, v.stride(), v.dtype, v.device, v.data_ptr() % 256,
           torch.cuda.current_device() if q.is_cuda else None,
           *[_typed(option) for option in options])
    return key


def _typed(value: object) -> tuple:
    """``value`` with its type, and its items' types (``(2, 2.0) == (2, 2)``, yet a check refuses one)."""
    if isinstance(value, (tuple, list)):
        return type(value), tuple(_typed(item) for item in value)
    return type(value), value


def recorded(key: tuple | None) -> Recording | None:
    """The recording of ``key`` (from :func:`signature`), if a call made one."""
    if key is None:
        return None
    try:
        return _RECORDINGS.get(key)
    except TypeError:  # an unhashable option: such a call is never replayed
        return None


def remember(key: tuple, recording: Recording) -> None:
    """Keep ``recording`` for later calls with ``key``, dropping the oldest past :data:`MAX_SIGNATURES`."""
    try:
        _RECORDINGS[key] = recording
    except TypeError:  # an unhashable option: such a call is never replayed
        return
    if len(_RECORDINGS) > MAX_SIGNATURES:
        _RECORDINGS.pop(next(iter(_RECORDINGS)))


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within this block every call runs in full (checks, tables, launches), as with ``FLASH_REPLAY=0``."""
    global ENABLED
    enabled, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = enabled


def forget() -> None:
    """Drop every recording (tests; or after changing a kernel's source in a live process)."""
    _RECORDINGS.clear()


def empty(recording: Recording | None, role: str, shape: tuple[int, ...], dtype: torch.dtype,
          device: torch.device) -> torch.Tensor:
    """``torch.empty(shape, dtype, device)``, recorded as ``role`` when recording."""
    if recording is not None:
        recording.allocations.append((role, tuple(shape), dtype, device))
    return torch.empty(shape, dtype=dtype, device=device)


def launch(kernel: Any, grid: int, args: tuple, meta: dict[str, Any],
           roles: tuple[str | None, ...], recording: Recording | None) -> None:
    """``kernel[(grid,)](*args, **meta)``, recorded when recording.

    ``roles[i]`` names ``args[i]`` when it is one of the call's tensors (``"q"``, or a role given to
    :func:`empty`), ``None`` when it is the same in every call of the signature (a cached table);
    the arguments past ``roles`` are all the same in every call. The recording holds no tensor of
    a role, so it keeps no input or output alive.
    """
    compiled = kernel[(grid,)](*args, **meta)
    if recording is None:
        return
    recording.scratch = recording.scratch or _needs_scratch(compiled, meta)
    head = tuple((role, None if role else value) for role, value in zip(roles, args))
    rest = tuple(args[len(roles):])
    runner = _direct(kernel, grid, len(args), meta, compiled)
    if runner is not None:
        tail = rest + tuple(meta[name] for name in kernel.arg_names[len(args):])
        recording.launches.append(_Launch(runner, head, tail, {}))
    else:
        recording.launches.append(_Launch(kernel[(grid,)], head, rest, dict(meta)))


def _needs_scratch(compiled: Any, meta: dict[str, Any]) -> bool:
    """Whether the launch asked Triton's launcher for global scratch memory (a kernel that builds
    tensor descriptors on the device does), read from the compiled kernel, not from our own flags:
    a kernel that comes to need scratch by another route is covered too. Where the compiled kernel
    says nothing (the interpreter, another Triton), the kernel's ``TMA`` flag stands in."""
    size = getattr(getattr(compiled, "metadata", None), "global_scratch_size", None)
    if isinstance(size, int):
        return size > 0
    return bool(meta.get("TMA"))


def _direct(kernel: Any, grid: int, n_args: int, meta: dict[str, Any], compiled: Any) -> Callable | None:
    """The compiled kernel's own launcher, when this Triton's is known to take every argument."""
    if INTERPRET or not triton.__version__.startswith(DIRECT_TRITON) or compiled is None:
        return None
    names = getattr(kernel, "arg_names", None)
    if names is None or not hasattr(compiled, "__getitem__") \
            or any(name not in meta for name in names[n_args:]):
        return None
    return compiled[(grid, 1, 1)]
