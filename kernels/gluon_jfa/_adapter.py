"""``gluon_jfa`` behind the framework's protocol: the contract call and ``launch`` on a validated problem."""

from __future__ import annotations

import os

from jfa_verify.core.contract import CallShape, JaggedProblem, check_offsets_dense, validate_call, validate_inputs
from jfa_verify.protocol.kernel import KernelRun
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
        return self._run(shape, None, q, k, v, q_offsets, k_offsets)

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False) -> KernelRun:
        """One forward on a validated ``problem``, planned as the public call plans it: the framework's query tiles
        (``workloads_forward`` with BLOCK_M = 128) dealt by the scheduler hook (zigzag by cost by default); the
        backward's dK/dV pass runs the hook's ``"dkdv"`` plan of ``workloads_backward`` tiles of 128 keys."""
        o, lse = self._run(problem.call_shape(), problem, q, k, v, q_offsets, k_offsets)
        return KernelRun(o, lse)

    def _run(self, shape: CallShape, problem, q, k, v, q_offsets, k_offsets):
        check_offsets_dense("q_offsets", q_offsets)
        check_offsets_dense("k_offsets", k_offsets)
        poison = os.environ.get(self.host.POISON_ENV, "") == "1"
        if device_plan.plannable(self.scheduler):
            block_m, _ = self.host.tile_sizes(shape.head_dim, shape.dtype)
            plan = device_plan.DeviceLaunchPlan(shape, q_offsets, k_offsets, self.scheduler, block_m,
                                                self.host.BWD_DKDV_TILES[1])
            launch_problem = self.host.from_shape(shape, q, k, v, q_offsets, k_offsets, poison)
            q_off = None if q_offsets is None else plan.q_off
            return self.host._GluonJaggedAttention.apply(q, k, v, q_off, plan.k_off, self.kernels, launch_problem,
                                                         None, plan.arrays("fwd"), poison,
                                                         lambda: (None, plan.arrays("dkdv")))
        # a scheduler only the host simulates: the lengths are read and the plan built in Python
        problem = problem or validate_inputs(q, k, v, q_offsets, k_offsets, causal=shape.causal,
                                             causal_alignment=shape.causal_alignment, sm_scale=shape.sm_scale)
        launch_problem = self.host.from_problem(problem, q, k, v)
        block_m, _ = self.host.tile_sizes(problem.head_dim, problem.dtype)
        workloads = workloads_forward(problem.q_lengths, problem.k_lengths, block_m, causal=problem.causal,
                                      causal_alignment=problem.causal_alignment)
        planned = self.scheduler(workloads, "fwd", problem)
        tiles = [(t.sequence, t.block) for t in workloads]
        programs = [list(p) for p in planned.programs]
        return self.host._GluonJaggedAttention.apply(q, k, v, q_offsets, k_offsets, self.kernels, launch_problem,
                                                     tiles, programs, poison, lambda: self.dkdv_plan(problem))

    def dkdv_plan(self, problem: JaggedProblem) -> tuple[list, list]:
        """The dK/dV pass's ``(tiles, programs)``: ``workloads_backward`` tiles of BLOCK_N keys dealt by the
        scheduler hook's ``"dkdv"`` plan. Built by the backward only (its cost model is milliseconds of Python on
        a 2,000-tile batch; a forward alone does not pay it)."""
        _, block_n = self.host.BWD_DKDV_TILES
        workloads = workloads_backward(problem.q_lengths, problem.k_lengths, block_n, causal=problem.causal,
                                       causal_alignment=problem.causal_alignment)
        planned = self.scheduler(workloads, "dkdv", problem)
        return [(t.sequence, t.block) for t in workloads], [list(p) for p in planned.programs]
