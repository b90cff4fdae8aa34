"""Host side of ``gluon_jfa``: input checks, tiles and schedules, TMA descriptors, launches, autograd.

Gluon and Triton are imported inside functions only, so importing this module on a machine
without a GPU (or without Triton) never fails. Every kernel is reached through a kernel
module ``kmod`` (``_kernels.py`` or a mutated copy of it, see ``mutants.py``), bound by
:func:`make_gluon_attention`.

Work decomposition (forward; the dQ pass of the backward uses the same tiles and programs, the
dK/dV pass tiles of 128 keys dealt round-robin unless given, the registered kernel passes zigzag):

* tiles: ``[(sequence, query block), ...]`` b-major, one per BLOCK_M query rows; a
  sequence with ``L_q == 0`` has no tile (:func:`query_tiles`).
* programs: lists of tile indices; program ``p`` runs its tiles in order. Default: tiles
  dealt round-robin over the device's SM count (the framework passes its own, e.g. zigzag
  by cost). Empty programs are dropped before launch.
* heads are a grid axis: CTA ``(p, h)`` walks program ``p``'s tiles for query head ``h``
  (dK/dV: KV head). Grid ``(programs, H)``: the CTAs of head 0 form the first wave, the
  hardware's block scheduler starts the next ones as SMs free up. Folding every head into
  one persistent CTA made a heavy causal tile cost ``H`` times its schedule cost in one
  CTA: the one-mega causal batch ran at 0.97x FA2's forward, 1.76x with heads on the grid
  (``docs/evidence/gluon-speed-2026-12-03``). ``JFA_GLUON_HEAD_GROUPS`` (tests) folds heads
  back: ``N`` groups of ``H / N`` heads each, head innermost.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

__all__ = [
    "GluonUnsupported",
    "tile_sizes",
    "query_tiles",
    "round_robin_programs",
    "gluon_jagged_attention",
    "make_gluon_attention",
    "prepare_forward",
    "prepare_backward",
]

SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
NUM_WARPS = 8  # consumer partition: two warp groups, 64 query rows each
POISON_ENV = "JFA_GLUON_POISON"  # "1": outputs start as NaN so that unwritten rows show
HEAD_GROUPS_ENV = "JFA_GLUON_HEAD_GROUPS"  # tests only: fold heads into N groups per CTA (grid axis 1)


class GluonUnsupported(ValueError):
    """Valid inputs outside what ``gluon_jfa`` implements (dtype, head dim, layout, backward)."""


def tile_sizes(head_dim: int, dtype: torch.dtype) -> tuple[int, int]:
    """``(BLOCK_M, BLOCK_N)`` of the forward for ``head_dim`` and ``dtype`` (pure Python, no compile).

    Raises:
        GluonUnsupported: head dim not 64/128 or dtype not bfloat16/float16.
    """
    _check_supported(head_dim, head_dim, dtype)
    return 128, 128


BWD_DKDV_TILES = (64, 128)  # (query rows per step, keys per tile) of the dK/dV kernel
DELTA_ROWS = 64  # rows of O / dO per program of the delta kernel
# (query rows per tile, keys per step) of the dQ kernel: the forward's query tiles; 128 keys a step (ptxas: no
# spills; 64 was the first choice, measured against it in docs/evidence/gluon-speed-2026-12-03)
BWD_DQ_TILES = (128, 128)


def key_tiles(k_lengths: Sequence[int], block_n: int) -> list[tuple[int, int]]:
    """``[(b, n), ...]`` b-major, one per BLOCK_N keys (dK/dV work); sequences with ``L_k == 0`` give none."""
    return query_tiles(k_lengths, block_n)


def _stages(head_dim: int) -> int:
    """K/V ring depth: shared memory is Q and O staging (BLOCK_M x D each) + STAGES x (K + V) (BLOCK_N x D
    each), 2 bytes an element. D=128: 64 KiB + 2 x 64 KiB = 192 KiB; D=64: 32 KiB + 3 x 32 KiB = 128 KiB
    (an H200 block may use 227 KiB).
    """
    return 3 if head_dim <= 64 else 2


def _check_supported(d: int, d_v: int, dtype: torch.dtype) -> None:
    if dtype not in SUPPORTED_DTYPES:
        raise GluonUnsupported(f"gluon_jfa supports bfloat16 and float16 only, got dtype={dtype}")
    if d != d_v:
        raise GluonUnsupported(f"gluon_jfa needs D == D_v, got D={d}, D_v={d_v}")
    if d not in SUPPORTED_HEAD_DIMS:
        raise GluonUnsupported(f"gluon_jfa supports head dims {SUPPORTED_HEAD_DIMS}, got D={d}")


@dataclass(frozen=True)
class _Problem:
    broadcast: bool
    q_lengths: Optional[tuple]  # None: planned on the device (from_shape), lengths never read on the host
    k_lengths: Optional[tuple]
    q_first: Optional[int]  # first query/output row of sequence 0 (rows before belong to no sequence); None: unknown
    k_first: Optional[int]  # first key row of sequence 0
    rows: int  # rows of o / columns of lse
    h_q: int
    h_kv: int
    d: int
    causal: bool
    bottom_right: bool
    sm_scale: float
    dtype: torch.dtype
    batch: int = 0


def _validate(q, k, v, q_offsets, k_offsets, causal, causal_alignment, sm_scale, require_cuda=True) -> _Problem:
    """The framework's contract check (:func:`jfa_verify.core.contract.validate_inputs`), then ``gluon_jfa``'s limits.

    Raises:
        InvalidInput (a ValueError): inputs that break the contract.
        GluonUnsupported: valid inputs outside what this kernel implements.
    """
    from jfa_verify.core.contract import validate_inputs

    problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                              sm_scale=sm_scale)
    return from_problem(problem, q, k, v, require_cuda=require_cuda)


def from_problem(problem, q, k, v, require_cuda: bool = True) -> _Problem:
    """This kernel's launch description of a validated :class:`jfa_verify.core.contract.JaggedProblem`.

    Raises:
        GluonUnsupported: dtype, head dims, device, layout or alignment this kernel does not handle.
    """
    _check_supported(problem.head_dim, problem.head_dim_v, problem.dtype)
    if require_cuda and not q.is_cuda:
        raise GluonUnsupported("gluon_jfa runs on CUDA (Hopper) tensors only")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.is_contiguous():
            raise GluonUnsupported(f"gluon_jfa needs contiguous inputs (TMA descriptors); {name} is not: "
                                   f"call {name}.contiguous()")
        if t.data_ptr() % 16:
            raise GluonUnsupported(f"gluon_jfa needs 16-byte aligned base addresses (TMA); {name} is not")
    broadcast = problem.mode == "broadcast_q"
    return _Problem(
        broadcast=broadcast, q_lengths=problem.q_lengths, k_lengths=problem.k_lengths,
        # rows before offsets[0] belong to no sequence (all rows of an empty batch)
        q_first=0 if broadcast else (problem.q_starts[0] if problem.batch else problem.total_q_rows),
        k_first=problem.k_starts[0] if problem.batch else k.shape[0],
        rows=problem.total_q_rows,
        h_q=problem.num_heads_q, h_kv=problem.num_heads_kv, d=problem.head_dim, causal=problem.causal,
        bottom_right=problem.causal and problem.causal_alignment == "bottom_right", sm_scale=problem.sm_scale,
        dtype=problem.dtype, batch=problem.batch,
    )


def from_shape(shape, q, k, v, q_offsets, k_offsets, poison: bool = False, require_cuda: bool = True) -> _Problem:
    """This kernel's launch description of a :class:`jfa_verify.core.contract.CallShape`, for a launch planned
    on the device (:class:`jfa_verify.scheduling.device_plan.DeviceLaunchPlan`): no lengths, and no host
    synchronization unless ``poison`` (a test mode: the rows before ``offsets[0]`` must then be cleared by
    index, so ``offsets[0]`` is read).

    Raises:
        GluonUnsupported: as :func:`from_problem`.
    """
    from jfa_verify.core.contract import JaggedProblem

    bare = JaggedProblem(shape.mode, (), (), (), (), (), shape.total_q_rows, shape.num_heads_q, shape.num_heads_kv,
                         shape.head_dim, shape.head_dim_v, shape.causal, shape.causal_alignment, shape.sm_scale,
                         shape.dtype, shape.device, shape.inputs_contiguous, shape.window)
    described = from_problem(bare, q, k, v, require_cuda=require_cuda)
    first = (None, None)
    if poison:
        first = (0 if described.broadcast else int(q_offsets[0]), int(k_offsets[0]))
    return dataclasses.replace(described, q_lengths=None, k_lengths=None, q_first=first[0], k_first=first[1],
                               rows=shape.total_q_rows, batch=shape.batch)


def query_tiles(q_lengths: Sequence[int], block_m: int) -> list[tuple[int, int]]:
    """``[(b, m), ...]`` b-major, one per BLOCK_M query rows; sequences with ``L_q == 0`` give none."""
    return [(b, m) for b, n in enumerate(q_lengths) for m in range(-(-n // block_m))]


def round_robin_programs(num_tiles: int, num_programs: int) -> list[list[int]]:
    """Tile ``i`` to program ``i % num_programs`` (the default schedule)."""
    progs: list[list[int]] = [[] for _ in range(max(1, num_programs))]
    for i in range(num_tiles):
        progs[i % len(progs)].append(i)
    return progs


def _num_sms(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _schedule(problem: _Problem, tiles, programs, num_sms: int, device, heads: Optional[int] = None) -> Optional[dict]:
    """CSR arrays of a launch over query tiles (or the given ``tiles``), or None when no program has a tile.

    ``heads``: the heads each tile is run for (default ``H_q``; ``H_kv`` for dK/dV): one CTA per (program, head),
    grid ``(programs, heads)``, unless ``JFA_GLUON_HEAD_GROUPS`` folds them (module docstring).
    """
    heads = problem.h_q if heads is None else heads
    groups = heads  # one head per CTA (module docstring: why)
    forced = os.environ.get(HEAD_GROUPS_ENV, "")
    if forced:  # tests: e.g. "1" puts every head of a tile in one CTA (many units per CTA)
        groups = int(forced) if heads % int(forced) == 0 else 1
    if hasattr(programs, "prog_start"):  # a device plan (PlanArrays): its programs past the real ones are empty
        if programs.programs == 0:
            return None
        return dict(tile_seq=programs.tile_seq, tile_block=programs.tile_block, prog_start=programs.prog_start,
                    grid=(programs.programs, groups), heads_per_cta=heads // groups)
    block_m, _ = tile_sizes(problem.d, problem.dtype)
    if tiles is None:
        tiles = query_tiles(problem.q_lengths, block_m)
    tiles = [(int(b), int(m)) for b, m in tiles]
    for b, m in tiles:
        if not (0 <= b < problem.batch and m >= 0):
            raise ValueError(f"tile ({b}, {m}) outside the batch of {problem.batch} sequences")
    if programs is None:
        programs = round_robin_programs(len(tiles), num_sms)
    from jfa_verify.scheduling.device_plan import flatten_programs

    order, starts = flatten_programs(programs, len(tiles), drop_empty=True)  # an idle program needs no CTA
    n_prog = len(starts) - 1
    if n_prog == 0:
        return None
    i32 = lambda xs: torch.tensor(xs, dtype=torch.int32, device=device)  # noqa: E731
    return dict(tile_seq=i32([tiles[i][0] for i in order]), tile_block=i32([tiles[i][1] for i in order]),
                prog_start=i32(starts), grid=(n_prog, groups), heads_per_cta=heads // groups)


def _gl_dtype(dtype: torch.dtype):
    from triton.experimental.gluon import language as gl

    return {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[dtype]


@functools.lru_cache(maxsize=None)
def _shared_layout(block: tuple, dtype: torch.dtype):
    """The TMA box's shared-memory layout: a pure function of the box and dtype, computed in Python, cached
    (four descriptors a forward call; uncached it was about a tenth of a call's host time on the H200)."""
    from triton.experimental.gluon import language as gl

    return gl.NVMMASharedLayout.get_default_for(list(block), _gl_dtype(dtype))


def _descriptor(t2d: torch.Tensor, block: list[int]):
    """Host TMA descriptor of the 2-D view ``t2d [rows, heads * D]`` with box ``block = [rows, D]``."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    return TensorDescriptor(t2d, list(t2d.shape), list(t2d.stride()), block, _shared_layout(tuple(block), t2d.dtype))


def _alloc_outputs(problem: _Problem, device, poison: bool):
    # rows that belong to no sequence (before offsets[0]) are the contract's 0 / -inf; with offsets[0] on the
    # device (q_first None, never poisoned) every row starts so and the kernel overwrites the sequences' rows
    fill = float("nan") if poison else 0.0
    o = torch.full((problem.rows, problem.h_q, problem.d), fill, dtype=problem.dtype, device=device)
    lse = torch.full((problem.h_q, problem.rows), float("-inf") if problem.q_first is None else fill,
                     dtype=torch.float32, device=device)
    if problem.q_first is not None:
        o[: problem.q_first].zero_()
        lse[:, : problem.q_first] = float("-inf")
    return o, lse


def _plan_forward(kmod, problem: _Problem, q, k, v, q_offsets, k_offsets, tiles, programs, num_sms: int,
                  poison: bool = False):
    """Allocate ``(o, lse)`` and return ``(o, lse, launch)``; ``launch()`` runs the kernel (None: nothing to run).

    ``launch`` may be called again (benchmarks): it rewrites the same outputs.
    """
    device = q.device
    o, lse = _alloc_outputs(problem, device, poison)
    if problem.rows == 0 or q.shape[0] == 0:
        return o, lse, None
    if k.shape[0] == 0:  # every sequence has no key: a TMA descriptor cannot have an empty dim
        o.zero_()
        lse.fill_(float("-inf"))
        return o, lse, None
    plan = _schedule(problem, tiles, programs, num_sms, device)
    if plan is None:
        return o, lse, None
    block_m, block_n = tile_sizes(problem.d, problem.dtype)
    d = problem.d
    q2 = q.view(q.shape[0], problem.h_q * d)
    k2 = k.view(k.shape[0], problem.h_kv * d)
    v2 = v.view(v.shape[0], problem.h_kv * d)
    q_off = k_offsets if q_offsets is None else q_offsets  # never read under BROADCAST_Q
    args = (
        _descriptor(q2, [block_m, d]), _descriptor(k2, [block_n, d]), _descriptor(v2, [block_n, d]),
        _descriptor(o.view(problem.rows, problem.h_q * d), [block_m, d]), o, lse,
        q_off, k_offsets, plan["tile_seq"], plan["tile_block"], plan["prog_start"],
        q.shape[0] if problem.broadcast else 0, problem.h_q // problem.h_kv, plan["heads_per_cta"],
        problem.h_q * d, lse.stride(0), problem.sm_scale * math.log2(math.e),
    )
    flags = dict(STAGES=_stages(d), CAUSAL=problem.causal, BOTTOM_RIGHT=problem.bottom_right,
                 BROADCAST_Q=problem.broadcast, num_warps=NUM_WARPS)

    def launch():
        kmod._fwd_kernel[plan["grid"]](*args, **flags)

    return o, lse, launch


def _forward(kmod, problem: _Problem, q, k, v, q_offsets, k_offsets, tiles, programs, num_sms: int,
             poison: bool = False):
    """Run (or, with a compile-only ``kmod``, compile) the forward; returns ``(o, lse)``."""
    o, lse, launch = _plan_forward(kmod, problem, q, k, v, q_offsets, k_offsets, tiles, programs, num_sms, poison)
    if launch is not None:
        launch()
    return o, lse


def prepare_forward(kmod, q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left",
                    sm_scale=None, tiles=None, programs=None):
    """For benchmarks: validate and plan once; returns ``(o, lse, launch)`` where ``launch()`` only
    launches the kernel (no host checks, no schedule building), rewriting ``o`` and ``lse``."""
    problem = _validate(q, k, v, q_offsets, k_offsets, causal, causal_alignment, sm_scale)
    o, lse, launch = _plan_forward(kmod, problem, q, k, v, q_offsets, k_offsets, tiles, programs,
                                   _num_sms(q.device))
    return o, lse, (launch or (lambda: None))


def _bwd_stages(head_dim: int) -> int:
    """Ring depth of both backward kernels: the (Q, dO) ring of dK/dV (64 x D each) and the (K, V) ring of
    dQ (128 x D each) beside the unit's resident pair (128 x D each). D=128: dK/dV 64 KiB + 2 x 32 KiB,
    dQ 64 KiB + 2 x 64 KiB = 192 KiB (an H200 block may use 227 KiB)."""
    return _stages(head_dim)


def _plan_backward(kmod, problem: _Problem, q, k, v, o, lse, do, q_offsets, k_offsets, tiles, programs,
                   num_sms: int, poison: bool = False, kv_tiles=None, kv_programs=None):
    """Allocate dQ, dK, dV, build both schedules and descriptors; return ``(dq, dk, dv, launch)``.

    ``launch()`` runs the delta kernel (``rowsum(dO * O)``, float32), then the dK/dV and dQ kernels,
    rewriting the outputs (benchmarks call it again); broadcast-Q returns float32 per-sequence
    partials as ``dq`` (see :func:`_backward`). No device synchronization: the schedule comes
    from the problem's host-side lengths. ``kv_tiles``/``kv_programs``: the dK/dV pass's
    ``[(sequence, key block)]`` tiles of 128 keys and their programs (default: every key block, b-major,
    round-robin over the SMs; the registered kernel passes the framework's zigzag, which the H200 measured
    at 0.67x against 0.63x of FA2's backward on the causal uniform-32 batch, a tie elsewhere; direct calls keep
    the plan the GPU check measured them with, which needs no cost model).
    """
    device = q.device
    d = problem.d
    fill = float("nan") if poison else 0.0
    dk = torch.full_like(k, fill)
    dv = torch.full_like(v, fill)
    dq_rows = problem.rows if problem.broadcast else q.shape[0]
    dq_dtype = torch.float32 if problem.broadcast else q.dtype
    dq_out = torch.full((dq_rows, problem.h_q, d), fill, dtype=dq_dtype, device=device)
    if not problem.broadcast and problem.q_first is not None:
        dq_out[: problem.q_first].zero_()
    if k.shape[0] == 0 or problem.rows == 0 or q.shape[0] == 0:
        dq_out.zero_()
        dk.zero_()
        dv.zero_()
        return dq_out, dk, dv, None
    if problem.k_first is not None:  # rows before offsets[0] belong to no sequence (else zero-filled already)
        dk[: problem.k_first].zero_()
        dv[: problem.k_first].zero_()
    do = do.contiguous()
    qk_scale = problem.sm_scale * math.log2(math.e)
    q2 = q.view(q.shape[0], problem.h_q * d)
    do2 = do.view(problem.rows, problem.h_q * d)
    k2 = k.view(k.shape[0], problem.h_kv * d)
    v2 = v.view(v.shape[0], problem.h_kv * d)
    q_off = k_offsets if q_offsets is None else q_offsets
    l_q = q.shape[0] if problem.broadcast else 0
    group = problem.h_q // problem.h_kv
    flags = dict(STAGES=_bwd_stages(d), CAUSAL=problem.causal, BOTTOM_RIGHT=problem.bottom_right,
                 BROADCAST_Q=problem.broadcast, num_warps=NUM_WARPS)
    launches = []
    bm, bn = BWD_DKDV_TILES
    if kv_tiles is None and kv_programs is None:  # direct calls: round-robin (the registered kernel: zigzag)
        kv_tiles, kv_programs = key_tiles(problem.k_lengths, bn), None
    kv_plan = _schedule(problem, kv_tiles, kv_programs, num_sms, device, heads=problem.h_kv)
    if kv_plan is not None:
        kv_args = (_descriptor(q2, [bm, d]), _descriptor(do2, [bm, d]), _descriptor(k2, [bn, d]),
                   _descriptor(v2, [bn, d]), dk, dv)
        kv_rest = (q_off, k_offsets, kv_plan["tile_seq"], kv_plan["tile_block"], kv_plan["prog_start"],
                   l_q, group, kv_plan["heads_per_cta"], problem.h_kv * d, lse.stride(0), problem.sm_scale,
                   qk_scale)
        launches.append(lambda delta: kmod._bwd_dkdv_kernel[kv_plan["grid"]](*kv_args, lse, delta, *kv_rest,
                                                                              **flags))
    bm, bn = BWD_DQ_TILES
    q_plan = _schedule(problem, tiles, programs, num_sms, device)
    if q_plan is not None:
        q_args = (_descriptor(q2, [bm, d]), _descriptor(do2, [bm, d]), _descriptor(k2, [bn, d]),
                  _descriptor(v2, [bn, d]), dq_out)
        q_rest = (q_off, k_offsets, q_plan["tile_seq"], q_plan["tile_block"], q_plan["prog_start"],
                  l_q, group, q_plan["heads_per_cta"], problem.h_q * d, lse.stride(0), problem.sm_scale, qk_scale)
        launches.append(lambda delta: kmod._bwd_dq_kernel[q_plan["grid"]](*q_args, lse, delta, *q_rest, **flags))

    delta = torch.empty((problem.h_q, problem.rows), dtype=torch.float32, device=device)  # every entry written
    o = o.contiguous()
    delta_grid = (-(-problem.rows // DELTA_ROWS), problem.h_q)

    def launch():
        kmod._bwd_delta_kernel[delta_grid](o, do, delta, problem.rows, problem.h_q * d, delta.stride(0),
                                           HEAD_DIM=d, BLOCK_R=DELTA_ROWS, num_warps=4)
        for run in launches:
            run(delta)

    return dq_out, dk, dv, launch


def _finish_dq(problem: _Problem, q, dq_out):
    """dQ from the dQ kernel's output: broadcast-Q sums the float32 per-sequence partials."""
    if not problem.broadcast:
        return dq_out
    if not problem.batch:
        return torch.zeros_like(q)
    return dq_out.view(problem.batch, q.shape[0], problem.h_q, problem.d).sum(0).to(q.dtype)


def _backward(kmod, problem: _Problem, q, k, v, o, lse, do, q_offsets, k_offsets, tiles, programs, num_sms: int,
              poison: bool = False, kv_tiles=None, kv_programs=None):
    """dQ, dK, dV of ``sum(o * do)`` (LSE is not differentiated). Deterministic: no atomics.

    ``delta = rowsum(dO * O)`` is computed in float32; dK/dV run over KV tiles of 128 keys
    (``kv_tiles``/``kv_programs``, default b-major round-robin); dQ
    runs over the forward's query tiles and ``programs``. Broadcast-Q: dQ is a float32 partial
    per sequence, summed here.
    """
    dq_out, dk, dv, launch = _plan_backward(kmod, problem, q, k, v, o, lse, do, q_offsets, k_offsets, tiles,
                                            programs, num_sms, poison, kv_tiles, kv_programs)
    if launch is not None:
        launch()
    return _finish_dq(problem, q, dq_out), dk, dv


def prepare_backward(kmod, q, k, v, o, lse, do, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left",
                     sm_scale=None, tiles=None, programs=None, kv_tiles=None, kv_programs=None):
    """For benchmarks: validate and plan the backward once; returns ``launch`` where ``launch()`` runs the
    device work of one backward (delta, the dK/dV and dQ kernels, broadcast-Q's sum) and returns
    ``(dq, dk, dv)``; no host checks, no schedule building."""
    problem = _validate(q, k, v, q_offsets, k_offsets, causal, causal_alignment, sm_scale)
    dq_out, dk, dv, run = _plan_backward(kmod, problem, q, k, v, o, lse, do, q_offsets, k_offsets, tiles,
                                         programs, _num_sms(q.device), kv_tiles=kv_tiles, kv_programs=kv_programs)

    def launch():
        if run is not None:
            run()
        return _finish_dq(problem, q, dq_out), dk, dv

    return launch


class _GluonJaggedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, q_offsets, k_offsets, kmod, problem, tiles, programs, poison, kv_plan):
        o, lse = _forward(kmod, problem, q, k, v, q_offsets, k_offsets, tiles, programs, _num_sms(q.device),
                          poison)
        ctx.mark_non_differentiable(lse)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.kmod, ctx.problem, ctx.tiles, ctx.programs, ctx.poison = kmod, problem, tiles, programs, poison
        ctx.kv_plan = kv_plan  # None, or a callable returning the dK/dV pass's (tiles, programs): built in backward
        ctx.q_offsets, ctx.k_offsets = q_offsets, k_offsets
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        q, k, v, o, lse = ctx.saved_tensors
        if do is None:
            do = torch.zeros_like(o)
        kv_tiles, kv_programs = ctx.kv_plan() if ctx.kv_plan is not None else (None, None)
        dq, dk, dv = _backward(ctx.kmod, ctx.problem, q, k, v, o, lse, do, ctx.q_offsets, ctx.k_offsets,
                               ctx.tiles, ctx.programs, _num_sms(q.device), ctx.poison, kv_tiles, kv_programs)
        return dq, dk, dv, None, None, None, None, None, None, None, None


def make_gluon_attention(kmod):
    """The contract callable (see :func:`gluon_jagged_attention`) bound to kernel module ``kmod``."""

    def attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None,
                  tiles=None, programs=None):
        problem = _validate(q, k, v, q_offsets, k_offsets, causal, causal_alignment, sm_scale)
        poison = os.environ.get(POISON_ENV, "") == "1"
        return _GluonJaggedAttention.apply(q, k, v, q_offsets, k_offsets, kmod, problem, tiles, programs, poison,
                                           None)

    attention.kernels = kmod
    return attention


def gluon_jagged_attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left",
                           sm_scale=None, tiles=None, programs=None):
    """Jagged flash attention forward on Hopper (Gluon): ``(o, lse)``.

    Args:
        q: ``[T_q, H_q, D]`` packed queries, or ``[L_q, H_q, D]`` (broadcast-Q, ``q_offsets=None``).
        k, v: ``[T_k, H_kv, D]``; query head ``h`` reads KV head ``h // (H_q // H_kv)``.
        q_offsets, k_offsets: ``[B + 1]`` int32/int64 cumulative lengths.
        causal, causal_alignment: key ``j`` visible to query ``i`` iff ``j <= i + shift``, shift 0
            (``"top_left"``) or ``L_k - L_q`` (``"bottom_right"``), per sequence.
        sm_scale: score scale, default ``1 / sqrt(D)``.
        tiles: ``[(sequence, query block)]`` work list (default: b-major, BLOCK_M rows per tile).
        programs: lists of indices into ``tiles``, one list per persistent program (default:
            round-robin over the SMs).

    Returns:
        ``o [rows, H_q, D]`` in the input dtype (broadcast-Q: ``rows = B * L_q``) and
        ``lse [H_q, rows]`` float32, natural log; rows with no visible key: 0 and ``-inf``.

    Differentiable w.r.t. ``q``, ``k``, ``v`` (``lse`` is not): the backward runs the dK/dV and dQ
    kernels (deterministic, no atomics); dQ uses ``tiles``/``programs``, dK/dV a round-robin
    schedule of 128-key tiles.

    Raises:
        ValueError: inputs that break the contract.
        GluonUnsupported: dtype other than bf16/fp16, head dim not 64/128 or D != D_v,
            non-contiguous or misaligned tensors, non-CUDA tensors.
    """
    from . import _kernels

    return make_gluon_attention(_kernels)(q, k, v, q_offsets, k_offsets, causal=causal,
                                          causal_alignment=causal_alignment, sm_scale=sm_scale, tiles=tiles,
                                          programs=programs)
