import json
K = "kernels"; H = "host"
M = []
def m(name, target, old, new, desc, cfg):
    M.append(dict(name=name, description=desc, target=target, old=old, new=new, _cfg=cfg))

# ---- forward kernel
m("fwd_full_end_unclamped", K,
  "full_end = tl.maximum(tl.minimum(k_len, m_blk * BLOCK_M + shift + 1), 0)",
  "full_end = tl.maximum(m_blk * BLOCK_M + shift + 1, 0)",
  "forward causal: unmasked KV range not clamped to the key length", ["cross_tl"])
m("fwd_m_safe_dropped", K,
  "m_safe = tl.where(m_new == float(\"-inf\"), 0.0, m_new)  # rows that saw no key yet",
  "m_safe = m_new  # rows that saw no key yet",
  "forward online softmax: running max not guarded for rows that saw no key yet", ["cross_br", "window"])
m("fwd_v_ptr_q_start", K,
  "V_ptr = V + k_start * stride_vt + h_kv * stride_vh",
  "V_ptr = V + q_start * stride_vt + h_kv * stride_vh",
  "forward: V base pointer from the query offsets", ["cross_br"])
m("fwd_window_hi_off_by_one", K,
  "hi = tl.maximum(tl.minimum(hi, last_row + shift + WIN_RIGHT + 1), 0)\n            full_end = lo",
  "hi = tl.maximum(tl.minimum(hi, last_row + shift + WIN_RIGHT), 0)\n            full_end = lo",
  "forward window: KV end of the tile's window one key short", ["window"])
# ---- dQ kernel
m("dq_causal_hi_off_by_one", K,
  "hi = tl.maximum(tl.minimum(k_len, last_row + shift + 1), 0)\n        else:",
  "hi = tl.maximum(tl.minimum(k_len, last_row + shift), 0)\n        else:",
  "dQ causal: KV end one key short of the tile's last diagonal", ["gqa_causal"])
m("dq_gqa_interleaved", K,
  "h_kv = h // GROUP\n    offs_d = tl.arange(0, BLOCK_D)\n    offs_dv = tl.arange(0, BLOCK_DV)\n    d_ok",
  "h_kv = h % (NUM_HEADS // GROUP)\n    offs_d = tl.arange(0, BLOCK_D)\n    offs_dv = tl.arange(0, BLOCK_DV)\n    d_ok",
  "dQ: query head mapped to KV head interleaved instead of grouped", ["gqa_causal"])
m("dq_broadcast_rows", K,
  "dq_rows = o_rows",
  "dq_rows = q_start + offs_m",
  "dQ broadcast-Q: partial dQ written at query rows, not per-sequence output rows", ["broadcast"])
m("dq_sparse_sel_block_n", K,
  "(m_blk * BLOCK_M) // SEL_M  # flattened query block\n            e_lo",
  "(m_blk * BLOCK_M) // SEL_N  # flattened query block\n            e_lo",
  "dQ block-sparse: flattened query block computed with the KV block size", ["sparse"])
# ---- dK/dV kernel
m("dkdv_causal_shift_sign", K,
  "m_lo = tl.maximum(n_blk * BLOCK_N - shift, 0) // BLOCK_M * BLOCK_M",
  "m_lo = tl.maximum(n_blk * BLOCK_N + shift, 0) // BLOCK_M * BLOCK_M",
  "dK/dV causal: first query row uses +shift", ["cross_br"])
m("dkdv_gqa_interleaved", K,
  "h = h_kv * GROUP + g",
  "h = h_kv + g * NUM_HEADS",
  "dK/dV: group's query heads enumerated interleaved", ["gqa_causal"])
m("dkdv_delta_query_rows", K,
  "                    delta = tl.load(DELTA + h * stride_lh + o_rows, mask=row_ok, other=0.0)",
  "                    delta = tl.load(DELTA + h * stride_lh + q_start + offs_m, mask=row_ok, other=0.0)",
  "dK/dV: delta read at query rows instead of output rows", ["broadcast"])
m("dkdv_window_sides_swapped", K,
  "m_lo = tl.maximum(n_blk * BLOCK_N - shift - WIN_RIGHT, 0) // BLOCK_M * BLOCK_M",
  "m_lo = tl.maximum(n_blk * BLOCK_N - shift - WIN_LEFT, 0) // BLOCK_M * BLOCK_M",
  "dK/dV window: first row uses the left side of the window", ["window2"])
m("dkdv_d_ok_value_dim", K,
  "h_kv = tl.program_id(1).to(tl.int64)\n    offs_d = tl.arange(0, BLOCK_D)\n    offs_dv = tl.arange(0, BLOCK_DV)\n    d_ok = offs_d < HEAD_DIM\n",
  "h_kv = tl.program_id(1).to(tl.int64)\n    offs_d = tl.arange(0, BLOCK_D)\n    offs_dv = tl.arange(0, BLOCK_DV)\n    d_ok = offs_d < HEAD_DIM_V\n",
  "dK/dV: head-dim mask uses the value head dim", ["nonpow2"])
m("dkdv_sparse_rows_hi_block_n", K,
  "rows_hi = tl.minimum(first + SEL_M, m_hi)",
  "rows_hi = tl.minimum(first + SEL_N, m_hi)",
  "dK/dV block-sparse: query block end uses the KV block size", ["sparse"])
# ---- preprocess
m("pre_mask_block_dv", K,
  "mask = row_ok[:, None] & (offs_dv < HEAD_DIM_V)[None, :]",
  "mask = row_ok[:, None] & (offs_dv < BLOCK_DV)[None, :]",
  "delta preprocess: head-dim mask by the padded width", ["nonpow2"])
# ---- host
m("host_lse_zero_init", H,
  "lse = torch.full((h_q, rows), float(\"-inf\"), dtype=torch.float32, device=q.device)",
  "lse = torch.zeros((h_q, rows), dtype=torch.float32, device=q.device)",
  "host: LSE allocated as zeros", ["offs_start"])
m("host_broadcast_dq_view", H,
  "dq = partial.view(problem.batch, l_q, h_q, problem.head_dim).sum(0).to(q.dtype)",
  "dq = partial.view(l_q, problem.batch, h_q, problem.head_dim).sum(1).to(q.dtype)",
  "host broadcast-Q: partial dQ reduced with batch/row axes swapped", ["broadcast"])
m("host_dkdv_out_strides", H,
  "*q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(), lse.stride(0),",
  "*q.stride(), *k.stride(), *v.stride(), *o.stride(), *dk.stride(), *dv.stride(), lse.stride(0),",
  "host dK/dV launch: dO addressed with O's strides", ["strided"])
m("host_bottom_right_causal_only", H,
  "BOTTOM_RIGHT=problem.mask != \"none\" and problem.causal_alignment == \"bottom_right\",",
  "BOTTOM_RIGHT=problem.causal and problem.causal_alignment == \"bottom_right\",",
  "host: bottom-right alignment passed only for causal masks", ["window_br"])
m("host_window_unbounded_short", H,
  "unbounded = problem.total_q_rows + problem.total_k_rows + 1",
  "unbounded = problem.total_k_rows + 1",
  "host: unbounded window side sized by the keys only", ["window_unb"])
m("host_sparse_bwd_tiles_block_m", H,
  "bwd = workloads_backward(problem.q_lengths, problem.k_lengths, cfg[\"BLOCK_N\"], **mask)",
  "bwd = workloads_backward(problem.q_lengths, problem.k_lengths, cfg[\"BLOCK_M\"], **mask)",
  "host planner: dK/dV workloads tiled by BLOCK_M", ["sparse"])

MX = []
def mx(name, old, new, desc, cfg):
    MX.append(dict(name=name, description=desc, target=K, old=old, new=new, _cfg=cfg))
mx("mx_sk_row_all_heads",
   "sk_row = (NUM_HEADS // GROUP) * (HEAD_DIM // 32)",
   "sk_row = NUM_HEADS * (HEAD_DIM // 32)",
   "MXFP8: K scale row stride counts query heads", ["mx"])
mx("mx_sq_missing_q_start",
   "eq = tl.load(SQ + ((q_start + offs_m)[:, None] * NUM_HEADS + h)",
   "eq = tl.load(SQ + (offs_m[:, None] * NUM_HEADS + h)",
   "MXFP8: Q scales read at sequence-local rows", ["mx"])
mx("mx_sv_row_key_dim",
   "sv_row = (NUM_HEADS // GROUP) * (HEAD_DIM_V // 32)",
   "sv_row = (NUM_HEADS // GROUP) * (HEAD_DIM // 32)",
   "MXFP8: V scale row stride from the key head dim", ["mx"])

targets = {"kernels": "jfa_verify.kernels.triton_jfa._kernels", "host": "jfa_verify.kernels.triton_jfa._host"}
def dump(path, name, kernel, builder, ms):
    doc = dict(format="jfa-verify-mutants/1", name=name, kernel=kernel, builder=builder, targets=targets,
               description="blind planted bugs", mutants=[{k: v for k, v in x.items() if k != "_cfg"} for x in ms])
    open(path, "w").write(json.dumps(doc, indent=1))
dump("/tmp/w/blind5/catalogue.json", "triton_jfa_blind5", "triton_jfa", "jfa_verify.kernels.triton_jfa:build", M)
dump("/tmp/w/blind5/catalogue_mxfp8.json", "triton_jfa_mxfp8_blind5", "triton_jfa_mxfp8",
     "jfa_verify.kernels.triton_jfa:build_mxfp8", MX)
json.dump({x["name"]: x["_cfg"] for x in M + MX}, open("/tmp/w/blind5/cfgs.json", "w"))
print(len(M), len(MX))
