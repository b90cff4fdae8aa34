"""Comparison of one output (O, LSE, dQ, dK, dV) against the float64 reference.

Rule (the FlashAttention tests' rule, Dao-AILab/flash-attention ``tests/``):
the kernel's maximum absolute error against float64 must be at most
``2 x`` the same-dtype padded SDPA oracle's error plus a rounding floor::

    allowance = SDPA_FACTOR * sdpa_error + FLOOR_ULPS[dtype] * eps(dtype) * scale

``eps`` is ``torch.finfo(dtype).eps`` of the output's storage dtype (LSE is
float32 for every input dtype). ``scale`` is ``max|reference|``, raised to the
magnitude of the terms the output is summed from where they can cancel (see
:func:`output_scales`): with one visible key dQ and dK are exactly 0 but are
computed as ``P * (dP - Delta)`` from terms of size ``|dO| |V|``. The floor
keeps a lucky, near-exact SDPA from making the allowance zero. Non-finite values are judged before magnitudes:
a NaN anywhere fails, and ``-inf`` must appear exactly where the reference has it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

__all__ = ["OUTPUTS", "SDPA_FACTOR", "FLOOR_ULPS", "OutputComparison", "compare_output", "output_scales"]

OUTPUTS = ("o", "lse", "dq", "dk", "dv")
SDPA_FACTOR = 2.0
# Rounding floor in units of eps(dtype) x max|reference|: a few roundings of the
# largest value (the store rounding alone is 0.5 eps).
FLOOR_ULPS = {torch.float32: 16.0, torch.bfloat16: 2.0, torch.float16: 2.0}


@dataclass(frozen=True)
class OutputComparison:
    """The verdict on one output.

    ``kernel_error`` and ``sdpa_error`` are maximum absolute errors against the
    float64 reference over finite reference entries (same units as the output);
    ``worst_index`` is the index of the kernel's worst element in the output
    tensor (None when the output is empty); ``problem`` names a non-finite
    mismatch when there is one.
    """

    name: str
    kernel_error: float
    sdpa_error: float
    allowance: float
    worst_index: Optional[tuple[int, ...]]
    kernel_value: Optional[float]
    reference_value: Optional[float]
    problem: Optional[str] = None

    @property
    def passed(self) -> bool:
        return self.problem is None and self.kernel_error <= self.allowance

    @property
    def headroom(self) -> float:
        """``kernel_error / allowance``: below 1 passes; inf for non-finite trouble."""
        if self.problem is not None:
            return float("inf")
        if self.allowance == 0:
            return 0.0 if self.kernel_error == 0 else float("inf")
        return self.kernel_error / self.allowance


def _max_abs_error(x: torch.Tensor, ref: torch.Tensor, finite: torch.Tensor) -> tuple[float, Optional[int]]:
    if not bool(finite.any()):
        return 0.0, None
    diff = (x.to(torch.float64) - ref).abs()
    diff = torch.where(finite, diff, torch.zeros_like(diff))
    # A NaN in x makes diff NaN; count it as infinitely wrong so argmax finds it.
    diff = torch.nan_to_num(diff, nan=float("inf"))
    flat = int(torch.argmax(diff.reshape(-1)).item())
    return float(diff.reshape(-1)[flat].item()), flat


def _row_norm_max(x: torch.Tensor) -> float:
    return float(x.double().norm(dim=-1).max().item()) if x.numel() else 0.0


def _abs_max(x: torch.Tensor) -> float:
    return float(x.double().abs().max().item()) if x.numel() else 0.0


def output_scales(q, k, v, do, sm_scale: float) -> dict[str, float]:
    """Magnitude of the terms each output is summed from (same units as the output).

    ``o`` is a convex mix of rows of V: ``max|V|``. ``dQ = sm_scale dS K`` and
    ``dK = sm_scale dS^T Q`` with ``dS = P (dP - Delta)`` and ``|dP| <=
    max||dO_i|| max||V_j||`` (Cauchy-Schwarz), so their terms are of size
    ``sm_scale max||dO|| max||V|| max|K|`` (resp. ``max|Q|``). ``dV = P^T dO``
    and LSE are judged on their own magnitude (0 here).
    """
    dp = _row_norm_max(do) * _row_norm_max(v)
    return {"o": _abs_max(v), "lse": 0.0, "dq": abs(sm_scale) * dp * _abs_max(k),
            "dk": abs(sm_scale) * dp * _abs_max(q), "dv": 0.0}


def compare_output(
    name: str, kernel: torch.Tensor, sdpa: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype,
    term_scale: float = 0.0,
) -> OutputComparison:
    """Judge one output.

    Args:
        name: one of :data:`OUTPUTS`.
        kernel, sdpa: the output from the kernel and the padded SDPA oracle, same shape as ``reference``.
        reference: the float64 reference output.
        dtype: the case dtype (selects the floor; LSE always uses float32's).
        term_scale: magnitude of the summed terms (:func:`output_scales`); the
            floor uses ``max(max|reference|, term_scale)``.

    Returns: an :class:`OutputComparison`; shape mismatches and NaN are reported as ``problem``.
    """
    if tuple(kernel.shape) != tuple(reference.shape):
        return OutputComparison(
            name, float("inf"), 0.0, 0.0, None, None, None,
            problem=f"shape {tuple(kernel.shape)} != expected {tuple(reference.shape)}",
        )
    reference = reference.to(torch.float64)
    kernel = kernel.detach()
    finite = torch.isfinite(reference)
    problem = None
    nan = torch.isnan(kernel)
    if bool(nan.any()):
        problem = f"{int(nan.sum())} NaN value(s)"
    else:
        k_inf, r_inf = torch.isinf(kernel), ~finite
        if not torch.equal(k_inf, r_inf):
            wrong = int((k_inf != r_inf).sum())
            problem = f"{wrong} element(s) infinite where the reference is not (or the reverse)"
        elif bool(r_inf.any()) and not torch.equal(kernel[r_inf].to(torch.float64), reference[r_inf]):
            problem = "infinite values of the wrong sign"
    k_err, flat = _max_abs_error(kernel, reference, finite)
    if problem is not None:
        bad = (torch.isnan(kernel) | (torch.isinf(kernel) != ~finite)).reshape(-1)
        if bool(bad.any()):
            flat = int(torch.nonzero(bad)[0].item())
    s_err, _ = _max_abs_error(sdpa.detach(), reference, finite)
    if not math.isfinite(s_err):
        # A broken baseline must not widen the allowance to infinity.
        s_err = 0.0
    store_dtype = torch.float32 if name == "lse" else dtype
    scale = float(reference[finite].abs().max().item()) if bool(finite.any()) else 0.0
    scale = max(scale, term_scale)
    floor = FLOOR_ULPS[dtype] * torch.finfo(store_dtype).eps * scale
    allowance = SDPA_FACTOR * s_err + floor
    index = kv = rv = None
    if flat is not None:
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), reference.shape))
        kv = float(kernel.reshape(-1)[flat].item())
        rv = float(reference.reshape(-1)[flat].item())
    return OutputComparison(name, k_err, s_err, allowance, index, kv, rv, problem)
