"""``jfa-verify calibrate``: error distributions and a proposed budget table (:mod:`jfa_verify.workflows.calibrate`)."""

from __future__ import annotations

import sys
from pathlib import Path

from jfa_verify.cli.arguments import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    ONE_SUITE,
    Once,
    UsageError,
    existing_file,
    kernel_options,
    new_file,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
    seed_int,
)
from jfa_verify.core.exits import ExitCode

HELP = "measure error distributions and fit a budget table"
DESCRIPTION = ("Sample drawn cases of a kernel (or read --from-records), measure each output's error against the "
               "float64 reference and the same-dtype SDPA oracle, and fit a proposed budget table (--out; the packaged "
               "table is never replaced unless named), judged on --holdout records when given (docs/budgets.md). "
               "Exit status: 0 a table written (or, with --no-fit, the cases sampled); 1 a record fails the table it "
               "is measured against, or a held-out record fails the fitted table (the table is still written, to "
               "read), a sampled case raised, no record to fit, or no fit possible; 2 a bad argument, or a row "
               "fitted on fewer than --min-cases cases (nothing written); 130 interrupted (the records sampled so far "
               "are kept).")


def add_arguments(parser) -> None:
    kernel_options(parser, reproducers=False)
    from jfa_verify.core.dtypes import DIFFERENTIABLE, DTYPES

    parser.add_argument("--dtypes", nargs="+", default=list(DIFFERENTIABLE), choices=tuple(DTYPES),
                        help="case dtypes to sample (float8_e4m3fn: forward-only kernels such as triton_jfa_fp8)")
    parser.add_argument("--cases", type=positive_int, default=200, help="drawn cases per dtype")
    parser.add_argument("--min-cases", type=positive_int, default=100,
                        help="fewest fitting cases a budget row may have (below: refuse to write the table)")
    parser.add_argument("--allow-few-cases", action="store_true", help="write a table fitted on fewer than --min-cases")
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of the drawn cases (default: %(default)s)")
    parser.add_argument("--deadline", type=positive_float, default=None, help="stop sampling after this many seconds")
    parser.add_argument("--records", default="calibration-records.jsonl", type=new_file,
                        help="JSON-lines file the sampled cases are appended to (kept if the run is killed)")
    parser.add_argument("--progress-every", type=nonneg_int, default=0, metavar="N",
                        help="print progress every N cases")
    parser.add_argument("--suite", default=None, action=Once, fix=ONE_SUITE,
                        help="also run this suite's cases first (e.g. default: long sequences)")
    parser.add_argument("--no-fit", action="store_true", help="only sample (to fit many runs' records later)")
    parser.add_argument("--window-cases", action="store_true",
                        help="draw only sliding-window cases (the kernel must declare a window mask)")
    parser.add_argument("--from-records", nargs="+", default=[], metavar="FILE", type=existing_file,
                        help="fit on these records (.jsonl or .jsonl.gz) instead of sampling")
    parser.add_argument("--holdout", nargs="+", default=[], metavar="FILE", type=existing_file,
                        help="judge the fitted table on these other records; a failure exits 1")
    parser.add_argument("--against", default=None, type=existing_file,
                        help="budget file the records are judged by (default: packaged)")
    parser.add_argument("--safety", type=positive_float, default=4.0,
                        help="margin over the largest floor multiplier needed")
    parser.add_argument("--min-multiplier", type=nonneg_float, default=0.05,
                        help="lowest scale of a row's floor constants")
    parser.add_argument("--min-floor-ulps", type=nonneg_float, default=1.0, help="lowest floor_ulps of a fitted row")
    parser.add_argument("--out", default="budgets.proposed.json", type=new_file,
                        help="where to write the proposed table (never the packaged file unless named)")


def main(args, ctx) -> int:
    import json

    from jfa_verify.judge.budgets import BudgetTable, default_table
    from jfa_verify.run.parallelism import counted
    from jfa_verify.workflows import calibrate as cal

    current = BudgetTable.load(args.against) if args.against else default_table()
    held = cal.read_records(args.holdout) if args.holdout else []
    if args.holdout and not held:
        raise UsageError(f"--holdout {' '.join(args.holdout)}: no records to judge the table on")
    if not (args.from_records or args.no_fit or args.allow_few_cases or args.suite) and args.cases < args.min_cases:
        # (known before any sampling: every row would get at most --cases cases, and the fit would then be refused)
        raise UsageError(f"--cases {args.cases} < --min-cases {args.min_cases}: the fit would be refused after "
                         f"sampling; draw at least {args.min_cases}, or pass --allow-few-cases (or --no-fit)")
    errors: list[str] = []
    if args.from_records:
        records = cal.read_records(args.from_records)
        files = [Path(f).name for f in args.from_records]
    else:
        device = ctx.device
        kernel = ctx.kernel()
        fixed = []
        if args.suite:
            from jfa_verify.checks.suites import get_suite

            fixed = get_suite(args.suite, device.type, args.seed, kernel=kernel).cases
        try:
            done = cal.sample(kernel, device=device, dtypes=args.dtypes, cases_per_dtype=args.cases, seed=args.seed,
                              records=Path(args.records), deadline_s=args.deadline,
                              progress_every=args.progress_every, fixed_cases=fixed,
                              window=True if args.window_cases else None)
        except KeyboardInterrupt:
            print(f"\ninterrupted: the cases measured so far are in {args.records} "
                  f"(fit them with --from-records {args.records})", file=sys.stderr)
            return int(ExitCode.INTERRUPTED)
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
    measured = cal.evaluate(records, current)
    print(cal.format_stats(measured))
    # (a wrong kernel's records fit a table wide enough to pass it: a new user's GQA bug was fitted a floor of 5.7
    # million ulps, exit 0; the table is still written, to read, as after a held-out failure)
    over = sum(st.failures for st in measured.values())
    thin = cal.thin_rows(records, args.min_cases)
    if thin and not args.allow_few_cases:
        print("jfa-verify calibrate: error: refusing to write a table fitted on too few cases: "
              + ", ".join(f"{row} ({n} < --min-cases {args.min_cases})" for row, n in thin.items())
              + "; sample more, or pass --allow-few-cases to write it anyway", file=sys.stderr)
        return EXIT_USAGE
    holdout_summary = None
    prov = dict(safety=args.safety, min_multiplier=args.min_multiplier, min_floor_ulps=args.min_floor_ulps,
                measured_against=current.version, files=files, earlier=current)
    try:
        table = cal.fit(records, current, safety=args.safety, min_multiplier=args.min_multiplier,
                        min_floor_ulps=args.min_floor_ulps)
    except ValueError as e:
        print(f"cannot fit: {e}", file=sys.stderr)
        return EXIT_FAIL
    rc = EXIT_FAIL if errors or over else EXIT_OK
    verdict = None
    if held:
        stats = cal.evaluate(held, table)
        print(f"proposed table on {len(held)} held-out cases:")
        print(cal.format_stats(stats))
        holdout_summary = {"files": [Path(f).name for f in args.holdout],
                           "outputs": {f"{row}/{out}": st.summary() for (row, out), st in sorted(stats.items())}}
        false_failures = sum(st.failures for st in stats.values())
        verdict = (f"held-out check: {counted(false_failures, 'false failure', 'false failures')} in "
                   f"{counted(len(held), 'case')}"
                   + (" -- the table is too tight for these cases; raise --safety or fit on more cases"
                      if false_failures else ""))
        if false_failures:
            rc = EXIT_FAIL
    table = BudgetTable(table.version, cal.provenance(records, holdout=holdout_summary, **prov), table.budgets)
    out = Path(args.out)
    out.write_text(json.dumps(table.to_dict(), indent=2) + "\n")
    print(f"proposed budget table version {table.version} written to {out}")
    if thin:
        print("warning: fitted on few cases (--allow-few-cases): "
              + ", ".join(f"{row} {n}" for row, n in thin.items()))
    if verdict:
        print(verdict)
    if over:
        print(f"warning: {over} record output(s) fail budget table version {current.version} (the 'fails' column "
              f"above): a table fitted around them passes them; replay such cases first (a kernel bug is a finding, "
              f"not a budget), and use the table only if their error is the kernel's honest rounding", file=sys.stderr)
    for e in errors:
        print(e, flush=True)
    return rc
