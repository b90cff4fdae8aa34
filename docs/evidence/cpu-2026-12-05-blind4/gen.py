"""Writes catalogue.json (the planted bugs) and checks every ``old`` occurs exactly once."""
import json
from pathlib import Path

SRC = Path("/work/main/kernels/triton_jfa")
K, H = "kernels", "host"

M = []


def mut(name, target, desc, old, new):
    M.append(dict(name=name, description=desc, target=target, old=old, new=new))


# ---------------------------------------------------------------- forward kernel
mut("fwd_full_end_from_last_row", K,
    "Forward causal: the unmasked KV range ends at the tile's last row's diagonal instead of its first row's, so "
    "earlier rows of a query tile see future keys in whole blocks before the diagonal.",
    "full_end = tl.maximum(tl.minimum(k_len, m_blk * BLOCK_M + shift + 1), 0)",
    "full_end = tl.maximum(tl.minimum(k_len, last_row + shift + 1), 0)")

mut("causal_shift_sign_flipped", K,
    "Bottom-right alignment shift computed as L_q - L_k instead of L_k - L_q (all passes): wrong diagonal "
    "whenever a sequence's query and key lengths differ.",
    "shift = k_len - q_len", "shift = q_len - k_len")

mut("fwd_no_safe_max", K,
    "Online softmax subtracts the raw running max instead of the -inf-guarded one, so a row with no visible key "
    "in a KV block (bottom-right with L_k < L_q, windows) turns into NaN.",
    "    p = tl.exp2(s - m_safe[:, None])\n    alpha = tl.exp2(m_i - m_safe)",
    "    p = tl.exp2(s - m_new[:, None])\n    alpha = tl.exp2(m_i - m_new)")

mut("fwd_empty_row_division", K,
    "Forward divides the accumulator by l_i without guarding empty rows, so query rows with no visible key get "
    "0/0 = NaN instead of O = 0.",
    "o = acc / tl.where(empty, 1.0, l_i)[:, None]",
    "o = acc / l_i[:, None]")

mut("fwd_window_lo_uses_right_side", K,
    "Forward window start is computed with WIN_RIGHT instead of WIN_LEFT, skipping keys on the left of the window "
    "(causal windows and asymmetric windows).",
    "            lo = tl.maximum(m_blk * BLOCK_M + shift - WIN_LEFT, 0) // BLOCK_N * BLOCK_N\n"
    "            hi = tl.maximum(tl.minimum(hi, last_row + shift + WIN_RIGHT + 1), 0)\n"
    "            full_end = lo",
    "            lo = tl.maximum(m_blk * BLOCK_M + shift - WIN_RIGHT, 0) // BLOCK_N * BLOCK_N\n"
    "            hi = tl.maximum(tl.minimum(hi, last_row + shift + WIN_RIGHT + 1), 0)\n"
    "            full_end = lo")

mut("fwd_window_hi_off_by_one", K,
    "Forward window end drops the +1 of the exclusive bound, so the tile's last row misses its right-most window "
    "key when that key starts a new KV block.",
    "            hi = tl.maximum(tl.minimum(hi, last_row + shift + WIN_RIGHT + 1), 0)\n            full_end = lo",
    "            hi = tl.maximum(tl.minimum(hi, last_row + shift + WIN_RIGHT), 0)\n            full_end = lo")

mut("fwd_acc_not_rescaled", K,
    "Forward forgets to rescale the output accumulator by alpha when the running max grows, wrong whenever a row "
    "spans more than one KV block and a later block raises its max.",
    "acc = acc * alpha[:, None] + _dot(", "acc = acc + _dot(")

# ---------------------------------------------------------------- backward kernels
mut("dkdv_window_rows_cols_swapped", K,
    "dK/dV window test passes key and query indices in swapped order, right only for symmetric windows with "
    "zero alignment shift.",
    "_in_window(offs_m[None, :], offs_n[:, None], shift, WIN_LEFT, WIN_RIGHT)",
    "_in_window(offs_n[:, None], offs_m[None, :], shift, WIN_LEFT, WIN_RIGHT)")

mut("dkdv_causal_row_start_shift_sign", K,
    "dK/dV causal first query row uses +shift instead of -shift, skipping query rows that see the KV block under "
    "bottom-right alignment with L_k > L_q.",
    "m_lo = tl.maximum(n_blk * BLOCK_N - shift, 0) // BLOCK_M * BLOCK_M",
    "m_lo = tl.maximum(n_blk * BLOCK_N + shift, 0) // BLOCK_M * BLOCK_M")

mut("dkdv_gqa_interleaved_heads", K,
    "dK/dV sums query heads h_kv + g * H_kv (interleaved) instead of h_kv * group + g, wrong for GQA with more "
    "than one KV head and group > 1.",
    "h = h_kv * GROUP + g", "h = h_kv + g * NUM_HEADS")

mut("dkdv_dv_store_mask_uses_d", K,
    "dV store is masked with the query/key head dim instead of the value head dim, dropping or overrunning dV "
    "columns when D_v != D.",
    "_round_cast(dv, DV.dtype.element_ty, INTERPRET), mask=col_ok[:, None] & dv_ok[None, :])",
    "_round_cast(dv, DV.dtype.element_ty, INTERPRET), mask=col_ok[:, None] & d_ok[None, :])")

mut("dq_causal_hi_off_by_one", K,
    "dQ causal key bound drops the +1 of the exclusive end, so the tile's last row loses its diagonal key when it "
    "starts a new KV block.",
    "hi = tl.maximum(tl.minimum(k_len, last_row + shift + 1), 0)\n        else:",
    "hi = tl.maximum(tl.minimum(k_len, last_row + shift), 0)\n        else:")

mut("dq_broadcast_rows_from_q_start", K,
    "Broadcast-Q dQ partials are written at query rows instead of per-sequence output rows, so every sequence "
    "overwrites the first L_Q rows and the rest of the partial buffer is never written.",
    "            dq_rows = o_rows\n", "            dq_rows = q_start + offs_m\n")

mut("dq_mask_dropped", K,
    "dQ recomputes P without the causal/window/key-bound mask, so hidden keys inside visited blocks leak into dQ "
    "under any mask.",
    "p = tl.exp2(tl.where(visible, s - lse[:, None], float(\"-inf\")))",
    "p = tl.exp2(s - lse[:, None])")

mut("dq_sparse_tile_as_block", K,
    "Block-sparse dQ takes the query tile number as the selection's query-block number, wrong when the selection "
    "block is taller than BLOCK_M.",
    "sel = tl.load(SEL_START + b).to(tl.int64) + (m_blk * BLOCK_M) // SEL_M  # flattened query block\n"
    "            e_lo",
    "sel = tl.load(SEL_START + b).to(tl.int64) + m_blk  # flattened query block\n"
    "            e_lo")

mut("preprocess_broadcast_rows_from_q_start", K,
    "Delta preprocess reads and writes query rows instead of output rows, so under broadcast-Q every sequence "
    "after the first has an unwritten delta.",
    "    rows = out_start + offs_m\n", "    rows = q_start + offs_m\n")

mut("dkdv_sparse_tile_as_block", K,
    "Block-sparse dK/dV takes the KV tile number as the transposed selection's KV-block number, wrong when the "
    "selection's KV block is wider than BLOCK_N.",
    "kv = tl.load(T_START + b).to(tl.int64) + (n_blk * BLOCK_N) // SEL_N",
    "kv = tl.load(T_START + b).to(tl.int64) + n_blk")

mut("fwd_mx_key_scale_row_ignores_group", K,
    "MXFP8 forward strides the K/V block-scale rows by H_q instead of H_kv heads, so with GQA the keys and values "
    "are dequantized with other rows' scales.",
    "sk_row = (NUM_HEADS // GROUP) * (HEAD_DIM // 32)\n            sv_row = (NUM_HEADS // GROUP) * (HEAD_DIM_V // 32)",
    "sk_row = NUM_HEADS * (HEAD_DIM // 32)\n            sv_row = NUM_HEADS * (HEAD_DIM_V // 32)")

# ---------------------------------------------------------------- host
mut("host_window_alignment_only_when_causal", H,
    "BOTTOM_RIGHT is passed only for causal calls, so a non-causal sliding window with bottom-right alignment is "
    "placed on the top-left diagonal.",
    "BOTTOM_RIGHT=problem.mask != \"none\" and problem.causal_alignment == \"bottom_right\"",
    "BOTTOM_RIGHT=problem.causal and problem.causal_alignment == \"bottom_right\"")

mut("host_aligned_ignores_head_dim_stride", H,
    "The ALIGNED fast path no longer requires unit head-dim strides, so tensors strided along D (with 16-multiple "
    "token/head strides) are read as if contiguous.",
    "return all(t.stride(2) == 1 and t.stride(0) % 16 == 0", "return all(t.stride(0) % 16 == 0")

mut("host_unbounded_window_too_short", H,
    "An unbounded window side is passed as total_k_rows + 1, which is shorter than the query length when queries "
    "outnumber all keys, so long cross-attention queries lose keys.",
    "unbounded = problem.total_q_rows + problem.total_k_rows + 1",
    "unbounded = problem.total_k_rows + 1")

mut("host_lse_init_zero", H,
    "LSE buffer starts at 0 instead of -inf, so output rows before offsets[0] (no sequence) report lse = 0.",
    "lse = torch.full((h_q, rows), float(\"-inf\"), dtype=torch.float32, device=q.device)",
    "lse = torch.zeros((h_q, rows), dtype=torch.float32, device=q.device)")

mut("host_preprocess_head_dim_v", H,
    "The delta preprocess is launched with the query/key head dim as its value head dim, so delta is wrong when "
    "D_v != D.",
    "HEAD_DIM_V=problem.head_dim_v, BLOCK_M=cfg[\"BLOCK_M\"], BLOCK_DV",
    "HEAD_DIM_V=problem.head_dim, BLOCK_M=cfg[\"BLOCK_M\"], BLOCK_DV")

mut("host_broadcast_dq_sum_layout", H,
    "Broadcast-Q dQ partials are viewed as [L_Q, B, ...] and summed over the wrong axis, mixing rows of "
    "different queries when B > 1.",
    "dq = partial.view(problem.batch, l_q, h_q, problem.head_dim).sum(0).to(q.dtype)",
    "dq = partial.view(l_q, problem.batch, h_q, problem.head_dim).sum(1).to(q.dtype)")

mut("host_preprocess_persistent_arrays", H,
    "The delta preprocess (one program per tile) is handed the persistent dQ schedule instead of the grid one, so "
    "it covers only as many tiles as there are programs.",
    "planned = self.arrays(\"dq\" if kind == \"pre\" else kind, grid=kind == \"pre\")",
    "planned = self.arrays(\"dq\" if kind == \"pre\" else kind)")

mut("host_fwd_grid_kv_heads", H,
    "The forward grid's head axis uses the KV head count, so with GQA only the first H_kv query heads are computed.",
    "kmod._fwd_kernel[(fw[\"programs\"], h_q)](",
    "kmod._fwd_kernel[(fw[\"programs\"], problem.num_heads_kv)](")

if __name__ == "__main__":
    srcs = {K: (SRC / "_kernels.py").read_text(), H: (SRC / "_host.py").read_text()}
    names = set()
    for m in M:
        assert m["name"] not in names, m["name"]
        names.add(m["name"])
        n = srcs[m["target"]].count(m["old"])
        assert n == 1, (m["name"], n)
        assert m["old"] != m["new"]
    doc = {"format": "jfa-verify-mutants/1", "name": "triton_jfa_blind4",
           "description": "Blind planted bugs in triton_jfa's kernels and host code, written from the kernel source "
                          "alone (no view of the suite).",
           "kernel": "triton_jfa", "builder": "jfa_verify.kernels.triton_jfa:build",
           "targets": {"kernels": "jfa_verify.kernels.triton_jfa._kernels",
                       "host": "jfa_verify.kernels.triton_jfa._host"},
           "mutants": M}
    Path("/tmp/w/blind4/catalogue.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(len(M), "mutants written")
