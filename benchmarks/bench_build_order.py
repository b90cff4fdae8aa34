"""How long a pool of build processes takes over the default GPU suite's ``triton_jfa`` variants, in trace order and
longest first (issue 39: the precompile step's build order, ``jfa_verify.run.precompile.longest_first``).

Each variant the default suite launches on an sm_90 GPU (traced on the CPU: ``bench_variants.gpu_variants``) is
built for sm_90a on this machine, with a target-only driver and Triton's own compiler and ``ptxas`` (no GPU), in
``--jobs`` processes, each build timed. The pool's wall time for ``--workers`` processes is then computed for both
orders from those times (greedy list scheduling, as ``ProcessPoolExecutor`` hands out work), beside its lower bound
(the longest build, or the sum over the processes). Usage::

    env -u TRITON_INTERPRET python benchmarks/bench_build_order.py [--jobs 2] [--workers 12,16] [--json OUT]

About 6-7 minutes with 2 processes on this project's CPU (766 s of builds). Builds go to a temporary Triton cache.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _init() -> None:
    from triton.runtime.driver import driver

    from jfa_verify.core.device import choose_for_compiling
    from jfa_verify.core.target_driver import TargetOnlyDriver
    from jfa_verify.protocol.registry import get_kernel

    choose_for_compiling("cpu")
    driver.set_active(TargetOnlyDriver(90))
    get_kernel("triton_jfa").impl  # noqa: B018 - its Triton functions imported before the first build


def _build(variant) -> float:
    from jfa_verify.run.precompile import compile_variant

    return compile_variant(variant)


def pool_seconds(durations: list[float], workers: int) -> float:
    """Wall time of ``workers`` processes each taking the next duration when free (the order given)."""
    free = [0.0] * workers
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="processes building here")
    parser.add_argument("--workers", default="12,16", help="pool sizes to compute the wall time for")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET"):
        print("unset TRITON_INTERPRET: the interpreter builds nothing", file=sys.stderr)
        return 2
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="jfa-build-order-")
    from bench_variants import gpu_variants, suite_cases

    from jfa_verify.core.device import choose_for_compiling
    from jfa_verify.run.precompile import _shape, longest_first

    choose_for_compiling("cpu")
    variants, untraced = gpu_variants(suite_cases(0))
    print(f"{len(variants)} variants of the default suite (sm_90 tiles; {len(untraced)} cases not traced); building "
          f"each for sm_90a in {args.jobs} process(es) ...", flush=True)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs, initializer=_init) as pool:
        seconds = list(pool.map(_build, variants))
    mean = sum(seconds) / len(seconds)
    print(f"built in {time.perf_counter() - t0:.0f} s: {sum(seconds):.0f} s of builds, mean {mean:.2f} s, longest "
          f"{max(seconds):.1f} s")
    by_name: dict = {}
    for v, s in zip(variants, seconds):
        by_name.setdefault(v.name, []).append(s)
    for name, times in by_name.items():
        print(f"  {name:24s} {len(times):4d} variants, {sum(times):6.0f} s, longest {max(times):5.1f} s")
    took = {_shape(v): s for v, s in zip(variants, seconds)}
    longest = [took[_shape(v)] for v in longest_first(variants, took)]
    rows = []
    for workers in (int(w) for w in args.workers.split(",")):
        row = {"workers": workers, "trace_order_s": pool_seconds(seconds, workers),
               "longest_first_s": pool_seconds(longest, workers),
               "lower_bound_s": max(max(seconds), sum(seconds) / workers)}
        rows.append(row)
        print(f"  {workers:3d} processes: trace order {row['trace_order_s']:.1f} s, longest first "
              f"{row['longest_first_s']:.1f} s (lower bound {row['lower_bound_s']:.1f} s)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"variants": len(variants), "seconds": seconds, "names": [v.name for v in variants],
                       "pools": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
