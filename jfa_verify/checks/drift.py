"""Numerical drift: did a kernel's outputs move against a baseline run of the same case?

Used by ``jfa-verify bisect --drift``: the good commit's outputs are the baseline, and a commit
whose outputs differ from them, bit for bit or beyond ``atol``, is where a result started to move,
even when both are inside the float64 verdict's allowance (a changed reduction order, a new
rounding step, a different tile size).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping, Optional

import torch

__all__ = ["OutputDrift", "output_drift"]

_SAME_WIDTH_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass(frozen=True)
class OutputDrift:
    """How one output moved. ``changed``/``total``: elements that differ (bits, or beyond ``atol``);
    ``max_abs``: the largest absolute difference over elements finite in both (0.0 when only
    non-finite entries moved); ``index``: the worst element (None when the shapes differ);
    ``before``/``after``: its values; ``note``: why no element-wise comparison was possible."""

    name: str
    changed: int
    total: int
    max_abs: float
    index: Optional[tuple[int, ...]]
    before: Optional[float]
    after: Optional[float]
    note: str = ""

    def describe(self) -> str:
        if self.note:
            return f"{self.name}: {self.note}"
        return (f"{self.name}: {self.changed} / {self.total} element(s) moved, max |diff| {self.max_abs:.3g} "
                f"(worst index {list(self.index)}: {self.before!r} -> {self.after!r})")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["index"] = list(self.index) if self.index is not None else None
        return d


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(_SAME_WIDTH_INT[t.element_size()])


def output_drift(before: Mapping[str, torch.Tensor], after: Mapping[str, torch.Tensor], *,
                 atol: Optional[float] = None) -> list[OutputDrift]:
    """Every output of ``before`` (name -> tensor) that moved in ``after``; empty when none did.

    ``atol=None``: bit for bit (NaN payloads and the sign of zero count). ``atol >= 0``: an element
    moved when both values are finite and ``|after - before| > atol``, or when they are not both
    finite and not identical (an ``inf`` that appears, a ``NaN`` anywhere only one side has).
    An output missing on one side, or with another shape or dtype, is reported with a note.
    """
    drifts = []
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            side = "the baseline" if name not in before else "this commit"
            drifts.append(OutputDrift(name, 0, 0, 0.0, None, None, None, note=f"output missing in {side}"))
            continue
        a, b = before[name].detach().cpu(), after[name].detach().cpu()
        if a.shape != b.shape or a.dtype != b.dtype:
            drifts.append(OutputDrift(name, 0, a.numel(), 0.0, None, None, None,
                                      note=f"shape/dtype changed: {tuple(a.shape)} {a.dtype} -> "
                                           f"{tuple(b.shape)} {b.dtype}"))
            continue
        a64, b64 = a.double(), b.double()
        finite = torch.isfinite(a64) & torch.isfinite(b64)
        diff = torch.where(finite, (a64 - b64).abs(), torch.zeros_like(a64))
        if atol is None:
            moved = _bits(a) != _bits(b)
        else:
            same_nonfinite = (a64 == b64) | (torch.isnan(a64) & torch.isnan(b64))
            moved = torch.where(finite, diff > atol, ~same_nonfinite)
        changed = int(moved.sum())
        if not changed:
            continue
        score = torch.where(moved, diff, torch.full_like(diff, -1.0))
        flat = int(torch.argmax(torch.where(moved & ~finite, torch.full_like(diff, float("inf")), score)))
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape))
        drifts.append(OutputDrift(name, changed, a.numel(), float(diff[moved].max()) if changed else 0.0, index,
                                  float(a64[index]), float(b64[index])))
    return drifts
