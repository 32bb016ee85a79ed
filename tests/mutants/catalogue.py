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
FN = "flash.function"
D = "flash.decode"
R = "flash.replay"
C = "flash.checks"

CATALOGUE: tuple[Mutant, ...] = (
    # -- softmax scale --
    Mutant("scale_1_over_d", S, "scale=1.0 / math.sqrt(head_dim) if", "scale=1.0 / head_dim if",
           "scores scaled by 1/d instead of 1/sqrt(d); any d >= 2 with n_k >= 2"),
    Mutant("scale_missing_log2e", S, "else self.scale * LOG2E,", "else self.scale,",
           "exp2 used without folding log2(e) into the scale: softmax at the wrong temperature; n_k >= 2"),
    Mutant("row_max_before_scale", F, "m_new = tl.maximum(m_i, tl.max(s, 1))",
           "m_new = tl.maximum(m_i, tl.max(s / qk_scale, 1) * qk_scale)",
           "the row max of the unscaled dot products, scaled after (max and scale commute only for a "
           "positive scale): a negative softmax scale overflows exp2; scale < 0 (or 0), n_k >= 2"),
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
    Mutant("unmasked_run_covers_key_tail", S, "full_hi = (n_k // BLOCK_K) * BLOCK_K",
           "full_hi = tl.cdiv(n_k, BLOCK_K) * BLOCK_K",
           "the partial last key tile goes to the unmasked run: keys past n_k are loaded and seen; "
           "forward and dq, n_k % 64 != 0, non-causal"),
    Mutant("causal_unmasked_run_into_diagonal", S,
           "(tl.maximum(first_row + hi_diag + 1, 0) // BLOCK_K) * BLOCK_K)",
           "(tl.maximum(last_row + hi_diag + 1, 0) // BLOCK_K) * BLOCK_K)",
           "causal: the diagonal tiles go to the unmasked run, so rows see their future; forward and dq, "
           "causal, n >= 65"),
    Mutant("dkdv_unmasked_run_covers_query_tail", S, "full_hi = (n_q // BLOCK_Q) * BLOCK_Q",
           "full_hi = tl.cdiv(n_q, BLOCK_Q) * BLOCK_Q",
           "dk/dv: the partial last query tile goes to the unmasked run: rows past n_q (and their lse, D) "
           "are loaded and summed; backward, n_q % 64 != 0, non-causal"),
    Mutant("dkdv_causal_unmasked_run_into_diagonal", S,
           "full_lo = tl.cdiv(tl.maximum(last_col - hi_diag, 0), BLOCK_Q) * BLOCK_Q",
           "full_lo = tl.cdiv(tl.maximum(first_col - hi_diag, 0), BLOCK_Q) * BLOCK_Q",
           "dk/dv: the diagonal query tile goes to the unmasked run, so a key gets gradient from rows "
           "before it; backward, causal, n >= 65"),
    Mutant("dkdv_window_unmasked_run_to_last_key", S,
           "(tl.maximum(first_col - lo_diag + 1, 0) // BLOCK_Q) * BLOCK_Q)",
           "(tl.maximum(last_col - lo_diag + 1, 0) // BLOCK_Q) * BLOCK_Q)",
           "dk/dv: the unmasked run ends at the last key's window edge: the first keys get gradient from "
           "rows past their window; backward, window left with a key tile spanning a query tile edge"),
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
    Mutant("one_loop_dkdv_unmasked", B,
           "lo_diag, hi_diag, lo, first_hi, MASKED=True,", "lo_diag, hi_diag, lo, first_hi, MASKED=SPLIT_RUNS,",
           "dk/dv's one-loop path (loop_shape: SPLIT_RUNS off) masks nothing: queries before a key's band reach it; "
           "backward, d > 64, causal or window, no softcap or group, lengths multiples of 16"),
    Mutant("one_loop_dq_unmasked", B,
           "lo_diag, hi_diag, lo, first_hi,\n        MASKED=True,",
           "lo_diag, hi_diag, lo, first_hi,\n        MASKED=SPLIT_RUNS,",
           "dq's one-loop path masks nothing: a row's dq sums keys past its band; backward, d > 64, causal "
           "or window, no softcap or group, lengths multiples of 16"),
    Mutant("one_loop_dq_stops_a_tile_short", B,
           "    first_hi = hi\n    if SPLIT_RUNS:\n        full_lo, full_hi = unmasked_key_range",
           "    first_hi = hi - BLOCK_K\n    if SPLIT_RUNS:\n        full_lo, full_hi = unmasked_key_range",
           "dq's one-loop path skips the last key tile of the band (the causal diagonal's); backward, "
           "d > 64, causal, no softcap or group, lengths multiples of 16"),
    Mutant("one_loop_dkdv_stops_a_tile_short", B,
           "    first_hi = hi\n    if SPLIT_RUNS:\n        full_lo, full_hi = unmasked_query_range",
           "    first_hi = hi - BLOCK_Q\n    if SPLIT_RUNS:\n        full_lo, full_hi = unmasked_query_range",
           "dk/dv's one-loop path skips the last query tile of the band (for a key tile: the last rows "
           "that see it); backward, d > 64, causal, no softcap or group, lengths multiples of 16"),
    Mutant("dq_hidden_p_leaks", B, "            p = tl.where(seen, p, 0.0)", "            p = tl.where(seen, p, 1e-6)",
           "dq's masked tiles weigh hidden keys 1e-6, not 0: a row's dq leaks a little of every key past "
           "its band or the sequence's end; backward, any mask"),
    Mutant("dkdv_hidden_p_leaks", B, "            pt = tl.where(seen, pt, 0.0)", "            pt = tl.where(seen, pt, 1e-6)",
           "dk/dv's masked tiles weigh hidden entries 1e-6, not 0: a key's dk, dv take a little of every "
           "query that must not see it; backward, any mask"),
    Mutant("dkdv_masks_scores", B,
           "        pt = tl.exp2(st - lse[None, :])\n        if MASKED:\n",
           "        if MASKED:\n            st = tl.where(visible(mask_q[None, :], rows[None, :], offs_k[:, None], "
           "lo_diag, hi_diag, HAS_LEFT, HAS_RIGHT), st, float(\"-inf\"))\n"
           "        pt = tl.exp2(st - lse[None, :])\n        if MASKED:\n",
           "dk/dv mask the scores before exp2 (P is still zeroed after): the right gradients, but a "
           "masked tile's P differs in the last bit from the same tile unmasked, so a packed sequence "
           "(three runs) is not bit for bit itself alone (one loop: loop_shape), as BATCH_INVARIANT "
           "promises; varlen backward, d > 64, a band, a sequence with lengths multiples of 16. The "
           "interpreter's masking moves no bit", gpu_only=True),
    Mutant("dq_masks_scores", B,
           "        p = tl.exp2(s - lse[:, None])\n        if MASKED:\n",
           "        if MASKED:\n            s = tl.where(visible(mask_k[None, :], offs_q[:, None], cols[None, :], "
           "lo_diag, hi_diag, HAS_LEFT, HAS_RIGHT), s, float(\"-inf\"))\n"
           "        p = tl.exp2(s - lse[:, None])\n        if MASKED:\n",
           "dq masks the scores before exp2, as dkdv_masks_scores; varlen backward, d > 64, a band, a "
           "sequence with lengths multiples of 16. The interpreter's masking moves no bit", gpu_only=True),
    Mutant("dkdv_causal_loop_starts_late", S, "lo = (tl.maximum(first_col - hi_diag, 0) // BLOCK_Q) * BLOCK_Q",
           "lo = (tl.maximum(first_col - hi_diag, 0) // BLOCK_Q + 1) * BLOCK_Q",
           "dk/dv skip the query tile holding the diagonal; causal, any n"),
    Mutant("dq_lse_in_natural_log", B,
           "    lse = tl.load(lse_base + offs_q.to(tl.int64) * stride_ln, mask=mask_q, other=0.0)\n"
           "    lse = lse_base2(lse)  # base 2, past 2^24 raised above its rounding\n",
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
    # -- side effects --
    Mutant("output_written_over_q", F, "    o = replay.empty(recording, \"o\", (*lead, n_q, d), q.dtype, q.device)\n",
           "    o = q if q.is_contiguous() else replay.empty(recording, \"o\", (*lead, n_q, d), q.dtype, q.device)\n",
           "o stored into q's own buffer when q is contiguous (each program reads its q tile before it "
           "stores o there, so o is right): the caller's q is lost; any contiguous q"),
    # -- a held-out round (2026-12-01): bugs written without looking at the tests, see docs/mutation.md --
    Mutant("running_max_starts_at_zero", F, 'm_i = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)',
           "m_i = tl.zeros([BLOCK_Q], dtype=tl.float32)",
           "the running max starts at 0, not -inf: a row whose scores are all far below 0 underflows "
           "(l = 0, o = NaN); one key, a score under -150 (base 2)"),
    Mutant("causal_tile_order_off_by_one", F, "pid_q = num_q_tiles - 1 - pid_q", "pid_q = num_q_tiles - pid_q",
           "the longest-first causal launch order is off by one: the first query tile is never computed "
           "(its o left as torch.empty made it); causal, any n"),
    Mutant("key_range_end_one_short", S, "hi = tl.minimum(hi, tl.maximum(last_row + hi_diag + 1, 0))",
           "hi = tl.minimum(hi, tl.maximum(last_row + hi_diag, 0))",
           "the key loop ends one key short: when a tile's last row sees the first key of the next key "
           "tile (band's right edge 1 past a tile boundary: window right 1, bottom-right n_k - n_q = 1), "
           "that tile is never visited; forward and dq"),
    Mutant("query_range_end_one_short", S, "hi = tl.minimum(hi, tl.maximum(last_col - lo_diag + 1, 0))",
           "hi = tl.minimum(hi, tl.maximum(last_col - lo_diag, 0))",
           "dk/dv's query loop ends one row short: the band's left edge 1 past a query tile boundary "
           "(window left 65 with 16-row tiles) loses a row; backward, window left"),
    Mutant("query_range_start_one_late", S, "lo = (tl.maximum(first_col - hi_diag, 0) // BLOCK_Q) * BLOCK_Q",
           "lo = (tl.maximum(first_col - hi_diag + 1, 0) // BLOCK_Q) * BLOCK_Q",
           "dk/dv's query loop starts a tile late when the band's right edge puts the first row that sees "
           "the key tile at the end of a query tile; backward, window right 1"),
    Mutant("delta_head_padding_unmasked", B, "mask = mask_q[:, None] & (offs_d < HEAD_DIM)[None, :]",
           "mask = mask_q[:, None]",
           "D = rowsum(do * o) reads the padded head-dim columns (the next row's values); backward, d not "
           "a power of two"),
    Mutant("dkdv_lse_in_natural_log", B,
           "        lse = lse_base2(lse)  # base 2, past 2^24 raised above its rounding\n        # -- recompute P^T",
           "        # -- recompute P^T",
           "dk/dv recompute P = exp2(s - lse) with the lse left in natural log; backward, any input"),
    Mutant("gqa_dkdv_lse_of_kv_head", B, "lse_base = LSE + q_slice.to(tl.int64) * stride_ls",
           "lse_base = LSE + pid_b.to(tl.int64) * stride_ls",
           "dk/dv read the lse of query slice pid_b (the kv slice's index) for every head of the group; "
           "backward, grouped heads"),
    Mutant("gqa_dkdv_delta_of_kv_head", B, "delta_base = Delta + q_slice.to(tl.int64) * stride_ls",
           "delta_base = Delta + pid_b.to(tl.int64) * stride_ls",
           "dk/dv read D of query slice pid_b for every head of the group; backward, grouped heads"),
    Mutant("gqa_dq_kv_by_kv_slice", B, "offsets.q, offsets.k_by_q, offsets.v_by_q, offsets.do,",
           "offsets.q, offsets.k, offsets.v, offsets.do,",
           "the dq kernel indexes k and v by kv slice with a query slice's index; backward, grouped heads"),
    Mutant("gqa_dkdv_group_interleaved", B, "q_slice = pid_b * group + g", "q_slice = pid_b + g * num_slices",
           "dk/dv sum the query heads h_kv apart (h % h_kv), not the group's consecutive heads; backward only, "
           "grouped heads with h_kv >= 2"),
    Mutant("dkdv_do_with_q_row_stride", B,
           "do_ptrs = do_base + rows[None, :].to(tl.int64) * stride_don",
           "do_ptrs = do_base + rows[None, :].to(tl.int64) * stride_qn",
           "dk/dv read do's rows with q's row stride: wrong when do and q are laid out differently"),
    Mutant("delta_do_with_o_row_stride", B,
           "do = tl.load(do_base + rows * stride_don + offs_d[None, :] * stride_dod",
           "do = tl.load(do_base + rows * stride_on + offs_d[None, :] * stride_dod",
           "D reads do's rows with o's row stride: wrong when do is not laid out like o (contiguous)"),
    Mutant("slice_offsets_column_major", F,
           "offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride",
           "offsets = offsets.unsqueeze(0) + torch.arange(size, dtype=torch.int64)[:, None] * stride "
           "if offsets.dim() else torch.arange(size, dtype=torch.int64) * stride",
           "slices enumerated column-major while o is written row-major: slice (b, h) gets (h, b)'s "
           "attention; two leading dims both > 1"),
    Mutant("varlen_last_sequence_dropped", V,
           "n_k=max_seqlen_k, slices=heads, sequences=cu_seqlens_q.numel() - 1,",
           "n_k=max_seqlen_k, slices=heads, sequences=max(cu_seqlens_q.numel() - 2, 1),",
           "the packed forward's grid misses the last sequence (its o, lse left as torch.empty made "
           "them); varlen, 2 sequences"),
    Mutant("varlen_store_rows_to_max_length", F, "    mask_q = offs_q < n_q\n    mask_d = offs_d < HEAD_DIM  # masks",
           "    mask_q = offs_q < N_Q\n    mask_d = offs_d < HEAD_DIM  # masks",
           "a packed sequence's tiles store rows up to the longest sequence's length, over the next "
           "sequence's first rows: in launch order that sequence's programs run later and write over "
           "them (the interpreter's order hid it where the last sequence is the longest); "
           "seqlens (1, 63, 64, 65, 127)"),
    Mutant("varlen_o_rows_with_q_row_stride", F,
           "o_base = Out + pid_b.to(tl.int64) * stride_os + row_q * stride_on",
           "o_base = Out + pid_b.to(tl.int64) * stride_os + row_q * stride_qn",
           "a sequence's o rows located with q's row stride: wrong when packed q is not laid out like o"),
    Mutant("tanh_coefficient_digit_slip", S, "p = p * z + 0.0034955902956426144", "p = p * z + 0.0035955902956426144",
           "tanh's rational fit with one digit of a numerator coefficient wrong: capped scores off by "
           "up to ~1e-4 relative (x = s / c near 1 to 3); float32, softcap a few times the scores"),
    Mutant("softcap_ignores_scale", S, "qk_scale=self.scale / self.softcap if self.softcap",
           "qk_scale=1.0 / self.softcap if self.softcap",
           "with a softcap, the softmax scale is dropped: c tanh(q.k / c); softcap, any scale != 1"),
    Mutant("lse_mixes_log_bases", F, "lse = (m_i + tl.log2(l_i)) / 1.4426950408889634",
           "lse = (m_i + tl.log(l_i)) / 1.4426950408889634",
           "the lse adds a natural log of l to a base-2 max; n_k >= 2"),
    Mutant("backward_not_causal", FN, "ctx.features = resolve(q.shape[-1], is_causal, scale",
           "ctx.features = resolve(q.shape[-1], False, scale",
           "the backward is given the features of a non-causal call; causal, n >= 2"),
    Mutant("dq_window_one_key_wider", B,
           "    lo_diag = diag - win_left\n    hi_diag = diag + win_right\n    first_row = pid_q * BLOCK_Q\n",
           "    lo_diag = diag - win_left - 1\n    hi_diag = diag + win_right\n    first_row = pid_q * BLOCK_Q\n",
           "the dq kernel's window reaches one key further left than the forward's; backward, window left"),
    Mutant("dkdv_bottom_right_sign", B,
           "    diag = diagonal(n_q, n_k, BOTTOM_RIGHT)\n    lo_diag = diag - win_left\n    hi_diag = diag + win_right\n    lo, hi = query_range",
           "    diag = diagonal(n_k, n_q, BOTTOM_RIGHT)\n    lo_diag = diag - win_left\n    hi_diag = diag + win_right\n    lo, hi = query_range",
           "dk/dv place the bottom-right diagonal the wrong way (the forward and dq are right); "
           "backward, bottom-right, n_q != n_k"),
    Mutant("empty_row_lse_zero", F, '        lse = tl.where(empty, float("-inf"), lse)', "        lse = tl.where(empty, 0.0, lse)",
           "a row that sees no key stores lse = 0 instead of -inf; empty rows"),
    Mutant("v_tail_unmasked", F, "            v = tl.load(v_ptrs, mask=mask_k[:, None] & mask_d[None, :], other=0.0)",
           "            v = tl.load(v_ptrs, mask=mask_d[None, :], other=0.0)",
           "v's rows past n_k loaded in the masked run: their weight is 0, but 0 x NaN (a gap) or 0 x inf "
           "(memory past the tensor) is NaN; n_k % 64 != 0"),
    Mutant("o_head_padding_stored", F,
           "tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=mask_q[:, None] & mask_d[None, :])",
           "tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=mask_q[:, None])",
           "o's padded head-dim columns stored: into the next row, and past the end of o after its last "
           "row; d not a power of two"),
    Mutant("dk_head_padding_stored", B, "tl.store(DK + out, dk.to(DK.dtype.element_ty), mask=mask_kd)",
           "tl.store(DK + out, dk.to(DK.dtype.element_ty), mask=mask_k[:, None])",
           "dk's padded head-dim columns stored into the next row and past the end; d not a power of two"),
    Mutant("causal_window_right_not_capped", S, "right = 0 if right == -1 else min(right, 0)",
           "right = 0 if right == -1 else right",
           "is_causal with a window whose right bound is > 0 lets rows see that many future keys; causal, "
           "window right >= 1"),
    Mutant("empty_rows_guard_from_two_rows", S, "(self.bottom_right and (varlen or n_q > n_k))",
           "(self.bottom_right and (varlen or n_q > n_k + 1))",
           "the empty-row guard is off when exactly one row sees no key: 0 / 0 there; bottom-right, "
           "n_q = n_k + 1"),
    Mutant("scale_from_padded_head_dim", F,
           "features = resolve(d, is_causal, scale, window, softcap, causal_alignment)",
           "features = resolve(padded_head_dim(d), is_causal, scale, window, softcap, causal_alignment)",
           "the default scale from the padded head dim, 1/sqrt(32) for d = 24; forward, d not a power of two"),
    Mutant("score_product_fused", S, "        product = libdevice.mul_rn(x, y)", "        product = x * y",
           "the scaled score not rounded on its own: the compiler fuses s * scale - m into one FMA, so "
           "the row's largest key gets exp2 of its score's rounding error, not exp2(0): NaN past "
           "scaled scores of about 1.5e9 (finding 20); float32 or bfloat16. The interpreter rounds "
           "every product", gpu_only=True),
    Mutant("backward_lse_not_raised", S, "    return lse2 + pad\n", "    return lse2\n",
           "the backward's base-2 lse not raised past 2^24: twice rounded, it falls up to a few units "
           "below the row's largest score, and past base-2 lse of about 2^31 that key's exp2 "
           "overflows: dq, dk, dv NaN; backward, float32 or bfloat16, scores of 1e10 (beyond the "
           "contract: tests/test_backward.py holds flash to it)"),
    Mutant("exponent_in_half", F, "p = tl.exp2(s - m_use[:, None])",
           "p = tl.exp2((s - m_use[:, None]).to(tl.float16).to(tl.float32))",
           "the exponent s - m rounded to float16 before exp2, also for float32 inputs: weights off by "
           "~2^-11 relative x |s - m|; float32"),
    Mutant("dq_bottom_right_sign", B,
           "    diag = diagonal(n_q, n_k, BOTTOM_RIGHT)\n    lo_diag = diag - win_left\n    hi_diag = diag + win_right\n    first_row = pid_q * BLOCK_Q\n",
           "    diag = diagonal(n_k, n_q, BOTTOM_RIGHT)\n    lo_diag = diag - win_left\n    hi_diag = diag + win_right\n    first_row = pid_q * BLOCK_Q\n",
           "dq places the bottom-right diagonal the wrong way; backward, bottom-right, n_q != n_k"),
    Mutant("softcap_derivative_sign", B, "ds = ds * (1.0 - t * t)", "ds = ds * (1.0 + t * t)",
           "dq with 1 + tanh^2 for tanh's derivative; backward, softcap near the scores' size"),
    Mutant("varlen_backward_key_rows_from_q", B, "        row_k = start_k.to(tl.int64)\n    else:",
           "        row_k = start_q.to(tl.int64)\n    else:",
           "the packed backward finds a sequence's keys at its query offset; varlen, cu_seqlens_q != cu_seqlens_k"),
    Mutant("alpha_from_unguarded_max", F, "alpha = tl.exp2(m_i - m_use)", "alpha = tl.exp2(m_i - m_new)",
           "the rescale factor from the unguarded max: exp2(-inf - (-inf)) = NaN for a row that has seen no "
           "key yet, though a later tile has some; a window whose first visited tile holds none of a row's keys"),
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
    Mutant("left_bound_needs_right_bound", S,
           "    if HAS_LEFT:\n        seen = seen & (cols >= rows + lo_diag)",
           "    if HAS_LEFT and HAS_RIGHT:\n        seen = seen & (cols >= rows + lo_diag)",
           "a window's lower bound masked only when it has an upper bound too: with (left, -1) a row sees "
           "the keys left of its window in the tiles the loop visits; a lower bound alone"),
    Mutant("window_unmasked_run_from_first_row", S,
           "full_lo = tl.cdiv(tl.maximum(last_row + lo_diag, 0), BLOCK_K) * BLOCK_K",
           "full_lo = tl.cdiv(tl.maximum(first_row + lo_diag, 0), BLOCK_K) * BLOCK_K",
           "the unmasked run starts at the first row's window edge: later rows see keys left of their "
           "window; forward and dq, window left with a query tile spanning a key tile edge"),
    Mutant("window_key_range_from_last_row", S,
           "lo = (tl.maximum(first_row + lo_diag, 0) // BLOCK_K) * BLOCK_K",
           "lo = (tl.maximum(last_row + lo_diag, 0) // BLOCK_K) * BLOCK_K",
           "the key loop starts at the last row's window: earlier rows lose keys (forward and dq); window left"),
    Mutant("window_dkdv_rows_from_first_key", S, "hi = tl.minimum(hi, tl.maximum(last_col - lo_diag + 1, 0))",
           "hi = tl.minimum(hi, tl.maximum(first_col - lo_diag + 1, 0))",
           "dk/dv stop at the rows that see the key tile's first key: later keys lose rows; backward, window left"),
    Mutant("softcap_tanh_clamped_early", S, "x = tl.clamp(x, -9.0, 9.0, propagate_nan=tl.PropagateNan.ALL)",
           "x = tl.clamp(x, -4.0, 4.0, propagate_nan=tl.PropagateNan.ALL)",
           "tanh's argument clamped at 4, where tanh is 1 - 6.7e-4, not at 9 (float32's 1): scores past "
           "4 times the cap off by up to 6.7e-4 c; a softcap a few times smaller than the scores"),
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
    Mutant("varlen_bottom_right_from_max_lengths", F, "diag = diagonal(n_q, n_k, BOTTOM_RIGHT)",
           "diag = diagonal(N_Q, N_K, BOTTOM_RIGHT)",
           "packed input: the bottom-right diagonal from the longest lengths, not the sequence's; varlen, "
           "bottom-right, sequences of different n_k - n_q"),
    # -- the slice-offset table's cache (a sixth-session round: caches keyed on too little) --
    Mutant("offsets_cached_by_sizes", F,
           "return _slice_offsets(tuple(t.shape[:-2]), tuple(t.stride()[:-2]), t.device, group)",
           "return _slice_offsets(tuple(t.shape[:-2]), slice_offsets.__dict__.setdefault("
           "(tuple(t.shape[:-2]), group), tuple(t.stride()[:-2])), t.device, group)",
           "slice-offset table cached by the leading sizes only: a later layout of the same shape (a "
           "transposed batch, a broadcast or sliced dim) reads the first layout's slices; two layouts of "
           "one shape in one process"),
    Mutant("offsets_cached_without_group", F,
           "return _slice_offsets(tuple(t.shape[:-2]), tuple(t.stride()[:-2]), t.device, group)",
           "return slice_offsets.__dict__.setdefault((tuple(t.shape[:-2]), tuple(t.stride()[:-2])), "
           "_slice_offsets(tuple(t.shape[:-2]), tuple(t.stride()[:-2]), t.device, group))",
           "slice-offset table cached without the group: a kv tensor's table by query head and by kv head "
           "are confused; GQA (the backward uses both for one k)"),
    # -- the split-KV path (flash.decode): splits, the group's rows, the lse merge --
    Mutant("merge_output_not_rescaled", D, "acc = acc * alpha[:, None] + w[:, None] * o_s",
           "acc = acc + w[:, None] * o_s",
           "the merge does not rescale the merged output when a later split has a larger lse; split-KV "
           "path (2+ splits)"),
    Mutant("merge_weights_not_rescaled", D, "w_sum = w_sum * alpha + w", "w_sum = w_sum + w",
           "the merge's sum of weights not rescaled when the running max grows; 2+ splits"),
    Mutant("partial_lse_in_natural_log", D,
           "lse_s = tl.where(empty, float(\"-inf\"), m_i + tl.log2(l_i))  # base 2",
           "lse_s = tl.where(empty, float(\"-inf\"), (m_i + tl.log2(l_i)) / 1.4426950408889634)",
           "the splits' lse stored in natural log and merged as base 2: wrong weights; 2+ splits"),
    Mutant("merged_lse_in_base_2", D,
           "lse = tl.where(empty, float(\"-inf\"), (m + tl.log2(w_sum)) / 1.4426950408889634)",
           "lse = tl.where(empty, float(\"-inf\"), m + tl.log2(w_sum))",
           "the split-KV path stores its lse in base 2 (o is right); any call that splits"),
    Mutant("splits_overlap_by_a_tile", D, "end = tl.minimum(start + split_len, hi)",
           "end = tl.minimum(start + split_len + BLOCK_K, hi)",
           "each split also reads the next split's first tile: keys counted twice; 2+ splits"),
    Mutant("split_end_drops_last_key", D, "end = tl.minimum(start + split_len, hi)",
           "end = tl.minimum(start + split_len, hi - 1)",
           "the last key some row sees is in no split; any call that splits"),
    Mutant("long_splits_truncated_at_1024_keys", D, "end = tl.minimum(start + split_len, hi)",
           "end = tl.minimum(start + tl.minimum(split_len, 1024), hi)",
           "a split longer than 1024 keys ends after 1024: keys past that in no split; the default split "
           "of a cache of 16k keys or more"),
    Mutant("split_rows_head_by_modulo", D,
           "q_slice = kv_slice * GROUP + offs_r // tl.maximum(n_q, 1)",
           "q_slice = kv_slice * GROUP + offs_r % GROUP",
           "a group's rows mapped to query heads by r % group: rows of one head read another's q and "
           "write its o; GQA with n_q >= 2"),
    Mutant("split_row_tiles_floored", D, "triton.cdiv(group * part_rows, TILE_ROWS)",
           "group * part_rows // TILE_ROWS",
           "the packed layout's row tiles counted by floor, not ceiling: the group's last partial tile "
           "(or all of it, under 16 rows) is never computed; GPU tile layout (flash.decode.PACK_HEADS, "
           "which the CPU suite sets in test_split_kv_packed_heads), a group of fewer than 16 rows"),
    Mutant("split_packed_tile_starts_by_head", D, "        offs_r = tile * BLOCK_Q + tl.arange(0, BLOCK_Q)\n",
           "        offs_r = tile * n_q + tl.arange(0, BLOCK_Q)\n",
           "a packed tile starts at tile x n_q, the one-head layout's start: the second tile of a group "
           "past 16 rows recomputes rows of the first and the last rows are never computed; GPU tile "
           "layout, GQA with group x n_q > 16 (3 heads of 9 rows)"),
    Mutant("split_kv_head_by_query_slice", D, "tl.load(K_OFFSETS + kv_slice * GROUP)",
           "tl.load(K_OFFSETS + kv_slice)",
           "the split kernel reads k of the kv slice numbered like the group, not its first query slice: "
           "the wrong kv head's keys; GQA"),
    Mutant("merge_lse_rows_without_stride", D,
           "tl.store(LSE + q_slice.to(tl.int64) * stride_ls + rows * stride_ln, lse, mask=mask_r)",
           "tl.store(LSE + q_slice.to(tl.int64) * stride_ls + rows, lse, mask=mask_r)",
           "the merge stores a packed row's lse at start + row, not (start + row) x heads: right for "
           "dense calls (row stride 1) and for a split sequence of one row at the start of the batch, "
           "wrong for any other; VarlenCase((2, 4, 1), (33, 1100, 40), heads 2)"),
    Mutant("merge_o_rows_at_head_dim", D, "rows[:, None] * stride_on + offs_d[None, :]",
           "rows[:, None] * HEAD_DIM + offs_d[None, :]",
           "the merge steps o's rows by d, not by o's row stride (heads x d when packed): as "
           "merge_lse_rows_without_stride, for o"),
    Mutant("merge_slot_of_first_sequence", D,
           "part = ((slot + split) * num_q_slices + q_slice).to(tl.int64) * part_rows + offs_r",
           "part = (split * num_q_slices + q_slice).to(tl.int64) * part_rows + offs_r",
           "the merge reads every packed sequence's splits from the first sequence's slots; packed, two "
           "sequences that split"),
    Mutant("split_past_plan_stores", D, "mask_r = in_tile & (offs_r < GROUP * n_q) & as_vector(split < splits, offs_r)",
           "mask_r = in_tile & (offs_r < GROUP * n_q)",
           "programs past a sequence's splits store an empty partial into the next sequence's slots "
           "(or past the buffer); packed sequences with fewer splits than the longest"),
    Mutant("forward_skips_unsplit_sequences", F, "split = tl.load(PLAN + seq * PLAN_FIELDS) > 0",
           "split = tl.load(PLAN + seq * PLAN_FIELDS) >= 0",
           "packed input with a split sequence: the forward skips every sequence, so those that do not "
           "split are never computed; packed, one sequence that splits beside one that does not"),
    Mutant("split_kv_alignment_assumed", D, "OFFSET_ALIGN=offset_alignment(q, k, v),", "OFFSET_ALIGN=16,",
           "the split kernel promised 16-element aligned slice starts, so the compiler loads 16-byte "
           "vectors from starts that are not (the gapped layout, a decode shape that splits); GPU only, "
           "the interpreter ignores alignment hints", gpu_only=True),
    # -- the tensor-descriptor (TMA) reads of the forward: when they are chosen, what they read --
    Mutant("tma_row_stride_unchecked", F,
           "if t.stride(-1) != 1 or t.stride(-2) <= 0 or (t.stride(-2) * size) % 16 \\",
           "if t.stride(-1) != 1 or t.stride(-2) <= 0 \\",
           "descriptors built over rows that are not 16-byte aligned (a head dim of 100 at 16 bits): "
           "the copy engine cannot take them (a fault, or rows read from the wrong address)"),
    Mutant("tma_slice_offsets_unchecked", F, "return (offset_alignment(k, v) * size) % 16 == 0",
           "return True",
           "descriptors over slices that start off a 16-byte boundary (the gapped layout)"),
    Mutant("tma_v_reads_k_row_stride", F,
           "v_base = tl.make_tensor_descriptor(v_base, shape=[n_k, HEAD_DIM], strides=[stride_vn, 1],",
           "v_base = tl.make_tensor_descriptor(v_base, shape=[n_k, HEAD_DIM], strides=[stride_kn, 1],",
           "v read with k's row stride: right only while k and v share a layout"),
    Mutant("tiles_follow_read_path", F,
           "    config = forward_config(d, q.dtype, features)  # the same tiles whichever path reads k and v",
           "    config = forward_config(d, q.dtype, features)  # the same tiles whichever path reads k and v\n"
           "    if not tma and config == ForwardConfig(128, 128, 8, 3):\n"
           "        config = ForwardConfig(128, 64, 8, 3)",
           "the pointer path keeps 128x64 tiles where the descriptors take 128x128 (main until 2026-12-05): "
           "the online softmax sums in another order, so a slice alone (descriptors) differs in the last "
           "bits from its part of a gapped batch (pointers); 16 bits, d = 65..128, n_k > 64"),
    # -- the replay of a recorded call (flash.replay): what the signature holds, what is substituted --
    Mutant("replay_key_ignores_k_strides", R, "k.shape, k.stride(), k.dtype", "k.shape, k.dtype",
           "a call whose k has another layout (same shape) replays the launch recorded with the first "
           "layout's strides: it reads k wrongly; any two calls with k of two layouts"),
    Mutant("replay_key_ignores_q_shape", R, "key = (q.shape, q.stride(),", "key = (q.stride(),",
           "a call whose q has another shape with the same strides (the rows of a 2-D q, a leading dim) "
           "replays the first call's grid and lengths; q [9, 16] then [5, 16] with the same k, v"),
    Mutant("replay_key_ignores_alignment", R, "q.data_ptr() % 256,", "0,",
           "a call whose q is a view at another alignment replays a kernel compiled for 16-byte-aligned "
           "q (misaligned vector loads on a GPU); two calls, q aligned then not"),
    Mutant("replay_key_ignores_option_types", R, "*[_typed(option) for option in options])",
           "*options)",
           "an option equal to a recorded one but of a type the checks refuse (scale=True after 1.0, "
           "window=(2, 2.0) after (2, 2)) replays instead of raising"),
    Mutant("replay_reuses_recorded_tensors", R, "head = tuple((role, None if role else value)",
           "head = tuple((None, value)",
           "the recording keeps the first call's tensors and replays on them: later calls return an "
           "output never written (and keep the first call's memory alive); any repeated signature"),
    # -- a held-out round (2026-12-04, nineteenth session): 24 bugs written by a helper that read
    # only flash/ and this catalogue, not the tests; see docs/mutation.md --
    # -- forward kernel and its band arithmetic (flash.forward, flash.scores) --
    Mutant("output_rounded_to_half_before_division", F,
           "acc = acc / l_i[:, None]",
           "acc = acc.to(tl.float16).to(tl.float32) / l_i[:, None]",
           "the unnormalized output is rounded to float16 before the division by l, for every input "
           "dtype: float32 results off by ~2^-11 relative (and 16-bit inputs overflow to inf once "
           "|sum p v| > 65504); float32, n_q = n_k = 1, d = 1, v = 0.1 (dense forward path)"),
    Mutant("unmasked_run_one_key_past_first_row", S,
           "full_hi = tl.minimum(full_hi, (tl.maximum(first_row + hi_diag + 1, 0) // BLOCK_K) * BLOCK_K)",
           "full_hi = tl.minimum(full_hi, (tl.maximum(first_row + hi_diag + 2, 0) // BLOCK_K) * BLOCK_K)",
           "off by one at a tile boundary: a key tile whose last key is one past the first row's "
           "band goes to the unmasked run, so that row sees one future key (forward and dq); only "
           "when first_row + hi_diag + 2 is a multiple of BLOCK_K: causal bottom-right n_q = 2, "
           "n_k = 64 (hi_diag = 62), or a window right bound of 62"),
    Mutant("window_unmasked_run_floor", S,
           "full_lo = tl.cdiv(tl.maximum(last_row + lo_diag, 0), BLOCK_K) * BLOCK_K",
           "full_lo = (tl.maximum(last_row + lo_diag, 0) // BLOCK_K) * BLOCK_K",
           "the unmasked run starts at the tile holding the last row's lower window edge (rounded "
           "down, not up), so that tile is not masked: rows see keys left of their window (forward "
           "and dq); window (0, -1), n_q = n_k = 64 (row 1 sees key 0)"),
    Mutant("group_size_needs_a_batch_dim", F,
           "return q.shape[-3] // k.shape[-3] if q.dim() >= 3 else 1",
           "return q.shape[-3] // k.shape[-3] if q.dim() > 3 else 1",
           "grouped-query heads are recognized only with a batch dim: rank-3 [h, n, d] inputs with "
           "h_q != h_kv get group 1, so k/v's offset table is indexed past its end (forward and "
           "backward); q [2, n, d], k, v [1, n, d]"),
    Mutant("window_key_range_unclamped", S,
           "lo = (tl.maximum(first_row + lo_diag, 0) // BLOCK_K) * BLOCK_K",
           "lo = ((first_row + lo_diag) // BLOCK_K) * BLOCK_K",
           "the key loop's start is no longer clamped at 0: where a tile's first row's window edge "
           "is before key 0 the loop starts at a negative tile, and the masks (cols < n_k, cols >= "
           "i - left) let the first rows see 'keys' read from before the slice (the previous "
           "slice's, or memory before the tensor); forward and dq. Interpreter (floor division): "
           "window (1, -1), any n, 2 slices; compiled (truncation): window left >= 65"),
    # -- the Triton backward (flash.backward_triton) --
    Mutant("delta_in_input_dtype", B,
           "delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)",
           "delta = tl.sum(o * do, 1).to(tl.float32)",
           "D = rowsum(dO * O) multiplied and summed in the input dtype, not float32: 16-bit "
           "rounding of every product and partial sum (float16 overflows to inf once a product "
           "passes 65504); backward, bfloat16 with d = 128, or float16 with |o|, |do| ~ 300"),
    Mutant("dv_also_scaled", B,
           "    dk *= sm_scale\n",
           "    dk *= sm_scale\n    dv *= sm_scale\n",
           "dv multiplied by the softmax scale as dk is (copy-paste): dv = scale P^T dO; backward, "
           "any scale != 1 (the default 1/sqrt(d) with d >= 2)"),
    Mutant("dk_allocated_like_k", B,
           "dk = torch.empty(k.shape, dtype=k.dtype, device=q.device)",
           "dk = torch.empty_like(k)",
           "dk allocated with k's strides (empty_like keeps a permuted layout) while the kernel "
           "writes it contiguously (dkv_strides): dk scrambled only for a non-contiguous k; "
           "backward, k = x.transpose(-3, -2) from [b, n, h, d] with h >= 2"),
    Mutant("preprocess_grid_floor", B,
           "tiles = triton.cdiv(n_q, _PREPROCESS_BLOCK_Q)",
           "tiles = n_q // _PREPROCESS_BLOCK_Q",
           "the D = rowsum(dO * O) grid rounds down: rows past the last full 64-row tile keep the "
           "torch.empty garbage in D (with n_q < 64 no D at all); backward, n_q % 64 != 0, e.g. n_q = 1"),
    Mutant("dkdv_slice_stride_from_n_q", B,
           "dkv_strides=(n_k * d, d)",
           "dkv_strides=(n_q * d, d)",
           "dk/dv slices written n_q rows apart instead of n_k: slices overlap (n_q < n_k) or run "
           "past the tensor (n_q > n_k); backward, 2 kv slices (batch or kv heads), n_q != n_k"),
    # -- packed variable-length input --
    Mutant("varlen_o_strides_swapped", V,
           "o_strides=(d, heads * d), lse_strides=(1, heads), n_q=max_seqlen_q,",
           "o_strides=(heads * d, d), lse_strides=(1, heads), n_q=max_seqlen_q,",
           "packed o written with its slice and row strides swapped (as if [heads, total, d]): "
           "right for one head only; varlen, 2 heads, one sequence of length 1"),
    Mutant("varlen_dkv_row_stride_from_q_heads", V,
           "dkv_strides=(d, kv_heads * d)",
           "dkv_strides=(d, heads * d)",
           "packed dk/dv rows written h_q * d apart instead of h_kv * d: scattered and out of "
           "bounds only with grouped heads; varlen backward, h_q = 2, h_kv = 1, total_k >= 2"),
    Mutant("varlen_empty_rows_from_max_lengths", S,
           "(varlen or n_q > n_k)",
           "n_q > n_k",
           "packed input: the empty-row guard decided from max_seqlen_q > max_seqlen_k instead of "
           "on for every packed call, so a sequence with n_q > n_k among longer key sequences "
           "gets NaN (0/0, exp2(-inf + inf)) in its rows that see no key; varlen causal "
           "bottom-right, sequences q (2, 1), k (1, 2)"),
    # -- split-KV (flash.decode): plan, partials, lse merge --
    Mutant("merge_overwrites_unsplit_sequences", D,
           "mask_r = (offs_r < n_q) & as_vector(splits > 0, offs_r)",
           "mask_r = (offs_r < n_q)",
           "the merge also stores for sequences with no splits: o = 0, lse = -inf over what the "
           "forward computed; packed, one sequence that splits beside one that does not "
           "(split_keys=16: q lengths (1, 20), k lengths (64, 20))"),
    Mutant("merge_reads_partials_at_block_d", D,
           "o_s = tl.load(O_PART + part[:, None] * HEAD_DIM",
           "o_s = tl.load(O_PART + part[:, None] * BLOCK_D",
           "the merge reads partial outputs as if padded to BLOCK_D while the split kernel wrote "
           "them HEAD_DIM apart: wrong for every split but the first when d is not a power of "
           "two or d < 16; split_keys=16, n_q = 1, n_k = 64, d = 24"),
    Mutant("split_plan_window_start_one_late", D,
           "lo = min(max(diag - features.left, 0), n_k)",
           "lo = min(max(diag - features.left + 1, 0), n_k)",
           "the split plan starts one key after the first row's window edge; the tile alignment "
           "hides it except when diag - left is one before a tile boundary, then the first row "
           "loses its first key; split_keys=16, bottom-right window (32, -1), n_q = 1, n_k = 48"),
    Mutant("split_lse_partials_in_input_dtype", D,
           '"lse_part", (slots, slices, part_rows), torch.float32, q.device)',
           '"lse_part", (slots, slices, part_rows), q.dtype, q.device)',
           "the splits' base-2 lse stored in the input dtype: 16-bit inputs get merge weights and a "
           "final lse off by ~2^-9 |lse| (float32 unchanged); float16/bfloat16 that splits "
           "(split_keys=16, n_q = 1, n_k = 64), lse compared at float32 precision"),
    Mutant("split_kv_slice_precedence", D,
           "kv_slice = pid % (num_q_slices // GROUP)",
           "kv_slice = pid % num_q_slices // GROUP",
           "operator precedence: the split kernel's kv slice is (pid % S) // GROUP, not "
           "pid % (S // GROUP): with grouped heads, kv slices past the first read the wrong kv "
           "head and write the wrong query heads' partials (others left as torch.empty); split "
           "path (split_keys=16, n_q = 1, n_k = 64), h_q = 4, h_kv = 2"),
    # -- the autograd wrapper (flash.function) --
    Mutant("graph_only_if_q_requires_grad", FN,
           "t.requires_grad\n                                           for t in (q, k, v))",
           "t.requires_grad\n                                           for t in (q,))",
           "the autograd graph is built only when q requires grad: with k or v alone requiring "
           "grad, o has no grad_fn and k.grad stays None (backward raises); q plain, k and v "
           "requires_grad=True"),
    Mutant("lse_left_differentiable", FN,
           "        ctx.mark_non_differentiable(lse)\n        return o, lse\n",
           "        return o, lse\n",
           "attention_with_lse no longer marks the lse non-differentiable: lse.requires_grad is True "
           "and a loss through it is silently given no gradient instead of none being asked for; "
           "attention_with_lse with q.requires_grad=True, check lse.requires_grad"),
    Mutant("apply_scale_softcap_swapped", FN,
           "FlashAttention.apply(q, k, v, is_causal, backward, scale, window, softcap, causal_alignment,",
           "FlashAttention.apply(q, k, v, is_causal, backward, softcap, window, scale, causal_alignment,",
           "attention() passes scale and softcap to the autograd Function in swapped positions: "
           "only calls that build a graph compute with the wrong scale / cap (no-grad calls are "
           "right); attention(q, k, v, scale=0.5) with q.requires_grad=True"),
    # -- input validation (flash.checks) --
    Mutant("gqa_heads_not_multiple_accepted", C,
           "if h_q % h_k if h_k else h_q:",
           "if h_q < h_k if h_k else h_q:",
           "the grouped-query check weakened to h_q >= h_kv: q heads that are not a multiple of the "
           "kv heads are accepted (and read the offset table past its end); q with 3 heads, k and "
           "v with 2 must raise ValueError"),
    Mutant("varlen_single_query_without_keys_accepted", C,
           "if n_q > 0 and n_k == 0:",
           "if n_q > 1 and n_k == 0:",
           "off by one: a packed sequence with exactly one query and no keys (attention over no "
           "keys, undefined) is accepted instead of raising ValueError; cu_seqlens_q [0, 1], "
           "cu_seqlens_k [0, 0] beside another sequence with keys"),
    Mutant("max_seqlen_checked_against_other_lengths", C,
           '(("max_seqlen_q", max_seqlen_q, lengths["cu_seqlens_q"]),\n'
           '                             ("max_seqlen_k", max_seqlen_k, lengths["cu_seqlens_k"])):',
           '(("max_seqlen_q", max_seqlen_q, lengths["cu_seqlens_k"]),\n'
           '                             ("max_seqlen_k", max_seqlen_k, lengths["cu_seqlens_q"])):',
           "max_seqlen_q is checked against the key lengths and max_seqlen_k against the query "
           "lengths: a valid call with longer keys than queries is refused, and a too-small "
           "max_seqlen_q passes when keys are shorter; varlen q lengths (1), k lengths (5), "
           "max_seqlen_q = 1, max_seqlen_k = 5 (wrongly raises)"),
)
