"""``jfa-verify run``'s workflow: verify one kernel on a built-in suite, then the suite's relation checks, writing the
JSON report at every stage (reproducers are written by the verifier and the relation checks as findings come).

The report file always says where the run got to once the run has started: a usage error before any case (an unknown
kernel or suite, a plugin that fails to import, a filter matching nothing: exit 2) writes nothing, leaving an earlier
report as it was; once the cases are chosen (or a Ctrl-C stopped the loading) it says the run has not finished (an
earlier run's report must never stand for this one's), after the cases it holds every case's verdict (a kill during
the relation checks keeps them), and at the end the relation checks too. Each write goes to a temporary file renamed
over the report (:func:`~jfa_verify.run.report.write_json`). What is printed, and when, is the caller's: it passes a
:class:`RunObserver`.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.exits import ExitCode
from jfa_verify.core.paths import DEFAULT_REPRODUCERS


def _isolated():
    """RunRequest's default settings: cases in isolated workers, as the command line runs them."""
    from jfa_verify.run.settings import RunSettings

    return RunSettings(isolate=True)


@dataclass(frozen=True)
class RunRequest:
    """What to run: the kernel (by name; ``load_kernel`` loads it), the suite, which of its cases, where to write."""

    kernel: str
    suite: str = "default"
    filter: Optional[str] = None  # only cases whose name contains this text
    max_cases: Optional[int] = None  # the first N cases (after the filter)
    report: str = "jfa-report.json"
    reproducers: Optional[str] = DEFAULT_REPRODUCERS
    # how every case runs (timeout, plugins, isolation) and the suite's seed: a
    # :class:`~jfa_verify.run.settings.RunSettings`, isolated by default; its ``jobs`` is set from :attr:`jobs`
    settings: object = field(default_factory=_isolated)
    jobs: Optional[int] = 1  # None: the machine's default (:func:`~jfa_verify.run.parallelism.choose_jobs`)
    precompile: bool = True  # build the cases' kernel variants first, in parallel (:mod:`jfa_verify.run.precompile`)


class RunObserver(Protocol):
    """The caller's view of a run, called in this order (the command line prints from it)."""

    def planned(self, kernel, suite, cases: list, jobs) -> None:
        """The cases are chosen and about to run, in ``jobs`` workers (a :class:`~jfa_verify.run.parallelism.Jobs`)."""

    def precompiled(self, result) -> None:
        """The precompile step ended (a :class:`~jfa_verify.run.precompile.Precompiled`; optional for an observer)."""

    def verifying(self, kernel, total: int) -> AbstractContextManager[Callable]:
        """Around the cases: yields a function called with each case's result as it finishes."""

    def verified(self, kernel, results: list, coverage, pairs) -> None:
        """Every case has a verdict (on disk already); the relation checks come next."""


@dataclass
class RunOutcome:
    """Where the run got to. ``cases`` None: stopped before any case ran (while the kernel loaded or the suite was
    built); ``skipped``: why the relation checks did not run (None: they ran; the suite having none for the kernel
    is a reason too, said as such: a new user read "0/0 relation checks held" as checks that ran)."""

    report: object  # the report's path
    kernel: object = None
    suite: object = None
    cases: Optional[list] = None
    results: list = field(default_factory=list)
    interrupted: bool = False
    relations: list = field(default_factory=list)  # the relation checks planned
    checked: list = field(default_factory=list)  # each planned check's finding line, or None where it held
    skipped: Optional[str] = None
    jobs: object = None  # the workers' :class:`~jfa_verify.run.parallelism.Jobs`, once the cases are chosen
    # the cases an interrupt stopped mid-run: ``{"case", "seconds", "replay"}`` each (no verdict, so no case file)
    in_flight: list = field(default_factory=list)
    precompiled: object = None  # the :class:`~jfa_verify.run.precompile.Precompiled` step, once it ran
    # wall seconds of each phase that ran, in order: "suite" (the kernel loaded, the suite and its covering array
    # built), "precompile", "cases", "relations" (where checks ran): where a cold or warm run's time goes (issue 39)
    phases: dict = field(default_factory=dict)
    # cases run again alone after running out of device memory beside the others, and how many then did not
    memory_reruns: tuple = (0, 0)

    @property
    def findings(self) -> list[str]:
        return [line for line in self.checked if line is not None]

    def phase_seconds(self) -> dict[str, float]:
        """:attr:`phases` to the millisecond, as the report gives them."""
        return {k: round(v, 3) for k, v in self.phases.items()}

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.results)
                for s in ("pass", "fail", "error", "crash", "hang", "unsupported")}


def run_suite(request: RunRequest, device, load_kernel: Callable[[], object], observer: RunObserver) -> RunOutcome:
    """Verify ``request.kernel`` on its suite, then the suite's relation checks; returns where the run got to.

    ``device`` must have been chosen already (on the CPU it turns on Triton's interpreter, which must precede any import
    of triton: the report imports it). ``load_kernel`` loads the kernel (plugins first); a Ctrl-C while it loads or the
    suite is built returns an outcome with no cases.

    Raises:
        InvalidInput: the kernel does not run on ``device``, no case of the suite matches the filter,
            ``$JFA_VERIFY_JOBS`` is no worker count, or the report cannot be written (before any case).
        JFAError: the kernel cannot be loaded (its plugin, or its ``load()``: :class:`KernelConfigError`), or the
            suite does not exist. Nothing ran: no report is written, nothing is printed, and an
            earlier one is left as it was (issue 43, 3: ``run --kernel nope`` replaced a finished report with an
            empty error report).
    """
    from jfa_verify.run.report import run_report, write_json

    # Once the run has started, and until this run's report replaces it, the file says the run did not finish: a
    # Ctrl-C while the kernel loads or the suite is built, or a kill during the cases, must not leave an earlier
    # run's report there to be read as this one's. ("interrupted": null while it runs: nothing has stopped it yet,
    # and it has not finished either)
    def report_before_cases(interrupted: Optional[bool], outcome: Optional[RunOutcome] = None):
        extra = {"finished": False, "interrupted": interrupted, "cases_planned": None,
                 "exit_code": int(ExitCode.INTERRUPTED) if interrupted else None}
        if outcome is not None:  # a stop: the phases it spent, as a later stop's report gives them
            extra["phases_seconds"] = outcome.phase_seconds()
        return write_json(request.report, run_report([], kernel=request.kernel, device=device, extra=extra))

    from jfa_verify.run.parallelism import build_jobs

    started = time.perf_counter()
    try:
        kernel, suite, cases = _cases(request, device, load_kernel)  # a JFAError: a usage error, the report untouched
    except KeyboardInterrupt:  # loading and the covering array take seconds: the report says so, as a later stop's
        outcome = RunOutcome(None, interrupted=True, phases={"suite": time.perf_counter() - started})
        outcome.report = report_before_cases(True, outcome)
        return outcome
    jobs = _jobs(request, device, len(cases))  # (a bad $JFA_VERIFY_JOBS: a usage error, the report untouched)
    try:
        report = report_before_cases(None)
    except OSError as e:  # a full disk, a read-only folder: the machine, not a bug of jfa-verify (a new user's
        # --report /dev/full was an internal error, exit 70); no case has run
        raise InvalidInput(f"--report {request.report}: cannot be written ({e.strerror or e}); give a path on a "
                           f"writable disk with space") from None
    outcome = RunOutcome(report, kernel, suite, cases, jobs=jobs)
    outcome.phases["suite"] = time.perf_counter() - started
    from jfa_verify.run.loop import Verifier

    outcome.skipped = _relations_not_run(request, suite, kernel)  # (a crash or hang in the cases may add a reason)
    relations = () if outcome.skipped else suite.relations
    with Verifier(kernel, device, request.reproducers, request.settings.replace(jobs=jobs.count)) as verifier, \
            _relation_worker(request, kernel, device, relations) as relation_worker:
        try:  # (a stop from here to the first case: the report says the run stopped, as a later stop's does)
            observer.planned(kernel, suite, cases, jobs)
            # the case workers (and the relation checks' worker) load torch, the kernel and the device's context while
            # the variants build
            verifier.start_early()
            if relation_worker is not None:
                relation_worker.start_early()
            with _timed(outcome.phases, "precompile"):
                outcome.precompiled = precompile_cases(kernel, cases, device, jobs=build_jobs(jobs),
                                                       plugins=request.settings.plugins, enabled=request.precompile,
                                                       relations=relations)
        except KeyboardInterrupt:  # no case ran: the report says the run stopped
            outcome.report, outcome.interrupted = report_before_cases(True, outcome), True
            return outcome
        getattr(observer, "precompiled", lambda result: None)(outcome.precompiled)
        _verify(outcome, request, device, observer, verifier, relation_worker)
    return outcome


class _Journal:
    """The verdicts of a run that judges its cases in its own process, appended as they come to
    :func:`~jfa_verify.run.report.journal_path` (a first line says how many cases were planned): what the process that
    waits on the run reads back when a kernel takes this one down."""

    def __init__(self, report: str, planned: int):
        from jfa_verify.core.json_text import dumps
        from jfa_verify.run.report import journal_path

        self.path, self._dumps = journal_path(report), dumps
        self.path.write_text(dumps({"cases_planned": planned}) + "\n")  # (an earlier run's journal is replaced)

    def add(self, result) -> None:
        with open(self.path, "a") as f:  # (a line each, flushed on close: a death loses at most the case it died in)
            f.write(self._dumps(result.to_dict()) + "\n")

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


@contextmanager
def _relation_worker(request: RunRequest, kernel, device, relations):
    """The isolated worker of the run's relation checks (None in-process, or with none to run), closed on leaving:
    started with the case workers, its child's first check did not wait for its start-up after the cases (a fresh
    worker's start-up and first backward were most of the 5 s relation phase on an H100)."""
    from jfa_verify.checks.calls import RelationWorker, relation_worker_spec

    worker = (RelationWorker(relation_worker_spec(kernel, device, request.settings.plugins))
              if relations and request.settings.isolate else None)
    try:
        yield worker
    finally:
        if worker is not None:
            worker.close()


def precompile_cases(kernel, cases, device, *, jobs: int, plugins=(), enabled: bool = True, backward: bool = True,
                     memory=None, relations=()):
    """The run's precompile step (:func:`~jfa_verify.run.precompile.precompile`; ``enabled`` False: a record saying it
    was turned off, ``--no-precompile``); ``relations``: the relation checks the run will make after its cases."""
    from jfa_verify.run.precompile import Precompiled, precompile

    if not enabled:
        return Precompiled(cases=len(cases), skipped="--no-precompile")
    return precompile(kernel, cases, device, jobs=jobs, plugins=plugins, backward=backward, memory=memory,
                      relations=relations)


def _relations_not_run(request: RunRequest, suite, kernel) -> Optional[str]:
    """Why the run makes none of its suite's relation checks, as far as that is known before its cases run (a
    crash, a hang or an interrupt among them also stops them: :func:`_verify`), else None."""
    none = (f"suite {suite.name!r} has no relation check inside the capabilities of kernel {kernel.name!r}"
            if suite.makes_relations else
            f"suite {suite.name!r} makes no relation checks; the default suite does")
    return next((why for why, cond in ((none, not suite.relations), ("--filter", request.filter),
                                       ("--max-cases", request.max_cases)) if cond), None)


def check_runs_on(kernel, device) -> None:
    """Refuse a kernel whose declared capabilities exclude ``device``, or whose ``load()`` raises or returns no
    implementation: before a command prints its banner or writes a report (a new user's plugin whose ``load()``
    raised was found at the first case, after ``run`` had printed its banner and written an empty report, and after
    ``fuzz`` had started its workers).

    Raises:
        InvalidInput: naming why, and where to look.
        KernelConfigError: the kernel's ``load()`` raised (naming the kernel, its loader and the exception) or
            returned no implementation; a usage error (exit 2), as every :class:`~jfa_verify.core.errors.JFAError`.
    """
    elsewhere = kernel.device_reason(device)
    if elsewhere:
        raise InvalidInput(f"kernel {kernel.name!r} does not run on {device.type}: {elsewhere}; `jfa-verify "
                           f"kernels` lists where each kernel runs")
    kernel.impl  # (loads it once, in this process; the case workers load their own)


def _cases(request: RunRequest, device, load_kernel):
    from jfa_verify.checks.suites import get_suite

    kernel = load_kernel()
    check_runs_on(kernel, device)  # before the suite is built and 84 cases are dispatched only to be unsupported
    suite = get_suite(request.suite, device.type, request.settings.seed, kernel=kernel)
    cases = suite.matching(request.filter)
    if not cases:
        raise InvalidInput(f"--filter {request.filter!r}: no case of suite {request.suite!r} matches; names look "
                           f"like {suite.cases[0].name!r}")
    return kernel, suite, cases[: request.max_cases] if request.max_cases else cases


def _jobs(request: RunRequest, device, cases: int):
    """The run's workers: ``request.jobs``, else the machine's default for ``cases`` cases; one without isolation."""
    from jfa_verify.run.parallelism import Jobs, choose_jobs

    if not request.settings.isolate and request.jobs is None:
        return Jobs(1, "given", "in this process")
    return choose_jobs(request.jobs, device, work=cases)


def _verify(outcome: RunOutcome, request: RunRequest, device, observer: RunObserver, verifier,
            relation_worker=None) -> None:
    import contextlib

    from jfa_verify.run.interrupts import stops_held, terminate_as_interrupt

    with contextlib.ExitStack() as stack:
        stack.enter_context(terminate_as_interrupt())
        # once a stop has ended the cases, a second one (a Ctrl-C pressed twice) must not cost the report
        _verify_held(outcome, request, device, observer, verifier, hold=lambda: stack.enter_context(stops_held()),
                     relation_worker=relation_worker)


def _verify_held(outcome: RunOutcome, request: RunRequest, device, observer: RunObserver, verifier, *,
                 hold: Callable[[], object], relation_worker=None) -> None:
    from jfa_verify.cases.coverage import Coverage
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.cases.pairs import PairCoverage
    from jfa_verify.checks.calls import check_relations
    from jfa_verify.run.corpus import replay_command
    from jfa_verify.run.report import run_report, write_json

    kernel, suite, cases = outcome.kernel, outcome.suite, outcome.cases
    done: list = []
    journal = _Journal(request.report, len(cases)) if not request.settings.isolate else None
    try:
        with observer.verifying(kernel, len(cases)) as seen, _timed(outcome.phases, "cases"):
            outcome.results = verifier.verify_all(
                cases, on_result=lambda r: (done.append(r), seen(r), journal is not None and journal.add(r)))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: report what was verified, then stop
        hold()
        outcome.results, outcome.interrupted = done, True
        outcome.in_flight = [{"case": case.name or case.case_id(), "seconds": round(seconds, 1),
                              "replay": replay_command(case, kernel.name, request.settings.plugins,
                                                       memory=request.settings.memory,
                                                       timeout_s=request.settings.timeout_s)}
                             for case, seconds in verifier.interrupted_cases]
    outcome.memory_reruns = tuple(verifier.memory_reruns)
    verifier.close()  # (the relation checks have a worker of their own: the device is theirs)
    results = outcome.results
    # Only the cases the kernel ran exercised anything (a new user saw 0 of 84 cases run reported as 100% of pairs)
    ran = [r.case for r in results if r.status != "unsupported"]
    coverage = Coverage.for_kernel(kernel, device.type).update(ran)
    pairs = PairCoverage(Target(kernel, device.type)).update(ran)

    def write_report(not_run_because, finished: bool = True):
        broken = outcome.findings
        extra = {"interrupted": outcome.interrupted if finished or outcome.interrupted else None,  # (null: running)
                 "finished": finished and not outcome.interrupted, "cases_planned": len(cases),
                 "in_flight_at_interrupt": outcome.in_flight,
                 "jobs": outcome.jobs.to_dict(),
                 # cases run again alone after running out of device memory beside the others; how many then did not
                 "memory_reruns": {"run_again": outcome.memory_reruns[0],
                                   "no_longer_out_of_memory": outcome.memory_reruns[1]},
                 "precompile": outcome.precompiled.to_dict() if outcome.precompiled is not None else None,
                 "phases_seconds": outcome.phase_seconds(),
                 "pairs": pairs.to_dict(), "relations": broken,
                 "relation_checks": {"run": len(outcome.checked), "broken": len(broken),
                                     "not_run_because": not_run_because,
                                     # which ran, on which batch (a new user could not tell "3/3" from "5/5")
                                     "checks": [{"relation": r.name, "batch": r.case.name or r.case.case_id(),
                                                 "held": line is None}
                                                for r, line in zip(outcome.relations, outcome.checked)]},
                 # (null until the run has ended: the relation checks may still change it)
                 "exit_code": exit_code(outcome) if finished or outcome.interrupted else None}
        outcome.report = write_json(request.report, run_report(results, kernel=kernel.name, device=device,
                                                               suite_note=suite.note, coverage=coverage.to_dict(),
                                                               extra=extra))

    if not results and outcome.interrupted:
        # (this report once went unwritten while the line said it was there: an earlier run's file stood in for it)
        write_report("interrupted")
        if journal is not None:
            journal.close()
        return
    # every case's verdict on disk before the relation checks run (a kill or a stop during them lost the whole run)
    write_report("the run ended before they finished", finished=False)
    if journal is not None:
        journal.close()  # (the report holds its verdicts now)
    observer.verified(kernel, results, coverage, pairs)
    counts = outcome.counts()
    # Checks across calls (permutation, batch invariance): not after a crash or hang, and not on a filtered or
    # interrupted run. In a worker process when the cases were (a kernel that crashed in them killed the run itself,
    # its report left unfinished: issue 43, 15); a crash there is a finding, exit 4.
    # (no relation check for this kernel first: with none, --filter or --max-cases changed nothing)
    outcome.skipped = outcome.skipped or next(
        (why for why, cond in (("interrupted", outcome.interrupted), ("a crash", counts["crash"]),
                               ("a hang", counts["hang"])) if cond), None)
    outcome.relations = [] if outcome.skipped else list(suite.relations)
    try:
        with _timed(outcome.phases, "relations") if outcome.relations else nullcontext():
            check_relations(outcome.relations, kernel, device, request.reproducers, plugins=request.settings.plugins,
                            on_checked=outcome.checked.append, isolate=request.settings.isolate,
                            timeout_s=request.settings.timeout_s, worker=relation_worker)
    except KeyboardInterrupt:  # the cases' verdicts stand, and so do the relations checked by then
        hold()
        outcome.interrupted = True
    left = len(outcome.relations) - len(outcome.checked)
    write_report(outcome.skipped or ("interrupted" if left else None))


@contextmanager
def _timed(phases: dict, name: str):
    """Add the block's wall seconds to ``phases[name]``, also when it is interrupted."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - t0


def exit_code(outcome: RunOutcome) -> int:
    """The run's exit status, the one rule ``run`` exits by and its report records: 130 when a stop ended it, 2 when
    every case it ran was outside the kernel's capabilities (nothing was checked: a gate must not read it as a pass),
    else by its verdicts and broken relations (:func:`~jfa_verify.core.exits.exit_code_for`)."""
    from jfa_verify.checks.calls import relation_status
    from jfa_verify.core.exits import exit_code_for

    if outcome.interrupted or outcome.cases is None:
        return int(ExitCode.INTERRUPTED)
    if outcome.results and all(r.status == "unsupported" for r in outcome.results):
        return int(ExitCode.USAGE)
    return int(exit_code_for([r.status for r in outcome.results] + [relation_status(f) for f in outcome.findings]))


__all__ = ["RunObserver", "RunOutcome", "RunRequest", "check_runs_on", "exit_code", "precompile_cases", "run_suite"]
