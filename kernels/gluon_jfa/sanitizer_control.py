"""The racecheck control of ``gluon_jfa``: Triton 3.6's warp-specialization scaffold and one mbarrier hand-off.

``python -m jfa_verify.kernels.gluon_jfa.sanitizer_control`` launches, on an sm_90 GPU, one persistent
wave of a kernel shaped like gluon_jfa's three kernels at their ``gl.warp_specialize`` call (a default
partition of ``NUM_WARPS`` warps, one worker warp with 24 registers, two scalars loaded from global
memory and captured by both partitions) whose only synchronization of its own is the smallest
pipeline's: one mbarrier, initialised before the region, arrived on by the worker after its store and
waited on by the default partition. It is race-free by construction: the partitions write disjoint
global words and share no shared memory but the mbarrier.

The gate (``jfa_verify.workflows.gate``, :mod:`jfa_verify.checks.sanitizer`) runs it under racecheck before gluon_jfa.
On the H200 (2026-12-01) racecheck reported hazards on it between the ``def`` line and the
``warp_specialize`` call, the same sites as all of gluon_jfa's reports, and none on the scaffold without
the mbarrier (``docs/evidence/gluon-racecheck-2026-12-01/``). Exit status 0 when the control ran and
every program wrote its expected values, 1 when it wrote others, 2 without an sm_90 GPU.
"""

from __future__ import annotations

import sys


def control_kernel():
    """The Gluon kernel (built on first use: importing this module needs no Triton)."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier

    @gluon.jit
    def _default_partition(out, t_begin, t_end, done):
        mbarrier.wait(done, 0)
        gl.store(out + 2 * gl.program_id(0), t_begin + t_end)

    @gluon.jit
    def _worker_partition(out, t_begin, t_end, done):
        gl.store(out + 2 * gl.program_id(0) + 1, t_begin * t_end)
        mbarrier.arrive(done, count=1)

    @gluon.jit
    def ws_sanitizer_control(out, bounds, num_warps: gl.constexpr):
        done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(done, count=1)
        t_begin = gl.load(bounds + gl.program_id(0))
        t_end = gl.load(bounds + gl.program_id(0) + 1)
        gl.warp_specialize([(_default_partition, (out, t_begin, t_end, done)),
                            (_worker_partition, (out, t_begin, t_end, done))], [1], [24])

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
