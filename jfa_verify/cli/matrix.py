"""``jfa-verify matrix``: kernels x cases in one table (the work: :mod:`jfa_verify.workflows.matrix`)."""

from __future__ import annotations

import argparse

from jfa_verify.cli.arguments import (
    DEFAULT_REPRODUCERS,
    UsageError,
    device_option,
    existing_file,
    folder,
    name_part,
    new_file,
    nonneg_int,
    plugin_option,
    png_file,
    positive_float,
    positive_int,
    progress_option,
    seed_int,
    timeout_seconds,
)

HELP = ("kernels x cases in one table: pass/fail/error/unsupported, worst headroom, "
        "findings with replay commands; JSON, Markdown and a PNG heat map")
DESCRIPTION = ("Run the same cases through several kernels (and a campaign per kernel) and "
               "tabulate the verdicts; headroom is a cell's worst error over its allowance "
               "(above 1 fails). Exit status: 4 a finding is a crash, else 3 a hang, else 1 "
               "a finding; 2 a bad argument or no case inside any kernel's capabilities; "
               "0 otherwise; 130 interrupted (the verdicts given stand; docs/peers.md).")


def add_arguments(parser) -> None:
    parser.add_argument("--kernel", action="append", default=[], help="a registered kernel (repeat for each)")
    parser.add_argument("--suite", action="append", default=[],
                        help="built-in suite: default, windows, mha or jagged-grid (`jfa-verify run --help` says "
                             "what each holds; repeatable; default: default)")
    parser.add_argument("--campaign", type=nonneg_int, default=0, metavar="N",
                        help="then a campaign of N examples per kernel that keeps searching after a finding")
    device_option(parser, help="where the cases run (default: cuda when there is a GPU, else the CPU interpreter)")
    plugin_option(parser, help="import a file that registers kernels (repeatable; named in every replay command)")
    parser.add_argument("--reproducers", default=DEFAULT_REPRODUCERS, type=folder,
                        help="folder for failing-case files (default: jfa-reproducers)")
    from jfa_verify.core.conventions import CONVENTIONS

    parser.add_argument("--accept", action="append", default=[], metavar="CONVENTION", choices=sorted(CONVENTIONS),
                        help="accept a kernel's declared convention (e.g. lse_plus_inf_empty_rows): its findings pass, "
                             "marked accepted")
    parser.add_argument("--filter", default=None, type=name_part, help="only cases whose name contains this text")
    parser.add_argument("--max-cases", type=positive_int, default=None, help="only the first N cases of the suites")
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of the suites' values and of the campaigns")
    parser.add_argument("--timeout", type=timeout_seconds, default=None,
                        help="seconds per case; one past it is a hang finding (with --no-isolate it ends the run, "
                             "exit 3)")
    parser.add_argument("--deadline", type=positive_float, default=None,
                        help="wall-clock seconds: cells not started by then are 'not run' (with --campaign: by 65%% "
                             "of it, the campaigns share the rest)")
    parser.add_argument("--forward-only", action="store_true", help="judge O and LSE only (no backward)")
    parser.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                        help="run each case in a worker process, so a crash, a hang or a sticky CUDA error is that "
                             "case's finding and the run goes on (default); --no-isolate runs them in this process")
    parser.add_argument("--jobs", type=positive_int, default=1,
                        help="worker processes per kernel, running its cases at once (default 1); more than 1 runs "
                             "each case in an isolated worker (implies --isolate) and overlaps Triton's compiling, "
                             "most of a suite's time on a fresh cache; verdicts do not depend on it")
    parser.add_argument("--json", default=None, type=new_file, help="write the matrix as JSON")
    parser.add_argument("--markdown", default=None, type=new_file, help="write the table and findings as Markdown")
    parser.add_argument("--png", default=None, type=png_file, help="write a heat map of headroom (kernel x case)")
    parser.add_argument("--from-json", nargs="+", default=[], metavar="FILE", type=existing_file,
                        help="merge matrices written by --json (one process per kernel) instead of running")
    parser.add_argument("--quiet", action="store_true", help="no line per case")
    progress_option(parser)
    parser.set_defaults(run_defaults={dest: parser.get_default(dest) for dest in RUN_OPTIONS})


# the options that only shape a run: `matrix --from-json` refuses them (it would ignore them)
RUN_OPTIONS = ("kernel", "suite", "campaign", "device", "plugin", "reproducers", "accept", "filter", "max_cases",
               "seed", "timeout", "deadline", "forward_only", "isolate", "jobs")


def main(args, ctx) -> int:
    from jfa_verify.workflows.matrix import MatrixOptions, command

    if args.from_json:
        given = [f"--{dest.replace('_', '-')}" for dest, default in args.run_defaults.items()
                 if getattr(args, dest) != default]
        if given:
            raise UsageError(f"--from-json merges matrices already run; {', '.join(given)} would be ignored: "
                             "drop them, or run the matrix without --from-json")
    return command(MatrixOptions(
        kernels=ctx.kernel_names, suites=ctx.suites, campaign=args.campaign, device=ctx.device_choice,
        settings=ctx.settings, reproducers=ctx.reproducers, filter=ctx.filter, max_cases=ctx.max_cases,
        deadline_s=args.deadline, jobs=args.jobs, quiet=args.quiet,
        from_json=tuple(args.from_json), json=args.json, markdown=args.markdown, png=args.png))
