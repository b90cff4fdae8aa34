"""Inputs must be unchanged by the call: bitwise snapshots of q, k, v, offsets and dO, compared afterwards.

A kernel that writes into its inputs (a scratch buffer reused, an in-place
scale of q, offsets rewritten as padded boundaries) can still return the right
outputs for that call, and corrupt the caller's next one; no comparison of
outputs sees it. The check compares bits, not values: ``-0.0`` for ``0.0`` or
another NaN payload is a change too.
"""

from __future__ import annotations

from typing import Mapping, Optional

import torch

__all__ = ["Snapshot", "bits", "changed_inputs", "copy_keeping_strides", "snapshot"]

Snapshot = dict  # name -> (bit pattern tensor, shape, stride)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns of ``t`` as a contiguous integer tensor of the same shape (NaN == NaN here)."""
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    t = t.detach().contiguous()
    if t.dtype.is_floating_point:
        return t.view(ints[t.element_size()])
    return t


def snapshot(tensors: Mapping[str, Optional[torch.Tensor]]) -> Snapshot:
    """Copies of the bits, shape and strides of each named tensor (None entries are skipped)."""
    return {name: (bits(t).clone(), tuple(t.shape), tuple(t.stride())) for name, t in tensors.items()
            if isinstance(t, torch.Tensor)}


def changed_inputs(before: Snapshot, tensors: Mapping[str, Optional[torch.Tensor]]) -> list[str]:
    """One message per input whose shape, strides or bits differ from ``before``: the input's name, how
    many elements changed and the first one's index."""
    out = []
    for name, (old, shape, stride) in before.items():
        t = tensors.get(name)
        if not isinstance(t, torch.Tensor):
            continue
        if tuple(t.shape) != shape or tuple(t.stride()) != stride:
            out.append(f"input {name} changed shape/strides in the call: {shape}/{stride} -> "
                       f"{tuple(t.shape)}/{tuple(t.stride())}")
            continue
        diff = bits(t) != old
        n = int(diff.sum())
        if n:
            first = [int(i) for i in diff.nonzero()[0]]
            out.append(f"input {name} was modified by the call: {n} of {diff.numel()} element(s) differ, "
                       f"first at index {first}; a kernel must not write into its inputs")
    return out


def copy_keeping_strides(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with the very same strides, even for a slice of a wider buffer (whose gaps
    are NaN in the copy, as in a :class:`~jfa_verify.cases.case.Case`'s layouts); ``clone()`` would make a
    non-dense tensor contiguous."""
    copy = t.detach().clone()  # keeps the strides of a dense tensor
    if copy.stride() == t.stride():
        return copy
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
    fill = float("nan") if t.dtype.is_floating_point else 0
    buffer = torch.full((span,), fill, dtype=t.dtype, device=t.device)
    out = buffer.as_strided(t.shape, t.stride())
    out.copy_(t.detach())
    return out
