"""A/B timing of the judging path: the float64 reference, the padded SDPA oracle and the packed judge of commit
``--base`` against the working tree's, on the same drawn cases in one process, alternating per case, the best of
``--repeats`` (a shared machine drifts; alternating and taking minima cancels most of it).

    python docs/evidence/cpu-2026-12-04-judge/ab_judge.py --base 7c41319 --cases 300 --pack 1 --threads 1

Prints milliseconds per verified case (a pack's parts each count) per stage, old -> new. Hypothesis draws the cases
from ``triton_jfa``'s CPU strategy with seed 0 (``--pack N``: packs of up to N cases, as ``bench_verify.py``).
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _old_modules(base: str, folder: Path):
    """The oracles package and the packed judge as they were at ``base``, importable as ``old_oracles`` and
    ``old_packing``."""
    pkg = folder / "old_oracles"
    pkg.mkdir()
    for name in ("__init__.py", "_common.py", "float64.py", "padded_sdpa.py", "blockwise.py"):
        (pkg / name).write_text(subprocess.run(["git", "show", f"{base}:oracles/{name}"], cwd=ROOT, check=True,
                                               capture_output=True, text=True).stdout)
    (folder / "old_packing.py").write_text(subprocess.run(
        ["git", "show", f"{base}:jfa_verify/judge/packing.py"], cwd=ROOT, check=True, capture_output=True,
        text=True).stdout)
    sys.path.insert(0, str(folder))
    import old_oracles
    import old_packing
    return old_oracles, old_packing


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="the commit whose judging is 'old'")
    p.add_argument("--cases", type=int, default=300, help="launches drawn")
    p.add_argument("--pack", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    args = p.parse_args()
    import torch
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from jfa_verify.judge.packing import judge_parts
    from jfa_verify.oracles import padded_sdpa_attention, reference_attention
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.strategies import cases, packs

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        old_oracles, old_packing = _old_modules(args.base, Path(folder))
        kernel = get_kernel("triton_jfa")
        strategy = cases(kernel, device_type="cpu") if args.pack == 1 else packs(kernel, device_type="cpu",
                                                                                 size=args.pack)
        drawn = []

        @hypothesis_seed(0)
        @settings(database=None, deadline=None, max_examples=args.cases, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(case=strategy)
        def collect(case):
            drawn.append(case)

        collect()
        impl = {"old": (old_oracles.reference_attention, old_oracles.padded_sdpa_attention, old_packing.judge_parts),
                "new": (reference_attention, padded_sdpa_attention, judge_parts)}
        spent = {(stage, which): 0.0 for stage in ("reference", "sdpa", "parts") for which in impl}

        def best(fn) -> float:
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            return min(times)

        verified = 0
        for i, case in enumerate(drawn[:args.cases]):
            t = case.materialize("cpu")
            problem = case.problem(t)
            verified += len(case.split())
            packed = case.parts is not None
            for which in ("old", "new") if i % 2 else ("new", "old"):
                ref_f, sdpa_f, parts_f = impl[which]
                spent["reference", which] += best(lambda: ref_f(problem, t.q, t.k, t.v, do=t.do, by_sequence=packed))
                spent["sdpa", which] += best(lambda: sdpa_f(problem, t.q, t.k, t.v, do=t.do))
                if packed:
                    ref = reference_attention(problem, t.q, t.k, t.v, do=t.do, by_sequence=True)
                    sdpa = padded_sdpa_attention(problem, t.q, t.k, t.v, do=t.do)
                    got = {k: sdpa[k] for k in ("o", "lse", "dq", "dk", "dv")}
                    spent["parts", which] += best(lambda: parts_f(case, got, ref, sdpa))
    launches = min(len(drawn), args.cases)
    print(f"{launches} launches, {verified} cases (packs of up to {args.pack}), best of {args.repeats}, "
          f"{torch.get_num_threads()} torch thread(s); ms per case, old -> new:")
    for stage in ("reference", "sdpa", "parts", "judging"):
        old = sum(v for (s, w), v in spent.items() if w == "old" and stage in (s, "judging"))
        new = sum(v for (s, w), v in spent.items() if w == "new" and stage in (s, "judging"))
        if old:
            print(f"  {stage:9s} {1000 * old / verified:8.2f} -> {1000 * new / verified:8.2f}  ({old / new:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
