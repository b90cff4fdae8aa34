"""Hints for a failing output: the classic mistakes a kernel's numbers give away, said in words.

Each hint is a cheap test of a well-known slip against the float64 reference (which the verdict already has):
it never changes a verdict, it only adds a line to the explanation (a new user's base-2 LSE was reported as "max
abs error 0.613 ... kernel 1.9987, reference 1.3854", a ratio of exactly 1 / ln 2, with no word of it).
"""

from __future__ import annotations

import math
from typing import Optional

import torch

__all__ = ["hint"]


def _lse_in_base_2(got: torch.Tensor, ref: torch.Tensor, allowance: float) -> Optional[str]:
    """The kernel's LSE times ln 2 is the reference's (where the reference is finite and not ~0): log2 LSE."""
    finite = torch.isfinite(ref) & torch.isfinite(got) & (ref.abs() > 4 * allowance)
    if not bool(finite.any()):
        return None
    g, r = got[finite], ref[finite]
    if bool(((g * math.log(2.0) - r).abs() <= allowance).all()):
        return ("the kernel's LSE times ln 2 is the reference's everywhere: LSE in base 2 (log2)? The contract's LSE "
                "is the natural log; a kernel that means base 2 declares Capabilities(lse_base='2')")
    if bool(((g - r * math.log(2.0)).abs() <= allowance).all()):  # (the other slip: a new user's trial)
        return ("the kernel's LSE, as judged, is the reference's times ln 2 everywhere: a natural-log LSE from a "
                "kernel that declares Capabilities(lse_base='2') (its LSE is multiplied by ln 2 before judging)? "
                "Drop the declaration, or return log2")
    return None


def hint(output: str, got: torch.Tensor, ref: torch.Tensor, allowance: float) -> Optional[str]:
    """A line naming the well-known mistake that explains ``got`` (the kernel's ``output``) against ``ref`` (the
    float64 reference's, same shape), within ``allowance``; None when none does.

    Raises: nothing (a shape or dtype it cannot compare gives None).
    """
    if not isinstance(got, torch.Tensor) or not isinstance(ref, torch.Tensor) or got.shape != ref.shape:
        return None
    got, ref = got.detach().double(), ref.detach().to(got.device).double()
    if output == "lse":
        return _lse_in_base_2(got, ref, allowance)
    return None
