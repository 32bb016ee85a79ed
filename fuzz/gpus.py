"""Every GPU of a machine: one GPU per pytest-xdist worker and per ``fuzz run`` worker.

A worker process is pinned by setting ``CUDA_VISIBLE_DEVICES`` to one device before anything in it
touches CUDA, so that ``cuda`` and ``cuda:0`` mean its card. Worker ``i`` (``gw<i>`` under
pytest-xdist, the ``i``-th of ``python -m fuzz run --workers N``) gets visible device
``i % count``: ``pytest -m gpu -n 16`` on 8 GPUs puts two workers on each card. Visible devices
are those of the parent's ``CUDA_VISIBLE_DEVICES`` when it is set (``4,5,6,7`` pins worker 1 to
``5``), else ``0 .. count - 1``. With 0 or 1 visible GPU nothing is set: a CPU run and a one-GPU
run are what they were.

The cap, ``--max-workers-per-gpu K`` (pytest and ``fuzz run``) or ``FLASH_WORKERS_PER_GPU=K``:
asking for more than ``K x GPUs`` workers is a usage error that names both numbers, before any
worker starts (a card holds only so many processes' caches: 21 on one H200 ran it out of memory).
Unset, there is no cap; without a GPU the cap is not checked.

Counting the devices must not start CUDA in the counting process: once the CUDA driver is
initialised (``torch.cuda.is_available()`` does that through ``cudaGetDeviceCount``), a later
change to ``CUDA_VISIBLE_DEVICES`` has no effect there. So :func:`visible_device_count` asks NVML
(``torch.cuda._device_count_nvml``, which applies ``CUDA_VISIBLE_DEVICES`` as CUDA would), and only
where NVML cannot answer (no ``libnvidia-ml``, MIG device names) starts a child Python to ask CUDA
(seconds, once per worker).
``nvidia-smi -L`` would be no better a fallback: it is NVML too, and ignores ``CUDA_VISIBLE_DEVICES``.
On a ROCm build of PyTorch nothing is pinned (``HIP_VISIBLE_DEVICES`` rules there).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Callable, Mapping, MutableMapping

__all__ = [
    "CAP_ENV",
    "env_cap",
    "gpu_for_worker",
    "parse_cap",
    "pin_xdist_worker",
    "too_many_workers",
    "visible_device_count",
    "visible_devices",
    "worker_devices",
    "xdist_worker_index",
]

CAP_ENV = "FLASH_WORKERS_PER_GPU"
"""At most this many workers per visible GPU (see the module docstring); unset: no cap."""

VISIBLE = "CUDA_VISIBLE_DEVICES"


def xdist_worker_index(name: str | None) -> int | None:
    """The index in a pytest-xdist worker name (``PYTEST_XDIST_WORKER``: ``gw3`` -> 3); None when
    this is not such a worker (unset, or a worker given its own id through ``--tx ...//id=``)."""
    match = re.fullmatch(r"gw(\d+)", name or "")
    return int(match.group(1)) if match else None


def gpu_for_worker(worker_index: int, device_count: int, per_gpu_cap: int | None = None) -> int | None:
    """The visible device (0-based) that worker ``worker_index`` runs on, or None for "leave it":
    with 0 or 1 device there is nothing to choose. Raises ValueError when the worker is beyond
    ``per_gpu_cap`` workers on every device."""
    if per_gpu_cap is not None and device_count > 0 and worker_index >= per_gpu_cap * device_count:
        raise ValueError(f"worker {worker_index} is past {per_gpu_cap} per GPU on {device_count} GPU(s)")
    if device_count <= 1:
        return None
    return worker_index % device_count


def env_cap() -> str | None:
    """``$FLASH_WORKERS_PER_GPU`` as written: the default of ``--max-workers-per-gpu``, which
    :func:`parse_cap` then reads."""
    return os.environ.get(CAP_ENV)


def parse_cap(value: str | int | None) -> int | None:
    """``--max-workers-per-gpu`` / ``$FLASH_WORKERS_PER_GPU`` as a positive int (None when unset);
    an ``argparse`` type, so that its error reads as the option's."""
    if value is None or value == "":
        return None
    try:
        cap = int(value)
    except ValueError:
        cap = 0
    if cap < 1:
        raise argparse.ArgumentTypeError(f"workers per GPU: a whole number of at least 1, not {value!r}")
    return cap


def too_many_workers(workers: int | None, per_gpu_cap: int | None,
                     device_count: Callable[[], int] | None = None) -> str | None:
    """What is wrong with ``workers`` processes under ``per_gpu_cap`` per visible GPU, or None when
    nothing is (no cap, no workers asked for, no GPU). Counts the GPUs only when there is a cap."""
    if not per_gpu_cap or not isinstance(workers, int) or workers < 1:
        return None
    count = (device_count or visible_device_count)()
    room = per_gpu_cap * count
    if count < 1 or workers <= room:
        return None
    return (f"{workers} workers asked for, but {count} visible GPU(s) at {per_gpu_cap} per GPU "
            f"(--max-workers-per-gpu / ${CAP_ENV}) take {room}: ask for {room} or fewer")


def visible_devices(env: Mapping[str, str], device_count: int) -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` value that selects each of the ``device_count`` devices this
    process sees: the entries of its own ``CUDA_VISIBLE_DEVICES`` (ordinals or UUIDs, which CUDA
    reads up to the first invalid one), or ``0 .. device_count - 1`` when it is unset."""
    value = env.get(VISIBLE)
    if value is None:
        return [str(i) for i in range(device_count)]
    return [entry.strip() for entry in value.split(",") if entry.strip()][:device_count]


def visible_device_count() -> int:
    """How many CUDA devices this process would see, counted without initialising CUDA here (see
    the module docstring); 0 on a PyTorch without CUDA, on ROCm, or when nothing answers."""
    import torch

    if not torch.cuda._is_compiled() or torch.version.hip:
        return 0
    if torch.cuda.is_initialized():
        return torch.cuda.device_count()  # too late to pin this process, but the count is right
    try:
        with warnings.catch_warnings():  # "Can't initialize NVML": the child below answers instead
            warnings.simplefilter("ignore")
            count = torch.cuda._device_count_nvml()  # private; its absence only sends us to the child
    except Exception:  # noqa: BLE001 - any failure of the quick way falls back to the sure one
        count = -1
    return count if count >= 0 else _device_count_in_child()


def _device_count_in_child() -> int:
    # CUDA may initialise in the child: this process stays free to be pinned.
    probe = "import torch; print(torch.cuda.device_count())"
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
        return int(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else 0
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return 0


def worker_devices(workers: int, *, env: Mapping[str, str] | None = None,
                   device_count: Callable[[], int] | None = None) -> list[str | None]:
    """For each of ``workers`` worker processes, the ``CUDA_VISIBLE_DEVICES`` to start it with, or
    None to leave its environment as it is (all None with 0 or 1 visible GPU)."""
    env = os.environ if env is None else env
    devices = visible_devices(env, (device_count or visible_device_count)())
    chosen = [gpu_for_worker(i, len(devices)) for i in range(workers)]
    return [None if gpu is None else devices[gpu] for gpu in chosen]


def pin_xdist_worker(env: MutableMapping[str, str] | None = None,
                     device_count: Callable[[], int] | None = None) -> str | None:
    """In a pytest-xdist worker on a machine with several visible GPUs, set ``CUDA_VISIBLE_DEVICES``
    to this worker's one device and return it; elsewhere change nothing and return None. Call it
    before anything touches CUDA (the suite's ``conftest.py`` does, on import)."""
    env = os.environ if env is None else env
    index = xdist_worker_index(env.get("PYTEST_XDIST_WORKER"))
    if index is None:
        return None
    devices = visible_devices(env, (device_count or visible_device_count)())
    gpu = gpu_for_worker(index, len(devices))
    if gpu is None:
        return None
    env[VISIBLE] = devices[gpu]
    return devices[gpu]


CACHED_LIMIT = 1 << 30
"""Bytes of cached, unused GPU memory a test process may keep between tests
(:func:`release_cached_memory`)."""


def release_cached_memory(limit: int = CACHED_LIMIT, cuda: object | None = None) -> bool:
    """Give the blocks PyTorch's caching allocator holds unused back to the driver, when they pass
    ``limit`` bytes; return whether it did. Never starts CUDA (a process that has not used it has
    nothing cached).

    Workers that share a card each keep, after a test, the memory of the largest test they ran:
    the cache frees nothing by itself. On one H200 (2026-12-03), twelve workers of ``pytest -m gpu``
    beside the sanitizer held 7-20 GiB each, the card was full, and 7 tests failed with CUDA out
    of memory (asking for 20-130 MiB). The suite's ``conftest.py`` calls this after every test
    in a pytest-xdist worker; a test that needs the memory again gets it back from the driver (slower by
    a ``cudaMalloc``, not wrong). With it, the same suite alone on the card (2026-12-03, twelfth
    session) peaked at 52.6 GiB in use, sampled every 20 s, and passed in 656 s (it took 675-690 s
    before, beside the sanitizer).
    """
    if cuda is None:
        import torch

        cuda = torch.cuda
    if not cuda.is_initialized():
        return False
    if cuda.memory_reserved() - cuda.memory_allocated() <= limit:
        return False
    cuda.empty_cache()
    return True
