"""Feeding host-side schedules (:mod:`kernels.schedulers`) to the persistent ``triton_jfa`` kernels.

The kernels' tile lists (``query_tiles``/``key_tiles``) are exactly the
schedulers' workloads (``workloads_forward``/``workloads_backward``), so a
``Schedule``'s tile indices are kernel tile indices. A persistent launch has
one program per SM; each program walks the tiles the schedule dealt to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kernels.schedulers import SCHEDULERS, Schedule, Tile, workloads_backward, workloads_forward

__all__ = ["PlannedPass", "HostScheduler", "default_num_sms"]

INTERPRETER_SMS = 4


def default_num_sms(device_type: str) -> int:
    """SMs of the current CUDA device, or a small stand-in (4) on the CPU interpreter."""
    if device_type == "cuda":
        import torch

        return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return INTERPRETER_SMS


@dataclass(frozen=True)
class PlannedPass:
    """What a scheduler decided for one pass: its workloads, the schedule, and the kernel's program lists.

    ``programs[p]`` lists the tile indices program ``p`` runs (sentinels
    dropped: they carry no work on this single-CTA kernel).
    """

    kind: str
    workloads: tuple[Tile, ...]
    schedule: Schedule
    cluster_size: int

    @property
    def programs(self) -> list[list[int]]:
        return [[t.index for t in tiles if not t.sentinel] for tiles in self.schedule.sm_tiles]


class HostScheduler:
    """A ``triton_jfa`` scheduler hook backed by :mod:`kernels.schedulers`.

    Args:
        forward: scheduler name for the forward and dQ passes (default ``"zigzag"``).
        backward: scheduler name for the dK/dV pass (default ``"round_robin"``).
        num_sms: persistent programs per launch; None for the device's SM count.
        cluster_size: round-robin padding multiple (sentinels).

    Raises:
        KeyError: an unknown scheduler name (the message lists the known ones).
    """

    def __init__(self, forward: str = "zigzag", backward: str = "round_robin", *,
                 num_sms: Optional[int] = None, cluster_size: int = 1):
        for name in (forward, backward):
            if name not in SCHEDULERS:
                raise KeyError(f"scheduler {name!r} unknown; choose one of {sorted(SCHEDULERS)}")
        self.forward, self.backward = forward, backward
        self.num_sms, self.cluster_size = num_sms, cluster_size

    def __repr__(self) -> str:
        return f"HostScheduler(forward={self.forward!r}, backward={self.backward!r}, num_sms={self.num_sms})"

    def _schedule(self, name: str, workloads: list[Tile], num_sms: int) -> Schedule:
        if name == "round_robin":
            return SCHEDULERS[name](workloads, num_sms, self.cluster_size)
        return SCHEDULERS[name](workloads, num_sms)

    def __call__(self, tiles, kind: str, problem) -> PlannedPass:
        from ._autograd import launch_config

        cfg = launch_config(problem)
        mask = dict(causal=problem.causal, causal_alignment=problem.causal_alignment)
        if kind == "dkdv":
            workloads = workloads_backward(problem.q_lengths, problem.k_lengths, cfg["BLOCK_N"], **mask)
            name = self.backward
        else:
            workloads = workloads_forward(problem.q_lengths, problem.k_lengths, cfg["BLOCK_M"], **mask)
            name = self.forward
        if [(t.sequence, t.block) for t in workloads] != list(tiles):
            raise AssertionError(f"{kind}: kernel tiles and scheduler workloads disagree; they must list the same tiles")
        num_sms = self.num_sms or default_num_sms(problem.device.type)
        return PlannedPass(kind, tuple(workloads), self._schedule(name, workloads, num_sms), self.cluster_size)
