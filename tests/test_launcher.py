"""The launcher's host-side geometry: slice offsets and the alignment promised to the compiler.

A wrong offset table computes the wrong slice (the oracle checks catch that); a wrong alignment
claim only misbehaves on a GPU, as misaligned vector loads. Both are plain functions of shapes and
strides, so they are tested here directly, on every layout the suite builds.
"""

import itertools

import pytest
import torch

from flash.forward import offset_alignment, slice_offsets
from properties.case import LAYOUTS, Case


def _direct_offsets(t: torch.Tensor) -> list[int]:
    """Each slice's first element, relative to ``t``'s, read off the slices themselves."""
    return [t[index].storage_offset() - t.storage_offset()
            for index in itertools.product(*(range(size) for size in t.shape[:-2]))]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_slice_offsets_match_the_slices(layout):
    q, k, v = Case(5, 7, 24, (2, 3), "float32", False, layout).make_qkv("cpu")
    for t in (q, k, v):
        assert slice_offsets(t).tolist() == _direct_offsets(t)


def test_slice_offsets_are_cached_per_layout():
    a, b = torch.zeros(2, 3, 5, 8), torch.ones(2, 3, 5, 8)
    assert slice_offsets(a) is slice_offsets(b)
    assert slice_offsets(torch.zeros(5, 8)).tolist() == [0]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n, d", [(5, 24), (64, 64), (7, 20), (3, 16)])
def test_offset_alignment_divides_every_offset_and_is_the_largest(layout, n, d):
    tensors = Case(n, n + 2, d, (2, 3), "float16", False, layout).make_qkv("cpu")
    align = offset_alignment(*tensors)
    offsets = [o for t in tensors for o in _direct_offsets(t)]
    assert align in (1, 2, 4, 8, 16)
    assert all(o % align == 0 for o in offsets)
    if align < 16:  # the claim is tight: twice as much would be false for some slice
        assert any(o % (2 * align) for o in offsets)


def test_offset_alignment_of_known_layouts():
    assert offset_alignment(torch.zeros(2, 3, 64, 64)) == 16
    assert offset_alignment(torch.zeros(64, 64)) == 16  # one slice: offset 0
    assert offset_alignment(torch.zeros(3, 64, 64).expand(2, 3, 64, 64)) == 16  # stride 0 ignored
    assert offset_alignment(torch.zeros(5, 2, 24).transpose(0, 1)) == 8  # [n, b, d]: stride d = 24
    gapped = Case(5, 5, 8, (2,), "float32", False, "gapped").make_qkv("cpu")[0]
    assert offset_alignment(gapped) == 1  # slices 43 elements apart
