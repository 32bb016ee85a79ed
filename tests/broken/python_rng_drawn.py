"""Kernel module with one bug: it samples one call in a hundred for its timing log, with Python's
global ``random`` (``random.random() < 0.01``), so every call advances the caller's Python random
state. Every bit of every output is right.

What it breaks is the caller's reproducibility: a data pipeline that shuffles or augments with
``random`` after ``random.seed(0)`` sees another sequence, depending on how many attention calls
came before. Smallest input that shows it: ``random.getstate()`` before and after one call.
"""

import random
import time

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]

SAMPLED: list[float] = []
"""The sampled calls' host times (kept to the last 100)."""


def _timed(call, *args, **kwargs):
    if random.random() >= 0.01:  # the bug: the caller's generator, not a random.Random of its own
        return call(*args, **kwargs)
    start = time.perf_counter()
    result = call(*args, **kwargs)
    SAMPLED[:] = [*SAMPLED[-99:], time.perf_counter() - start]
    return result


def attention(q, k, v, is_causal=False, **features):
    return _timed(conforming.attention, q, k, v, is_causal, **features)


def attention_with_lse(q, k, v, is_causal=False, **features):
    return _timed(conforming.attention_with_lse, q, k, v, is_causal, **features)
