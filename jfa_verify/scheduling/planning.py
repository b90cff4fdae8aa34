"""Turning a problem's tile workloads into the programs of a persistent launch
(:class:`~jfa_verify.protocol.kernel.PassPlan`).

A *scheduler hook* is a callable ``hook(workloads, kind, problem) -> PassPlan``;
``workloads`` is the framework's tile list of the pass
(:func:`jfa_verify.scheduling.schedules.workloads_forward` for ``"fwd"`` and ``"dq"``,
``workloads_backward`` for ``"dkdv"``), so a kernel that plans its launches
with a hook runs exactly the tiles the framework checks.
"""

from __future__ import annotations

from typing import Optional

from jfa_verify.core.errors import InvalidInput
from jfa_verify.protocol.kernel import PassPlan
from jfa_verify.scheduling.schedules import SCHEDULERS, Schedule, Tile, round_robin

__all__ = ["GridScheduler", "PersistentScheduler", "INTERPRETER_SMS", "default_num_sms"]

# The CPU interpreter has no SMs; a few stand-ins keep several tiles per program, as a full GPU has.
INTERPRETER_SMS = 4


def default_num_sms(device) -> int:
    """SMs of ``device`` (a CUDA ``torch.device``), or :data:`INTERPRETER_SMS` on the CPU interpreter."""
    if device.type == "cuda":
        import torch

        index = device.index if device.index is not None else torch.cuda.current_device()
        return torch.cuda.get_device_properties(index).multi_processor_count
    return INTERPRETER_SMS


class GridScheduler:
    """One non-empty tile per program, in the workloads' (b-major) order: a non-persistent grid."""

    def __repr__(self) -> str:
        return "GridScheduler()"

    def __call__(self, workloads: list[Tile], kind: str, problem) -> PassPlan:
        programs = tuple((t.index,) for t in workloads if not t.empty)
        return PassPlan(kind, tuple(workloads), programs)


class PersistentScheduler:
    """One program per SM, walking a schedule of :mod:`jfa_verify.scheduling.schedules`.

    Args:
        forward: scheduler name for the forward and dQ passes (default ``"zigzag"``).
        backward: scheduler name for the dK/dV pass (default ``"round_robin"``).
        num_sms: persistent programs per launch; None for the device's SM count.
        cluster_size: round-robin padding multiple (sentinels, dropped from the programs: a
            single-CTA kernel runs nothing for them).

    Raises:
        InvalidInput: an unknown scheduler name (the message lists the known ones).
    """

    def __init__(self, forward: str = "zigzag", backward: str = "round_robin", *,
                 num_sms: Optional[int] = None, cluster_size: int = 1):
        for name in (forward, backward):
            if name not in SCHEDULERS:
                raise InvalidInput(f"scheduler={name!r} is unknown; choose one of {sorted(SCHEDULERS)}")
        self.forward, self.backward = forward, backward
        self.num_sms, self.cluster_size = num_sms, cluster_size

    def __repr__(self) -> str:
        return f"PersistentScheduler(forward={self.forward!r}, backward={self.backward!r}, num_sms={self.num_sms})"

    def with_num_sms(self, num_sms: int) -> "PersistentScheduler":
        """The same schedulers over ``num_sms`` persistent programs (fewer SMs than the device has: the stress
        check's ``fewer_sms`` mode, through a kernel's ``with_programs``).

        Raises:
            InvalidInput: ``num_sms`` is not an int >= 1.
        """
        if isinstance(num_sms, bool) or not isinstance(num_sms, int) or num_sms < 1:
            raise InvalidInput(f"num_programs={num_sms!r} must be an int >= 1 (persistent programs per pass)")
        return PersistentScheduler(self.forward, self.backward, num_sms=num_sms, cluster_size=self.cluster_size)

    def schedule(self, workloads: list[Tile], kind: str, num_sms: int) -> Schedule:
        name = self.backward if kind == "dkdv" else self.forward
        if SCHEDULERS[name] is round_robin:
            return round_robin(workloads, num_sms, self.cluster_size)
        return SCHEDULERS[name](workloads, num_sms)

    def __call__(self, workloads: list[Tile], kind: str, problem) -> PassPlan:
        schedule = self.schedule(workloads, kind, self.num_sms or default_num_sms(problem.device))
        programs = tuple(tuple(t.index for t in tiles if not t.sentinel) for tiles in schedule.sm_tiles)
        return PassPlan(kind, tuple(workloads), programs, schedule, self.cluster_size)
