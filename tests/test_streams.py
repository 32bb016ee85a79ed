"""The CPU-side part of ``check_current_stream`` (``properties/streams.py``) and
``check_varlen_current_stream``: the twins their side-stream calls read are laid out exactly as the
case's inputs (so the two calls compared are the same call), NaN (offsets 0) until the copies they
queue fill them with the inputs' values. The checks themselves run on CUDA only (``pytest -m gpu``;
their broken modules: ``tests/test_broken_kernels.py``)."""

import pytest
import torch

from properties._common import memory_of, nan_twins
from properties.case import LAYOUTS, Case
from properties.varlen_case import VARLEN_LAYOUTS, VarlenCase


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


@pytest.mark.parametrize("layout", VARLEN_LAYOUTS)
def test_packed_twins_hold_nan_and_empty_offsets_until_filled(layout):
    """``check_varlen_current_stream``'s twins: q, k, v NaN and ``cu_seqlens`` all 0 (every sequence
    empty, so a kernel that reads them too early stays in bounds) until the copies fill them."""
    x = VarlenCase((5, 0, 7), (4, 3, 9), 2, 16, "float32", True, layout, seed=2).make_qkv("cpu")
    inputs = {"q": x.q, "k": x.k, "v": x.v, "cu_seqlens_q": x.cu_seqlens_q, "cu_seqlens_k": x.cu_seqlens_k}
    twins, fills = nan_twins(inputs)
    for name in ("q", "k", "v"):
        assert bool(torch.isnan(twins[name]).all()), name
    for name in ("cu_seqlens_q", "cu_seqlens_k"):
        assert twins[name].dtype == torch.int32 and not twins[name].any(), name
    for source, twin in fills:
        twin.copy_(source)
    for name, t in inputs.items():
        assert (twins[name].shape, twins[name].stride()) == (t.shape, t.stride()), name
        assert torch.equal(twins[name], t), name
