"""Host side of ``gluon_jfa``: the launch description, schedule arrays, TMA descriptors and launches of a plan.

Gluon and Triton are imported inside functions only, so importing this module on a machine
without a GPU (or without Triton) never fails. Every kernel is reached through a kernel
module ``kmod`` (``_kernels.py`` or a mutated copy of it, see ``mutants.py``).

Planning is the framework's: :class:`._adapter.GluonJFA` deals the framework's tiles
(:func:`~jfa_verify.scheduling.schedules.workloads_forward` with BLOCK_M = 128 for the forward and dQ
passes, :func:`~jfa_verify.scheduling.schedules.workloads_backward` with 128 keys for dK/dV) by its
scheduler hook, on the offsets' device (a :class:`~jfa_verify.scheduling.device_plan.PlanArrays` per pass)
or on the host (a :class:`~jfa_verify.protocol.kernel.PassPlan`); this module launches a given plan and
never plans.

* heads are a grid axis: CTA ``(p, h)`` walks program ``p``'s tiles for query head ``h``
  (dK/dV: KV head). Grid ``(programs, H)``: the CTAs of head 0 form the first wave, the
  hardware's block scheduler starts the next ones as SMs free up. Folding every head into
  one persistent CTA made a heavy causal tile cost ``H`` times its schedule cost in one
  CTA: the one-mega causal batch ran at 0.97x FA2's forward, 1.76x with heads on the grid
  (``docs/evidence/gluon-speed-2026-12-03``). ``JFA_GLUON_HEAD_GROUPS`` (tests) folds heads
  back: ``N`` groups of ``H / N`` heads each, head innermost.
* a program with no tile launches a CTA that exits at once (device plans have them past the real
  programs; the grid's size is known without reading the plan back).
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from jfa_verify.core.contract import CallShape, JaggedProblem
from jfa_verify.protocol.unsequenced import Unsequenced, clear_unsequenced, first_row

__all__ = ["GluonUnsupported", "Launch", "attention", "check_launchable", "describe", "gluon_jagged_attention",
           "prepare", "tile_sizes"]

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
class Launch:
    """What the launches need: the framework's :class:`~jfa_verify.core.contract.CallShape` of the call, and where
    sequence 0's rows start (rows before it belong to no sequence and are written 0 / ``-inf`` here; None: only
    the device knows, and they are set there: :func:`jfa_verify.protocol.unsequenced.clear_unsequenced`)."""

    shape: CallShape
    q_first: Optional[int]  # first query/output row of sequence 0
    k_first: Optional[int]  # first key row of sequence 0

    @property
    def broadcast(self) -> bool:
        return self.shape.mode == "broadcast_q"

    @property
    def rows(self) -> int:  # rows of o / columns of lse
        return self.shape.total_q_rows

    @property
    def batch(self) -> int:
        return self.shape.batch

    @property
    def h_q(self) -> int:
        return self.shape.num_heads_q

    @property
    def h_kv(self) -> int:
        return self.shape.num_heads_kv

    @property
    def d(self) -> int:
        return self.shape.head_dim

    @property
    def causal(self) -> bool:
        return self.shape.causal

    @property
    def bottom_right(self) -> bool:
        return self.shape.causal and self.shape.causal_alignment == "bottom_right"

    @property
    def sm_scale(self) -> float:
        return self.shape.sm_scale

    @property
    def dtype(self) -> torch.dtype:
        return self.shape.dtype


def check_launchable(shape: CallShape, q, k, v, *, require_cuda: bool = True) -> None:
    """Refuse a valid call outside what ``gluon_jfa`` implements.

    Args:
        shape: the validated call (:func:`jfa_verify.core.contract.validate_call` or a problem's ``call_shape()``).
        q, k, v: its tensors. require_cuda: False only for code generation on a machine without a GPU.

    Raises:
        GluonUnsupported: dtype, head dims, device, layout or alignment this kernel does not handle.
    """
    _check_supported(shape.head_dim, shape.head_dim_v, shape.dtype)
    if shape.window is not None:
        raise GluonUnsupported(f"gluon_jfa has no sliding window, got window={shape.window}")
    if require_cuda and not q.is_cuda:
        raise GluonUnsupported("gluon_jfa runs on CUDA (Hopper) tensors only")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.is_contiguous():
            raise GluonUnsupported(f"gluon_jfa needs contiguous inputs (TMA descriptors); {name} is not: "
                                   f"call {name}.contiguous()")
        if t.data_ptr() % 16:
            raise GluonUnsupported(f"gluon_jfa needs 16-byte aligned base addresses (TMA); {name} is not")


def describe(shape: CallShape, k, q_offsets, k_offsets, *, problem: Optional[JaggedProblem] = None,
             poison: bool = False) -> Launch:
    """The :class:`Launch` of a validated call that :func:`check_launchable` accepted.

    ``problem``: the validated problem when its lengths are on the host (where sequence 0 starts is then known);
    without it nothing is read back from the device unless ``poison`` (a test mode: outputs start as NaN, so the
    rows before ``offsets[0]`` must be cleared by index and ``offsets[0]`` is read).
    """
    broadcast = shape.mode == "broadcast_q"
    if problem is not None:  # rows before offsets[0] belong to no sequence (all rows of an empty batch)
        q_first = 0 if broadcast else (problem.q_starts[0] if problem.batch else problem.total_q_rows)
        return Launch(shape, q_first, problem.k_starts[0] if problem.batch else k.shape[0])
    if poison:
        return Launch(shape, 0 if broadcast else int(q_offsets[0]), int(k_offsets[0]))
    return Launch(shape, None, None)


def _schedule(plan, device, heads: int) -> Optional[dict]:
    """A pass's launch arrays and grid from its plan (a device plan's ``PlanArrays``, or a host ``PassPlan``
    flattened by the framework's kit), or None when it has no program.

    ``heads``: the heads each tile is run for (``H_q``; ``H_kv`` for dK/dV): one CTA per (program, head),
    grid ``(programs, heads)``, unless ``JFA_GLUON_HEAD_GROUPS`` folds them (module docstring).
    """
    from jfa_verify.protocol.kernel import PassPlan
    from jfa_verify.scheduling.device_plan import host_arrays, launch_tensors

    groups = heads  # one head per CTA (module docstring: why)
    forced = os.environ.get(HEAD_GROUPS_ENV, "")
    if forced:  # tests: e.g. "1" puts every head of a tile in one CTA (many units per CTA)
        groups = int(forced) if heads % int(forced) == 0 else 1
    if isinstance(plan, PassPlan):
        arrays = launch_tensors(host_arrays(plan), device)
        programs, tile_seq, tile_block, prog_start = (arrays[name] for name in ("programs", "tile_seq", "tile_block",
                                                                                "prog_start"))
    else:
        programs, tile_seq, tile_block, prog_start = plan.programs, plan.tile_seq, plan.tile_block, plan.prog_start
    if programs == 0:
        return None
    return dict(tile_seq=tile_seq, tile_block=tile_block, prog_start=prog_start, grid=(programs, groups),
                heads_per_cta=heads // groups)


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


def _output(shape, dtype, device, poison: bool) -> torch.Tensor:
    """An output buffer: the kernels write every row of every sequence; poisoned (tests), it starts as NaN so that
    an unwritten row shows."""
    if poison:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _first_row(problem: Launch, first: Optional[int], offsets) -> object:
    """Where sequence 0's rows start, as :class:`~jfa_verify.protocol.unsequenced.Unsequenced` takes it: the host's
    int where known, else from the offsets the kernels read (:func:`~jfa_verify.protocol.unsequenced.first_row`)."""
    return first if first is not None else first_row(offsets, problem.batch)


def _alloc_outputs(problem: Launch, device, poison: bool, q_offsets):
    # rows that belong to no sequence (before offsets[0]) are the contract's 0 / -inf, set without reading
    # offsets[0] back where the host does not know it; the kernel overwrites every sequence row
    o = _output((problem.rows, problem.h_q, problem.d), problem.dtype, device, poison)
    lse = _output((problem.h_q, problem.rows), torch.float32, device, poison)
    first = 0 if problem.broadcast else _first_row(problem, problem.q_first, q_offsets)
    clear_unsequenced(Unsequenced(o, first), Unsequenced(lse, first, float("-inf"), dim=1))
    return o, lse


def _plan_forward(kmod, problem: Launch, q, k, v, q_offsets, k_offsets, fwd_plan, poison: bool = False):
    """Allocate ``(o, lse)`` and return ``(o, lse, launch)``; ``launch()`` runs the kernel on ``fwd_plan`` (the
    forward pass's plan, see :func:`_schedule`; None: nothing to run).

    ``launch`` may be called again (benchmarks): it rewrites the same outputs.
    """
    device = q.device
    o, lse = _alloc_outputs(problem, device, poison, q_offsets)
    if problem.rows == 0 or q.shape[0] == 0:
        return o, lse, None
    if k.shape[0] == 0:  # every sequence has no key: a TMA descriptor cannot have an empty dim
        o.zero_()
        lse.fill_(float("-inf"))
        return o, lse, None
    plan = _schedule(fwd_plan, device, problem.h_q)
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


def _forward(kmod, problem: Launch, q, k, v, q_offsets, k_offsets, fwd_plan, poison: bool = False):
    """Run (or, with a compile-only ``kmod``, compile) the forward on ``fwd_plan``; returns ``(o, lse)``."""
    o, lse, launch = _plan_forward(kmod, problem, q, k, v, q_offsets, k_offsets, fwd_plan, poison)
    if launch is not None:
        launch()
    return o, lse


def _bwd_stages(head_dim: int) -> int:
    """Ring depth of both backward kernels: the (Q, dO) ring of dK/dV (64 x D each) and the (K, V) ring of
    dQ (128 x D each) beside the unit's resident pair (128 x D each). D=128: dK/dV 64 KiB + 2 x 32 KiB,
    dQ 64 KiB + 2 x 64 KiB = 192 KiB (an H200 block may use 227 KiB)."""
    return _stages(head_dim)


def _dkdv_stages(head_dim: int) -> int:
    """Ring depth of the dK/dV kernel's (Q, dO) blocks (BLOCK_M x D each) beside its resident K and V tile."""
    return _bwd_stages(head_dim)


def _plan_backward(kmod, problem: Launch, q, k, v, o, lse, do, q_offsets, k_offsets, dq_plan, dkdv_plan,
                   poison: bool = False):
    """Allocate dQ, dK, dV, the launch arrays of both plans and the descriptors; return ``(dq, dk, dv, launch)``.

    ``launch()`` runs the delta kernel (``rowsum(dO * O)`` and the base-2 LSE, float32), then the dK/dV and dQ
    kernels, rewriting the outputs (benchmarks call it again); broadcast-Q returns float32 per-sequence
    partials as ``dq`` (see :func:`_backward`). No device synchronization. ``dq_plan``: the forward's query
    tiles and programs; ``dkdv_plan``: tiles of 128 keys (the adapter deals them by zigzag, which the H200
    measured at 0.67x against round-robin's 0.63x of FA2's backward on the causal uniform-32 batch, a tie
    elsewhere).
    """
    device = q.device
    d = problem.d
    dk = _output(k.shape, k.dtype, device, poison)
    dv = _output(v.shape, v.dtype, device, poison)
    dq_rows = problem.rows if problem.broadcast else q.shape[0]
    dq_dtype = torch.float32 if problem.broadcast else q.dtype
    dq_out = _output((dq_rows, problem.h_q, d), dq_dtype, device, poison)
    if k.shape[0] == 0 or problem.rows == 0 or q.shape[0] == 0:
        dq_out.zero_()
        dk.zero_()
        dv.zero_()
        return dq_out, dk, dv, None
    # rows before offsets[0] belong to no sequence: 0 (broadcast-Q's dQ partials are all a sequence's)
    k_first = _first_row(problem, problem.k_first, k_offsets)
    clear_unsequenced(Unsequenced(dk, k_first), Unsequenced(dv, k_first),
                      Unsequenced(dq_out, 0 if problem.broadcast else _first_row(problem, problem.q_first, q_offsets)))
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
    # rowsum(dO * O) and the base-2 LSE of every row of O, by the delta kernel (every entry written)
    delta, lse2 = torch.empty((2, problem.h_q, problem.rows), dtype=torch.float32, device=device)
    bm, bn = BWD_DKDV_TILES
    kv_plan = _schedule(dkdv_plan, device, problem.h_kv)
    if kv_plan is not None:
        kv_args = (_descriptor(q2, [bm, d]), _descriptor(do2, [bm, d]), _descriptor(k2, [bn, d]),
                   _descriptor(v2, [bn, d]), dk, dv)
        kv_rest = (q_off, k_offsets, kv_plan["tile_seq"], kv_plan["tile_block"], kv_plan["prog_start"],
                   l_q, group, kv_plan["heads_per_cta"], problem.h_kv * d, delta.stride(0), problem.sm_scale,
                   qk_scale)
        kv_flags = {**flags, "STAGES": _dkdv_stages(d)}
        launches.append(lambda: kmod._bwd_dkdv_kernel[kv_plan["grid"]](*kv_args, lse2, delta, *kv_rest, **kv_flags))
    bm, bn = BWD_DQ_TILES
    q_plan = _schedule(dq_plan, device, problem.h_q)
    if q_plan is not None:
        q_args = (_descriptor(q2, [bm, d]), _descriptor(do2, [bm, d]), _descriptor(k2, [bn, d]),
                  _descriptor(v2, [bn, d]), dq_out)
        q_rest = (q_off, k_offsets, q_plan["tile_seq"], q_plan["tile_block"], q_plan["prog_start"],
                  l_q, group, q_plan["heads_per_cta"], problem.h_q * d, delta.stride(0), problem.sm_scale, qk_scale)
        launches.append(lambda: kmod._bwd_dq_kernel[q_plan["grid"]](*q_args, lse2, delta, *q_rest, **flags))
    o = o.contiguous()
    delta_grid = (-(-problem.rows // DELTA_ROWS), problem.h_q)

    def launch():
        kmod._bwd_delta_kernel[delta_grid](o, do, delta, lse, lse2, problem.rows, problem.h_q * d, delta.stride(0),
                                           lse.stride(0), HEAD_DIM=d, BLOCK_R=DELTA_ROWS, num_warps=4)
        for run in launches:
            run()

    return dq_out, dk, dv, launch


def _finish_dq(problem: Launch, q, dq_out):
    """dQ from the dQ kernel's output: broadcast-Q sums the float32 per-sequence partials."""
    if not problem.broadcast:
        return dq_out
    if not problem.batch:
        return torch.zeros_like(q)
    return dq_out.view(problem.batch, q.shape[0], problem.h_q, problem.d).sum(0).to(q.dtype)


def _backward(kmod, problem: Launch, q, k, v, o, lse, do, q_offsets, k_offsets, dq_plan, dkdv_plan,
              poison: bool = False):
    """dQ, dK, dV of ``sum(o * do)`` (LSE is not differentiated). Deterministic: no atomics.

    ``delta = rowsum(dO * O)`` is computed in float32; dK/dV run over ``dkdv_plan``'s KV tiles of 128 keys, dQ
    over ``dq_plan``'s query tiles. Broadcast-Q: dQ is a float32 partial per sequence, summed here.
    """
    dq_out, dk, dv, launch = _plan_backward(kmod, problem, q, k, v, o, lse, do, q_offsets, k_offsets, dq_plan,
                                            dkdv_plan, poison)
    if launch is not None:
        launch()
    return _finish_dq(problem, q, dq_out), dk, dv


@dataclass(frozen=True)
class _Passes:
    """One call's launches for the kit's autograd scaffold (:mod:`jfa_verify.protocol.autograd`); ``plans(kind)``
    gives pass ``kind``'s plan (``"fwd"``, ``"dq"``, ``"dkdv"``) when first launched, so a forward alone never plans
    the backward."""

    kmod: object
    launch: Launch
    plans: Callable[[str], object]
    poison: bool

    def forward(self, q, k, v, q_offsets, k_offsets):
        return _forward(self.kmod, self.launch, q, k, v, q_offsets, k_offsets, self.plans("fwd"), self.poison)

    def backward(self, q, k, v, o, lse, do, q_offsets, k_offsets):
        return _backward(self.kmod, self.launch, q, k, v, o, lse, do, q_offsets, k_offsets, self.plans("dq"),
                         self.plans("dkdv"), self.poison)


def attention(kmod, launch: Launch, q, k, v, q_offsets, k_offsets, plans: Callable[[str], object],
              poison: bool = False):
    """``(o, lse)`` of one call on the kernels of ``kmod``, differentiable in ``q``, ``k``, ``v``.

    Args:
        launch: :func:`describe`'s description of the validated call.
        q_offsets, k_offsets: the offsets the kernels read (a device plan's clamped ones; ``q_offsets`` None under
            broadcast-Q).
        plans: ``plans(kind)`` is pass ``kind``'s plan: a device plan's ``PlanArrays`` or a host ``PassPlan``
            (:class:`._adapter.GluonJFA` makes them).
        poison: outputs start as NaN, so unwritten rows show (tests).
    """
    from jfa_verify.protocol.autograd import differentiable_attention

    return differentiable_attention(_Passes(kmod, launch, plans, poison), q, k, v, q_offsets, k_offsets)


def prepare(kmod, launch: Launch, q, k, v, q_offsets, k_offsets, plans: Callable[[str], object], do):
    """For benchmarks: allocate, flatten the plans and build the descriptors of a forward and a backward once.

    Returns:
        ``(o, lse, forward, backward)``: ``forward()`` launches the forward kernel only (no host checks, no
        planning), rewriting ``o`` and ``lse``; ``backward()`` runs the device work of one backward of ``sum(o * do)``
        (delta, the dK/dV and dQ kernels, broadcast-Q's sum) on the current ``o``, ``lse``, returning
        ``(dq, dk, dv)``. Call ``forward()`` first.
    """
    o, lse, run_forward = _plan_forward(kmod, launch, q, k, v, q_offsets, k_offsets, plans("fwd"))
    dq_out, dk, dv, run_backward = _plan_backward(kmod, launch, q, k, v, o, lse, do, q_offsets, k_offsets,
                                                  plans("dq"), plans("dkdv"))

    def backward():
        if run_backward is not None:
            run_backward()
        return _finish_dq(launch, q, dq_out), dk, dv

    return o, lse, (run_forward or (lambda: None)), backward


def gluon_jagged_attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left",
                           sm_scale=None, max_seqlen_q=None, max_seqlen_k=None):
    """Jagged flash attention on Hopper (Gluon): ``(o, lse)``, the registered ``gluon_jfa`` called directly.

    Args:
        q: ``[T_q, H_q, D]`` packed queries, or ``[L_q, H_q, D]`` (broadcast-Q, ``q_offsets=None``).
        k, v: ``[T_k, H_kv, D]``; query head ``h`` reads KV head ``h // (H_q // H_kv)``.
        q_offsets, k_offsets: ``[B + 1]`` int32/int64 cumulative lengths.
        causal, causal_alignment: key ``j`` visible to query ``i`` iff ``j <= i + shift``, shift 0
            (``"top_left"``) or ``L_k - L_q`` (``"bottom_right"``), per sequence.
        sm_scale: score scale, default ``1 / sqrt(D)``.
        max_seqlen_q, max_seqlen_k: the longest sequences, as FlashAttention's varlen API takes them; with both
            given nothing is read back from the device (the offsets are trusted), else the offsets are read once
            and checked.

    Returns:
        ``o [rows, H_q, D]`` in the input dtype (broadcast-Q: ``rows = B * L_q``) and
        ``lse [H_q, rows]`` float32, natural log; rows with no visible key: 0 and ``-inf``.

    Differentiable w.r.t. ``q``, ``k``, ``v`` (``lse`` is not): the backward runs the dK/dV and dQ
    kernels (deterministic, no atomics). Tiles are the framework's (128 query rows; 128 keys for dK/dV), dealt
    by zigzag over the SMs; another schedule: ``build(scheduler=...)`` (``jfa_verify.kernels.gluon_jfa``) with
    a hook of :mod:`jfa_verify.scheduling.planning`.

    Raises:
        InvalidInput (a ValueError): inputs that break the contract.
        GluonUnsupported: dtype other than bf16/fp16, head dim not 64/128 or D != D_v,
            non-contiguous or misaligned tensors, non-CUDA tensors.
    """
    from . import build

    return build()(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                   sm_scale=sm_scale, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
