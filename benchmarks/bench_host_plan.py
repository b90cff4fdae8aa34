"""What ``triton_jfa``'s host plan costs a verified case: is caching plans keyed by offsets worth it (issue 19)?

Draws cases from the campaign's default strategy for ``triton_jfa`` on the device, validates each once, then times
``plan_launch`` (the framework's workloads for the forward, dQ and dK/dV passes dealt by the persistent
scheduler, flattened into the launch arrays and copied to the device), with a device synchronization after each.
It also times one materialize-and-validate per case for scale. Prints the median and mean milliseconds per
case and, with ``--case-ms`` (a mean verified case from ``bench_verify.py`` on the same device), the plan's share
of a case: what a cache of plans keyed by offsets could save at most (a hit still copies nothing new, but only a
case whose lengths, mask and tiles repeat hits).

    python benchmarks/bench_host_plan.py --device cpu --cases 200
    python benchmarks/bench_host_plan.py --device cuda --cases 300 --case-ms 186

Exit 0, or 2 for a bad argument.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--cases", type=int, default=200, help="cases drawn (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--case-ms", type=float, default=None,
                   help="mean milliseconds of a verified case on this device (bench_verify.py), for the share")
    args = p.parse_args(argv)
    if args.cases < 1 or (args.case_ms is not None and not args.case_ms > 0):
        p.error(f"--cases {args.cases} / --case-ms {args.case_ms}: give at least one case and a positive case time")

    import torch
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from jfa_verify.core.device import select_device
    from jfa_verify.kernels.triton_jfa._host import plan_launch
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.strategies import cases

    device = select_device(args.device)
    kernel = get_kernel("triton_jfa")
    impl = kernel.impl
    drawn = []

    @settings(database=None, deadline=None, max_examples=args.cases, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(args.seed)
    @given(case=cases(kernel, device_type=device.type))
    def draw(case):
        drawn.append(case)

    draw()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    plan_ms, made_ms = [], []
    for case in drawn:
        t0 = time.perf_counter()
        tensors = case.materialize(device)
        problem = case.problem(tensors)
        sync()
        t1 = time.perf_counter()
        if kernel.unsupported_reason(problem) is not None:
            continue
        plan_launch(problem, impl.scheduler)  # first call: imports and caches of its own
        sync()
        t2 = time.perf_counter()
        plan_launch(problem, impl.scheduler)
        sync()
        plan_ms.append(1e3 * (time.perf_counter() - t2))
        made_ms.append(1e3 * (t1 - t0))
    if not plan_ms:
        print("bench_host_plan: no drawn case is inside triton_jfa's capabilities here", file=sys.stderr)
        return 1
    mean = statistics.fmean(plan_ms)
    print(f"bench_host_plan: {len(plan_ms)} cases on {device}: host plan median {statistics.median(plan_ms):.3f} ms, "
          f"mean {mean:.3f} ms, max {max(plan_ms):.3f} ms; "
          f"materialize+validate mean {statistics.fmean(made_ms):.3f} ms")
    if args.case_ms:
        print(f"  share of a verified case ({args.case_ms:g} ms): {100 * mean / args.case_ms:.2f}% "
              f"(the most a plan cache keyed by offsets could save)")
    distinct = len({(c.query_lengths, c.kv_lengths, c.causal, c.causal_alignment, c.window, c.head_dim, c.dv, c.dtype)
                    for c in drawn})
    print(f"  distinct (lengths, mask, head dims, dtype) among the {len(drawn)} drawn: {distinct}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
