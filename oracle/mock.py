"""The readable blockwise reference: the kernel's algorithm written in PyTorch, one tile at a time.

``FlashAttentionMock`` walks query tiles and key tiles in Python with the same running max
``m_i``, denominator ``l_i`` and output accumulator ``o_i`` as the Triton kernel, in float32 (or
float64 for float64 inputs, so that it can be checked against the oracle to ~1e-12). It
exists to read before the kernel and to test the recurrence without Triton. ``naive=True`` skips
the tiling and computes dense attention directly. Both paths are differentiable through autograd.
"""

from __future__ import annotations

import math

import torch


class FlashAttentionMock:
    """Blockwise attention in PyTorch. Call it like ``FlashAttentionMock()(q, k, v, is_causal)``.

    Args:
        block_q, block_k: tile sizes of the walk (any positive integers).
        naive: compute dense attention instead of walking tiles.
    """

    def __init__(self, block_q: int = 64, block_k: int = 64, *, naive: bool = False) -> None:
        self.block_q = block_q
        self.block_k = block_k
        self.naive = naive

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``o`` (``[..., n_q, d]``, dtype of q) and ``lse`` (``[..., n_q]``, accumulator dtype)."""
        lead, (n_q, d) = q.shape[:-2], q.shape[-2:]
        # "... n d -> (...) n d": the leading dims (batch, heads, ...) become one.
        acc = torch.promote_types(q.dtype, torch.float32)
        q3, k3, v3 = (t.reshape(-1, t.shape[-2], t.shape[-1]).to(acc) for t in (q, k, v))
        scale = 1.0 / math.sqrt(d)
        if self.naive:
            o, lse = self._dense(q3, k3, v3, is_causal, scale)
        else:
            o, lse = self._blockwise(q3, k3, v3, is_causal, scale)
        return o.to(q.dtype).reshape(*lead, n_q, d), lse.reshape(*lead, n_q)

    @staticmethod
    def _dense(q, k, v, is_causal, scale):
        s = q @ k.transpose(-2, -1) * scale
        if is_causal:
            hidden = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
            s = s.masked_fill(hidden, float("-inf"))
        return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)

    def _blockwise(self, q, k, v, is_causal, scale):
        n_q, n_k = q.shape[1], k.shape[1]
        o_tiles, lse_tiles = [], []
        for q_start in range(0, n_q, self.block_q):
            q_i = q[:, q_start : q_start + self.block_q]
            rows = torch.arange(q_start, q_start + q_i.shape[1], device=q.device)
            m_i = torch.full(q_i.shape[:2], float("-inf"), dtype=q.dtype, device=q.device)
            l_i = torch.zeros(q_i.shape[:2], dtype=q.dtype, device=q.device)
            o_i = torch.zeros_like(q_i)
            # Causal: key tiles wholly in the future of this query tile are skipped.
            k_end = min(n_k, q_start + q_i.shape[1]) if is_causal else n_k
            for k_start in range(0, k_end, self.block_k):
                k_j = k[:, k_start : k_start + self.block_k]
                v_j = v[:, k_start : k_start + self.block_k]
                s_ij = q_i @ k_j.transpose(-2, -1) * scale
                if is_causal:
                    cols = torch.arange(k_start, k_start + k_j.shape[1], device=q.device)
                    s_ij = s_ij.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
                m_new = torch.maximum(m_i, s_ij.amax(-1))
                alpha = torch.exp(m_i - m_new)
                p_ij = torch.exp(s_ij - m_new[..., None])
                l_i = alpha * l_i + p_ij.sum(-1)
                o_i = alpha[..., None] * o_i + p_ij @ v_j
                m_i = m_new
            o_tiles.append(o_i / l_i[..., None])
            lse_tiles.append(m_i + torch.log(l_i))
        return torch.cat(o_tiles, 1), torch.cat(lse_tiles, 1)
