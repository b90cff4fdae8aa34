"""The device planner's Triton kernels: a pass's tiles and programs in two launches instead of about eighty
tensor operations (:mod:`jfa_verify.scheduling.device_plan` has the rules, the torch reference and the tests'
host reference). Imported on first use, so ``TRITON_INTERPRET`` is read after the device is chosen.

``_tiles_kernel``: per slot ``s`` of the pass's capacity, its sequence (a binary search for the first
``ENDS[b] > s``, ``ENDS`` the running count of non-empty tiles), its block, and for zigzag its sort key (the cost,
-1 past the real tiles). ``_deal_kernel``: per rank ``r`` (a slot, or the ``r``-th tile by descending cost), its
program and its place in that program's list, in closed form: round-robin and zigzag deal whole passes of ``n``
ranks, so program ``p`` holds ``f`` or ``f + 1`` tiles (``f = count // n``), and its list starts at
``p * f + (extra tiles of the programs before it)``.
"""

from __future__ import annotations

import triton
import triton.language as tl

SLOTS = 128  # slots per program of both kernels
FILLER_BLOCK = 1 << 30  # the block of the filler entries past the real tiles: past every sequence's rows


@triton.jit
def _find_sequence(ENDS, s, B, STEPS):
    """Per slot ``s``: the first ``b`` with ``ENDS[b] > s`` (``B`` when none), by ``STEPS`` halvings."""
    lo = s * 0
    hi = lo + B
    for _ in range(STEPS):
        mid = (lo + hi) // 2
        e = tl.load(ENDS + mid, mask=mid < B, other=0)
        go = (mid < hi) & (e <= s)
        lo = tl.where(go, mid + 1, lo)
        hi = tl.where(go | (mid >= hi), hi, mid)
    return lo


@triton.jit
def _clamp(x, lo, hi):
    return tl.minimum(tl.maximum(x, lo), hi)


# The integer arguments vary with every batch (its size, the capacity, the window) and only bound loops and masks:
# specialized, each value class (1, a multiple of 16, other) built another variant of both kernels, a fifth of a cold
# suite's builds (issue 39, 3).
@triton.jit(do_not_specialize=["B", "CAP", "STEPS", "WIN_LEFT", "RIGHT"])
def _tiles_kernel(ENDS, LEN_A, LEN_B, SEQ, BLK, KEY, B, CAP, STEPS, WIN_LEFT, RIGHT,
                  BLOCK: tl.constexpr, WITH_COST: tl.constexpr, BACKWARD: tl.constexpr,
                  BOTTOM_RIGHT: tl.constexpr, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr,
                  S: tl.constexpr):
    s = tl.program_id(0) * S + tl.arange(0, S)
    inside = s < CAP
    count = tl.load(ENDS + B - 1)
    seq = tl.minimum(_find_sequence(ENDS, s, B, STEPS), B - 1)
    end = tl.load(ENDS + seq)
    la = tl.load(LEN_A + seq).to(tl.int64)  # the blocked dimension: L_q forward, L_k dK/dV
    nblk = (la + BLOCK - 1) // BLOCK
    blk = s - (end - nblk)
    valid = s < count
    tl.store(SEQ + s, seq, mask=inside)
    tl.store(BLK + s, blk, mask=inside)
    if WITH_COST:
        lb = tl.load(LEN_B + seq).to(tl.int64)
        first = blk * BLOCK
        rows = tl.minimum(la - first, BLOCK)
        if BACKWARD:  # contract.rows_seeing: q_len = lb, k_len = la
            shift = (la - lb) if BOTTOM_RIGHT else la * 0
            start = first * 0
            if HAS_RIGHT:
                start = tl.maximum(first - (shift + RIGHT + 1) + 1, 0)
            stop = lb
            if HAS_LEFT:
                stop = tl.minimum(lb, first + rows - (shift - WIN_LEFT))
            cost = tl.where(lb > 0, tl.maximum(stop - start, 0), 0)
        else:  # contract.keys_seen: q_len = la, k_len = lb
            shift = (lb - la) if BOTTOM_RIGHT else la * 0
            lo = first * 0
            if HAS_LEFT:
                lo = _clamp(first + shift - WIN_LEFT, 0, lb)
            hi = lb
            if HAS_RIGHT:
                hi = _clamp(first + rows - 1 + shift + RIGHT + 1, 0, lb)
            hi_last_lo = lb * 0  # the last row's lo, for hi = max(lo, hi) of that row
            if HAS_LEFT:
                hi_last_lo = _clamp(first + rows - 1 + shift - WIN_LEFT, 0, lb)
            hi = tl.maximum(hi, hi_last_lo)
            cost = tl.maximum(hi - lo, 0)
        tl.store(KEY + s, tl.where(valid, cost, -1), mask=inside)


@triton.jit(do_not_specialize=["B", "CAP", "N", "STEPS"])
def _deal_kernel(ENDS, LEN_A, SEQ, BLK, BY_RANK, EMPTY_BEFORE, TILE_SEQ, TILE_BLOCK, TILE_ID, PROG_START, B, CAP, N,
                 STEPS, BLOCK: tl.constexpr, SCHED: tl.constexpr, WITH_IDS: tl.constexpr, S: tl.constexpr):
    """``SCHED``: 0 grid (one tile per program), 1 round-robin (launch order), 2 zigzag (``BY_RANK``: slots by
    descending cost, ties by slot; ``SEQ``/``BLK``: ``_tiles_kernel``'s). ``WITH_IDS``: ``TILE_ID`` gets the host
    workload index (``EMPTY_BEFORE[b]``: sequences with no rows before ``b``), else the slot (never read)."""
    r = tl.program_id(0) * S + tl.arange(0, S)
    count = tl.load(ENDS + B - 1)
    if SCHED == 2:
        t = tl.load(BY_RANK + r, mask=r < CAP, other=0)
        seq = tl.load(SEQ + t, mask=r < CAP, other=0)
        blk = tl.load(BLK + t, mask=r < CAP, other=0)
    else:
        t = r
        seq = tl.minimum(_find_sequence(ENDS, r, B, STEPS), B - 1)
        nblk = (tl.load(LEN_A + seq).to(tl.int64) + BLOCK - 1) // BLOCK
        blk = r - (tl.load(ENDS + seq) - nblk)
    f = count // N
    rem = count % N
    if SCHED == 0:
        pos = r
    else:
        lap = r // N
        p = r % N
        if SCHED == 2:
            p = tl.where(lap % 2 == 0, p, N - 1 - p)
        if SCHED == 2:
            extra = tl.where(f % 2 == 0, tl.minimum(p, rem), tl.maximum(p - (N - rem), 0))
        else:
            extra = tl.minimum(p, rem)
        pos = p * f + extra + lap
    tile_id = t
    if WITH_IDS:  # the host workload list has one empty workload per sequence with no rows
        tile_id = t + tl.load(EMPTY_BEFORE + seq, mask=r < CAP, other=0)
    ok = r < count
    tl.store(TILE_SEQ + pos, seq.to(tl.int32), mask=ok)
    tl.store(TILE_BLOCK + pos, blk.to(tl.int32), mask=ok)
    tl.store(TILE_ID + pos, tile_id.to(tl.int32), mask=ok)
    # every position past the real tiles (those are 0 .. count - 1 in every mode) gets the filler tile, which a
    # kernel running one program per slot (a grid) finds empty: no row of sequence 0 lies in block FILLER_BLOCK
    filler = (r >= count) & (r < CAP)
    tl.store(TILE_SEQ + r, (r * 0).to(tl.int32), mask=filler)
    tl.store(TILE_BLOCK + r, (r * 0 + (1 << 30)).to(tl.int32), mask=filler)
    tl.store(TILE_ID + r, r.to(tl.int32), mask=filler)
    # program starts: p * f + (extra tiles before p), count at p = N; grid: min(p, count)
    q = r
    if SCHED == 0:
        starts = tl.minimum(q, count)
    elif SCHED == 2:
        starts = q * f + tl.where(f % 2 == 0, tl.minimum(q, rem), tl.maximum(q - (N - rem), 0))
    else:
        starts = q * f + tl.minimum(q, rem)
    tl.store(PROG_START + q, starts.to(tl.int32), mask=q <= N)
