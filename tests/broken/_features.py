"""The start of the broken modules of the contract's features: :mod:`tests.conforming` (the minimal
conforming module) with one of its named steps replaced, so that step is the only difference.

``variant(name, **steps)`` loads a fresh copy of ``tests/conforming.py`` with the given module-level
steps (``kv_heads``, ``visible``, ``cap``, ``softmax_scale``, ``HIDDEN``) swapped in; the copy's
functions look their steps up at call time, so they use the replacements.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests import conforming


def variant(name: str, **steps) -> ModuleType:
    """A copy of :mod:`tests.conforming`, named ``name``, with ``steps`` replacing its globals."""
    unknown = set(steps) - set(vars(conforming))
    if unknown:
        raise ValueError(f"tests.conforming has no steps {sorted(unknown)}")
    spec = importlib.util.spec_from_file_location(name, conforming.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    vars(module).update(steps)
    return module
