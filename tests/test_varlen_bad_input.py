# ruff: noqa: E501 (one bad call per line reads as a table, as in tests/test_bad_input.py)
"""Bad arguments to ``flash.attention_varlen`` get a TypeError or ValueError naming the argument.

These test ``flash`` itself (not ``--kernel``): the messages are this project's promise. The
kernel reads ``cu_seqlens`` on the device and trusts it, so every bad offset must be caught before
a launch, or it reads out of bounds.
"""

import pytest
import torch

import flash

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ENTRIES = ["attention_varlen", "attention_varlen_with_lse"]


def t(*shape, dtype=torch.float32, device=DEVICE):
    return torch.randn(*shape, device=device).to(dtype)


def cu(*offsets, dtype=torch.int32, device=DEVICE):
    return torch.tensor(offsets, dtype=dtype, device=device)


# Two sequences: (n_q, n_k) = (3, 2) and (2, 4).
Q, K, V = t(5, 2, 16), t(6, 2, 16), t(6, 2, 16)
CU_Q, CU_K = cu(0, 3, 5), cu(0, 2, 6)
GOOD = (Q, K, V, CU_Q, CU_K, 3, 4)


def _with(**changes):
    names = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")
    return tuple(changes.get(name, value) for name, value in zip(names, GOOD))


BAD = [
    # (arguments, error, message fragment)
    pytest.param(_with(cu_seqlens_q=cu(0, 3, 5, dtype=torch.int64)), TypeError, "cu_seqlens_q .*int32", id="cu-q-int64"),
    pytest.param(_with(cu_seqlens_k=cu(0, 2, 6, dtype=torch.int64)), TypeError, "cu_seqlens_k .*int32", id="cu-k-int64"),
    pytest.param(_with(cu_seqlens_q=cu(0, 3, 5).float()), TypeError, "cu_seqlens_q .*int32", id="cu-q-float"),
    pytest.param(_with(cu_seqlens_q=[0, 3, 5]), TypeError, "cu_seqlens_q", id="cu-q-list"),
    pytest.param(_with(cu_seqlens_q=cu(0, 3, 5)[None]), ValueError, "cu_seqlens_q .*1-D", id="cu-q-2d"),
    pytest.param(_with(cu_seqlens_k=cu(0, 2, 6)[None]), ValueError, "cu_seqlens_k .*1-D", id="cu-k-2d"),
    pytest.param(_with(cu_seqlens_q=cu(1, 3, 5)), ValueError, "cu_seqlens_q .*start at 0", id="cu-q-start"),
    pytest.param(_with(cu_seqlens_k=cu(2, 2, 6)), ValueError, "cu_seqlens_k .*start at 0", id="cu-k-start"),
    pytest.param(_with(cu_seqlens_q=cu(0, 4, 3, 5), cu_seqlens_k=cu(0, 2, 4, 6)), ValueError,
                 "cu_seqlens_q .*non-decreasing", id="cu-q-decreasing"),
    pytest.param(_with(cu_seqlens_k=cu(0, 4, 2, 6), cu_seqlens_q=cu(0, 2, 3, 5)), ValueError,
                 "cu_seqlens_k .*non-decreasing", id="cu-k-decreasing"),
    pytest.param(_with(cu_seqlens_q=cu(0, 3, 4)), ValueError, "cu_seqlens_q .*end at", id="cu-q-end-short"),
    pytest.param(_with(cu_seqlens_k=cu(0, 2, 7)), ValueError, "cu_seqlens_k .*end at", id="cu-k-end-long"),
    pytest.param(_with(cu_seqlens_q=cu(0, 1, 3, 5)), ValueError, "same number of sequences", id="cu-lengths"),
    pytest.param(_with(max_seqlen_q=2), ValueError, "max_seqlen_q", id="max-q-short"),
    pytest.param(_with(max_seqlen_k=3), ValueError, "max_seqlen_k", id="max-k-short"),
    pytest.param(_with(max_seqlen_q=3.0), TypeError, "max_seqlen_q must be an int", id="max-q-float"),
    pytest.param(_with(q=t(5, 32)), ValueError, "q must have shape .*rank 3", id="q-rank-2"),
    pytest.param(_with(q=t(1, 5, 2, 16)), ValueError, "q must have shape .*rank 3", id="q-rank-4"),
    pytest.param(_with(k=t(6, 16)), ValueError, "k must have shape .*rank 3", id="k-rank-2"),
    pytest.param(_with(q=t(5, 3, 16)), ValueError, "heads", id="heads-q"),
    pytest.param(_with(v=t(6, 1, 16)), ValueError, "heads", id="heads-v"),
    pytest.param(_with(k=t(6, 2, 32)), ValueError, "head dim", id="head-dim-k"),
    pytest.param(_with(v=t(6, 2, 8)), ValueError, "head dim", id="head-dim-v"),
    pytest.param(_with(cu_seqlens_k=cu(0, 0, 6), max_seqlen_k=6), ValueError, "sequence 0 has 3 queries and no keys",
                 id="queries-without-keys"),
    # The boundaries of that rule: a lone query, and the last sequence.
    pytest.param(_with(cu_seqlens_q=cu(0, 1, 5), cu_seqlens_k=cu(0, 0, 6), max_seqlen_q=4, max_seqlen_k=6), ValueError,
                 "sequence 0 has 1 queries and no keys", id="one-query-without-keys"),
    pytest.param(_with(cu_seqlens_k=cu(0, 6, 6), max_seqlen_k=6), ValueError, "sequence 1 has 2 queries and no keys",
                 id="last-sequence-without-keys"),
    pytest.param(_with(k=t(6, 2, 16, dtype=torch.float16)), TypeError, "share one dtype", id="dtype-k"),
    pytest.param(_with(v=t(7, 2, 16)), ValueError, "k and v must have the same length", id="length-v"),
    pytest.param(_with(q=t(0, 2, 16), cu_seqlens_q=cu(0, 0, 0)), ValueError, "q is empty", id="q-empty"),
    pytest.param(_with(q=t(5, 2, 16).double()), TypeError, "float64", id="q-float64"),
]


@pytest.mark.parametrize("args, error, message", BAD)
@pytest.mark.parametrize("entry", ENTRIES)
def test_bad_varlen_input_raises(entry, args, error, message):
    with pytest.raises(error, match=message):
        getattr(flash, entry)(*args, False)


@pytest.mark.parametrize("entry", ENTRIES)
def test_good_input_and_empty_query_sequence_are_accepted(entry):
    """The arguments the table above breaks are themselves valid, and so is a sequence with keys
    and no queries (it produces nothing)."""
    getattr(flash, entry)(*GOOD, True)
    getattr(flash, entry)(Q, K, V, cu(0, 0, 5), CU_K, 5, 4, False)


# Without a GPU, the other device is "meta": a tensor with no data, which the check must reject
# before it reads the offsets back.
OTHER_DEVICE = "cpu" if DEVICE == "cuda" else "meta"


@pytest.mark.parametrize("name", ["cu_seqlens_q", "cu_seqlens_k"])
def test_cu_seqlens_on_another_device(name):
    offsets = {"cu_seqlens_q": CU_Q, "cu_seqlens_k": CU_K}[name]
    with pytest.raises(ValueError, match=f"{name} is on {OTHER_DEVICE}"):
        flash.attention_varlen(*_with(**{name: offsets.to(OTHER_DEVICE)}), False)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cu_seqlens_q", "cu_seqlens_k"])
def test_cu_seqlens_on_another_device_is_rejected(name):
    args = _with(**{name: cu(*GOOD[3 if name == "cu_seqlens_q" else 4].tolist(), device="cpu")})
    with pytest.raises(ValueError, match=f"{name} is on cpu, but q is on cuda"):
        flash.attention_varlen(*args, False)
