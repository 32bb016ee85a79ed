"""Packed (variable-length) attention by way of a padded batch: the varlen oracle and its tools.

A packed batch stores ``batch`` sequences one after another: ``q [total_q, h_q, d]`` with sequence
``b``'s queries at rows ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]`` (likewise k, v ``[total_k, h_kv, d]``
with ``cu_seqlens_k``). Sequence ``b``'s queries attend to its own keys only, and the causal mask
and the window apply per sequence, as :mod:`oracle.dense` spells them out for one problem of
``n_q(b) x n_k(b)``: under ``"bottom_right"``, query ``i`` of sequence ``b`` has
``c_i = i + n_k(b) - n_q(b)``, from that sequence's own lengths.

The oracle does not loop over sequences to attend: it pads the batch to ``[batch, heads, max_len, d]``
(:func:`pad_packed`), computes dense attention with a mask of what each query of each sequence
sees (:func:`varlen_mask`), and unpacks (:func:`unpad`). It is :func:`oracle.dense.dense_attention`
on the padded batch with that mask (and the scale, grouped-query heads and softcap passed on), so
with ``compute_dtype=None`` it is the same-dtype reference the error model needs, as the dense one is.

A padded query row sees no key, and neither does a real row that its window or a bottom-right
alignment leaves with none: ``dense_attention`` gives such a row ``o = 0``, ``lse = -inf`` and no
gradient (never NaN), so padded rows are dropped by :func:`unpad` with nothing sent back, and a real
blind row is what the contract says it is.
"""

from __future__ import annotations

import torch

from oracle.dense import dense_attention, visible_keys


def seqlens(cu_seqlens: torch.Tensor) -> list[int]:
    """Per-sequence lengths from ``cu_seqlens`` (on the host: the oracle may synchronize)."""
    cu = [int(x) for x in cu_seqlens.tolist()]
    return [b - a for a, b in zip(cu, cu[1:])]


def sequence_rows(cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor) -> list[tuple[slice, slice]]:
    """For each sequence with queries, its rows of the packed q and of the packed k and v.

    For adapters that call a dense kernel once per sequence; a sequence without queries produces
    nothing and is left out. Raises ``ValueError`` for a sequence with queries and no keys.
    """
    cq, ck = [int(x) for x in cu_seqlens_q.tolist()], [int(x) for x in cu_seqlens_k.tolist()]
    rows = []
    for b in range(len(cq) - 1):
        if cq[b + 1] == cq[b]:
            continue
        if ck[b + 1] == ck[b]:
            raise ValueError(f"sequence {b} has {cq[b + 1] - cq[b]} queries and no keys")
        rows.append((slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])))
    return rows


def pad_packed(
    x: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [total, heads, *rest]`` as ``[batch, heads, max_seqlen, *rest]`` (zeros past each sequence's
    end) and ``valid [batch, max_seqlen]`` (True where a row holds data). Differentiable in ``x``.

    Raises ``ValueError`` if a sequence is longer than ``max_seqlen`` or ``cu_seqlens`` does not end
    at ``total``.
    """
    lens = seqlens(cu_seqlens)
    if lens and max(lens) > max_seqlen:
        raise ValueError(f"max_seqlen {max_seqlen} is smaller than the longest sequence, {max(lens)}")
    if int(cu_seqlens[-1]) != x.shape[0]:
        raise ValueError(f"cu_seqlens ends at {int(cu_seqlens[-1])}, but the packed tensor has "
                         f"{x.shape[0]} rows")
    starts = cu_seqlens[:-1].to(device=x.device, dtype=torch.long)
    n = torch.tensor(lens, device=x.device, dtype=torch.long)
    pos = torch.arange(max_seqlen, device=x.device)
    valid = pos[None, :] < n[:, None]
    # Rows past a sequence's end read an appended zero row, so an empty x (total 0) works too.
    past_end = torch.full_like(valid, x.shape[0], dtype=torch.long)
    index = torch.where(valid, starts[:, None] + pos[None, :], past_end)
    extended = torch.cat([x, x.new_zeros((1, *x.shape[1:]))])
    padded = extended[index]  # [batch, max_seqlen, heads, *rest]
    return padded.transpose(1, 2), valid


def unpad(padded: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``padded [batch, heads, max_seqlen, *rest]`` back to ``[total, heads, *rest]``, keeping the rows
    ``valid`` marks (in sequence order, as they were packed). Differentiable."""
    return padded.transpose(1, 2)[valid]


def varlen_mask(
    cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int,
    is_causal: bool = False, *, window: tuple[int, int] | None = None, causal_alignment: str = "top_left",
) -> torch.Tensor:
    """``[batch, 1, max_seqlen_q, max_seqlen_k]`` bool, True where query ``i`` of sequence ``b`` may
    see key ``j``: ``i < n_q(b)``, ``j < n_k(b)``, and the causal mask and window of an
    ``n_q(b) x n_k(b)`` problem (:func:`oracle.dense.visible_keys`, with its alignment). A padded
    row (``i >= n_q(b)``) sees nothing."""
    device = cu_seqlens_q.device
    rows, cols = torch.arange(max_seqlen_q, device=device), torch.arange(max_seqlen_k, device=device)
    masks = []
    for n_q, n_k in zip(seqlens(cu_seqlens_q), seqlens(cu_seqlens_k)):
        seen = visible_keys(rows, cols, n_q, n_k, is_causal=is_causal, window=window,
                            causal_alignment=causal_alignment)
        masks.append(seen & (rows[:, None] < n_q) & (cols[None, :] < n_k))
    if not masks:
        return torch.zeros((0, 1, max_seqlen_q, max_seqlen_k), dtype=torch.bool, device=device)
    return torch.stack(masks)[:, None]


def dense_attention_varlen(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    is_causal: bool = False,
    *,
    compute_dtype: torch.dtype | None = torch.float64,
    scale: float | None = None,
    window: tuple[int, int] | None = None,
    softcap: float | None = None,
    causal_alignment: str = "top_left",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed attention computed densely on the padded batch, in ``compute_dtype``.

    Args:
        q, k, v: ``[total_q, h_q, d]``, ``[total_k, h_kv, d]``, ``[total_k, h_kv, d]``, any strides
            (``h_kv`` divides ``h_q``: grouped-query heads, as :mod:`oracle.dense` pairs them).
        cu_seqlens_q, cu_seqlens_k: ``[batch + 1]`` integer offsets (see the module docstring).
        is_causal: causal within each sequence, with ``causal_alignment`` per sequence.
        compute_dtype: precision of every operation (``None``: the inputs' own dtype).
        scale, window, softcap, causal_alignment: the contract's features (:mod:`oracle.dense`),
            the window and alignment per sequence.

    Returns:
        ``o [total_q, h_q, d]`` and ``lse [total_q, h_q]``, in ``compute_dtype``; differentiable in
        q, k, v. A row that sees no key has ``o = 0``, ``lse = -inf`` and sends no gradient back.

    Raises ``ValueError`` for a sequence with queries and no keys (its rows have nothing to see).
    """
    lens_q, lens_k = seqlens(cu_seqlens_q), seqlens(cu_seqlens_k)
    if any(n_q > 0 and n_k == 0 for n_q, n_k in zip(lens_q, lens_k)):
        raise ValueError(f"a sequence with queries has no keys: n_q {lens_q}, n_k {lens_k}")
    max_q, max_k = max(lens_q, default=0), max(max(lens_k, default=0), 1)
    qp, valid_q = pad_packed(q, cu_seqlens_q, max_q)
    kp, _ = pad_packed(k, cu_seqlens_k, max_k)
    vp, _ = pad_packed(v, cu_seqlens_k, max_k)
    hidden = ~varlen_mask(cu_seqlens_q, cu_seqlens_k, max_q, max_k, is_causal, window=window,
                          causal_alignment=causal_alignment).to(q.device)
    # The dense oracle itself, with the varlen mask in place of the causal mask and the window.
    o, lse = dense_attention(qp, kp, vp, compute_dtype=compute_dtype, hidden=hidden, scale=scale,
                             softcap=softcap)
    return unpad(o, valid_q), unpad(lse, valid_q)
