"""Code generation of triton_jfa for Hopper, checked on a machine without a GPU.

The kernels leave strides and head dims unspecialized (one compiled variant for all
values); without the ``ALIGNED`` hints that made every tile load a 2-byte scalar load
with no ``cp.async`` pipelining, and the kernel measured 6x slower on the H200
(README, "Measured on an H200"). ``benchmarks/inspect_codegen.py`` compiles the
kernels for sm_90 with Triton's own LLVM and ptxas and counts what the PTX does.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from jfa_verify.core.contract import validate_inputs
from jfa_verify.kernels.triton_jfa._host import _aligned

ROOT = Path(__file__).resolve().parents[1]


def _codegen(tmp_path, head_dim):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = tmp_path / f"codegen-{head_dim}.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "inspect_codegen.py"), "--head-dim", str(head_dim),
                          "--json", str(out)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_aligned_kernels_load_tiles_in_16_byte_pipelined_copies_on_hopper(tmp_path):
    aligned = _codegen(tmp_path, 128)
    assert set(aligned) == {"_fwd_kernel", "_bwd_preprocess_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel"}
    for name, s in aligned.items():
        assert s["aligned"], name
        assert s["loads"].get(".v4.b32", 0) > 0 and ".b16" not in s["loads"], (name, s["loads"])
    fwd = aligned["_fwd_kernel"]
    assert fwd["cp_async"] > 0 and fwd["wgmma"] > 0, fwd
    # one warp group per 64-row tile at D=128: with 8 warps the public call ran about half as fast on an H100
    # (docs/evidence/h100-2026-12-06)
    for name in ("_fwd_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel"):
        assert aligned[name]["num_warps"] == 4 and aligned[name]["wgmma"] > 0, (name, aligned[name])
    # a head dim that is not a multiple of 16 takes the unhinted path: 2-byte loads, no pipelining
    unaligned = _codegen(tmp_path, 120)
    assert not unaligned["_fwd_kernel"]["aligned"]
    assert ".v4.b32" not in unaligned["_fwd_kernel"]["loads"] and unaligned["_fwd_kernel"]["cp_async"] == 0


def test_aligned_flag_needs_every_stride_and_head_dim():
    off = torch.tensor([0, 5, 9], dtype=torch.int32)
    q, k, v = (torch.randn(9, 2, 32) for _ in range(3))
    p = validate_inputs(q, k, v, off, off)
    assert _aligned(p, q, k, v)
    wide = torch.randn(9, 2, 40)[..., :32]  # token stride 80, head stride 40: not multiples of 16
    assert not _aligned(p, q, wide, v)
    transposed = torch.randn(32, 2, 9).permute(2, 1, 0)  # head-dim stride 18, not 1
    assert not _aligned(p, q, k, transposed)
    odd = torch.randn(9, 2, 24)
    assert not _aligned(validate_inputs(odd, odd, odd, off, off), odd, odd, odd)  # head dim 24


def test_the_ptx_digest_ignores_source_locations_and_sees_one_instruction():
    """The digest that shows a dense path's code unchanged by a change behind a switch (benchmarks/inspect_codegen):
    moved lines and another checkout keep it, one changed instruction does not."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from inspect_codegen import ptx_digest
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    ptx = ('.file 1 "/a/_kernels.py"\n.visible .entry k()\n{\n.loc 1 10 5\nld.global.v4.b32 {%r1}, [%rd1];\n'
           '.loc 1 11 5\nadd.s32 %r2, %r1, 1;\n}\n.section .debug_str\n{\n"x"\n}\n')
    moved = ptx.replace('"/a/_kernels.py"', '"/b/other/_kernels.py"').replace(".loc 1 10 5", ".loc 1 42 7")
    assert ptx_digest(moved) == ptx_digest(ptx)
    assert ptx_digest(ptx.replace("add.s32 %r2, %r1, 1", "add.s32 %r2, %r1, 2")) != ptx_digest(ptx)
