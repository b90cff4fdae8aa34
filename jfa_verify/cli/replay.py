"""``jfa-verify replay``: re-run one case file, call file or inline case, beside its recorded verdict."""

from __future__ import annotations

from jfa_verify.cli.arguments import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    existing_file,
    kernel_options,
    number,
    timeout_seconds,
)
from jfa_verify.core.exits import FINDINGS_IN_WORDS

HELP = "re-run a case file (or an inline case) and print its verdict"
DESCRIPTION = ("Re-run a case file written by run, fuzz, gate or matrix (or an inline case) "
               "on the kernel it names, and print the verdict beside the recorded one. A determinism or stress "
               "finding of gate is rerun as its check did (as many times, a stress file at most 50 unless --reruns "
               "says), outputs compared bit for bit: 1 when the runs still differ, 0 when they agree. Exit "
               f"status as the verdict: 0 pass; {FINDINGS_IN_WORDS}; 2 a bad argument or an "
               "unreadable file; 130 interrupted.")


def add_arguments(parser) -> None:
    parser.add_argument("file", nargs="?", type=existing_file, help="case file written by run or a fuzz campaign")
    parser.add_argument("--case", help="inline case JSON instead of a file")
    parser.add_argument("--timeout", type=timeout_seconds, default=None,
                        help="run in a case worker with this limit (a recorded crash or hang always runs in one)")
    parser.add_argument("--memory", choices=("nan", "large"), default=None,
                        help="guard bands around every allocation, uninitialized memory filled with NaN or large "
                             "values (default: what the case file recorded: the gate's canary and recycled-memory "
                             "runs)")
    parser.add_argument("--reruns", type=number(int, minimum=2), default=None,
                        help="a determinism or stress finding: rerun it N times (>= 2; default: as many as its file "
                             "says, a stress file at most 50)")
    kernel_options(parser, kernel_default=None, reproducers=False)


def main(args, ctx) -> int:
    """Re-run one case; never writes, moves or deletes the file it was given."""
    from jfa_verify.cases.case import Case
    from jfa_verify.cli.output import make_console
    from jfa_verify.run.corpus import RUNNING, read_case_file, replay_timeout
    from jfa_verify.run.runner import run_case

    console = make_console()
    if (args.file is None) == (args.case is None):
        raise UsageError("replay needs exactly one of FILE or --case JSON")
    from jfa_verify.checks.calls import is_call_file

    if args.file and is_call_file(args.file):
        return _replay_calls(args, ctx, console)
    if args.file:
        case, payload = read_case_file(args.file)
    else:
        case, payload = Case.from_json(args.case), {}
        if case.generator == "pcg64" and '"generator"' not in args.case:
            # the file meaning of a missing field (a file written before the counter generator); a hand-written
            # inline case most likely meant today's values, so say which values it gets
            print('this case has no "generator" field: it gets the values a case file of that age had, NumPy\'s '
                  'PCG64 draws; add "generator": "counter" for the values today\'s runs draw', flush=True)
    device = ctx.device
    kernel = _recorded_kernel(ctx, payload, "case file")
    if not args.file and not ctx.kernel_name:  # (a new user's inline case, no --kernel, ran triton_jfa unsaid)
        print(f"note: an inline case names no kernel and no --kernel was given: it replays on {kernel.name!r}, the "
              f"default", flush=True)
    settings = ctx.settings.replace(memory=args.memory or payload.get("memory"))  # (the file's memory mode)
    timeout = replay_timeout(payload, args.timeout)
    from jfa_verify.checks.rerun_replay import rerun_check

    if rerun_check(payload):
        return _replay_reruns(args, ctx, console, case, payload, kernel, settings, timeout)
    if args.reruns:
        raise UsageError(f"--reruns {args.reruns}: only a determinism or stress finding (a case file of gate's "
                         f"determinism or stress check) is rerun; this one is replayed once")
    if payload.get("status") in ("crash", "hang", RUNNING) or timeout:
        # A recorded crash or hang (or a case whose process died mid-case) replays in a case worker, so it cannot
        # take this command down with it.
        from jfa_verify.run.isolation import CaseWorker, WorkerSpec

        if timeout and not args.timeout:
            print(f"a recorded hang: replayed with a limit of {timeout:g} s, as long as its run waited "
                  f"(--timeout S to change)" if payload.get("status") != RUNNING else
                  f"a case whose run ended mid-case (a crash, a hang or a kill): replayed in a case worker with a "
                  f"limit of {timeout:g} s (--timeout S to change)", flush=True)
        with CaseWorker(WorkerSpec(kernel.name, device.type, settings)) as worker:
            result = worker.run(case, timeout)
    else:
        result = run_case(case, kernel, device, settings)
    result.reproducer = args.file
    print(result.explain(), flush=True)
    if payload.get("status") in ("fail", "error", "crash", "hang"):
        console.print(verdicts(payload, result.status, kernel), markup=False)
        if result.status == "pass" and not another_kernel(payload, kernel):
            print(did_not_recur(payload, device, "replay it with --memory nan and --memory large"), flush=True)
    if result.status == "unsupported":
        return EXIT_USAGE
    from jfa_verify.core.exits import exit_code_for

    return int(exit_code_for([result.status]))


def _recorded_kernel(ctx, payload: dict, what: str):
    """The kernel a recorded file replays on (``--kernel``, else the file's). When it is unknown and the file was
    recorded with ``--plugin`` files (``plugin_paths``) that the command does not load, the error names them.

    Raises:
        UnknownKernel: no such kernel, and nothing recorded to suggest.
        UsageError: no such kernel; ``--plugin`` the recorded file(s) to load it.
    """
    from jfa_verify.core.errors import UnknownKernel

    recorded = [p for p in payload.get("plugin_paths", ()) if p not in ctx.plugins]
    try:
        kernel = ctx.kernel(ctx.kernel_name or payload.get("kernel", "triton_jfa"))
        if payload.get("kernel") and kernel.name != payload["kernel"]:
            # (a new user replayed another kernel's file by mistake and read "replayed: pass (DIFFERENT)" as a fix)
            print(f"note: this {what} was recorded on kernel {payload['kernel']!r}; it replays on {kernel.name!r} "
                  f"(--kernel), so its recorded verdict is {payload['kernel']!r}'s", flush=True)
        return kernel
    except UnknownKernel as e:  # the file says which plugin registered it: name it
        if not recorded or ctx.plugins:
            raise
        from pathlib import Path

        gone = [p for p in recorded if not Path(p).is_file()]
        if gone:  # (a new user was told to add a --plugin path deleted since, which then failed "no such file")
            raise UsageError(f"{e}; this {what} was recorded with {' '.join(f'--plugin {p}' for p in recorded)}, and "
                             f"{', '.join(gone)} no longer exist(s): give --plugin with the file that registers "
                             f"kernel {payload.get('kernel') or '(the recorded one)'!r} now") from None
        raise UsageError(f"{e}; this {what} was recorded with "
                         f"{' '.join(f'--plugin {p}' for p in recorded)}: add that to the command") from None


def _replay_calls(args, ctx, console) -> int:
    """Replay a call file (a relation or a sequence of related calls) on one kernel object."""
    from jfa_verify.checks.calls import read_call_file
    from jfa_verify.run.parallelism import counted

    relation, payload = read_call_file(args.file)
    device = ctx.device
    kernel = _recorded_kernel(ctx, payload, "call file")
    finding = relation.check(kernel, device)
    calls = len(relation.cases())
    print(f"[{'FAIL' if finding else 'PASS'}] relation {relation.name} over {counted(calls, 'call')} on {kernel.name}"
          + (f": {finding}" if finding else ""), flush=True)
    if payload.get("status") == "fail":
        console.print(verdicts(payload, "fail" if finding else "pass", kernel), markup=False)
        if not finding and not another_kernel(payload, kernel):
            print(did_not_recur(payload, device, "run the calls again in the order the run made them"), flush=True)
    return EXIT_FAIL if finding else EXIT_OK


def another_kernel(payload: dict, kernel) -> bool:
    """Whether a recorded file replays on another kernel than the one it names (``--kernel``)."""
    return bool(payload.get("kernel")) and kernel.name != payload["kernel"]


def verdicts(payload: dict, replayed: str, kernel) -> str:
    """The recorded verdict beside the replayed one. On another kernel than the file's (``--kernel``, legitimate) it
    says so on the line itself: "replayed: pass (DIFFERENT)" read as a fix of the recorded kernel (a new user's
    trial), and the hints of a finding that did not recur presume the same kernel."""
    recorded = payload["status"]
    if another_kernel(payload, kernel):
        return (f"recorded for kernel {payload['kernel']!r}: {recorded}; replayed on {kernel.name!r}: {replayed} (a "
                f"different kernel: this says nothing of whether the finding recurs on {payload['kernel']!r}; replay "
                f"without --kernel for that)")
    return f"recorded verdict: {recorded}; replayed: {replayed} ({'same' if recorded == replayed else 'DIFFERENT'})"


def did_not_recur(payload: dict, device, state_step: str) -> str:
    """What to rule out when a recorded finding replays as a pass: a change of machine or versions (named when the
    file's ``environment`` differs from this process's), a kernel changed since, state left by earlier calls in the
    recording process (``state_step``: how to bring it back), and nondeterminism."""
    from jfa_verify.run.corpus import environment

    then, now = payload.get("environment") or {}, environment()
    where_then = payload.get("device") or "an unrecorded device"
    changed = [f"device {where_then} -> {device}"] if str(where_then).split(":")[0] != device.type else []
    changed += [f"{key} {then[key]} -> {now.get(key)}" for key in ("gpu", "torch", "triton")
                if then.get(key) and then.get(key) != now.get(key)]
    return ("hint: the recorded finding did not recur. "
            + (f"Recorded elsewhere ({'; '.join(changed)}): a kernel can fail on one and not the other. "
               if changed else "")
            + "Rule out a kernel changed since it was recorded (`jfa-verify bisect` finds the commit), state an "
            f"earlier call of the recording process left (a cache, reused memory: {state_step}), and "
            "nondeterminism (`jfa-verify gate --checks determinism stress`).")


def _replay_reruns(args, ctx, console, case, payload, kernel, settings, timeout) -> int:
    """Replay a determinism or stress finding: its reruns again, compared bit for bit (:mod:`jfa_verify.checks.
    rerun_replay`); exit 1 when the runs still differ, 0 when they agree."""
    from jfa_verify.checks.rerun_replay import replay_reruns
    from jfa_verify.core.exits import exit_code_for

    replay = replay_reruns(case, payload, kernel, ctx.device, settings, reruns=args.reruns, timeout_s=timeout)
    print(f"a {replay.check} finding ({replay.recorded} reruns recorded): rerunning it {replay.reruns} times, outputs "
          f"compared bit for bit", flush=True)
    for line in replay.notes + replay.lines:
        print(line, flush=True)
    recorded = payload.get("status")
    if recorded in ("fail", "error", "crash", "hang"):
        console.print(verdicts(payload, replay.status, kernel), markup=False)
        if replay.status == "pass" and not another_kernel(payload, kernel):  # (a race is rare: a pass is no proof
            print(f"a {replay.check} finding may need more reruns, or the run's other cases, to show again: this pass "
                  "does not say it is fixed (the exit status is the replay's)", flush=True)
    if replay.status == "unsupported":
        return EXIT_USAGE
    return int(exit_code_for([replay.status]))
