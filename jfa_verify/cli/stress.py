"""``jfa-verify stress``: long cases rerun under timing perturbation (the work: :mod:`jfa_verify.checks.stress`)."""

from __future__ import annotations

import os
import sys

from jfa_verify.cli.arguments import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    kernel_options,
    new_file,
    number,
    seed_int,
    timeout_seconds,
)
from jfa_verify.core.exits import ExitCode, declare_exit
from jfa_verify.run.settings import DEFAULT_CASE_TIMEOUT_S as DEFAULT_TIMEOUT_S

EXIT_INTERRUPTED = int(ExitCode.INTERRUPTED)

HELP = "rerun long, pipeline-filling cases many times under timing perturbation (races show rarely)"
DESCRIPTION = ("Rerun long cases sized from the kernel's tiles (every pipeline stage cycles many laps; causal and "
               "not, GQA, D=64 and 128) many times, each rerun perturbed by one named mode: plain, noise (a "
               "bandwidth- and SM-hungry load on a second CUDA stream), fewer_sms (persistent grids capped to fewer "
               "programs, where the kernel offers it), launch_order (the cases in another order). A deterministic "
               "kernel's reruns are compared bit for bit; every kernel's outputs are judged against the references. "
               "The first differing rerun is reported with its mode and the element's sequence, head, token and "
               "tile. Exit status: 0 passed; 1 a rerun differed, failed or raised; 2 a bad argument, or no case "
               "inside the kernel's capabilities; 3 a rerun hung (--timeout); 4 the kernel ended the process (a "
               "crash); 70 an error of jfa-verify itself; 130 interrupted. Each case's file is written in "
               "--reproducers before its reruns and kept when they differ, fail or hang (`jfa-verify replay FILE` "
               "reruns it; a pass removes it). The reruns run in this command's own process, watched by a second "
               "one: a kernel that ends it (a segfault, an abort, any os._exit) ends the command with exit 4 and its "
               "cases' files marked as crashes for `jfa-verify findings`.")


def add_arguments(parser) -> None:
    kernel_options(parser)
    parser.add_argument("--reruns", type=number(int, minimum=2), default=None,
                        help="runs per case (>= 2; default 200 on CUDA, 3 on the CPU interpreter; 10000 hunts rare "
                             "races)")
    parser.add_argument("--modes", nargs="+", default=None,
                        choices=("plain", "noise", "fewer_sms", "launch_order"),
                        help="perturbation modes the reruns cycle through (default: all; one the device or the "
                             "kernel rules out is reported skipped with the reason)")
    parser.add_argument("--laps", type=number(int, minimum=1), default=None,
                        help="ring laps every long case makes at least, and work units every persistent program "
                             "runs in the short-sequence cases (default 8 on CUDA, 1 on the CPU)")
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of the cases' inputs and the launch orders")
    parser.add_argument("--forward-only", action="store_true", help="judge O and LSE only (no backward)")
    parser.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_TIMEOUT_S,
                        help="seconds one rerun of one case may take, Triton's compiling included, before it is a hang "
                             f"(default {DEFAULT_TIMEOUT_S:g}, as `run`'s): the hung case is named, --json is written, "
                             "and the command exits 3 at once (a hung kernel cannot be interrupted)")
    parser.add_argument("--json", type=new_file, default=None, help="write the report (JSON) here")


def main(args, ctx) -> int:
    """Run the stress check on one kernel; print each case's verdict and the modes; exit by the worst verdict."""
    from jfa_verify.checks.stress import MODES, StressOptions, mode_reasons, run_stress
    from jfa_verify.run.corpus import TIMEOUT_EXIT_CODE, Corpus
    from jfa_verify.run.report import write_json

    device = ctx.device
    kernel = ctx.kernel()
    options = StressOptions(reruns=args.reruns, modes=tuple(args.modes or MODES), laps=args.laps, seed=args.seed,
                            backward=not args.forward_only, timeout_s=args.timeout)

    def write(report, code: int) -> None:
        if args.json:  # (with the command's exit status, as run's report: a trial found it missing, 2026-12-06)
            print(f"wrote {write_json(args.json, {**report.to_dict(), 'exit_code': code})}", flush=True)

    def keep(report) -> None:  # a hang or Ctrl-C ends the command: the verdicts so far are printed and written
        if report.interrupted:
            _print_verdicts(report)
            print(f"stress: interrupted after {report.seconds:.1f} s; the verdicts above cover the reruns made",
                  flush=True)
        hung = any(v.status == "hang" for v in report.verdicts)
        write(report, TIMEOUT_EXIT_CODE if hung else EXIT_INTERRUPTED)

    # every mode asked for impossible here is known before any rerun (it ran every case, then refused: a trial,
    # 2026-12-07); the count of cases only decides launch_order, which a run of one case alone cannot take
    impossible = mode_reasons(kernel, device, options.modes, n_cases=2)
    if all(m in impossible for m in options.modes):
        raise UsageError("none of the modes asked for can run here: " + "; ".join(
            f"{m}: {why}" for m, why in impossible.items()) + f"; choose others of {', '.join(MODES)}")
    print(f"jfa-verify stress on {device}: {kernel.name}, {options.reruns_on(device)} reruns per case, modes "
          f"{', '.join(options.modes)}", flush=True)
    try:
        report = run_stress(kernel, device, options, settings=ctx.settings, log=lambda line: print(line, flush=True),
                            on_stop=keep, corpus=Corpus(args.reproducers))
    except KeyboardInterrupt:
        # keep() has printed and written the verdicts, and the case files are discarded: nothing is left to do. Once
        # in CI the interpreter's teardown after an interrupted rerun then aborted ("terminate called without an
        # active exception", exit -6 where 130 is documented); the reruns run in this process, with no child to
        # clean up, so it ends here.
        print(f"\njfa-verify {args.command}: interrupted", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(declare_exit(EXIT_INTERRUPTED))
    _print_verdicts(report)
    for v in report.verdicts:
        if v.reproducer:
            print(f"  {v.case.name}: kept {v.reproducer}\n    replay: {v.result(ctx.plugins).replay_command()}")
    for line in report.mode_lines():
        print(f"  {line}")
    print(f"stress: {report.status} in {report.seconds:.1f} s")
    none_ran = report.status == "pass" and all(m in report.modes_skipped for m in options.modes)
    code = (EXIT_USAGE if none_ran or report.status == "skip" else
            EXIT_FAIL if report.status in ("fail", "error") else EXIT_OK)
    write(report, code)
    if none_ran:
        # (every mode asked for was skipped: the plain reruns made instead are not what was asked; a trial, 2026-12-06)
        print(f"none of the modes asked for ran ({', '.join(options.modes)}): the reruns were plain ones, so this is "
              f"no verdict on them")
        return code
    if report.status == "skip":
        from jfa_verify.checks.stress import unsupported_shapes
        from jfa_verify.run.runner import skipped_lines, unsupported_reasons

        for line in skipped_lines(unsupported_reasons(report.verdicts)):
            print(f"  {line}")
        if not report.verdicts:
            for shape, why in unsupported_shapes(kernel, device).items():
                print(f"  shape {shape}: {why}")
        print(f"no stress case is inside {kernel.name}'s capabilities on {device}: nothing checked")
    return code


def _print_verdicts(report) -> None:
    for v in report.verdicts:
        print(v.describe(), flush=True)
