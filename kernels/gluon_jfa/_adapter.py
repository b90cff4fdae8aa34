"""``gluon_jfa`` behind the framework's protocol: the contract call and ``launch`` on a validated problem."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional

from jfa_verify.core.contract import CallShape, JaggedProblem, check_offsets_dense, validate_call, validate_inputs
from jfa_verify.protocol.kernel import KernelRun, LaunchPlan, PassPlan, TileSizes
from jfa_verify.scheduling import device_plan
from jfa_verify.scheduling.schedules import workloads_backward, workloads_forward

__all__ = ["GluonJFA"]


class GluonJFA:
    """``gluon_jfa`` bound to a kernels module, a host module and a scheduler hook for its query tiles."""

    def __init__(self, kmod, host, scheduler):
        self.kernels, self.host, self.scheduler = kmod, host, scheduler

    def __repr__(self) -> str:
        return f"GluonJFA(kernels={self.kernels.__name__}, scheduler={self.scheduler!r})"

    def __call__(self, q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None,
                 max_seqlen_q=None, max_seqlen_k=None):
        """The contract call: ``(o, lse)``, ``o`` differentiable.

        With ``max_seqlen_q`` and ``max_seqlen_k`` given (as FlashAttention's varlen API takes them) the call reads
        nothing back from the device: offsets are trusted (clamped into the buffers) and the zigzag programs are
        planned on the GPU. Without them the offsets are read once and checked against the contract.

        Raises:
            InvalidInput: inputs that break the contract. GluonUnsupported: outside this kernel.
        """
        options = dict(causal=causal, causal_alignment=causal_alignment, sm_scale=sm_scale, max_seqlen_q=max_seqlen_q,
                       max_seqlen_k=max_seqlen_k)
        if max_seqlen_q is not None and max_seqlen_k is not None:
            shape = validate_call(q, k, v, q_offsets, k_offsets, **options)
        else:
            shape = validate_inputs(q, k, v, q_offsets, k_offsets, **options).call_shape()
        return self._run(shape, None, q, k, v, q_offsets, k_offsets).outputs()

    def with_programs(self, num_programs: int) -> Optional["GluonJFA"]:
        """This kernel with its persistent CTAs capped to ``num_programs`` per pass (fewer SMs than the device has:
        the stress check's ``fewer_sms`` mode, :mod:`jfa_verify.checks.stress`), or None for a scheduler hook that
        is no :class:`~jfa_verify.scheduling.planning.PersistentScheduler` (nothing it can cap).

        Raises:
            InvalidInput: ``num_programs`` is not an int >= 1.
        """
        from jfa_verify.scheduling.planning import PersistentScheduler

        if not isinstance(self.scheduler, PersistentScheduler):
            PersistentScheduler().with_num_sms(num_programs)  # (a bad count is refused all the same)
            return None
        return GluonJFA(self.kernels, self.host, self.scheduler.with_num_sms(num_programs))

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False) -> KernelRun:
        """One forward on a validated ``problem``, planned as the public call plans it: the framework's query tiles
        (``workloads_forward`` with BLOCK_M = 128) dealt by the scheduler hook (zigzag by cost by default); the
        backward's dK/dV pass runs the hook's ``"dkdv"`` plan of ``workloads_backward`` tiles of 128 keys.

        With ``instrument``, the run's ``plan`` is the :class:`LaunchPlan` it launched from (:meth:`plan`): the
        framework checks its schedules and, for a plan made on the device, that its arrays are the host planner's.
        The kernels record no visits (``visits`` stays None)."""
        return self._run(problem.call_shape(), problem if instrument else None, q, k, v, q_offsets, k_offsets)

    def tiles(self, shape) -> TileSizes:
        """The forward's and dQ's query tiles (BLOCK_M rows) and the dK/dV pass's key tiles."""
        block_m, _ = self.host.tile_sizes(shape.head_dim, shape.dtype)
        return TileSizes(block_m, self.host.BWD_DKDV_TILES[1])

    def plan(self, shape: CallShape, q_offsets, k_offsets, instrumented: Optional[JaggedProblem] = None
             ) -> tuple[Optional[device_plan.DeviceLaunchPlan], Optional[LaunchPlan]]:
        """``(device plan, LaunchPlan)`` of a call: the :class:`~jfa_verify.scheduling.device_plan.DeviceLaunchPlan`
        the kernels launch from (None for a scheduler only the host simulates, which needs ``instrumented``'s
        lengths) and, for an ``instrumented`` problem, its :class:`LaunchPlan`
        (:func:`jfa_verify.scheduling.device_plan.launch_plan`; host-simulated: the host planner's passes). No
        kernel runs: this works on any device's offsets."""
        tiles = self.tiles(shape)
        if device_plan.plannable(self.scheduler):
            planned = device_plan.DeviceLaunchPlan(shape, q_offsets, k_offsets, self.scheduler, tiles.block_m,
                                                   tiles.block_n, with_ids=instrumented is not None)
            checked = None if instrumented is None else device_plan.launch_plan(planned, instrumented, tiles)
            return planned, checked
        if instrumented is None:
            return None, None
        plans = self.host_plans(instrumented)
        return None, LaunchPlan(tiles, {kind: plans(kind) for kind in ("fwd", "dq", "dkdv")})

    def _workloads(self, problem: JaggedProblem, *, backward: bool) -> list:
        tiles = self.tiles(problem)
        workloads = workloads_backward if backward else workloads_forward
        return workloads(problem.q_lengths, problem.k_lengths, tiles.block_n if backward else tiles.block_m,
                         causal=problem.causal, causal_alignment=problem.causal_alignment)

    def _planned_launch(self, shape: CallShape, instrumented: Optional[JaggedProblem], q, k, v, q_offsets, k_offsets,
                        poison: bool = False):
        """``(launch, q_off, k_off, plans, checked)`` of a call: the host's :class:`Launch` description, the offsets
        the kernels read, ``plans(kind)`` (each pass's plan, made when first asked for) and the instrumented
        :class:`LaunchPlan` (None unless ``instrumented``)."""
        check_offsets_dense("q_offsets", q_offsets)
        check_offsets_dense("k_offsets", k_offsets)
        self.host.check_launchable(shape, q, k, v)
        planned, checked = self.plan(shape, q_offsets, k_offsets, instrumented)
        if planned is not None:
            launch = self.host.describe(shape, k, q_offsets, k_offsets, poison=poison)
            q_off = None if q_offsets is None else planned.q_off
            return launch, q_off, planned.k_off, planned.arrays, checked
        # a scheduler only the host simulates: the lengths are read and the plan built in Python
        problem = instrumented or validate_inputs(q, k, v, q_offsets, k_offsets, causal=shape.causal,
                                                  causal_alignment=shape.causal_alignment, sm_scale=shape.sm_scale)
        launch = self.host.describe(shape, k, q_offsets, k_offsets, problem=problem, poison=poison)
        plans = checked.passes.__getitem__ if checked is not None else self.host_plans(problem)
        # (int32 where the rows allow, as a device plan's are: one compiled variant for both offsets dtypes)
        return (launch, device_plan.kernel_offsets(q_offsets, shape.total_q_rows),
                device_plan.kernel_offsets(k_offsets, shape.total_k_rows), plans, checked)

    def host_plans(self, problem: JaggedProblem) -> Callable[[str], PassPlan]:
        """``plans(kind)``: pass ``kind``'s :class:`PassPlan` as the scheduler hook deals the framework's workloads
        for ``problem`` (query tiles of BLOCK_M rows for ``"fwd"`` and ``"dq"``, which run the same programs; key
        tiles of 128 for ``"dkdv"``), each made when first asked for: the dK/dV cost model is milliseconds of
        Python on a 2,000-tile batch, which a forward alone does not pay."""
        made: dict = {}

        def plans(kind: str) -> PassPlan:
            key = "dkdv" if kind == "dkdv" else "fwd"
            if key not in made:
                made[key] = self.scheduler(self._workloads(problem, backward=key == "dkdv"), key, problem)
            return made[key] if kind != "dq" else dataclasses.replace(made[key], kind="dq")

        return plans

    def _run(self, shape: CallShape, instrumented, q, k, v, q_offsets, k_offsets) -> KernelRun:
        poison = os.environ.get(self.host.POISON_ENV, "") == "1"
        launch, q_off, k_off, plans, checked = self._planned_launch(shape, instrumented, q, k, v, q_offsets,
                                                                    k_offsets, poison)
        o, lse = self.host.attention(self.kernels, launch, q, k, v, q_off, k_off, plans, poison)
        return KernelRun(o, lse, checked)

    def prepare(self, q, k, v, q_offsets, k_offsets, do, *, causal=False, causal_alignment="top_left",
                sm_scale=None):
        """For benchmarks: validate, plan (as the public call plans) and allocate once; returns
        ``(o, lse, forward, backward)`` of :func:`._host.prepare`: ``forward()`` and ``backward()`` only launch.

        Raises:
            InvalidInput: inputs that break the contract. GluonUnsupported: outside this kernel.
        """
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale)
        launch, q_off, k_off, plans, _ = self._planned_launch(problem.call_shape(), None, q, k, v, q_offsets,
                                                              k_offsets)
        return self.host.prepare(self.kernels, launch, q, k, v, q_off, k_off, plans, do)
