"""``jfa-verify gate``: the one command a CI job runs for a kernel change.

For every kernel named, on the device of the job, it runs these checks and says what it
skipped and why (a kernel the device cannot run, a check the device or the kernel rules out):

* ``suite``: the default suite (the main job);
* ``campaign``: a fixed-seed Hypothesis campaign of a given size;
* ``replay``: the case files of earlier campaigns (for example a nightly's artifacts) replayed in a case
  worker (a recorded crash or hang is judged again, not suffered), and their relation checks' call files
  (``*.calls.json``) checked again in a relation worker;
* ``determinism``: the same case several times, outputs compared bit for bit, all reruns of a case in one case
  worker (:mod:`jfa_verify.checks.determinism`; a crash or a hang is the case's verdict; a kernel that declares
  itself non-deterministic is held to its budget on every rerun instead); a finding's case file reruns on replay;
* ``canaries``: guard bands around every buffer the kernel allocates, outputs and gradients
  included: a write outside is a failure naming the buffer and offset (:mod:`jfa_verify.judge.memory`);
* ``recycled_memory``: uninitialized allocations filled with large finite values instead of
  NaN, as recycled memory holds (the NaN fill is part of every run); in both memory checks, a failing case
  whose two runs on fresh memory differ too is filed under ``determinism``, not memory, and one that fails alike
  on fresh memory (no guard band written) is a line of the check's details: a wrong result, the suite's finding;
* ``stress`` (on request): long, pipeline-filling cases and cases of many short sequences (many work units a
  persistent program) rerun many times under timing perturbation (a noise
  kernel on a second stream, fewer SMs for persistent grids, other launch orders), bit-compared for a
  deterministic kernel and judged against the references (:mod:`jfa_verify.checks.stress`);
* ``sanitizer`` (CUDA only, on request): the suite's first cases under NVIDIA compute-sanitizer
  (``memcheck``: out-of-bounds and misaligned accesses; ``racecheck``: shared-memory races);
* ``perf`` (on request): timings against a committed baseline, noise-aware, and against a named peer
  timed in the same run on the same inputs (``peer time / kernel time`` per workload, failing below
  ``perf_min_ratio``) (:mod:`jfa_verify.checks.perf`).

Outputs: a JSON report, JUnit XML (one test suite per kernel and check), and a Markdown summary
for ``$GITHUB_STEP_SUMMARY`` (verdict table, findings with replay commands, skipped checks, the
seed and Hypothesis settings). Exit codes (:class:`jfa_verify.core.exits.ExitCode`): 4 if a kernel
crashed its process, else 3 if one hung, else 1 for any other finding, 0 when everything checked
passed, 2 when nothing could be checked, a check could not run (verdict ``ERROR``: a missing dependency, a
tool that failed) or the configuration is wrong.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

from jfa_verify.cases.case import Case
from jfa_verify.checks import sanitizer
from jfa_verify.checks.sanitizer import sanitizer_errors  # noqa: F401  (re-exported: the gate's tests and users read it here)
from jfa_verify.core.contract import JaggedProblem
from jfa_verify.core.errors import InvalidInput, missing_dependency
from jfa_verify.core.exits import ExitCode
from jfa_verify.core.paths import DEFAULT_REPRODUCERS
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.run.corpus import (
    Corpus,
    campaign_folder,
    environment,
    read_case_file,
    replay_timeout,
    reproducer_folders,
)
from jfa_verify.run.parallelism import describe_jobs
from jfa_verify.run.settings import RunSettings

__all__ = ["CHECKS", "CheckResult", "Finding", "GateOptions", "GateReport", "run_gate"]

CHECKS = ("suite", "campaign", "replay", "determinism", "canaries", "recycled_memory", "stress", "sanitizer", "perf")
SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
SANITIZER_LAYOUT = "layout-7-3-19-5-11"  # the default suite's smallest lengths
# A check's "error" is a check that could not judge (a tool failed or ran past its time, the framework
# raised): the gate is not green, but no finding was made, so it exits USAGE unless something was found.
_WORST = {"crash": 4, "hang": 3, "fail": 2, "error": 1, "interrupted": 1, "pass": 0, "skip": 0}


@dataclass
class Finding:
    """One failing case (or sanitizer report) of a check, with what replays it."""

    check: str
    case: str
    status: str
    summary: str
    explanation: str = ""
    replay: str = ""
    reproducer: Optional[str] = None
    # the other case files of the same failure (a campaign's: one bug may be kept as several finding files), each
    # ``{"case", "reproducer", "replay"}``: named inside this finding, so that one bug is one finding in every report
    also: list[dict] = field(default_factory=list)


@dataclass
class CheckResult:
    """The verdict of one check on one kernel: ``status`` is pass, fail, error, hang, crash, skip, or interrupted
    (Ctrl-C or SIGTERM during the check: no verdict; its ``findings`` are the failing cases it had found)."""

    kernel: str
    check: str
    status: str
    seconds: float = 0.0
    cases: int = 0
    findings: list[Finding] = field(default_factory=list)
    reason: str = ""  # why it was skipped, or what errored
    details: list[str] = field(default_factory=list)
    # parts of the check that ran but could not be judged, each with why (racecheck errors of the form the
    # tool also reports on the kernel's race-free control): neither a pass nor a finding, listed in every report
    not_judged: list[str] = field(default_factory=list)
    # the perf check against a peer: one entry per configuration timed (PeerRatio.to_dict, with the minimum
    # ratio asked for and whether it is below it)
    peer_ratios: list[dict] = field(default_factory=list)
    # the suite check: its precompile step (:meth:`~jfa_verify.run.precompile.Precompiled.to_dict`), None elsewhere
    precompile: Optional[dict] = None
    # cases the kernel declared unsupported, by the reason it gave: not checked, so named in every report (a
    # reviewer reading PASS could not tell that a new user's broadcast-Q cases were never run)
    unsupported: dict = field(default_factory=dict)
    # the names of the cases that passed, where the check knows them (None: it names none): JUnit's passed
    # testcases carry them (a CI page listing "passed-0", "passed-1" named nothing a reader could replay)
    passed: Optional[list[str]] = None
    # how many of its cases passed, where the check counts them but names none (a campaign's draws: its findings
    # are shrunk, one a bug, so cases less findings counted failing draws as passes)
    passes: Optional[int] = None


def _name(case) -> str:
    return case.name or case.case_id()


class _Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a check that counts its cases: ``cases``, those it had judged by then (the
    interrupted check's count in every report; a new user's gate stopped after dozens of passed suite cases said
    "0 cases"); where the check knows them, the names of those that ``passed`` and ``in_flight``, a line for each case
    the stop cut short (its name, its seconds, the command that replays it: no verdict, so no case file)."""

    def __init__(self, cases: int, passed: Optional[list[str]] = None, in_flight: Sequence[str] = ()):
        super().__init__(f"interrupted after {cases} case(s)")
        self.cases, self.passed, self.in_flight = cases, passed, list(in_flight)


# how an interrupted check's details line naming a case it cut short begins (the reports pick those lines out)
_CUT_SHORT = "interrupted while running "


def _stopped(done: list, verifier, kernel, settings) -> _Interrupted:
    """The :class:`_Interrupted` of a check whose ``verifier`` a stop ended with ``done`` judged: a gate that a CI
    job's time limit ended while a case hung named neither the case nor how to replay it (``run`` names both)."""
    from jfa_verify.run.corpus import replay_command

    cut = [] if verifier is None else verifier.interrupted_cases
    return _Interrupted(_judged(done), passed=[_name(r.case) for r in done if r is not None and r.status == "pass"],
                        in_flight=[f"{_name(case)} ({seconds:.1f} s in): "
                                   + replay_command(case, kernel.name, settings.plugins, memory=settings.memory,
                                                    timeout_s=settings.timeout_s) for case, seconds in cut])


def _judged(results) -> int:
    """How many of ``results`` (CaseResults, None for a case not started) the kernel ran: not unsupported."""
    return sum(r is not None and r.status != "unsupported" for r in results)


@dataclass
class GateOptions:
    """What the gate runs. ``checks``: the subset of :data:`CHECKS` (default: all but sanitizer and perf,
    which run when asked for; so does stress). ``stress_reruns``: runs per stress case (None: 200 on CUDA, a few on
    the CPU). ``small_cases``: cases per determinism/canary/recycled-memory check.
    ``run``: how every case runs and is judged (:class:`~jfa_verify.run.settings.RunSettings`, passed whole: plugins,
    timeout, seed, ...; isolated: the gate runs every case in a case worker); its ``jobs``: worker processes of the
    suite (isolated case workers) and of the campaign (campaign workers on one Hypothesis database, seeds
    ``seed .. seed + jobs - 1``); the verdicts do not depend on it.
    ``perf_peer``: a registered kernel the perf check times beside each kernel (same run, same inputs);
    ``perf_min_ratio``: the perf check fails where ``peer time / kernel time`` is below it (needs a peer)."""

    checks: tuple[str, ...] = ("suite", "campaign", "replay", "determinism", "canaries", "recycled_memory")
    run: RunSettings = field(default_factory=lambda: RunSettings(isolate=True))
    campaign_examples: int = 25
    reruns: int = 3
    stress_reruns: Optional[int] = None
    small_cases: int = 4
    sanitizer_tools: tuple[str, ...] = ("memcheck", "racecheck")
    sanitizer_cases: int = 2
    perf_baseline: Optional[str] = None
    perf_record: Optional[str] = None
    perf_threshold: float = 0.05
    perf_peer: Optional[str] = None
    perf_min_ratio: Optional[float] = None
    replay_dirs: tuple[str, ...] = ()
    reproducers: str = DEFAULT_REPRODUCERS
    jobs_reason: str = ""  # how ``jobs`` was chosen (``--jobs``, the machine's default), shown in the reports
    precompile: bool = True  # the suite builds its kernel variants first, in ``jobs`` processes (--no-precompile)
    # ... or in this many (:func:`~jfa_verify.run.parallelism.build_jobs`: no GPU memory bound when chosen for you)
    build_jobs: Optional[int] = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.checks) - set(CHECKS))
        if unknown:
            raise InvalidInput(f"checks={unknown} unknown; choose from {CHECKS}")
        bad_tools = sorted(set(self.sanitizer_tools) - set(SANITIZER_TOOLS))
        if bad_tools:
            raise InvalidInput(f"sanitizer tools {bad_tools} unknown; choose from {SANITIZER_TOOLS}")
        if not isinstance(self.run, RunSettings) or not self.run.isolate:
            raise InvalidInput(f"run={self.run!r}: give RunSettings(isolate=True, ...): the gate runs every case in a "
                               f"case worker (a crash or hang is that case's verdict)")
        for name in ("campaign_examples", "small_cases", "sanitizer_cases"):
            if getattr(self, name) < 1:
                raise InvalidInput(f"{name}={getattr(self, name)} must be >= 1")
        if self.reruns < 2:
            raise InvalidInput(f"reruns={self.reruns} must be >= 2")
        if self.stress_reruns is not None and self.stress_reruns < 2:
            raise InvalidInput(f"stress_reruns={self.stress_reruns} must be >= 2 (or None for the device's default)")
        if not 0 < self.perf_threshold < 10:
            raise InvalidInput(f"perf_threshold={self.perf_threshold} must be a fraction such as 0.05")
        if self.perf_min_ratio is not None:
            if not self.perf_min_ratio > 0:
                raise InvalidInput(f"perf_min_ratio={self.perf_min_ratio} must be > 0 (peer time / kernel time, "
                                   f"e.g. 0.8)")
            if not self.perf_peer:
                raise InvalidInput(f"perf_min_ratio={self.perf_min_ratio} needs perf_peer (the kernel to compare with)")


@dataclass
class GateReport:
    device: str
    options: GateOptions
    results: list[CheckResult] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    seconds: float = 0.0
    interrupted: bool = False  # Ctrl-C or SIGTERM ended it: ``results`` are the checks that finished

    def exit_code(self) -> int:
        if self.interrupted:
            return int(ExitCode.INTERRUPTED)
        checked = [r for r in self.results if r.status != "skip"]
        if not checked:
            return int(ExitCode.USAGE)
        worst = max((_WORST[r.status] for r in checked), default=0)
        return {4: int(ExitCode.CRASH), 3: int(ExitCode.HANG), 2: int(ExitCode.FINDING),
                1: int(ExitCode.USAGE)}.get(worst, int(ExitCode.OK))

    @property
    def verdict(self) -> str:
        code = self.exit_code()
        if code == int(ExitCode.USAGE) and any(r.status == "error" for r in self.results):
            return "ERROR"  # a check could not run (others may have passed): not "nothing checked"
        return {0: "PASS", 1: "FAIL", 2: "NOTHING CHECKED", 3: "HANG", 4: "CRASH", 130: "INTERRUPTED"}[code]

    def to_dict(self) -> dict:
        o = self.options
        return {
            "verdict": self.verdict, "exit_code": self.exit_code(), "device": self.device, "seconds": self.seconds,
            "interrupted": self.interrupted, "environment": self.environment,
            "settings": {"seed": o.run.seed, "campaign_examples": o.campaign_examples, "reruns": o.reruns,
                         "stress_reruns": o.stress_reruns,  # (None: the device's default, DEFAULT_RERUNS)
                         "checks": list(o.checks),
                         "hypothesis": "derandomized by --seed; database: the reproducers folder",
                         **({"perf_peer": o.perf_peer, "perf_min_ratio": o.perf_min_ratio} if o.perf_peer else {}),
                         "jobs": o.run.jobs, "jobs_reason": o.jobs_reason, "precompile": o.precompile},
            "results": [{**{k: v for k, v in r.__dict__.items() if k != "findings"},
                         "findings": [f.__dict__ for f in r.findings]} for r in self.results],
        }

    def to_junit(self) -> str:
        """JUnit XML: one ``testsuite`` per kernel and check, one ``testcase`` per case or finding."""
        root = ET.Element("testsuites", name="jfa-verify gate", time=f"{self.seconds:.1f}")
        for r in self.results:
            suite = ET.SubElement(root, "testsuite", name=f"{r.kernel}.{r.check}", time=f"{r.seconds:.1f}")
            if r.status == "skip":
                case = ET.SubElement(suite, "testcase", classname=f"{r.kernel}.{r.check}", name=r.check)
                ET.SubElement(case, "skipped", message=r.reason)
                continue
            if r.status == "error":
                case = ET.SubElement(suite, "testcase", classname=f"{r.kernel}.{r.check}", name=r.check)
                ET.SubElement(case, "error", message=r.reason[:500]).text = r.reason
            if r.status == "interrupted":  # no verdict: an error, not a skip (a CI reading the JUnit alone saw
                # failures="0" errors="0" and took a gate stopped 15 s in for green); its findings so far follow, as
                # failures, and the cases it had judged by then as passed testcases
                case = ET.SubElement(suite, "testcase", classname=f"{r.kernel}.{r.check}", name=f"{r.check}-rest")
                ET.SubElement(case, "error", message=r.reason[:500], type="interrupted").text = "\n".join(
                    [r.reason] + [d for d in r.details if d.startswith(_CUT_SHORT)])
            for i, why in enumerate(r.not_judged):
                case = ET.SubElement(suite, "testcase", classname=f"{r.kernel}.{r.check}", name=f"not-judged-{i}")
                ET.SubElement(case, "skipped", message=why[:500]).text = why
            for i, (why, n) in enumerate(r.unsupported.items()):
                case = ET.SubElement(suite, "testcase", classname=f"{r.kernel}.{r.check}", name=f"unsupported-{i}")
                ET.SubElement(case, "skipped", message=f"{n} case(s) the kernel declared unsupported: {why}"[:500])
            ratios = {_ratio_case(p): p for p in r.peer_ratios}
            for f in r.findings:
                case = ET.SubElement(suite, "testcase", classname=f"{r.kernel}.{r.check}", name=f.case)
                if f.case in ratios:
                    _junit_ratio(case, ratios.pop(f.case))
                node = ET.SubElement(case, "failure", message=f"[{f.status}] {f.summary}"[:500], type=f.status)
                node.text = (f"{f.explanation}\nreplay: {f.replay}" if f.replay else f.explanation) + _also_text(f)
            for name, p in ratios.items():  # the configurations at or above the minimum ratio (or with none asked)
                _junit_ratio(ET.SubElement(suite, "testcase", classname=f"{r.kernel}.{r.check}", name=name), p)
            # the check's own names, or its count: cases less findings counted a relation finding against the
            # cases (a new user's suite check listed 69 of its 72 passed cases)
            count = r.passes if r.passes is not None else r.cases - len(r.findings) - len(ratios)
            names = list(r.passed) if r.passed is not None else [f"passed-{i}" for i in range(max(0, count))]
            for name in (names if r.status != "error" else []):
                ET.SubElement(suite, "testcase", classname=f"{r.kernel}.{r.check}", name=name)
        if self.verdict == "NOTHING CHECKED":  # (exit 2: a CI reading the XML alone saw skips and no error)
            suite = ET.SubElement(root, "testsuite", name="jfa-verify gate", time=f"{self.seconds:.1f}")
            case = ET.SubElement(suite, "testcase", classname="jfa-verify gate", name="nothing-checked")
            why = "; ".join(f"{r.kernel} / {r.check}: {r.reason}" for r in self.results if r.reason) or "no check ran"
            ET.SubElement(case, "error", message=f"nothing checked: {why}"[:500], type="nothing-checked").text = why
        for suite in root:  # the counts of the testcases written (an interrupted check's said 1 test, 5 failures)
            cases = suite.findall("testcase")
            suite.set("tests", str(len(cases)))
            for kind, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
                suite.set(attribute, str(sum(c.find(kind) is not None for c in cases)))
        for attribute in ("tests", "failures", "errors", "skipped"):  # (the root's totals, read by some CI pages)
            root.set(attribute, str(sum(int(suite.get(attribute, 0)) for suite in root)))
        ET.indent(root)
        return ET.tostring(root, encoding="unicode")

    def to_markdown(self) -> str:
        """A summary for ``$GITHUB_STEP_SUMMARY``: verdict table, findings, skipped checks, settings."""
        o = self.options
        settings = [f"seed {o.run.seed}"] + ([f"campaign {o.campaign_examples} examples"] if "campaign" in o.checks
                                         else []) + ([f"{o.reruns} reruns"] if "determinism" in o.checks else [])
        lines = [f"## jfa-verify gate: {self.verdict}", "",
                 f"Device: {self.device}; torch {self.environment.get('torch')}, Triton "
                 f"{self.environment.get('triton')}; {', '.join(settings)}; {self.seconds:.0f} s.", "",
                 "| kernel | check | verdict | cases | findings | seconds |", "|---|---|---|---|---|---|"]
        for r in self.results:
            verdict = f"{r.status} ({len(r.not_judged)} part not judged)" if r.not_judged else r.status
            lines.append(f"| {r.kernel} | {r.check} | {verdict} | {r.cases} | {len(r.findings)} | {r.seconds:.1f} |")
        found = [(r, f) for r in self.results for f in r.findings]
        if found:
            lines += ["", "### Findings", ""]
            for r, f in found:
                lines.append(f"- **{r.kernel} / {r.check}** `{f.case}` [{f.status}]: {f.summary}")
                if f.replay:
                    lines.append(f"  - replay: `{f.replay}`")
                lines += [f"  - the same failure, also `{a['case']}`: `{a['replay'] or a['reproducer']}`"
                          for a in f.also]
        skipped = [r for r in self.results if r.status == "skip"]
        if skipped:
            lines += ["", "### Skipped", ""]
            lines += [f"- {r.kernel} / {r.check}: {r.reason}" for r in skipped]
        timed = [(r, p) for r in self.results for p in r.peer_ratios]
        if timed:
            lines += ["", "### Performance against a peer (peer time / kernel time, medians; below 1: the kernel is "
                      "slower)", "",
                      "| kernel | peer | configuration | kernel ms | peer ms | peer / kernel | verdict |",
                      "|---|---|---|---|---|---|---|"]
            for r, p in timed:
                verdict = ("no minimum" if p["min_ratio"] is None else
                           f"below {p['min_ratio']:g}" if p["below_min_ratio"] else f"at or above {p['min_ratio']:g}")
                lines.append(f"| {r.kernel} | {p['peer']} | {p['configuration']} | {p['kernel_ms']:.3f} | "
                             f"{p['peer_ms']:.3f} | {p['ratio']:.3f} | {verdict} |")
        unsupported = [(r, why, n) for r in self.results for why, n in r.unsupported.items()]
        if unsupported:
            lines += ["", "### Not checked: cases the kernel declared unsupported", ""]
            lines += [f"- {r.kernel} / {r.check}: {n} case(s): {why}" for r, why, n in unsupported]
        unjudged = [(r, why) for r in self.results for why in r.not_judged]
        if unjudged:
            lines += ["", "### Not judged", ""]
            lines += [f"- {r.kernel} / {r.check}: {why}" for r, why in unjudged]
        stopped = [r for r in self.results if r.status == "interrupted"]
        if stopped:
            lines += ["", "### Interrupted", ""]
            lines += [line for r in stopped for line in [f"- {r.kernel} / {r.check}: {r.reason}"]
                      + [f"  - {d}" for d in r.details if d.startswith(_CUT_SHORT)]]
        errors = [r for r in self.results if r.status == "error"]
        if errors:
            lines += ["", "### Errors", ""]
            lines += [f"- {r.kernel} / {r.check}: {r.reason.splitlines()[0] if r.reason else ''}" for r in errors]
        return "\n".join(lines) + "\n"


def _ratio_case(p: dict) -> str:
    """The name of a peer-timed configuration in findings and JUnit: ``"movielens (forward) vs PEER"``."""
    return f"{p['configuration']} vs {p['peer']}"


def _junit_ratio(case: ET.Element, p: dict) -> None:
    """A peer-timed configuration's numbers on its JUnit testcase: properties and one line of output."""
    props = ET.SubElement(case, "properties")
    for key in ("peer", "kernel_ms", "peer_ms", "ratio", "min_ratio", "rounds"):
        if p.get(key) is not None:
            value = f"{p[key]:.6g}" if isinstance(p[key], float) else str(p[key])
            ET.SubElement(props, "property", name="peer_over_kernel" if key == "ratio" else key, value=value)
    ET.SubElement(case, "system-out").text = (f"{p['configuration']} [{p['case']}]: peer/kernel {p['ratio']:.3f} "
                                              f"({p['peer']} {p['peer_ms']:.3f} ms, kernel {p['kernel_ms']:.3f} ms)")


# ----------------------------------------------------------------------------- checks


def _finding(check: str, result) -> Finding:
    text = result.explain()
    summary = (result.findings_of("memory") or result.findings_of("contract")
               or [next((line.strip() for line in text.splitlines()[1:] if line.strip()), result.status)])[0]
    return Finding(check, _name(result.case), result.status, summary, text,
                   result.replay_command(), result.reproducer)


def _written_since(root: str, kernel: str, check: str, since: float, plugins) -> list[Finding]:
    """The failing case files of ``kernel`` written into ``root`` (and its campaign folder) since ``since`` (wall
    clock): an interrupted check's findings so far. A new user's interrupted gate listed 0 findings for its suite
    while the suite's failing case files were in the folder."""
    from jfa_verify.run.corpus import replay_command
    from jfa_verify.run.runner import FAILING_STATUSES

    def written_since(path: Path) -> bool:
        try:
            return path.stat().st_mtime >= since
        except OSError:
            return False

    # (a file being written when the interrupt came does not read: `jfa-verify findings` names it)
    return [Finding(check, case.name or case.case_id(), payload["status"], "found before the interrupt",
                    replay=replay_command(path, kernel, plugins), reproducer=str(path))
            for folder in reproducer_folders(root) for path, case, payload in Corpus(folder).readable(kernel)
            if payload.get("status") in FAILING_STATUSES and written_since(path)]


def _status_of(results) -> str:
    return _worst_of(r.status for r in results)


def _worst_of(statuses) -> str:
    """A check's status from its cases' statuses: crash > hang > fail (a fail or an error) > pass."""
    statuses = set(statuses)
    for s in ("crash", "hang", "timeout"):
        if s in statuses:
            return "hang" if s == "timeout" else s
    if statuses & {"fail", "error"}:
        return "fail"
    return "pass"


def small_cases(kernel: Kernel, device: torch.device, n: int, seed: int = 0) -> list[Case]:
    """Up to ``n`` cases of the default suite the kernel supports and that compute some score (a batch
    with no query-key pair, such as B = 0, cannot show nondeterminism or a read of stale memory in the
    softmax), inside the contract (offsets a kernel may refuse, such as strided views, are the suite's
    to judge: a refusal there passes), one per (mode, causal) first."""
    from jfa_verify.cases.pairs import computes_scores
    from jfa_verify.checks.suites import get_suite

    def runs(case: Case) -> bool:  # from the case's shape alone: no tensors made
        shape = JaggedProblem.of_shape(case.head_dim, case.dv, case.torch_dtype, device, mode=case.mode,
                                       num_heads_q=case.num_heads_q, num_heads_kv=case.num_heads_kv,
                                       causal=case.causal, causal_alignment=case.causal_alignment)
        shape = dataclasses.replace(shape, inputs_contiguous=case.layout == "contiguous")
        return kernel.unsupported_reason(shape) is None

    supported = [c for c in get_suite("default", device.type, seed, kernel=kernel).cases
                 if computes_scores(c) and c.offsets_layout == "contiguous" and runs(c)]
    picked, seen = [], set()
    for case in supported:
        key = (case.mode, case.causal)
        if key not in seen:
            seen.add(key)
            picked.append(case)
    picked += [c for c in supported if c not in picked]
    return picked[:n]


def _settings(options: GateOptions):
    """The run settings of a check that runs one case at a time: ``options.run`` with one worker (a check that runs
    cases at once takes ``options.run`` itself)."""
    return options.run.replace(jobs=1)


def _check_suite(kernel, device, options, plugins) -> CheckResult:
    from jfa_verify.checks.suites import get_suite
    from jfa_verify.run.loop import Verifier
    from jfa_verify.run.runner import skipped_lines, unsupported_reasons
    from jfa_verify.workflows.suite_run import precompile_cases

    suite = get_suite("default", device.type, options.run.seed, kernel=kernel)
    cases = suite.cases
    built = precompile_cases(kernel, cases, device, jobs=options.build_jobs or options.run.jobs, plugins=plugins,
                             enabled=options.precompile)
    done: list = []  # (the cases judged when a stop comes: the interrupted check's count)
    verifier = None
    try:
        with Verifier(kernel, device, options.reproducers, options.run) as verifier:
            results = verifier.verify_all(cases, on_result=done.append)
    except KeyboardInterrupt as e:
        raise _stopped(done, verifier, kernel, options.run) from e
    checked = [r for r in results if r.status != "unsupported"]
    unsupported = unsupported_reasons(results)
    try:
        broken, relations_line = _suite_relations(suite, results, kernel, device, options, plugins)
    except KeyboardInterrupt as e:  # the cases' verdicts stand: they are the count
        raise _Interrupted(len(checked)) from e
    status = max([_status_of(results)] + [f.status for f in broken], key=lambda s: _WORST[s])
    out = CheckResult(kernel.name, "suite", status, cases=len(checked),
                      findings=[_finding("suite", r) for r in results if r.failed] + broken,
                      details=[built.summary(), relations_line] + skipped_lines(unsupported),
                      precompile=built.to_dict(), unsupported=unsupported,
                      passed=[_name(r.case) for r in checked if r.status == "pass"])
    if not checked:
        out.status, out.reason = "skip", f"no suite case is inside the kernel's capabilities ({results[0].message})"
    return out


def _suite_relations(suite, results, kernel, device, options, plugins) -> tuple[list[Finding], str]:
    """The suite's relation checks (:mod:`jfa_verify.checks.relations`), as ``run`` makes them after its cases, in a
    worker process: a finding per broken one, and a line saying how many held. A new user's kernel with a
    module-level plan cache failed two relations under ``run`` and passed the gate, which ran none."""
    from jfa_verify.checks.calls import check_relations, relation_status

    if not suite.relations:
        return [], f"relation checks: none inside the capabilities of {kernel.name}"
    crashed = sorted({r.status for r in results} & {"crash", "hang", "timeout"})
    if crashed:
        return [], f"relation checks: not run after a {crashed[0]} in the cases (each would meet it again)"
    lines: list = []
    check_relations(suite.relations, kernel, device, options.reproducers, plugins=plugins, on_checked=lines.append,
                    isolate=True, timeout_s=options.run.timeout_s)
    broken = []
    for relation, line in zip(suite.relations, lines):
        if line is None:
            continue
        head = line.partition("\n")[0]
        replay = line.rpartition("\n  replay: ")[2] if "\n  replay: " in line else ""  # (check_relations' last line)
        status = relation_status(line)
        broken.append(Finding("suite", f"{relation.case.name} ({relation.name})",
                              "fail" if status == "error" else status, head, line, replay))
    return broken, f"relation checks: {len(lines) - len(broken)}/{len(lines)} held"


def _campaign_finding(case: str, status: str, explanation: str, path: Optional[str], kernel, plugins) -> Finding:
    """A campaign failure (from one process or from campaign workers) as a gate finding."""
    from jfa_verify.run.corpus import replay_command

    summary = next((x.strip() for x in explanation.splitlines()[1:] if x.strip()), status)
    return Finding("campaign", case, status, summary, explanation,
                   replay_command(path, kernel.name, plugins) if path else "", path)


def _also_text(f: Finding) -> str:
    """The other case files of ``f``'s failure as lines of its JUnit failure text ("" when it has none)."""
    if not f.also:
        return ""
    return (f"\nthe same failure (kernel, status, error kind, lead output) is kept in {len(f.also)} more case "
            f"file(s):" + "".join(f"\n  {a['case']}: {a['reproducer']}\n    replay: {a['replay']}" for a in f.also))


def _campaign_findings(found: Sequence[tuple[Finding, dict, int]]) -> list[Finding]:
    """A campaign's findings, one per distinct failure: ``found`` holds ``(finding, signature, examples)`` per finding
    file, grouped by :func:`~jfa_verify.fuzz.findings.failure_groups` (the rule by which ``jfa-verify findings`` and
    ``fuzz``'s summary group them), most examples first; the group's head is the finding, its other files named in
    its ``also``. One finding per file showed one planted bug as several JUnit failures (a new user's trial), where
    ``fuzz`` and ``findings`` showed one."""
    from jfa_verify.fuzz.findings import failure_groups

    found = sorted(found, key=lambda x: -x[2])
    return [dataclasses.replace(found[group[0]][0], also=[
                {"case": found[i][0].case, "reproducer": found[i][0].reproducer, "replay": found[i][0].replay}
                for i in group[1:]])
            for group in failure_groups([sig for _, sig, _ in found])]


def _campaign_status(findings: Sequence[Finding]) -> str:
    """The campaign check's verdict: the worst kind among its findings (hang, then crash, then fail)."""
    statuses = {f.status for f in findings}
    if not statuses:
        return "pass"
    return "hang" if statuses & {"timeout", "hang"} else "crash" if "crash" in statuses else "fail"


def _check_campaign(kernel, device, options, plugins) -> CheckResult:
    from jfa_verify.fuzz.campaign import Campaign

    if options.run.jobs > 1:
        return _check_campaign_workers(kernel, device, options, plugins)
    # (in the suite's folder the campaign replayed the suite's failures as its own: a new user's gate counted one
    # bug's 51 suite failures again as 47 campaign findings)
    summary = Campaign(kernel, _settings(options), max_examples=options.campaign_examples,
                       corpus_dir=campaign_folder(options.reproducers), device=device).run()
    if summary.interrupted:  # the campaign kept Ctrl-C to itself; the gate stops too
        raise _Interrupted(summary.cases_run)
    findings = _campaign_findings([(_campaign_finding(f.case.name or f.case.case_id(), f.status, f.explanation,
                                                      str(f.path) if f.path else None, kernel, plugins),
                                    f.signature, f.examples) for f in summary.failures])
    cases, passes, counts = _unshrunk(summary.cases_run, summary.statuses, summary.shrink_statuses)
    return CheckResult(kernel.name, "campaign", _campaign_status(findings), cases=cases, findings=findings,
                       passes=passes, details=[f"seed {options.run.seed}, {options.campaign_examples} examples: "
                                               f"{counts}"])


# a verdict as the campaign line words it ("69 passed, 30 failed"; an unknown status as itself)
_STATUS_WORDS = {"pass": "passed", "fail": "failed", "error": "errored", "crash": "crashed", "timeout": "timed out",
                 "hang": "hung", "unsupported": "unsupported"}


def _in_words(statuses: dict) -> str:
    """Verdict counts in words, passes first: ``"13 passed, 3 failed"`` (``"none"`` for no verdict)."""
    order = sorted(statuses, key=lambda k: (k != "pass", k))
    return ", ".join(f"{statuses[k]} {_STATUS_WORDS.get(k, k)}" for k in order if statuses[k]) or "none"


def _unshrunk(cases: int, statuses: dict, shrink_statuses: dict) -> tuple[int, int, str]:
    """A campaign's ``(cases, passed cases, line)`` without its shrink steps: the steps that shrank a failure are not
    cases of the check (a JUnit page listed 424 passing tests for a 25-example campaign: a new user's trial). The
    line words the counts so that they add up beside "N case(s)": the cases' verdicts, then the shrink steps' apart
    (it printed "statuses {'pass': 69, 'fail': 30} (83 shrink step(s) ...)" beside "16 case(s)": a raw dict over
    every run, which a new user could not reconcile with the case count)."""
    steps = sum(shrink_statuses.values())
    own = {k: v - shrink_statuses.get(k, 0) for k, v in statuses.items()}
    line = f"{cases - steps} case(s): {_in_words(own)}"
    if steps:
        line += f"; besides them, {steps} shrink step(s) (not counted as cases): {_in_words(dict(shrink_statuses))}"
    return cases - steps, own.get("pass", 0), line


def _check_campaign_workers(kernel, device, options, plugins) -> CheckResult:
    """The campaign with ``options.run.jobs`` campaign workers (``jfa-verify fuzz --workers``) on one database."""
    from jfa_verify.fuzz.workers import FuzzConfig, run_fuzz

    config = FuzzConfig(kernel.name, device.type, str(campaign_folder(options.reproducers)),
                        run=_settings(options), max_examples=options.campaign_examples)
    payload = run_fuzz(config, workers=options.run.jobs)
    if payload["interrupted"]:  # the campaign kept Ctrl-C (or SIGTERM) to itself; the gate stops too
        raise _Interrupted(payload["cases"])
    if payload["worker_errors"]:
        return CheckResult(kernel.name, "campaign", "error", cases=payload["cases"],
                           reason=f"campaign worker(s) could not run: {payload['worker_errors']}")
    named = [f["case"].get("name") or f.get("id") or f["signature"].get("id", "?") for f in payload["failures"]]
    findings = _campaign_findings([(_campaign_finding(name, f["status"], f["explanation"], f["path"], kernel, plugins),
                                    f.get("signature") or {}, f.get("examples", 0))
                                   for name, f in zip(named, payload["failures"])])
    cases, passes, counts = _unshrunk(payload["cases"], payload["statuses"], payload["shrink_statuses"])
    return CheckResult(kernel.name, "campaign", _campaign_status(findings), cases=cases, findings=findings,
                       passes=passes, details=[f"seeds {payload['seeds']}, {options.campaign_examples} examples over "
                                               f"{options.run.jobs} workers: {counts}"])


def _check_replay(kernel, device, options, plugins) -> CheckResult:
    from jfa_verify.checks.rerun_replay import replay_reruns, rerun_check
    from jfa_verify.judge.findings import Finding as RunFinding
    from jfa_verify.run.isolation import CaseWorker, WorkerSpec
    from jfa_verify.run.report import document_kind_of
    from jfa_verify.run.runner import CaseResult

    files = [p for d in options.replay_dirs for f in reproducer_folders(d) for p in Corpus(f).files()]
    if not options.replay_dirs:
        return CheckResult(kernel.name, "replay", "skip", reason="no --replay folder given")
    results, unreadable = [], []
    # In a case worker: earlier findings include crashes and hangs (a nightly's), which in this process
    # would end the gate, or hold it, with no report written.
    with contextlib.ExitStack() as stack:
        workers = {}  # one case worker per memory mode the files were recorded with

        def worker_for(memory):
            if memory not in workers:
                spec = WorkerSpec(kernel.name, device.type, _settings(options).replace(memory=memory))
                workers[memory] = stack.enter_context(CaseWorker(spec))
            return workers[memory]

        for path in files:
            try:
                case, payload = read_case_file(path)
            except InvalidInput as e:  # a finding may be lost in it: named, never passed over (as `findings` does)
                if document_kind_of(path):  # (the gate's own --json in the folder: a rerun of the same gate read it
                    continue  # as a lost finding and flipped PASS to ERROR; a new user's trial)
                unreadable.append(f"{path} is not a readable case file ({e}); a finding may be lost in it: restore "
                                  f"it, or remove it once you have read it")
                continue
            if payload.get("kernel") not in (None, kernel.name):
                continue
            # a recorded hang (or a case left running) waits no longer than its run did (replay_timeout), and nothing
            # past the gate's own --timeout (by default DEFAULT_CASE_TIMEOUT_S: a default must not make a nightly's
            # 120 s hang cost 600 s here)
            recorded, limit = replay_timeout(payload), options.run.timeout_s
            timeout = min(recorded, limit) if recorded and limit else recorded or limit
            # a finding is replayed as the check that found it ran its case: one run shows neither bits that differ
            # between reruns nor a write past the end that only guard bands see (both read as fixed before)
            if rerun_check(payload) is not None:
                replay = replay_reruns(case, payload, kernel, device, _settings(options), timeout_s=timeout)
                kind = "determinism" if "bit-wise" in replay.lines[0] else "rerun"
                found = [RunFinding(kind, line.strip()) for line in replay.lines] if replay.status == "fail" else []
                result = CaseResult(case, kernel.name, replay.status, message="\n".join(replay.notes + replay.lines),
                                    findings=found)
            else:
                result = worker_for(payload.get("memory") or _settings(options).memory).run(case, timeout)
            result.reproducer = str(path)
            results.append(result)
    notes: list = []
    relations = _replay_call_files(kernel, device, options, plugins, unreadable, notes)
    if not results and not relations and not unreadable:
        return CheckResult(kernel.name, "replay", "skip", reason=f"no case or call file for {kernel.name} in "
                                                                 f"{', '.join(options.replay_dirs)}")
    statuses = [r.status for r in results] + [status for status, _ in relations]
    out = CheckResult(kernel.name, "replay", _worst_of(statuses),
                      cases=len(statuses), not_judged=unreadable, details=notes,
                      findings=[_finding("replay", r) for r in results if r.failed] + [f for _, f in relations if f])
    if unreadable and out.status == "pass":  # nothing found, but not everything could be judged: not green
        out.status = "error"
        out.reason = f"{len(unreadable)} case file(s) could not be read: {unreadable[0]}"
    return out


def _replay_call_files(kernel, device, options, plugins, unreadable: list, notes: list) -> list:
    """The replay check's call files (a relation check's findings, ``*.calls.json``) of ``kernel``: each relation
    checked again (:func:`~jfa_verify.checks.calls.replay_call_files`). ``[(status, Finding or None)]``; a file
    that cannot be read is added to ``unreadable``. A new user's gate replayed every case file of a folder and passed
    over its relation finding without a word. A file recorded failing whose relation holds now adds a line to
    ``notes``: a sequence check's failure hangs on state kept between calls (a cache keyed on addresses, say), which a
    fresh worker may not rebuild, so its pass may be a bug unreproduced, not fixed (a new user's stale-plan kernel
    passed the replay check, 2026-12-07)."""
    from jfa_verify.checks.calls import replay_call_files
    from jfa_verify.run.corpus import replay_command
    from jfa_verify.run.runner import FAILING_STATUSES

    files = [p for d in options.replay_dirs for f in reproducer_folders(d) for p in Corpus(f).call_files()]
    out = []
    for r in replay_call_files(files, kernel, device, plugins, options.run.timeout_s):
        if r.status == "unreadable":
            unreadable.append(f"{r.path} is not a readable call file ({r.finding}); a finding may be lost in it: "
                              f"restore it, or remove it once you have read it")
        elif r.status == "pass":
            out.append(("pass", None))
            if r.recorded in FAILING_STATUSES:
                notes.append(f"{r.path.name}: relation {r.relation.name}, recorded {r.recorded}, holds now"
                             + (": fixed, or the state its calls depended on (addresses, caches kept between calls) "
                                "did not recur in this fresh worker; keep the file until the fix is known"
                                if r.relation.name == "sequence" else ""))
        else:
            where = r.relation.case.name or r.relation.case.case_id()
            out.append((r.status, Finding("replay", f"relation {r.relation.name} on {where}", r.status,
                                          r.finding[:300], r.finding, replay_command(r.path, kernel.name, plugins),
                                          str(r.path))))
    return out


def _check_determinism(kernel, device, options, plugins) -> CheckResult:
    """The determinism reruns (:func:`jfa_verify.checks.determinism.verify_reruns`): each case's reruns in a case
    worker, with the run's timeout for each rerun (a crash or a hang is the case's verdict, and the gate goes on); a
    failing case's file (with its reruns and what differed) is kept in the reproducers folder."""
    from jfa_verify.checks.determinism import verify_reruns

    cases = small_cases(kernel, device, options.small_cases, options.run.seed)
    pairs = verify_reruns(cases, kernel, device, Corpus(options.reproducers), _settings(options), reruns=options.reruns)
    out = CheckResult(kernel.name, "determinism", _status_of([r for _, r in pairs]), cases=len(pairs),
                      passed=[_name(v.case) for v, r in pairs if r.status == "pass"])
    for v, r in pairs:
        if r.failed:
            out.findings.append(Finding("determinism", _name(v.case), r.status,
                                        (v.differences or [v.message])[0][:300], r.explain(), r.replay_command(),
                                        r.reproducer))
    if not pairs:
        out.status, out.reason = "skip", "no supported case"
    if not kernel.capabilities.deterministic:
        out.details.append("the kernel declares itself non-deterministic: each rerun held to its budget")
    return out


def _check_stress(kernel, device, options, plugins) -> CheckResult:
    """The stress reruns (:func:`jfa_verify.checks.stress.run_stress`): a finding per case whose reruns differ
    bit-wise (a deterministic kernel), fail against the references or raise, its case file kept in the reproducers
    folder (``jfa-verify replay FILE`` reruns it); the modes run and skipped in details."""
    from jfa_verify.checks.stress import StressOptions, run_stress

    report = run_stress(kernel, device, StressOptions(reruns=options.stress_reruns, seed=options.run.seed,
                                                      timeout_s=options.run.timeout_s),
                        settings=_settings(options), corpus=Corpus(options.reproducers))
    checked = [v for v in report.verdicts if v.status != "unsupported"]
    out = CheckResult(kernel.name, "stress", "pass", cases=len(checked),
                      details=[f"{report.reruns} reruns per case, {len(checked)} case(s)"] + report.mode_lines(),
                      passed=[_name(v.case) for v in checked if v.status == "pass"])
    for v in checked:
        if v.status != "pass":
            summary = (v.first_difference.describe() if v.first_difference else (v.failures or [v.message])[0])
            result = v.result(plugins)
            out.findings.append(Finding("stress", v.case.name, "fail", summary[:300], v.describe(),
                                        result.replay_command(), v.reproducer))
    out.status = "fail" if out.findings else ("skip" if not checked else "pass")
    if not checked:
        out.reason = "no stress case inside the kernel's capabilities"
    return out


def _check_memory(kernel, device, options, plugins, fill: str, check: str) -> "CheckResult | list[CheckResult]":
    """The canaries (``fill="nan"``) or recycled-memory (``"large"``) check: the small cases under guard bands and
    that fill of uninitialized memory.

    A case whose outputs fail there with no guard band written is run again on fresh memory (no memory mode), twice
    in one case worker (:func:`~jfa_verify.checks.determinism.verify_reruns`): when those two runs differ bit-wise
    too (a kernel declared non-deterministic: when one of them fails its budget), what the memory mode showed is the
    kernel's nondeterminism, not memory; a new user's nondeterministic kernel had its extra error filed under
    ``recycled_memory``. Such a case is no finding of this check (its memory-mode file is removed; a line in
    ``details`` says so) but a ``determinism`` finding, with the reruns' case file: returned as a second
    :class:`CheckResult` of check ``determinism``, which the gate merges into that check's own when it ran.

    A case whose failure there recurs alike on fresh memory is a plain wrong result: a line in ``details`` (its
    memory-mode file removed) where the gate also runs the suite or the campaign, which report it; this check's
    finding where it runs neither."""
    from jfa_verify.run.loop import Verifier

    done: list = []  # (the cases judged when a stop comes: the interrupted check's count)
    verifier, settings = None, _settings(options).replace(memory=fill)
    try:
        with Verifier(kernel, device, options.reproducers, settings) as verifier:
            results = verifier.verify_all(small_cases(kernel, device, options.small_cases, options.run.seed),
                                          on_result=done.append)
    except KeyboardInterrupt as e:
        raise _stopped(done, verifier, kernel, settings) from e
    checked = [r for r in results if r.status != "unsupported"]
    unwritten = [r for r in checked if r.status == "fail" and not r.findings_of("memory")]
    unsteady = _unsteady_on_fresh_memory(kernel, device, options, unwritten)
    ordinary = _failing_alike_on_fresh_memory(kernel, device, options,
                                              [r for r in unwritten if r.case.case_id() not in unsteady])
    # A plain wrong result is the suite's and the campaign's finding; a gate that runs neither keeps it here (a new
    # user's `gate --checks recycled_memory canaries` passed a kernel whose outputs both checks saw wrong, 2026-12-08)
    reported_elsewhere = bool({"suite", "campaign"} & set(options.checks))
    set_aside = ordinary if reported_elsewhere else {}
    kept = [r for r in checked if r.case.case_id() not in unsteady and r.case.case_id() not in set_aside]
    out = CheckResult(kernel.name, check, _status_of(kept), cases=len(checked),
                      findings=[_finding(check, r) for r in kept if r.failed],
                      passed=[_name(r.case) for r in kept if r.status == "pass"])
    if not checked:
        out.status, out.reason = "skip", "no supported case"
    for r in checked:
        if r.case.case_id() not in ordinary:
            continue
        line = (f"{_name(r.case)}: fails alike on fresh memory ({ordinary[r.case.case_id()]}), with no guard band "
                f"written: the kernel's result is wrong whatever memory holds")
        if not reported_elsewhere:
            out.details.append(f"{line}; a finding here, as this gate runs neither the suite nor the campaign")
            continue
        if r.reproducer:
            Path(r.reproducer).unlink(missing_ok=True)  # (a plain run's failure: the suite's and the campaign's)
        out.details.append(f"{line}, which the suite and the campaign report; not a finding of this check")
    if not unsteady:
        return out
    moved = CheckResult(kernel.name, "determinism", "fail", cases=len(unsteady))
    for r in checked:
        if r.case.case_id() in unsteady:
            if r.reproducer:
                Path(r.reproducer).unlink(missing_ok=True)  # (not this check's finding: the reruns' file is)
            v, rerun = unsteady[r.case.case_id()]
            out.details.append(f"{r.case.name or r.case.case_id()}: failed under this check's memory mode, and two "
                               f"runs on fresh memory differ too: the kernel's nondeterminism, not memory (filed "
                               f"under determinism)")
            moved.findings.append(Finding("determinism", r.case.name or r.case.case_id(), rerun.status,
                                          (v.differences or [v.message])[0][:300], rerun.explain(),
                                          rerun.replay_command(), rerun.reproducer))
    moved.details.append(f"found by the {check} check: its failures there also differ between runs on fresh memory")
    return [out, moved]


def _failing_alike_on_fresh_memory(kernel, device, options, failing) -> dict:
    """``{case id: the failing outputs}`` of the ``failing`` results (no guard band written) whose case, run once more
    with no memory mode (fresh allocations, NaN-filled as in every run), fails with the same outputs failing: the
    memory mode did not cause the failure. A new user's gate filed a plain causal-mask bug under ``canaries`` and
    ``recycled_memory`` as well, each with the suite's text, and the summary sent them looking for a stray write.
    The fresh run's files go to a temporary folder (the memory run's file is the one the check keeps or removes)."""
    if not failing:
        return {}
    import tempfile

    from jfa_verify.run.loop import Verifier

    with tempfile.TemporaryDirectory(prefix="jfa-fresh-") as folder:
        with Verifier(kernel, device, folder, _settings(options).replace(memory=None)) as verifier:
            fresh = {r.case.case_id(): r for r in verifier.verify_all([r.case for r in failing])}
    alike = {}
    for r in failing:
        again = fresh.get(r.case.case_id())
        if again is not None and again.status == r.status and _failing_outputs(again) == _failing_outputs(r):
            alike[r.case.case_id()] = ", ".join(_failing_outputs(r)) or r.status
    return alike


def _failing_outputs(result) -> tuple[str, ...]:
    """The outputs (o, lse, dq, dk, dv) a failed case's verdict judged wrong, in order."""
    return tuple(name for name, o in result.to_dict().get("outputs", {}).items() if not o.get("passed", True))


def _unsteady_on_fresh_memory(kernel, device, options, failing) -> dict:
    """``{case id: (RerunVerdict, CaseResult)}`` of the ``failing`` results' cases whose two runs on fresh memory (no
    memory mode, in one case worker) differ bit-wise (or, for a kernel declared non-deterministic, fail its budget):
    their failure under a memory mode is the kernel's nondeterminism."""
    if not failing:
        return {}
    from jfa_verify.checks.determinism import verify_reruns

    pairs = verify_reruns([r.case for r in failing], kernel, device, Corpus(options.reproducers),
                          _settings(options).replace(memory=None), reruns=2)
    return {v.case.case_id(): (v, rerun) for v, rerun in pairs if v.status == "fail"}


def _check_sanitizer(kernel, device, options, plugins) -> CheckResult:
    """compute-sanitizer's tools on the kernel alone (``jfa_verify.cli.kernel_only``, the smallest layout).

    A kernel that declares a control (:attr:`Kernel.sanitizer_control`) has it run under racecheck first;
    racecheck errors of the form the control shows on Triton's warp-specialization scaffold are then not
    judged (:func:`jfa_verify.checks.sanitizer.classify_races`). Every other error is a finding.
    """
    if device.type != "cuda":
        return CheckResult(kernel.name, "sanitizer", "skip", reason="compute-sanitizer needs a CUDA device")
    tool_path = shutil.which("compute-sanitizer")
    if tool_path is None:
        return CheckResult(kernel.name, "sanitizer", "skip", reason="compute-sanitizer is not on PATH")
    out = CheckResult(kernel.name, "sanitizer", "pass", cases=options.sanitizer_cases)
    log_dir = Path(options.reproducers)
    log_dir.mkdir(parents=True, exist_ok=True)
    timeout_s = options.run.timeout_s or 600
    for tool in options.sanitizer_tools:
        t0 = time.perf_counter()
        control = _run_control(kernel, tool_path, tool, log_dir, timeout_s, out) if tool == "racecheck" else None
        # the suite's smallest layout (the tools slow every access down by orders of magnitude), through
        # the kernel alone: a full run would launch the oracles' kernels (cuDNN SDPA) under the tool too
        target = ["jfa_verify.cli.kernel_only", "--device", "cuda", "--kernel", kernel.name, "--filter",
                  SANITIZER_LAYOUT, "--max-cases", str(options.sanitizer_cases)]
        target += [x for p in plugins for x in ("--plugin", p)]
        try:
            run = sanitizer.run_tool(tool_path, tool, target, timeout_s)
        except subprocess.TimeoutExpired:  # the tools slow kernels by orders of magnitude: not a kernel hang
            out.status = "error" if out.status == "pass" else out.status
            out.reason = f"compute-sanitizer {tool} did not finish within {timeout_s:g} s"
            continue
        # the whole report, kept beside the reproducers (a CI artifact): hazards need triage, 4 kB is an excerpt
        log_path = log_dir / f"sanitizer-{kernel.name}-{tool}.log"
        log_path.write_text(run.text)
        out.details.append(f"{tool}: {run.errors if run.errors is not None else 'no'} error summary, exit "
                           f"{run.returncode}, {time.perf_counter() - t0:.0f} s, log {log_path}")
        n = run.errors
        if n and tool == "racecheck" and control is not None:
            kernel_dirs = sanitizer.source_dirs(kernel.loader, plugins) + [Path(d) for d in kernel.source_dirs]
            races = sanitizer.classify_races(run, kernel_dirs, control,
                                             sanitizer.source_dirs(kernel.sanitizer_control),
                                             sanitizer.kernel_files(kernel))
            if races.not_judged:
                out.not_judged.append(
                    f"racecheck: {len(races.not_judged)} of {n} error(s) not judged, each a read at a kernel's def "
                    f"line against writes there or at its warp_specialize call (the code Triton emits for the "
                    f"partitions), the form racecheck also reports on the race-free control "
                    f"{kernel.sanitizer_control} ({races.control_scaffold} such): "
                    + "; ".join(sanitizer.describe(b) for b in races.not_judged) + f"; log {log_path}")
            n = races.judged
        if n:
            out.status = "fail"
            report = "\n".join(line for line in run.text.splitlines() if "=========" in line)
            out.findings.append(Finding("sanitizer", tool, "fail", f"{tool}: {n} error(s)", report[-4000:],
                                        shlex.join(run.cmd), str(log_path)))
        elif run.errors == 0 and run.returncode != 0 and out.status == "pass":  # nothing ran to the end under the tool
            out.status = "error"
            out.reason = f"{tool}: the kernel did not run under the tool (exit {run.returncode}): {run.text[-800:]}"
        elif run.errors is None and out.status == "pass":
            out.status = "error"
            out.reason = f"{tool}: no ERROR SUMMARY (exit {run.returncode}): {(run.text)[-800:]}"
    return out


def _run_control(kernel, tool_path: str, tool: str, log_dir: Path, timeout_s: float,
                 out: CheckResult) -> Optional["sanitizer.ToolRun"]:
    """The tool on the kernel's declared control, its log kept and a note in ``out.details``; None when the
    kernel declares none or the control did not run to its summary (the kernel is then judged as usual)."""
    if not kernel.sanitizer_control:
        return None
    log_path = log_dir / f"sanitizer-{kernel.name}-{tool}-control.log"
    try:  # the control's own exit code: it must have run and checked its results (exit 0)
        run = sanitizer.run_tool(tool_path, tool, [kernel.sanitizer_control], timeout_s, error_exitcode=None)
    except subprocess.TimeoutExpired:
        out.details.append(f"{tool}: the control {kernel.sanitizer_control} did not finish within {timeout_s:g} s")
        return None
    log_path.write_text(run.text)
    if run.errors is None or run.returncode != 0:
        out.details.append(f"{tool}: the control {kernel.sanitizer_control} did not run under the tool "
                           f"(exit {run.returncode}), log {log_path}")
        return None
    out.details.append(f"{tool}: {run.errors} error(s) on the control {kernel.sanitizer_control}, log {log_path}")
    return run


def _check_perf(kernel, device, options, plugins) -> CheckResult:
    from jfa_verify.checks import perf

    if not (options.perf_baseline or options.perf_record or options.perf_peer):
        return CheckResult(kernel.name, "perf", "skip", reason="no --perf-baseline, --perf-record or --perf-peer given")
    out = CheckResult(kernel.name, "perf", "pass")
    if options.perf_baseline or options.perf_record:
        times = perf.measure(kernel, device)
        out.cases = len(times)
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"
        if options.perf_record:
            perf.write_baseline(options.perf_record, kernel.name, name, times)
            out.details.append(f"baseline recorded in {options.perf_record}")
        if options.perf_baseline:
            base = perf.read_baseline(options.perf_baseline)
            if base.get("device") != name:
                out.details.append(f"warning: baseline measured on {base.get('device')}, this device is {name}")
            if base.get("kernel") not in (None, kernel.name):
                out.details.append(f"warning: baseline recorded for kernel {base.get('kernel')!r}, compared here "
                                   f"with {kernel.name!r}")
            for v in perf.compare(times, base["times_ms"], options.perf_threshold):
                out.details.append(v.describe())
                if v.regressed:
                    out.status = "fail"
                    out.findings.append(Finding("perf", v.workload, "fail", v.describe()))
    if options.perf_peer:
        _compare_with_peer(kernel, device, options, out)
    return out


def _compare_with_peer(kernel, device, options: GateOptions, out: CheckResult) -> None:
    """The perf check's comparison with ``options.perf_peer`` (:func:`jfa_verify.checks.perf.measure_against_peer`):
    a ratio line per configuration in ``out.details`` and ``out.peer_ratios``, a finding per ratio below
    ``options.perf_min_ratio``."""
    from jfa_verify.checks import perf
    from jfa_verify.protocol.registry import get_kernel

    peer = get_kernel(options.perf_peer)
    why = peer.device_reason(device)
    if why is not None:
        raise InvalidInput(f"perf peer {peer.name!r} cannot run on {device.type}: {why}")
    ratios, not_compared = perf.measure_against_peer(kernel, peer, device)
    out.details += not_compared
    out.cases += len(ratios)
    least = options.perf_min_ratio
    for r in ratios:
        below = least is not None and r.ratio < least
        out.peer_ratios.append({**r.to_dict(), "min_ratio": least, "below_min_ratio": below})
        line = r.describe(kernel.name)
        out.details.append(line + (f"  BELOW --perf-min-ratio {least:g}" if below else ""))
        if below:
            out.status = "fail"
            out.findings.append(Finding(
                "perf", _ratio_case(out.peer_ratios[-1]), "fail",
                f"{r.configuration}: {kernel.name} takes {1 / r.ratio:.2f}x the time of {peer.name} (peer/kernel "
                f"{r.ratio:.3f} < --perf-min-ratio {least:g}; {kernel.name} {r.kernel_ms:.3f} ms, {peer.name} "
                f"{r.peer_ms:.3f} ms)",
                f"{line}\nboth timed through the public contract call on the same inputs [{r.case}], alternating "
                f"kernel and peer round by round"))
    if not ratios:
        why = (f"no workload that both {kernel.name} and the peer {peer.name} run on {device.type}: "
               + "; ".join(not_compared))
        if out.cases == 0:
            out.status, out.reason = "skip", why
        else:
            out.not_judged.append(why)


_RUNNERS = {"suite": _check_suite, "campaign": _check_campaign, "replay": _check_replay,
            "determinism": _check_determinism, "stress": _check_stress,
            "canaries": lambda k, d, o, p: _check_memory(k, d, o, p, "nan", "canaries"),
            "recycled_memory": lambda k, d, o, p: _check_memory(k, d, o, p, "large", "recycled_memory"),
            "sanitizer": _check_sanitizer, "perf": _check_perf}


def run_gate(kernels: Sequence[Kernel], device, options: GateOptions, *,
             log: Callable[[str], None] = print) -> GateReport:
    """Run ``options.checks`` on every kernel; returns the :class:`GateReport` (never raises for findings).

    A check that raises is recorded as ``error`` with the exception; the other checks still run. Ctrl-C
    (``KeyboardInterrupt``; SIGTERM too under :func:`~jfa_verify.run.interrupts.terminate_as_interrupt`) ends the
    gate: the report holds the checks that finished, with ``interrupted`` set (exit 130).
    """
    device = torch.device(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"
    report = GateReport(name, options, environment=environment())
    t_start = time.perf_counter()
    campaign = (f", campaign {options.campaign_examples} examples (Hypothesis, derandomized by the seed)"
                if "campaign" in options.checks else "")
    reruns = f", {options.reruns} reruns" if "determinism" in options.checks else ""
    log(f"jfa-verify gate on {name}: kernels {', '.join(k.name for k in kernels)}; checks {', '.join(options.checks)}; "
        f"seed {options.run.seed}{campaign}{reruns}; {describe_jobs(options.run.jobs, options.jobs_reason)}")
    try:
        _run_checks(report, kernels, device, options, options.run.plugins, log)
    except KeyboardInterrupt:  # the check under way has no verdict; what finished is reported
        report.interrupted = True
        log("  interrupted: the report holds the checks that finished")
    report.seconds = time.perf_counter() - t_start
    return report


def _run_checks(report: GateReport, kernels, device, options: GateOptions, plugins, log) -> None:
    for kernel in kernels:
        why = kernel.device_reason(device)
        crashed = False
        for check in options.checks:
            if why is not None:
                report.results.append(CheckResult(kernel.name, check, "skip", reason=why))
                continue
            if crashed and check == "stress":  # runs in this process: a crash would end the gate
                report.results.append(CheckResult(kernel.name, check, "skip", reason="the kernel crashed its "
                                                  "process in an isolated check; reruns in-process skipped"))
                continue
            t0, started = time.perf_counter(), time.time()
            try:
                result = _RUNNERS[check](kernel, device, options, tuple(plugins))
            except KeyboardInterrupt as e:  # no verdict; what it found so far is in the case files: say where
                ran = e.cases if isinstance(e, _Interrupted) else None  # (a check that does not count its cases)
                cut = e.in_flight if isinstance(e, _Interrupted) else []
                so_far = (f" after {ran} case(s) (the rest did not run)" if ran is not None
                          else " (its cases so far not counted)")
                report.results.append(CheckResult(  # (an "error" read as a check that could not judge)
                    kernel.name, check, "interrupted", seconds=time.perf_counter() - t0, cases=ran or 0,
                    findings=_written_since(options.reproducers, kernel.name, check, started, plugins),
                    reason=f"interrupted during this check{so_far}"
                           + (f", {len(cut)} case(s) cut short (named below, with their replay)" if cut else "")
                           + f"; the failing cases it found so far are case files in {options.reproducers} "
                             f"(jfa-verify findings {options.reproducers})",
                    details=[_CUT_SHORT + line for line in cut],
                    passed=e.passed if isinstance(e, _Interrupted) else None))
                for line in cut:
                    log(f"  {kernel.name} / {check}: {_CUT_SHORT}{line}")
                raise
            except ModuleNotFoundError as e:  # (a new user's --no-deps install: one line per check, no fix named)
                result = CheckResult(kernel.name, check, "error", reason=missing_dependency(e))
            except Exception as e:
                result = CheckResult(kernel.name, check, "error", reason=f"{type(e).__name__}: {e}")
            result, *filed = result if isinstance(result, list) else [result]  # (findings the check files under
            # other checks: the memory checks' nondeterminism)
            result.seconds = time.perf_counter() - t0
            crashed = crashed or result.status == "crash"
            for one in (result, *filed):
                _file_under(report, one)
            note = f" ({result.reason})" if result.reason else ""
            log(f"  {kernel.name} / {check}: {result.status}, {result.cases} case(s), {len(result.findings)} "
                f"finding(s), {result.seconds:.1f} s{note}")
            for line in result.details:
                log(f"      {line}")
            for line in result.not_judged:
                log(f"      not judged: {line}")


# a check's statuses, mildest first (merged results)
_WORSE = ("skip", "pass", "fail", "error", "interrupted", "hang", "crash")


def _file_under(report: GateReport, result: CheckResult) -> None:
    """Add ``result`` to the report, merged into the result of the same kernel and check when there is one already:
    a check files findings under another check (the memory checks' nondeterminism under ``determinism``), which may
    have run before or run after. A case with a finding there already is not added again; the status is the worse
    of the two."""
    own = next((r for r in report.results if r.kernel == result.kernel and r.check == result.check), None)
    if own is None:
        report.results.append(result)
        return
    known = {f.case for f in own.findings}
    own.findings += [f for f in result.findings if f.case not in known]
    own.details += result.details
    own.not_judged += result.not_judged
    own.cases, own.seconds = max(own.cases, result.cases), own.seconds + result.seconds
    rank = {status: i for i, status in enumerate(_WORSE)}
    if rank.get(result.status, 2) > rank.get(own.status, 2):
        own.status, own.reason = result.status, result.reason or own.reason


def write_outputs(report: GateReport, *, json_path=None, junit_path=None, markdown_path=None) -> list[Path]:
    """Write the report's JSON, JUnit XML and Markdown (and append the Markdown to ``$GITHUB_STEP_SUMMARY``)."""
    from jfa_verify.run.report import write_json

    written = []
    if json_path:
        written.append(write_json(json_path, report.to_dict()))
    if junit_path:
        Path(junit_path).write_text(report.to_junit())
        written.append(Path(junit_path))
    markdown = report.to_markdown()
    if markdown_path:
        Path(markdown_path).write_text(markdown)
        written.append(Path(markdown_path))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a") as fh:
                fh.write(markdown)
        except OSError as e:  # (checked before any work; one that became unwritable since costs no verdict)
            print(f"jfa-verify gate: warning: $GITHUB_STEP_SUMMARY {summary!r} not written: {e}", file=sys.stderr)
    return written
