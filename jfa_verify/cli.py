"""``jfa-verify``: the command line.

Subcommands: ``run`` (the main job: verify a kernel on the built-in suite),
``fuzz`` (a Hypothesis campaign with shrinking and a persistent corpus), ``calibrate``
(error distributions and a proposed budget table), ``mutants`` (the
planted-bug catalogue and its kill table),
``replay`` (re-run one case file or inline case), ``kernels`` (list the
registry), ``schedule`` (per-SM load of the tile schedulers).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from .errors import JFAError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _console():
    from rich.console import Console

    # Wide enough for the tables when output goes to a file or a CI log.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def _load_plugins(paths: Sequence[str]) -> None:
    from kernels import load_plugin

    for p in paths or ():
        load_plugin(p)


def _results_table(results, title: str):
    from rich.table import Table

    table = Table(title=title)
    for col in ("case", "status", "dtype", "worst output", "error / allowance", "verdict"):
        table.add_column(col)
    for r in results:
        w = r.worst
        if r.status == "error":
            err, worst = "-", "-"
        elif w is None:
            err, worst = "-", "-"
        else:
            err = "non-finite" if w.problem else f"{w.kernel_error:.2e} / {w.allowance:.2e}"
            worst = w.name
        verdict = {"pass": "[green]pass", "fail": "[red]FAIL", "error": "[red]ERROR", "unsupported": "[yellow]skip"}[r.status]
        table.add_row(r.case.name or r.case.case_id(), r.status, r.case.dtype, worst, err, verdict)
    return table


def _run_cases(cases, kernel, device, corpus, console, *, backward=True, progress=True, timeout_s=None):
    """Run cases with write-ahead reproducers; returns the results in order."""
    from rich.progress import Progress

    from .runner import run_case

    results = []
    with Progress(console=console, transient=True, disable=not progress) as bar:
        task = bar.add_task(f"verifying {kernel.name}", total=len(cases))
        for case in cases:
            bar.update(task, description=f"{kernel.name}: {case.name or case.case_id()}")
            with corpus.guard(case, kernel.name, str(device), timeout_s) as path:
                result = run_case(case, kernel, device, backward=backward)
                saved = corpus.record(path, result)
                result.reproducer = str(saved) if saved else None
            results.append(result)
            bar.advance(task)
    return results


def _write_report(path: Path, results, *, kernel: str, device, suite_note: str) -> None:
    from fuzz import environment

    summary = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "error", "unsupported")}
    payload = {
        "kernel": kernel,
        "device": str(device),
        "suite_note": suite_note,
        "environment": environment(),
        "summary": summary,
        "cases": [r.to_dict() for r in results],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str))


def cmd_run(args) -> int:
    from fuzz import Corpus
    from kernels import get_kernel

    from .device import interpreting, select_device
    from .suites import get_suite

    console = _console()
    device = select_device(args.device)
    _load_plugins(args.plugin)
    kernel = get_kernel(args.kernel)
    suite = get_suite(args.suite, device.type, args.seed, block_sizes=kernel.capabilities.block_sizes)
    cases = [c for c in suite.cases if not args.filter or args.filter in c.name]
    if args.max_cases:
        cases = cases[: args.max_cases]
    if not cases:
        console.print(f"no case of suite {args.suite!r} matches --filter {args.filter!r}")
        return EXIT_USAGE
    where = "Triton interpreter on CPU" if interpreting() else str(device)
    console.print(f"jfa-verify run: kernel [bold]{kernel.name}[/], suite {suite.name} ({len(cases)} cases), {where}")
    console.print(f"  {suite.note}")
    results = _run_cases(cases, kernel, device, Corpus(args.reproducers), console, progress=not args.no_progress,
                         timeout_s=args.timeout)
    console.print(_results_table(results, f"{kernel.name} on {where}"))
    from .coverage import Coverage

    coverage = Coverage.for_kernel(kernel, device.type).update(r.case for r in results)
    print(coverage.format(), flush=True)
    for r in results:
        if r.failed:
            print(r.explain(), flush=True)
    report = Path(args.report)
    _write_report(report, results, kernel=kernel.name, device=device, suite_note=suite.note)
    failed = sum(r.failed for r in results)
    passed = sum(r.status == "pass" for r in results)
    skipped = sum(r.status == "unsupported" for r in results)
    console.print(f"{passed} passed, {failed} failed, {skipped} unsupported; report: {report}")
    if results and skipped == len(results):
        # Nothing was checked: a gate must not read this as a pass.
        print(f"jfa-verify run: error: no case of suite {suite.name!r} is inside kernel {kernel.name!r}'s "
              f"capabilities ({results[0].message}); try jfa-verify fuzz --kernel {kernel.name}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_FAIL if failed else EXIT_OK


def cmd_fuzz(args) -> int:
    from fuzz import run_campaign
    from kernels import get_kernel

    from .device import select_device

    device = select_device(args.device)
    _load_plugins(args.plugin)
    kernel = get_kernel(args.kernel)
    summary = run_campaign(kernel, max_examples=args.max_examples, corpus_dir=args.reproducers, device=device,
                           seed=args.seed, timeout_s=args.timeout, backward=not args.forward_only)
    print(summary.format(), flush=True)
    return EXIT_FAIL if summary.failures else EXIT_OK


def _calibrate_arguments_error(args) -> Optional[str]:
    """What is wrong with ``calibrate``'s arguments (checked before any work), or None."""
    if args.cases < 1:
        return f"--cases {args.cases}: give at least 1 drawn case per dtype"
    if args.deadline is not None and args.deadline <= 0:
        return f"--deadline {args.deadline}: give a positive number of seconds (or leave it out)"
    if args.safety <= 0:
        return f"--safety {args.safety}: give a positive margin (4 adopted the packaged table)"
    if args.min_multiplier < 0 or args.min_floor_ulps < 0:
        return "--min-multiplier and --min-floor-ulps must be >= 0"
    for option, files in (("--from-records", args.from_records), ("--holdout", args.holdout)):
        for f in files:
            if not Path(f).is_file():
                return f"{option} {f}: no such file (jfa-verify calibrate --records FILE writes one)"
    if args.against and not Path(args.against).is_file():
        return f"--against {args.against}: no such budget file"
    out_dir = Path(args.out).resolve().parent
    if not args.no_fit and not out_dir.is_dir():
        return f"--out {args.out}: folder {str(out_dir)!r} does not exist"
    return None


def cmd_calibrate(args) -> int:
    from . import calibrate as cal
    from .budgets import BudgetTable, default_table

    problem = _calibrate_arguments_error(args)
    if problem:
        print(f"jfa-verify calibrate: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    current = BudgetTable.load(args.against) if args.against else default_table()
    held = cal.read_records(args.holdout) if args.holdout else []
    if args.holdout and not held:
        print(f"jfa-verify calibrate: error: --holdout {' '.join(args.holdout)}: no records to judge the table on",
              file=sys.stderr)
        return EXIT_USAGE
    errors: list[str] = []
    if args.from_records:
        records = cal.read_records(args.from_records)
        files = [Path(f).name for f in args.from_records]
    else:
        from kernels import get_kernel

        from .device import select_device

        device = select_device(args.device)
        _load_plugins(args.plugin)
        kernel = get_kernel(args.kernel)
        fixed = []
        if args.suite:
            from .suites import get_suite

            fixed = get_suite(args.suite, device.type, args.seed, block_sizes=kernel.capabilities.block_sizes).cases
        try:
            done = cal.sample(kernel, device=device, dtypes=args.dtypes, cases_per_dtype=args.cases, seed=args.seed,
                              records=Path(args.records), deadline_s=args.deadline,
                              progress_every=args.progress_every, fixed_cases=fixed)
        except KeyboardInterrupt:
            print(f"\ninterrupted: the cases measured so far are in {args.records} "
                  f"(fit them with --from-records {args.records})", file=sys.stderr)
            return 130
        errors = done["errors"]
        records, files = done["records"], [Path(args.records).name]
        print(f"sampled {done['cases']} cases in {done['seconds']:.0f} s, appended to {args.records}")
        print("wall time: " + ", ".join(f"{part} {s:.1f} s" for part, s in sorted(done["spent"].items())))
        if args.no_fit:
            for e in errors:
                print(e, flush=True)
            return EXIT_FAIL if errors else EXIT_OK
    if not records:
        print("no calibration records: nothing to fit", file=sys.stderr)
        return EXIT_FAIL
    print(f"{len(records)} records measured against budget table version {current.version}:")
    print(cal.format_stats(cal.evaluate(records, current)))
    holdout_summary = None
    prov = dict(safety=args.safety, min_multiplier=args.min_multiplier, min_floor_ulps=args.min_floor_ulps,
                measured_against=current.version, files=files)
    try:
        table = cal.fit(records, current, safety=args.safety, min_multiplier=args.min_multiplier,
                        min_floor_ulps=args.min_floor_ulps)
    except ValueError as e:
        print(f"cannot fit: {e}", file=sys.stderr)
        return EXIT_FAIL
    rc = EXIT_FAIL if errors else EXIT_OK
    verdict = None
    if held:
        stats = cal.evaluate(held, table)
        print(f"proposed table on {len(held)} held-out cases:")
        print(cal.format_stats(stats))
        holdout_summary = {"files": [Path(f).name for f in args.holdout],
                           "outputs": {f"{row}/{out}": st.summary() for (row, out), st in sorted(stats.items())}}
        false_failures = sum(st.failures for st in stats.values())
        verdict = (f"held-out check: {false_failures} false failure(s) in {len(held)} cases"
                   + (" -- the table is too tight for these cases; raise --safety or fit on more cases"
                      if false_failures else ""))
        if false_failures:
            rc = EXIT_FAIL
    table = BudgetTable(table.version, cal.provenance(records, holdout=holdout_summary, **prov), table.budgets)
    out = Path(args.out)
    out.write_text(json.dumps(table.to_dict(), indent=2) + "\n")
    print(f"proposed budget table version {table.version} written to {out}")
    if verdict:
        print(verdict)
    for e in errors:
        print(e, flush=True)
    return rc


def cmd_report(args) -> int:
    from .budgets import BudgetTable, default_table
    from .calibrate import read_records
    from .calibration_report import write_report

    if Path(args.out_dir).exists() and not Path(args.out_dir).is_dir():
        print(f"--out-dir {args.out_dir}: is a file; give a folder for the PNG files", file=sys.stderr)
        return EXIT_USAGE
    records = read_records(args.records)
    table = BudgetTable.load(args.budgets) if args.budgets else default_table()
    try:
        for row in sorted({r.row for r in records}):
            for out in sorted({o for r in records if r.row == row for o in r.outputs}):
                table.budget(row, out)  # every row and output must be judgeable before anything is drawn
        paths = write_report(records, table, args.out_dir)
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    print(f"{len(records)} records; wrote " + ", ".join(str(p) for p in paths))
    return EXIT_OK


def cmd_refloor(args) -> int:
    from .calibrate import read_records, refloor, write_records
    from .device import select_device

    out = Path(args.out)
    if out.resolve() in {Path(p).resolve() for p in args.records}:
        print(f"--out {args.out}: is one of the input files; write the refloored records elsewhere", file=sys.stderr)
        return EXIT_USAGE
    if out.is_dir():
        print(f"--out {args.out}: is a folder; give a file name (.jsonl or .jsonl.gz)", file=sys.stderr)
        return EXIT_USAGE
    device = select_device(args.device)
    fresh, changed = [], 0
    for path in args.records:
        records = read_records([path])
        try:
            new = refloor(records, device=device)
        except JFAError as e:
            raise type(e)(f"{path}: {e}") from None
        changed += sum(a.outputs != b.outputs for a, b in zip(records, new))
        fresh += new
    try:
        write_records(out, fresh)
    except OSError as e:
        print(f"--out {args.out}: cannot write there ({e.strerror or e}); give a writable file path", file=sys.stderr)
        return EXIT_USAGE
    print(f"{len(fresh)} records, floors derived again from their cases ({changed} changed); wrote {out}")
    return EXIT_OK


def cmd_replay(args) -> int:
    from fuzz import Corpus, read_case_file
    from kernels import get_kernel

    from .case import Case
    from .device import select_device

    console = _console()
    if (args.file is None) == (args.case is None):
        console.print("replay needs exactly one of FILE or --case JSON")
        return EXIT_USAGE
    if args.file:
        case, payload = read_case_file(args.file)
        kernel_name = args.kernel or payload.get("kernel", "triton_jfa")
    else:
        case, payload = Case.from_json(args.case), {}
        kernel_name = args.kernel or "triton_jfa"
    device = select_device(args.device)
    _load_plugins(args.plugin)
    kernel = get_kernel(kernel_name)
    results = _run_cases([case], kernel, device, Corpus(args.reproducers), console, progress=False)
    result = results[0]
    print(result.explain(), flush=True)
    if payload.get("status") in ("fail", "error"):
        same = payload["status"] == result.status
        console.print(f"recorded verdict: {payload['status']}; replayed: {result.status} ({'same' if same else 'DIFFERENT'})")
    return EXIT_FAIL if result.failed else EXIT_OK


def cmd_kernels(args) -> int:
    from kernels import get_kernel, kernel_names

    _load_plugins(args.plugin)
    for name in kernel_names():
        k = get_kernel(name)
        missing = k.missing_requirements()
        state = f"missing {', '.join(missing)}" if missing else "available"
        print(f"{name:32s} {state:12s} {k.description}")
    return EXIT_OK


def cmd_schedule(args) -> int:
    from .lengths import sample_movielens_batch
    from .schedule_report import compare_schedulers, plot_per_sm_load

    if args.lengths:
        lengths = tuple(int(x) for x in args.lengths.split(","))
    elif args.distribution == "movielens":
        lengths = sample_movielens_batch(args.batch, args.seed)
    else:
        import numpy as np

        rng = np.random.Generator(np.random.PCG64(args.seed))
        lengths = tuple(int(min(8192, 16 * (1 + rng.pareto(1.2)))) for _ in range(args.batch))
    rows = compare_schedulers(lengths, lengths, num_sms=args.num_sms, block_m=args.block_m, causal=args.causal)
    console = _console()
    from rich.table import Table

    table = Table(title=f"per-SM load (visible KV positions), {len(lengths)} sequences, {args.num_sms} SMs, BLOCK_M={args.block_m}")
    for col in ("scheduler", "tiles", "max load", "mean load", "imbalance (max/mean)", "list-scheduling bound", "within bound"):
        table.add_column(col)
    for r in rows:
        bound = f"{r['bound']:.0f}" if r["bounded"] else "-"
        within = ("yes" if r["within_bound"] else "NO") if r["bounded"] else "-"
        table.add_row(r["name"], str(r["num_tiles"]), f"{r['max_load']:.0f}", f"{r['mean_load']:.1f}",
                      f"{r['imbalance']:.3f}", bound, within)
    console.print(table)
    if args.png:
        plot_per_sm_load(rows, args.png)
        console.print(f"wrote {args.png}")
    return EXIT_OK


def cmd_mutants(args) -> int:
    """Run the CI profile against each planted-bug mutant; exit 1 if any (non-gpu-only) mutant survives."""
    from .device import select_device

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/quality lives in the repository
    from fuzz.mutation import format_table, run_mutants

    if args.jobs < 1:
        print(f"jfa-verify mutants: error: --jobs {args.jobs}: give at least 1 process", file=sys.stderr)
        return EXIT_USAGE
    dev = select_device(args.device)
    results = run_mutants(args.only or None, device=dev, max_examples=args.max_examples, seed=args.seed,
                          jobs=args.jobs)
    print(f"mutation testing on {dev} (max {args.max_examples} campaign examples per surviving mutant)")
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in results], indent=2, default=str))
    survivors = [r.name for r in results if r.status in ("survived", "error")]
    if survivors:
        print(f"SURVIVED: {', '.join(survivors)}")
        return EXIT_FAIL
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jfa-verify", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, kernel_default: Optional[str] = "triton_jfa"):
        p.add_argument("--kernel", default=kernel_default, help="registered kernel name (see `jfa-verify kernels`)")
        p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available, else the CPU interpreter")
        p.add_argument("--plugin", action="append", default=[], metavar="FILE.py", help="import a file that registers kernels")
        p.add_argument("--reproducers", default="jfa-reproducers", help="folder for failing-case files")

    run = sub.add_parser("run", help="verify a kernel on the built-in suite (the main job)")
    common(run)
    run.add_argument("--suite", default="default")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--filter", default="", help="only cases whose name contains this text")
    run.add_argument("--max-cases", type=int, default=0)
    run.add_argument("--report", default="jfa-report.json")
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("--timeout", type=float, default=None,
                     help="seconds per case; a case still running then is recorded as a hang and the run exits 3")
    run.set_defaults(func=cmd_run)

    fz = sub.add_parser("fuzz", help="Hypothesis campaign: adversarial cases, shrinking, persistent corpus")
    common(fz)
    fz.add_argument("--max-examples", type=int, default=100)
    fz.add_argument("--seed", type=int, default=0)
    fz.add_argument("--timeout", type=float, default=None, help="seconds per case before it is recorded as a hang")
    fz.add_argument("--forward-only", action="store_true")
    fz.set_defaults(func=cmd_fuzz)

    cal = sub.add_parser("calibrate", help="measure error distributions and fit a budget table")
    common(cal)
    cal.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16", "float16"],
                     choices=("float32", "bfloat16", "float16", "float8_e4m3fn"),
                     help="case dtypes to sample (float8_e4m3fn: forward-only kernels such as triton_jfa_fp8)")
    cal.add_argument("--cases", type=int, default=200, help="drawn cases per dtype")
    cal.add_argument("--seed", type=int, default=0)
    cal.add_argument("--deadline", type=float, default=None, help="stop sampling after this many seconds")
    cal.add_argument("--records", default="calibration-records.jsonl",
                     help="JSON-lines file the sampled cases are appended to (kept if the run is killed)")
    cal.add_argument("--progress-every", type=int, default=0, metavar="N", help="print progress every N cases")
    cal.add_argument("--suite", default=None, help="also run this suite's cases first (e.g. default: long sequences)")
    cal.add_argument("--no-fit", action="store_true", help="only sample (to fit many runs' records later)")
    cal.add_argument("--from-records", nargs="+", default=[], metavar="FILE",
                     help="fit on these records (.jsonl or .jsonl.gz) instead of sampling")
    cal.add_argument("--holdout", nargs="+", default=[], metavar="FILE",
                     help="judge the fitted table on these other records; a failure exits 1")
    cal.add_argument("--against", default=None, help="budget file the records are judged by (default: packaged)")
    cal.add_argument("--safety", type=float, default=4.0, help="margin over the largest floor multiplier needed")
    cal.add_argument("--min-multiplier", type=float, default=0.05, help="lowest scale of a row's floor constants")
    cal.add_argument("--min-floor-ulps", type=float, default=1.0, help="lowest floor_ulps of a fitted row")
    cal.add_argument("--out", default="budgets.proposed.json", help="where to write the proposed table")
    cal.set_defaults(func=cmd_calibrate)

    rpt = sub.add_parser("report", help="plot calibration records: error vs length, headroom histograms (PNG)")
    rpt.add_argument("records", nargs="+", help="records files (.jsonl or .jsonl.gz) from jfa-verify calibrate")
    rpt.add_argument("--budgets", default=None, help="budget file the headroom is computed under (default: packaged)")
    rpt.add_argument("--out-dir", default="jfa-calibration-report", help="folder for the PNG files")
    rpt.set_defaults(func=cmd_report)

    rfl = sub.add_parser("refloor", help="derive calibration records' floor terms again from their cases "
                         "(after an error-model change; the measured kernel and SDPA errors are kept)")
    rfl.add_argument("records", nargs="+", help="records files (.jsonl or .jsonl.gz)")
    rfl.add_argument("--out", required=True, help="records file to write (.jsonl or .jsonl.gz)")
    rfl.add_argument("--device", default="cpu", help="where the float64 reference runs (default cpu)")
    rfl.set_defaults(func=cmd_refloor)

    rep = sub.add_parser("replay", help="re-run a case file (or an inline case) and print its verdict")
    rep.add_argument("file", nargs="?", help="case file written by run or a fuzz campaign")
    rep.add_argument("--case", help="inline case JSON instead of a file")
    common(rep, kernel_default=None)
    rep.set_defaults(func=cmd_replay)

    ker = sub.add_parser("kernels", help="list registered kernels")
    ker.add_argument("--plugin", action="append", default=[])
    ker.set_defaults(func=cmd_kernels)

    sch = sub.add_parser("schedule", help="per-SM load of launch-order, round-robin, zigzag and dynamic schedules")
    sch.add_argument("--distribution", choices=("movielens", "pareto"), default="movielens")
    sch.add_argument("--lengths", help="comma-separated lengths instead of a distribution")
    sch.add_argument("--batch", type=int, default=256)
    sch.add_argument("--num-sms", type=int, default=132)
    sch.add_argument("--block-m", type=int, default=64)
    sch.add_argument("--causal", action="store_true")
    sch.add_argument("--seed", type=int, default=0)
    sch.add_argument("--png", help="write a per-SM load plot here")
    sch.set_defaults(func=cmd_schedule)

    mut = sub.add_parser("mutants", help="mutation testing: the CI profile against each planted-bug kernel")
    mut.add_argument("--only", nargs="+", action="extend", default=[], metavar="NAME", help="only these mutants")
    mut.add_argument("--max-examples", type=int, default=10, help="campaign examples for a mutant the targeted cases miss")
    mut.add_argument("--device", choices=("cuda", "cpu"), default=None)
    mut.add_argument("--seed", type=int, default=0)
    mut.add_argument("--json", default=None, help="also write the results here")
    mut.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own process")
    mut.set_defaults(func=cmd_mutants)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``jfa-verify`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (JFAError, FileNotFoundError) as e:
        print(f"jfa-verify: error: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
