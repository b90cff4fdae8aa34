"""``triton_jfa``'s capabilities, tile sizes and launch options: pure Python (no Triton import).

The tile sizes are a function of the problem the kernel will run, so the
framework's localization, tile-boundary strategies and coverage use the very
tiles of the launch (``max(D, D_v)`` decides them, not ``D`` alone).
"""

from __future__ import annotations

import dataclasses

import torch

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.core.selection import BLOCK_SIZES
from jfa_verify.protocol.kernel import Capabilities, TileSizes

__all__ = ["BLOCK_SPARSE", "CAPABILITIES", "FP8_CAPABILITIES", "KERNEL_CAPABILITIES", "MXFP8_CAPABILITIES",
           "launch_config", "tile_sizes"]

# Block selections of every (block_m, block_n) the contract allows: the tiles shrink to the selection's blocks
# where these are smaller (:func:`tile_sizes`), so a query tile lies in one query block and a KV tile in one KV
# block, and the sparse path walks whole tiles of the selected blocks (no per-key selection mask).
BLOCK_SPARSE = tuple((m, n) for m in BLOCK_SIZES for n in BLOCK_SIZES)

CAPABILITIES = Capabilities(
    min_head_dim=16,
    max_head_dim=256,
    non_power_of_two_head_dims=True,
    distinct_value_head_dim=True,
    deterministic=True,
    instrumented=True,
    masks=("none", "causal", "window", "causal+window"),
    block_sparse=BLOCK_SPARSE,
)
# What the kernel code handles: also float8 e4m3 inputs, forward only, with MXFP8 block scales or without
# (registered apart as ``triton_jfa_fp8`` and ``triton_jfa_mxfp8`` so that the other kernels' strategies never draw
# float8 or MXFP8 cases).
KERNEL_CAPABILITIES = dataclasses.replace(CAPABILITIES, dtypes=CAPABILITIES.dtypes + (torch.float8_e4m3fn,),
                                          mxfp8="e4m3")
FP8_CAPABILITIES = dataclasses.replace(CAPABILITIES, dtypes=(torch.float8_e4m3fn,), backward=False)
# MXFP8: head dims of whole 32-element scale blocks; P rounded by the "e4m3" rule (the float8 path's); dense only.
MXFP8_CAPABILITIES = dataclasses.replace(FP8_CAPABILITIES, head_dims=(32, 64, 96, 128), block_sparse=(),
                                         mxfp8="e4m3")


def tile_sizes(problem: JaggedProblem) -> TileSizes:
    """``(BLOCK_M, BLOCK_N)`` of ``triton_jfa`` for ``problem``.

    On the CPU interpreter the tiles are small so that tile boundaries are
    reached with short, cheap sequences; BLOCK_M != BLOCK_N there on purpose,
    so that a query-tile/key-tile mix-up changes the result. On CUDA the widest
    head dim (``max(D, D_v)``) decides: past 128 the KV tile halves to fit
    shared memory.

    A block-sparse call (``problem.block_selection`` not None: a :class:`~jfa_verify.core.contract.CallShape`'s
    :class:`~jfa_verify.core.selection.BlockSelection` or a problem's host view) gets tiles no larger than its
    blocks: ``BLOCK_M = min(BLOCK_M, block_m)``, ``BLOCK_N = min(BLOCK_N, block_n)``. All are powers of two, so a
    tile then divides its block and never straddles two (the sparse path in ``_kernels.py`` relies on it).
    """
    if problem.device.type != "cuda":
        tiles = TileSizes(32, 16)
    else:
        tiles = TileSizes(64, 64) if max(problem.head_dim, problem.head_dim_v) <= 128 else TileSizes(64, 32)
    selection = getattr(problem, "block_selection", None)
    if selection is None:
        return tiles
    return TileSizes(min(tiles.block_m, selection.block_m), min(tiles.block_n, selection.block_n))


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def launch_config(problem: JaggedProblem, *, tf32: bool = False) -> dict:
    """Tile sizes and launch options for ``problem`` (same BLOCK_M/BLOCK_N forward and backward)."""
    tiles = tile_sizes(problem)
    # One padded width for both head dims: on the H200 (Triton 3.6) the forward
    # returned wrong O, with LSE correct, for D=40 / D_v=24 (BLOCK_D=64, BLOCK_DV=32);
    # found by the property tests, not root-caused. Equal widths compute correctly.
    block_d = block_dv = max(16, _next_pow2(max(problem.head_dim, problem.head_dim_v)))
    item = torch.tensor([], dtype=problem.dtype).element_size()
    fwd_stage = tiles.block_n * (block_d + block_dv) * item
    bwd_stage = tiles.block_m * (block_d + block_dv) * item
    return dict(
        tiles=tiles,
        BLOCK_M=tiles.block_m,
        BLOCK_N=tiles.block_n,
        BLOCK_D=block_d,
        BLOCK_DV=block_dv,
        # One warp group per 64-row tile up to D=128: on an H100 (2026-12-06, benchmarks/sweep_triton_config.py,
        # docs/evidence/h100-2026-12-06) 4 warps ran the public call's forward 1.6-2.2x and forward+backward
        # 1.8-2.1x faster than 8 on every bench_e2e row at D=128, bf16.
        num_warps=4 if max(block_d, block_dv) <= 128 else 8,
        fwd_stages=max(1, min(3, (96 * 1024) // fwd_stage)),
        bwd_stages=max(1, min(2, (48 * 1024) // bwd_stage)),
        IEEE=problem.dtype == torch.float32 and not tf32,
    )
