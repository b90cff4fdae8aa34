"""``jfa-verify run``: verify a kernel on a built-in suite (the work: :mod:`jfa_verify.workflows.suite_run`)."""

from __future__ import annotations

import argparse
import sys

from jfa_verify.cli.arguments import (
    EXIT_USAGE,
    ONE_SUITE,
    Once,
    UsageError,
    kernel_options,
    name_part,
    new_file,
    positive_int,
    seed_int,
    timeout_seconds,
)
from jfa_verify.core.exits import FINDINGS_IN_WORDS, ExitCode
from jfa_verify.run.settings import DEFAULT_CASE_TIMEOUT_S

HELP = "verify a kernel on the built-in suite (the main job)"
DESCRIPTION = (
    "Verify a kernel on a built-in suite: each case through the kernel (forward and backward), the "
    "float64 reference and the padded-SDPA oracle, judged by the calibrated budgets; prints a table "
    "and the input classes covered, writes the JSON report and a reproducer per failing case. "
    f"Exit status (jfa_verify/core/exits.py): 0 every case passed or was declared unsupported; "
    f"{FINDINGS_IN_WORDS} (a broken relation check is a finding too); 2 a bad argument, a kernel that "
    "cannot be loaded, or no case inside the kernel's capabilities (nothing checked); 130 "
    "interrupted (the report is written).")


def add_arguments(run) -> None:
    from jfa_verify.checks.suites import SUITES  # the names only; get_suite refuses an unknown one with the list

    kernel_options(run)
    run.add_argument("--suite", default="default", action=Once, fix=ONE_SUITE,
                     metavar="{" + ",".join(sorted(SUITES)) + "}",
                     help="default: a covering array of every pair of contract classes the kernel supports, then "
                          "fixed production layouts (MovieLens, tile edges); windows: sliding windows at their "
                          "edges; mha: half the default cases with H_kv = H_q, for kernels without GQA; "
                          "jagged-grid: lengths at the kernel's tiles +-1, empty and one-token sequences, mixed "
                          "and MovieLens batches, cross and broadcast-Q, causal both ways, bf16/fp16 "
                          "(default: %(default)s)")
    run.add_argument("--seed", type=seed_int, default=0,
                     help="seed of the suite's values and of its covering array (default: %(default)s)")
    run.add_argument("--filter", default=None, type=name_part, help="only cases whose name contains this text")
    run.add_argument("--max-cases", type=positive_int, default=None,
                     help="run at most this many cases, in the suite's order (covering array first)")
    run.add_argument("--report", default="jfa-report.json", type=new_file,
                     help="JSON report to write (default: %(default)s)")
    run.add_argument("--quiet", "-q", action="store_true",
                     help="print the summary and the failures only: the table of failing cases, each failure's "
                          "explanation and the final line (no header, coverage tables or progress lines)")
    run.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_CASE_TIMEOUT_S,
                     help="seconds per case, Triton's compiling included (default: %(default)g, room for the "
                          "slowest honest case on the CPU interpreter or a GPU's cold cache); a case still running "
                          "then is recorded as a hang, its worker killed, and the run goes on (exit 3 at the end); "
                          "with --no-isolate a watchdog marks the case a hang and the run exits 3 at once")
    run.add_argument("--jobs", type=positive_int, default=None,
                     help="isolated worker processes running cases at once (they overlap Triton's compiling, most "
                          "of a suite's time on a fresh cache); default: one per CPU core, as many as free memory "
                          "holds (on CUDA 8 GiB of the GPU's a worker), at most 16 and one per case, or "
                          "$JFA_VERIFY_JOBS; the header says what was chosen; --jobs 1 runs them one at a time")
    run.add_argument("--precompile", action=argparse.BooleanOptionalAction, default=True,
                     help="before the cases, build each distinct Triton kernel variant they launch once, in parallel "
                          "processes (default; as many as --jobs where given, else the machine's default without "
                          "the GPU memory bound, since builds hold none; the header says how many and how long; on "
                          "the CPU the interpreter "
                          "builds nothing and the step is a measured no-op); --no-precompile builds each at its "
                          "first launch, in the case workers")
    run.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                     help="run cases in a worker process, so a crash or hang is that case's finding (default); "
                          "--no-isolate runs them in this process (a crash ends the run)")


def main(args, ctx) -> int:
    from jfa_verify.cli.run_printer import RunPrinter
    from jfa_verify.run.corpus import kept_only_if_written
    from jfa_verify.workflows.suite_run import RunRequest, exit_code, run_suite

    if (args.jobs or 1) > 1 and not args.isolate:  # before any work (the Verifier would refuse it in its own words)
        raise UsageError(f"--jobs {args.jobs} with --no-isolate: cases run at once only in isolated worker "
                         f"processes; drop --no-isolate, or give --jobs 1 to run in this process")
    # The device first: it sets TRITON_INTERPRET, which must precede any import of triton (the report's environment
    # imports it; written before, it left every in-process call compiled for a GPU: a new user's 5 relation checks
    # all "broke" on CPU).
    device = ctx.device
    request = RunRequest(kernel=ctx.kernel_name, suite=ctx.suite, filter=ctx.filter, max_cases=ctx.max_cases,
                         report=args.report, reproducers=ctx.reproducers, settings=ctx.settings, jobs=args.jobs,
                         precompile=args.precompile)
    printer = RunPrinter(args, device)
    with kept_only_if_written(ctx.reproducers):  # (no empty reproducer folder left when every case passed)
        outcome = run_suite(request, device, ctx.kernel, printer)
    if outcome.cases is None:
        _print_time(outcome, args.quiet)
        print(f"\njfa-verify run: interrupted before any case ran (the kernel loading or the suite being built); "
              f"the report ({args.report}) says so", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    results, cases, suite, kernel = outcome.results, outcome.cases, outcome.suite, outcome.kernel
    for stopped in outcome.in_flight:  # no verdict, so no case file: named here, since it may be the one that hangs
        print(f"jfa-verify run: interrupted while running {stopped['case']} ({stopped['seconds']:g} s in; no verdict, "
              f"no case file); replay it: {stopped['replay']}", file=sys.stderr)
    if not results and outcome.interrupted:
        _print_time(outcome, args.quiet)
        print(f"\njfa-verify run: interrupted before the first case finished; the report ({args.report}) says so",
              file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    for line in outcome.findings:
        print(line, flush=True)
    checked, findings, skipped = outcome.checked, outcome.findings, outcome.skipped
    left = len(outcome.relations) - len(checked)
    # the parentheses name the checks that held: every check run, the broken one among them, read as all of them
    # holding ("2/3 relation checks held (permutation, batch_invariance, sequence); broken: sequence": helper-73)
    held_names = ", ".join(dict.fromkeys(r.name for r, line in zip(outcome.relations, checked) if not line))
    held = (f"relation checks not run ({skipped})" if skipped else
            f"{len(checked) - len(findings)}/{len(checked)} relation checks held"
            + (f" ({held_names})" if held_names else "")
            + (f"; broken: {', '.join(dict.fromkeys(r.name for r, line in zip(outcome.relations, checked) if line))}"
               if findings else "")  # (the list named every relation run, not the one that broke: helper-67)
            + (f", {left} not run (interrupted)" if left else ""))
    counts, unjudged = outcome.counts(), sum(r.unjudged for r in results)
    _print_time(outcome, args.quiet)
    errors = f"{counts['error']} errors" + (f" ({unjudged} not judged)" if unjudged else "")
    printer.console.print(f"{counts['pass']} passed, {counts['fail']} failed, {errors}, {counts['crash']} crashed, "
                          f"{counts['hang']} hung, {counts['unsupported']} unsupported; {held}; report: "
                          f"{outcome.report}")
    if outcome.memory_reruns[0]:
        again, recovered = outcome.memory_reruns
        printer.console.print(f"{again} case(s) ran out of device memory beside the others and were run again alone: "
                              f"{recovered} no longer did", markup=False, highlight=False)
    if outcome.interrupted:
        print(f"jfa-verify run: interrupted after {len(results)} of {len(cases)} cases (report written)",
              file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    code = exit_code(outcome)
    if code == EXIT_USAGE:  # every case unsupported: nothing was checked
        # (the way out named for what narrowed the cases: a new user's --filter broadcast_q was told to try fuzz)
        picked = "/".join(o for o, given in (("--filter", args.filter), ("--max-cases", args.max_cases)) if given)
        fix = ("`jfa-verify kernels` lists where each kernel runs" if kernel.device_reason(ctx.device) else
               f"the cases {picked} picked are all outside them: change {picked}" if picked else
               "run the default suite (--suite default)" if suite.name != "default" else
               _campaign_or_why_not(kernel, ctx.device))
        print(f"jfa-verify run: error: no case of suite {suite.name!r} is inside the capabilities of kernel "
              f"{kernel.name!r} ({results[0].message}); {fix}", file=sys.stderr)
    return code


def _print_time(outcome, quiet: bool) -> None:
    """The ``time:`` line: each phase's wall seconds, the report's figures, and their sum (not with ``--quiet``)."""
    if quiet:
        return
    phases = outcome.phase_seconds()
    print("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()) + f" ({sum(phases.values()):.1f} s)",
          flush=True)


def _campaign_or_why_not(kernel, device) -> str:
    """The way out of a default suite with no case inside ``kernel``'s capabilities: a campaign, where its strategy
    can draw a case for the kernel (a new user was sent to `fuzz`, which then drew nothing either)."""
    from jfa_verify.strategies import cases, undrawable_reason

    why = undrawable_reason(cases(kernel, device_type=device.type))
    if why is None:
        return f"try jfa-verify fuzz --kernel {kernel.name}"
    return f"nor can a campaign draw one ({why}): jfa-verify has no case for these capabilities on {device.type}"
