"""flash's replay of a recorded call (:mod:`flash.replay`): the same bits as the full call, or no replay.

A replay skips the checks, the tables and Triton's specialization, so its failure modes are its
own: a signature that misses something a launch depends on (a layout, an alignment, an option's
type) replays another call's launch; a role substituted wrongly computes from the wrong tensor;
a recording that holds a tensor keeps the caller's memory alive. Each test makes one of these
visible. The CPU runs replay through ``kernel[grid]`` (the interpreter compiles nothing); the GPU
test also runs the compiled kernels' own launchers, which only a GPU has.
"""

import gc
import math
import weakref

import pytest
import torch
import triton

import flash
from flash import replay

# (q shape, k/v shape, options): the split-KV path (GQA, and with every feature), the forward path.
CALLS = [
    pytest.param((2, 4, 1, 32), (2, 2, 300, 32), dict(split_keys=64), id="split-gqa"),
    pytest.param((1, 2, 3, 16), (1, 2, 70, 16),
                 dict(is_causal=True, window=(20, 3), softcap=5.0, causal_alignment="bottom_right",
                      split_keys=16), id="split-features"),
    pytest.param((2, 4, 33, 24), (2, 2, 70, 24), dict(scale=0.3), id="forward-gqa"),
    pytest.param((2, 17, 16), (2, 40, 16), dict(is_causal=True, window=(9, -1)), id="forward-features"),
]
GPU_CALLS = [
    pytest.param((4, 32, 1, 128), (4, 8, 4096, 128), {}, id="decode-4096"),
    pytest.param((2, 8, 3, 64), (2, 8, 20000, 64), dict(is_causal=True, causal_alignment="bottom_right",
                                                         window=(5000, 0)), id="decode-window"),
    pytest.param((2, 8, 1000, 128), (2, 8, 1000, 128), dict(is_causal=True), id="forward"),
]


@pytest.fixture(autouse=True)
def _fresh_recordings():
    replay.forget()
    yield
    replay.forget()


def _full_call(q, k, v, options):
    """The call without replay: checks, tables and launches in full."""
    with replay.disabled():
        return flash.attention_with_lse(q, k, v, **options)


def _check_replay_matches(shape_q, shape_kv, options, device, dtype):
    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(shape, generator=gen, device=device, dtype=dtype)
               for shape in (shape_q, shape_kv, shape_kv))
    flash.attention_with_lse(q, k, v, **options)  # records
    assert len(replay._RECORDINGS) == 1
    for t in (q, k, v):  # new values in the same tensors: the same signature, so a replay
        t.copy_(torch.randn(t.shape, generator=gen, device=device, dtype=dtype) * 3)
    o, lse = flash.attention_with_lse(q, k, v, **options)
    assert len(replay._RECORDINGS) == 1, "the second call did not replay the first"
    o_full, lse_full = _full_call(q, k, v, options)
    assert torch.equal(o, o_full), f"replayed o differs by {(o - o_full).abs().max().item()}"
    assert torch.equal(lse, lse_full), f"replayed lse differs by {(lse - lse_full).abs().max().item()}"


@pytest.mark.parametrize("shape_q, shape_kv, options", CALLS)
def test_replay_matches_the_full_call(shape_q, shape_kv, options):
    _check_replay_matches(shape_q, shape_kv, options, "cpu", torch.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("shape_q, shape_kv, options", GPU_CALLS + CALLS)
def test_replay_matches_the_full_call_on_gpu(shape_q, shape_kv, options, dtype):
    _check_replay_matches(shape_q, shape_kv, options, "cuda", dtype)
    (recording,) = replay._RECORDINGS.values()
    if triton.__version__.startswith(replay.DIRECT_TRITON):  # the compiled launchers ran, not Triton's
        assert all(launch.kwargs == {} for launch in recording.launches)


def test_a_new_layout_is_a_new_signature():
    """k in two layouts at one address (same shape, same alignment, other strides): two signatures,
    and the second call reads its own layout."""
    q, v = (torch.randn(2, 3, 9, 16) for _ in range(2))
    values = torch.randn(2, 3, 9, 16)
    storage = torch.empty(values.numel())
    k_a = storage.view(2, 3, 9, 16)
    k_b = storage.view(3, 2, 9, 16).transpose(0, 1)  # batch and heads swapped in memory
    assert k_a.data_ptr() == k_b.data_ptr() and k_a.stride() != k_b.stride()
    k_a.copy_(values)
    o_a, _ = flash.attention_with_lse(q, k_a, v)
    k_b.copy_(values)
    o_b, _ = flash.attention_with_lse(q, k_b, v)
    assert torch.equal(o_a, o_b), "a call with another k layout replayed the first layout's launch"
    assert len(replay._RECORDINGS) == 2


@pytest.mark.parametrize("first, second", [
    (((9, 16), (7, 16)), ((5, 16), (7, 16))),
    (((9, 16), (7, 16)), ((9, 16), (12, 16))),
    (((2, 9, 16), (2, 7, 16)), ((3, 9, 16), (3, 7, 16))),
], ids=["q-rows", "kv-rows", "batch"])
def test_a_new_shape_with_the_same_strides_is_a_new_signature(first, second):
    """Another shape whose strides are the same (rows of a 2-D input, a leading dim): the grid,
    the lengths and the tables differ, so a replay of the first call would compute the wrong
    attention for the second."""
    def aligned(shape):  # at an address 256-aligned, as every input here: only the shape differs
        buffer = torch.empty(math.prod(shape) + 64)
        start = (-buffer.data_ptr() % 256) // buffer.element_size()
        return buffer[start:start + math.prod(shape)].view(shape).normal_()

    for shape_q, shape_kv in (first, second):
        q, k, v = aligned(shape_q), aligned(shape_kv), aligned(shape_kv)
        o, lse = flash.attention_with_lse(q, k, v, is_causal=True)
    assert q.stride() == torch.empty(first[0]).stride() and k.stride() == torch.empty(first[1]).stride()
    o_full, lse_full = _full_call(q, k, v, dict(is_causal=True))
    assert torch.equal(o, o_full) and torch.equal(lse, lse_full), \
        "a call of another shape with the same strides replayed the first call's launch"
    assert len(replay._RECORDINGS) == 2


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_a_misaligned_view_is_a_new_signature(which):
    """One input 4 bytes off its usual alignment: Triton specializes on 16-byte alignment, so this
    is another signature (a replay would run a kernel compiled for an aligned pointer)."""
    base = torch.randn(2 * 9 * 16 + 1)
    aligned, off = base[:-1].view(2, 9, 16), base[1:].view(2, 9, 16)
    qkv = dict(q=aligned, k=aligned, v=aligned)
    assert replay.signature(*qkv.values()) != replay.signature(*{**qkv, which: off}.values())


@pytest.mark.parametrize("recorded, bad, error", [
    (dict(scale=1.0), dict(scale=True), TypeError),
    (dict(is_causal=True), dict(is_causal=1), TypeError),
    (dict(window=(2, 2)), dict(window=(2, 2.0)), TypeError),
    (dict(softcap=1), dict(softcap=float("inf")), ValueError),
    (dict(split_keys=16), dict(split_keys=16.0), TypeError),
])
def test_bad_options_still_raise_after_a_good_call(recorded, bad, error):
    """The checks are skipped only for a recorded signature: an option equal to a recorded one but
    of another type (``True == 1.0``) is another signature, and is checked."""
    q, k, v = (torch.randn(1, 5, 16) for _ in range(3))
    flash.attention(q, k, v, **recorded)
    flash.attention(q, k, v, **recorded)
    with pytest.raises(error):
        flash.attention(q, k, v, **bad)


def test_a_recording_keeps_no_tensor_alive():
    q, k, v = (torch.randn(1, 2, 1, 16) for _ in range(3))
    refs = [weakref.ref(t) for t in (q, k, v)]
    o, lse = flash.attention_with_lse(q, k, v, split_keys=16)
    refs += [weakref.ref(o), weakref.ref(lse)]
    del q, k, v, o, lse
    gc.collect()
    assert len(replay._RECORDINGS) == 1
    assert all(ref() is None for ref in refs), "a recording holds an input or an output"


def test_calls_that_need_a_graph_still_get_gradients():
    """A call whose inputs need no grad skips autograd (flash.function); one whose inputs do keeps
    it, also when its signature replays."""
    q, k, v = (torch.randn(1, 2, 1, 16) for _ in range(3))
    assert flash.attention(q, k, v, split_keys=16).grad_fn is None
    q.requires_grad_(True)
    for _ in range(2):
        o = flash.attention(q, k, v, split_keys=16)
        assert o.grad_fn is not None
        o.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


@pytest.mark.parametrize("scratch_size, tma_flag, needs", [
    (0, True, False),  # the compiled kernel's own word wins over the flag...
    (256, False, True),  # ...both ways
    (None, True, True),  # no compiled kernel (the interpreter): the flag stands in
    (None, False, False),
])
def test_a_recording_needs_scratch_when_the_compiled_kernel_does(scratch_size, tma_flag, needs):
    # Triton's launcher asks for scratch memory (for tensor descriptors built on the device) when
    # the compiled kernel's metadata says so; a replay from a thread with no allocator must set one.
    compiled = None if scratch_size is None else \
        type("Compiled", (), {"metadata": type("Meta", (), {"global_scratch_size": scratch_size})()})()
    assert replay._needs_scratch(compiled, {"TMA": tma_flag}) is needs
