"""``gluon_jfa`` behind the framework's protocol: the contract call and ``launch`` on a validated problem."""

from __future__ import annotations

import os

from jfa_verify.core.contract import JaggedProblem, check_offsets_dense, validate_inputs
from jfa_verify.protocol.kernel import KernelRun
from jfa_verify.scheduling.schedules import workloads_backward, workloads_forward

__all__ = ["GluonJFA"]


class GluonJFA:
    """``gluon_jfa`` bound to a kernels module, a host module and a scheduler hook for its query tiles."""

    def __init__(self, kmod, host, scheduler):
        self.kernels, self.host, self.scheduler = kmod, host, scheduler

    def __repr__(self) -> str:
        return f"GluonJFA(kernels={self.kernels.__name__}, scheduler={self.scheduler!r})"

    def __call__(self, q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        """The contract call: ``(o, lse)``, ``o`` differentiable.

        Raises:
            InvalidInput: inputs that break the contract. GluonUnsupported: outside this kernel.
        """
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale)
        return self.launch(problem, q, k, v, q_offsets, k_offsets).outputs()

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False) -> KernelRun:
        """One forward on a validated ``problem``: the framework's query tiles (``workloads_forward`` with
        BLOCK_M = 128) dealt by the scheduler hook (zigzag by cost by default); the backward's dK/dV pass
        runs the hook's ``"dkdv"`` plan of ``workloads_backward`` tiles of 128 keys."""
        check_offsets_dense("q_offsets", q_offsets)
        check_offsets_dense("k_offsets", k_offsets)
        launch_problem = self.host.from_problem(problem, q, k, v)
        block_m, _ = self.host.tile_sizes(problem.head_dim, problem.dtype)
        workloads = workloads_forward(problem.q_lengths, problem.k_lengths, block_m, causal=problem.causal,
                                      causal_alignment=problem.causal_alignment)
        planned = self.scheduler(workloads, "fwd", problem)
        tiles = [(t.sequence, t.block) for t in workloads]
        programs = [list(p) for p in planned.programs]
        poison = os.environ.get(self.host.POISON_ENV, "") == "1"
        o, lse = self.host._GluonJaggedAttention.apply(q, k, v, q_offsets, k_offsets, self.kernels, launch_problem,
                                                       tiles, programs, poison, lambda: self.dkdv_plan(problem))
        return KernelRun(o, lse)

    def dkdv_plan(self, problem: JaggedProblem) -> tuple[list, list]:
        """The dK/dV pass's ``(tiles, programs)``: ``workloads_backward`` tiles of BLOCK_N keys dealt by the
        scheduler hook's ``"dkdv"`` plan. Built by the backward only (its cost model is milliseconds of Python on
        a 2,000-tile batch; a forward alone does not pay it)."""
        _, block_n = self.host.BWD_DKDV_TILES
        workloads = workloads_backward(problem.q_lengths, problem.k_lengths, block_n, causal=problem.causal,
                                       causal_alignment=problem.causal_alignment)
        planned = self.scheduler(workloads, "dkdv", problem)
        return [(t.sequence, t.block) for t in workloads], [list(p) for p in planned.programs]
