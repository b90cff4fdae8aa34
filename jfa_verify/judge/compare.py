"""Comparison of one output (O, LSE, dQ, dK, dV) against the float64 reference.

Rule (the FlashAttention tests' rule, Dao-AILab/flash-attention ``tests/``):
the kernel's maximum absolute error against float64 must be at most
``2 x`` the same-dtype padded SDPA oracle's error plus a rounding floor::

    allowance = sdpa_factor * sdpa_error
                + floor_ulps * store_eps * max|reference|
                + lowp_ulps * operand_eps * lowp_scale
                + acc_ulps * compute_eps * acc_scale

The formula is :meth:`jfa_verify.judge.budgets.Budget.allowance` (one home: calibration uses it too).
The four constants per budget row (dtype, or ``float32-tf32``) and output come
from the versioned budget file (:mod:`jfa_verify.judge.budgets`,
``jfa_verify/data/budgets.json``); the three unit roundoffs are the row's
:class:`jfa_verify.judge.budgets.Precision` (``store_eps`` is float32's for LSE in
every row; ``torch.finfo(dtype).eps`` otherwise, ``2^-10`` for TF32 operands).
The scales come from the float64 reference
(:func:`jfa_verify.oracles.float64.reference_attention`, keys ``<out>_lowp`` and
``<out>_acc``): ``lowp_scale`` bounds, to first order, what rounding ``P`` and
``dS`` to the input dtype before their matmuls (FlashAttention's practice,
Dao 2023, arXiv:2307.08691) can move an element, in units of ``eps``; it
matters where terms cancel, such as dQ with keys sharing a large offset, which
an SDPA that keeps ``P`` in float32 (torch's CPU path) does not show.
``acc_scale`` is the size of ``dP - Delta``'s terms before they cancel in
float32 accumulators. The floors keep a lucky, near-exact SDPA from making
the allowance zero. Non-finite values are judged before magnitudes:
a NaN anywhere fails, and ``-inf`` must appear exactly where the reference has it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from jfa_verify.judge.budgets import PRECISIONS, default_table, headroom, precision_of

__all__ = ["OUTPUTS", "OutputComparison", "compare_output", "floor_terms", "reference_scales", "scale_floor_terms",
           "segment_verdict_terms"]

OUTPUTS = ("o", "lse", "dq", "dk", "dv")


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
    # The allowance's terms before their constants: eps*max|ref|, eps*lowp, eps32*acc (for calibration).
    floors: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def passed(self) -> bool:
        return self.problem is None and self.kernel_error <= self.allowance

    @property
    def headroom(self) -> float:
        """``kernel_error / allowance``: below 1 passes; inf for non-finite trouble."""
        if self.problem is not None:
            return float("inf")
        return headroom(self.kernel_error, self.allowance)


def _error(x: torch.Tensor, ref: torch.Tensor, finite: torch.Tensor) -> torch.Tensor:
    """``|x - ref|`` where the reference is finite, else 0; a NaN as inf (so that argmax finds it), +-inf as the
    largest float64. All flat float64."""
    diff = torch.where(finite, (x - ref).abs(), torch.zeros((), dtype=torch.float64, device=ref.device))
    return torch.nan_to_num(diff, nan=float("inf"))


def reference_scales(reference: dict, name: str) -> tuple[float, float]:
    """``(lowp_scale, acc_scale)`` of output ``name`` from :func:`oracles.float64.reference_attention`'s
    result (its ``"<name>_lowp"`` and ``"<name>_acc"`` scalars; 0.0 where it returns none)."""
    return float(reference.get(f"{name}_lowp", 0.0)), float(reference.get(f"{name}_acc", 0.0))


def floor_terms(name: str, reference: torch.Tensor, row: str, lowp_scale: float, acc_scale: float
                ) -> tuple[float, float, float]:
    """The allowance's floor terms before their constants: ``(store_eps * max|ref|,
    operand_eps * lowp_scale, compute_eps * acc_scale)``, with the unit roundoffs of budget row
    ``row`` (:data:`jfa_verify.judge.budgets.PRECISIONS`); LSE is stored in float32 in every row.

    ``reference``: the float64 reference of output ``name`` (any shape; non-finite entries ignored).
    Raises KeyError for an unknown row.
    """
    reference = reference.to(torch.float64)
    finite = torch.isfinite(reference)
    scale = float(reference[finite].abs().max().item()) if bool(finite.any()) else 0.0
    return scale_floor_terms(name, scale, row, lowp_scale, acc_scale)


def scale_floor_terms(name: str, scale: float, row: str, lowp_scale: float, acc_scale: float
                      ) -> tuple[float, float, float]:
    """:func:`floor_terms` from ``scale``, the reference's largest finite magnitude (``max |ref|``, 0.0 for none),
    already taken (the packed judge takes every part's at once). Raises KeyError for an unknown row."""
    prec = PRECISIONS[row]
    store_eps = torch.finfo(torch.float32).eps if name == "lse" else prec.store_eps
    # LSE has no operand rounding of its own: its lowp term (0 today) uses float32's unit.
    operand_eps = torch.finfo(torch.float32).eps if name == "lse" else prec.operand_eps
    return (store_eps * scale, operand_eps * lowp_scale, prec.compute_eps * acc_scale)


def compare_output(
    name: str, kernel: torch.Tensor, sdpa: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype,
    lowp_scale: float = 0.0,
    acc_scale: float = 0.0,
    budget=None,
    precision: Optional[str] = None,
) -> OutputComparison:
    """Judge one output.

    Args:
        name: one of :data:`OUTPUTS`.
        kernel, sdpa: the output from the kernel and the padded SDPA oracle, same shape as ``reference``.
        reference: the float64 reference output.
        dtype: the case dtype (selects the floor; LSE always uses float32's).
        lowp_scale, acc_scale: the reference's ``"<name>_lowp"`` and
            ``"<name>_acc"`` (see above); 0 when unknown.
        budget: a :class:`jfa_verify.judge.budgets.Budget`; None for the packaged table's entry.
        precision: the budget row (a key of :data:`jfa_verify.judge.budgets.PRECISIONS`); None for
            ``dtype``'s own row. ``"float32-tf32"`` judges float32 inputs multiplied in TF32.

    Returns: an :class:`OutputComparison`; shape mismatches and NaN are reported as ``problem``.
    """
    if tuple(kernel.shape) != tuple(reference.shape):
        return OutputComparison(
            name, float("inf"), 0.0, 0.0, None, None, None,
            problem=f"shape {tuple(kernel.shape)} != expected {tuple(reference.shape)}",
        )
    reference = reference.to(torch.float64)
    kernel = kernel.detach()
    row = precision or precision_of(dtype)
    if budget is None:
        budget = default_table().budget(row, name)
    if reference.numel() == 0:
        floors = scale_floor_terms(name, 0.0, row, lowp_scale, acc_scale)
        return OutputComparison(name, 0.0, 0.0, budget.allowance(0.0, floors), None, None, None, None, floors)
    # Every number the verdict needs is computed on the output's device and read back in one transfer (it was
    # about fourteen reads, each a device sync on a GPU, per output).
    finite = torch.isfinite(reference)
    got = kernel.to(torch.float64).reshape(-1)
    ref = reference.reshape(-1)
    fin = finite.reshape(-1)
    nan = torch.isnan(kernel).reshape(-1)
    k_inf = torch.isinf(kernel).reshape(-1)
    inf_mismatch = k_inf != ~fin
    # given no mismatch, the reference's infinities are the kernel's: those of another sign (or a NaN reference)
    wrong_sign = k_inf & ~fin & (got != ref)
    bad = nan | inf_mismatch | wrong_sign  # the elements a problem names; its first one is the worst index
    k_diff, s_diff = (_error(x, ref, fin) for x in (got, sdpa.detach().to(torch.float64).reshape(-1)))
    k_at = torch.argmax(k_diff)  # the first largest error, as before
    first_bad = torch.argmax(bad.to(torch.uint8))
    zero = torch.zeros((), dtype=torch.float64, device=ref.device)
    (n_nan, n_mismatch, any_wrong_sign, any_finite, k_err, k_flat, s_err, scale, bad_flat, k_val, r_val, bad_k_val,
     bad_r_val) = torch.stack([nan.sum().to(torch.float64), inf_mismatch.sum().to(torch.float64),
                               wrong_sign.any().to(torch.float64), fin.any().to(torch.float64), k_diff[k_at],
                               k_at.to(torch.float64), s_diff.max(), torch.where(fin, ref.abs(), zero).max(),
                               first_bad.to(torch.float64), got[k_at], ref[k_at], got[first_bad], ref[first_bad]]
                              ).tolist()
    problem = None
    if n_nan:
        problem = f"{int(n_nan)} NaN value(s)"
    elif n_mismatch:
        problem = f"{int(n_mismatch)} element(s) infinite where the reference is not (or the reverse)"
    elif any_wrong_sign:
        problem = "infinite values of the wrong sign"
    if not any_finite:
        k_err = s_err = 0.0
    if not math.isfinite(s_err):
        # A broken baseline must not widen the allowance to infinity.
        s_err = 0.0
    flat, kv, rv = ((int(bad_flat), bad_k_val, bad_r_val) if problem is not None else
                    (int(k_flat), k_val, r_val) if any_finite else (None, None, None))
    floors = scale_floor_terms(name, scale, row, lowp_scale, acc_scale)
    allowance = budget.allowance(s_err, floors)
    index = None
    if flat is not None:
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), reference.shape))
    return OutputComparison(name, k_err, s_err, allowance, index, kv, rv, problem, floors)


def segment_verdict_terms(kernel: torch.Tensor, sdpa: torch.Tensor, reference: torch.Tensor, segment: torch.Tensor,
                          segments: int) -> torch.Tensor:
    """What :func:`compare_output` judges, for many slices of one output at once: ``[segments, 4]`` float64 on the
    output's device, per segment ``(bad, kernel_error, sdpa_error, scale)``.

    Args:
        kernel, sdpa, reference: one output, same shape, rows first (``[rows, ...]``; LSE transposed to
            ``[rows, H]``); the reference in float64.
        segment: ``[rows]`` int64 on their device, the segment of each row (``segments`` for a row in none).
        segments: how many segments.

    Per segment, as :func:`compare_output` computes them on that segment's rows alone: ``bad`` 1.0 where it finds a
    ``problem`` (a NaN; infinite where the reference is not, or the reverse; infinite of the wrong sign), else 0.0;
    ``kernel_error`` and ``sdpa_error`` its maximum absolute errors over finite reference entries (a NaN as inf,
    +-inf as the largest float64, as there; 0.0 for none); ``scale`` ``max |reference|`` over finite entries (0.0
    for none). Maxima are exact, so each equals its value on the slice alone, bit for bit. The caller reads them
    with one host transfer (:func:`jfa_verify.judge.packing.judge_parts`).
    """
    rows, width = reference.shape[0], math.prod(reference.shape[1:])  # (reshape(0, -1) is ambiguous: no rows)
    ref = reference.reshape(rows, width)
    got, base = kernel.detach().reshape(rows, width), sdpa.detach().reshape(rows, width)
    finite = torch.isfinite(ref)
    zero = torch.zeros((), dtype=torch.float64, device=ref.device)

    def max_error(x: torch.Tensor) -> torch.Tensor:  # as compare_output's, per row
        diff = torch.nan_to_num(torch.where(finite, (x.to(torch.float64) - ref).abs(), zero), nan=float("inf"))
        return diff.amax(1) if diff.shape[1] else torch.zeros(rows, dtype=torch.float64, device=ref.device)

    got64 = got.to(torch.float64)
    bad = torch.isnan(got) | (torch.isinf(got) != ~finite) | (~finite & (got64 != ref))
    per_row = torch.stack([bad.any(1).to(torch.float64), max_error(got), max_error(base),
                           torch.where(finite, ref.abs(), zero).amax(1) if ref.shape[1] else
                           torch.zeros(rows, dtype=torch.float64, device=ref.device)], 1)
    out = torch.zeros(segments + 1, 4, dtype=torch.float64, device=ref.device)
    # every term >= 0: the zeros are each segment's value when it has no row
    out.scatter_reduce_(0, segment[:, None].expand(-1, 4), per_row, "amax")
    return out[:segments]
