"""Run a launch's programs in a shuffled order in Triton's interpreter, as a GPU may.

A GPU runs the programs of a launch in any order, side by side; Triton's interpreter runs them one
after the other, in launch order (program 0, 1, 2, ...). A kernel whose programs write outside
what they own (a store that misses its row mask writes the next slice's first rows, a split's
partials overlap the next split's slot) is then right on the CPU by accident: the program that
owns those rows runs later and writes over the stray values. On a GPU the order varies, and the
output with it.

:func:`install` makes the interpreter run each launch's programs in a fixed shuffled order
instead: the program ids along each grid axis are permuted (seeded by the axis' size, so a run
replays exactly), every program still runs once. A kernel that is right in every order is right
in this one; one that depends on order shows it in about half the pairs of programs that touch
the same memory, in either direction. :func:`properties.kernels.load_kernel` installs it, so the
suite, ``python -m fuzz`` and its worker processes all run shuffled; ``FLASH_PROGRAM_ORDER=launch``
(or pytest's ``--program-order launch``) keeps Triton's order, for debugging.

Programs still run one at a time: a race inside one moment (two programs reading what the other
writes) is the memory sanitizer's and the GPU suite's to find, not this.
"""

from __future__ import annotations

import functools
import os
import random

ORDERS = ("shuffled", "launch")
"""``shuffled``: each grid axis in a fixed pseudo-random order; ``launch``: Triton's own, 0, 1, 2, ..."""
ENV = "FLASH_PROGRAM_ORDER"
"""The environment variable that picks the order (default ``shuffled``); spawned processes inherit it."""


@functools.lru_cache(maxsize=256)
def permutation(n: int) -> tuple[int, ...]:
    """The order in which the ``n`` programs along one grid axis run: fixed for each ``n``."""
    order = list(range(n))
    random.Random(n).shuffle(order)
    return tuple(order)


def install(order: str | None = None) -> bool:
    """Make Triton's interpreter run programs in ``order`` (default: ``$FLASH_PROGRAM_ORDER``, else
    shuffled); returns whether the shuffled order is now in effect.

    Changes nothing where Triton has no interpreter builder of the known shape (another Triton).
    Idempotent; harmless where kernels are compiled (the interpreter is then never used).
    """
    order = order or os.environ.get(ENV) or "shuffled"
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    # Importing Triton decorates its own library (tl.zeros, tl.max, ...) as interpreted or compiled
    # by TRITON_INTERPRET at that moment. Imported here first, before a kernel module has made that
    # choice (flash._runtime does, on a machine without CUDA), the library stayed compiled-only and
    # every interpreted kernel calling it failed: `python -m fuzz repro ... --kernel flash` and
    # `python -m properties --kernel flash` failed every check on the CPU ("Cannot call
    # @triton.jit'd outside of the scope of a kernel"). So the same choice, made here first: without
    # CUDA Triton kernels can only run interpreted; an explicit setting either way is kept.
    if "TRITON_INTERPRET" not in os.environ:
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = getattr(interpreter, "interpreter_builder", None)
    cls = type(builder)
    if builder is None or not hasattr(cls, "set_grid_idx") or not hasattr(cls, "set_grid_dim"):
        return False
    original = getattr(cls, "_launch_order_set_grid_idx", None)
    if original is None:
        original = cls._launch_order_set_grid_idx = cls.set_grid_idx
    if order == "launch":
        cls.set_grid_idx = original
        return False

    def set_grid_idx(self, x: int, y: int, z: int) -> None:
        nx, ny, nz = self.grid_dim
        original(self, permutation(nx)[x], permutation(ny)[y], permutation(nz)[z])

    cls.set_grid_idx = set_grid_idx
    return True
