"""Host side of ``triton_jfa``: launch plans, launches, and their autograd (the kit's scaffold).

Every Triton object is reached through the kernel module ``kmod`` given to
:class:`TritonJFA`, so a mutated copy of ``_kernels.py`` (a planted bug) runs
behind the very same host code. Imports are absolute (``jfa_verify....``): a
mutated copy of this file is imported from a temporary folder.

Plans: the forward and dQ passes run the framework's
:func:`jfa_verify.scheduling.schedules.workloads_forward` tiles (one per query block of
BLOCK_M rows, b-major; a sequence with no query row has one *empty* tile, never
run), the dK/dV pass its :func:`~jfa_verify.scheduling.schedules.workloads_backward` tiles;
a scheduler hook (:mod:`jfa_verify.scheduling.planning`) deals them to programs. A tile
whose rows see no key still runs and writes ``o = 0``, ``lse = -inf``.

Block-sparse calls (``block_selection=``, :class:`jfa_verify.core.selection.BlockSelection`) are always planned
on the host from the validated problem: the same workloads and scheduler, each tile's cost counting only the keys
(forward, dQ) or query rows (dK/dV) of the blocks its selection visits, so that the persistent schedule balances
the work the kernels really do. The kernels read the caller's selection tensors, and for dK/dV the transposed
selection (per KV block, the query blocks that selected it) built here once per call.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch

from jfa_verify.core.contract import CallShape, JaggedProblem, check_offsets_dense, validate_call, validate_inputs
from jfa_verify.core.device import interpreting
from jfa_verify.core.dtypes import FORWARD_ONLY, output_dtype
from jfa_verify.core.errors import InvalidInput, UnsupportedCase
from jfa_verify.kernels.triton_jfa._config import KERNEL_CAPABILITIES, launch_config
from jfa_verify.protocol.autograd import differentiable_attention
from jfa_verify.protocol.kernel import KernelRun, LaunchPlan, Visits
from jfa_verify.protocol.unsequenced import Unsequenced, clear_unsequenced, first_row
from jfa_verify.scheduling import device_plan
from jfa_verify.scheduling.planning import GridScheduler, PersistentScheduler
from jfa_verify.scheduling.schedules import workloads_backward, workloads_forward
from jfa_verify.scheduling.selected import selected_workloads, transposed_selection

__all__ = ["TritonJFA", "plan_launch", "DevicePlan"]


def _schedule_arrays(plan, device) -> dict:
    """A pass's programs as the kernel's ``TILE_SEQ``/``TILE_BLOCK``/``TILE_ID``/``PROG_START`` tensors (the
    framework's one flattening, :func:`jfa_verify.scheduling.device_plan.host_arrays`)."""
    return device_plan.launch_tensors(device_plan.host_arrays(plan), device)


def plan_launch(problem: JaggedProblem, scheduler, *, tf32: bool = False) -> tuple[dict, LaunchPlan]:
    """``(launch arrays, LaunchPlan)`` of ``problem``: the framework's workloads dealt by ``scheduler`` (a
    block-sparse problem's with their costs cut to the selection:
    :func:`jfa_verify.scheduling.selected.selected_workloads`; its transposed selection is then
    ``arrays["transposed"]``)."""
    cfg = launch_config(problem, tf32=tf32)
    mask = dict(causal=problem.causal, causal_alignment=problem.causal_alignment, window=problem.window)
    fwd = workloads_forward(problem.q_lengths, problem.k_lengths, cfg["BLOCK_M"], **mask)
    bwd = workloads_backward(problem.q_lengths, problem.k_lengths, cfg["BLOCK_N"], **mask)
    transposed = None
    if problem.block_selection is not None:
        transposed = transposed_selection(problem)
        fwd, bwd = selected_workloads(problem, fwd, bwd, transposed)
    passes = {kind: scheduler(tiles, kind, problem) for kind, tiles in (("fwd", fwd), ("dq", fwd), ("dkdv", bwd))}
    arrays = {kind: _schedule_arrays(p, problem.device) for kind, p in passes.items()}
    # delta preprocess: one program per non-empty query tile, the same tiles as the dQ kernel
    pre = GridScheduler()(fwd, "dq", problem)
    arrays["pre"] = _schedule_arrays(pre, problem.device)
    arrays["cfg"] = cfg
    if transposed is not None:
        arrays["transposed"] = transposed
    return arrays, LaunchPlan(cfg["tiles"], passes)


def _sparse_arguments(problem: JaggedProblem, selection, plan: dict) -> dict:
    """The block-sparse kernels' extra launch arguments: the caller's selection tensors as they are, the
    flattened first query block of each sequence, and the transposed selection (``plan["transposed"]``); the
    block sizes as constexprs. An empty tensor is passed as one zero (never read)."""
    dev, sel = problem.device, problem.block_selection

    def tensor(xs):
        return torch.tensor(list(xs) or [0], dtype=torch.int32, device=dev)

    def nonempty(t):
        return t if t.numel() else torch.zeros(1, dtype=t.dtype, device=t.device)

    starts, offsets, indices = plan["transposed"]
    return dict(SEL_START=tensor(sel.q_block_starts), SEL_OFF=nonempty(selection.offsets),
                SEL_IDX=nonempty(selection.indices), T_START=tensor(starts), T_OFF=tensor(offsets),
                T_IDX=tensor(indices), SPARSE=True, SEL_M=sel.block_m, SEL_N=sel.block_n)


class DevicePlan(device_plan.DeviceLaunchPlan):
    """:class:`~jfa_verify.scheduling.device_plan.DeviceLaunchPlan` with ``triton_jfa``'s tiles, read as
    :func:`plan_launch`'s arrays (same keys, ``"cfg"`` included)."""

    def __init__(self, shape: CallShape, q_offsets, k_offsets, scheduler, tf32: bool, with_ids: bool = False):
        self.cfg = launch_config(shape, tf32=tf32)
        super().__init__(shape, q_offsets, k_offsets, scheduler, self.cfg["BLOCK_M"], self.cfg["BLOCK_N"],
                         with_ids=with_ids)

    def __getitem__(self, kind: str) -> dict:
        if kind == "cfg":
            return self.cfg
        planned = self.arrays("dq" if kind == "pre" else kind, grid=kind == "pre")
        return dict(tile_seq=planned.tile_seq, tile_block=planned.tile_block, tile_id=planned.tile_id,
                    prog_start=planned.prog_start, programs=planned.programs)


def _aligned(problem: JaggedProblem, *tensors: torch.Tensor) -> bool:
    """The kernels' ``ALIGNED`` flag: head dims and every token/head stride of ``tensors``
    (``[rows, heads, dim]``) multiples of 16 elements, every head-dim stride 1.

    The strides and head dims are not specialized (one compiled variant for all values),
    so this one flag tells the compiler what it needs for 16-byte pipelined loads.
    """
    if problem.head_dim % 16 or problem.head_dim_v % 16:
        return False
    return all(t.stride(2) == 1 and t.stride(0) % 16 == 0 and t.stride(1) % 16 == 0 for t in tensors)


def _window_spans(problem: JaggedProblem) -> tuple[int, int]:
    """``(WIN_LEFT, WIN_RIGHT)`` kernel arguments: the window's sides, an unbounded side (-1) as a span
    longer than any sequence, the right side 0 under causal (the contract's intersection)."""
    if problem.window is None:
        return 0, 0
    unbounded = problem.total_q_rows + problem.total_k_rows + 1  # known without the lengths
    left, right = (unbounded if side < 0 else side for side in problem.window)
    return left, 0 if problem.causal else right


def _common_flags(problem: JaggedProblem, cfg: dict) -> dict:
    win_left, win_right = _window_spans(problem)
    flags = dict(
        HEAD_DIM=problem.head_dim,
        HEAD_DIM_V=problem.head_dim_v,
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        BLOCK_D=cfg["BLOCK_D"],
        BLOCK_DV=cfg["BLOCK_DV"],
        CAUSAL=problem.causal,
        WINDOW=problem.window is not None,
        WIN_LEFT=win_left,
        WIN_RIGHT=win_right,
        # The causal alignment matters only under a mask.
        BOTTOM_RIGHT=problem.mask != "none" and problem.causal_alignment == "bottom_right",
        BROADCAST_Q=problem.mode == "broadcast_q",
        INTERPRET=interpreting(),
        IEEE=cfg["IEEE"],
    )
    # Runtime scalars, not constexprs (one variant for both values), passed as ints: Triton's interpreter cannot pass
    # a bool (i1) scalar argument.
    flags["BOTTOM_RIGHT"], flags["BROADCAST_Q"] = int(flags["BOTTOM_RIGHT"]), int(flags["BROADCAST_Q"])
    return flags


def _l_q(problem: JaggedProblem, q: torch.Tensor) -> int:
    return q.shape[0] if problem.mode == "broadcast_q" else 0


def _probe(instr: Optional[Visits], kind, fallback):
    """``(VISITS, PROGS, INSTRUMENT)`` launch arguments for pass ``kind``."""
    if instr is None:
        return fallback, fallback, False
    return instr.counts[kind], instr.programs[kind], True


def _pass_arguments(sparse: Optional[dict], *names: str) -> dict:
    """The block-sparse arguments one kernel takes (none for a dense launch: the kernels' defaults)."""
    if sparse is None:
        return {}
    return {name: sparse[name] for name in names + ("SPARSE", "SEL_M", "SEL_N")}


def _forward(kmod, problem, plan, q, k, v, q_off, k_off, instr, sparse=None):
    cfg = plan["cfg"]
    rows, h_q = problem.total_q_rows, problem.num_heads_q
    # Rows before offsets[0] belong to no sequence (0 and -inf), set on the device; the kernel writes every
    # sequence row (broadcast-Q's output rows are all a sequence's).
    o = torch.empty(rows, h_q, problem.head_dim_v, dtype=output_dtype(q.dtype), device=q.device)
    lse = torch.empty((h_q, rows), dtype=torch.float32, device=q.device)
    first = None if problem.mode == "broadcast_q" else first_row(q_off, problem.batch)
    clear_unsequenced(Unsequenced(o, first),
                      Unsequenced(lse, first, float("-inf"), dim=1))
    fw = plan["fwd"]
    scales = getattr(problem, "block_scales", None)  # MXFP8: the E8M0 scales, read as contiguous [rows, H, D / 32]
    mx = {} if scales is None else dict(SQ=scales.q.contiguous(), SK=scales.k.contiguous(), SV=scales.v.contiguous(),
                                        MX=True)
    if fw["programs"] > 0 and fw["tile_seq"].numel() > 0:
        visits, progs, instrument = _probe(instr, "fwd", fw["tile_id"])
        kmod._fwd_kernel[(fw["programs"], h_q)](
            q, k, v, o, lse, q_off, k_off,
            fw["tile_seq"], fw["tile_block"], fw["tile_id"], fw["prog_start"], visits, progs,
            *q.stride(), *k.stride(), *v.stride(), *o.stride(), lse.stride(0),
            problem.sm_scale * math.log2(math.e), _l_q(problem, q), problem.group_size, h_q,
            INSTRUMENT=instrument, ALIGNED=_aligned(problem, q, k, v, o),
            num_warps=cfg["num_warps"], num_stages=cfg["fwd_stages"],
            **_common_flags(problem, cfg), **_pass_arguments(sparse, "SEL_START", "SEL_OFF", "SEL_IDX"), **mx,
        )
    return o, lse


def _backward(kmod, problem, plan, q, k, v, o, lse, do, q_off, k_off, instr, sparse=None):
    cfg = plan["cfg"]
    flags = _common_flags(problem, cfg)
    h_q, h_kv = problem.num_heads_q, problem.num_heads_kv
    dev = q.device
    l_q = _l_q(problem, q)
    broadcast = problem.mode == "broadcast_q"
    qk_scale = problem.sm_scale * math.log2(math.e)

    delta = torch.empty_like(lse)
    pre = plan["pre"]
    if pre["programs"] > 0:
        kmod._bwd_preprocess_kernel[(pre["programs"], h_q)](
            o, do, delta, q_off, k_off, pre["tile_seq"], pre["tile_block"],
            *o.stride(), *do.stride(), delta.stride(0), l_q,
            HEAD_DIM_V=problem.head_dim_v, BLOCK_M=cfg["BLOCK_M"], BLOCK_DV=cfg["BLOCK_DV"],
            BROADCAST_Q=int(broadcast), ALIGNED=_aligned(problem, o, do),
        )

    dk = torch.empty(k.shape, dtype=k.dtype, device=dev)
    dv = torch.empty(v.shape, dtype=v.dtype, device=dev)
    if broadcast:  # every row of the per-sequence partials is written
        dq_out = partial = torch.empty(problem.total_q_rows, h_q, problem.head_dim, dtype=torch.float32, device=dev)
    else:
        dq_out = dq = torch.empty(q.shape, dtype=q.dtype, device=dev)
    k_first = first_row(k_off, problem.batch)
    clear_unsequenced(Unsequenced(dk, k_first),  # rows before offsets[0]: 0 (see _forward)
                      Unsequenced(dv, k_first),
                      Unsequenced(dq_out, None if broadcast else first_row(q_off, problem.batch)))
    kv = plan["dkdv"]
    if kv["programs"] > 0 and kv["tile_seq"].numel() > 0:
        visits, progs, instrument = _probe(instr, "dkdv", kv["tile_id"])
        kmod._bwd_dkdv_kernel[(kv["programs"], h_kv)](
            q, k, v, do, lse, delta, dk, dv, q_off, k_off,
            kv["tile_seq"], kv["tile_block"], kv["tile_id"], kv["prog_start"], visits, progs,
            *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(), lse.stride(0),
            problem.sm_scale, qk_scale, l_q, problem.group_size, h_kv, INSTRUMENT=instrument,
            ALIGNED=_aligned(problem, q, k, v, do, dk, dv),
            num_warps=cfg["num_warps"], num_stages=cfg["bwd_stages"],
            **flags, **_pass_arguments(sparse, "T_START", "T_OFF", "T_IDX"),
        )

    dqs = plan["dq"]
    if dqs["programs"] > 0 and dqs["tile_seq"].numel() > 0:
        visits, progs, instrument = _probe(instr, "dq", dqs["tile_id"])
        kmod._bwd_dq_kernel[(dqs["programs"], h_q)](
            q, k, v, do, lse, delta, dq_out, q_off, k_off,
            dqs["tile_seq"], dqs["tile_block"], dqs["tile_id"], dqs["prog_start"], visits, progs,
            *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq_out.stride(), lse.stride(0),
            problem.sm_scale, qk_scale, l_q, problem.group_size, h_q, INSTRUMENT=instrument,
            ALIGNED=_aligned(problem, q, k, v, do, dq_out),
            num_warps=cfg["num_warps"], num_stages=cfg["bwd_stages"],
            **flags, **_pass_arguments(sparse, "SEL_START", "SEL_OFF", "SEL_IDX"),
        )
    if broadcast:
        dq = partial.view(problem.batch, l_q, h_q, problem.head_dim).sum(0).to(q.dtype)
    return dq, dk, dv


@dataclasses.dataclass(frozen=True)
class _Passes:
    """One call's launches for the kit's autograd scaffold
    (:func:`jfa_verify.protocol.autograd.differentiable_attention`): the plan and flags bound in, the offsets as the
    kernels read them passed as saved tensors (:meth:`offsets`)."""

    kmod: object
    problem: CallShape
    plan: object  # DevicePlan, or plan_launch's arrays
    instr: Optional[Visits]
    sparse: Optional[dict] = None

    def offsets(self, q_offsets, k_offsets):
        """``(q_off, k_off)``: the offsets the kernels read (int32 where the rows allow: one variant for both)."""
        plan, shape = self.plan, self.problem
        q_off = k_offsets if q_offsets is None else q_offsets  # never read under BROADCAST_Q
        if isinstance(plan, DevicePlan):  # the kernels read the offsets as the plan clamped them
            q_off, k_offsets = plan.q_off, plan.k_off
        q_rows = shape.total_k_rows if q_offsets is None else shape.total_q_rows
        return device_plan.kernel_offsets(q_off, q_rows), device_plan.kernel_offsets(k_offsets, shape.total_k_rows)

    def forward(self, q, k, v, q_off, k_off):
        return _forward(self.kmod, self.problem, self.plan, q, k, v, q_off, k_off, self.instr, self.sparse)

    def backward(self, q, k, v, o, lse, do, q_off, k_off):
        if self.problem.dtype in FORWARD_ONLY:
            raise UnsupportedCase(f"dtype={self.problem.dtype} is forward only in triton_jfa: no backward")
        return _backward(self.kmod, self.problem, self.plan, q, k, v, o, lse, do, q_off, k_off, self.instr,
                         self.sparse)


def _attention(q, k, v, q_offsets, k_offsets, kmod, problem, plan, instr, sparse=None):
    """``(o, lse)`` of one call, differentiable through the kit's scaffold."""
    passes = _Passes(kmod, problem, plan, instr, sparse)
    return differentiable_attention(passes, q, k, v, *passes.offsets(q_offsets, k_offsets))


class TritonJFA:
    """``triton_jfa`` bound to a kernel module and a scheduler hook: the contract callable, and
    :meth:`launch` for the framework (a validated problem, optional instrumentation).

    Args:
        kmod: the module holding the Triton kernels (``_kernels`` or a planted-bug copy).
        scheduler: a scheduler hook ``hook(workloads, kind, problem) -> PassPlan``
            (:mod:`jfa_verify.scheduling.planning`); None for one tile per program.
        tf32: float32 inputs run their matmuls with TF32 operands (10-bit mantissa); no effect on
            other dtypes or under the interpreter (which computes in float32).
    """

    def __init__(self, kmod, *, scheduler=None, tf32: bool = False):
        self.kernels, self.scheduler, self.tf32 = kmod, scheduler or GridScheduler(), tf32

    def __repr__(self) -> str:
        return f"TritonJFA(kernels={self.kernels.__name__}, scheduler={self.scheduler!r}, tf32={self.tf32})"

    def __call__(self, q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None,
                 max_seqlen_q=None, max_seqlen_k=None, window=None, block_selection=None):
        """The contract call (see :mod:`jfa_verify.core.contract`): returns ``(o, lse)``; ``o`` is differentiable.

        With ``max_seqlen_q`` and ``max_seqlen_k`` given (as FlashAttention's varlen API takes them) the call reads
        nothing back from the device: the offsets' values are trusted (clamped into the buffers, never read out
        of bounds) and the tiles are planned on the device. Without them the offsets are read once (one small
        synchronization) and checked against the contract.

        ``block_selection``: a :class:`~jfa_verify.core.selection.BlockSelection` (None: dense attention); each
        query block then visits only its selected KV blocks. Its block sizes may be any the contract allows
        (``Capabilities.block_sparse``). A block-sparse call is always validated and planned on the host (the
        offsets and the selection are read once), hints or not.

        Raises:
            InvalidInput: inputs break the contract (a bad selection included).
            UnsupportedCase: valid inputs outside ``triton_jfa``'s capabilities.
        """
        options = dict(causal=causal, causal_alignment=causal_alignment, sm_scale=sm_scale, max_seqlen_q=max_seqlen_q,
                       max_seqlen_k=max_seqlen_k, window=window)
        if block_selection is not None:
            problem = validate_inputs(q, k, v, q_offsets, k_offsets, block_selection=block_selection, **options)
            return self._run(problem.call_shape(), q, k, v, q_offsets, k_offsets, None, sparse=problem).outputs()
        if max_seqlen_q is not None and max_seqlen_k is not None:
            shape = validate_call(q, k, v, q_offsets, k_offsets, **options)
        else:
            shape = validate_inputs(q, k, v, q_offsets, k_offsets, **options).call_shape()
        return self._run(shape, q, k, v, q_offsets, k_offsets, None).outputs()

    def with_programs(self, num_programs: int) -> Optional["TritonJFA"]:
        """This kernel with every persistent pass capped to ``num_programs`` programs (fewer SMs than the device has:
        the stress check's ``fewer_sms`` mode, :mod:`jfa_verify.checks.stress`), or None when it runs no persistent
        grid (one tile per program: nothing to cap).

        Raises:
            InvalidInput: ``num_programs`` is not an int >= 1.
        """
        if not isinstance(self.scheduler, PersistentScheduler):
            PersistentScheduler().with_num_sms(num_programs)  # (a bad count is refused all the same)
            return None
        return TritonJFA(self.kernels, scheduler=self.scheduler.with_num_sms(num_programs), tf32=self.tf32)

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False,
               block_selection=None) -> KernelRun:
        """One forward on an already validated ``problem``, planned as the public call plans it; with
        ``instrument``, the :class:`LaunchPlan` (the plan the kernels ran, read back) and the :class:`Visits`
        counters (the backward's fill in when it runs). A block-sparse ``problem`` (``problem.block_selection``)
        runs on the selection tensors ``block_selection`` (a :class:`~jfa_verify.core.selection.BlockSelection`;
        None: the ones the problem was validated with), which must hold the values the problem was validated on.

        Raises:
            UnsupportedCase: ``problem`` is outside ``triton_jfa``'s capabilities.
            InvalidInput: offsets that are not dense (the problem was validated on other tensors); a
                ``block_selection`` for a dense problem, or of other block sizes than the problem's.
        """
        if problem.block_selection is None and block_selection is None:
            return self._run(problem.call_shape(), q, k, v, q_offsets, k_offsets, problem if instrument else None)
        if problem.block_selection is None or (block_selection is not None and block_selection.block_sizes
                                               != problem.block_selection.block_sizes):
            raise InvalidInput(f"launch: block_selection with block sizes "
                               f"{None if block_selection is None else block_selection.block_sizes} for a problem "
                               f"validated with {problem.block_selection}; validate the call with its selection "
                               f"(validate_inputs(..., block_selection=...)) and pass the same one")
        shape = dataclasses.replace(problem.call_shape(), block_selection=block_selection
                                    or problem.block_selection.source)
        return self._run(shape, q, k, v, q_offsets, k_offsets, problem if instrument else None, sparse=problem)

    def _checked_plan(self, arrays: "DevicePlan", problem: JaggedProblem) -> LaunchPlan:
        """The device plan read back, with the host planner's arrays for the same call beside it (the framework's
        :func:`jfa_verify.scheduling.device_plan.launch_plan`); the delta preprocess runs the dQ tiles as a grid."""
        return device_plan.launch_plan(arrays, problem, arrays.cfg["tiles"], grids={"pre": "dq"})

    def _run(self, shape: CallShape, q, k, v, q_offsets, k_offsets, instrumented: Optional[JaggedProblem], *,
             sparse: Optional[JaggedProblem] = None) -> KernelRun:
        """One forward; ``sparse``: the validated block-sparse problem (``shape.block_selection`` its tensors)."""
        reason = KERNEL_CAPABILITIES.unsupported_reason(shape)
        if reason is not None:
            raise UnsupportedCase(f"kernel 'triton_jfa' does not support this case: {reason}")
        check_offsets_dense("q_offsets", q_offsets)  # the kernels read the offsets as dense arrays
        check_offsets_dense("k_offsets", k_offsets)
        sparse_args = None
        if sparse is not None:  # planned on the host: the tiles' costs follow the selection
            arrays, plan = plan_launch(sparse, self.scheduler, tf32=self.tf32)
            sparse_args = _sparse_arguments(sparse, shape.block_selection, arrays)
            plan = None if instrumented is None else plan
        elif device_plan.plannable(self.scheduler):
            arrays = DevicePlan(shape, q_offsets, k_offsets, self.scheduler, self.tf32,
                                with_ids=instrumented is not None)
            plan = None if instrumented is None else self._checked_plan(arrays, instrumented)
        else:  # a scheduler only the host simulates: plan on the host (reads the lengths)
            problem = instrumented or validate_inputs(q, k, v, q_offsets, k_offsets, causal=shape.causal,
                                                      causal_alignment=shape.causal_alignment,
                                                      sm_scale=shape.sm_scale, window=shape.window)
            arrays, plan = plan_launch(problem, self.scheduler, tf32=self.tf32)
        visits = None
        if instrumented is not None:
            heads = {"fwd": shape.num_heads_q, "dq": shape.num_heads_q, "dkdv": shape.num_heads_kv}

            def counters(fill):
                return {kind: torch.full((len(plan.passes[kind].workloads), h), fill, dtype=torch.int32,
                                         device=shape.device) for kind, h in heads.items()}

            visits = Visits(counters(0), counters(-1))
        o, lse = _attention(q, k, v, q_offsets, k_offsets, self.kernels, shape, arrays, visits, sparse_args)
        return KernelRun(o, lse, plan, visits)
