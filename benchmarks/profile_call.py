"""Where one public call of a kernel spends its time, on a CUDA device: host Python (cProfile, cumulative) and
device kernels (torch profiler, per kernel name), for one batch of ``bench_gluon.bench_batches()``.

    python benchmarks/profile_call.py --kernel gluon_jfa --batch movielens-1024 --causal --calls 50

Prints the host time per call (``perf_counter`` around the call, no synchronization: what the host pays before
the GPU can start), the top host functions, and the device kernels of one call. Exit 0, or 2 without CUDA.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", default="gluon_jfa")
    p.add_argument("--batch", default="movielens-1024")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--backward", action="store_true", help="profile forward + backward")
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("profile_call.py needs a CUDA device", file=sys.stderr)
        return 2
    from bench_e2e import call_hints
    from bench_gluon import bench_batches
    from bench_schedules import bench_inputs

    from jfa_verify.protocol.registry import get_kernel

    lengths = bench_batches()[args.batch]
    offsets, q, k, v = bench_inputs(lengths, 8, 128, torch.device("cuda"))
    q, k, v = (t.to(torch.bfloat16).requires_grad_(args.backward) for t in (q, k, v))
    fn = get_kernel(args.kernel)
    hints = call_hints(fn, max(lengths))  # (a peer's adapter takes no max_seqlen)
    do = torch.randn(q.shape, dtype=q.dtype, device=q.device)

    def call():
        o = fn(q, k, v, offsets, offsets, causal=args.causal, **hints)[0]
        if args.backward:
            torch.autograd.grad(o, (q, k, v), do)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    host = []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        call()
        host.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
    print(f"{args.kernel} {args.batch} causal={args.causal} backward={args.backward}: "
          f"host {statistics.median(host):.3f} ms a call (median of {args.calls}, no synchronization inside)")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        call()
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(args.top)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as tprof:
        call()
        torch.cuda.synchronize()
    print(tprof.key_averages().table(sort_by="cuda_time_total", row_limit=25))
    return 0


if __name__ == "__main__":
    sys.exit(main())
