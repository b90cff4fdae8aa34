"""Compile ``gluon_jfa``'s kernels for sm_90a on a machine without a GPU and summarize the PTX.

Gluon kernels do not run under ``TRITON_INTERPRET``; what can be checked without a GPU is
what the compiler emits. A stand-in driver that only answers "target cuda 90" lets
``JITFunction.warmup`` compile (Triton's own LLVM and ptxas, from the wheel). The host code
of :mod:`._host` runs up to the launch on CPU tensors, and the launch compiles instead.

Usage: ``python -m kernels.gluon_jfa.codegen [--head-dim 128] [--dtype bfloat16] [--no-causal]
[--mutant NAME]`` (prints the facts as JSON). Must run without ``TRITON_INTERPRET``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import types

import torch

from jfa_verify.core.target_driver import TargetOnlyDriver

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


class _CompileOnly:
    """Stands in for a kernel: ``[grid](*args, **kwargs)`` compiles and keeps the compiled kernel."""

    def __init__(self, kernel, name: str, found: dict):
        self.kernel, self.name, self.found = kernel, name, found

    def __getitem__(self, grid):
        def compile_only(*args, **kwargs):
            self.found[self.name] = self.kernel.warmup(*args, grid=grid, **kwargs)
        return compile_only


def ptx_facts(ptx: str) -> dict:
    """Instruction counts in one kernel's PTX.

    ``global_loads`` maps each ``ld.global`` suffix (``.b32``, ``.v4.b32``, ...) to its count;
    ``tile_loads`` counts 16-byte vector or 16-bit loads, which a synchronous load of a bf16/fp16
    tile would use: TMA kernels have none (their global loads are 32-bit offsets, schedule
    entries, and in the backward float32 LSE/delta rows).
    """
    loads: dict = {}
    for suffix in re.findall(r"ld\.global((?:\.\w+)*)", ptx):
        loads[suffix] = loads.get(suffix, 0) + 1
    return {
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "bulk_tensor_copies": len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
        "mbarrier": len(re.findall(r"\bmbarrier\.", ptx)),
        "setmaxnreg": len(re.findall(r"setmaxnreg", ptx)),
        "setmaxnreg_values": sorted(set(re.findall(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx))),
        "fence_proxy_async": len(re.findall(r"fence\.proxy\.async", ptx)),
        "global_loads": loads,
        # synchronous tile loads would be 16-byte vectors or 16-bit elements; the kernels' own global
        # loads are 32-bit scalars (offsets, schedule) and, in the backward, float32 LSE/delta vectors
        "tile_loads": sum(n for s, n in loads.items() if ".v4" in s or ".v8" in s or "16" in s),
        "cp_async_ca_cg": len(re.findall(r"cp\.async\.c[ag]", ptx)),
    }


def _ptxas_usage(ptx: str, arch: str = "sm_90a") -> dict:
    """Registers and spill bytes per kernel from ``ptxas -v`` (Triton's bundled ptxas); {} if unavailable."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        ptxas = get_ptxas(90).path
    except Exception:  # noqa: BLE001 - optional facts
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as fh:
            fh.write(ptx)
        run = subprocess.run([ptxas, "-v", f"--gpu-name={arch}", src, "-o", os.path.join(tmp, "k.cubin")],
                             capture_output=True, text=True)
    text = run.stdout + run.stderr
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", text)]
    spills = [int(a) + int(b) for a, b in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)]
    return {"registers": max(regs, default=None), "spill_bytes": max(spills, default=0), "ptxas_rc": run.returncode}


def compile_for_sm90(head_dim: int = 128, dtype: torch.dtype = torch.bfloat16, causal: bool = True,
                     kernels_module=None, broadcast_q: bool = False, bottom_right: bool = False,
                     ptxas_usage: bool = False, backward: bool = True) -> dict:
    """Compile the forward (and, with ``backward``, the dK/dV and dQ kernels) for sm_90a on CPU tensors
    and return ``{kernel name: facts}``.

    Inputs: three sequences (300, 64, 17 tokens), H_q = 8, H_kv = 2 (GQA), ``head_dim``,
    ``dtype`` (bfloat16 or float16). ``kernels_module``: a kernel module (default
    ``_kernels``; a mutant's module: ``load_catalogue("gluon_jfa").module(name)``). Facts: see
    :func:`ptx_facts`, plus ``shared_bytes`` and ``num_warps`` (and ``registers``/``spill_bytes``
    with ``ptxas_usage``).

    Raises:
        RuntimeError: ``TRITON_INTERPRET`` is set (the interpreter compiles nothing).
        GluonUnsupported: head dim or dtype outside the kernel's range.
    """
    if os.environ.get("TRITON_INTERPRET", "0").lower() not in ("", "0", "false", "off", "no"):
        raise RuntimeError("TRITON_INTERPRET is set: Gluon kernels only compile without it; unset it")
    from triton.runtime.driver import driver

    from jfa_verify.core.contract import validate_inputs
    from jfa_verify.scheduling.planning import PersistentScheduler

    from . import _host, build
    if kernels_module is None:
        from . import _kernels as kernels_module

    lengths = (300, 64, 17)
    offsets = torch.tensor([0, 300, 364, 381], dtype=torch.int32)
    gen = torch.Generator().manual_seed(0)
    h_q, h_kv = 8, 2
    q = torch.randn(16 if broadcast_q else sum(lengths), h_q, head_dim, generator=gen).to(dtype)
    k, v = (torch.randn(sum(lengths), h_kv, head_dim, generator=gen).to(dtype) for _ in range(2))
    q_off = None if broadcast_q else offsets
    problem = validate_inputs(q, k, v, q_off, offsets, causal=causal,
                              causal_alignment="bottom_right" if bottom_right else "top_left")
    _host.check_launchable(problem.call_shape(), q, k, v, require_cuda=False)
    launch = _host.describe(problem.call_shape(), k, q_off, offsets, problem=problem)
    # the registered kernel's plans (zigzag over an H200's 132 SMs), made on the host: no device here
    plans = build(kernels_module=kernels_module,
                  scheduler=PersistentScheduler(backward="zigzag", num_sms=132)).host_plans(problem)
    found: dict = {}
    names = ["_fwd_kernel"] + (["_bwd_delta_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel"] if backward else [])
    stand_in = types.SimpleNamespace(**{n: _CompileOnly(getattr(kernels_module, n), n, found) for n in names})
    previous = driver._active
    driver.set_active(TargetOnlyDriver(90))
    try:
        o, lse = _host._forward(stand_in, launch, q, k, v, q_off, offsets, plans("fwd"))
        if backward:
            do = torch.randn(o.shape, generator=gen).to(dtype)
            _host._backward(stand_in, launch, q, k, v, o, lse, do, q_off, offsets, plans("dq"), plans("dkdv"))
    finally:
        driver.set_active(previous)  # reset_active() would create a CUDA driver, absent here
    facts = {}
    for name, compiled in found.items():
        ptx = compiled.asm["ptx"]
        facts[name] = {**ptx_facts(ptx), "shared_bytes": compiled.metadata.shared,
                       "num_warps": compiled.metadata.num_warps,
                       "target": re.search(r"\.target\s+(\S+)", ptx).group(1)}
        if ptxas_usage:
            facts[name].update(_ptxas_usage(ptx))
    return facts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dim", type=int, default=128, choices=(64, 128))
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    parser.add_argument("--no-causal", action="store_true")
    parser.add_argument("--bottom-right", action="store_true")
    parser.add_argument("--broadcast-q", action="store_true")
    parser.add_argument("--mutant", default=None, help="compile a mutant's kernels (catalogue gluon_jfa)")
    parser.add_argument("--ptxas", action="store_true", help="add registers / spills from ptxas -v")
    parser.add_argument("--no-backward", action="store_true")
    args = parser.parse_args(argv)
    kmod = None
    if args.mutant:
        from jfa_verify.fuzz.mutation import load_catalogue

        kmod = load_catalogue("gluon_jfa").module(args.mutant)
    facts = compile_for_sm90(args.head_dim, DTYPES[args.dtype], not args.no_causal, kernels_module=kmod,
                             broadcast_q=args.broadcast_q, bottom_right=args.bottom_right, ptxas_usage=args.ptxas,
                             backward=not args.no_backward)
    print(json.dumps(facts, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
