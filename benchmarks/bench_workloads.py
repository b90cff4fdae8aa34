"""What the framework's tile cost model costs the host: ``workloads_forward`` and ``workloads_backward`` on the
batches of ``bench_gluon.py`` (BLOCK 128), milliseconds of Python, best of ``--repeats``, on this machine's CPU.

Every backward plan pays ``workloads_backward`` (gluon_jfa's registered backward, triton_jfa's autograd path).
No GPU and no peer: this times host Python only; run it from another checkout's ``PYTHONPATH`` to compare commits.

    python benchmarks/bench_workloads.py [--repeats 5]

Exit 0, or 2 for a bad argument.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="timed calls per row; the best is printed (default 5)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats {args.repeats}: give at least 1")
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_gluon import bench_batches

    from jfa_verify.scheduling.schedules import workloads_backward, workloads_forward

    def best(fn) -> float:
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return 1e3 * min(times)

    print(f"{'batch':24s} {'causal':6s} {'tiles':>6s} {'forward ms':>11s} {'backward ms':>12s}")
    for name, lengths in bench_batches().items():
        for causal in (False, True):
            tiles = len(workloads_backward(lengths, lengths, 128, causal=causal))
            fwd = best(lambda: workloads_forward(lengths, lengths, 128, causal=causal))
            bwd = best(lambda: workloads_backward(lengths, lengths, 128, causal=causal))
            print(f"{name[:24]:24s} {'yes' if causal else 'no':6s} {tiles:6d} {fwd:11.1f} {bwd:12.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
