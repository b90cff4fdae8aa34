"""The sanitizer control of ``gluon_jfa``: Triton 3.6's warp-specialization scaffold and nothing else.

``python -m jfa_verify.kernels.gluon_jfa.sanitizer_control`` launches, on an sm_90 GPU, a kernel shaped
like gluon_jfa's three kernels at their ``gl.warp_specialize`` call (a default partition of
``NUM_WARPS`` warps, one worker warp with 24 registers, two scalars loaded from global memory and
captured by both partitions) that allocates no shared memory and has no mbarrier of its own. Every
shared-memory access it makes is the compiler's: the lowering's captures and the worker warps' state
bytes, handed over with the CTA-wide named barrier 1.

The gate (``jfa_verify.gate``) runs it under each compute-sanitizer tool before gluon_jfa: a tool that
reports errors here cannot tell that scaffold from gluon_jfa's own synchronization (the triage of the
racecheck reports, which land on those same five instructions in every gluon_jfa kernel, is in
``docs/evidence/gluon-racecheck-2026-12-01/``). Exit status 0 when the control ran and every program wrote its
expected values, 1 when it wrote others, 2 without an sm_90 GPU.
"""

from __future__ import annotations

import sys


def control_kernel():
    """The Gluon kernel (built on first use: importing this module needs no Triton)."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def _default_partition(out, t_begin, t_end):
        gl.store(out + 2 * gl.program_id(0), t_begin + t_end)

    @gluon.jit
    def _worker_partition(out, t_begin, t_end):
        gl.store(out + 2 * gl.program_id(0) + 1, t_begin * t_end)

    @gluon.jit
    def ws_sanitizer_control(out, bounds, num_warps: gl.constexpr):
        t_begin = gl.load(bounds + gl.program_id(0))
        t_end = gl.load(bounds + gl.program_id(0) + 1)
        gl.warp_specialize([(_default_partition, (out, t_begin, t_end)),
                            (_worker_partition, (out, t_begin, t_end))], [1], [24])

    return ws_sanitizer_control


def main() -> int:
    import torch

    from ._host import NUM_WARPS

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("the gluon_jfa sanitizer control needs an sm_90 GPU", file=sys.stderr)
        return 2
    programs = torch.cuda.get_device_properties(0).multi_processor_count  # one persistent wave, as gluon_jfa
    bounds = torch.arange(programs + 1, dtype=torch.int32, device="cuda")  # program p: t_begin p, t_end p + 1
    out = torch.full((2 * programs,), -1, dtype=torch.int32, device="cuda")
    control_kernel()[(programs,)](out, bounds, num_warps=NUM_WARPS)
    torch.cuda.synchronize()
    p = torch.arange(programs, dtype=torch.int32)
    expected = torch.stack([2 * p + 1, p * (p + 1)], dim=1).flatten()
    ok = torch.equal(out.cpu(), expected)
    print(f"gluon_jfa sanitizer control ran on {programs} programs: {'as expected' if ok else 'WRONG VALUES'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
