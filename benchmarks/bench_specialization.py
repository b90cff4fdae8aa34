"""Forward time of ``triton_jfa`` under Triton argument-specialization choices (CUDA only).

Triton compiles one variant per combination of integer arguments equal to 1 or
divisible by 16 unless told otherwise (``do_not_specialize``). Specializing
makes faster code (16-byte, pipelined tile loads) but multiplies the variants
that random verification cases compile; the shipped kernel specializes none and
passes one ``ALIGNED`` flag instead. This script runs the forward as shipped,
without the hints, and built from the same source with specialization, checks
that every variant returns bit-identical O and LSE,
and prints median forward times (``triton.testing.do_bench``; random normal
bf16 inputs, never zeros) with ratios against the kernel as shipped and against
torch's FlashAttention-2 varlen where available.
Exits 1 if a variant's outputs differ from the shipped kernel's (the hints must
change code generation only). Usage: ``python benchmarks/bench_specialization.py [--json OUT]``.
"""

from __future__ import annotations

import json
import os
import sys
import types

import torch


class _Unhinted:
    """``kernel[grid](...)`` with ``ALIGNED=False``: the code the calibration records were measured with."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.kernel[grid](*args, **{**kwargs, "ALIGNED": False})


def _variants():
    import triton

    from jfa_verify.kernels.triton_jfa import _kernels

    shipped = _kernels._fwd_kernel
    names = list(shipped.do_not_specialize)
    raw = shipped.fn
    return {
        "shipped (ALIGNED hints)": shipped,
        "no hints (ALIGNED=False)": _Unhinted(shipped),
        "head dims + strides specialized": triton.jit(
            do_not_specialize=[n for n in names
                               if n not in ("HEAD_DIM", "HEAD_DIM_V") and not n.startswith("stride_")])(raw),
        "everything specialized": triton.jit(raw),
    }


def main() -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_schedules import bench_arguments, time_flash_varlen, workloads

    args = bench_arguments(__doc__, "bench_specialization.py")
    from triton.testing import do_bench

    from jfa_verify.core.contract import validate_inputs
    from jfa_verify.kernels.triton_jfa._host import _forward, plan_launch
    from jfa_verify.scheduling.planning import GridScheduler

    device = torch.device("cuda")
    variants = _variants()
    rows = []
    print(f"{torch.cuda.get_device_name(0)}, bf16, H={args.heads}, D={args.head_dim}, forward only, grid schedule")
    for name, causal, lengths, offsets, q, k, v in workloads(args.heads, args.head_dim, device):
        print(f"\n{name} (B={len(lengths)}, max={max(lengths)}), causal={causal}")
        times, first = {}, None
        with torch.no_grad():
            problem = validate_inputs(q, k, v, offsets, offsets, causal=causal)
            plan, _ = plan_launch(problem, GridScheduler())
            for vname, kernel in variants.items():
                kmod = types.SimpleNamespace(_fwd_kernel=kernel)
                out = _forward(kmod, problem, plan, q, k, v, offsets, offsets, None)
                if first is None:
                    first = out
                same = torch.equal(out[0], first[0]) and torch.equal(out[1], first[1])
                times[vname] = do_bench(lambda: _forward(kmod, problem, plan, q, k, v, offsets, offsets, None),
                                        warmup=25, rep=150, return_mode="median")
                print(f"  {vname:36s} {times[vname]:8.3f} ms  identical to shipped: {same}")
                rows.append(dict(batch=name, causal=causal, variant=vname, ms=times[vname], identical=same))
            peer = time_flash_varlen(q, k, v, offsets, lengths, causal, warmup=25, rep=150)
            if peer is not None:
                times["flash-attn-2-varlen (torch)"] = peer
                print(f"  {'flash-attn-2-varlen (torch)':36s} {peer:8.3f} ms")
        for vname, ms in times.items():
            print(f"  speedup of {vname:36s} vs shipped {times['shipped (ALIGNED hints)'] / ms:5.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    differ = sorted({(r["batch"], r["causal"], r["variant"]) for r in rows if not r["identical"]})
    for batch, causal, variant in differ:
        print(f"NOT bit-identical to the shipped kernel: {variant} on {batch}, causal={causal}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
