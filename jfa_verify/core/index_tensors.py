"""The rules every index tensor of a call obeys: the offsets (cu_seqlens) and a block selection's CSR arrays.

One home for them, so the two kinds of row pointers cannot drift apart: an index tensor is a 1-D int32/int64 dense
tensor on the device of ``q`` (checked without reading a value: no device synchronization), and row pointers are
non-decreasing cumulative counts that end at the number of rows they index (checked on the host, vectorized).
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import torch

from jfa_verify.core.dtypes import OFFSET_DTYPES
from jfa_verify.core.errors import InvalidInput

__all__ = ["check_dense", "check_index_tensor", "first_fall"]


def check_dense(name: str, t: Optional[torch.Tensor]) -> None:
    """Raise :class:`InvalidInput` unless the 1-D tensor ``t`` (or None) is dense; no device synchronization.

    A kernel reads an index tensor as a dense array: a strided view (``bounds[:, 0]``) gives silent garbage.
    """
    if t is not None and t.dim() == 1 and t.numel() > 1 and t.stride(0) != 1:
        raise InvalidInput(f"{name} is not contiguous (stride={t.stride(0)}, a view such as bounds[:, 0]); "
                           f"kernels read it as a dense array: pass {name}.contiguous()")


def check_index_tensor(name: str, t, device: torch.device, shape_doc: str, min_entries: int = 0) -> None:
    """Type, rank, dtype, device and density of the index tensor ``t`` called ``name``; no value read.

    Args:
        name: how the message names it (``"k_offsets"``, ``"block_selection.indices"``).
        t: the tensor; must be 1-D int32 or int64, dense, on ``device``, with at least ``min_entries`` entries.
        device: the device of ``q``.
        shape_doc: what its one dimension holds, for the rank message (``"B + 1 >= 1 entries"``).

    Raises:
        InvalidInput: the first rule broken, naming the value and the fix.
    """
    if not isinstance(t, torch.Tensor):
        raise InvalidInput(f"{name} must be a 1-D int32/int64 torch.Tensor, got {type(t).__name__}")
    if t.dim() != 1 or t.numel() < min_entries:
        raise InvalidInput(f"{name} must be 1-D with {shape_doc}, got shape {tuple(t.shape)}")
    if t.dtype not in OFFSET_DTYPES.values():
        raise InvalidInput(f"{name}.dtype={t.dtype} is not int32 or int64; convert with {name}.to(torch.int32)")
    if t.device != device:
        raise InvalidInput(f"{name}.device={t.device} differs from q.device={device}; move it with {name}.to(q.device)")
    check_dense(name, t)


def first_fall(name: str, pointers: np.ndarray, fix: str, where: Callable[[int], str] = lambda t: "") -> None:
    """Raise :class:`InvalidInput` at the first ``t`` with ``pointers[t] > pointers[t + 1]`` (row pointers must not
    decrease); ``where(t)`` adds the place in words, ``fix`` how to build them right."""
    falls = np.flatnonzero(np.diff(pointers) < 0)
    if falls.size:
        t = int(falls[0])
        place = where(t)
        raise InvalidInput(f"{name} is not non-decreasing: {name}[{t}]={int(pointers[t])} > {name}[{t + 1}]="
                           f"{int(pointers[t + 1])}{f' ({place})' if place else ''}; {fix}")
