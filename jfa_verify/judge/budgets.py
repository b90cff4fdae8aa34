"""Tolerance budgets per dtype and per output, read from a versioned data file.

The file (default ``jfa_verify/data/budgets.json``, format ``jfa-verify-budgets/1``)
holds, for every dtype and output, the constants of the allowance rule in
:mod:`jfa_verify.judge.compare`, plus the provenance of the numbers (date, device,
torch and triton versions, number of cases, seeds). ``jfa-verify calibrate``
writes a new one; a change to it shows in review like any other diff.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Optional

import torch

from jfa_verify.core.dtypes import DTYPES, dtype_name
from jfa_verify.core.errors import InvalidInput

__all__ = ["Budget", "BudgetTable", "DERIVED_ROWS", "Precision", "PRECISIONS", "RULE", "precision_of", "default_table",
           "FORMAT", "headroom"]

FORMAT = "jfa-verify-budgets/1"
RULE = ("allowance = sdpa_factor * sdpa_error + floor_ulps * store_eps * max|ref| "
        "+ lowp_ulps * operand_eps * ref[<out>_lowp] + acc_ulps * compute_eps * ref[<out>_acc]")
_EPS32 = torch.finfo(torch.float32).eps


@dataclass(frozen=True)
class Precision:
    """The unit roundoffs one budget row's floors are measured in (see :func:`jfa_verify.judge.compare.compare_output`).

    ``store_eps``: of the stored outputs O, dQ, dK, dV (LSE is stored in float32 for every row);
    ``operand_eps``: of the matmul operands (``P`` and ``dS`` are rounded to it before ``P V``,
    ``dS K``, ``dS^T Q``); ``compute_eps``: of the logits ``S = Q K^T`` that ``P = exp(S - lse)``
    is recomputed from (float32 accumulators, TF32 operands, or FP8 tensor-core accumulators).
    """

    store_eps: float
    operand_eps: float
    compute_eps: float


# FP8 matrix multiplies on Hopper keep about 14 bits in their accumulator, far fewer than float32
# (DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024, section 3.3.2, measured on H800): machine
# epsilon 2^-13. Seen on the H200: float8 LSE errors near 1e-4 where float32 sums give 1e-7.
_FP8_MMA_ACC_EPS = 2.0 ** -13
# TF32 keeps 10 explicit mantissa bits (NVIDIA A100 whitepaper, 2020): unit roundoff 2^-10 as for fp16.
_TF32_EPS = 2.0 ** -10
PRECISIONS = {
    "float32": Precision(_EPS32, _EPS32, _EPS32),
    "float32-tf32": Precision(_EPS32, _TF32_EPS, _TF32_EPS),
    "bfloat16": Precision(torch.finfo(torch.bfloat16).eps, torch.finfo(torch.bfloat16).eps, _EPS32),
    "float16": Precision(torch.finfo(torch.float16).eps, torch.finfo(torch.float16).eps, _EPS32),
    # Forward only: O is stored in bfloat16; P is rounded to e4m3 (3 mantissa bits) before P V;
    # the logits S = Q K^T come from FP8 tensor-core products summed in the accumulator.
    "float8_e4m3fn": Precision(torch.finfo(torch.bfloat16).eps, torch.finfo(torch.float8_e4m3fn).eps,
                               _FP8_MMA_ACC_EPS),
}
# MXFP8 (float8 e4m3 inputs with E8M0 block scales, P rounded to e4m3 by the declared "e4m3" rule of
# jfa_verify.core.conventions.P_QUANTIZATIONS). The packaged table holds a fitted "mxfp8" row since version 4
# (H200 records, 2026-12-05: tests/test_budget_evidence.py); a table without one judges MXFP8 by the float8 row,
# which the derivation below shows to be sound:
# * a block scale is a power of two 2^(e - 127), so x * 2^(e - 127) is exact in binary floating point
#   while the product stays inside the format's normal range (float32 and bfloat16: 2^-126 to 2^128); the
#   references see exactly the dequantized values (oracles dequantize in float64, or in bfloat16 for SDPA,
#   where an e4m3 value times a power of two in range is exact);
# * the kernel's logits S = sum over the D/32 blocks c of 2^(a_c + b_c) (q_c . k_c) differ from the float8
#   path's only by exact power-of-two factors on each partial product, and V's dequantized values are exact
#   operands; so every rounding the kernel makes (O stored in bfloat16, P rounded to e4m3, the accumulators)
#   is the float8 path's rounding of the same (dequantized) quantities, and the floor terms the float64
#   reference returns (o_lowp = max P |V|, the acc terms with |S| and |lse|) are computed from those very
#   values;
# hence the same unit roundoffs, and the same constants (BudgetTable.budget reads the float8_e4m3fn row for
# "mxfp8" while the table has no calibrated row of its own: `jfa-verify calibrate --kernel triton_jfa_mxfp8`
# on a GPU would fit one).
PRECISIONS["mxfp8"] = PRECISIONS["float8_e4m3fn"]
# Rows judged by another row's constants until a table holds their own (see the derivation above).
DERIVED_ROWS = {"mxfp8": "float8_e4m3fn"}


def precision_of(dtype: torch.dtype, *, tf32: bool = False, block_scaled: bool = False) -> str:
    """The budget row name for inputs of ``dtype`` (``"float32-tf32"`` for float32 with TF32 matmuls,
    ``"mxfp8"`` for float8 e4m3 inputs with E8M0 block scales, ``block_scaled=True``).

    Raises:
        InvalidInput: a dtype with no row; ``block_scaled`` with a dtype other than float8_e4m3fn.
    """
    name = dtype_name(dtype)
    if name not in DTYPES:
        raise InvalidInput(f"no budget row for dtype={dtype}; rows: {sorted(PRECISIONS)}")
    if block_scaled:
        if name != "float8_e4m3fn":
            raise InvalidInput(f"block_scaled=True needs float8_e4m3fn inputs (MXFP8), got dtype={name}; pass "
                               f"block_scaled=False")
        return "mxfp8"
    return "float32-tf32" if tf32 and name == "float32" else name


@dataclass(frozen=True)
class Budget:
    """Constants of one (dtype, output) allowance; see :func:`jfa_verify.judge.compare.compare_output`.

    ``sdpa_factor`` multiplies the same-dtype SDPA error; the ``*_ulps`` multiply the
    rounding floors (units: ulps of the storage dtype, or of float32 for ``acc_ulps``).
    """

    sdpa_factor: float
    floor_ulps: float
    lowp_ulps: float
    acc_ulps: float

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, (int, float)) or not (value >= 0 and value < float("inf")):
                raise InvalidInput(f"budget {name}={value} must be a finite number >= 0")

    def floor(self, floors) -> float:
        """The rounding floor: the constants times the terms ``floors = (f1, f2, f3)`` (see :data:`RULE`)."""
        f1, f2, f3 = floors
        return self.floor_ulps * f1 + self.lowp_ulps * f2 + self.acc_ulps * f3

    def allowance(self, sdpa_error: float, floors) -> float:
        """The allowance of :data:`RULE`: the one formula the runner and the calibration use."""
        return self.sdpa_factor * sdpa_error + self.floor(floors)

    def needed_multiplier(self, kernel_error: float, sdpa_error: float, floors) -> float:
        """Multiplier of the floor constants at which ``kernel_error`` passes exactly: 0 when the SDPA
        term alone covers it, ``inf`` when there is an excess and no floor."""
        excess = kernel_error - self.sdpa_factor * sdpa_error
        if excess <= 0:
            return 0.0
        floor = self.floor(floors)
        return float("inf") if floor == 0 else excess / floor


def headroom(error: float, allowance: float) -> float:
    """``error / allowance``: below 1 passes; 0 for an exact zero against a zero allowance, else inf."""
    if allowance > 0:
        return error / allowance
    return 0.0 if error == 0 else float("inf")


@dataclass(frozen=True)
class BudgetTable:
    """All budgets of one file, with its version and provenance."""

    version: int
    provenance: dict
    budgets: dict  # dtype name -> output -> Budget

    def budget(self, dtype: "torch.dtype | str", output: str) -> Budget:
        """The budget of ``output`` for inputs of ``dtype`` (a torch dtype or a row name such as ``"float32-tf32"``).

        Raises:
            InvalidInput: no entry for that dtype or output.
        """
        name = dtype if isinstance(dtype, str) else dtype_name(dtype)
        if name not in self.budgets and name in DERIVED_ROWS:
            name = DERIVED_ROWS[name]
        try:
            return self.budgets[name][output]
        except KeyError:
            raise InvalidInput(f"the budget table (version {self.version}) has no entry for dtype={name}, "
                               f"output={output!r}; add it or run jfa-verify calibrate") from None

    @classmethod
    def from_dict(cls, doc: dict) -> "BudgetTable":
        if doc.get("format") != FORMAT:
            raise InvalidInput(f"not a budget file: format={doc.get('format')!r}, expected {FORMAT!r}")
        try:
            table = {dt: {out: Budget(**vals) for out, vals in outs.items()} for dt, outs in doc["budgets"].items()}
            return cls(int(doc["version"]), dict(doc.get("provenance", {})), table)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidInput(f"malformed budget file ({type(e).__name__}: {e}); it needs \"version\" and "
                               f"\"budgets\": {{row: {{output: {{sdpa_factor, floor_ulps, lowp_ulps, "
                               f"acc_ulps}}}}}}") from None

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "version": self.version,
            "rule": RULE,
            "provenance": self.provenance,
            "budgets": {dt: {out: asdict(b) for out, b in outs.items()} for dt, outs in self.budgets.items()},
        }

    @classmethod
    def load(cls, path: Optional[str | Path] = None) -> "BudgetTable":
        """Read a budget file (the packaged default when ``path`` is None).

        Raises:
            InvalidInput: missing file, bad JSON or wrong format.
        """
        if path is None:
            text = resources.files("jfa_verify").joinpath("data/budgets.json").read_text()
        else:
            path = Path(path)
            if not path.is_file():
                raise InvalidInput(f"budget file {str(path)!r} does not exist")
            text = path.read_text()
        where = "the packaged budget file" if path is None else f"budget file {str(path)!r}"
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            raise InvalidInput(f"{where} is not valid JSON: {e}") from None
        except InvalidInput as e:
            raise InvalidInput(f"{where}: {e}") from None


@lru_cache(maxsize=1)
def default_table() -> BudgetTable:
    """The packaged budget table (read once per process)."""
    return BudgetTable.load()
