"""Inputs must be unchanged by the call: bitwise snapshots of q, k, v, offsets and dO (and of a block-sparse call's
selection and an MXFP8 call's block scales), compared afterwards.

A kernel that writes into its inputs (a scratch buffer reused, an in-place
scale of q, offsets rewritten as padded boundaries) can still return the right
outputs for that call, and corrupt the caller's next one; no comparison of
outputs sees it. The check compares bits, not values: ``-0.0`` for ``0.0`` or
another NaN payload is a change too.
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
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
        n, first = _differences(bits(t).reshape(-1), old.reshape(-1))
        if n:
            index = [int(i) for i in np.unravel_index(first, shape)] if shape else []
            out.append(f"input {name} was modified by the call: {n} of {old.numel()} element(s) differ, "
                       f"first at index {index}; a kernel must not write into its inputs")
    return out


# Elements compared at once: summing a boolean tensor makes an int64 copy of it, 16 GiB for the 2^31-element class
# (out of an H100's memory after the call, 2026-12-05); in slices it stays under 512 MiB.
COMPARE_ELEMENTS = 1 << 26


def _differences(new: torch.Tensor, old: torch.Tensor) -> tuple[int, int]:
    """How many elements of the flat ``new`` and ``old`` differ, and the flat index of the first (-1 if none)."""
    count, first = 0, -1
    for start in range(0, old.numel(), COMPARE_ELEMENTS):
        diff = new[start:start + COMPARE_ELEMENTS] != old[start:start + COMPARE_ELEMENTS]
        n = int(diff.sum())
        if n and first < 0:
            first = start + int(diff.nonzero()[0, 0])
        count += n
    return count, first


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
