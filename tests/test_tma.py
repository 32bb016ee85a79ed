"""The forward's tensor-descriptor (TMA) read path: when it is taken, and that it computes what the
pointer path computes.

The suite's oracle checks run both paths (16-bit inputs with a padded head dim of 128 take the
descriptors where the layout allows; the rest take pointers). These tests pin down the choice
itself, which only misbehaves on a GPU if it is wrong (a descriptor over a misaligned base or
stride), and compare the two paths bit for bit with the same tiles: the same arithmetic on the
same tiles must give the same bits, so any difference is a load that read the wrong element.
The interpreter checks a descriptor's alignment as the hardware needs it, and fills what lies past
its shape with zeros, as TMA does.
"""

import threading

import pytest
import torch

import flash
import flash.forward as forward
from flash import replay
from properties.case import LAYOUTS, Case


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("d", [128, 96, 100, 64])
@pytest.mark.parametrize("leading", [(2, 3), (1,)], ids=str)  # one slice: no offset to misalign
def test_tma_is_chosen_only_where_a_descriptor_is_valid(layout, d, leading):
    _, k, v = Case(5, 9, d, leading, "float16", False, layout).make_qkv("cpu")
    eligible = forward.tma_eligible(k, v, forward.padded_head_dim(d))
    size = k.element_size()
    valid = all(t.stride(-1) == 1 and t.stride(-2) > 0 and t.stride(-2) * size % 16 == 0
                and t.data_ptr() % 16 == 0 for t in (k, v)) \
        and all(o * size % 16 == 0 for t in (k, v) for o in forward.slice_offsets(t).tolist())
    if eligible:  # never claimed where some slice's descriptor would be misaligned
        assert valid, f"TMA chosen for {layout}, d={d}: strides {k.stride()}, {v.stride()}"
    assert eligible == (valid and forward.padded_head_dim(d) == 128), (layout, d, valid)


def test_tma_is_not_chosen_for_other_dtypes_or_when_off(monkeypatch):
    for dtype, d in (("float32", 128), ("float16", 256), ("float16", 32)):
        _, k, v = Case(5, 9, d, (2,), dtype).make_qkv("cpu")
        assert not forward.tma_eligible(k, v, forward.padded_head_dim(d)), (dtype, d)
    _, k, v = Case(5, 9, 128, (2,), "float16").make_qkv("cpu")
    assert forward.tma_eligible(k, v, 128)
    base = torch.zeros(2 * 9 * 128 + 4, dtype=torch.float16)
    shifted = base[4:].view(2, 9, 128)  # 8 bytes past an aligned start
    assert not forward.tma_eligible(shifted, v, 128)
    monkeypatch.setattr(forward, "TMA", False)
    assert not forward.tma_eligible(k, v, 128)


FEATURES = [
    dict(is_causal=False),
    dict(is_causal=True),
    dict(is_causal=True, causal_alignment="bottom_right", window=(40, 0)),
    dict(is_causal=False, window=(7, 30), softcap=20.0, scale=0.3),
]


def _forward_both_paths(monkeypatch, q, k, v, tiles=None, **options):
    tiles = dict(block_q=32, block_k=32) if tiles is None else tiles  # {}: the default tiles
    outs = []
    for tma in (True, False):
        monkeypatch.setattr(forward, "TMA", tma)
        replay.forget()
        outs.append(forward.flash_attention_forward(q, k, v, **tiles, **options))
    replay.forget()
    return outs


LAYOUT_PAIRS = [("contiguous", "contiguous"), ("seq_first", "heads_last"), ("heads_last", "contiguous"),
                ("broadcast_kv", "broadcast_kv")]


@pytest.mark.parametrize("options", FEATURES, ids=str)
@pytest.mark.parametrize("d", [128, 96])
@pytest.mark.parametrize("k_layout, v_layout", LAYOUT_PAIRS)
def test_tma_path_matches_the_pointer_path(monkeypatch, options, d, k_layout, v_layout):
    # n_q, n_k not multiples of the tiles: the last key tile reads past n_k (zeros), and d = 96
    # reads past the head dim (zeros) into the padded 128 columns. k and v in two layouts: each
    # descriptor must take its own tensor's strides.
    q, k, _ = Case(70, 77, d, (2, 4), "float16", layout=k_layout, kv_heads=2, seed=3).make_qkv("cpu")
    *_, v = Case(70, 77, d, (2, 4), "float16", layout=v_layout, kv_heads=2, seed=4).make_qkv("cpu")
    assert forward.tma_eligible(k, v, 128)
    (o_tma, lse_tma), (o_ptr, lse_ptr) = _forward_both_paths(monkeypatch, q, k, v, **options)
    assert torch.equal(o_tma, o_ptr), f"o differs by {(o_tma - o_ptr).abs().max().item()}"
    assert torch.equal(lse_tma, lse_ptr), f"lse differs by {(lse_tma - lse_ptr).abs().max().item()}"


@pytest.mark.parametrize("options", FEATURES, ids=str)
def test_default_tiles_do_not_depend_on_the_read_path(monkeypatch, options):
    # Whether the descriptors may read k and v depends on the layout (a slice of a gapped batch
    # alone may, the batch may not), and flash declares BATCH_INVARIANT: so its default tiles, and
    # with them the bits, must be the same on both paths. They were not until 2026-12-05 (128x128
    # through descriptors, 128x64 by pointers; the H200's check_batch_independent found it).
    # 200 keys: more than one key tile of either width.
    q, k, v = Case(97, 200, 96, (1, 2), "float16", seed=5).make_qkv("cpu")
    (o_tma, lse_tma), (o_ptr, lse_ptr) = _forward_both_paths(monkeypatch, q, k, v, tiles={}, **options)
    assert torch.equal(o_tma, o_ptr), f"o differs by {(o_tma - o_ptr).abs().max().item()}"
    assert torch.equal(lse_tma, lse_ptr), f"lse differs by {(lse_tma - lse_ptr).abs().max().item()}"


def test_tma_path_matches_the_pointer_path_packed(monkeypatch):
    # Packed sequences: a descriptor per sequence, so a sequence's last tile reads zeros, never the
    # next sequence's keys. Both paths get the same tiles, so they must agree bit for bit.
    monkeypatch.setattr(forward, "forward_config", lambda *_: forward.ForwardConfig(32, 32, 4, 1))
    gen = torch.Generator().manual_seed(0)
    lens_q, lens_k = [3, 40, 17], [50, 9, 33]
    q = torch.randn(sum(lens_q), 4, 128, generator=gen).half()
    k, v = (torch.randn(sum(lens_k), 2, 128, generator=gen).half() for _ in range(2))
    cu_q = torch.tensor([0, 3, 43, 60], dtype=torch.int32)
    cu_k = torch.tensor([0, 50, 59, 92], dtype=torch.int32)
    outs = []
    for tma in (True, False):
        monkeypatch.setattr(forward, "TMA", tma)
        outs.append(flash.attention_varlen_with_lse(q, k, v, cu_q, cu_k, 40, 50, True,
                                                   causal_alignment="bottom_right", split_keys=0))
    (o_tma, lse_tma), (o_ptr, lse_ptr) = outs
    assert torch.equal(o_tma, o_ptr), f"o differs by {(o_tma - o_ptr).abs().max().item()}"
    assert torch.equal(lse_tma, lse_ptr), f"lse differs by {(lse_tma - lse_ptr).abs().max().item()}"


@pytest.mark.gpu
def test_tma_calls_in_a_new_thread_and_keep_a_user_allocator():
    """Triton's allocator is per thread: a call (and its replay) from a fresh thread must still
    find one, and an allocator the caller set is used, not replaced."""
    from triton.runtime import _allocation

    q, k, v = Case(300, 300, 128, (2, 4), "bfloat16", True).make_qkv("cuda")
    assert forward.tma_eligible(k, v, 128)
    replay.forget()
    expected = flash.attention(q, k, v, True)
    results, errors = [], []

    def worker():
        try:
            results.extend(flash.attention(q, k, v, True) for _ in range(2))  # record, then replay
        except Exception as e:  # noqa: BLE001  (re-raised in the main thread)
            errors.append(e)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors, errors
    assert all(torch.equal(o, expected) for o in results)

    calls = []

    def user_allocator(size, alignment, stream):
        calls.append(size)
        return torch.empty(size, dtype=torch.int8, device="cuda")

    def with_user_allocator():
        import triton

        triton.set_allocator(user_allocator)
        results.append(flash.attention(q, k, v, True))
        results.append(_allocation._allocator.get() is user_allocator)

    thread = threading.Thread(target=with_user_allocator)
    thread.start()
    thread.join()
    assert torch.equal(results[2], expected) and results[3] is True
    assert calls, "the caller's allocator was not used"
