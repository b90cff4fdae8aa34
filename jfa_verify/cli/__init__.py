"""``jfa-verify``: the command line (argument parsing and printing; the work is done by the library).

Subcommands: ``run`` (the main job: verify a kernel on the built-in suite),
``fuzz`` (a Hypothesis campaign with shrinking and a persistent corpus; worker processes on a shared
database), ``findings`` (the deduplicated findings of a reproducer folder),
``calibrate`` (error distributions and a proposed budget table), ``report``
and ``refloor`` (calibration records), ``mutants`` (a planted-bug catalogue's
kill table), ``replay`` (re-run one case file or inline case), ``kernels``
(the registry), ``schedule`` (per-SM load of the tile schedulers), ``matrix`` (kernels x cases),
``bisect`` (the kernel commit that broke correctness, speed or bits, through ``git bisect run``).

Every argument is checked before any work: a bad one exits 2 with one line
naming it (:class:`~jfa_verify.core.exits.ExitCode` lists every exit status).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from jfa_verify.core.errors import JFAError, UnknownKernel
from jfa_verify.core.exits import FINDINGS_IN_WORDS, ExitCode

EXIT_OK, EXIT_FAIL, EXIT_USAGE = int(ExitCode.OK), int(ExitCode.FINDING), int(ExitCode.USAGE)

# What `jfa-verify --help` opens with: the tool for its user (this module's docstring is for its maintainers).
DESCRIPTION = (
    "Differential testing of jagged FlashAttention kernels (attention on packed variable-length sequences): "
    "each case runs through the kernel under test, forward and backward, and is judged against a float64 "
    "reference within an allowance calibrated on same-dtype SDPA; a failure is localized to (sequence, head, "
    "token, tile) and saved as a reproducer with the command that replays it. `run` verifies a kernel on the "
    "built-in suite, `gate` is the CI gate, `fuzz` searches with Hypothesis and `findings` lists what was found, "
    "`replay` re-runs one reproducer, `matrix` compares kernels, `mutants` checks the checks on planted bugs, "
    "`calibrate`, `report` and `refloor` fit and plot the error budgets, `schedule` shows tile schedules' load "
    "per SM, `bisect` finds the commit that broke a kernel, and `kernels` lists the kernels and where they run. "
    f"Exit status: {ExitCode.OK:d} passed, {ExitCode.FINDING:d} a finding, {ExitCode.USAGE:d} usage or configuration, "
    f"{ExitCode.HANG:d} a hang, {ExitCode.CRASH:d} a crash, {ExitCode.INTERRUPTED:d} interrupted.")


def _version() -> str:
    """The installed distribution's version (package metadata), else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jfa-verify")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from jfa_verify import __version__

        return __version__


class UsageError(Exception):
    """A bad argument found after parsing (a file that must not exist, a folder that must): exit 2."""


# ----------------------------------------------------------------------------- argument types


def _number(kind, *, minimum=None, strict: bool = False, what: str = ""):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if kind is float and value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if minimum is not None and (value <= minimum if strict else value < minimum):
            raise argparse.ArgumentTypeError(f"{text} must be {'>' if strict else '>='} {minimum}{what}")
        return value
    return parse


positive_int = _number(int, minimum=0, strict=True)
nonneg_int = _number(int, minimum=0)
positive_float = _number(float, minimum=0, strict=True)
nonneg_float = _number(float, minimum=0)
seed_int = _number(int, minimum=0)


def existing_file(text: str) -> str:
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: a folder; give a file in it")
    if not Path(text).is_file():
        looks_like_id = len(text) == 12 and all(c in "0123456789abcdef" for c in text)
        raise argparse.ArgumentTypeError(f"{text}: no such file" + (
            "; a finding's id is not a file: `jfa-verify findings DIR` prints each finding's replay command"
            if looks_like_id else ""))
    return text


def name_part(text: str) -> str:
    """A non-empty part of a case name (``--filter``): an empty one matched every case without a word."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is empty; give part of a case name (leave --filter out for all)")
    return text


def new_file(text: str) -> str:
    """A file to write: its folder must exist and it must not be a folder."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name")
    folder = path.resolve().parent
    if folder.exists() and not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {str(folder)!r} is a file, not a folder; give a file in a folder")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: folder {str(folder)!r} does not exist; create it first")
    # The file is written beside itself first, then moved into place: try that now, not after the work (a new
    # user's --report /proc/r.json ended a whole run with a traceback).
    from jfa_verify.core.paths import folder_problem

    problem = folder_problem(folder)
    if problem:
        raise argparse.ArgumentTypeError(f"{text}: {problem}; give a file in a folder you can write to")
    return text


def png_file(text: str) -> str:
    """A PNG to write (as :func:`new_file`): matplotlib must be installed, checked before any work."""
    import importlib.util

    text = new_file(text)
    if importlib.util.find_spec("matplotlib") is None:
        raise argparse.ArgumentTypeError(f"{text}: writing a PNG needs matplotlib, which is not installed; "
                                         f"pip install 'jfa-verify[plots]' (or leave out --png)")
    return text


def folder(text: str) -> str:
    """A folder to write into (created if missing, under an existing parent); not a file; writable (tried now: a new
    user's ``--reproducers /proc/r`` ended a campaign with a traceback and exit 1, the code of a finding)."""
    from jfa_verify.core.paths import folder_problem

    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; give a folder")
    if not path.exists() and not path.resolve().parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: parent folder {str(path.resolve().parent)!r} does not exist")
    problem = folder_problem(path)
    if problem:
        raise argparse.ArgumentTypeError(f"{text}: {problem}; give a folder you can write to")
    return text


def existing_folder(text: str) -> str:
    """A folder to read (``gate --replay``): it must exist (a missing one was named only after the whole gate ran)."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder; give the folder an earlier run or campaign wrote "
                                         f"its case files into")
    return text


def percent(text: str) -> float:
    """``5%`` or ``5`` (percent) -> 0.05."""
    value = _number(float, minimum=0)(text[:-1] if text.endswith("%") else text)
    return value / 100.0


def lengths_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers (e.g. 7,3,19)") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: lengths must be integers >= 0")
    return values


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse would print the usage too)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ----------------------------------------------------------------------------- shared pieces


def _console():
    from rich.console import Console

    # Wide enough for the tables when output goes to a file or a CI log; lines of text are never folded
    # (soft_wrap): a replay command or a path broken across two lines does not paste.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 160, soft_wrap=True)


class _ProgressLines:
    """Progress as plain lines, at most one per ``interval`` seconds and one at the end: for output that is not a
    terminal (a CI log), where a live bar shows nothing."""

    def __init__(self, console, what: str, total: int, interval: float = 10.0):
        import time
        from collections import Counter

        self.console, self.what, self.total, self.interval = console, what, total, interval
        self.t0 = self.last = time.monotonic()
        self.statuses: Counter = Counter()

    def add(self, result) -> None:
        import time

        self.statuses[result.status] += 1
        now, n = time.monotonic(), sum(self.statuses.values())
        if now - self.last >= self.interval or n == self.total:
            self.last = now
            counts = ", ".join(f"{v} {k}" for k, v in sorted(self.statuses.items()))
            self.console.print(f"[{now - self.t0:6.0f} s] {self.what}: {n}/{self.total} cases ({counts})",
                               highlight=False, markup=False)


def _kernel(args, device_type: Optional[str] = None):
    """Load ``--plugin`` files, then the registered ``--kernel`` (errors name the file, line or known names)."""
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    for p in getattr(args, "plugin", None) or ():
        load_plugin(p)
    return get_kernel(args.kernel)


def _results_table(results, title: str):
    from rich.table import Table

    table = Table(title=title)
    for col in ("case", "status", "dtype", "worst output", "error / allowance", "verdict"):
        table.add_column(col)
    for r in results:
        w = r.worst
        if r.status in ("error", "crash", "hang") or w is None:
            err, worst = ("contract", "-") if r.contract_violations else ("-", "-")
        else:
            err = "non-finite" if w.problem else f"{w.kernel_error:.2e} / {w.allowance:.2e}"
            worst = w.name
        verdict = {"pass": "[green]pass", "fail": "[red]FAIL", "error": "[red]ERROR", "crash": "[red]CRASH",
                   "hang": "[red]HANG", "unsupported": "[yellow]skip"}[r.status]
        table.add_row(r.case.name or r.case.case_id(), r.status, r.case.dtype, worst, err, verdict)
    return table


# ----------------------------------------------------------------------------- commands


def cmd_run(args) -> int:
    from rich.progress import Progress

    from jfa_verify.cases.coverage import Coverage
    from jfa_verify.core.device import interpreting, select_device
    from jfa_verify.checks.calls import check_relations
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.core.exits import exit_code_for
    from jfa_verify.run.interrupts import terminate_as_interrupt
    from jfa_verify.run.loop import Verifier
    from jfa_verify.cases.pairs import PairCoverage
    from jfa_verify.run.report import run_report, write_json
    from jfa_verify.checks.suites import get_suite

    if args.jobs > 1 and not args.isolate:  # before any work (the Verifier would refuse it in its own words)
        raise UsageError(f"--jobs {args.jobs} with --no-isolate: cases run at once only in isolated worker "
                         f"processes; drop --no-isolate, or give --jobs 1 to run in this process")
    console = _console()
    # The device first: it sets TRITON_INTERPRET, which must precede any import of triton (the report's environment
    # imports it; written before, it left every in-process call compiled for a GPU: a new user's 5 relation checks
    # all "broke" on CPU).
    device = select_device(args.device)
    # Until this run's report replaces it, the file says the run did not finish: a Ctrl-C while the kernel loads
    # or the suite is built, or a kill, must not leave an earlier run's report there to be read as this one's.
    # ("interrupted": null while it runs: nothing has stopped it yet, and it has not finished either)
    def report_before_cases(interrupted: Optional[bool], **more) -> None:
        write_json(args.report, run_report([], kernel=args.kernel, device=device,
                                           extra={"finished": False, "interrupted": interrupted,
                                                  "cases_planned": None, **more}))

    report_before_cases(None)
    try:
        kernel = _kernel(args)
        elsewhere = kernel.device_reason(device)
        if elsewhere:  # before the suite is built and 84 cases are dispatched only to be unsupported
            raise UsageError(f"kernel {kernel.name!r} does not run on {device.type}: {elsewhere}; `jfa-verify "
                             f"kernels` lists where each kernel runs")
        suite = get_suite(args.suite, device.type, args.seed, kernel=kernel)
        cases = [c for c in suite.cases if not args.filter or args.filter in c.name]
        if not cases:
            raise UsageError(f"--filter {args.filter!r}: no case of suite {args.suite!r} matches; names look like "
                             f"{suite.cases[0].name!r}")
    except KeyboardInterrupt:  # loading and the covering array take seconds: the report says so, as a later stop's
        report_before_cases(True)
        print(f"\njfa-verify run: interrupted before any case ran (the kernel loading or the suite being built); "
              f"the report ({args.report}) says so", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except (JFAError, UsageError) as e:  # the report says why nothing ran (it read "still running" otherwise)
        report_before_cases(False, error=str(e))
        raise
    if args.max_cases:
        cases = cases[: args.max_cases]
    where = "Triton interpreter on CPU" if interpreting() else str(device)
    by = "/".join(o for o, given in (("--filter", args.filter), ("--max-cases", args.max_cases)) if given)
    picked = f"{len(cases)} cases" if len(cases) == len(suite.cases) else \
        f"{len(cases)} of {len(suite.cases)} cases, by {by}"
    console.print(f"jfa-verify run: kernel [bold]{kernel.name}[/], suite {suite.name} ({picked}), {where}"
                  + ("" if args.isolate else ", in-process (--no-isolate)"))
    if len(cases) == len(suite.cases):
        console.print(f"  {suite.note}")
    else:  # the note tells of the whole suite; say what of it this run has
        from jfa_verify.cases.pairs import ROW_PREFIX

        rows = sum(c.name.startswith(ROW_PREFIX) for c in cases)
        console.print(f"  {suite.note} (in the whole suite; {rows} of the {len(cases)} case(s) picked here are "
                      f"covering-array rows)")
    results, interrupted = [], False
    with Verifier(kernel, device, args.reproducers, timeout_s=args.timeout, plugins=args.plugin,
                  isolate=args.isolate, jobs=args.jobs) as verifier, terminate_as_interrupt():
        done = []
        # a terminal gets the bar; a CI log a plain line at most every 10 s (it would otherwise see nothing for minutes)
        lines = _ProgressLines(console, f"verifying {kernel.name}", len(cases)) \
            if not (args.no_progress or console.is_terminal) else None
        try:
            with Progress(console=console, transient=True, disable=args.no_progress or lines is not None) as bar:
                task = bar.add_task(f"verifying {kernel.name}", total=len(cases))
                results = verifier.verify_all(cases, on_result=lambda r: (done.append(r), bar.advance(task),
                                                                          lines and lines.add(r)))
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: report what was verified, then stop
            results, interrupted = done, True
    # Only the cases the kernel ran exercised anything (a new user saw 0 of 84 cases run reported as 100% of pairs)
    ran = [r.case for r in results if r.status != "unsupported"]
    coverage = Coverage.for_kernel(kernel, device.type).update(ran)
    pairs = PairCoverage(Target(kernel, device.type)).update(ran)

    def write_report(relations_run: int, broken: list, not_run_because, finished: bool = True):
        extra = {"interrupted": interrupted if finished or interrupted else None,  # (null: still running)
                 "finished": finished and not interrupted, "cases_planned": len(cases),
                 "pairs": pairs.to_dict(), "relations": broken,
                 "relation_checks": {"run": relations_run, "broken": len(broken), "not_run_because": not_run_because}}
        return write_json(args.report, run_report(results, kernel=kernel.name, device=device, suite_note=suite.note,
                                                  coverage=coverage.to_dict(), extra=extra))

    if not results and interrupted:
        # (this report once went unwritten while the line said it was there: an earlier run's file stood in for it)
        write_report(0, [], "interrupted")
        print(f"\njfa-verify run: interrupted before the first case finished; the report ({args.report}) says so",
              file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    # every case's verdict on disk before the relation checks run (a kill or a stop during them lost the whole run)
    write_report(0, [], "the run ended before they finished", finished=False)
    console.print(_results_table(results, f"{kernel.name} on {where}"), soft_wrap=False)  # its title centred
    print(coverage.format(device_type=device.type), flush=True)
    print(pairs.format(), flush=True)
    for r in results:
        if r.failed:
            print(r.explain(), flush=True)
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "error", "crash", "hang",
                                                                 "unsupported")}
    # Checks across calls (permutation, batch invariance) run in this process: not after a crash or hang,
    # and not on a filtered or interrupted run.
    skipped = next((why for why, cond in (("--filter", args.filter), ("--max-cases", args.max_cases),
                                          ("interrupted", interrupted), ("a crash", counts["crash"]),
                                          ("a hang", counts["hang"])) if cond), None)
    relations = [] if skipped else list(suite.relations)
    checked: list = []  # each relation's finding line, or None where it held, as they finish
    try:
        check_relations(relations, kernel, device, args.reproducers, plugins=args.plugin, on_checked=checked.append)
    except KeyboardInterrupt:  # the cases' verdicts stand, and so do the relations checked by then
        interrupted = True
    findings = [line for line in checked if line is not None]
    for line in findings:
        print(line, flush=True)
    left = len(relations) - len(checked)
    held = (f"relation checks not run ({skipped})" if skipped and suite.relations else
            f"{len(checked) - len(findings)}/{len(checked)} relation checks held"
            + (f", {left} not run (interrupted)" if left else ""))
    report = write_report(len(checked), findings, skipped or ("interrupted" if left else None))
    unjudged = sum(r.unjudged for r in results)
    errors = f"{counts['error']} errors" + (f" ({unjudged} not judged)" if unjudged else "")
    console.print(f"{counts['pass']} passed, {counts['fail']} failed, {errors}, {counts['crash']} crashed, "
                  f"{counts['hang']} hung, {counts['unsupported']} unsupported; {held}; report: {report}")
    if interrupted:
        print(f"jfa-verify run: interrupted after {len(results)} of {len(cases)} cases (report written)",
              file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    if counts["unsupported"] == len(results):        # Nothing was checked: a gate must not read this as a pass.
        print(f"jfa-verify run: error: no case of suite {suite.name!r} is inside the capabilities of kernel "
              f"{kernel.name!r} ({results[0].message}); "
              + ("`jfa-verify kernels` lists where each kernel runs" if kernel.device_reason(device)
                 else f"try jfa-verify fuzz --kernel {kernel.name}"),
              file=sys.stderr)
        return EXIT_USAGE
    return int(exit_code_for([r.status for r in results] + ["fail"] * len(findings)))


def cmd_fuzz(args) -> int:
    import secrets

    from jfa_verify.core.device import select_device
    from jfa_verify.fuzz.workers import FuzzConfig, run_fuzz

    console = _console()
    device = select_device(args.device)
    kernel = _kernel(args)
    elsewhere = kernel.device_reason(device)
    if elsewhere:  # (else every drawn case is unsupported: a whole --duration spent, then "nothing checked")
        raise UsageError(f"kernel {kernel.name!r} does not run on {device.type}: {elsewhere}; `jfa-verify kernels` "
                         f"lists where each kernel runs")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    max_examples = args.max_examples if args.max_examples or args.duration else 100
    gpus = args.gpus
    if gpus is not None and device.type != "cuda":
        raise UsageError(f"--gpus {','.join(gpus)}: this campaign runs on {device.type}, where workers are not "
                         f"pinned to GPUs; drop --gpus, or add --device cuda on a machine with GPUs")
    if device.type == "cuda":
        import torch

        present = [str(i) for i in range(torch.cuda.device_count())]
        absent = [g for g in gpus or () if g.isdigit() and g not in present]  # (a UUID is CUDA's to check)
        if absent:
            raise UsageError(f"--gpus {','.join(gpus)}: no GPU {','.join(absent)} on this machine (it has "
                             f"{','.join(present)}); give indices from that list")
        gpus = present if gpus is None else gpus
    config = FuzzConfig(kernel=kernel.name, device_type=device.type, corpus_dir=args.reproducers,
                        plugins=tuple(args.plugin), database=args.database, read_from=tuple(args.read_from),
                        seed=seed, max_examples=max_examples, duration_s=args.duration, timeout_s=args.timeout,
                        backward=not args.forward_only, isolate=args.isolate, shrink_seconds=args.shrink_seconds,
                        covering=args.covering, pack=args.pack)
    from jfa_verify.fuzz.database import default_database, open_database

    # the database before the banner: a bad one is a usage error of one line (run_fuzz opens it again, for workers)
    if args.database is not None and not args.database.strip():
        # (an empty value, as from an unset shell variable, once fell back to the default without a word)
        raise UsageError(f"--database {args.database!r} is empty; give a folder or redis://HOST:PORT, or leave "
                         f"--database out for {default_database(args.reproducers)}")
    database = args.database or default_database(args.reproducers)
    open_database(database, tuple(args.read_from))
    limit = " and ".join(x for x in (f"{max_examples} new cases drawn" if max_examples else "",
                                     f"{args.duration:g} s" if args.duration else "") if x)
    console.print(f"jfa-verify fuzz: kernel [bold]{kernel.name}[/] on {device}, {args.workers} worker(s)"
                  + (f" on GPU(s) {','.join(gpus)}" if gpus else "")
                  + (f", packs of up to {args.pack} cases a launch" if args.pack > 1 else "") + f", up to {limit}, seed {seed} "
                  f"(repeat the draws with --seed {seed}), database {database}")
    report = run_fuzz(config, workers=args.workers, gpus=gpus or (), console=console, live=not args.no_progress,
                      interval=args.progress_interval, report=args.report, png=args.png)
    _print_campaign(report, console)
    for broken in report["unreadable_case_files"]:  # (as `findings` says it; the exit status is 2 beside no crash
        # or hang)
        print(f"jfa-verify fuzz: error: {broken['path']} is not a readable case file ({broken['why']}); a finding may "
              f"be lost in it (not replayed, left as it is): restore it, or remove it once you have read it",
              file=sys.stderr)
    statuses = report["statuses"]
    if not report["interrupted"] and statuses and set(statuses) == {"unsupported"}:
        # Nothing was checked: a CI job must not read this as a pass (as `run` in the same case).
        print(f"jfa-verify fuzz: error: every one of the {statuses['unsupported']} case(s) run was outside the "
              f"capabilities of kernel {kernel.name!r} on {device.type} (nothing checked); `jfa-verify kernels` "
              f"lists where each kernel runs", file=sys.stderr)
        return EXIT_USAGE
    return report["exit_code"]


def _print_campaign(report: dict, console) -> None:
    from jfa_verify.run.corpus import replay_command

    new = set(report["new_findings"])
    console.print(f"campaign on {report['kernel']} ({report['device']}, {report['workers']} worker(s), seed "
                  f"{report['seed']}): {report['cases']} cases run in {report['seconds']:.1f} s "
                  f"({report['cases_per_minute']:.0f}/min; {report['drawn']} drawn, and saved findings replayed and "
                  f"shrink steps run besides; a draw of a case judged before runs nothing"
                  + (f"; {packs['launches']} packed launch(es), {packs['split']} split to find the failing case"
                     if (packs := report.get("packs", {})).get("launches") else "") + ")"
                  + "".join(f", {k} {v}" for k, v in sorted(report["statuses"].items()))
                  + (" -- interrupted" if report["interrupted"] else ""), highlight=False, markup=False)
    for f in report["findings"]:
        tag = "NEW " if f["id"] in new else ""
        console.print(f"  {tag}finding {f['id'] or '(unmerged)'} [{f['status']}] {f['error_kind']} "
                      f"{'/'.join(f['outputs']) or '-'}: {f['case']}, {f['examples']} example(s)\n"
                      f"    replay: {replay_command(f['path'], f['kernel'], report['config']['plugins'])}",
                      highlight=False, markup=False)
    if not report["findings"]:
        console.print("  no findings", highlight=False, markup=False)
    for p in report["fixed"]:
        console.print(f"  fixed (now passes, file removed): {p}", highlight=False, markup=False)
    for w, d in report["worker_errors"].items():
        console.print(f"  worker {w} died: {d['why']}", highlight=False, markup=False)
    for n in report["notes"]:
        console.print(f"  note: {n}", highlight=False, markup=False)
    cov = report["coverage"]
    outside = cov["outside_capabilities"]
    console.print(f"coverage: {cov['drawn']}/{cov['expected']} input classes drawn; never drawn: "
                  f"{', '.join(cov['never_drawn']) or 'none'}"
                  + (f"; not counted, outside the kernel's capabilities: {', '.join(outside)}" if outside else ""),
                  highlight=False, markup=False)


def cmd_findings(args) -> int:
    """List a reproducer folder's findings; the exit status is the one their verdicts give (see the help)."""
    import json

    from jfa_verify.run.corpus import RUNNING
    from jfa_verify.core.exits import exit_code_for
    from jfa_verify.fuzz.findings import list_findings, unreadable_case_files

    if args.folder and args.reproducers and Path(args.folder).resolve() != Path(args.reproducers).resolve():
        raise UsageError(f"two folders given: {args.folder!r} and --reproducers {args.reproducers!r}; give one")
    root = args.folder or args.reproducers or "jfa-reproducers"
    if not Path(root).is_dir():
        raise UsageError(f"{root!r} is not a folder; give the folder that `run`, `fuzz` or `gate` wrote its "
                         f"reproducers into")
    rows = list_findings(root, args.kernel)
    if args.kernel and not rows:
        from jfa_verify.protocol.registry import kernel_names

        here = sorted({r["kernel"] for r in list_findings(root) if r["kernel"]})
        if args.kernel not in here and args.kernel not in kernel_names():  # a typo reads as "no findings", 0
            raise UsageError(f"--kernel {args.kernel!r}: no kernel of that name is registered or has files in "
                             f"{root!r} (kernels with findings there: {', '.join(here) or 'none'})")
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        from rich.table import Table

        table = Table(title=f"findings in {root}")
        for col in ("id", "kernel", "status", "kind", "outputs", "examples", "case"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["id"], r["kernel"] or "-", r["status"], r["error_kind"], "/".join(r["outputs"]) or "-",
                          str(r["examples"]), r["case"])
        _console().print(table)
        for r in rows:  # plain lines, never wrapped: each is pasted as it is
            print(f"{r['id']} replay: {r['replay']}")
        if not rows:
            print(f"no findings in {root}")
    code = int(exit_code_for(r["status"] for r in rows))
    broken = unreadable_case_files(root)
    for path, why in broken:
        print(f"jfa-verify findings: error: {path} is not a readable case file ({why}); a finding may be lost in "
              f"it: restore it, or remove it once you have read it", file=sys.stderr)
    # A case left running has no verdict: its process was killed, or the kernel took it down (a crash or a hang
    # of an in-process run). Listing only such rows once exited 0, which a CI step reads as "nothing found".
    running = [r for r in rows if r["status"] == RUNNING]
    if running:
        print(f"jfa-verify findings: {len(running)} case(s) left running by a process that died mid-case, not judged "
              f"yet: the next `fuzz` on {root} replays them first, or replay one with its line above", file=sys.stderr)
    # (beside a finding, the finding's own status says more)
    unjudged = (broken and code in (EXIT_OK, EXIT_FAIL)) or (running and code == EXIT_OK)
    return EXIT_USAGE if unjudged else code


def cmd_calibrate(args) -> int:
    import json

    from jfa_verify.workflows import calibrate as cal
    from jfa_verify.judge.budgets import BudgetTable, default_table

    current = BudgetTable.load(args.against) if args.against else default_table()
    held = cal.read_records(args.holdout) if args.holdout else []
    if args.holdout and not held:
        raise UsageError(f"--holdout {' '.join(args.holdout)}: no records to judge the table on")
    errors: list[str] = []
    if args.from_records:
        records = cal.read_records(args.from_records)
        files = [Path(f).name for f in args.from_records]
    else:
        from jfa_verify.core.device import select_device

        device = select_device(args.device)
        kernel = _kernel(args)
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
    print(cal.format_stats(cal.evaluate(records, current)))
    thin = cal.thin_rows(records, args.min_cases)
    if thin and not args.allow_few_cases:
        print("jfa-verify calibrate: error: refusing to write a table fitted on too few cases: "
              + ", ".join(f"{row} ({n} < --min-cases {args.min_cases})" for row, n in thin.items())
              + "; sample more, or pass --allow-few-cases to write it anyway", file=sys.stderr)
        return EXIT_USAGE
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
    if thin:
        print("warning: fitted on few cases (--allow-few-cases): "
              + ", ".join(f"{row} {n}" for row, n in thin.items()))
    if verdict:
        print(verdict)
    for e in errors:
        print(e, flush=True)
    return rc


def cmd_report(args) -> int:
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


def cmd_refloor(args) -> int:
    from jfa_verify.workflows.calibrate import read_records, refloor, write_records
    from jfa_verify.core.device import select_device

    out = Path(args.out)
    if out.resolve() in {Path(p).resolve() for p in args.records}:
        raise UsageError(f"--out {args.out}: is one of the input files; write the refloored records elsewhere")
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
        raise UsageError(f"--out {args.out}: cannot write there ({e.strerror or e}); give a writable file path")
    print(f"{len(fresh)} records, floors derived again from their cases ({changed} changed); wrote {out}")
    return EXIT_OK


def cmd_replay(args) -> int:
    """Re-run one case; never writes, moves or deletes the file it was given."""
    from jfa_verify.cases.case import Case
    from jfa_verify.run.corpus import RUNNING, read_case_file, replay_timeout
    from jfa_verify.core.device import select_device
    from jfa_verify.run.runner import run_case

    console = _console()
    if (args.file is None) == (args.case is None):
        raise UsageError("replay needs exactly one of FILE or --case JSON")
    from jfa_verify.checks.calls import is_call_file

    if args.file and is_call_file(args.file):
        return _replay_calls(args, console)
    if args.file:
        case, payload = read_case_file(args.file)
        args.kernel = args.kernel or payload.get("kernel", "triton_jfa")
    else:
        case, payload = Case.from_json(args.case), {}
        args.kernel = args.kernel or "triton_jfa"
    device = select_device(args.device)
    recorded = [p for p in payload.get("plugin_paths", ()) if p not in (args.plugin or ())]
    try:
        kernel = _kernel(args)
    except UnknownKernel as e:  # the file says which plugin registered it: name it
        if not recorded or args.plugin:
            raise
        raise UsageError(f"{e}; this case file was recorded with "
                         f"{' '.join(f'--plugin {p}' for p in recorded)}: add that to the command") from None
    memory = args.memory or payload.get("memory")
    timeout = replay_timeout(payload, args.timeout)
    if payload.get("status") in ("crash", "hang", RUNNING) or timeout:
        # A recorded crash or hang (or a case whose process died mid-case) replays in a case worker, so it cannot
        # take this command down with it.
        from jfa_verify.run.isolation import CaseWorker, WorkerSpec

        if timeout and not args.timeout:
            print(f"a recorded hang: replayed with a limit of {timeout:g} s, as long as its run waited "
                  f"(--timeout S to change)" if payload.get("status") != RUNNING else
                  f"a case whose run ended mid-case (a crash, a hang or a kill): replayed in a case worker with a "
                  f"limit of {timeout:g} s (--timeout S to change)", flush=True)
        with CaseWorker(WorkerSpec(kernel.name, device.type, tuple(args.plugin))) as worker:
            result = worker.run(case, timeout, memory=memory)
    else:
        result = run_case(case, kernel, device, plugins=args.plugin, memory=memory)
    result.reproducer = args.file
    print(result.explain(), flush=True)
    if payload.get("status") in ("fail", "error", "crash", "hang"):
        same = payload["status"] == result.status
        console.print(f"recorded verdict: {payload['status']}; replayed: {result.status} "
                      f"({'same' if same else 'DIFFERENT'})")
    if result.status == "unsupported":
        return EXIT_USAGE
    from jfa_verify.core.exits import exit_code_for

    return int(exit_code_for([result.status]))


def _replay_calls(args, console) -> int:
    """Replay a call file (a relation or a sequence of related calls) on one kernel object."""
    from jfa_verify.checks.calls import read_call_file
    from jfa_verify.core.device import select_device

    relation, payload = read_call_file(args.file)
    args.kernel = args.kernel or payload.get("kernel", "triton_jfa")
    device = select_device(args.device)
    kernel = _kernel(args)
    finding = relation.check(kernel, device)
    calls = len(relation.cases())
    print(f"[{'FAIL' if finding else 'PASS'}] relation {relation.name} over {calls} call(s) on {kernel.name}"
          + (f": {finding}" if finding else ""), flush=True)
    if payload.get("status") == "fail":
        console.print(f"recorded verdict: fail; replayed: {'fail (same)' if finding else 'pass (DIFFERENT)'}")
    return EXIT_FAIL if finding else EXIT_OK


def cmd_kernels(args) -> int:
    """One line per registered kernel: whether it can run on the device (its capabilities say; nothing is
    loaded), and why not; then the entry points that failed to import."""
    from jfa_verify.core.device import select_device
    from jfa_verify.core.errors import KernelConfigError
    from jfa_verify.protocol.registry import broken_entry_points, get_kernel, kernel_names, load_plugin

    device = select_device(args.device)
    for p in args.plugin:
        load_plugin(p)
    print(f"registered kernels, and whether each runs on this machine's {device.type} (--device to choose)")
    for name in kernel_names():
        try:
            k = get_kernel(name)
        except KernelConfigError as e:  # two packages register the name: listed, so the listing shows why
            print(f"{name:32s} {'ambiguous':12s} {e}")
            continue
        why = k.device_reason(device)
        caps = k.capabilities
        forward_only = why is None and caps.backward and device.type not in caps.backward_device_types
        state = f"not on {device.type}" if why else f"runs on {device.type}"
        note = why or (f"forward only on {device.type}" if forward_only else "")
        print(f"{name:32s} {state:12s} {k.description}" + (f" [{note}]" if note else ""))
    for name, why in broken_entry_points().items():
        print(f"{name:32s} {'broken':12s} {why}")
    return EXIT_OK


def cmd_schedule(args) -> int:
    from rich.table import Table

    from jfa_verify.core.lengths import sample_movielens_batch
    from jfa_verify.scheduling.schedule_report import compare_schedulers, plot_per_sm_load

    if args.lengths:
        lengths = args.lengths
    elif args.distribution == "movielens":
        lengths = sample_movielens_batch(args.batch, args.seed)
    else:
        import numpy as np

        rng = np.random.Generator(np.random.PCG64(args.seed))
        lengths = tuple(int(min(8192, 16 * (1 + rng.pareto(1.2)))) for _ in range(args.batch))
    rows = compare_schedulers(lengths, lengths, num_sms=args.num_sms, block_m=args.block_m, causal=args.causal)
    console = _console()
    table = Table(title=f"per-SM load (visible KV positions), {len(lengths)} sequences, {args.num_sms} SMs, "
                        f"BLOCK_M={args.block_m}")
    for col in ("scheduler", "tiles", "max load", "mean load", "imbalance (max/mean)", "list-scheduling bound",
                "within bound"):
        table.add_column(col)
    for r in rows:
        bound = f"{r['bound']:.0f}" if r["bounded"] else "-"
        within = ("yes" if r["within_bound"] else "NO") if r["bounded"] else "-"
        table.add_row(r["name"], str(r["num_tiles"]), f"{r['max_load']:.0f}", f"{r['mean_load']:.1f}",
                      f"{r['imbalance']:.3f}", bound, within)
    console.print(table, soft_wrap=False)
    if args.png:
        plot_per_sm_load(rows, args.png)
        console.print(f"wrote {args.png}")
    return EXIT_OK


def cmd_gate(args) -> int:
    """The CI gate: every check on every kernel named; JSON, JUnit and Markdown outputs; exit by the worst finding."""
    from jfa_verify.core.device import select_device
    from jfa_verify.workflows.gate import GateOptions, run_gate, write_outputs
    from jfa_verify.run.interrupts import terminate_as_interrupt
    from jfa_verify.checks.perf import read_baseline
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    if args.perf_baseline:
        read_baseline(args.perf_baseline)  # a bad baseline is a usage error before any work

    checks = tuple(dict.fromkeys([c for c in args.checks] + (["sanitizer"] if args.sanitizer else [])
                                 + (["perf"] if args.perf_baseline or args.perf_record else [])))
    options = GateOptions(checks=checks, campaign_examples=args.campaign_examples, seed=args.seed, reruns=args.reruns,
                          small_cases=args.small_cases, sanitizer_tools=tuple(args.sanitizer or ("memcheck",)),
                          perf_baseline=args.perf_baseline, perf_record=args.perf_record,
                          perf_threshold=args.perf_threshold, replay_dirs=tuple(args.replay),
                          reproducers=args.reproducers, timeout_s=args.timeout, jobs=args.jobs)
    device = select_device(args.device)
    for p in args.plugin:
        load_plugin(p)
    kernels = [get_kernel(name) for name in args.kernel or ["triton_jfa"]]
    with terminate_as_interrupt():  # a cancelled CI job: the report of what finished is written
        report = run_gate(kernels, device, options, plugins=args.plugin)
    written = write_outputs(report, json_path=args.json, junit_path=args.junit, markdown_path=args.markdown)
    print(report.to_markdown(), flush=True)
    if written:
        print("wrote " + ", ".join(str(p) for p in written))
    if report.interrupted:
        print(f"jfa-verify gate: interrupted after {len(report.results)} check(s) (report written)", file=sys.stderr)
    return report.exit_code()


def cmd_mutants(args) -> int:
    """Run the CI profile against each planted-bug mutant; exit 1 if any (non-gpu-only) mutant survives."""
    from jfa_verify.core.device import select_device
    from jfa_verify.core.exits import ExitCode
    from jfa_verify.fuzz.mutation import format_table, load_catalogue, run_mutants
    from jfa_verify.run.report import write_json

    if args.stage == "campaign" and args.max_examples == 0:
        raise UsageError("--max-examples 0 with --stage campaign checks nothing (every mutant would 'survive'): "
                         "give at least 1, or --stage suite / targeted")
    catalogue = load_catalogue(args.catalogue)
    args.only = list(dict.fromkeys(args.only))  # (`--only X X` ran X twice and counted it twice)
    for name in args.only:
        catalogue[name]  # unknown names fail before any work
    dev = select_device(args.device)
    done = []

    def keep(result) -> None:  # each verdict as it comes: an interrupted run keeps what finished
        done.append(result)
        print(f"  {result.name}: {result.status}" + (f" ({result.stage})" if result.stage else ""), flush=True)
        if args.json:
            write_json(args.json, [r.to_dict() for r in done])

    budget = {"targeted": f"targeted cases, then up to {args.max_examples} campaign examples per survivor",
              "suite": "the default suite and its relation checks, up to each mutant's first failure",
              "campaign": f"up to {args.max_examples} campaign examples per mutant"}[args.stage]
    total = len(args.only) if args.only else len(catalogue.mutants)
    # before the first verdict, which can take minutes: a new user saw nothing at all until then
    print(f"mutation testing of catalogue {catalogue.name} on {dev}, stage {args.stage} ({budget}): {total} "
          f"mutant(s), {args.jobs} at a time", flush=True)
    try:
        results = run_mutants(args.only or None, catalogue=args.catalogue, device=dev, max_examples=args.max_examples,
                              seed=args.seed, jobs=args.jobs, stage=args.stage, isolate=args.isolate, on_result=keep)
    except KeyboardInterrupt:
        if args.json:  # also when none finished: the JSON says so rather than being absent (or a stale earlier run's)
            write_json(args.json, [r.to_dict() for r in done])
        print(f"interrupted: {len(done)} of {total} mutant(s) have a verdict"
              + (f", written to {args.json}" if args.json else ""), flush=True)
        if done:
            print(format_table(done))
        return int(ExitCode.INTERRUPTED)
    print(format_table(results))
    if args.json:
        write_json(args.json, [r.to_dict() for r in results])  # in catalogue order
    if results and all(r.status == "skipped" for r in results):  # a CI step must not read this as all killed
        print(f"jfa-verify mutants: error: nothing checked: every mutant was skipped on {dev} "
              f"({results[0].reason}); run them where their kernel runs (`jfa-verify kernels`)", file=sys.stderr)
        return EXIT_USAGE
    survivors = [r.name for r in results if r.status == "survived"]
    unjudged = [f"{r.name} ({r.reason})" for r in results if r.status == "error"]
    if survivors:
        print(f"SURVIVED: {', '.join(survivors)}")
    if unjudged:
        print(f"NOT JUDGED (jfa-verify's own run of the mutant failed): {'; '.join(unjudged)}")
    return EXIT_FAIL if survivors or unjudged else EXIT_OK


def cmd_matrix(args) -> int:
    from jfa_verify.workflows.matrix import command

    return command(args)


def cmd_bisect(args) -> int:
    from jfa_verify.workflows.bisect.search import BisectRequest, run_bisect
    from jfa_verify.workflows.bisect.report import format_text

    req = BisectRequest(
        repo=args.repo, good=args.good, bad=args.bad, kernel=args.kernel, plugins=tuple(args.plugin),
        module=args.module, module_root=args.module_root, case_file=args.case, suite=args.suite, filter=args.filter or "",
        max_cases=args.max_cases, campaign=args.campaign, seed=args.seed, perf=args.perf, batch=args.batch,
        threshold=args.threshold, confidence=args.confidence, rounds=args.rounds, max_rounds=args.max_rounds,
        block_ms=args.block_ms, perf_backward=args.perf_backward, drift=args.drift, atol=args.atol, build=args.build,
        case_timeout=args.timeout, step_timeout=args.step_timeout, device=args.device, backward=not args.forward_only,
        out=args.out, keep=args.keep_temp)
    report = run_bisect(req, echo=lambda line: print(line, flush=True))
    print(format_text(report), flush=True)
    print(f"reports: {Path(args.out) / 'bisect.txt'}, bisect.md, bisect.json", flush=True)
    return report.exit_code


# ----------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from jfa_verify.checks.suites import SUITES  # the names only; get_suite refuses an unknown one with the list

    parser = _Parser(prog="jfa-verify", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def kernel_options(p, kernel_default: Optional[str] = "triton_jfa", reproducers: bool = True):
        p.add_argument("--kernel", default=kernel_default, help="registered kernel name (see `jfa-verify kernels`)")
        p.add_argument("--device", choices=("cuda", "cpu"), default=None,
                       help="default: cuda when available, else the CPU interpreter")
        p.add_argument("--plugin", action="append", default=[], metavar="FILE.py", type=existing_file,
                       help="import a file that registers kernels (repeatable)")
        if reproducers:
            p.add_argument("--reproducers", default="jfa-reproducers", type=folder,
                           help="folder for failing-case files")

    run = sub.add_parser(
        "run", help="verify a kernel on the built-in suite (the main job)",
        description="Verify a kernel on a built-in suite: each case through the kernel (forward and backward), the "
                    "float64 reference and the padded-SDPA oracle, judged by the calibrated budgets; prints a table "
                    "and the input classes covered, writes the JSON report and a reproducer per failing case. "
                    f"Exit status (jfa_verify/core/exits.py): 0 every case passed or was declared unsupported; "
                    f"{FINDINGS_IN_WORDS} (a broken relation check is a finding too); 2 a bad argument, a kernel that "
                    "cannot be loaded, or no case inside the kernel's capabilities (nothing checked); 130 "
                    "interrupted (the report is written).")
    kernel_options(run)
    run.add_argument("--suite", default="default", metavar="{" + ",".join(sorted(SUITES)) + "}",
                     help="default: a covering array of every pair of contract classes the kernel supports, then "
                          "fixed production layouts (MovieLens, tile edges); windows: sliding windows at their "
                          "edges; mha: half the default cases with H_kv = H_q, for kernels without GQA "
                          "(default: %(default)s)")
    run.add_argument("--seed", type=seed_int, default=0,
                     help="seed of the suite's values and of its covering array (default: %(default)s)")
    run.add_argument("--filter", default=None, type=name_part, help="only cases whose name contains this text")
    run.add_argument("--max-cases", type=positive_int, default=None,
                     help="run at most this many cases, in the suite's order (covering array first)")
    run.add_argument("--report", default="jfa-report.json", type=new_file,
                     help="JSON report to write (default: %(default)s)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar (CI logs)")
    run.add_argument("--timeout", type=positive_float, default=None,
                     help="seconds per case (compilation included); a case still running then is recorded as a "
                          "hang, its worker killed, and the run goes on")
    run.add_argument("--jobs", type=positive_int, default=1,
                     help="isolated worker processes running cases at once (default 1; they overlap Triton's "
                          "compiling, most of a suite's time on a fresh cache)")
    run.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                     help="run cases in a worker process, so a crash or hang is that case's finding (default); "
                          "--no-isolate runs them in this process (a crash ends the run)")
    run.set_defaults(func=cmd_run)

    fz = sub.add_parser("fuzz", help="Hypothesis campaign: adversarial cases, shrinking, deduplicated findings, "
                        "worker processes on one shared database",
                        description="A Hypothesis campaign against a kernel: saved findings replayed first, then new "
                                    "cases drawn (steered toward rarely drawn contract classes), each failure shrunk "
                                    "and kept as one finding per signature in --reproducers, with its replay command. "
                                    f"Exit status (jfa_verify/core/exits.py): 0 no finding; {FINDINGS_IN_WORDS}; 2 a bad "
                                    "argument, every case run outside the kernel's capabilities (nothing "
                                    "checked), or a case file in --reproducers that cannot be read (named, left as "
                                    "it is: a finding may be lost in it) beside no crash or hang; 130 interrupted "
                                    "(the summary and report are written).")
    kernel_options(fz)
    fz.add_argument("--max-examples", type=positive_int, default=None,
                    help="new cases to draw, over all workers (default 100, or no limit with --duration)")
    fz.add_argument("--duration", type=positive_float, default=None, metavar="SECONDS", help="stop after this long")
    fz.add_argument("--seed", type=seed_int, default=None,
                    help="seed of worker 0 (worker w: seed + w); default: a fresh random seed, printed")
    fz.add_argument("--timeout", type=positive_float, default=120.0,
                    help="seconds per case (compilation included) before it is a hang finding (default 120)")
    fz.add_argument("--forward-only", action="store_true", help="judge O and LSE only (no backward)")
    fz.add_argument("--workers", type=positive_int, default=1, help="campaign worker processes (default 1)")
    fz.add_argument("--gpus", type=lambda t: [g.strip() for g in t.split(",") if g.strip()], default=None,
                    metavar="0,1,...", help="GPUs the workers are pinned to, round-robin (default: every visible one)")
    fz.add_argument("--database", default=None, metavar="DIR|redis://HOST:PORT",
                    help="Hypothesis example database shared by the workers (default: REPRODUCERS/.hypothesis)")
    fz.add_argument("--read-from", action="append", default=[], metavar="DIR|redis://HOST:PORT",
                    help="also read (never write) this database (repeatable)")
    fz.add_argument("--report", default=None, type=new_file, help="write the campaign's JSON report here")
    fz.add_argument("--png", default=None, type=png_file, help="write a PNG of cases and findings over time here")
    fz.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                    help="run cases in a case-worker process, so crashes and hangs are findings (default)")
    fz.add_argument("--shrink-seconds", type=positive_float, default=120.0,
                    help="longest time spent shrinking one failure (default 120)")
    fz.add_argument("--no-progress", action="store_true",
                    help="no live progress (notes, such as findings recovered after a killed campaign, still print)")
    fz.add_argument("--progress-interval", type=positive_float, default=10.0,
                    help="seconds between progress lines when the output is not a terminal (default 10)")
    fz.add_argument("--covering", action="store_true",
                    help="first run the covering array of the contract's pairs of classes (failures there are kept "
                         "as found, unshrunk); drawing is always steered toward rarely drawn classes")
    fz.add_argument("--pack", type=positive_int, default=1, metavar="N",
                    help="run up to N drawn cases that share all but lengths and seed as one packed launch, each "
                         "judged on its own rows, the launch too; a failing pack is split until the failure stands "
                         "alone (default 1: no packing)")
    fz.set_defaults(func=cmd_fuzz)

    fnd = sub.add_parser(
        "findings", help="list the findings in a reproducer folder (one per signature), each with its replay command",
        description="List the findings in a reproducer folder, one per signature, each with its id and the command "
                    "that replays it. Exit status, as for the command that recorded them (jfa_verify/core/exits.py: "
                    f"a finding is not a usage error): 0 no finding listed; {FINDINGS_IN_WORDS}; 2 no such folder, "
                    "a bad argument, or a case file that cannot be read (named; a finding may be lost in it) beside "
                    "no crash or hang, or a case file still marked running (its process died mid-case: killed, or "
                    "taken down by the kernel; no verdict yet) beside no finding.")
    fnd.add_argument("folder", nargs="?", default=None, help="the folder (default jfa-reproducers)")
    fnd.add_argument("--reproducers", default=None, metavar="FOLDER", help="the folder, as run and fuzz name it")
    fnd.add_argument("--kernel", default=None, help="only this kernel's findings")
    fnd.add_argument("--json", action="store_true", help="print JSON instead of a table")
    fnd.set_defaults(func=cmd_findings)

    cal = sub.add_parser("calibrate", help="measure error distributions and fit a budget table")
    kernel_options(cal, reproducers=False)
    from jfa_verify.core.dtypes import DIFFERENTIABLE, DTYPES

    cal.add_argument("--dtypes", nargs="+", default=list(DIFFERENTIABLE), choices=tuple(DTYPES),
                     help="case dtypes to sample (float8_e4m3fn: forward-only kernels such as triton_jfa_fp8)")
    cal.add_argument("--cases", type=positive_int, default=200, help="drawn cases per dtype")
    cal.add_argument("--min-cases", type=positive_int, default=100,
                     help="fewest fitting cases a budget row may have (below: refuse to write the table)")
    cal.add_argument("--allow-few-cases", action="store_true", help="write a table fitted on fewer than --min-cases")
    cal.add_argument("--seed", type=seed_int, default=0, help="seed of the drawn cases (default: %(default)s)")
    cal.add_argument("--deadline", type=positive_float, default=None, help="stop sampling after this many seconds")
    cal.add_argument("--records", default="calibration-records.jsonl", type=new_file,
                     help="JSON-lines file the sampled cases are appended to (kept if the run is killed)")
    cal.add_argument("--progress-every", type=nonneg_int, default=0, metavar="N", help="print progress every N cases")
    cal.add_argument("--suite", default=None, help="also run this suite's cases first (e.g. default: long sequences)")
    cal.add_argument("--no-fit", action="store_true", help="only sample (to fit many runs' records later)")
    cal.add_argument("--window-cases", action="store_true",
                     help="draw only sliding-window cases (the kernel must declare a window mask)")
    cal.add_argument("--from-records", nargs="+", default=[], metavar="FILE", type=existing_file,
                     help="fit on these records (.jsonl or .jsonl.gz) instead of sampling")
    cal.add_argument("--holdout", nargs="+", default=[], metavar="FILE", type=existing_file,
                     help="judge the fitted table on these other records; a failure exits 1")
    cal.add_argument("--against", default=None, type=existing_file,
                     help="budget file the records are judged by (default: packaged)")
    cal.add_argument("--safety", type=positive_float, default=4.0, help="margin over the largest floor multiplier needed")
    cal.add_argument("--min-multiplier", type=nonneg_float, default=0.05, help="lowest scale of a row's floor constants")
    cal.add_argument("--min-floor-ulps", type=nonneg_float, default=1.0, help="lowest floor_ulps of a fitted row")
    cal.add_argument("--out", default="budgets.proposed.json", type=new_file,
                     help="where to write the proposed table (never the packaged file unless named)")
    cal.set_defaults(func=cmd_calibrate)

    rpt = sub.add_parser("report", help="plot calibration records: error vs length, headroom histograms (PNG)")
    rpt.add_argument("records", nargs="+", type=existing_file,
                     help="records files (.jsonl or .jsonl.gz) from jfa-verify calibrate")
    rpt.add_argument("--budgets", default=None, type=existing_file,
                     help="budget file the headroom is computed under (default: packaged)")
    rpt.add_argument("--out-dir", default="jfa-calibration-report", type=folder, help="folder for the PNG files")
    rpt.set_defaults(func=cmd_report)

    rfl = sub.add_parser("refloor", help="derive calibration records' floor terms again from their cases "
                         "(after an error-model change; the measured kernel and SDPA errors are kept)")
    rfl.add_argument("records", nargs="+", type=existing_file, help="records files (.jsonl or .jsonl.gz)")
    rfl.add_argument("--out", required=True, type=new_file, help="records file to write (.jsonl or .jsonl.gz)")
    rfl.add_argument("--device", choices=("cuda", "cpu"), default="cpu",
                     help="where the float64 reference runs (default cpu)")
    rfl.set_defaults(func=cmd_refloor)

    rep = sub.add_parser("replay", help="re-run a case file (or an inline case) and print its verdict",
                         description="Re-run a case file written by run, fuzz, gate or matrix (or an inline case) "
                                     "on the kernel it names, and print the verdict beside the recorded one. Exit "
                                     f"status as the verdict: 0 pass; {FINDINGS_IN_WORDS}; 2 a bad argument or an "
                                     "unreadable file.")
    rep.add_argument("file", nargs="?", type=existing_file, help="case file written by run or a fuzz campaign")
    rep.add_argument("--case", help="inline case JSON instead of a file")
    rep.add_argument("--timeout", type=positive_float, default=None,
                     help="run in a case worker with this limit (a recorded crash or hang always runs in one)")
    rep.add_argument("--memory", choices=("nan", "large"), default=None,
                     help="guard bands around every allocation, uninitialized memory filled with NaN or large "
                          "values (default: what the case file recorded: the gate's canary and recycled-memory runs)")
    kernel_options(rep, kernel_default=None, reproducers=False)
    rep.set_defaults(func=cmd_replay)

    ker = sub.add_parser("kernels", help="list registered kernels and whether each runs on this machine's device "
                         "(why not, if not)",
                         description="List the registered kernels (built in, installed packages' entry points, "
                         "--plugin files) and whether each runs on the device, with the reason when not, from its "
                         "declared capabilities; entry points that failed to import are named. Exit status: 0; 2 a "
                         "bad argument (a device torch does not see, a plugin that cannot be loaded).")
    ker.add_argument("--device", choices=("cuda", "cpu"), default=None,
                     help="the device to ask about (default: cuda when available, else the CPU interpreter)")
    ker.add_argument("--plugin", action="append", default=[], type=existing_file, metavar="FILE.py",
                     help="import a file that registers kernels (repeatable)")
    ker.set_defaults(func=cmd_kernels)

    sch = sub.add_parser("schedule", help="per-SM load of launch-order, round-robin, zigzag and dynamic schedules")
    sch.add_argument("--distribution", choices=("movielens", "pareto"), default="movielens",
                     help="sequence lengths drawn from MovieLens or a Pareto law (default: %(default)s)")
    sch.add_argument("--lengths", type=lengths_list, help="comma-separated lengths instead of a distribution")
    sch.add_argument("--batch", type=positive_int, default=256, help="sequences in the batch (default: %(default)s)")
    sch.add_argument("--num-sms", type=positive_int, default=132,
                     help="persistent programs, one per SM (default: %(default)s, an H200)")
    sch.add_argument("--block-m", type=positive_int, default=64, help="query rows per tile (default: %(default)s)")
    sch.add_argument("--causal", action="store_true", help="causal (top-left): a tile's load is the key tiles its rows see")
    sch.add_argument("--seed", type=seed_int, default=0, help="seed of the drawn lengths (default: %(default)s)")
    sch.add_argument("--png", type=png_file, help="write a per-SM load plot here")
    sch.set_defaults(func=cmd_schedule)

    gate = sub.add_parser("gate", help="the CI gate: suite, campaign, replays, determinism, canaries, recycled memory "
                          "(+ sanitizer, perf); JUnit/JSON/Markdown",
                          description="The one command a CI job runs for a kernel change: the default suite, a "
                                      "fixed-seed campaign, replays of saved findings, determinism reruns, guard-band "
                                      "canaries, recycled memory, and on request compute-sanitizer and a performance "
                                      "check; checks the GPU or the kernel cannot run are skipped with the reason. "
                                      "Exit status: 4 a kernel crashed its process, else 3 one hung, else 1 any other "
                                      "finding; 2 nothing could be checked, a check could not judge, or a bad "
                                      "configuration; 0 everything checked passed.")
    gate.add_argument("--kernel", action="append", default=[], help="kernel to gate (repeatable; default triton_jfa)")
    gate.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available, else the CPU interpreter")
    gate.add_argument("--plugin", action="append", default=[], metavar="FILE.py", type=existing_file,
                      help="import a file that registers kernels (repeatable)")
    gate.add_argument("--checks", nargs="+", default=["suite", "campaign", "replay", "determinism", "canaries",
                                                      "recycled_memory"],
                      choices=("suite", "campaign", "replay", "determinism", "canaries", "recycled_memory"),
                      help="checks to run (sanitizer and perf run when their options are given)")
    gate.add_argument("--campaign-examples", type=positive_int, default=25,
                      help="new cases the fixed-seed campaign draws (default: %(default)s)")
    gate.add_argument("--seed", type=seed_int, default=0, help="the campaign's seed (printed; same seed, same draws)")
    gate.add_argument("--reruns", type=_number(int, minimum=2), default=3, help="runs per determinism case (>= 2)")
    gate.add_argument("--small-cases", type=positive_int, default=4,
                      help="cases per determinism, canary and recycled-memory check")
    gate.add_argument("--sanitizer", nargs="*", choices=("memcheck", "racecheck", "initcheck", "synccheck"),
                      help="run the first suite cases under compute-sanitizer with these tools (CUDA; default memcheck)")
    gate.add_argument("--perf-baseline", type=existing_file, help="committed timings to compare with (jfa-verify-perf/1)")
    gate.add_argument("--perf-record", type=new_file, help="write this run's timings as a baseline")
    gate.add_argument("--perf-threshold", type=positive_float, default=0.05, help="slowdown tolerated beyond noise")
    gate.add_argument("--replay", action="append", default=[], type=existing_folder,
                      help="replay the case files in this folder (e.g. a nightly campaign's artifacts)")
    gate.add_argument("--reproducers", default="jfa-reproducers", type=folder, help="folder for failing-case files")
    gate.add_argument("--timeout", type=positive_float, default=None, help="seconds per case before it is a hang")
    gate.add_argument("--jobs", type=positive_int, default=1,
                      help="worker processes of the suite and the campaign (default 1; on a GPU they overlap "
                           "Triton's compiling)")
    gate.add_argument("--json", type=new_file, default="jfa-gate.json", help="the gate report (JSON)")
    gate.add_argument("--junit", type=new_file, default="jfa-gate.junit.xml", help="JUnit XML")
    gate.add_argument("--markdown", type=new_file, default="jfa-gate.md",
                      help="Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set)")
    gate.set_defaults(func=cmd_gate)
    mat = sub.add_parser("matrix", help="kernels x cases in one table: pass/fail/error/unsupported, worst headroom, "
                         "findings with replay commands; JSON, Markdown and a PNG heat map",
                         description="Run the same cases through several kernels (and a campaign per kernel) and "
                                     "tabulate the verdicts; headroom is a cell's worst error over its allowance "
                                     "(above 1 fails). Exit status: 4 a finding is a crash, else 3 a hang, else 1 "
                                     "a finding; 2 a bad argument or no case inside any kernel's capabilities; "
                                     "0 otherwise (docs/peers.md).")
    mat.add_argument("--kernel", action="append", default=[], help="a registered kernel (repeat for each)")
    mat.add_argument("--suite", action="append", default=[],
                     help="built-in suite: default, windows or mha (repeatable; default: default)")
    mat.add_argument("--campaign", type=nonneg_int, default=0, metavar="N",
                     help="then a campaign of N examples per kernel that keeps searching after a finding")
    mat.add_argument("--device", choices=("cuda", "cpu"), default=None,
                     help="where the cases run (default: cuda when there is a GPU, else the CPU interpreter)")
    mat.add_argument("--plugin", action="append", default=[], metavar="FILE.py", type=existing_file,
                     help="import a file that registers kernels (repeatable; named in every replay command)")
    mat.add_argument("--reproducers", default="jfa-reproducers", type=folder,
                     help="folder for failing-case files (default: jfa-reproducers)")
    from jfa_verify.core.conventions import CONVENTIONS

    mat.add_argument("--accept", action="append", default=[], metavar="CONVENTION", choices=sorted(CONVENTIONS),
                     help="accept a kernel's declared convention (e.g. lse_plus_inf_empty_rows): its findings pass, "
                          "marked accepted")
    mat.add_argument("--filter", default=None, type=name_part, help="only cases whose name contains this text")
    mat.add_argument("--max-cases", type=positive_int, default=None, help="only the first N cases of the suites")
    mat.add_argument("--seed", type=seed_int, default=0, help="seed of the suites' values and of the campaigns")
    mat.add_argument("--timeout", type=positive_float, default=None,
                     help="seconds per case; one past it is a hang finding (with --no-isolate it ends the run, "
                          "exit 3)")
    mat.add_argument("--deadline", type=positive_float, default=None,
                     help="wall-clock seconds: cells not started by then are 'not run' (with --campaign: by 65%% "
                          "of it, the campaigns share the rest)")
    mat.add_argument("--forward-only", action="store_true", help="judge O and LSE only (no backward)")
    mat.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                     help="run each case in a worker process, so a crash, a hang or a sticky CUDA error is that case's "
                          "finding and the run goes on (default); --no-isolate runs them in this process")
    mat.add_argument("--jobs", type=positive_int, default=1,
                     help="worker processes per kernel, running its cases at once (default 1); more than 1 runs "
                          "each case in an isolated worker (implies --isolate) and overlaps Triton's compiling, "
                          "most of a suite's time on a fresh cache; verdicts do not depend on it")
    mat.add_argument("--json", default=None, type=new_file, help="write the matrix as JSON")
    mat.add_argument("--markdown", default=None, type=new_file, help="write the table and findings as Markdown")
    mat.add_argument("--png", default=None, type=png_file, help="write a heat map of headroom (kernel x case)")
    mat.add_argument("--from-json", nargs="+", default=[], metavar="FILE", type=existing_file,
                     help="merge matrices written by --json (one process per kernel) instead of running")
    mat.add_argument("--quiet", action="store_true", help="no line per case")
    # the options that only shape a run: `matrix --from-json` refuses them (it would ignore them)
    run_options = ("kernel", "suite", "campaign", "device", "plugin", "reproducers", "accept", "filter", "max_cases",
                   "seed", "timeout", "deadline", "forward_only", "isolate", "jobs")
    mat.set_defaults(func=cmd_matrix, run_defaults={dest: mat.get_default(dest) for dest in run_options})

    mut = sub.add_parser("mutants", help="mutation testing: the CI profile against each planted-bug kernel",
                         description="Mutation testing: each planted bug of a catalogue (a one-line change of the "
                         "kernel's source, or a corrupted scheduler) runs in its own process through the stage's "
                         "cases up to its first failure: killed, survived, skipped (its kernel does not run on this "
                         "device, or it needs a GPU) or not judged (the run of it failed, or its patch no longer "
                         "applies). Exit status: 0 every mutant run was killed; 1 a mutant survived or was not "
                         "judged; 2 a bad argument, or nothing checked (every mutant skipped); 130 interrupted (the "
                         "verdicts that finished are kept in --json).")
    mut.add_argument("--catalogue", default="triton_jfa", help="packaged catalogue name or a catalogue JSON file")
    mut.add_argument("--only", nargs="+", action="extend", default=[], metavar="NAME", help="only these mutants")
    mut.add_argument("--max-examples", type=nonneg_int, default=10,
                     help="campaign examples for a mutant the targeted cases miss")
    mut.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available, else the CPU interpreter")
    mut.add_argument("--seed", type=seed_int, default=0, help="seed of the suite's values and of each mutant's campaign (default: %(default)s)")
    mut.add_argument("--json", default=None, type=new_file, help="also write the results here")
    mut.add_argument("--jobs", type=positive_int, default=1, help="mutants run at once, each in its own process")
    mut.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                     help="each mutant in its own process (default), so one that aborts or segfaults is killed by "
                          "its crash; --no-isolate runs them in this process (a crash ends the command)")
    mut.add_argument("--stage", choices=("targeted", "suite", "campaign"), default="targeted",
                     help="targeted: fixed targeted cases, then a short campaign; suite: the default suite and its "
                          "relation checks (what `jfa-verify run` catches); campaign: --max-examples drawn cases alone")
    mut.set_defaults(func=cmd_mutants)

    bis = sub.add_parser("bisect", help="find the kernel commit that broke correctness, speed or bits "
                         "(git bisect run in a temporary worktree; see docs/bisect.md)")
    bis.add_argument("--repo", required=True, help="the kernel's git repository (never modified)")
    bis.add_argument("--good", required=True, metavar="REV", help="a commit where the kernel is right (or fast)")
    bis.add_argument("--bad", required=True, metavar="REV", help="a later commit where it is not")
    bis.add_argument("--kernel", default=None, help="registered kernel name (default: the --case file's kernel)")
    bis.add_argument("--plugin", action="append", default=[], metavar="RELPATH",
                     help="file in the repository that registers the kernel (repeatable)")
    bis.add_argument("--module", default=None, help="module in the repository that registers the kernel")
    bis.add_argument("--module-root", default=".", metavar="RELDIR", help="folder put on sys.path for --module")
    what = bis.add_mutually_exclusive_group()
    what.add_argument("--case", default=None, type=existing_file, metavar="FILE",
                      help="a reproducer file (read once; never modified)")
    what.add_argument("--suite", default=None, help="a built-in suite (with --filter, --max-cases)")
    what.add_argument("--campaign", default=None, type=positive_int, metavar="N",
                      help="a Hypothesis campaign of N examples with --seed")
    bis.add_argument("--filter", default=None, type=name_part, help="only suite cases whose name contains this text")
    bis.add_argument("--max-cases", type=positive_int, default=None, help="only the first N suite cases")
    bis.add_argument("--seed", type=seed_int, default=0, help="seed of the suite's values or the campaign (default: 0)")
    bis.add_argument("--perf", action="store_true", help="performance bisect: slower than --good by --threshold")
    bis.add_argument("--batch", default=None, help="benchmark batch to time (--perf; default movielens)")
    bis.add_argument("--threshold", type=percent, default=None, metavar="PCT",
                     help="slowdown called bad (--perf; default 5%%)")
    bis.add_argument("--confidence", type=_number(float, minimum=0.5), default=0.95,
                     help="confidence of the slowdown interval (--perf)")
    bis.add_argument("--rounds", type=_number(int, minimum=6), default=8,
                     help="interleaved timing rounds, added again while undecided (--perf)")
    bis.add_argument("--max-rounds", type=positive_int, default=24,
                     help="most timing rounds before a commit is called undecided (--perf; default: %(default)s)")
    bis.add_argument("--block-ms", type=positive_float, default=None,
                     help="milliseconds of calls per timing sample (--perf; default 50)")
    bis.add_argument("--perf-backward", action="store_true", help="time forward and backward (--perf)")
    bis.add_argument("--drift", action="store_true",
                     help="bisect where outputs stopped matching --good's, bit for bit (or within --atol)")
    bis.add_argument("--atol", type=nonneg_float, default=None, help="drift tolerance (--drift)")
    bis.add_argument("--build", default=None, metavar="CMD",
                     help="shell command run in the checkout first at each commit; non-zero exit skips the commit")
    bis.add_argument("--timeout", type=positive_float, default=None, help="seconds per case (past it: skip)")
    bis.add_argument("--step-timeout", type=positive_float, default=1800.0,
                     help="seconds per commit, build included (past it: skip)")
    bis.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda when available, else the CPU interpreter")
    bis.add_argument("--forward-only", action="store_true", help="judge O and LSE only (no backward)")
    bis.add_argument("--out", default="jfa-bisect", type=folder, help="folder for the reports and the reproducer")
    bis.add_argument("--keep-temp", action="store_true", help="keep the temporary state folder (debugging)")
    bis.set_defaults(func=cmd_bisect)
    return parser


_OUTPUT_FILES = ("report", "png", "json", "junit", "markdown")


def _outputs_apart(args) -> None:
    """Refuse an output file named like the ``--reproducers`` folder, or two outputs on one file (a new user's
    ``--reproducers r --report r --png r``: a traceback after the whole campaign, or a PNG silently not written).

    Raises:
        UsageError: naming the clashing options.
    """
    named = {f"--{a}": getattr(args, a) for a in _OUTPUT_FILES if isinstance(getattr(args, a, None), str)}
    seen: dict = {}
    folder = getattr(args, "reproducers", None)
    for option, value in named.items():
        where = Path(value).resolve()
        if folder and where == Path(folder).resolve():
            raise UsageError(f"{option} {value} is the --reproducers folder; give the file another name")
        if where in seen:
            raise UsageError(f"{seen[where]} and {option} are both {value}; give each its own file")
        seen[where] = option


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``jfa-verify`` console script; returns the exit status (:class:`ExitCode`).

    Ctrl-C or SIGTERM at any point, from the first import on (torch's loading takes seconds), ends it with one line
    and exit 130, never a traceback or a death by the signal: ``import jfa_verify`` loads nothing heavy, and everything
    after is in here."""
    from jfa_verify.run.interrupts import terminate_as_interrupt

    try:
        with terminate_as_interrupt():  # (a CI timeout's SIGTERM while torch loads killed it without a word)
            return _main(argv)
    except KeyboardInterrupt:  # (before a command runs: while torch and the rest load, or arguments are checked)
        print("\njfa-verify: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)


def _main(argv: Optional[Sequence[str]]) -> int:
    for token in (sys.argv[1:] if argv is None else argv):
        if token == "--":
            break
        # argparse drops a lone "--" from an option's value, so `--lengths=--` parsed as no value at all
        # and the command ran on its defaults
        name, eq, value = token.partition("=")
        if eq and name.startswith("--") and value == "--":
            print(f"jfa-verify: error: argument {name}: '--' is not a value (it marks the end of the options); "
                  f"give {name}=VALUE", file=sys.stderr)
            return EXIT_USAGE
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # a bad argument (exit 2, one line already printed) or --help (0)
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    except ModuleNotFoundError as e:  # the parser imports numpy (its choices come from the suites): a --no-deps
        from jfa_verify.core.errors import missing_dependency  # install without it gave every command, --version too, a traceback

        print(f"jfa-verify: error: {missing_dependency(e)}", file=sys.stderr)
        return EXIT_USAGE
    from jfa_verify.cli.closed_reader import output_outlives_reader
    from jfa_verify.core.device import device_scope
    from jfa_verify.run.interrupts import terminate_as_interrupt

    with output_outlives_reader():  # `| head` ends neither the command nor its exit status
        try:
            _outputs_apart(args)
            # SIGTERM (a CI job's timeout, `kill`) ends any command as Ctrl-C does: exit 130 with what it has
            with device_scope(), terminate_as_interrupt():  # and a caller's own device choice survives the command
                return args.func(args)
        except (JFAError, UsageError) as e:
            print(f"jfa-verify {args.command}: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        except ModuleNotFoundError as e:  # one of jfa-verify's own dependencies (a kernel's import errors are
            # verdicts of its cases): a configuration error, not a finding (a traceback exited 1 on an H200
            # installed with --no-deps, 2026-12-03)
            from jfa_verify.core.errors import missing_dependency

            print(f"jfa-verify {args.command}: error: {missing_dependency(e)}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print(f"\njfa-verify {args.command}: interrupted", file=sys.stderr)
            return int(ExitCode.INTERRUPTED)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
