"""Where a case worker's time goes: the default suite's cases run one after another in this fresh process, as a case
worker runs them (the worker's warm-up first), each under cProfile.

    python benchmarks/profile_case.py --device cuda --kernel triton_jfa --cases pairs/00,movielens-a --top 20

Prints, for each case, the stage seconds a run report holds (materialize, kernel, reference, sdpa, ...) and the
host functions with the most cumulative time. The first case of a worker costing seconds more than the rest (an H100
run: 2.5-4 s in the kernel call, ``docs/evidence/h100-2026-12-06-b``) shows here as that case's profile. ``--cases``:
substrings of case names, in the order run (each picks the first case matching it). Exit 0.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--kernel", default="triton_jfa")
    p.add_argument("--cases", default="pairs/00,pairs/02,movielens-a/self/bfloat16,movielens-a/self/bfloat16,"
                                      "layout-128-4096-512-2048/self/float32")
    p.add_argument("--top", type=int, default=18)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    import torch

    from jfa_verify.checks.suites import get_suite
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run import isolation
    from jfa_verify.run.runner import run_case

    print(f"imports {time.perf_counter() - t0:.2f} s")
    device = torch.device(args.device)
    kernel = get_kernel(args.kernel)
    t0 = time.perf_counter()
    cases = get_suite("default", device.type, 0, kernel=kernel).cases
    print(f"suite {len(cases)} cases in {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    isolation._warm_up(kernel, device)
    print(f"warm-up {time.perf_counter() - t0:.2f} s")
    for want in args.cases.split(","):
        case = next((c for c in cases if want in c.name), None)
        if case is None:
            print(f"== no case matches {want!r}")
            continue
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        result = run_case(case, kernel, device)
        prof.disable()
        wall = time.perf_counter() - t0
        stages = {k: round(v, 3) for k, v in (result.seconds or {}).items() if v >= 0.005}
        print(f"== {case.name}: {result.status}, {wall:.2f} s; {stages}")
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(args.top)
        print("\n".join(line for line in text.getvalue().splitlines()[6:] if line.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
