"""The CPU-side part of ``check_current_stream`` (``properties/streams.py``): the NaN twins its
side-stream calls read are laid out exactly as the case's inputs (so the two calls it compares are
the same call), and the copies it queues fill them with the inputs' values. The check itself runs
on CUDA only (``pytest -m gpu``; its broken module: ``tests/test_broken_kernels.py``)."""

import pytest
import torch

from properties._common import memory_of, nan_twins
from properties.case import LAYOUTS, Case


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_nan_twins_keep_the_layout_and_fill_from_the_inputs(layout, dtype):
    case = Case(9, 13, 24, (2, 2), dtype, True, layout, seed=3)
    q, k, v = case.make_qkv("cpu")
    inputs = {"q": q, "k": k, "v": v, "do": case.make_grad_out("cpu")}
    twins, fills = nan_twins(inputs)
    for name, t in inputs.items():
        twin = twins[name]
        assert (twin.shape, twin.stride(), twin.storage_offset(), twin.dtype) == (
            t.shape, t.stride(), t.storage_offset(), t.dtype), name
        assert twin.untyped_storage().nbytes() == t.untyped_storage().nbytes(), name
        assert bool(torch.isnan(memory_of(twin).view(t.dtype)).all()), f"{name}: not every element NaN"
    for a in inputs:
        for b in inputs:
            shared = inputs[a].untyped_storage().data_ptr() == inputs[b].untyped_storage().data_ptr()
            assert shared == (twins[a].untyped_storage().data_ptr() == twins[b].untyped_storage().data_ptr())
    assert len(fills) == len({t.untyped_storage().data_ptr() for t in inputs.values()})
    for source, twin in fills:
        twin.copy_(source)
    for name, t in inputs.items():
        assert torch.equal(twins[name], t), name
