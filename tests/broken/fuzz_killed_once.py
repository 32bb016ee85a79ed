"""Kernel module whose process is killed by SIGKILL on its first call, as the host's OOM killer does
to one process of a crowded machine; then (and in ``attention_with_lse`` always) the correct kernel.

``FLASH_TEST_KILL_STATE``: a directory where the first call leaves its mark (each call kills while
the mark is absent); ``FLASH_TEST_KILL_ALWAYS=1`` kills on every call instead. ``fuzz.isolation``
must run such a case again in a fresh worker and give that run's verdict (``tests/test_isolation.py``).
"""

import os
import pathlib
import signal

import torch

import flash


def _maybe_killed() -> None:
    mark = pathlib.Path(os.environ["FLASH_TEST_KILL_STATE"]) / "killed"
    if os.environ.get("FLASH_TEST_KILL_ALWAYS") == "1" or not mark.exists():
        mark.touch()
        os.kill(os.getpid(), signal.SIGKILL)


def attention_with_lse(q, k, v, is_causal=False):
    return flash.attention_with_lse(q, k, v, is_causal)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False):
    _maybe_killed()
    return flash.attention(q, k, v, is_causal)
