"""Rows that belong to no sequence, for kernels' host code: outputs allocated empty, then only the rows before
``offsets[0]`` set to the contract's values (0 in O, dQ, dK, dV; ``-inf`` in LSE: :mod:`jfa_verify.core.contract`),
without reading ``offsets[0]`` back to the host.

Filling whole outputs instead is a pass over every byte a call writes (an O of 171,422 rows x 8 heads x 128 bf16
values, MovieLens-1024's, is 0.35 GB: its fill took 0.10 ms of an H200, a tenth of gluon_jfa's forward kernel, in
``docs/evidence/gpu-2026-12-04-b/profile-gluon-movielens-causal-fused.log``),
and reading ``offsets[0]`` first is a host synchronization. A kernel that leaves this to :func:`clear_unsequenced`
must write every row of every sequence itself (its tiles with rows but no visible key included), which the
framework's recycled-memory and poisoned-output checks hold it to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import torch

__all__ = ["ALL_ROWS", "Unsequenced", "clear_unsequenced", "first_row"]

ALL_ROWS = 1 << 62  # as ``first``: every row of the tensor belongs to no sequence (clamped to its rows)

_BLOCK_R = 64  # rows per program
_BLOCK_C = 256  # columns per step of a program's loop
_SLOTS = 3  # tensors per launch (a backward's dQ, dK and dV)


@dataclass(frozen=True)
class Unsequenced:
    """One output's rows of no sequence: those of ``tensor`` along ``dim`` (0, or 1 for a 2-D ``[H, rows]`` LSE)
    before ``first``, set to ``value``.

    ``first``: where sequence 0's rows start: an int (known on the host), a 1-D integer offsets tensor
    (``offsets[0]`` is read on its device: int32 or int64, any stride), or None (no such rows, as broadcast-Q's
    output rows). Values outside ``[0, rows]`` are clamped into it.
    """

    tensor: torch.Tensor
    first: Union[int, torch.Tensor, None]
    value: float = 0.0
    dim: int = 0


def first_row(offsets: Optional[torch.Tensor], batch: int) -> Union[torch.Tensor, int, None]:
    """``first`` for :class:`Unsequenced` in a call of ``batch`` sequences whose kernels read ``offsets``: the offsets
    themselves, or :data:`ALL_ROWS` for an empty batch (every row then belongs to no sequence, while a device plan
    clamps its one offset into the sequences' rows, none: :func:`jfa_verify.scheduling.device_plan.clamped_offsets`).
    """
    return offsets if batch else ALL_ROWS


def clear_unsequenced(*parts: Unsequenced) -> None:
    """Set each part's rows before its ``first`` to its ``value``, in place; no host synchronization.

    CUDA tensors with device offsets: one launch of a small Triton kernel per three parts, whose programs return at
    once where ``offsets[0]`` is 0 (:mod:`jfa_verify.protocol.unsequenced_kernel`). Otherwise (a host int, or CPU
    offsets, read for free) a slice is filled.

    Raises:
        ValueError: ``dim`` other than 0 (a tensor contiguous in its other dims) or 1 (a 2-D tensor), or a tensor
            that is not so laid out: the kernel addresses its rows and columns by two strides.
    """
    on_device = []
    for part in parts:
        rows, width, stride_r, stride_c = _as_rows(part)
        if part.first is None or rows == 0:
            continue
        if isinstance(part.first, torch.Tensor) and part.first.is_cuda:
            on_device.append((part, rows, width, stride_r, stride_c))
            continue
        first = int(part.first[0]) if isinstance(part.first, torch.Tensor) else int(part.first)
        part.tensor.narrow(part.dim, 0, min(max(first, 0), rows)).fill_(part.value)
    for i in range(0, len(on_device), _SLOTS):
        launch_fill(on_device[i:i + _SLOTS])


def _as_rows(part: Unsequenced) -> tuple[int, int, int, int]:
    """``(rows, width, row stride, column stride)`` of ``part.tensor`` seen as ``[rows, width]``."""
    t = part.tensor
    if part.dim == 0 and t.dim() >= 1 and (t.dim() == 1 or t.shape[0] == 0 or t[0].is_contiguous()):
        rows = t.shape[0]
        return rows, (t.numel() // rows if rows else 0), t.stride(0), 1
    if part.dim == 1 and t.dim() == 2:
        return t.shape[1], t.shape[0], t.stride(1), t.stride(0)
    raise ValueError(f"clear_unsequenced takes rows along dim 0 of a tensor contiguous in its other dims, or dim 1 "
                     f"of a 2-D tensor; got dim={part.dim} of shape {tuple(t.shape)} and strides {t.stride()}")


def launch_fill(slots: list, block_r: int = _BLOCK_R) -> None:
    """One launch for up to three ``(part, rows, width, row stride, column stride)`` slots (their tensors may be on
    the CPU under ``TRITON_INTERPRET``: the tests' way to run the kernel without a GPU)."""
    from jfa_verify.protocol.unsequenced_kernel import _fill_before_first_kernel

    args: list = []
    for part, rows, width, stride_r, stride_c in slots:
        args += [part.first, part.tensor, rows, width, stride_r, stride_c, float(part.value)]
    args += [None, None, 0, 0, 0, 0, 0.0] * (_SLOTS - len(slots))
    grid = (-(-max(s[1] for s in slots) // block_r),)
    _fill_before_first_kernel[grid](*args, SLOTS=len(slots), BLOCK_R=block_r, BLOCK_C=_BLOCK_C, num_warps=4)

