"""Gluon kernels of ``gluon_jfa`` (NVIDIA Hopper, sm_90a): the JFA forward, then the backward
(dK/dV and dQ kernels, described above their code). No host logic.

Algorithm: FlashAttention-2's online softmax (Dao 2023, arXiv:2307.08691) laid out the way
FlashAttention-3 does it on Hopper (Shah et al. 2024, arXiv:2407.08608): a producer warp
issues TMA loads into a shared-memory ring, a consumer warp group pair issues asynchronous
``wgmma`` and runs the softmax, and the two hand buffers over with mbarriers; the
consumer overlaps the softmax of KV block ``j`` with the ``P V`` product of block ``j - 1``
(FA3's intra-warpgroup pipelining, its Algorithm 2).

Layouts (all contiguous, viewed 2-D by the host's TMA descriptors):

* ``Q [rows_q, H_q * D]`` (broadcast-Q: ``[L_Q, H_q * D]``), ``K``/``V [T_k, H_kv * D]``:
  the tile of BLOCK rows of head ``h`` is the TMA box at ``[row, h * D]``. A box that
  crosses a sequence's end reads the next sequence's rows (or zeros past the tensor):
  those keys are masked in the scores, those query rows are never stored.
* ``O [rows_o, H_q * D]`` in the input dtype (row stride ``STRIDE_O = H_q * D``),
  ``LSE [H_q, rows_o]`` float32 natural log (row stride ``STRIDE_LSE``).
* Sequence ``b``: query rows ``Q_OFF[b]:Q_OFF[b + 1]`` (broadcast-Q: ``0:L_Q``), output
  rows from ``Q_OFF[b]`` (broadcast-Q: ``b * L_Q``), keys ``K_OFF[b]:K_OFF[b + 1]``.

Work: a list of query tiles ``(TILE_SEQ[t], TILE_BLOCK[t])`` (sequence, block of BLOCK_M
query rows). CTA ``(p, g)`` is persistent: it walks tiles ``PROG_TILE_START[p]:
PROG_TILE_START[p + 1]`` and, for each, the query heads ``g * HEADS_PER_CTA ..
(g + 1) * HEADS_PER_CTA - 1`` (head innermost, so the heads of one GQA group run back to
back and share the KV tile in L2). A *unit* is one (tile, head) pair.

Causality, per sequence: query ``i`` sees key ``j`` iff ``j <= i + shift`` (shift 0 top-left,
``L_k - L_q`` bottom-right). KV blocks past the last visible key of a tile are never
loaded; blocks that every row sees entirely need no mask. A row that sees no key gets
O = 0 and LSE = -inf (the running sum stays 0; the max is taken as 0 for the exponent,
so no ``-inf - -inf`` NaN).

Synchronization (ring of ``STAGES`` K buffers and ``STAGES`` V buffers, one Q buffer):

* ``*_ready[s]``: the producer arrives with an expected byte count, TMA completes it;
  the consumer waits with parity ``(c // STAGES) & 1`` for the ``c``-th block.
* ``*_empty[s]``: the consumer arrives once the wgmma that read the buffer completed
  (``warpgroup_mma_wait``); the producer waits with the flipped parity (a fresh mbarrier
  counts as having completed the phase before phase 0, so the first STAGES waits pass).
* K is released right after ``Q K^T`` completes, V after ``P V`` completes, Q after the
  unit's last ``Q K^T``.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

# Scalars that change with the batch but not the code: one compiled variant for all values.
_DO_NOT_SPECIALIZE = ("L_Q", "GROUP", "HEADS_PER_CTA", "STRIDE_O", "STRIDE_LSE", "qk_scale")

LN2 = gl.constexpr(0.6931471805599453)


@gluon.jit
def _tile_bounds(Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t, L_Q,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr, BROADCAST_Q: gl.constexpr):
    """Scalars of tile ``t`` (int32): ``(q_row, o_row, row0, rows, k_start, k_len, shift, n_blocks, n_full)``.

    ``q_row``/``o_row``: first row of the tile in Q / O; ``row0``: its first row within the
    sequence; ``rows``: valid query rows (<= BLOCK_M, < 1 for a tile past the sequence's end);
    keys ``k_start .. k_start + k_len - 1``; ``n_blocks`` KV blocks hold a visible key for some
    valid row; the first ``n_full`` of them are visible to every row (no mask needed).
    """
    b = gl.load(TILE_SEQ + t)
    m_blk = gl.load(TILE_BLOCK + t)
    k_start = gl.load(K_OFF + b).to(gl.int32)
    k_len = gl.load(K_OFF + b + 1).to(gl.int32) - k_start
    if BROADCAST_Q:
        q_start = k_start * 0
        q_len = q_start + L_Q
        o_start = b * L_Q
    else:
        q_start = gl.load(Q_OFF + b).to(gl.int32)
        q_len = gl.load(Q_OFF + b + 1).to(gl.int32) - q_start
        o_start = q_start
    row0 = m_blk * BLOCK_M
    rows = gl.minimum(q_len - row0, BLOCK_M)
    if CAUSAL:
        if BOTTOM_RIGHT:
            shift = k_len - q_len
        else:
            shift = k_len * 0
        hi = gl.maximum(gl.minimum(row0 + rows + shift, k_len), 0)  # keys seen by the last valid row
        full = gl.maximum(gl.minimum(row0 + 1 + shift, k_len), 0)  # keys seen by the first row
    else:
        shift = k_len * 0
        hi = k_len
        full = k_len
    n_blocks = gl.cdiv(hi, BLOCK_N)
    n_full = full // BLOCK_N
    return q_start + row0, o_start + row0, row0, rows, k_start, k_len, shift, n_blocks, n_full


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem,
              q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
              Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q, GROUP,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
              CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr, BROADCAST_Q: gl.constexpr):
    """Load partition (one warp): TMA loads of each unit's Q tile and its KV blocks, in the consumer's order."""
    kv = 0  # KV blocks issued so far by this CTA: ring slot kv % STAGES, pass (kv // STAGES)
    unit = 0
    for t in range(t_begin, t_end):
        q_row, o_row, row0, rows, k_start, k_len, shift, n_blocks, n_full = _tile_bounds(
            Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t, L_Q, BLOCK_M, BLOCK_N, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q)
        for h in range(h_begin, h_end):
            mbarrier.wait(q_empty, (unit & 1) ^ 1)
            mbarrier.expect(q_ready, q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [q_row, h * HEAD_DIM], q_ready, q_smem)
            kv_col = (h // GROUP) * HEAD_DIM
            for j in range(n_blocks):
                c = kv + j
                s = c % STAGES
                phase = (c // STAGES) & 1
                mbarrier.wait(k_empty.index(s), phase ^ 1)
                mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(k_desc, [k_start + j * BLOCK_N, kv_col], k_ready.index(s),
                                                k_smem.index(s))
                mbarrier.wait(v_empty.index(s), phase ^ 1)
                mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(v_desc, [k_start + j * BLOCK_N, kv_col], v_ready.index(s),
                                                v_smem.index(s))
            kv += n_blocks
            unit += 1


@gluon.jit
def _softmax_block(qk, m_i, l_i, lim, col0, masked, qk_scale,
                   BLOCK_N: gl.constexpr, s_layout: gl.constexpr):
    """One online-softmax step in base 2 on raw scores ``qk [BLOCK_M, BLOCK_N]`` (fp32).

    ``masked``: the block crosses the key end or the causal diagonal; key ``col0 + n`` is
    visible to row ``r`` iff ``col0 + n <= lim[r]``. Returns ``(p, m_new, l_new, alpha)`` with
    ``p = exp2(s - m_new)`` (fp32) and ``alpha = exp2(m_old - m_new)`` the accumulator rescale.
    """
    s = qk * qk_scale
    if masked:
        cols = col0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        s = gl.where(cols[None, :] <= lim[:, None], s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, 1))
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)  # a row that saw no key yet: exponents -inf, not NaN
    p = gl.exp2(s - m_safe[:, None])
    alpha = gl.exp2(m_i - m_safe)
    l_new = l_i * alpha + gl.sum(p, 1)
    return p, m_new, l_new, alpha


@gluon.jit
def _consumer(q_smem, k_smem, v_smem, o_smem, o_desc, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
              O, LSE, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q,
              STRIDE_O, STRIDE_LSE, qk_scale,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
              CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr, BROADCAST_Q: gl.constexpr,
              num_warps: gl.constexpr):
    """MMA + softmax partition (``num_warps`` warps, BLOCK_M / num_warps query rows per warp)."""
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    offs_m_s = gl.arange(0, BLOCK_M, layout=row_s)
    offs_m_o = gl.arange(0, BLOCK_M, layout=row_o)
    offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    kv = 0
    unit = 0
    for t in range(t_begin, t_end):
        q_row, o_row, row0, rows, k_start, k_len, shift, n_blocks, n_full = _tile_bounds(
            Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t, L_Q, BLOCK_M, BLOCK_N, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q)
        # last visible key of each row (tile row r is sequence row row0 + r)
        if CAUSAL:
            lim = gl.minimum(offs_m_s + (row0 + shift), k_len - 1)
        else:
            lim = gl.zeros([BLOCK_M], gl.int32, row_s) + (k_len - 1)
        for h in range(h_begin, h_end):
            m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_s)
            l_i = gl.zeros([BLOCK_M], gl.float32, row_s)
            acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
            mbarrier.wait(q_ready, unit & 1)
            if n_blocks > 0:
                # block 0: S = Q K^T, softmax
                s0 = kv % STAGES
                mbarrier.wait(k_ready.index(s0), (kv // STAGES) & 1)
                qk = warpgroup_mma(q_smem, k_smem.index(s0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
                qk = warpgroup_mma_wait(0, deps=(qk, ))
                mbarrier.arrive(k_empty.index(s0), count=1)
                p, m_i, l_i, alpha = _softmax_block(qk, m_i, l_i, lim, 0, n_full == 0, qk_scale, BLOCK_N, s_layout)
                p_op = gl.convert_layout(p.to(dtype), p_layout)
                for j in range(1, n_blocks):
                    c = kv + j
                    s = c % STAGES
                    sp = (c - 1) % STAGES
                    # issue S_j = Q K_j^T, then O += P_{j-1} V_{j-1}; both run while the softmax of j runs
                    mbarrier.wait(k_ready.index(s), (c // STAGES) & 1)
                    qk = warpgroup_mma(q_smem, k_smem.index(s).permute((1, 0)), s_zero, use_acc=False,
                                       is_async=True)
                    mbarrier.wait(v_ready.index(sp), ((c - 1) // STAGES) & 1)
                    acc = warpgroup_mma(p_op, v_smem.index(sp), acc, is_async=True)
                    qk = warpgroup_mma_wait(1, deps=(qk, ))  # S_j done, P V may still run
                    mbarrier.arrive(k_empty.index(s), count=1)
                    p, m_i, l_i, alpha = _softmax_block(qk, m_i, l_i, lim, j * BLOCK_N, j >= n_full, qk_scale,
                                                        BLOCK_N, s_layout)
                    acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                    mbarrier.arrive(v_empty.index(sp), count=1)
                    acc = acc * gl.convert_layout(alpha, row_o)[:, None]
                    p_op = gl.convert_layout(p.to(dtype), p_layout)
                mbarrier.arrive(q_empty, count=1)  # every Q K^T of this unit has completed
                c = kv + n_blocks - 1
                s = c % STAGES
                mbarrier.wait(v_ready.index(s), (c // STAGES) & 1)
                acc = warpgroup_mma(p_op, v_smem.index(s), acc, is_async=True)
                acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                mbarrier.arrive(v_empty.index(s), count=1)
            else:
                mbarrier.arrive(q_empty, count=1)
            kv += n_blocks
            unit += 1

            # epilogue: O = acc / l, LSE = (m + log2 l) ln 2; rows with no visible key: 0 and -inf
            l_o = gl.convert_layout(l_i, row_o)
            m_o = gl.convert_layout(m_i, row_o)
            empty = l_o == 0.0
            l_safe = gl.where(empty, 1.0, l_o)
            o = acc / l_safe[:, None]
            lse = gl.where(empty, float("-inf"), (m_o + gl.log2(l_safe)) * LN2)
            row_ok = offs_m_o < rows
            out_rows = (o_row + offs_m_o).to(gl.int64)
            if rows >= BLOCK_M:
                # full tile: stage O in shared memory and store it with one TMA copy
                tma.store_wait(0)  # the previous unit's TMA store has finished reading o_smem
                o_smem.store(o.to(dtype))
                fence_async_shared()  # order the generic-proxy writes before the async-proxy read
                tma.async_copy_shared_to_global(o_desc, [o_row, h * HEAD_DIM], o_smem)
            else:
                # partial tile: a TMA box would overwrite the next sequence's rows; masked stores
                o_ptrs = O + out_rows[:, None] * STRIDE_O + (h * HEAD_DIM + offs_d)[None, :]
                gl.store(o_ptrs, o.to(dtype), mask=row_ok[:, None] & (offs_d < HEAD_DIM)[None, :])
            gl.store(LSE + h.to(gl.int64) * STRIDE_LSE + out_rows, lse, mask=row_ok)
    tma.store_wait(0)


@gluon.jit
def _fwd_kernel(q_desc, k_desc, v_desc, o_desc, O, LSE, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, PROG_TILE_START,
                L_Q, GROUP, HEADS_PER_CTA, STRIDE_O, STRIDE_LSE, qk_scale,
                STAGES: gl.constexpr, CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr,
                BROADCAST_Q: gl.constexpr, num_warps: gl.constexpr):
    """Forward: O and natural-log LSE of program ``pid(0)``'s tiles for head group ``pid(1)``."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    dtype: gl.constexpr = q_desc.dtype

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    o_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], o_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_ready, count=1)
    mbarrier.init(q_empty, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(v_empty.index(i), count=1)

    pid = gl.program_id(0)
    h_begin = gl.program_id(1) * HEADS_PER_CTA
    h_end = h_begin + HEADS_PER_CTA
    t_begin = gl.load(PROG_TILE_START + pid)
    t_end = gl.load(PROG_TILE_START + pid + 1)

    gl.warp_specialize([
        (_consumer, (q_smem, k_smem, v_smem, o_smem, o_desc, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                     O, LSE, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q,
                     STRIDE_O, STRIDE_LSE, qk_scale,
                     BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q, num_warps)),
        (_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem,
                     q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
                     Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q, GROUP,
                     BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q)),
    ], [1], [24])


# ----------------------------------------------------------------------------- backward
#
# FlashAttention-2's backward (Dao 2023, Algorithm 2) split FA3-style into two deterministic
# kernels without atomics (Shah et al. 2024 use atomics for dQ; here dQ has its own pass):
#
# * dK/dV over KV tiles: for each (KV tile, KV head) unit, sum over the GROUP query heads of
#   the KV head and over the query blocks that see the tile:
#   S^T = K Q^T, P^T = exp2(S^T * qk_scale - LSE2), dV += P^T dO, dP^T = V dO^T,
#   dS^T = P^T (dP^T - delta), dK += dS^T Q; finally dK *= sm_scale.
# * dQ over query tiles: for each (Q tile, query head) unit, over its visible KV blocks:
#   S = Q K^T, P = exp2(S * qk_scale - LSE2), dP = dO V^T, dS = P (dP - delta), dQ += dS K.
#   Broadcast-Q writes a float32 partial per sequence (rows of O); the host sums them.
#
# ``delta = rowsum(dO * O)`` and ``LSE2 = LSE * log2(e)`` (float32 ``[H_q, rows_o]`` each, +inf where LSE is
# -inf: no visible key, P = 0) come from ``_bwd_delta_kernel``. Each kernel has a producer warp (TMA) and an
# 8-warp consumer (wgmma + elementwise), like the forward.

LOG2E = gl.constexpr(1.4426950408889634)


@gluon.jit
def _kv_tile_bounds(Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t, L_Q,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr, BROADCAST_Q: gl.constexpr):
    """Scalars of KV tile ``t``: ``(q_start, o_start, q_len, k_row, col0, k_len, shift, m_lo, m_hi)``.

    Keys ``col0 .. col0 + BLOCK_N - 1`` of the sequence (row ``k_row`` of K); query blocks
    ``m_lo .. m_hi - 1`` (of BLOCK_M rows) hold every query that sees one of them.
    """
    b = gl.load(TILE_SEQ + t)
    n_blk = gl.load(TILE_BLOCK + t)
    k_start = gl.load(K_OFF + b).to(gl.int32)
    k_len = gl.load(K_OFF + b + 1).to(gl.int32) - k_start
    if BROADCAST_Q:
        q_start = k_start * 0
        q_len = q_start + L_Q
        o_start = b * L_Q
    else:
        q_start = gl.load(Q_OFF + b).to(gl.int32)
        q_len = gl.load(Q_OFF + b + 1).to(gl.int32) - q_start
        o_start = q_start
    col0 = n_blk * BLOCK_N
    if CAUSAL:
        if BOTTOM_RIGHT:
            shift = k_len - q_len
        else:
            shift = k_len * 0
        m_lo = gl.maximum(col0 - shift, 0) // BLOCK_M  # first query that sees key col0: i >= col0 - shift
    else:
        shift = k_len * 0
        m_lo = k_len * 0
    m_hi = gl.cdiv(q_len, BLOCK_M)
    return q_start, o_start, q_len, k_start + col0, col0, k_len, shift, m_lo, m_hi


@gluon.jit
def _dkdv_producer(q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem,
                   kv_ready, kv_empty, qd_ready, qd_empty,
                   Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q, GROUP,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                   CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr, BROADCAST_Q: gl.constexpr):
    """Load partition of dK/dV: each unit's K and V once, then (Q, dO) blocks through the ring."""
    c = 0
    unit = 0
    for t in range(t_begin, t_end):
        q_start, o_start, q_len, k_row, col0, k_len, shift, m_lo, m_hi = _kv_tile_bounds(
            Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t, L_Q, BLOCK_M, BLOCK_N, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q)
        for hk in range(h_begin, h_end):
            mbarrier.wait(kv_empty, (unit & 1) ^ 1)
            mbarrier.expect(kv_ready, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(k_desc, [k_row, hk * HEAD_DIM], kv_ready, k_smem)
            tma.async_copy_global_to_shared(v_desc, [k_row, hk * HEAD_DIM], kv_ready, v_smem)
            for g in range(GROUP):
                h = hk * GROUP + g
                for mb in range(m_lo, m_hi):
                    s = c % STAGES
                    mbarrier.wait(qd_empty.index(s), ((c // STAGES) & 1) ^ 1)
                    mbarrier.expect(qd_ready.index(s), q_desc.block_type.nbytes + do_desc.block_type.nbytes)
                    tma.async_copy_global_to_shared(q_desc, [q_start + mb * BLOCK_M, h * HEAD_DIM],
                                                    qd_ready.index(s), q_smem.index(s))
                    tma.async_copy_global_to_shared(do_desc, [o_start + mb * BLOCK_M, h * HEAD_DIM],
                                                    qd_ready.index(s), do_smem.index(s))
                    c += 1
            unit += 1


@gluon.jit
def _dkdv_consumer(q_smem, do_smem, k_smem, v_smem, kv_ready, kv_empty, qd_ready, qd_empty,
                   DK, DV, LSE2, DELTA, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end,
                   L_Q, GROUP, STRIDE_KV, STRIDE_STAT, sm_scale, qk_scale,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                   CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr, BROADCAST_Q: gl.constexpr,
                   num_warps: gl.constexpr):
    """dK/dV partition: BLOCK_N keys (the wgmma M dimension) against BLOCK_M queries per step."""
    dtype: gl.constexpr = q_smem.dtype
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                        instr_shape=[16, BLOCK_M, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    key_l: gl.constexpr = gl.SliceLayout(1, st_layout)
    qry_l: gl.constexpr = gl.SliceLayout(0, st_layout)

    st_zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, st_layout)
    offs_n = gl.arange(0, BLOCK_N, layout=key_l)
    offs_m = gl.arange(0, BLOCK_M, layout=qry_l)
    offs_n_acc = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
    offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
    c = 0
    unit = 0
    for t in range(t_begin, t_end):
        q_start, o_start, q_len, k_row, col0, k_len, shift, m_lo, m_hi = _kv_tile_bounds(
            Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t, L_Q, BLOCK_M, BLOCK_N, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q)
        keys = col0 + offs_n
        key_ok = keys < k_len
        for hk in range(h_begin, h_end):
            dk = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, acc_layout)
            dv = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, acc_layout)
            mbarrier.wait(kv_ready, unit & 1)
            for g in range(GROUP):
                h = hk * GROUP + g
                for mb in range(m_lo, m_hi):
                    s = c % STAGES
                    rows = mb * BLOCK_M + offs_m
                    row_ok = rows < q_len
                    stat = h.to(gl.int64) * STRIDE_STAT + (o_start + rows)
                    # used as loaded: LSE scaled here had ptxas wait on each load before the products (H100)
                    lse2 = gl.load(LSE2 + stat, mask=row_ok, other=float("inf"))
                    delta = gl.load(DELTA + stat, mask=row_ok, other=0.0)
                    mbarrier.wait(qd_ready.index(s), (c // STAGES) & 1)
                    st = warpgroup_mma(k_smem, q_smem.index(s).permute((1, 0)), st_zero, use_acc=False,
                                       is_async=True)
                    dpt = warpgroup_mma(v_smem, do_smem.index(s).permute((1, 0)), st_zero, use_acc=False,
                                        is_async=True)
                    st, dpt = warpgroup_mma_wait(0, deps=(st, dpt))
                    vis = key_ok[:, None] & row_ok[None, :]
                    if CAUSAL:
                        vis = vis & (keys[:, None] <= rows[None, :] + shift)
                    # mask before exp2: a hidden (future) key can score far above the row's LSE
                    pt = gl.exp2(gl.where(vis, st * qk_scale - lse2[None, :], float("-inf")))
                    dst = pt * (dpt - delta[None, :])
                    pt_op = gl.convert_layout(pt.to(dtype), op_layout)
                    dst_op = gl.convert_layout(dst.to(dtype), op_layout)
                    dv = warpgroup_mma(pt_op, do_smem.index(s), dv, is_async=True)
                    dk = warpgroup_mma(dst_op, q_smem.index(s), dk, is_async=True)
                    dv, dk, pt_op, dst_op = warpgroup_mma_wait(0, deps=(dv, dk, pt_op, dst_op))
                    mbarrier.arrive(qd_empty.index(s), count=1)
                    c += 1
            mbarrier.arrive(kv_empty, count=1)  # every MMA reading K and V of this unit has completed
            unit += 1
            dk = dk * sm_scale
            ok = ((col0 + offs_n_acc) < k_len)[:, None] & (offs_d < HEAD_DIM)[None, :]
            ptrs = (k_row + offs_n_acc).to(gl.int64)[:, None] * STRIDE_KV + (hk * HEAD_DIM + offs_d)[None, :]
            gl.store(DK + ptrs, dk.to(dtype), mask=ok)
            gl.store(DV + ptrs, dv.to(dtype), mask=ok)


@gluon.jit
def _bwd_dkdv_kernel(q_desc, do_desc, k_desc, v_desc, DK, DV, LSE2, DELTA, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK,
                     PROG_TILE_START, L_Q, GROUP, HEADS_PER_CTA, STRIDE_KV, STRIDE_STAT, sm_scale, qk_scale,
                     STAGES: gl.constexpr, CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr,
                     BROADCAST_Q: gl.constexpr, num_warps: gl.constexpr):
    """dK, dV of program ``pid(0)``'s KV tiles for KV-head group ``pid(1)`` (sums the GQA group's heads)."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], do_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], v_desc.layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    qd_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    qd_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready, count=1)
    mbarrier.init(kv_empty, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(qd_ready.index(i), count=1)
        mbarrier.init(qd_empty.index(i), count=1)
    pid = gl.program_id(0)
    h_begin = gl.program_id(1) * HEADS_PER_CTA
    h_end = h_begin + HEADS_PER_CTA
    t_begin = gl.load(PROG_TILE_START + pid)
    t_end = gl.load(PROG_TILE_START + pid + 1)
    gl.warp_specialize([
        (_dkdv_consumer, (q_smem, do_smem, k_smem, v_smem, kv_ready, kv_empty, qd_ready, qd_empty,
                          DK, DV, LSE2, DELTA, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end,
                          L_Q, GROUP, STRIDE_KV, STRIDE_STAT, sm_scale, qk_scale,
                          BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q, num_warps)),
        (_dkdv_producer, (q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem,
                          kv_ready, kv_empty, qd_ready, qd_empty,
                          Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q, GROUP,
                          BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q)),
    ], [1], [24])


@gluon.jit
def _dq_producer(q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem,
                 qd_ready, qd_empty, kv_ready, kv_empty,
                 Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q, GROUP,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                 CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr, BROADCAST_Q: gl.constexpr):
    """Load partition of dQ: each unit's Q and dO once, then its visible (K, V) blocks through the ring."""
    c = 0
    unit = 0
    for t in range(t_begin, t_end):
        q_row, o_row, row0, rows, k_start, k_len, shift, n_blocks, n_full = _tile_bounds(
            Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t, L_Q, BLOCK_M, BLOCK_N, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q)
        for h in range(h_begin, h_end):
            mbarrier.wait(qd_empty, (unit & 1) ^ 1)
            mbarrier.expect(qd_ready, q_desc.block_type.nbytes + do_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [q_row, h * HEAD_DIM], qd_ready, q_smem)
            tma.async_copy_global_to_shared(do_desc, [o_row, h * HEAD_DIM], qd_ready, do_smem)
            kv_col = (h // GROUP) * HEAD_DIM
            for j in range(n_blocks):
                s = c % STAGES
                mbarrier.wait(kv_empty.index(s), ((c // STAGES) & 1) ^ 1)
                mbarrier.expect(kv_ready.index(s), k_desc.block_type.nbytes + v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(k_desc, [k_start + j * BLOCK_N, kv_col], kv_ready.index(s),
                                                k_smem.index(s))
                tma.async_copy_global_to_shared(v_desc, [k_start + j * BLOCK_N, kv_col], kv_ready.index(s),
                                                v_smem.index(s))
                c += 1
            unit += 1


@gluon.jit
def _dq_consumer(q_smem, do_smem, k_smem, v_smem, qd_ready, qd_empty, kv_ready, kv_empty,
                 DQ, LSE2, DELTA, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q,
                 STRIDE_DQ, STRIDE_STAT, sm_scale, qk_scale,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                 CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr, BROADCAST_Q: gl.constexpr,
                 num_warps: gl.constexpr):
    """dQ partition: BLOCK_M queries against BLOCK_N keys per step."""
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                         instr_shape=[16, HEAD_DIM, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    row_l: gl.constexpr = gl.SliceLayout(1, s_layout)

    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    offs_m = gl.arange(0, BLOCK_M, layout=row_l)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    offs_m_acc = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, acc_layout))
    offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, acc_layout))
    c = 0
    unit = 0
    for t in range(t_begin, t_end):
        q_row, o_row, row0, rows, k_start, k_len, shift, n_blocks, n_full = _tile_bounds(
            Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t, L_Q, BLOCK_M, BLOCK_N, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q)
        row_ok = offs_m < rows
        if CAUSAL:
            lim = gl.minimum(offs_m + (row0 + shift), k_len - 1)
        else:
            lim = gl.zeros([BLOCK_M], gl.int32, row_l) + (k_len - 1)
        for h in range(h_begin, h_end):
            stat = h.to(gl.int64) * STRIDE_STAT + (o_row + offs_m)
            # the delta kernel's base-2 LSE (+inf where no key: P = 0)
            lse2 = gl.load(LSE2 + stat, mask=row_ok, other=float("inf"))
            delta = gl.load(DELTA + stat, mask=row_ok, other=0.0)
            dq = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, acc_layout)
            mbarrier.wait(qd_ready, unit & 1)
            for j in range(n_blocks):
                s = c % STAGES
                mbarrier.wait(kv_ready.index(s), (c // STAGES) & 1)
                sc = warpgroup_mma(q_smem, k_smem.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
                dp = warpgroup_mma(do_smem, v_smem.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
                sc, dp = warpgroup_mma_wait(0, deps=(sc, dp))
                cols = j * BLOCK_N + offs_n
                vis = cols[None, :] <= lim[:, None]
                p = gl.exp2(gl.where(vis, sc * qk_scale - lse2[:, None], float("-inf")))
                ds = p * (dp - delta[:, None])
                ds_op = gl.convert_layout(ds.to(dtype), op_layout)
                dq = warpgroup_mma(ds_op, k_smem.index(s), dq, is_async=True)
                dq, ds_op = warpgroup_mma_wait(0, deps=(dq, ds_op))
                mbarrier.arrive(kv_empty.index(s), count=1)
                c += 1
            mbarrier.arrive(qd_empty, count=1)
            unit += 1
            dq = dq * sm_scale
            if BROADCAST_Q:
                dq_row = o_row  # a float32 partial per sequence, summed over the batch by the host
            else:
                dq_row = q_row
            ok = (offs_m_acc < rows)[:, None] & (offs_d < HEAD_DIM)[None, :]
            ptrs = (dq_row + offs_m_acc).to(gl.int64)[:, None] * STRIDE_DQ + (h * HEAD_DIM + offs_d)[None, :]
            gl.store(DQ + ptrs, dq.to(DQ.dtype.element_ty), mask=ok)


@gluon.jit
def _bwd_dq_kernel(q_desc, do_desc, k_desc, v_desc, DQ, LSE2, DELTA, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK,
                   PROG_TILE_START, L_Q, GROUP, HEADS_PER_CTA, STRIDE_DQ, STRIDE_STAT, sm_scale, qk_scale,
                   STAGES: gl.constexpr, CAUSAL: gl.constexpr, BOTTOM_RIGHT: gl.constexpr,
                   BROADCAST_Q: gl.constexpr, num_warps: gl.constexpr):
    """dQ of program ``pid(0)``'s query tiles for head group ``pid(1)``."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], do_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    qd_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    qd_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(qd_ready, count=1)
    mbarrier.init(qd_empty, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(kv_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=1)
    pid = gl.program_id(0)
    h_begin = gl.program_id(1) * HEADS_PER_CTA
    h_end = h_begin + HEADS_PER_CTA
    t_begin = gl.load(PROG_TILE_START + pid)
    t_end = gl.load(PROG_TILE_START + pid + 1)
    gl.warp_specialize([
        (_dq_consumer, (q_smem, do_smem, k_smem, v_smem, qd_ready, qd_empty, kv_ready, kv_empty,
                        DQ, LSE2, DELTA, Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q,
                        STRIDE_DQ, STRIDE_STAT, sm_scale, qk_scale,
                        BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q, num_warps)),
        (_dq_producer, (q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem,
                        qd_ready, qd_empty, kv_ready, kv_empty,
                        Q_OFF, K_OFF, TILE_SEQ, TILE_BLOCK, t_begin, t_end, h_begin, h_end, L_Q, GROUP,
                        BLOCK_M, BLOCK_N, HEAD_DIM, STAGES, CAUSAL, BOTTOM_RIGHT, BROADCAST_Q)),
    ], [1], [24])


@gluon.jit
def _bwd_delta_kernel(O, DO, DELTA, LSE, LSE2, rows, STRIDE_ROW, STRIDE_DELTA, STRIDE_LSE,
                      HEAD_DIM: gl.constexpr, BLOCK_R: gl.constexpr, num_warps: gl.constexpr):
    """``DELTA[h, r] = sum_d O[r, h, d] * dO[r, h, d]`` in float32, rows ``pid(0) * BLOCK_R ..`` of head ``pid(1)``,
    and ``LSE2[h, r] = LSE[h, r] * log2(e)`` (+inf where LSE is -inf: a row with no key gets P = 0); ``LSE2`` has
    ``DELTA``'s strides.

    One pass over O and dO in their own dtype (16-byte vector loads), products and sum in float32:
    the torch expression it replaces wrote float32 copies of both tensors first (5 kernels).
    """
    layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 8], threads_per_warp=[4, 8],
                                            warps_per_cta=[num_warps, 1], order=[1, 0])
    r = gl.program_id(0) * BLOCK_R + gl.arange(0, BLOCK_R, layout=gl.SliceLayout(1, layout))
    h = gl.program_id(1)
    d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    ok = r < rows
    offs = r.to(gl.int64)[:, None] * STRIDE_ROW + (h * HEAD_DIM + d)[None, :]
    mask = ok[:, None] & (d < HEAD_DIM)[None, :]
    o = gl.load(O + offs, mask=mask, other=0.0).to(gl.float32)
    do = gl.load(DO + offs, mask=mask, other=0.0).to(gl.float32)
    gl.store(DELTA + h.to(gl.int64) * STRIDE_DELTA + r, gl.sum(o * do, 1), mask=ok)
    lse = gl.load(LSE + h.to(gl.int64) * STRIDE_LSE + r, mask=ok, other=0.0)
    gl.store(LSE2 + h.to(gl.int64) * STRIDE_DELTA + r, gl.where(lse == float("-inf"), float("inf"), lse * LOG2E),
             mask=ok)
