"""Triton kernels of ``triton_jfa``: jitted helpers first, then the kernels. No host logic.

Layouts (element strides passed explicitly, every index computed in int64):

* ``Q [rows_q, H_q, D]``, ``K [T_k, H_kv, D]``, ``V [T_k, H_kv, D_v]``,
  ``O``/``DO [rows_o, H_q, D_v]``, ``LSE``/``DELTA [H_q, rows_o]`` float32.
* Sequence ``b``: query rows ``q_offsets[b]:q_offsets[b + 1]`` (broadcast-Q:
  ``0:L_Q``), output rows from ``q_offsets[b]`` (broadcast-Q: ``b * L_Q``), key
  rows ``k_offsets[b]:k_offsets[b + 1]``; the kernels read the offsets on device.
* Work is a list of tiles ``(TILE_SEQ[t], TILE_BLOCK[t])``; program ``p`` of grid
  axis 0 walks tiles ``PROG_TILE_START[p]:PROG_TILE_START[p + 1]`` (persistent
  style); grid axis 1 is the head (query head, or KV head for dK/dV).

Masks: ``CAUSAL`` (key ``j <= i + shift``) and ``WINDOW`` (``i + shift - WIN_LEFT <= j <=
i + shift + WIN_RIGHT``; the host passes an unbounded side as a span longer than any sequence,
and ``WIN_RIGHT = 0`` under ``CAUSAL``), both around the aligned diagonal ``i + shift``
(``BOTTOM_RIGHT``: ``shift = L_k - L_q``). Without ``WINDOW`` every loop starts at key (or
query) 0, exactly as before windows existed.

Block-sparse (``SPARSE``): ``SEL_OFF``/``SEL_IDX`` are the call's selection (CSR over the query blocks of
``SEL_M`` rows flattened in sequence order, KV block numbers of ``SEL_N`` keys local to the sequence;
:class:`jfa_verify.core.selection.BlockSelection`), ``SEL_START[b]`` the flattened number of sequence ``b``'s
first query block. The host makes ``BLOCK_M`` divide ``SEL_M`` and ``BLOCK_N`` divide ``SEL_N``, so a tile lies in
one selection block and the mask above is the only per-key test. With ``SPARSE`` off (the default) those
arguments are None and the dense code is compiled unchanged.

MXFP8 (``MX``, forward only): ``Q``, ``K``, ``V`` are float8 e4m3 and ``SQ``, ``SK``, ``SV`` their E8M0 block
scales, contiguous uint8 ``[rows, heads, head_dim / 32]`` (:class:`jfa_verify.core.mxfp8.BlockScales`; value
``2^(e - 127)``, OCP MX v1.0). Hopper's FP8 MMAs take no block scales, so each tile is dequantized after its load
(``_mx_dequant``: e4m3 times a power of two, exact in bfloat16 while in its normal range; float32 under the
interpreter) and multiplied in bfloat16; ``P`` is rounded to e4m3 after scaling by 2^8 (the declared ``"e4m3"``
rule of :data:`jfa_verify.core.conventions.P_QUANTIZATIONS`) before ``P V``. With ``MX`` off (the default) the
scale arguments are None and nothing of this is compiled.

Softmax runs in base 2 (``QK_SCALE = sm_scale * log2(e)``); LSE is stored as a
natural log. Under ``INTERPRET`` (Triton's CPU interpreter) dot operands are
upcast to float32 and float32 -> bfloat16 casts round to nearest even by hand,
because the interpreter's bf16 arithmetic and casts are not the GPU's.
"""

import triton
import triton.language as tl

# Scalars that vary from case to case but not the arithmetic: not specialized. Triton
# would otherwise compile a variant per combination of values == 1 / divisible by 16,
# and with random head counts and head dims nearly every drawn case needed its own
# compile (2,867 variants in one 7-minute H200 calibration run, ~1 compile per case):
# verification throughput is bound by compiles, not by the kernel's speed. The head dims
# only bound masks (BLOCK_D/BLOCK_DV fix the code); the strides only address memory.
# ``BOTTOM_RIGHT`` (the causal diagonal's shift) and ``BROADCAST_Q`` (where a sequence's query and output rows
# start) are scalar choices made once per tile: as constexprs they compiled the variants they touch twice
# (benchmarks/bench_variants.py; issue 39, 3).
_SCALARS = ("L_Q", "GROUP", "NUM_HEADS", "HEAD_DIM", "HEAD_DIM_V", "WIN_LEFT", "WIN_RIGHT",
            "BOTTOM_RIGHT", "BROADCAST_Q")


# Offsets are read one scalar at a time, so their pointers' 16-byte alignment changes no code; yet
# the strided offsets layout (both offsets as columns of one tensor) gives a pointer 4 or 8 bytes
# past one, and Triton would compile every variant twice (42% of the H200 campaign mix's cases).
# The same holds for the plan's arrays (one scalar per tile or program), the instrumentation
# counters (one scalar per visit) and LSE/DELTA, whose rows start at an offset read on the device
# (``h * stride_lh + out_start``: no alignment the compiler could use): sm_90 PTX of all four kernels
# is identical with and without their alignment (issue 39, 3), so a plan or counters packed into one
# buffer, or an LSE view, build no second variant.
_UNALIGNED_POINTERS = ("Q_OFF", "K_OFF", "TILE_SEQ", "TILE_BLOCK", "TILE_ID", "PROG_TILE_START", "VISITS", "PROGS",
                       "LSE", "DELTA", "SEL_START", "SEL_OFF", "SEL_IDX", "T_START", "T_OFF", "T_IDX", "SQ", "SK", "SV")


def _jit_unspecialized(fn):
    """``triton.jit`` with every stride and every name in ``_SCALARS`` left unspecialized, and the
    pointers in ``_UNALIGNED_POINTERS`` not specialized on their alignment."""
    import inspect

    params = inspect.signature(fn).parameters
    names = [p for p in params if p.startswith("stride_") or p in _SCALARS]
    return triton.jit(do_not_specialize=names,
                      do_not_specialize_on_alignment=[p for p in params if p in _UNALIGNED_POINTERS])(fn)


# ----------------------------------------------------------------------------- helpers


@triton.jit
def _x16(x):
    """``x`` itself, written so the compiler knows it is a multiple of 16 (the caller guarantees it).

    With ``ALIGNED`` the host has checked that every head dim and token/head stride is a
    multiple of 16 and every head-dim stride is 1; telling the compiler so turns the tile
    loads into 16-byte, pipelined copies (H200 PTX: ``cp.async`` with ``ld.global.v4``
    instead of 2-byte loads), what Triton's own argument specialization would give, but with
    two compiled variants instead of one per combination of stride values.
    """
    return (x // 16) * 16


@triton.jit
def _round_cast(x, DTYPE: tl.constexpr, INTERPRET: tl.constexpr):
    """fp32 ``x`` -> ``DTYPE`` with round-to-nearest-even.

    Under the interpreter the rounding is done by hand first, so that the cast itself is exact:
    the interpreter truncates bf16, and its e4m3 cast halves a value that rounds up into the
    next binade (127.0 -> 64.0). For e4m3 (3 mantissa bits; |x| <= 448 here): normals round at
    mantissa bit 20; below 2^-6 (subnormals, grid 2^-9) adding and subtracting 1.5 * 2^14,
    whose float32 ulp is 2^-9, rounds to that grid.
    """
    if INTERPRET:
        if DTYPE == tl.bfloat16:
            b = x.to(tl.uint32, bitcast=True)
            b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
            x = b.to(tl.float32, bitcast=True)
        if DTYPE == tl.float8e4nv:
            b = x.to(tl.uint32, bitcast=True)
            b = (b + 0x7FFFF + ((b >> 20) & 1)) & 0xFFF00000
            normal = b.to(tl.float32, bitcast=True)
            sub = (x + 24576.0) - 24576.0
            x = tl.where(tl.abs(x) < 0.015625, sub, normal)
    return x.to(DTYPE)


@triton.jit
def _mx_dequant(x, e, INTERPRET: tl.constexpr):
    """e4m3 ``x`` times ``2^(e - 127)`` (``e``: uint8 E8M0 exponents broadcast like ``x``): bfloat16 (float32 under
    the interpreter), exact while the product is a normal of that type. ``2^(e - 127)`` is built from its bits
    (exponent field ``max(e, 1)``, then halved for ``e = 0``, whose ``2^-127`` is no float32 normal)."""
    e = e.to(tl.int32)
    scale = (tl.maximum(e, 1) << 23).to(tl.float32, bitcast=True)
    y = x.to(tl.float32) * scale
    y = tl.where(e == 0, y * 0.5, y)
    if not INTERPRET:
        y = y.to(tl.bfloat16)
    return y


@triton.jit
def _p_operand(p, p_scale, V_DTYPE: tl.constexpr, MX: tl.constexpr, INTERPRET: tl.constexpr):
    """``P * p_scale`` as the ``P V`` operand: rounded to ``V_DTYPE``; with ``MX``, rounded to e4m3 (the declared
    ``"e4m3"`` P rule) and then exactly to ``V_DTYPE`` (the dequantized V's)."""
    if MX:
        out = _round_cast(p * p_scale, tl.float8e4nv, INTERPRET).to(V_DTYPE)
    else:
        out = _round_cast(p * p_scale, V_DTYPE, INTERPRET)
    return out


@triton.jit
def _dot(a, b, INTERPRET: tl.constexpr, IEEE: tl.constexpr):
    """``a @ b`` accumulated in fp32: fp32 operands in the interpreter, IEEE (no TF32) for fp32 inputs."""
    if INTERPRET:
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    elif IEEE:
        out = tl.dot(a, b, input_precision="ieee")
    else:
        out = tl.dot(a, b)
    return out


@triton.jit
def _record_visit(VISITS, PROGS, TILE_ID, t, h, pid, NUM_HEADS, INSTRUMENT: tl.constexpr):
    """Instrumentation: count a visit of tile ``TILE_ID[t]`` for head ``h`` and record the program that ran it."""
    if INSTRUMENT:
        slot = tl.load(TILE_ID + t).to(tl.int64) * NUM_HEADS + h
        tl.atomic_add(VISITS + slot, 1)
        tl.store(PROGS + slot, pid)


@triton.jit
def _load_offset(ptr, idx):
    return tl.load(ptr + idx).to(tl.int64)


@triton.jit
def _seq_bounds(Q_OFF, K_OFF, b, L_Q, BROADCAST_Q):
    """``(q_start, out_start, q_len, k_start, k_len)`` of sequence ``b``, all int64 (``BROADCAST_Q``: runtime)."""
    k_start = _load_offset(K_OFF, b)
    k_len = _load_offset(K_OFF, b + 1) - k_start
    if BROADCAST_Q:
        q_start = k_start * 0
        q_len = q_start + L_Q
        out_start = q_start + b.to(tl.int64) * L_Q
    else:
        q_start = _load_offset(Q_OFF, b)
        q_len = _load_offset(Q_OFF, b + 1) - q_start
        out_start = q_start
    return q_start, out_start, q_len, k_start, k_len


@triton.jit
def _causal_shift(q_len, k_len, BOTTOM_RIGHT):
    """Query ``i`` sees key ``j`` iff ``j <= i + shift`` (causal; ``BOTTOM_RIGHT``: a runtime flag)."""
    if BOTTOM_RIGHT:
        shift = k_len - q_len
    else:
        shift = k_len * 0
    return shift


@triton.jit
def _in_window(rows, cols, shift, WIN_LEFT, WIN_RIGHT):
    """``rows`` (query indices) and ``cols`` (key indices), broadcast: True inside the sliding window."""
    return (cols >= rows + shift - WIN_LEFT) & (cols <= rows + shift + WIN_RIGHT)


@triton.jit
def _fwd_block(acc, l_i, m_i, q, K_ptr, V_ptr, start_n, offs_m, offs_n, offs_d, offs_dv,
               k_len, shift, qk_scale, stride_kt, stride_kd, stride_vt, stride_vd,
               HEAD_DIM, HEAD_DIM_V, WIN_LEFT, WIN_RIGHT,
               MASK: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
               INTERPRET: tl.constexpr, IEEE: tl.constexpr,
               SK_ptr, SV_ptr, sk_row, sv_row, MX: tl.constexpr):
    """One KV block of the online softmax. ``MASK``: the block crosses the key end or the diagonal. ``MX``: K and
    V are dequantized by their block scales (``SK_ptr``/``SV_ptr``: the sequence's first key row's, ``sk_row``/
    ``sv_row`` elements per key row) and P is rounded to e4m3 (see the module docstring)."""
    cols = start_n + offs_n  # [BLOCK_N] key index within the sequence, int64
    d_ok = offs_d < HEAD_DIM
    dv_ok = offs_dv < HEAD_DIM_V
    col_ok = cols < k_len
    kt_ptrs = K_ptr + cols[None, :] * stride_kt + offs_d[:, None].to(tl.int64) * stride_kd
    v_ptrs = V_ptr + cols[:, None] * stride_vt + offs_dv[None, :].to(tl.int64) * stride_vd
    if MASK:
        kt = tl.load(kt_ptrs, mask=d_ok[:, None] & col_ok[None, :], other=0.0)
    else:
        kt = tl.load(kt_ptrs, mask=d_ok[:, None], other=0.0)
    if MX:
        ek = tl.load(SK_ptr + cols[None, :] * sk_row + offs_d[:, None] // 32, mask=d_ok[:, None] & col_ok[None, :],
                     other=127)
        kt = _mx_dequant(kt, ek, INTERPRET)
    s = _dot(q, kt, INTERPRET, IEEE) * qk_scale  # [BLOCK_M, BLOCK_N], base-2 logits
    if MASK:
        visible = col_ok[None, :]
        if CAUSAL:
            visible = visible & (cols[None, :] <= offs_m[:, None] + shift)
        if WINDOW:
            visible = visible & _in_window(offs_m[:, None], cols[None, :], shift, WIN_LEFT, WIN_RIGHT)
        s = tl.where(visible, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that saw no key yet
    p = tl.exp2(s - m_safe[:, None])
    alpha = tl.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, 1)
    if MASK:
        v = tl.load(v_ptrs, mask=col_ok[:, None] & dv_ok[None, :], other=0.0)
    else:
        v = tl.load(v_ptrs, mask=dv_ok[None, :], other=0.0)
    # float8 e4m3: most of P in [0, 1] would be subnormal (below 2^-6) and lose its mantissa;
    # P * 2^8 keeps 3 mantissa bits down to 2^-14 (fp8 attention kernels scale P the same way).
    # For other dtypes the scale is 1.0 and the result is bit for bit unscaled.
    if MX:  # V dequantized (bf16), P rounded to e4m3 as the float8 path rounds it, then multiplied in bf16
        ev = tl.load(SV_ptr + cols[:, None] * sv_row + offs_dv[None, :] // 32, mask=col_ok[:, None] & dv_ok[None, :],
                     other=127)
        v = _mx_dequant(v, ev, INTERPRET)
        p_scale = 256.0
    else:
        p_scale = 1.0
        if v.dtype == tl.float8e4nv:
            p_scale = 256.0
    acc = acc * alpha[:, None] + _dot(_p_operand(p, p_scale, v.dtype, MX, INTERPRET), v, INTERPRET, IEEE) / p_scale
    return acc, l_i, m_new


# ----------------------------------------------------------------------------- kernels


@_jit_unspecialized
def _fwd_kernel(
    Q, K, V, O, LSE, Q_OFF, K_OFF,
    TILE_SEQ, TILE_BLOCK, TILE_ID, PROG_TILE_START, VISITS, PROGS,
    stride_qt, stride_qh, stride_qd,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_ot, stride_oh, stride_od,
    stride_lh,
    qk_scale, L_Q, GROUP, NUM_HEADS,
    HEAD_DIM, HEAD_DIM_V, WIN_LEFT, WIN_RIGHT,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, BOTTOM_RIGHT, BROADCAST_Q,
    INSTRUMENT: tl.constexpr, INTERPRET: tl.constexpr, IEEE: tl.constexpr, ALIGNED: tl.constexpr,
    SEL_START=None, SEL_OFF=None, SEL_IDX=None,
    SPARSE: tl.constexpr = False, SEL_M: tl.constexpr = 1, SEL_N: tl.constexpr = 1,
    SQ=None, SK=None, SV=None, MX: tl.constexpr = False,
):
    """Forward: ``O`` and natural-log ``LSE`` of the tiles of program ``pid(0)``, query head ``pid(1)``.

    ``SPARSE`` (block-sparse): the tile walks only the KV blocks selected for its query block (see the module
    docstring); dense launches leave the ``SEL_*`` arguments at their defaults and compile as before. ``MX``
    (MXFP8): ``SQ``/``SK``/``SV`` are the inputs' E8M0 block scales (module docstring); None otherwise."""
    if ALIGNED:
        stride_qt, stride_qh, stride_qd = _x16(stride_qt), _x16(stride_qh), 1
        stride_kt, stride_kh, stride_kd = _x16(stride_kt), _x16(stride_kh), 1
        stride_vt, stride_vh, stride_vd = _x16(stride_vt), _x16(stride_vh), 1
        stride_ot, stride_oh, stride_od = _x16(stride_ot), _x16(stride_oh), 1
        HEAD_DIM, HEAD_DIM_V = _x16(HEAD_DIM), _x16(HEAD_DIM_V)
    pid = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    h_kv = h // GROUP
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    offs_n = tl.arange(0, BLOCK_N).to(tl.int64)
    d_ok = offs_d < HEAD_DIM
    dv_ok = offs_dv < HEAD_DIM_V
    t_begin = tl.load(PROG_TILE_START + pid)
    t_end = tl.load(PROG_TILE_START + pid + 1)
    for t in range(t_begin, t_end):
        b = tl.load(TILE_SEQ + t)
        m_blk = tl.load(TILE_BLOCK + t).to(tl.int64)
        _record_visit(VISITS, PROGS, TILE_ID, t, h, pid, NUM_HEADS, INSTRUMENT)
        q_start, out_start, q_len, k_start, k_len = _seq_bounds(Q_OFF, K_OFF, b, L_Q, BROADCAST_Q)
        offs_m = m_blk * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        row_ok = offs_m < q_len
        q_ptrs = (Q + (q_start + offs_m)[:, None] * stride_qt + h * stride_qh
                  + offs_d[None, :].to(tl.int64) * stride_qd)
        q = tl.load(q_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        SK_ptr = SK
        SV_ptr = SV
        sk_row = HEAD_DIM // 32
        sv_row = HEAD_DIM_V // 32
        if MX:  # scales are [rows, heads, D / 32], contiguous
            eq = tl.load(SQ + ((q_start + offs_m)[:, None] * NUM_HEADS + h) * (HEAD_DIM // 32) + offs_d[None, :] // 32,
                         mask=row_ok[:, None] & d_ok[None, :], other=127)
            q = _mx_dequant(q, eq, INTERPRET)
            sk_row = (NUM_HEADS // GROUP) * (HEAD_DIM // 32)
            sv_row = (NUM_HEADS // GROUP) * (HEAD_DIM_V // 32)
            SK_ptr = SK + k_start * sk_row + h_kv * (HEAD_DIM // 32)
            SV_ptr = SV + k_start * sv_row + h_kv * (HEAD_DIM_V // 32)

        # KV range: [lo, full_end) needs no mask; [full_end, hi) is masked; the rest is skipped.
        lo = k_len * 0
        if CAUSAL:
            shift = _causal_shift(q_len, k_len, BOTTOM_RIGHT)
            last_row = tl.minimum((m_blk + 1) * BLOCK_M, q_len) - 1
            hi = tl.maximum(tl.minimum(k_len, last_row + shift + 1), 0)
            full_end = tl.maximum(tl.minimum(k_len, m_blk * BLOCK_M + shift + 1), 0)
        else:
            shift = k_len * 0
            hi = k_len
            full_end = k_len
        full_end = (full_end // BLOCK_N) * BLOCK_N
        if WINDOW:
            # every block of the window's span is masked (its two edges cross the tile diagonally)
            shift = _causal_shift(q_len, k_len, BOTTOM_RIGHT)
            last_row = tl.minimum((m_blk + 1) * BLOCK_M, q_len) - 1
            lo = tl.maximum(m_blk * BLOCK_M + shift - WIN_LEFT, 0) // BLOCK_N * BLOCK_N
            hi = tl.maximum(tl.minimum(hi, last_row + shift + WIN_RIGHT + 1), 0)
            full_end = lo

        K_ptr = K + k_start * stride_kt + h_kv * stride_kh
        V_ptr = V + k_start * stride_vt + h_kv * stride_vh
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
        if SPARSE:
            # Only the selected KV blocks, each cut to [lo, hi): whole tiles (BLOCK_N divides SEL_N, block
            # starts and lo/full_end are multiples of BLOCK_N), the unmasked ones first, then the masked ones.
            sel = tl.load(SEL_START + b).to(tl.int64) + (m_blk * BLOCK_M) // SEL_M  # flattened query block
            for e in range(tl.load(SEL_OFF + sel).to(tl.int64), tl.load(SEL_OFF + sel + 1).to(tl.int64)):
                first = tl.load(SEL_IDX + e).to(tl.int64) * SEL_N
                for start_n in range(tl.maximum(first, lo), tl.minimum(first + SEL_N, full_end), BLOCK_N):
                    acc, l_i, m_i = _fwd_block(acc, l_i, m_i, q, K_ptr, V_ptr, start_n, offs_m, offs_n, offs_d,
                                               offs_dv, k_len, shift, qk_scale, stride_kt, stride_kd, stride_vt,
                                               stride_vd, HEAD_DIM, HEAD_DIM_V, WIN_LEFT, WIN_RIGHT, False, CAUSAL,
                                               WINDOW, INTERPRET, IEEE, SK_ptr, SV_ptr, sk_row, sv_row, MX)
                for start_n in range(tl.maximum(first, full_end), tl.minimum(first + SEL_N, hi), BLOCK_N):
                    acc, l_i, m_i = _fwd_block(acc, l_i, m_i, q, K_ptr, V_ptr, start_n, offs_m, offs_n, offs_d,
                                               offs_dv, k_len, shift, qk_scale, stride_kt, stride_kd, stride_vt,
                                               stride_vd, HEAD_DIM, HEAD_DIM_V, WIN_LEFT, WIN_RIGHT, True, CAUSAL,
                                               WINDOW, INTERPRET, IEEE, SK_ptr, SV_ptr, sk_row, sv_row, MX)
        else:
            for start_n in range(lo, full_end, BLOCK_N):
                acc, l_i, m_i = _fwd_block(acc, l_i, m_i, q, K_ptr, V_ptr, start_n, offs_m, offs_n, offs_d, offs_dv,
                                           k_len, shift, qk_scale, stride_kt, stride_kd, stride_vt, stride_vd,
                                           HEAD_DIM, HEAD_DIM_V, WIN_LEFT, WIN_RIGHT, False, CAUSAL, WINDOW,
                                           INTERPRET, IEEE, SK_ptr, SV_ptr, sk_row, sv_row, MX)
            for start_n in range(full_end, hi, BLOCK_N):
                acc, l_i, m_i = _fwd_block(acc, l_i, m_i, q, K_ptr, V_ptr, start_n, offs_m, offs_n, offs_d, offs_dv,
                                           k_len, shift, qk_scale, stride_kt, stride_kd, stride_vt, stride_vd,
                                           HEAD_DIM, HEAD_DIM_V, WIN_LEFT, WIN_RIGHT, True, CAUSAL, WINDOW,
                                           INTERPRET, IEEE, SK_ptr, SV_ptr, sk_row, sv_row, MX)

        empty = l_i == 0.0  # no visible key: o = 0, lse = -inf
        o = acc / tl.where(empty, 1.0, l_i)[:, None]
        lse = tl.where(empty, float("-inf"), (m_i + tl.log2(tl.where(empty, 1.0, l_i))) * 0.6931471805599453)
        o_rows = out_start + offs_m
        o_ptrs = O + o_rows[:, None] * stride_ot + h * stride_oh + offs_dv[None, :].to(tl.int64) * stride_od
        tl.store(o_ptrs, _round_cast(o, O.dtype.element_ty, INTERPRET), mask=row_ok[:, None] & dv_ok[None, :])
        tl.store(LSE + h * stride_lh + o_rows, lse, mask=row_ok)


@_jit_unspecialized
def _bwd_preprocess_kernel(
    O, DO, DELTA, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK,
    stride_ot, stride_oh, stride_od,
    stride_dot, stride_doh, stride_dod,
    stride_deltah,
    L_Q,
    HEAD_DIM_V, BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr,
    BROADCAST_Q, ALIGNED: tl.constexpr,
):
    """``DELTA[h, row] = sum_d DO[row, h, d] * O[row, h, d]`` (fp32) for query tile ``pid(0)``, head ``pid(1)``."""
    if ALIGNED:
        stride_ot, stride_oh, stride_od = _x16(stride_ot), _x16(stride_oh), 1
        stride_dot, stride_doh, stride_dod = _x16(stride_dot), _x16(stride_doh), 1
        HEAD_DIM_V = _x16(HEAD_DIM_V)
    t = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    b = tl.load(TILE_SEQ + t)
    m_blk = tl.load(TILE_BLOCK + t).to(tl.int64)
    q_start, out_start, q_len, k_start, k_len = _seq_bounds(Q_OFF, K_OFF, b, L_Q, BROADCAST_Q)
    offs_m = m_blk * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
    offs_dv = tl.arange(0, BLOCK_DV).to(tl.int64)
    row_ok = offs_m < q_len
    mask = row_ok[:, None] & (offs_dv < HEAD_DIM_V)[None, :]
    rows = out_start + offs_m
    o = tl.load(O + rows[:, None] * stride_ot + h * stride_oh + offs_dv[None, :] * stride_od, mask=mask, other=0.0)
    do = tl.load(DO + rows[:, None] * stride_dot + h * stride_doh + offs_dv[None, :] * stride_dod,
                 mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + h * stride_deltah + rows, delta, mask=row_ok)


@_jit_unspecialized
def _bwd_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV, Q_OFF, K_OFF,
    TILE_SEQ, TILE_BLOCK, TILE_ID, PROG_TILE_START, VISITS, PROGS,
    stride_qt, stride_qh, stride_qd,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_dot, stride_doh, stride_dod,
    stride_dkt, stride_dkh, stride_dkd,
    stride_dvt, stride_dvh, stride_dvd,
    stride_lh,
    sm_scale, qk_scale, L_Q, GROUP, NUM_HEADS,
    HEAD_DIM, HEAD_DIM_V, WIN_LEFT, WIN_RIGHT,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, BOTTOM_RIGHT, BROADCAST_Q,
    INSTRUMENT: tl.constexpr, INTERPRET: tl.constexpr, IEEE: tl.constexpr, ALIGNED: tl.constexpr,
    T_START=None, T_OFF=None, T_IDX=None,
    SPARSE: tl.constexpr = False, SEL_M: tl.constexpr = 1, SEL_N: tl.constexpr = 1,
):
    """dK, dV of KV tiles ``(b, n)`` of program ``pid(0)``, KV head ``pid(1)``; sums the group's query heads.

    ``SPARSE``: only the query blocks that selected the tile's KV block, from the transposed selection
    (``T_START[b]``: the flattened number of sequence ``b``'s first KV block of ``SEL_N`` keys; ``T_OFF``/``T_IDX``:
    per KV block, the query blocks of ``SEL_M`` rows that selected it, increasing). Dense: one pass of the
    ``e`` loop over the mask's rows, as before."""
    if ALIGNED:
        stride_qt, stride_qh, stride_qd = _x16(stride_qt), _x16(stride_qh), 1
        stride_kt, stride_kh, stride_kd = _x16(stride_kt), _x16(stride_kh), 1
        stride_vt, stride_vh, stride_vd = _x16(stride_vt), _x16(stride_vh), 1
        stride_dot, stride_doh, stride_dod = _x16(stride_dot), _x16(stride_doh), 1
        stride_dkt, stride_dkh, stride_dkd = _x16(stride_dkt), _x16(stride_dkh), 1
        stride_dvt, stride_dvh, stride_dvd = _x16(stride_dvt), _x16(stride_dvh), 1
        HEAD_DIM, HEAD_DIM_V = _x16(HEAD_DIM), _x16(HEAD_DIM_V)
    pid = tl.program_id(0)
    h_kv = tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    d_ok = offs_d < HEAD_DIM
    dv_ok = offs_dv < HEAD_DIM_V
    offs_d64 = offs_d.to(tl.int64)
    offs_dv64 = offs_dv.to(tl.int64)
    t_begin = tl.load(PROG_TILE_START + pid)
    t_end = tl.load(PROG_TILE_START + pid + 1)
    for t in range(t_begin, t_end):
        b = tl.load(TILE_SEQ + t)
        n_blk = tl.load(TILE_BLOCK + t).to(tl.int64)
        _record_visit(VISITS, PROGS, TILE_ID, t, h_kv, pid, NUM_HEADS, INSTRUMENT)
        q_start, out_start, q_len, k_start, k_len = _seq_bounds(Q_OFF, K_OFF, b, L_Q, BROADCAST_Q)
        offs_n = n_blk * BLOCK_N + tl.arange(0, BLOCK_N).to(tl.int64)
        col_ok = offs_n < k_len
        k_rows = k_start + offs_n
        k = tl.load(K + k_rows[:, None] * stride_kt + h_kv * stride_kh + offs_d64[None, :] * stride_kd,
                    mask=col_ok[:, None] & d_ok[None, :], other=0.0)
        v = tl.load(V + k_rows[:, None] * stride_vt + h_kv * stride_vh + offs_dv64[None, :] * stride_vd,
                    mask=col_ok[:, None] & dv_ok[None, :], other=0.0)
        dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
        m_hi = q_len
        if CAUSAL:
            shift = _causal_shift(q_len, k_len, BOTTOM_RIGHT)
            # first query row that sees this block's first key: i >= j - shift
            m_lo = tl.maximum(n_blk * BLOCK_N - shift, 0) // BLOCK_M * BLOCK_M
        else:
            shift = k_len * 0
            m_lo = k_len * 0
        if WINDOW:
            shift = _causal_shift(q_len, k_len, BOTTOM_RIGHT)
            # rows that see a key j of the block: j - shift - WIN_RIGHT <= i <= j - shift + WIN_LEFT
            m_lo = tl.maximum(n_blk * BLOCK_N - shift - WIN_RIGHT, 0) // BLOCK_M * BLOCK_M
            m_hi = tl.maximum(tl.minimum(q_len, (n_blk + 1) * BLOCK_N - shift + WIN_LEFT), 0)
        if SPARSE:
            kv = tl.load(T_START + b).to(tl.int64) + (n_blk * BLOCK_N) // SEL_N  # flattened KV block
            e_lo = tl.load(T_OFF + kv).to(tl.int64)
            e_hi = tl.load(T_OFF + kv + 1).to(tl.int64)
        else:
            e_lo = 0
            e_hi = 1
        for g in range(0, GROUP):
            h = h_kv * GROUP + g
            for e in range(e_lo, e_hi):
                if SPARSE:  # the rows of query block T_IDX[e] that the mask's span [m_lo, m_hi) keeps
                    first = tl.load(T_IDX + e).to(tl.int64) * SEL_M
                    rows_lo = tl.maximum(first, m_lo)
                    rows_hi = tl.minimum(first + SEL_M, m_hi)
                else:
                    rows_lo = m_lo
                    rows_hi = m_hi
                for start_m in range(rows_lo, rows_hi, BLOCK_M):
                    offs_m = start_m + tl.arange(0, BLOCK_M).to(tl.int64)
                    row_ok = offs_m < q_len
                    q = tl.load(Q + (q_start + offs_m)[:, None] * stride_qt + h * stride_qh
                                + offs_d64[None, :] * stride_qd, mask=row_ok[:, None] & d_ok[None, :], other=0.0)
                    o_rows = out_start + offs_m
                    do = tl.load(DO + o_rows[:, None] * stride_dot + h * stride_doh + offs_dv64[None, :] * stride_dod,
                                 mask=row_ok[:, None] & dv_ok[None, :], other=0.0)
                    lse = tl.load(LSE + h * stride_lh + o_rows, mask=row_ok, other=float("inf"))
                    lse = tl.where(lse == float("-inf"), float("inf"), lse) * 1.4426950408889634
                    delta = tl.load(DELTA + h * stride_lh + o_rows, mask=row_ok, other=0.0)
                    s_t = _dot(k, tl.trans(q), INTERPRET, IEEE) * qk_scale  # [BLOCK_N, BLOCK_M]
                    visible = col_ok[:, None] & row_ok[None, :]
                    if CAUSAL:
                        visible = visible & (offs_n[:, None] <= offs_m[None, :] + shift)
                    if WINDOW:
                        visible = visible & _in_window(offs_m[None, :], offs_n[:, None], shift, WIN_LEFT, WIN_RIGHT)
                    # Mask before exp2: a hidden (future) key can score far above the row's lse.
                    p_t = tl.exp2(tl.where(visible, s_t - lse[None, :], float("-inf")))
                    dv += _dot(_round_cast(p_t, do.dtype, INTERPRET), do, INTERPRET, IEEE)
                    dp_t = _dot(v, tl.trans(do), INTERPRET, IEEE)
                    ds_t = p_t * (dp_t - delta[None, :])
                    dk += _dot(_round_cast(ds_t, q.dtype, INTERPRET), q, INTERPRET, IEEE)
        dk = dk * sm_scale
        tl.store(DK + k_rows[:, None] * stride_dkt + h_kv * stride_dkh + offs_d64[None, :] * stride_dkd,
                 _round_cast(dk, DK.dtype.element_ty, INTERPRET), mask=col_ok[:, None] & d_ok[None, :])
        tl.store(DV + k_rows[:, None] * stride_dvt + h_kv * stride_dvh + offs_dv64[None, :] * stride_dvd,
                 _round_cast(dv, DV.dtype.element_ty, INTERPRET), mask=col_ok[:, None] & dv_ok[None, :])


@_jit_unspecialized
def _bwd_dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ, Q_OFF, K_OFF,
    TILE_SEQ, TILE_BLOCK, TILE_ID, PROG_TILE_START, VISITS, PROGS,
    stride_qt, stride_qh, stride_qd,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_dot, stride_doh, stride_dod,
    stride_dqt, stride_dqh, stride_dqd,
    stride_lh,
    sm_scale, qk_scale, L_Q, GROUP, NUM_HEADS,
    HEAD_DIM, HEAD_DIM_V, WIN_LEFT, WIN_RIGHT,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, BOTTOM_RIGHT, BROADCAST_Q,
    INSTRUMENT: tl.constexpr, INTERPRET: tl.constexpr, IEEE: tl.constexpr, ALIGNED: tl.constexpr,
    SEL_START=None, SEL_OFF=None, SEL_IDX=None,
    SPARSE: tl.constexpr = False, SEL_M: tl.constexpr = 1, SEL_N: tl.constexpr = 1,
):
    """dQ of query tiles ``(b, m)`` of program ``pid(0)``, query head ``pid(1)``; ``SPARSE``: only the KV blocks
    selected for the tile's query block (the forward's ``SEL_*``; dense: one pass of the ``e`` loop).

    Rows of ``DQ`` are output rows (broadcast-Q: a per-sequence fp32 partial
    ``[B * L_Q, H_q, D]`` that the host sums over the batch), else query rows.
    """
    if ALIGNED:
        stride_qt, stride_qh, stride_qd = _x16(stride_qt), _x16(stride_qh), 1
        stride_kt, stride_kh, stride_kd = _x16(stride_kt), _x16(stride_kh), 1
        stride_vt, stride_vh, stride_vd = _x16(stride_vt), _x16(stride_vh), 1
        stride_dot, stride_doh, stride_dod = _x16(stride_dot), _x16(stride_doh), 1
        stride_dqt, stride_dqh, stride_dqd = _x16(stride_dqt), _x16(stride_dqh), 1
        HEAD_DIM, HEAD_DIM_V = _x16(HEAD_DIM), _x16(HEAD_DIM_V)
    pid = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    h_kv = h // GROUP
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    d_ok = offs_d < HEAD_DIM
    dv_ok = offs_dv < HEAD_DIM_V
    offs_d64 = offs_d.to(tl.int64)
    offs_dv64 = offs_dv.to(tl.int64)
    t_begin = tl.load(PROG_TILE_START + pid)
    t_end = tl.load(PROG_TILE_START + pid + 1)
    for t in range(t_begin, t_end):
        b = tl.load(TILE_SEQ + t)
        m_blk = tl.load(TILE_BLOCK + t).to(tl.int64)
        _record_visit(VISITS, PROGS, TILE_ID, t, h, pid, NUM_HEADS, INSTRUMENT)
        q_start, out_start, q_len, k_start, k_len = _seq_bounds(Q_OFF, K_OFF, b, L_Q, BROADCAST_Q)
        offs_m = m_blk * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        row_ok = offs_m < q_len
        q = tl.load(Q + (q_start + offs_m)[:, None] * stride_qt + h * stride_qh + offs_d64[None, :] * stride_qd,
                    mask=row_ok[:, None] & d_ok[None, :], other=0.0)
        o_rows = out_start + offs_m
        do = tl.load(DO + o_rows[:, None] * stride_dot + h * stride_doh + offs_dv64[None, :] * stride_dod,
                     mask=row_ok[:, None] & dv_ok[None, :], other=0.0)
        lse = tl.load(LSE + h * stride_lh + o_rows, mask=row_ok, other=float("inf"))
        lse = tl.where(lse == float("-inf"), float("inf"), lse) * 1.4426950408889634
        delta = tl.load(DELTA + h * stride_lh + o_rows, mask=row_ok, other=0.0)
        lo = k_len * 0
        if CAUSAL:
            shift = _causal_shift(q_len, k_len, BOTTOM_RIGHT)
            last_row = tl.minimum((m_blk + 1) * BLOCK_M, q_len) - 1
            hi = tl.maximum(tl.minimum(k_len, last_row + shift + 1), 0)
        else:
            shift = k_len * 0
            hi = k_len
        if WINDOW:
            shift = _causal_shift(q_len, k_len, BOTTOM_RIGHT)
            last_row = tl.minimum((m_blk + 1) * BLOCK_M, q_len) - 1
            lo = tl.maximum(m_blk * BLOCK_M + shift - WIN_LEFT, 0) // BLOCK_N * BLOCK_N
            hi = tl.maximum(tl.minimum(hi, last_row + shift + WIN_RIGHT + 1), 0)
        dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        if SPARSE:
            sel = tl.load(SEL_START + b).to(tl.int64) + (m_blk * BLOCK_M) // SEL_M  # flattened query block
            e_lo = tl.load(SEL_OFF + sel).to(tl.int64)
            e_hi = tl.load(SEL_OFF + sel + 1).to(tl.int64)
        else:
            e_lo = 0
            e_hi = 1
        for e in range(e_lo, e_hi):
            if SPARSE:  # the keys of KV block SEL_IDX[e] inside the mask's span [lo, hi)
                first = tl.load(SEL_IDX + e).to(tl.int64) * SEL_N
                keys_lo = tl.maximum(first, lo)
                keys_hi = tl.minimum(first + SEL_N, hi)
            else:
                keys_lo = lo
                keys_hi = hi
            for start_n in range(keys_lo, keys_hi, BLOCK_N):
                offs_n = start_n + tl.arange(0, BLOCK_N).to(tl.int64)
                col_ok = offs_n < k_len
                k_rows = k_start + offs_n
                k = tl.load(K + k_rows[:, None] * stride_kt + h_kv * stride_kh + offs_d64[None, :] * stride_kd,
                            mask=col_ok[:, None] & d_ok[None, :], other=0.0)
                v = tl.load(V + k_rows[:, None] * stride_vt + h_kv * stride_vh + offs_dv64[None, :] * stride_vd,
                            mask=col_ok[:, None] & dv_ok[None, :], other=0.0)
                s = _dot(q, tl.trans(k), INTERPRET, IEEE) * qk_scale  # [BLOCK_M, BLOCK_N]
                visible = row_ok[:, None] & col_ok[None, :]
                if CAUSAL:
                    visible = visible & (offs_n[None, :] <= offs_m[:, None] + shift)
                if WINDOW:
                    visible = visible & _in_window(offs_m[:, None], offs_n[None, :], shift, WIN_LEFT, WIN_RIGHT)
                p = tl.exp2(tl.where(visible, s - lse[:, None], float("-inf")))
                dp = _dot(do, tl.trans(v), INTERPRET, IEEE)
                ds = p * (dp - delta[:, None])
                dq += _dot(_round_cast(ds, k.dtype, INTERPRET), k, INTERPRET, IEEE)
        dq = dq * sm_scale
        if BROADCAST_Q:
            dq_rows = o_rows
        else:
            dq_rows = q_start + offs_m
        tl.store(DQ + dq_rows[:, None] * stride_dqt + h * stride_dqh + offs_d64[None, :] * stride_dqd,
                 _round_cast(dq, DQ.dtype.element_ty, INTERPRET), mask=row_ok[:, None] & d_ok[None, :])
