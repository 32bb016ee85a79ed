"""Input validation for the public entry points.

Every problem with the arguments is reported here, before any kernel launch, as a ``TypeError``
(wrong kind of object or dtype) or ``ValueError`` (wrong shape, device or size) that names the
argument and what was expected. A bad shape must never reach the kernel: its pointer arithmetic
trusts the sizes and strides it is given, so a mismatch would read out of bounds instead of failing.
"""

from __future__ import annotations

import math
import numbers

import torch

from flash._runtime import INTERPRET

CAUSAL_ALIGNMENTS = ("top_left", "bottom_right")

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEAD_DIM = 256


def check_inputs(q: object, k: object, v: object, is_causal: object) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``q, k, v, is_causal`` are a valid attention call."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have shape [..., n, d] (rank >= 2), got rank {t.dim()} "
                f"with shape {tuple(t.shape)}"
            )
        if t.dtype not in SUPPORTED_DTYPES:
            raise TypeError(
                f"{name} has dtype {t.dtype}; supported dtypes are float16, bfloat16 and float32"
            )
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")
    assert isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)

    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(
            f"q, k and v must share one dtype, got q {q.dtype}, k {k.dtype}, v {v.dtype}"
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k and v must be on one device, got q on {q.device}, k on {k.device}, "
            f"v on {v.device}"
        )
    if q.device.type != "cuda" and not INTERPRET:
        raise ValueError(
            f"q is on {q.device}, but the compiled kernel needs CUDA tensors "
            "(set TRITON_INTERPRET=1 before importing flash to run on the CPU)"
        )
    if not (q.shape[:-3] == k.shape[:-3] == v.shape[:-3]) or not q.dim() == k.dim() == v.dim():
        raise ValueError(
            "q, k and v must have the same leading dims [...] before the heads, got "
            f"q {tuple(q.shape[:-2])}, k {tuple(k.shape[:-2])}, v {tuple(v.shape[:-2])} "
            "(broadcast with .expand() first: it costs no copy)"
        )
    if q.dim() >= 3:
        h_q, h_k, h_v = q.shape[-3], k.shape[-3], v.shape[-3]
        if h_k != h_v:
            raise ValueError(f"k and v must have the same number of heads (dim -3), got k {h_k} "
                             f"and v {h_v}")
        if h_q % h_k if h_k else h_q:  # (0 heads everywhere is the zero-size error below)
            raise ValueError(
                f"q's heads (dim -3) must be a multiple of k's and v's (grouped-query attention: "
                f"query head h uses kv head h // (h_q // h_kv)), got q {h_q} and k, v {h_k}"
            )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length n_k, got k {k.shape[-2]} and v {v.shape[-2]}"
        )
    if not (q.shape[-1] == k.shape[-1] == v.shape[-1]):
        raise ValueError(
            f"q, k and v must have the same head dim d, got q {q.shape[-1]}, "
            f"k {k.shape[-1]}, v {v.shape[-1]}"
        )
    d = q.shape[-1]
    if not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head dim d = q.shape[-1] must be in [1, {MAX_HEAD_DIM}], got {d}")
    if q.shape[-2] == 0:
        raise ValueError(f"q is empty: n_q = q.shape[-2] must be >= 1, got shape {tuple(q.shape)}")
    if k.shape[-2] == 0:
        raise ValueError(f"k is empty: n_k = k.shape[-2] must be >= 1, got shape {tuple(k.shape)}")
    if q.numel() == 0:
        raise ValueError(f"q has a zero-size leading dim: shape {tuple(q.shape)}")


def check_features(scale: object, window: object, softcap: object, causal_alignment: object) -> None:
    """Raise ``TypeError``/``ValueError`` unless the feature arguments are valid (``properties/kernels.py``).

    ``scale``: ``None`` or a finite real number; ``window``: ``None`` or a pair of ints, each ``>= -1``
    (-1: unbounded); ``softcap``: ``None`` or a finite real ``>= 0`` (0: off); ``causal_alignment``:
    ``"top_left"`` or ``"bottom_right"``. "Real" and "int" are :mod:`numbers`' ``Real`` and
    ``Integral``: a scale computed in numpy is a numpy scalar (``np.float32(0.125)``), and
    fractions pass too; ``bool`` does not (``True`` as a scale is a slip, not a number).
    """
    for name, value in (("scale", scale), ("softcap", softcap)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be None or a real number, got {type(value).__name__}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")
    if softcap is not None and softcap < 0:
        raise ValueError(f"softcap must be >= 0 (0 or None: no softcap), got {softcap}")
    if window is not None:
        if not isinstance(window, (tuple, list)) or len(window) != 2:
            raise TypeError(f"window must be None or a pair (left, right) of ints, got {window!r}")
        for side, bound in zip(("left", "right"), window):
            if isinstance(bound, bool) or not isinstance(bound, numbers.Integral):
                raise TypeError(f"window's {side} bound must be an int, got {type(bound).__name__}")
            if bound < -1:
                raise ValueError(f"window's {side} bound must be >= -1 (-1: unbounded), got {bound}")
    if causal_alignment not in CAUSAL_ALIGNMENTS:
        raise ValueError(f"causal_alignment must be one of {list(CAUSAL_ALIGNMENTS)}, "
                         f"got {causal_alignment!r}")


def check_varlen_inputs(
    q: object, k: object, v: object, cu_seqlens_q: object, cu_seqlens_k: object,
    max_seqlen_q: object, max_seqlen_k: object, is_causal: object,
) -> tuple[list[int], list[int]]:
    """Raise ``TypeError``/``ValueError`` unless the arguments are a valid packed (varlen) call;
    return the query and key lengths of its sequences (read back for the check).

    q ``[total_q, heads, d]``, k and v ``[total_k, heads, d]``; ``cu_seqlens_*`` int32 of length
    ``batch + 1`` on q's device, starting at 0, non-decreasing, ending at the total; the
    ``max_seqlen_*`` at least the longest sequence; no sequence with queries and no keys.

    The kernel reads ``cu_seqlens`` on the device and trusts it, so a bad entry would read or
    write out of bounds: this copies the two (small) tensors to the host to check every entry,
    which waits for the device once per call.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if isinstance(t, torch.Tensor) and t.dim() != 3:
            raise ValueError(
                f"{name} must have shape [total, heads, d] (rank 3) for packed input, got shape "
                f"{tuple(t.shape)}"
            )
        if isinstance(t, torch.Tensor) and t.shape[0] == 0:
            raise ValueError(f"{name} is empty: its total length {name}.shape[0] must be >= 1")
    if all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        assert isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)
        assert isinstance(v, torch.Tensor)
        if k.shape[1] != v.shape[1] or k.shape[1] == 0 or q.shape[1] % k.shape[1]:
            raise ValueError(f"q's heads (dim 1) must be a multiple of k's and v's, which must be "
                             f"equal (grouped-query attention), got q {q.shape[1]}, k {k.shape[1]}, "
                             f"v {v.shape[1]}")
        # The kernel sees each head as a slice [total, d]: check that view as a dense call
        # (types, dtypes, devices, k and v lengths, head dims).
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    check_inputs(q, k, v, is_causal)
    assert isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)
    q, k = q.transpose(0, 1), k.transpose(0, 1)
    lengths = {}
    for name, cu, total in (("cu_seqlens_q", cu_seqlens_q, q.shape[0]),
                            ("cu_seqlens_k", cu_seqlens_k, k.shape[0])):
        if not isinstance(cu, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(cu).__name__}")
        if cu.dtype != torch.int32:
            raise TypeError(f"{name} must have dtype torch.int32, got {cu.dtype}")
        if cu.dim() != 1 or cu.numel() < 2:
            raise ValueError(f"{name} must be 1-D with batch + 1 >= 2 entries, got shape "
                             f"{tuple(cu.shape)}")
        if cu.device != q.device:
            raise ValueError(f"{name} is on {cu.device}, but q is on {q.device}")
        values = cu.tolist()
        if values[0] != 0:
            raise ValueError(f"{name} must start at 0, got {values[0]}")
        steps = [b - a for a, b in zip(values, values[1:])]
        if min(steps) < 0:
            at = steps.index(min(steps))
            raise ValueError(f"{name} must be non-decreasing, got {values[at]} then "
                             f"{values[at + 1]} at index {at}")
        if values[-1] != total:
            raise ValueError(f"{name} must end at the total length {total} (the first dim of "
                             f"{name[-1]}), got {values[-1]}")
        lengths[name] = steps
    if len(lengths["cu_seqlens_q"]) != len(lengths["cu_seqlens_k"]):
        raise ValueError(
            "cu_seqlens_q and cu_seqlens_k must describe the same number of sequences, got "
            f"{len(lengths['cu_seqlens_q'])} and {len(lengths['cu_seqlens_k'])}"
        )
    for name, value, seq in (("max_seqlen_q", max_seqlen_q, lengths["cu_seqlens_q"]),
                             ("max_seqlen_k", max_seqlen_k, lengths["cu_seqlens_k"])):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if value < max(seq):
            raise ValueError(f"{name} = {value} is less than the longest sequence, {max(seq)}")
    for b, (n_q, n_k) in enumerate(zip(lengths["cu_seqlens_q"], lengths["cu_seqlens_k"])):
        if n_q > 0 and n_k == 0:
            raise ValueError(
                f"sequence {b} has {n_q} queries and no keys (cu_seqlens_k[{b}] == "
                f"cu_seqlens_k[{b + 1}]): attention over no keys is undefined"
            )
    return lengths["cu_seqlens_q"], lengths["cu_seqlens_k"]


def check_split_keys(split_keys: object) -> None:
    """Raise unless ``split_keys`` (the forward's split-KV option) is ``None`` or an int >= 0."""
    if split_keys is None:
        return
    if isinstance(split_keys, bool) or not isinstance(split_keys, int):
        raise TypeError(f"split_keys must be None or an int, got {type(split_keys).__name__}")
    if split_keys < 0:
        raise ValueError(f"split_keys must be >= 0 (0: never split), got {split_keys}")
