"""The project's own Triton JFA forward and backward (``triton_jfa``).

Registration only: Triton is imported when the kernel is first used, never at
import time. Under ``TRITON_INTERPRET=1`` the same kernels run on CPU tensors.
"""

from __future__ import annotations

import dataclasses

import torch

from kernels.registry import Capabilities, register_kernel


def block_sizes(head_dim: int, dtype: torch.dtype, device_type: str) -> tuple[int, int]:
    """``(BLOCK_M, BLOCK_N)`` used by ``triton_jfa`` for this head dim, dtype and device type.

    On the CPU interpreter the tiles are small so that tile boundaries are
    reached with short, cheap sequences; BLOCK_M != BLOCK_N there on purpose,
    so that a query-tile/key-tile mix-up changes the result.
    """
    if device_type != "cuda":
        return (32, 16)
    return (64, 64) if head_dim <= 128 else (64, 32)


CAPABILITIES = Capabilities(
    min_head_dim=16,
    max_head_dim=256,
    non_power_of_two_head_dims=True,
    distinct_value_head_dim=True,
    instrumented=True,
    block_sizes=block_sizes,
)

# What the kernel code handles: also float8 e4m3 inputs, forward only (registered apart as
# ``triton_jfa_fp8`` so that the other kernels' strategies never draw float8 cases).
KERNEL_CAPABILITIES = dataclasses.replace(CAPABILITIES, dtypes=CAPABILITIES.dtypes + (torch.float8_e4m3fn,))
FP8_CAPABILITIES = dataclasses.replace(CAPABILITIES, dtypes=(torch.float8_e4m3fn,), backward=False)


def _load(forward: str | None, backward: str | None, *, tf32: bool = False):
    from jfa_verify.device import ensure_interpreter_matches_device

    ensure_interpreter_matches_device()
    from . import _kernels
    from ._autograd import make_jagged_attention

    if forward is None:
        return make_jagged_attention(_kernels, tf32=tf32)
    from .scheduling import HostScheduler

    return make_jagged_attention(_kernels, scheduler=HostScheduler(forward, backward), tf32=tf32)


@register_kernel("triton_jfa", capabilities=CAPABILITIES, requires=("triton",))
def load_triton_jfa():
    """Project Triton JFA, persistent: zigzag forward/dQ, round-robin dK/dV (one program per SM)."""
    return _load("zigzag", "round_robin")


@register_kernel("triton_jfa_grid", capabilities=CAPABILITIES, requires=("triton",))
def load_triton_jfa_grid():
    """Same kernels, one tile per program in launch order (no persistent schedule)."""
    return _load(None, None)


@register_kernel("triton_jfa_dynamic", capabilities=CAPABILITIES, requires=("triton",))
def load_triton_jfa_dynamic():
    """Same kernels, persistent, host-simulated dynamic (CLC-style) schedules for every pass."""
    return _load("dynamic", "dynamic")


@register_kernel("triton_jfa_tf32", capabilities=dataclasses.replace(CAPABILITIES, tf32=True), requires=("triton",))
def load_triton_jfa_tf32():
    """``triton_jfa`` with TF32 matmuls for float32 inputs (judged by the ``float32-tf32`` budget row)."""
    return _load("zigzag", "round_robin", tf32=True)


@register_kernel("triton_jfa_fp8", capabilities=FP8_CAPABILITIES, requires=("triton",))
def load_triton_jfa_fp8():
    """``triton_jfa``'s forward on float8 e4m3 inputs (P rounded to e4m3 before P V, O in bfloat16).

    Stands in for external fp8 kernels when calibrating the ``float8_e4m3fn`` budget row.
    """
    return _load("zigzag", "round_robin")
