"""``jfa-verify gate``: the CI gate (the work: :func:`jfa_verify.workflows.gate.run_gate`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from jfa_verify.cli.arguments import (
    DEFAULT_REPRODUCERS,
    UsageError,
    device_option,
    existing_file,
    existing_folder,
    folder,
    new_file,
    number,
    plugin_option,
    positive_float,
    positive_int,
    progress_option,
    seed_int,
    timeout_seconds,
)
from jfa_verify.run.settings import DEFAULT_CASE_TIMEOUT_S

HELP = ("the CI gate: suite, campaign, replays, determinism, canaries, recycled memory "
        "(+ sanitizer, perf); JUnit/JSON/Markdown")
DESCRIPTION = ("The one command a CI job runs for a kernel change: the default suite and its "
               "relation checks, a "
               "fixed-seed campaign, replays of saved findings, determinism reruns, guard-band "
               "canaries, recycled memory, and on request compute-sanitizer and a performance "
               "check; checks the GPU or the kernel cannot run are skipped with the reason. "
               "Exit status: 4 a kernel crashed its process, else 3 one hung, else 1 any other "
               "finding; 2 nothing could be checked, a check could not judge, or a bad "
               "configuration; 0 everything checked passed; 130 interrupted (the reports say which checks ran).")


def add_arguments(parser) -> None:
    parser.add_argument("--kernel", action="append", default=[], help="kernel to gate (repeatable; default triton_jfa)")
    device_option(parser)
    plugin_option(parser)
    parser.add_argument("--checks", nargs="+", default=["suite", "campaign", "replay", "determinism", "canaries",
                                                        "recycled_memory"],
                        choices=("suite", "campaign", "replay", "determinism", "canaries", "recycled_memory", "stress",
                                 "perf"),
                        help="checks to run (sanitizer and perf also run when their options are given; perf alone: "
                             "--checks perf; stress: long cases rerun under timing perturbation, on request)")
    parser.add_argument("--campaign-examples", type=positive_int, default=25,
                        help="new cases the fixed-seed campaign draws (default: %(default)s)")
    parser.add_argument("--seed", type=seed_int, default=0, help="the campaign's seed (printed; same seed, same draws)")
    parser.add_argument("--reruns", type=number(int, minimum=2), default=3, help="runs per determinism case (>= 2)")
    parser.add_argument("--stress-reruns", type=number(int, minimum=2), default=None,
                        help="runs per stress case (>= 2; default 200 on CUDA, a few on the CPU; 10000 hunts rare "
                             "races)")
    parser.add_argument("--small-cases", type=positive_int, default=4,
                        help="cases per determinism, canary and recycled-memory check")
    parser.add_argument("--sanitizer", nargs="*", choices=("memcheck", "racecheck", "initcheck", "synccheck"),
                        help="run the first suite cases under compute-sanitizer with these tools (CUDA; default "
                             "memcheck)")
    parser.add_argument("--perf-baseline", type=existing_file,
                        help="committed timings to compare with (jfa-verify-perf/1)")
    parser.add_argument("--perf-record", type=new_file, help="write this run's timings as a baseline")
    parser.add_argument("--perf-threshold", type=positive_float, default=0.05, help="slowdown tolerated beyond noise")
    parser.add_argument("--perf-peer", metavar="KERNEL",
                        help="a registered kernel (e.g. torch_fa2_varlen) timed beside each kernel in the same run, on "
                             "the same inputs and through the same public call; reports peer time / kernel time")
    parser.add_argument("--perf-min-ratio", type=positive_float, metavar="X",
                        help="the perf check fails where peer time / kernel time is below X (needs --perf-peer)")
    parser.add_argument("--replay", action="append", default=[], type=existing_folder,
                        help="replay the case files and relation call files in this folder (e.g. a nightly "
                             "campaign's artifacts)")
    parser.add_argument("--reproducers", default=DEFAULT_REPRODUCERS, type=folder,
                        help="folder for failing-case files (default: %(default)s; a campaign keeps its Hypothesis "
                             "files in its .hypothesis subfolder)")
    parser.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_CASE_TIMEOUT_S,
                        help="seconds per case, Triton's compiling included, before it is a hang (default: "
                             "%(default)g, as `run`'s; a recorded hang replayed by --replay waits no longer than its "
                             "run did; compute-sanitizer gets this long for its whole run)")
    parser.add_argument("--jobs", type=positive_int, default=None,
                        help="worker processes of the suite and the campaign (on a GPU they overlap Triton's "
                             "compiling); default: the machine's, as `jfa-verify run --help` says, printed")
    parser.add_argument("--precompile", action=argparse.BooleanOptionalAction, default=True,
                        help="the suite check builds each distinct Triton kernel variant its cases launch once, in "
                             "parallel processes as `jfa-verify run --precompile` says, before they run (default; a "
                             "measured no-op on the CPU interpreter); --no-precompile builds each at its first launch")
    parser.add_argument("--json", type=new_file, default="jfa-gate.json", help="the gate report (JSON; default: "
                                                                               "%(default)s)")
    parser.add_argument("--junit", type=new_file, default="jfa-gate.junit.xml", help="JUnit XML (default: %(default)s)")
    parser.add_argument("--markdown", type=new_file, default="jfa-gate.md",
                        help="Markdown summary (default: %(default)s; also appended to $GITHUB_STEP_SUMMARY when set)")
    progress_option(parser)


def _check_step_summary() -> None:
    """``$GITHUB_STEP_SUMMARY``, which the gate appends its Markdown to at the end, in a folder that exists and not a
    folder itself: before any work (a new user's gate passed every check, then ended in an internal error, exit 70,
    beside a report that said PASS, 0).

    Raises:
        UsageError: it names a file that cannot be appended to.
    """
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary:
        return
    path = Path(summary)
    if path.is_dir() or not path.parent.is_dir():
        raise UsageError(f"$GITHUB_STEP_SUMMARY={summary!r}: "
                         + ("a folder, not a file" if path.is_dir() else f"folder {str(path.parent)!r} does not exist")
                         + "; point it at a file in an existing folder, or unset it")


def main(args, ctx) -> int:
    """The CI gate: every check on every kernel named; JSON, JUnit and Markdown outputs; exit by the worst finding."""
    from jfa_verify.checks.perf import read_baseline
    from jfa_verify.run.corpus import kept_only_if_written
    from jfa_verify.run.interrupts import terminate_as_interrupt
    from jfa_verify.run.parallelism import build_jobs, choose_jobs, counted
    from jfa_verify.workflows.gate import GateOptions, run_gate, write_outputs

    if args.perf_baseline:
        read_baseline(args.perf_baseline)  # a bad baseline is a usage error before any work
    _check_perf_peer(args, ctx)
    if "perf" in args.checks and not (args.perf_baseline or args.perf_record or args.perf_peer):
        # (it ran every other check first, then skipped perf: NOTHING CHECKED, exit 2, where perf was alone)
        raise UsageError("--checks perf needs what to time against: --perf-baseline FILE (committed timings), "
                         "--perf-record FILE (write this run's) or --perf-peer KERNEL (a peer timed beside it)")
    _check_step_summary()

    checks = tuple(dict.fromkeys([c for c in args.checks] + (["sanitizer"] if args.sanitizer else [])
                                 + (["perf"] if args.perf_baseline or args.perf_record or args.perf_peer else [])))
    jobs = choose_jobs(args.jobs, ctx.device)
    options = GateOptions(run=ctx.settings.replace(isolate=True, jobs=jobs.count), checks=checks,
                          campaign_examples=args.campaign_examples, reruns=args.reruns,
                          stress_reruns=args.stress_reruns, small_cases=args.small_cases,
                          sanitizer_tools=tuple(args.sanitizer or ("memcheck",)), perf_baseline=args.perf_baseline,
                          perf_record=args.perf_record, perf_threshold=args.perf_threshold, perf_peer=args.perf_peer,
                          perf_min_ratio=args.perf_min_ratio, replay_dirs=tuple(args.replay),
                          reproducers=args.reproducers, jobs_reason=jobs.reason, precompile=args.precompile,
                          build_jobs=build_jobs(jobs))
    device = ctx.device
    kernels = ctx.kernels(default=["triton_jfa"])
    if args.perf_record and len(kernels) > 1:  # (each kernel's timings replaced the last's in the one file, while
        # each said "baseline recorded": a new user's trial)
        raise UsageError(f"--perf-record {args.perf_record}: a baseline file holds one kernel's timings, and "
                         f"{len(kernels)} kernels are gated ({', '.join(k.name for k in kernels)}); record each in a "
                         f"gate of its own --kernel")
    for kernel in kernels:  # each one's load() before the banner: one that raises is a usage error (exit 2), not a
        # finding of every check (a new user's plugin whose load() raised failed the determinism check, exit 1)
        if kernel.device_reason(device) is None:  # (one the device cannot run is the gate's to skip, and say why)
            kernel.impl
    # a cancelled CI job: the report of what finished is written; no empty reproducer folder left behind
    with terminate_as_interrupt(), kept_only_if_written(args.reproducers):
        report = run_gate(kernels, device, options)
    written = write_outputs(report, json_path=args.json, junit_path=args.junit, markdown_path=args.markdown)
    print(report.to_markdown(), flush=True)
    if written:
        print("wrote " + ", ".join(str(p) for p in written))
    if report.interrupted:
        print(f"jfa-verify gate: interrupted after {counted(len(report.results), 'check')} (report written)",
              file=sys.stderr)
    return report.exit_code()


def _check_perf_peer(args, ctx) -> None:
    """``--perf-peer`` names a registered kernel that runs on the device, and ``--perf-min-ratio`` comes with it.

    Raises:
        UsageError: a ratio without a peer, no kernel of the peer's name, or a peer the device cannot run.
    """
    if args.perf_min_ratio is not None and not args.perf_peer:
        raise UsageError(f"--perf-min-ratio {args.perf_min_ratio:g} needs --perf-peer KERNEL (the kernel to compare "
                         f"with)")
    if args.perf_peer:
        from jfa_verify.core.errors import UnknownKernel

        try:
            peer = ctx.kernel(args.perf_peer)
        except UnknownKernel as e:
            raise UsageError(f"--perf-peer {args.perf_peer}: {e}") from None
        why = peer.device_reason(ctx.device)
        if why is not None:
            raise UsageError(f"--perf-peer {args.perf_peer} cannot run on {ctx.device.type}: {why}; choose a peer "
                             f"that runs there (jfa-verify kernels --device {ctx.device.type} lists them)")
