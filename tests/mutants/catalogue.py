"""The catalogue of mutants: one realistic Flash Attention bug each (see :mod:`tests.mutants`).

Each docstring-like ``doc`` names the bug and the smallest input that shows it. Grouped by where
the bug lives: the forward recurrence, masking, the softmax scale, the lse, accumulator precision,
strides and offsets, head-dim padding, numerical stability.

Left out on purpose: bugs that cannot change any stored value, such as loading v's padded head-dim
columns unmasked (the garbage only reaches output columns that are never stored). The mutation
gate judged that one by running it: it survived the whole suite, as it must. Such reads past a
row are the memory sanitizer's to catch, not the test suite's.
"""

from __future__ import annotations

from tests.mutants import Mutant

F = "flash.forward"
B = "flash.backward_triton"
V = "flash.varlen"
S = "flash.scores"

CATALOGUE: tuple[Mutant, ...] = (
    # -- softmax scale --
    Mutant("scale_1_over_d", S, "scale=1.0 / math.sqrt(head_dim) if", "scale=1.0 / head_dim if",
           "scores scaled by 1/d instead of 1/sqrt(d); any d >= 2 with n_k >= 2"),
    Mutant("scale_missing_log2e", S, "else self.scale * LOG2E,", "else self.scale,",
           "exp2 used without folding log2(e) into the scale: softmax at the wrong temperature; n_k >= 2"),
    Mutant("exp_instead_of_exp2", F, "p = tl.exp2(s - m_use[:, None])", "p = tl.exp(s - m_use[:, None])",
           "probabilities by exp of base-2 scores, inconsistent with the rescaling; n_k >= 2"),
    # -- forward recurrence --
    Mutant("denominator_not_rescaled", F, "l_i = l_i * alpha + tl.sum(p, 1)", "l_i = l_i + tl.sum(p, 1)",
           "running denominator not rescaled when the max grows; needs two key tiles, n_k >= 65"),
    Mutant("accumulator_not_rescaled", F, "acc = acc * alpha[:, None] + tl.dot(", "acc = acc + tl.dot(",
           "running output not rescaled when the max grows; needs two key tiles, n_k >= 65"),
    Mutant("running_max_not_updated", F, "        m_i = m_new\n", "        m_i = m_i\n",
           "m_i never leaves -inf, so every tile rescales the past to zero; n_k >= 65"),
    Mutant("missing_normalization", F, "acc = acc / l_i[:, None]", "acc = acc",
           "output not divided by the softmax denominator; any input with n_k >= 2 or large scores"),
    Mutant("first_key_tile_skipped", F, "lo_diag, hi_diag, full_lo, full_hi,",
           "lo_diag, hi_diag, full_lo + BLOCK_K, full_hi,",
           "the unmasked run starts at the second key tile; n_k >= 64 (causal: a query tile past the first)"),
    # -- masking: tile edges and the causal diagonal --
    Mutant("key_tail_unmasked", F, "seen = visible(mask_k[None, :], offs_q", "seen = visible(cols[None, :] >= 0, offs_q",
           "keys past n_k in the last tile get score 0 instead of -inf; n_k % 64 != 0, non-causal"),
    Mutant("causal_diagonal_excluded", S, "seen = seen & (cols <= rows + hi_diag)",
           "seen = seen & (cols < rows + hi_diag)",
           "causal mask hides the diagonal (j < i instead of j <= i), forward and backward; causal, any n"),
    Mutant("causal_diagonal_unmasked", F,
           "            s = tl.where(seen, s, float(\"-inf\"))\n",
           "            s = tl.where(mask_k[None, :], s, float(\"-inf\"))\n",
           "causal only shortens the loop; the diagonal tile is not masked: causal, n >= 2"),
    Mutant("causal_loop_skips_diagonal_tile", S, "hi = tl.minimum(hi, tl.maximum(last_row + hi_diag + 1, 0))",
           "hi = tl.minimum(hi, tl.maximum(first_row + hi_diag, 0))",
           "causal loop stops before the diagonal tile; causal, any n"),
    Mutant("unmasked_run_covers_key_tail", F, "full_hi = (n_k // BLOCK_K) * BLOCK_K",
           "full_hi = tl.cdiv(n_k, BLOCK_K) * BLOCK_K",
           "the partial last key tile goes to the unmasked run: keys past n_k are loaded and seen; "
           "n_k % 64 != 0, non-causal"),
    Mutant("causal_unmasked_run_into_diagonal", F,
           "(tl.maximum(first_row + hi_diag + 1, 0) // BLOCK_K) * BLOCK_K)",
           "(tl.maximum(last_row + hi_diag + 1, 0) // BLOCK_K) * BLOCK_K)",
           "causal: the diagonal tiles go to the unmasked run, so rows see their future; causal, n >= 65"),
    Mutant("causal_loop_one_tile_short", S, "hi = tl.minimum(hi, tl.maximum(last_row + hi_diag + 1, 0))",
           "hi = tl.minimum(hi, tl.maximum(last_row + hi_diag + 1 - BLOCK_K, 0))",
           "causal loop drops the last visible key tile when tiles are 64 wide; causal, n_q >= 65"),
    # -- lse --
    Mutant("lse_in_base_2", F, "lse = (m_i + tl.log2(l_i)) / 1.4426950408889634", "lse = m_i + tl.log2(l_i)",
           "lse stored in base 2, not natural log; any input (lse check; breaks a backward using it)"),
    Mutant("lse_without_denominator", F, "lse = (m_i + tl.log2(l_i)) / 1.4426950408889634",
           "lse = m_i / 1.4426950408889634", "lse is only the row max; n_k >= 2"),
    Mutant("lse_stored_with_n_k_stride", F, "        *o_strides, *lse_strides,\n",
           "        *o_strides, lse_strides[0] // n_q * n_k, lse_strides[1],\n",
           "lse of batch b stored at b * n_k: wrong (or out of bounds) when n_q != n_k with 2+ slices"),
    # -- strides and batch offsets --
    Mutant("k_uses_q_offsets", F, "k_base = K + tl.multiple_of(tl.load(K_OFFSETS + pid_b)",
           "k_base = K + tl.multiple_of(tl.load(Q_OFFSETS + pid_b)",
           "k's slice located with q's offsets: wrong when q and k slices differ in size (n_q != n_k)"),
    Mutant("v_uses_k_row_stride", F, "cols[:, None].to(tl.int64) * stride_vn", "cols[:, None].to(tl.int64) * stride_kn",
           "v rows addressed with k's row stride: wrong only when k and v are laid out differently"),
    Mutant("head_dim_stride_ignored", F, "offs_d[None, :] * stride_qd", "offs_d[None, :]",
           "q's head-dim stride assumed 1: wrong for a q sliced along d (strided layout)"),
    # -- head-dim padding --
    Mutant("q_head_padding_unmasked", F, "q = tl.load(q_ptrs, mask=mask_q[:, None] & mask_d[None, :], other=0.0)",
           "q = tl.load(q_ptrs, mask=mask_q[:, None], other=0.0)",
           "q's padded head-dim columns read the next row's values: d not a power of two (24, 80, 96)"),
    Mutant("slice_alignment_assumed", F, "OFFSET_ALIGN=offset_alignment(q, k, v),", "OFFSET_ALIGN=16,",
           "every slice start promised 16-element aligned, so the compiler loads 16-byte vectors from "
           "starts that are not (the gapped layout); GPU only, the interpreter ignores alignment hints",
           gpu_only=True),
    # -- precision --
    Mutant("fp32_products_in_tf32", F, 'INPUT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32"',
           'INPUT_PRECISION="tf32"',
           "float32 inputs multiplied in TF32 (10-bit mantissa): fp32 results off by ~1e-3; GPU only, "
           "the interpreter computes in fp32 whatever it is told", gpu_only=True),
    Mutant("probabilities_in_half", F, "tl.dot(p.to(v.dtype), v,", "tl.dot(p.to(tl.float16).to(v.dtype), v,",
           "probabilities rounded to fp16 before p @ v even for fp32 inputs; fp32, any n_k >= 2"),
    # -- numerical stability --
    Mutant("no_max_subtraction", F, "m_new = tl.maximum(m_i, tl.max(s, 1))", "m_new = tl.maximum(m_i, 0.0 * tl.max(s, 1))",
           "softmax without subtracting the row max: exp2 overflows once scores pass ~128; large logits"),
    # -- backward formulas and masks (the Triton backward, flash's default) --
    Mutant("dk_missing_scale", B, "dk *= sm_scale", "dk *= 1.0",
           "dk not multiplied by the softmax scale; any d >= 2 with n_k >= 2"),
    Mutant("dq_missing_scale", B, "dq *= sm_scale", "dq *= 1.0",
           "dq not multiplied by the softmax scale; any d >= 2 with n_k >= 2"),
    Mutant("dq_without_delta", B, "ds = p * (dp - delta[:, None])", "ds = p * dp",
           "dq's dS forgets the rowsum(dO * O) term; n_k >= 2"),
    Mutant("delta_without_do", B, "delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)",
           "delta = tl.sum(o.to(tl.float32), 1)", "D = rowsum(O) instead of rowsum(dO * O); n_k >= 2"),
    Mutant("dkdv_causal_diagonal_excluded", B, "rows[None, :], offs_k[:, None], lo_diag, hi_diag,",
           "rows[None, :], offs_k[:, None], lo_diag, hi_diag - 1,",
           "dk/dv recompute P with the diagonal masked; causal, any n"),
    Mutant("dkdv_causal_loop_starts_late", S, "lo = (tl.maximum(first_col - hi_diag, 0) // BLOCK_Q) * BLOCK_Q",
           "lo = (tl.maximum(first_col - hi_diag, 0) // BLOCK_Q + 1) * BLOCK_Q",
           "dk/dv skip the query tile holding the diagonal; causal, any n"),
    Mutant("dq_lse_in_natural_log", B,
           "    lse = tl.load(lse_base + offs_q.to(tl.int64) * stride_ln, mask=mask_q, other=0.0)\n"
           "    lse = lse * 1.4426950408889634  # base 2\n",
           "    lse = tl.load(lse_base + offs_q.to(tl.int64) * stride_ln, mask=mask_q, other=0.0)\n",
           "dq recomputes P = exp2(s - lse) with the lse left in natural log; any input"),
    # -- packed variable-length input (flash.varlen; dense calls never take these paths) --
    Mutant("varlen_key_window_from_cu_seqlens_q", F, "start_k = tl.load(CU_K + seq)",
           "start_k = tl.load(CU_Q + seq)",
           "a sequence's keys located with the query offsets: wrong when n_q != n_k in an earlier "
           "sequence; varlen, 2 sequences with lengths q (1, 1), k (2, 1)"),
    Mutant("varlen_key_length_one_past_the_end", F, "n_k = tl.load(CU_K + seq + 1) - start_k",
           "n_k = tl.load(CU_K + seq + 1) - start_k + 1",
           "each sequence also sees the next sequence's first key (leakage across the boundary); "
           "varlen, 2 sequences of length 1, non-causal"),
    Mutant("varlen_lse_row_stride_one", V,
           "o_strides=(d, heads * d), lse_strides=(1, heads)", "o_strides=(d, heads * d), lse_strides=(1, 1)",
           "packed lse stored with row stride 1 instead of the head count: heads overwrite each other; "
           "varlen, 2 heads, n_q >= 2"),
    Mutant("varlen_dkdv_rows_of_first_sequence", B,
           "out = pid_b.to(tl.int64) * stride_gs + (row_k + rows_k) * stride_gn + offs_d[None, :]",
           "out = pid_b.to(tl.int64) * stride_gs + rows_k * stride_gn + offs_d[None, :]",
           "dk/dv of every sequence written at the first sequence's rows; varlen, 2 sequences"),
    # -- the contract's features (scale, grouped heads, windows, softcap, bottom-right) --
    Mutant("scale_argument_ignored", S, "scale=1.0 / math.sqrt(head_dim) if scale is None else float(scale),",
           "scale=1.0 / math.sqrt(head_dim),",
           "scale= is accepted and ignored (1/sqrt(d) always), forward and backward; any scale != 1/sqrt(d)"),
    Mutant("dq_default_scale", B, "sm_scale=features.scale,\n            BLOCK_Q=config.block_q_dq",
           "sm_scale=1.0 / math.sqrt(d),\n            BLOCK_Q=config.block_q_dq",
           "the dq kernel multiplies by 1/sqrt(d), not the call's scale; backward, scale != 1/sqrt(d)"),
    Mutant("dk_default_scale", B, "sm_scale=features.scale,\n            BLOCK_Q=config.block_q_dkdv",
           "sm_scale=1.0 / math.sqrt(d),\n            BLOCK_Q=config.block_q_dkdv",
           "the dk/dv kernel multiplies dk by 1/sqrt(d), not the call's scale; backward, scale != 1/sqrt(d)"),
    Mutant("gqa_kv_head_modulo", F, ".repeat_interleave(group).to(device)", ".repeat(group).to(device)",
           "query head h reads kv head h % h_kv instead of h // (h_q / h_kv) (forward and dq); "
           "grouped heads with h_kv >= 2"),
    Mutant("gqa_dkdv_first_head_only", B, "for g in range(0, group):", "for g in range(0, 1):",
           "dk, dv sum only the first query head of each group; backward, grouped heads"),
    Mutant("window_left_edge_excluded", S, "seen = seen & (cols >= rows + lo_diag)",
           "seen = seen & (cols > rows + lo_diag)",
           "a window's leftmost key hidden (j > c_i - left), forward and backward; window left >= 0"),
    Mutant("window_unmasked_run_from_first_row", F,
           "full_lo = tl.cdiv(tl.maximum(last_row + lo_diag, 0), BLOCK_K) * BLOCK_K",
           "full_lo = tl.cdiv(tl.maximum(first_row + lo_diag, 0), BLOCK_K) * BLOCK_K",
           "the unmasked run starts at the first row's window edge: later rows see keys left of their "
           "window; forward, window left with a query tile spanning a key tile edge"),
    Mutant("window_key_range_from_last_row", S,
           "lo = (tl.maximum(first_row + lo_diag, 0) // BLOCK_K) * BLOCK_K",
           "lo = (tl.maximum(last_row + lo_diag, 0) // BLOCK_K) * BLOCK_K",
           "the key loop starts at the last row's window: earlier rows lose keys (forward and dq); window left"),
    Mutant("window_dkdv_rows_from_first_key", S, "hi = tl.minimum(hi, tl.maximum(last_col - lo_diag + 1, 0))",
           "hi = tl.minimum(hi, tl.maximum(first_col - lo_diag + 1, 0))",
           "dk/dv stop at the rows that see the key tile's first key: later keys lose rows; backward, window left"),
    Mutant("softcap_tanh_absolute", S, "t = tl.where(a < 0.4, near, far)", "t = tl.where(a < 0.0, near, far)",
           "tanh from exp only, accurate to an absolute (not relative) float32 ulp: a softcap far above the "
           "scores moves them by c u; float32, softcap >> scores"),
    Mutant("softcap_natural_log", S, "cap_log2=self.softcap * LOG2E,", "cap_log2=self.softcap,",
           "capped scores left in natural log inside the base-2 softmax: the wrong temperature; softcap"),
    Mutant("softcap_dq_no_derivative", B, "ds = ds * (1.0 - t * t)", "ds = ds * 1.0",
           "dq without tanh's derivative; backward, softcap near the scores' size"),
    Mutant("softcap_dkdv_no_derivative", B, "dst = dst * (1.0 - tt * tt)", "dst = dst * 1.0",
           "dk without tanh's derivative; backward, softcap near the scores' size"),
    Mutant("bottom_right_sign", S, "offset = n_k - n_q", "offset = n_q - n_k",
           "bottom-right diagonal shifted the wrong way (c_i = i + n_q - n_k); bottom-right, n_q != n_k"),
    Mutant("empty_rows_flag_ignores_bottom_right", S,
           "return self.left != -1 or (self.bottom_right and (varlen or n_q > n_k))",
           "return self.left != -1",
           "bottom-right rows that see no key are not guarded: NaN (0/0) output; causal bottom-right, n_q > n_k"),
    Mutant("empty_row_divides_by_zero", F, "        l_i = tl.where(empty, 1.0, l_i)\n", "        l_i = l_i\n",
           "a row that sees no key divides 0 by 0: NaN output; a window or bottom-right with empty rows"),
    Mutant("dkdv_empty_row_lse_unguarded", B,
           "                lse = tl.where(lse == float(\"-inf\"), 0.0, lse)\n", "                lse = lse\n",
           "dk/dv recompute P = exp2(-inf - (-inf)) = NaN for a row that sees no key; backward, empty rows"),
    Mutant("varlen_bottom_right_from_max_lengths", F, "diag = diagonal(n_q, n_k, BOTTOM_RIGHT)",
           "diag = diagonal(N_Q, N_K, BOTTOM_RIGHT)",
           "packed input: the bottom-right diagonal from the longest lengths, not the sequence's; varlen, "
           "bottom-right, sequences of different n_k - n_q"),
)
