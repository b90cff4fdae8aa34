"""``jfa-verify refloor``: calibration records' floor terms derived again (:mod:`jfa_verify.workflows.calibrate`)."""

from __future__ import annotations

from pathlib import Path

from jfa_verify.cli.arguments import EXIT_OK, UsageError, existing_file, new_file
from jfa_verify.core.errors import JFAError

HELP = ("derive calibration records' floor terms again from their cases "
        "(after an error-model change; the measured kernel and SDPA errors are kept)")
DESCRIPTION = ("Derive calibration records' floor terms again from their cases (the float64 reference's magnitudes "
               "that the budgets scale with), after a change of the error model; the measured kernel and SDPA errors "
               "are kept, and the records are written to --out. Exit status: 0 written; 2 a bad argument or a file "
               "that is not calibration records; 130 interrupted.")


def add_arguments(parser) -> None:
    parser.add_argument("records", nargs="+", type=existing_file, help="records files (.jsonl or .jsonl.gz)")
    parser.add_argument("--out", required=True, type=new_file, help="records file to write (.jsonl or .jsonl.gz)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cpu",
                        help="where the float64 reference runs (default cpu)")


def main(args, ctx) -> int:
    from jfa_verify.workflows.calibrate import read_records, refloor, write_records

    out = Path(args.out)
    if out.resolve() in {Path(p).resolve() for p in args.records}:
        raise UsageError(f"--out {args.out}: is one of the input files; write the refloored records elsewhere")
    device = ctx.device
    fresh, changed = [], 0
    for path in args.records:
        records = read_records([path])
        try:
            new = refloor(records, device=device)
        except JFAError as e:
            raise type(e)(f"{path}: {e}") from None
        changed += sum(a.outputs != b.outputs for a, b in zip(records, new))
        fresh += new
    if not fresh:  # (as `report`: a new user's empty file was "0 records ... wrote" here and exit 2 there)
        raise UsageError(f"{' '.join(args.records)}: no calibration records to refloor; pass files written by "
                         f"jfa-verify calibrate --records")
    try:
        write_records(out, fresh)
    except OSError as e:
        raise UsageError(f"--out {args.out}: cannot write there ({e.strerror or e}); give a writable file path")
    print(f"{len(fresh)} records, floors derived again from their cases ({changed} changed); wrote {out}")
    return EXIT_OK
