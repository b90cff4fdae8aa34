"""``jfa-verify bisect``: the commit that broke a kernel (the work: :mod:`jfa_verify.workflows.bisect`)."""

from __future__ import annotations

from pathlib import Path

from jfa_verify.cli.arguments import (
    ONE_SUITE,
    Once,
    device_option,
    existing_file,
    folder,
    name_part,
    nonneg_float,
    number,
    percent,
    positive_float,
    positive_int,
    progress_option,
    seed_int,
    timeout_seconds,
)

HELP = ("find the kernel commit that broke correctness, speed or bits "
        "(git bisect run in a temporary worktree; see docs/bisect.md)")
DESCRIPTION = ("Find the first commit of a kernel's repository between --good and --bad where a case fails (a "
               "reproducer, a suite or a campaign), its outputs drift (--drift) or it is slower (--perf). git bisect "
               "runs in a temporary worktree; the repository is never modified. Exit status: 0 one first bad commit "
               "named; 1 inconclusive (skipped commits hide it; the candidates are listed); 2 usage or configuration "
               "(endpoints that do not bracket a change included); 130 interrupted. See docs/bisect.md.")


def add_arguments(parser) -> None:
    parser.add_argument("--repo", required=True, help="the kernel's git repository (never modified)")
    parser.add_argument("--good", required=True, metavar="REV", help="a commit where the kernel is right (or fast)")
    parser.add_argument("--bad", required=True, metavar="REV", help="a later commit where it is not")
    parser.add_argument("--kernel", default=None, action=Once, fix="a bisect follows one kernel: give one --kernel, "
                        "and bisect each kernel in a run of its own",
                        help="registered kernel name (default: the --case file's kernel)")
    parser.add_argument("--plugin", action="append", default=[], metavar="RELPATH",
                        help="file in the repository that registers the kernel (repeatable)")
    parser.add_argument("--module", default=None, help="module in the repository that registers the kernel")
    parser.add_argument("--module-root", default=".", metavar="RELDIR", help="folder put on sys.path for --module")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--case", default=None, type=existing_file, metavar="FILE",
                      help="a reproducer file (read once; never modified)")
    what.add_argument("--suite", default=None, action=Once, fix=ONE_SUITE,
                      help="a built-in suite (with --filter, --max-cases)")
    what.add_argument("--campaign", default=None, type=positive_int, metavar="N",
                      help="a Hypothesis campaign of N examples with --seed")
    parser.add_argument("--filter", default=None, type=name_part, help="only suite cases whose name contains this text")
    parser.add_argument("--max-cases", type=positive_int, default=None, help="only the first N suite cases")
    parser.add_argument("--seed", type=seed_int, default=0,
                        help="seed of the suite's values or the campaign (default: 0)")
    parser.add_argument("--perf", action="store_true", help="performance bisect: slower than --good by --threshold")
    parser.add_argument("--batch", default=None, help="benchmark batch to time (--perf; default movielens)")
    parser.add_argument("--threshold", type=percent, default=None, metavar="PCT",
                        help="slowdown called bad (--perf; default 5%%)")
    parser.add_argument("--confidence", type=number(float, minimum=0.5), default=0.95,
                        help="confidence of the slowdown interval (--perf)")
    parser.add_argument("--rounds", type=number(int, minimum=6), default=8,
                        help="interleaved timing rounds, added again while undecided (--perf)")
    parser.add_argument("--max-rounds", type=positive_int, default=24,
                        help="most timing rounds before a commit is called undecided (--perf; default: %(default)s)")
    parser.add_argument("--block-ms", type=positive_float, default=None,
                        help="milliseconds of calls per timing sample (--perf; default 50)")
    parser.add_argument("--perf-backward", action="store_true", help="time forward and backward (--perf)")
    parser.add_argument("--drift", action="store_true",
                        help="bisect where outputs stopped matching --good's, bit for bit (or within --atol)")
    parser.add_argument("--atol", type=nonneg_float, default=None, help="drift tolerance (--drift)")
    parser.add_argument("--build", default=None, metavar="CMD",
                        help="shell command run in the checkout first at each commit; non-zero exit skips the commit")
    parser.add_argument("--timeout", type=timeout_seconds, default=None,
                        help="seconds per case (past it: skip, or bad with --hang-is-bad)")
    parser.add_argument("--hang-is-bad", action="store_true",
                        help="a case still running after --timeout is bad, not skipped: to bisect a regression "
                             "that hangs (needs --timeout)")
    parser.add_argument("--step-timeout", type=positive_float, default=1800.0,
                        help="seconds per commit, build included (past it: skip)")
    device_option(parser)
    parser.add_argument("--forward-only", action="store_true", help="judge O and LSE only (no backward)")
    parser.add_argument("--out", default="jfa-bisect", type=folder, help="folder for the reports and the reproducer")
    parser.add_argument("--keep-temp", action="store_true", help="keep the temporary state folder (debugging)")
    progress_option(parser)


def main(args, ctx) -> int:
    from jfa_verify.workflows.bisect.report import format_text
    from jfa_verify.workflows.bisect.search import BisectRequest, run_bisect

    req = BisectRequest(
        repo=args.repo, good=args.good, bad=args.bad, kernel=ctx.kernel_name, plugins=ctx.plugins,
        module=args.module, module_root=args.module_root, case_file=args.case, suite=ctx.suite, filter=ctx.filter or "",
        max_cases=ctx.max_cases, campaign=args.campaign, seed=ctx.seed, perf=args.perf, batch=args.batch,
        threshold=args.threshold, confidence=args.confidence, rounds=args.rounds, max_rounds=args.max_rounds,
        block_ms=args.block_ms, perf_backward=args.perf_backward, drift=args.drift, atol=args.atol, build=args.build,
        case_timeout=args.timeout, hang_is_bad=args.hang_is_bad, step_timeout=args.step_timeout,
        device=ctx.device_choice, backward=not args.forward_only, out=args.out, keep=args.keep_temp)
    report = run_bisect(req, echo=lambda line: print(line, flush=True))
    print(format_text(report), flush=True)
    print(f"reports: {Path(args.out) / 'bisect.txt'}, bisect.md, bisect.json", flush=True)
    return report.exit_code
