"""The readable blockwise reference: the kernel's algorithm written in PyTorch, one tile at a time.

``FlashAttentionMock`` walks query tiles and key tiles in Python with the same running max
``m_i``, denominator ``l_i`` and output accumulator ``o_i`` as the Triton kernel, in float32 (or
float64 for float64 inputs, so that it can be checked against the oracle to ~1e-12). It
exists to read before the kernel and to test the recurrence without Triton. ``naive=True`` skips
the tiling and computes dense attention directly. Both paths are differentiable through autograd.
"""

from __future__ import annotations

import torch

from oracle.dense import ALIGNMENTS, expand_kv, softmax_scale, visible_keys


class FlashAttentionMock:
    """Blockwise attention in PyTorch. Call it like ``FlashAttentionMock()(q, k, v, is_causal)``.

    It takes every feature of the extended contract (``scale``, grouped-query k/v, ``window``,
    ``softcap``, ``causal_alignment``; their meaning is :mod:`oracle.dense`'s). The walk visits only
    the key tiles that some row of the query tile may see, as a kernel would: tiles wholly in the
    causal future, or wholly outside every row's window, are skipped.

    Args:
        block_q, block_k: tile sizes of the walk (any positive integers).
        naive: compute dense attention instead of walking tiles.
    """

    def __init__(self, block_q: int = 64, block_k: int = 64, *, naive: bool = False) -> None:
        self.block_q = block_q
        self.block_k = block_k
        self.naive = naive

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, *,
        scale: float | None = None, window: tuple[int, int] | None = None,
        softcap: float | None = None, causal_alignment: str = "top_left",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``o`` (``[..., n_q, d]``, dtype of q) and ``lse`` (``[..., n_q]``, accumulator dtype)."""
        lead, (n_q, d) = q.shape[:-2], q.shape[-2:]
        k, v = expand_kv(q, k), expand_kv(q, v)  # grouped-query heads: each kv head per query head
        # "... n d -> (...) n d": the leading dims (batch, heads, ...) become one.
        acc = torch.promote_types(q.dtype, torch.float32)
        q3, k3, v3 = (t.reshape(-1, t.shape[-2], t.shape[-1]).to(acc) for t in (q, k, v))
        mask = _Mask(n_q, k.shape[-2], is_causal, window, causal_alignment)
        scale = softmax_scale(d, scale)
        if self.naive:
            o, lse = self._dense(q3, k3, v3, mask, scale, softcap)
        else:
            o, lse = self._blockwise(q3, k3, v3, mask, scale, softcap)
        return o.to(q.dtype).reshape(*lead, n_q, d), lse.reshape(*lead, n_q)

    @staticmethod
    def _scores(q_i, k_j, rows, cols, mask, scale, softcap):
        s = q_i @ k_j.transpose(-2, -1) * scale
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        return s.masked_fill(~mask.visible(rows, cols), float("-inf"))

    @classmethod
    def _dense(cls, q, k, v, mask, scale, softcap):
        rows = torch.arange(q.shape[1], device=q.device)
        cols = torch.arange(k.shape[1], device=q.device)
        s = cls._scores(q, k, rows, cols, mask, scale, softcap)
        m = s.amax(-1, keepdim=True)
        # A row that sees no key: every score -inf. Its weights are exp(-inf) = 0 and its lse -inf.
        p = torch.exp(s - m.masked_fill(torch.isneginf(m), 0.0))
        l_i = p.sum(-1, keepdim=True)
        o = (p @ v) / l_i.masked_fill(l_i == 0, 1.0)
        return o, (m + torch.log(l_i)).squeeze(-1)

    def _blockwise(self, q, k, v, mask, scale, softcap):
        n_q = q.shape[1]
        o_tiles, lse_tiles = [], []
        for q_start in range(0, n_q, self.block_q):
            q_i = q[:, q_start : q_start + self.block_q]
            rows = torch.arange(q_start, q_start + q_i.shape[1], device=q.device)
            m_i = torch.full(q_i.shape[:2], float("-inf"), dtype=q.dtype, device=q.device)
            l_i = torch.zeros(q_i.shape[:2], dtype=q.dtype, device=q.device)
            o_i = torch.zeros_like(q_i)
            # Only key tiles that some row of this tile may see: the causal future and keys
            # outside every row's window are skipped whole.
            k_lo, k_hi = mask.key_range(q_start, q_start + q_i.shape[1] - 1)
            for k_start in range((k_lo // self.block_k) * self.block_k, k_hi, self.block_k):
                k_j = k[:, k_start : k_start + self.block_k]
                v_j = v[:, k_start : k_start + self.block_k]
                cols = torch.arange(k_start, k_start + k_j.shape[1], device=q.device)
                s_ij = self._scores(q_i, k_j, rows, cols, mask, scale, softcap)
                m_new = torch.maximum(m_i, s_ij.amax(-1))
                # Rows that have seen no key yet keep m = -inf; they are shifted by 0 instead, so
                # that exp never sees -inf - (-inf).
                shift = m_new.masked_fill(torch.isneginf(m_new), 0.0)
                alpha = torch.exp(m_i - shift)
                p_ij = torch.exp(s_ij - shift[..., None])
                l_i = alpha * l_i + p_ij.sum(-1)
                o_i = alpha[..., None] * o_i + p_ij @ v_j
                m_i = m_new
            # A row that saw no key has l = 0: its output is 0 and its lse -inf.
            o_tiles.append(o_i / l_i.masked_fill(l_i == 0, 1.0)[..., None])
            lse_tiles.append(m_i + torch.log(l_i))
        return torch.cat(o_tiles, 1), torch.cat(lse_tiles, 1)


class _Mask:
    """Which keys a query row sees (causal mask, window, alignment), as :func:`oracle.dense.visible_mask`
    says, with the range of keys a block of rows can see."""

    def __init__(self, n_q, n_k, is_causal, window, causal_alignment):
        if causal_alignment not in ALIGNMENTS:
            raise ValueError(f"causal_alignment must be one of {ALIGNMENTS}, got {causal_alignment!r}")
        self.n_q, self.n_k, self.is_causal, self.window = n_q, n_k, is_causal, window
        self.alignment = causal_alignment
        self.offset = n_k - n_q if causal_alignment == "bottom_right" else 0

    def visible(self, rows, cols):
        return visible_keys(rows, cols, self.n_q, self.n_k, is_causal=self.is_causal, window=self.window,
                            causal_alignment=self.alignment)

    def key_range(self, first_row, last_row):
        """``[lo, hi)``: the keys that rows ``first_row..last_row`` may see (empty if ``lo >= hi``)."""
        lo, hi = 0, self.n_k
        c_first, c_last = first_row + self.offset, last_row + self.offset
        if self.is_causal:
            hi = min(hi, c_last + 1)
        if self.window is not None:
            left, right = self.window
            if left >= 0:
                lo = max(lo, c_first - left)
            if right >= 0:
                hi = min(hi, c_last + right + 1)
        return max(lo, 0), max(hi, 0)
