"""Compile ``triton_jfa``'s four kernels for a CUDA target on any machine (no GPU) and summarize the PTX.

Speed regressions that come from code generation show in the PTX before any GPU
time is spent: whether tile loads are 16-byte vectors (``ld.global.v4``) and
pipelined into shared memory (``cp.async``), whether the matmuls use Hopper's
``wgmma``. This script stands in a CUDA driver that only answers "target
sm_<arch>", runs the kernel's host code up to each launch on CPU tensors, and
compiles the launch with ``JITFunction.warmup`` (Triton's own LLVM and ptxas
from the wheel). Tiles are the GPU's (``kernels.triton_jfa.block_sizes`` for
"cuda"). Usage::

    python benchmarks/inspect_codegen.py [--head-dim 128] [--heads 8] [--dtype bfloat16] [--arch 90] [--json OUT]

Prints one line per kernel: the ``ALIGNED`` flag the host chose, its warps, counts of
global loads by width, ``cp.async`` copies, ``wgmma`` instructions and shared
memory bytes, and a digest of the PTX's code (:func:`ptx_digest`). Must run
without ``TRITON_INTERPRET`` (the interpreter compiles nothing); exits 2 if it is set.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import re
import sys
import types

import torch

from jfa_verify.core.target_driver import TargetOnlyDriver


class _CompileOnly:
    """Stands in for a kernel: ``[grid](*args, **kwargs)`` compiles instead of launching and
    records ``{"aligned": ..., **summarize_ptx(...)}`` under ``name`` in ``found``."""

    def __init__(self, kernel, name: str, found: dict):
        self.kernel, self.name, self.found = kernel, name, found

    def __getitem__(self, grid):
        def compile_only(*args, **kwargs):
            compiled = self.kernel.warmup(*args, grid=grid, **kwargs)
            self.found[self.name] = {"aligned": bool(kwargs.get("ALIGNED")), "num_warps": compiled.metadata.num_warps,
                                     **summarize_ptx(compiled.asm["ptx"], compiled.metadata.shared)}
        return compile_only


def summarize_ptx(ptx: str, shared_bytes: int) -> dict:
    """Counts in one kernel's PTX: global loads by width suffix, ``cp.async`` copies, ``wgmma`` ops; ``digest``:
    :func:`ptx_digest`."""
    return {
        "loads": dict(collections.Counter(re.findall(r"ld\.global((?:\.\w+)*)", ptx))),
        "cp_async": len(re.findall(r"cp\.async\.c[ag]", ptx)),
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "shared_bytes": shared_bytes,
        "digest": ptx_digest(ptx),
    }


def ptx_digest(ptx: str) -> str:
    """A short SHA-256 of the PTX's code: source locations (``.file``, ``.loc``) and debug sections left out, so a
    change that moves lines or renames the checkout keeps the digest and a change of one instruction does not.

    What it is for: a kernel change meant to leave a path's code alone (a ``tl.constexpr`` switch off by default,
    say) is checked on a machine without a GPU by comparing the digests before and after (block-sparse
    ``triton_jfa``, 2026-12-04: all 48 dense variants' digests unchanged)."""
    code = re.sub(r"^\s*\.(?:file|loc)\b.*$", "", ptx, flags=re.M)
    code = re.sub(r"\.section\s+\.debug\w*\s*\{.*?\}", "", code, flags=re.S)
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def inspect(head_dim: int = 128, heads: int = 8, dtype: str = "bfloat16", arch: int = 90,
            causal: bool = True) -> dict:
    """``{kernel name: {"aligned": bool, **summarize_ptx(...)}}`` for forward and backward
    (forward only for float8); ``shared_bytes`` in bytes.

    Inputs: three sequences (300, 64, 17 tokens), ``heads`` query and KV heads, ``head_dim``
    for Q/K/V, contiguous ``[tokens, heads, head_dim]`` tensors of ``dtype`` (a name of
    :data:`jfa_verify.core.dtypes.DTYPES`). ``arch``: compute capability x 10 (90 for sm_90).
    While it runs, Triton's active driver and ``triton_jfa``'s tile-size function are
    replaced (restored on return), so do not launch kernels from other threads meanwhile.

    Raises:
        RuntimeError: under ``TRITON_INTERPRET=1``. KeyError: an unknown dtype name.
        InvalidInput: sizes the contract refuses (for example ``heads=0``).
    """
    import dataclasses

    from triton.runtime.driver import driver

    import jfa_verify.kernels.triton_jfa._config as tj
    from jfa_verify.core.contract import validate_inputs
    from jfa_verify.core.device import interpreting
    from jfa_verify.core.dtypes import DTYPES
    from jfa_verify.kernels.triton_jfa import _kernels
    from jfa_verify.kernels.triton_jfa._host import _backward, _forward, plan_launch
    from jfa_verify.scheduling.planning import GridScheduler

    if interpreting():
        raise RuntimeError("TRITON_INTERPRET is set: the interpreter compiles nothing; unset it")
    torch_dtype = DTYPES[dtype]
    lengths = (300, 64, 17)
    offsets = torch.tensor([0, 300, 364, 381], dtype=torch.int32)
    gen = torch.Generator().manual_seed(0)
    q, k, v, o, do = (torch.randn(sum(lengths), heads, head_dim, generator=gen).to(torch_dtype) for _ in range(5))
    lse = torch.zeros(heads, sum(lengths))
    problem = validate_inputs(q, k, v, offsets, offsets, causal=causal)
    found: dict = {}
    names = ("_fwd_kernel", "_bwd_preprocess_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel")
    compile_only = types.SimpleNamespace(**{n: _CompileOnly(getattr(_kernels, n), n, found) for n in names})

    cpu_tiles = tj.tile_sizes
    tj.tile_sizes = lambda p: cpu_tiles(dataclasses.replace(p, device=torch.device("cuda")))  # the GPU's tiles
    previous = driver._active  # None until something asked for the machine's own driver
    driver.set_active(TargetOnlyDriver(arch))
    try:
        plan, _ = plan_launch(problem, GridScheduler())
        _forward(compile_only, problem, plan, q, k, v, offsets, offsets, None)
        if torch_dtype in (torch.float32, torch.bfloat16, torch.float16):
            _backward(compile_only, problem, plan, q, k, v, o, lse, do, offsets, offsets, None)
    finally:
        driver.set_active(previous)  # reset_active() would create a CUDA driver, absent here
        tj.tile_sizes = cpu_tiles
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, default=128, help="16..256, the kernel's declared range")
    parser.add_argument("--heads", type=int, default=8, help="query and KV heads, 1..128")
    parser.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16", "float16", "float8_e4m3fn"))
    parser.add_argument("--arch", type=int, default=90, choices=(80, 86, 89, 90, 100),
                        help="compute capability x 10 (80: Ampere, 89: Ada, 90: Hopper, 100: Blackwell)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    from jfa_verify.kernels.triton_jfa._config import CAPABILITIES

    if not CAPABILITIES.min_head_dim <= args.head_dim <= CAPABILITIES.max_head_dim:
        parser.error(f"--head-dim {args.head_dim}: triton_jfa supports {CAPABILITIES.min_head_dim}.."
                     f"{CAPABILITIES.max_head_dim}")
    if not 1 <= args.heads <= 128:
        parser.error(f"--heads {args.heads}: give 1..128")
    from jfa_verify.core.device import interpreting

    if interpreting():
        print("unset TRITON_INTERPRET: the interpreter compiles nothing", file=sys.stderr)
        return 2
    found = inspect(args.head_dim, args.heads, args.dtype, args.arch)
    print(f"sm_{args.arch}, {args.dtype}, H={args.heads}, D={args.head_dim}, causal")
    for name, s in found.items():
        print(f"  {name:24s} ALIGNED={s['aligned']!s:5s} warps {s['num_warps']}  loads {s['loads']}  "
              f"cp.async {s['cp_async']}  wgmma {s['wgmma']}  shared {s['shared_bytes']} B  ptx {s['digest']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(found, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
