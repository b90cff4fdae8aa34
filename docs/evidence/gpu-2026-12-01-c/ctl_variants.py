"""Racecheck experiment: which addition to the bare warp_specialize scaffold makes racecheck report hazards?
V0 scaffold alone; V1 + an mbarrier initialised before the region and never used; V2 + the mbarrier handed
from the worker (arrive) to the default partition (wait). Usage: python ctl_variants.py V [--sass]"""
import sys
import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier


@gluon.jit
def _d0(out, a, b):
    gl.store(out + 2 * gl.program_id(0), a + b)


@gluon.jit
def _w0(out, a, b):
    gl.store(out + 2 * gl.program_id(0) + 1, a * b)


@gluon.jit
def v0(out, bounds, num_warps: gl.constexpr):
    a = gl.load(bounds + gl.program_id(0))
    b = gl.load(bounds + gl.program_id(0) + 1)
    gl.warp_specialize([(_d0, (out, a, b)), (_w0, (out, a, b))], [1], [24])


@gluon.jit
def v1(out, bounds, num_warps: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    a = gl.load(bounds + gl.program_id(0))
    b = gl.load(bounds + gl.program_id(0) + 1)
    gl.warp_specialize([(_d0, (out, a, b)), (_w0, (out, a, b))], [1], [24])


@gluon.jit
def _d2(out, a, b, bar):
    mbarrier.wait(bar, 0)
    gl.store(out + 2 * gl.program_id(0), a + b)


@gluon.jit
def _w2(out, a, b, bar):
    gl.store(out + 2 * gl.program_id(0) + 1, a * b)
    mbarrier.arrive(bar, count=1)


@gluon.jit
def v2(out, bounds, num_warps: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    a = gl.load(bounds + gl.program_id(0))
    b = gl.load(bounds + gl.program_id(0) + 1)
    gl.warp_specialize([(_d2, (out, a, b, bar)), (_w2, (out, a, b, bar))], [1], [24])


K = {"V0": v0, "V1": v1, "V2": v2}

if __name__ == "__main__":
    k = K[sys.argv[1]]
    if "--sass" in sys.argv:
        from triton.runtime.driver import driver
        from jfa_verify.target_driver import TargetOnlyDriver
        driver.set_active(TargetOnlyDriver(90))
        c = k.warmup(torch.zeros(8, dtype=torch.int32), torch.zeros(5, dtype=torch.int32), num_warps=8, grid=(4,))
        import re
        ptx = c.asm["ptx"]
        print(sys.argv[1], "bar:", re.findall(r"(?:barrier|bar)\.\w+[^;]*;", ptx)[:30], "mbarrier ops:", len(re.findall("mbarrier", ptx)), "shared", c.metadata.shared)
        sys.exit(0)
    n = torch.cuda.get_device_properties(0).multi_processor_count
    bounds = torch.arange(n + 1, dtype=torch.int32, device="cuda")
    out = torch.full((2 * n,), -1, dtype=torch.int32, device="cuda")
    k[(n,)](out, bounds, num_warps=8)
    torch.cuda.synchronize()
    p = torch.arange(n, dtype=torch.int32)
    ok = torch.equal(out.cpu(), torch.stack([2 * p + 1, p * (p + 1)], 1).flatten())
    print(sys.argv[1], "ran", "ok" if ok else "WRONG")
