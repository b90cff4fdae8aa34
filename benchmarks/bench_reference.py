"""Time of the float64 reference (forward and backward) padded in groups, against the same reference one sequence
at a time, and against the padded SDPA oracle (the other reference every case runs), on one device.

``oracles.float64.reference_attention`` pads sequences of similar lengths into one batch per group
(``sequence_groups``); with ``GROUP_SCORE_ELEMENTS = 1`` every sequence runs alone, unpadded, as the reference did
before (about 40 device operations per sequence). Two workloads, random normal inputs (never zeros):

* ``pareto-256``: 256 sequences of Pareto(1.2) lengths (x8, at most 256), causal, H=2, D=32 (H=8, D=128 with
  ``--device cuda``); ``--sequences N`` draws the first N of those lengths instead (named ``pareto-N``);
* ``campaign-mix``: 150 cases drawn from the CPU campaign's own strategy for ``triton_jfa`` (batches of 0 to 5);
  ``--cases N`` draws N instead.

Prints median milliseconds per call and the ratios; checks that grouped and one-at-a-time agree to 1e-12 relative
to the output's largest magnitude (exit 1 if not): float64 summed in another order differs by a few ulps of the
largest terms, and a dK accumulator of 3e4 differs by 2.5e-11. Usage:
``python benchmarks/bench_reference.py [--device cpu|cuda] [--repeats N] [--sequences N] [--cases N]``
(the smaller workloads of ``--sequences``/``--cases`` check the script and the agreement quickly, as the test
suite does; the timings in docs/campaigns.md are of the defaults).
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import time

import torch


def _timed(fn, repeats: int, sync):
    """The median milliseconds of ``repeats`` timed calls, and the warm-up call's result."""
    result = fn()  # warm-up (its result is the one compared: one pass fewer than a call of its own)
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, result


def _pareto_problem(device: str, count: int = 256):
    from jfa_verify.core.contract import validate_inputs

    rng = random.Random(0)
    torch.manual_seed(0)
    lengths = [min(256, max(1, int(rng.paretovariate(1.2) * 8))) for _ in range(count)]
    heads, dim = (8, 128) if device == "cuda" else (2, 32)
    offsets = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device=device)
    q, k, v, do = (torch.randn(sum(lengths), heads, dim, device=device) for _ in range(4))
    return [(validate_inputs(q, k, v, offsets, offsets, causal=True), q, k, v, do)]


def _campaign_problems(device: str, count: int):
    from hypothesis import HealthCheck, given, seed, settings

    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.strategies import cases

    drawn = []

    @seed(1)
    @settings(max_examples=count, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(get_kernel("triton_jfa"), device_type=device))
    def collect(case):
        drawn.append(case)

    collect()
    problems = []
    for case in drawn:
        t = case.materialize(device)
        problems.append((case.problem(t), t.q, t.k, t.v, t.do))
    return problems


def largest_difference(ours: list[dict], theirs: list[dict]) -> float:
    """The largest ``|a - b| / max(1, max |b|)`` over every output of every problem (infinities, such as the LSE of
    an empty row, count as equal where both are infinite of one sign; finite parts are compared)."""
    worst = 0.0
    for a, b in zip(ours, theirs):
        for n in a:
            if a[n].numel():
                finite = lambda t: t.nan_to_num(posinf=0, neginf=0)  # noqa: E731
                scale = max(1.0, float(finite(b[n]).abs().max()))
                worst = max(worst, float((finite(a[n]) - finite(b[n])).abs().max()) / scale)
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per workload and form (default 5)")
    ap.add_argument("--sequences", type=int, default=256,
                    help="sequences of the Pareto workload (default 256; fewer for a quick check)")
    ap.add_argument("--cases", type=int, default=150,
                    help="cases of the campaign-mix workload (default 150; fewer for a quick check)")
    args = ap.parse_args(argv)
    if args.repeats < 1:  # (a median of no timing was a traceback)
        ap.error(f"--repeats {args.repeats}: give 1 or more timed runs per workload (default 5)")
    for option, value in (("--sequences", args.sequences), ("--cases", args.cases)):
        if value < 1:
            ap.error(f"{option} {value}: give 1 or more")

    import jfa_verify.oracles.float64 as f64
    from jfa_verify.core.device import select_device
    from jfa_verify.oracles import padded_sdpa_attention

    device = select_device(args.device).type
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    grouped_size = f64.GROUP_SCORE_ELEMENTS
    status = 0
    print(f"bench_reference on {device} (median of {args.repeats}; ms per workload, forward and backward)")
    for name, problems in ((f"pareto-{args.sequences}", _pareto_problem(device, args.sequences)),
                           ("campaign-mix", _campaign_problems(device, args.cases))):
        def run_all(fn):
            return lambda: [fn(p, q, k, v, do=do) for p, q, k, v, do in problems]

        f64.GROUP_SCORE_ELEMENTS = grouped_size
        grouped, ours = _timed(run_all(f64.reference_attention), args.repeats, sync)
        f64.GROUP_SCORE_ELEMENTS = 1
        alone, theirs = _timed(run_all(f64.reference_attention), args.repeats, sync)
        f64.GROUP_SCORE_ELEMENTS = grouped_size
        sdpa, _ = _timed(run_all(padded_sdpa_attention), args.repeats, sync)
        worst = largest_difference(ours, theirs)
        ok = worst <= 1e-12
        status |= not ok
        print(f"  {name}: {len(problems)} problem(s); grouped {grouped:.1f} ms, one sequence at a time {alone:.1f} ms "
              f"(grouped {alone / grouped:.2f}x as fast), padded SDPA oracle {sdpa:.1f} ms (reference / SDPA "
              f"{grouped / sdpa:.2f}); largest relative difference {worst:.1e} {'ok' if ok else 'TOO LARGE'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
