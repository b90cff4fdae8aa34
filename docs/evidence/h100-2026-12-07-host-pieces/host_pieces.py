"""Evidence script (docs/evidence/h100-2026-12-07-host-pieces): where a gluon_jfa / triton_jfa forward call's host time goes, piece by piece, on CUDA. Run from benchmarks/ (it imports bench_e2e, bench_gluon, bench_schedules)."""
import cProfile, io, pstats, statistics, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch
from bench_e2e import call_hints
from bench_gluon import bench_batches
from bench_schedules import bench_inputs
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.core.contract import validate_call, check_offsets_dense
from jfa_verify.scheduling import device_plan

def per_call(fn, n=40, rounds=5):
    meds = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        meds.append((time.perf_counter() - t0) * 1e6 / n)
        torch.cuda.synchronize()
    return min(meds)

def idle_call(fn, n=15):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize(); t0 = time.perf_counter(); fn(); ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(ts)

dev = torch.device("cuda")
x = torch.zeros(16, device=dev)
print(f"torch.add tiny: {per_call(lambda: x.add(1)):.1f} us/op")
from jfa_verify.scheduling import plan_kernels as pk
print("torch.cumsum tiny:", f"{per_call(lambda: torch.cumsum(x, 0)):.1f} us")
print("torch.sort 2k stable:", f"{per_call(lambda: torch.sort(torch.arange(2000, device=dev), descending=True, stable=True)):.1f} us")
print("torch.empty:", f"{per_call(lambda: torch.empty(100, device=dev)):.1f} us")
for name, causal in (("uniform-32", True), ("movielens-1024", True), ("movielens-1024", False)):
    lengths = bench_batches()[name]
    off, q, k, v = bench_inputs(lengths, 8, 128, dev)
    q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    off = off.to(torch.int32)
    for kname in ("gluon_jfa", "triton_jfa"):
        fn = get_kernel(kname)
        hints = call_hints(fn, max(lengths))
        call = lambda: fn(q, k, v, off, off, causal=causal, **hints)
        for _ in range(3): call()
        print(f"\n== {kname} {name} causal={causal}: public call {per_call(call):.0f} us/call back-to-back, "
              f"{idle_call(call):.0f} us idle-device")
        if kname == "gluon_jfa":
            impl = fn.impl
            shape = validate_call(q, k, v, off, off, causal=causal, **hints)
            print(f"  validate_call {per_call(lambda: validate_call(q, k, v, off, off, causal=causal, **hints)):.1f} us")
            print(f"  check_offsets_dense x2 + check_launchable {per_call(lambda: (check_offsets_dense('q', off), check_offsets_dense('k', off), impl.host.check_launchable(shape, q, k, v))):.1f} us")
            tiles = impl.tiles(shape)
            mk = lambda: device_plan.DeviceLaunchPlan(shape, off, off, impl.scheduler, tiles.block_m, tiles.block_n)
            print(f"  DeviceLaunchPlan init {per_call(mk):.1f} us")
            print(f"  init + arrays(fwd) {per_call(lambda: mk().arrays('fwd')):.1f} us")
            p = mk()
            print(f"  impl.plan() {per_call(lambda: impl.plan(shape, off, off)):.1f} us")
            launch, q_off, k_off, plans, _ = impl._planned_launch(shape, None, q, k, v, off, off)
            fwd_plan = plans("fwd")
            H = impl.host
            print(f"  _planned_launch {per_call(lambda: impl._planned_launch(shape, None, q, k, v, off, off)):.1f} us")
            print(f"  _alloc_outputs {per_call(lambda: H._alloc_outputs(launch, dev, False, q_off)):.1f} us")
            bm, bn = H.tile_sizes(128, q.dtype)
            q2 = q.view(q.shape[0], 8 * 128)
            print(f"  _descriptor x1 {per_call(lambda: H._descriptor(q2, [bm, 128])):.1f} us")
            print(f"  _schedule {per_call(lambda: H._schedule(fwd_plan, dev, 8)):.1f} us")
            o, lse, run = H._plan_forward(impl.kernels, launch, q, k, v, q_off, k_off, fwd_plan)
            print(f"  _plan_forward (alloc+descriptors, no launch) {per_call(lambda: H._plan_forward(impl.kernels, launch, q, k, v, q_off, k_off, fwd_plan)):.1f} us")
            print(f"  fwd kernel launch only {per_call(run, n=10):.1f} us (device-bound if kernel is long)")
            print(f"  H.attention (autograd + forward) {per_call(lambda: H.attention(impl.kernels, launch, q, k, v, q_off, k_off, plans)):.1f} us")
        prof = cProfile.Profile(); prof.enable()
        for _ in range(40): call()
        prof.disable(); torch.cuda.synchronize()
        s = io.StringIO(); pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22); print(s.getvalue()[-5000:])
