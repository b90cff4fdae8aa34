"""``jfa-verify report``: plot calibration records (the work: :mod:`jfa_verify.workflows.calibration_report`)."""

from __future__ import annotations

from jfa_verify.cli.arguments import EXIT_OK, UsageError, existing_file, folder

HELP = "plot calibration records: error vs length, headroom histograms (PNG)"
DESCRIPTION = ("Plot calibration records, the files of one JSON record per line that `jfa-verify calibrate --records` "
               "writes: per dtype row and output, each case's error against its length and its headroom under the "
               "budgets, as PNG files in --out-dir. Not a report of a run: a run's failures are listed by `jfa-verify "
               "findings`. Exit status: 0 the plots were written; 2 a bad argument, or a file that is not calibration "
               "records; 130 interrupted.")


def add_arguments(parser) -> None:
    parser.add_argument("records", nargs="+", type=existing_file,
                        help="records files (.jsonl or .jsonl.gz) from jfa-verify calibrate")
    parser.add_argument("--budgets", default=None, type=existing_file,
                        help="budget file the headroom is computed under (default: packaged)")
    parser.add_argument("--out-dir", default="jfa-calibration-report", type=folder, help="folder for the PNG files")


def main(args, ctx) -> int:
    from jfa_verify.judge.budgets import BudgetTable, default_table
    from jfa_verify.workflows.calibrate import read_records
    from jfa_verify.workflows.calibration_report import write_report

    records = read_records(args.records)
    table = BudgetTable.load(args.budgets) if args.budgets else default_table()
    for row in sorted({r.row for r in records}):
        for out in sorted({o for r in records if r.row == row for o in r.outputs}):
            table.budget(row, out)  # every row and output must be judgeable before anything is drawn
    if not records:
        raise UsageError(f"{' '.join(args.records)}: no calibration records to plot")
    paths = write_report(records, table, args.out_dir)
    print(f"{len(records)} records; wrote " + ", ".join(str(p) for p in paths))
    return EXIT_OK
