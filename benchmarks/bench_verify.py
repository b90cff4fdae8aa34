"""Verified cases per minute, for one worker and for N workers, with where a case's time goes.

Each worker is a process that draws cases from the campaign's default strategy
(:func:`jfa_verify.strategies.cases` for the kernel and device) with Hypothesis and
verifies each through :class:`jfa_verify.run.loop.Verifier` (write-ahead case file,
kernel, float64 and SDPA oracles, comparison) for ``--seconds`` after ``--warmup``
seconds that are not counted (compilation on a GPU). The breakdown splits a case's
wall time into stages: draw (Hypothesis), materialize, validate (contract and host planning),
kernel (forward and backward, synchronized), reference (the float64 reference), sdpa (the
same-dtype SDPA oracle), compare (the launch's outputs judged and localized), parts (a packed
launch's parts judged apart), invariants (scheduler checks), io (case file), ipc (``--isolate``:
the round trip to the case worker) and other (the rest of the measured wall time). Each row
prints them in milliseconds per verified case and as shares of the total, and keeps them in
its JSON (``stages``); ``breakdown_share`` keeps the coarser parts it always had (oracles:
reference + sdpa; compare: compare + parts).

    python benchmarks/bench_verify.py --device cpu --workers 1,2 --seconds 20
    python benchmarks/bench_verify.py --device cuda --workers 1,4,8,16 --seconds 25 --warmup 10 --movielens
    python benchmarks/bench_verify.py --device cuda --workers 16 --pack 1,8 --seconds 25 --warmup 10

``--pack N`` draws packs of up to N cases (:func:`jfa_verify.strategies.packs`), each run as one launch and
judged per part (:mod:`jfa_verify.judge.packing`); every part counts as a verified case. Several pack sizes give one
row each per worker count, and the ratio of each to the unpacked row (what packing buys) is printed.

Writes ``bench_verify.json`` under ``--out`` (default ``$OUT`` or ``gpu-out``). Exit 0, or 1 when a
worker died or no case was verified.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

# The stages a case's wall time is split into (the runner's ``CaseResult.seconds`` keys, and draw); "other" is the
# rest of the measured wall time (the loop's own bookkeeping).
STAGES = ("draw", "materialize", "validate", "kernel", "reference", "sdpa", "compare", "parts", "invariants", "io",
          "ipc")
# The coarser parts of ``breakdown_share`` (its keys before the stages were split), each a sum of stages.
PARTS = {"draw": ("draw",), "materialize": ("materialize",), "validate": ("validate",), "kernel": ("kernel",),
         "oracles": ("reference", "sdpa"), "compare": ("compare", "parts"), "invariants": ("invariants",),
         "io": ("io",), "ipc": ("ipc",)}


def _compile_counter():
    """``{"variants": n, "seconds": s}``, kept up to date by Triton's JIT hooks: each kernel variant this process
    builds (compiled, or loaded from the on-disk cache) and the seconds that took. None where Triton has no hooks
    (the hooks are ``triton.knobs.runtime.jit_cache_hook``, called before a build, and ``jit_post_compile_hook``,
    after it; Triton 3.6)."""
    try:
        from triton import knobs
    except ImportError:
        return None
    counts, started = {"variants": 0, "seconds": 0.0}, []

    def before(**_):
        started.append(time.perf_counter())
        return False  # False: go on and build it

    def after(**_):
        if started:
            counts["seconds"] += time.perf_counter() - started.pop()
        counts["variants"] += 1
        return False

    knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook = before, after
    return counts


class _Done(BaseException):
    """Ends the Hypothesis loop at the deadline (a BaseException: Hypothesis lets it through)."""


def _worker(args: dict, worker: int, results) -> None:
    from jfa_verify.run.interrupts import exit_with_parent

    exit_with_parent()  # a benchmark killed mid-row must not leave its workers running (new-user trial)
    if args.get("gpu") is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = args["gpu"]
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    from jfa_verify.core.device import select_device
    from jfa_verify.judge.packing import part_statuses
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.loop import Verifier
    from jfa_verify.run.settings import RunSettings
    from jfa_verify.strategies import cases, packs

    device = select_device(args["device"])
    kernel = get_kernel(args["kernel"])
    spent, statuses = Counter(), Counter()
    # (the interpreter builds nothing; an --isolate case worker builds in its own process)
    compiles = _compile_counter() if device.type == "cuda" and not args["isolate"] else None
    state = {"n": 0, "launches": 0, "last": None, "start": time.perf_counter() + args["warmup"], "end": None}
    state["end"] = state["start"] + args["seconds"]
    with tempfile.TemporaryDirectory() as folder, \
            Verifier(kernel, device, folder, RunSettings(backward=not args["forward_only"], isolate=args["isolate"],
                                                         timeout_s=args["timeout"])) as verifier:
        def probe(case):
            now = time.perf_counter()
            if now >= state["end"]:
                raise _Done()
            counted = now >= state["start"]
            draw = now - state["last"] if state["last"] is not None else 0.0
            before = dict(compiles) if compiles is not None else None
            result = verifier.verify(case)
            state["last"] = time.perf_counter()
            if counted:
                state["n"] += len(case.split())
                state["launches"] += 1
                statuses.update(part_statuses(result))
                spent["draw"] += draw
                for stage in STAGES[1:]:
                    spent[stage] += result.seconds.get(stage, 0.0)
                if before is not None:  # inside the kernel part: Triton builds a variant at its first launch
                    spent["compile"] += compiles["seconds"] - before["seconds"]
                    spent["variants"] += compiles["variants"] - before["variants"]
                spent["total"] += state["last"] - now + draw

        strategy = (cases(kernel, device_type=device.type) if args["pack"] == 1 else
                    packs(kernel, device_type=device.type, size=args["pack"]))
        test = settings(database=None, deadline=None, max_examples=10**9, phases=[Phase.generate],
                        suppress_health_check=list(HealthCheck))(
            hypothesis_seed(args["seed"] + worker)(given(case=strategy)(probe)))
        try:
            test()
        except _Done:
            pass
        movielens = None
        if args["movielens"] and worker == 0:
            from jfa_verify.cases.case import Case
            from jfa_verify.core.lengths import sample_movielens_batch

            case = Case(kv_lengths=sample_movielens_batch(256, 0), num_heads_q=8, num_heads_kv=8, head_dim=128,
                        dtype="bfloat16", name="movielens-256")
            verifier.verify(case)  # compile
            t = time.perf_counter()
            r = verifier.verify(case)
            movielens = {"seconds": time.perf_counter() - t, "status": r.status, "tokens": sum(case.kv_lengths),
                         "breakdown": {k: round(v, 4) for k, v in r.seconds.items()}}
    results.put({"worker": worker, "cases": state["n"], "launches": state["launches"], "statuses": dict(statuses),
                 "spent": dict(spent), "movielens": movielens, "compiles": compiles is not None})


def run(workers: int, args: argparse.Namespace, pack: int = 1) -> dict:
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    gpus = [g for g in (args.gpus or "").split(",") if g]
    common = dict(device=args.device, kernel=args.kernel, seconds=args.seconds, warmup=args.warmup, seed=args.seed,
                  forward_only=args.forward_only, isolate=args.isolate, timeout=args.timeout,
                  movielens=args.movielens, pack=pack)
    procs = [ctx.Process(target=_worker, args=({**common, "gpu": gpus[w % len(gpus)] if gpus else None}, w, results))
             for w in range(workers)]
    for p in procs:
        p.start()
    got = []
    deadline = time.time() + args.warmup + args.seconds + 300
    while len(got) < workers and time.time() < deadline:
        try:
            got.append(results.get(timeout=1))
        except Exception:
            if not any(p.is_alive() for p in procs) and results.empty():
                break
    for p in procs:
        p.join(30)
        if p.is_alive():
            p.kill()
    cases = sum(g["cases"] for g in got)
    spent = Counter()
    for g in got:
        spent.update(g["spent"])
    total = spent.pop("total", 0.0) or 1e-9
    compiled = any(g["compiles"] for g in got)
    named = sum(spent.get(k, 0.0) for k in STAGES)
    seconds = {**{k: spent.get(k, 0.0) for k in STAGES}, "other": max(0.0, total - named)}
    return {
        "workers": workers, "pack": pack, "finished_workers": len(got), "cases": cases,
        "launches": sum(g["launches"] for g in got),
        "cases_per_minute": round(60 * cases / args.seconds, 1),
        "per_worker_cases_per_minute": round(60 * cases / args.seconds / max(1, workers), 1),
        "statuses": dict(sum((Counter(g["statuses"]) for g in got), Counter())),
        "breakdown_share": {k: round(sum(spent.get(s, 0.0) for s in of) / total, 3) for k, of in PARTS.items()},
        # each stage in milliseconds per verified case and as a share of the measured total (they sum to it)
        "stages": {k: {"ms_per_case": round(1000 * s / max(1, cases), 3), "share": round(s / total, 4)}
                   for k, s in seconds.items()},
        # of the kernel part: building variants (None: not counted, see _compile_counter)
        "compile_share": round(spent.get("compile", 0.0) / total, 3) if compiled else None,
        "variants_built": int(spent.get("variants", 0)) if compiled else None,
        "mean_case_ms": round(1000 * total / max(1, cases), 1),
        "movielens": next((g["movielens"] for g in got if g["movielens"]), None),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--kernel", default="triton_jfa")
    p.add_argument("--workers", default="1", help="comma-separated worker counts, e.g. 1,4,8,16")
    p.add_argument("--seconds", type=float, default=20.0, help="counted seconds per worker count")
    p.add_argument("--warmup", type=float, default=0.0, help="uncounted seconds first (compilation)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gpus", default=None, help="GPUs to pin workers to, round-robin (default: none pinned)")
    p.add_argument("--forward-only", action="store_true")
    p.add_argument("--isolate", action="store_true", help="cases in a case-worker process, as fuzz runs them")
    p.add_argument("--timeout", type=float, default=None)
    p.add_argument("--pack", default="1", help="comma-separated pack sizes, e.g. 1,8 (1: every case alone)")
    p.add_argument("--movielens", action="store_true",
                   help="also time one 256-sequence MovieLens batch (H=8, D=128, bf16)")
    p.add_argument("--out", default=os.environ.get("OUT", "gpu-out"),
                   help="folder that bench_verify.json is written into (default: $OUT, else gpu-out)")
    args = p.parse_args(argv)
    try:
        counts = [int(w) for w in args.workers.split(",") if w.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        p.error(f"--workers {args.workers!r}: give worker counts of at least 1, comma-separated, e.g. 1,4,8")
    try:
        pack_sizes = [int(n) for n in args.pack.split(",") if n.strip()]
    except ValueError:
        pack_sizes = []
    if not pack_sizes or min(pack_sizes) < 1:
        p.error(f"--pack {args.pack!r}: give pack sizes of at least 1, comma-separated, e.g. 1,8")
    if not (math.isfinite(args.seconds) and math.isfinite(args.warmup)) or args.seconds <= 0 or args.warmup < 0:
        p.error(f"--seconds {args.seconds:g} / --warmup {args.warmup:g}: the counted seconds must be > 0 and the "
                f"warm-up >= 0, both finite")
    rows, out = [], Path(args.out)
    for n, pack in [(n, pack) for n in counts for pack in pack_sizes]:
        packed = f", packs of up to {pack}" if pack > 1 else ""
        print(f"bench_verify: {n} worker(s){packed}, {args.warmup:g} s warm-up + {args.seconds:g} s "
              f"on {args.device} ...", flush=True)
        row = run(n, args, pack)
        rows.append(row)
        share = ", ".join(f"{k} {100 * v:.0f}%" for k, v in row["breakdown_share"].items() if v >= 0.005)
        built = ("" if row["compile_share"] is None else
                 f"; {row['variants_built']} kernel variant(s) built while counted, {100 * row['compile_share']:.0f}%"
                 f" of the time")
        launches = f" in {row['launches']} launches" if pack > 1 else ""
        print(f"  {n:3d} worker(s){packed}: {row['cases']} cases{launches}, {row['cases_per_minute']:.0f} cases/min "
              f"({row['per_worker_cases_per_minute']:.0f} per worker), mean case {row['mean_case_ms']:.0f} ms; "
              f"statuses {row['statuses']}; time: {share}{built}", flush=True)
        alone = next((r for r in rows if r["workers"] == n and r["pack"] == 1), None)
        if pack > 1 and alone and alone["cases_per_minute"]:
            print(f"  packing buys {row['cases_per_minute'] / alone['cases_per_minute']:.2f}x over one case a launch "
                  f"({n} worker(s))", flush=True)
        print("  stages, ms per case (share): " + ", ".join(
            f"{k} {v['ms_per_case']:.1f} ({100 * v['share']:.0f}%)" for k, v in row["stages"].items()
            if v["share"] >= 0.0005 or k in ("reference", "sdpa", "compare")), flush=True)
        if row["movielens"]:
            parts = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in row["movielens"]["breakdown"].items() if v >= 0.0005)
            print(f"  MovieLens 256-sequence batch: {row['movielens']['seconds']:.2f} s "
                  f"({row['movielens']['status']}; {parts})", flush=True)
        # after every row: a run cut by a time limit keeps the rows it finished
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_verify.json").write_text(json.dumps({"device": args.device, "kernel": args.kernel,
                                                           "seconds": args.seconds, "warmup": args.warmup,
                                                           "rows": rows}, indent=2))
    print(f"wrote {out / 'bench_verify.json'}", flush=True)
    bad = any(r["finished_workers"] < r["workers"] or r["cases"] == 0 for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
