"""The one dtype table: names used in cases, reports and the CLI, and what each means to the contract."""

from __future__ import annotations

import torch

__all__ = ["DTYPES", "DIFFERENTIABLE", "FORWARD_ONLY", "OFFSET_DTYPES", "dtype_name", "output_dtype", "to_dtype"]

# Input dtypes of the contract, by the names cases, budget rows and the CLI use.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float8_e4m3fn": torch.float8_e4m3fn,
}
# Inputs of these dtypes have a forward only; their O is stored in bfloat16, as fp8 attention kernels emit.
FORWARD_ONLY: tuple[torch.dtype, ...] = (torch.float8_e4m3fn,)
# Names of the dtypes with a backward, in the order suites and the CLI list them (the default suite
# rotates its variants over this order).
DIFFERENTIABLE: tuple[str, ...] = ("bfloat16", "float16", "float32")
OFFSET_DTYPES: dict[str, torch.dtype] = {"int32": torch.int32, "int64": torch.int64}

_NAMES = {d: n for n, d in DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    """``"bfloat16"`` for ``torch.bfloat16``; ``str(dtype)`` for a dtype outside the table."""
    return _NAMES.get(dtype, str(dtype))


def to_dtype(name: str) -> torch.dtype:
    """The torch dtype of a table name.

    Raises:
        KeyError: ``name`` is not in :data:`DTYPES` (callers turn it into their own message).
    """
    return DTYPES[name]


def output_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of ``o`` for inputs of ``dtype``: the input dtype, bfloat16 for float8 inputs."""
    return torch.bfloat16 if dtype in FORWARD_ONLY else dtype
