"""The shipped kernels' compiled code on a CUDA device, judged against the oracles on their GPU tile sizes
(issue 40, 2).

``gluon_jfa`` (sm_90 only) had no test of its numbers, only of its code generation (``test_gluon_codegen.py``), and
``triton_jfa``'s compiled branch (its GPU tiles, TF32, float8 sums) ran in scripts only. Each case here runs through
:func:`jfa_verify.run_case` (forward and, where the kernel has one, backward judged) and must pass. The lengths sit at
the edges of the tiles the kernel itself declares for the GPU (``tile_sizes``; for ``gluon_jfa`` also its backward's
dK/dV and dQ tiles, ``_host.BWD_DKDV_TILES`` / ``BWD_DQ_TILES``): each tile size - 1, itself and + 1, a sequence
of several tiles with a ragged last one, an empty sequence and a one-token one; causal top-left (self) and
bottom-right (cross, L_q != L_k), GQA, D = 64 and 128 (``triton_jfa`` also past 128, where its KV tile halves),
bfloat16 and float16 (``triton_jfa``: float32, and ``triton_jfa_tf32`` / ``triton_jfa_fp8``; ``triton_jfa_mxfp8``
on the same float8 cases, each with one of the MXFP8 scale patterns in turn).

Every test is marked ``gpu``: skipped when the selected device is the CPU (``test_gpu_scripts.py`` checks that
they all carry it and that ``ci/gpu_run.sh`` runs this file). Collecting it imports no Triton: the kernels load
on first use, on the GPU. Run: ``python -m pytest -m gpu --jfa-device cuda tests/test_kernels_gpu.py``.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from jfa_verify import Case, run_case
from jfa_verify.cases.scaling import SCALE_PATTERNS, Scaling
from jfa_verify.core.contract import JaggedProblem
from jfa_verify.core.dtypes import FORWARD_ONLY, to_dtype
from jfa_verify.kernels.gluon_jfa import _host as gluon_host  # pure Python at import (Triton inside functions)
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.settings import RunSettings

pytestmark = pytest.mark.gpu


def _gpu_tiles(kernel: str, head_dim: int, dtype: str) -> tuple[int, int]:
    """``(BLOCK_M, BLOCK_N)`` the kernel declares for this shape on a CUDA device (no device needed to ask)."""
    problem = JaggedProblem.of_shape(head_dim, head_dim, to_dtype(dtype), "cuda")
    return get_kernel(kernel).tile_sizes(problem).as_tuple()


def _edge_lengths(tiles) -> tuple[int, ...]:
    """Each tile size - 1, itself and + 1, several tiles of the largest with a ragged last one (3 * T + 5),
    an empty sequence and a one-token one: the order mixes long and short so that programs straddle them."""
    sizes = sorted(set(tiles))
    edges = sorted({n + e for n in sizes for e in (-1, 0, 1)})
    return (*edges[::2], 0, 3 * sizes[-1] + 5, 1, *edges[1::2])


def _cases(kernel: str, dtypes, head_dims, tiles_of) -> list[Case]:
    """Per dtype and head dim: non-causal and causal top-left self attention at the edge lengths, and causal
    bottom-right cross attention (query lengths at the edges too, other than the keys', so the diagonals differ);
    GQA (4 query heads on 2 KV heads)."""
    out = []
    for dtype in dtypes:
        for d in head_dims:
            lengths = _edge_lengths(tiles_of(d, dtype))
            q_lengths = lengths[::-1]  # same edges, paired with other key lengths: L_q > L_k, < and ==
            common = dict(num_heads_q=4, num_heads_kv=2, head_dim=d, dtype=dtype, seed=d)
            tag = f"{kernel}-{dtype}-d{d}"
            out += [Case(kv_lengths=lengths, **common, name=f"{tag}-self"),
                    Case(kv_lengths=lengths, causal=True, **common, name=f"{tag}-causal-top-left"),
                    Case(kv_lengths=lengths, mode="cross", q_lengths=q_lengths, causal=True,
                         causal_alignment="bottom_right", **common, name=f"{tag}-cross-causal-bottom-right")]
    return out


def _gluon_tiles(d, dtype):
    # the forward's tiles, the dK/dV pass's (query rows a step, keys a tile) and the dQ pass's
    return (*_gpu_tiles("gluon_jfa", d, dtype), *gluon_host.BWD_DKDV_TILES, *gluon_host.BWD_DQ_TILES)


GLUON_CASES = _cases("gluon_jfa", ("bfloat16", "float16"), (64, 128), _gluon_tiles)
TRITON_CASES = [pytest.param(kernel, case, id=case.name)
                for kernel, dtypes, head_dims in (("triton_jfa", ("bfloat16", "float16", "float32"), (64, 128)),
                                                  ("triton_jfa", ("bfloat16",), (192,)),  # KV tile halved
                                                  ("triton_jfa_tf32", ("float32",), (64, 128)),
                                                  ("triton_jfa_fp8", ("float8_e4m3fn",), (64, 128)))
                for case in _cases(kernel, dtypes, head_dims, lambda d, dtype, k=kernel: _gpu_tiles(k, d, dtype))]
TRITON_CASES += [pytest.param("triton_jfa_mxfp8", case, id=case.name) for case in (
    dataclasses.replace(case, block_scaling=Scaling(SCALE_PATTERNS[i % len(SCALE_PATTERNS)]),
                        name=f"{case.name}-mxfp8-{SCALE_PATTERNS[i % len(SCALE_PATTERNS)]}")
    for i, case in enumerate(_cases("triton_jfa_mxfp8", ("float8_e4m3fn",), (64, 128),
                                    lambda d, dtype: _gpu_tiles("triton_jfa_mxfp8", d, dtype))))]


def _judged(kernel_name: str, case: Case, device) -> None:
    kernel = get_kernel(kernel_name)
    reason = kernel.device_reason(device)
    if reason is not None:
        pytest.skip(f"{kernel_name} does not run on {torch.cuda.get_device_name(device)}: {reason}")
    backward = to_dtype(case.dtype) not in FORWARD_ONLY
    result = run_case(case, kernel, device, RunSettings(backward=backward))
    assert result.status == "pass", result.explain()
    judged = {c.name for c in result.comparisons}
    want = {"o", "lse", "dq", "dk", "dv"} if backward else {"o", "lse"}
    assert want <= judged, f"{case.name}: judged only {sorted(judged)}; notes: {result.notes}"
    # the tiles it ran are those the lengths were placed around
    assert result.block_sizes == _gpu_tiles(kernel_name, case.head_dim, case.dtype), result.block_sizes


@pytest.mark.parametrize("case", GLUON_CASES, ids=lambda c: c.name)
def test_gluon_jfa_passes_at_its_gpu_tile_edges(case, jfa_device, monkeypatch):
    monkeypatch.setenv(gluon_host.POISON_ENV, "1")  # outputs start as NaN: an unwritten row fails
    _judged("gluon_jfa", case, jfa_device)


@pytest.mark.parametrize("kernel,case", TRITON_CASES)
def test_triton_jfa_compiled_passes_at_its_gpu_tile_edges(kernel, case, jfa_device):
    _judged(kernel, case, jfa_device)
