"""Fuzz campaigns: Hypothesis drives cases through a kernel; failures shrink into deduplicated findings.

:class:`Campaign` (or :func:`run_campaign`, its settings given one by one) is one campaign worker
(``jfa-verify fuzz --workers N`` runs N of them, see :mod:`jfa_verify.fuzz.workers`). It replays its share of
the saved findings, then searches in **rounds**: each round replays the shared example database's saved examples
(Hypothesis's ``reuse`` phase, in a run of its own), then draws at most ``round_examples`` new cases with its own seed
(``generate``, ``target``), shrinking in both. Each round re-reads the database, so a failure saved by another worker is
replayed here; the draws never read it, so a seed draws the same cases whatever the database holds. A saved failure of
no finding here (another campaign's, on a shared database) is replayed once more to be shrunk
(:class:`~jfa_verify.fuzz.database.SavedAsSecondary`).

Findings (:mod:`jfa_verify.fuzz.findings`): a failing case whose key and input classes match a
known finding is counted as that finding's example and the search goes on (a known bug never ends
a campaign). A failing case that matches none is shrunk; the round ends with its smallest case,
which becomes a new finding (or, when its signature is known after all, an example). Shrinking
follows only failures of the same key, so it cannot slide into a known bug; it stops after
``shrink_seconds`` (each step of a hang costs a whole timeout). Shrink steps' case files are
removed at the end of the round, or by :func:`prepare_corpus` after a kill.

Every case runs through :class:`jfa_verify.run.loop.Verifier` (the one run loop), so its case file
exists before the kernel runs; with ``isolate=True`` (:class:`~jfa_verify.run.settings.RunSettings`) a crash
or hang is the case's verdict and the campaign goes on. Hypothesis's database defaults to
``<corpus_dir>/.hypothesis``; its keys are prefixed by kernel and device type
(:class:`~jfa_verify.fuzz.database.CampaignDatabase`). Hypothesis's other files (its cache of the constants of local
modules, ``constants/``) go there too while a campaign runs (:func:`hypothesis_home`), never into a
``.hypothesis`` of the current folder, unless ``$HYPOTHESIS_STORAGE_DIRECTORY`` names a place of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence
from unittest import SkipTest

from hypothesis import HealthCheck, Phase, given, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase
from hypothesis.errors import Unsatisfiable

from jfa_verify.cases.case import Case
from jfa_verify.cases.coverage import Coverage, classify
from jfa_verify.core.device import keeps_device_choice
from jfa_verify.core.errors import InvalidInput, KernelConfigError
from jfa_verify.run.corpus import NOW_PASSING, RERUN_KEYS, TIMEOUT_EXIT_CODE, Corpus, read_case_file
from jfa_verify.run.settings import RunSettings

from .database import CampaignDatabase, SavedAsSecondary, open_database
from .findings import (
    SHRINK_BORN_CLASSES,
    Finding,
    FindingIndex,
    finding_id,
    fold_examples,
    key_of,
    mark_finding,
    match_finding,
    record_example,
    recover,
    running_files,
    signature,
    size_key,
)

__all__ = ["Campaign", "CampaignFailure", "CampaignSummary", "hypothesis_home", "prepare_corpus", "run_campaign",
           "TIMEOUT_EXIT_CODE"]


FOUND_HERE = ("search", "covering")  # CampaignFailure sources that found the failure in this campaign


@dataclass
class CampaignFailure:
    """One finding of a campaign: its case file, status, verdict text, signature and examples seen here.

    ``source``: ``"search"`` (found and shrunk now), ``"covering"`` (found by the covering array, kept as found),
    ``"corpus"`` (a saved finding that still fails), ``"leftover"`` (a case file a killed process left ``"running"``,
    replayed: it failed). :data:`FOUND_HERE` are the sources of findings new to the campaign.
    """

    case: Case
    status: str
    path: Optional[Path]
    explanation: str
    source: str
    signature: dict = field(default_factory=dict)
    examples: int = 0  # further failing cases of this finding met by this campaign
    found_at: Optional[int] = None  # cases this campaign had run when it first met this finding (that one included)

    @property
    def id(self) -> str:
        """The finding's id as every listing gives it (:func:`~jfa_verify.fuzz.findings.finding_id`: its case
        file's)."""
        return finding_id(self.path) if self.path is not None else self.signature.get("id", "")


@dataclass
class CampaignSummary:
    """What a campaign did. ``statuses`` counts verdicts over every run case (shrink steps included;
    ``shrink_statuses`` counts those of the shrink steps alone); ``generated`` counts new cases drawn (the
    ``max_examples`` budget)."""

    kernel: str
    device: str
    seed: int
    cases_run: int = 0
    generated: int = 0
    rounds: int = 0
    statuses: Counter = field(default_factory=Counter)
    shrink_statuses: Counter = field(default_factory=Counter)
    failures: list[CampaignFailure] = field(default_factory=list)
    fixed: list[Path] = field(default_factory=list)
    known_examples: Counter = field(default_factory=Counter)  # finding id -> examples of known findings
    coverage: Coverage = field(default_factory=Coverage)
    pairs: object = None  # a jfa_verify.cases.pairs.PairCoverage: the pairs of contract classes exercised
    seconds: float = 0.0
    first_failure_at: Optional[int] = None  # cases run up to and including the first failing one
    interrupted: bool = False
    side_failures: int = 0  # failures of another kind met while shrinking (not drawn cases; files removed)
    notes: list[str] = field(default_factory=list)
    packs: int = 0  # packed launches run (--pack): each also counts its parts in cases_run
    packs_failed: int = 0  # of those, launches that failed and were split (jfa_verify.judge.packing.stand_alone)
    draws: str = ""  # sha256 of the case ids drawn (generated), in order: same seed, same draws, same digest

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    def to_dict(self) -> dict:
        return {
            "kernel": self.kernel, "device": self.device, "seed": self.seed, "cases_run": self.cases_run,
            "generated": self.generated, "rounds": self.rounds, "statuses": dict(self.statuses),
            "shrink_statuses": dict(self.shrink_statuses),
            "seconds": self.seconds, "interrupted": self.interrupted, "notes": self.notes,
            "side_failures": self.side_failures, "packs": self.packs, "packs_failed": self.packs_failed,
            "failures": [{"id": f.id, "case": f.case.to_dict(), "status": f.status,
                          "path": str(f.path) if f.path else None, "source": f.source, "signature": f.signature,
                          "examples": f.examples, "found_at": f.found_at, "explanation": f.explanation}
                         for f in self.failures],
            "known_examples": dict(self.known_examples),
            "fixed": [str(p) for p in self.fixed], "coverage": self.coverage.to_dict(),
            "pairs": self.pairs.to_dict() if self.pairs is not None else None,
            "first_failure_at": self.first_failure_at, "draws": self.draws,
        }

    def format(self, *, coverage: bool = True) -> str:
        """A human report: counts, each finding with its verdict and replay command, then coverage."""
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())) or "none"
        packed = (f", {self.packs} packed launch(es), {self.packs_failed} split" if self.packs else "")
        lines = [f"campaign on {self.kernel} ({self.device}, seed {self.seed}): {self.cases_run} case(s) "
                 f"({self.generated} drawn{packed}) in {self.seconds:.1f} s: {counts}"
                 + (" -- interrupted" if self.interrupted else "")]
        for p in self.fixed:
            lines.append(f"  fixed (now passes; its file moved to {p.parent / NOW_PASSING}): {p.name}")
        for f in self.failures:
            sig = f" finding {f.id}" if f.signature else ""
            more = f", {f.examples} more example(s)" if f.examples else ""
            lines.append(f"  {f.source}{sig} [{f.status}] {f.case.describe()} lengths={f.case.kv_lengths}{more}")
            lines.extend("    " + line for line in f.explanation.splitlines()[1:])
            if f.path is not None:
                lines.append(f"    case file: {f.path}")
        ours = {f.id for f in self.failures}
        before = {k: v for k, v in self.known_examples.items() if k not in ours}
        if before:
            lines.append("  examples of findings not replayed by this worker: "
                         + ", ".join(f"{k} x{v}" for k, v in sorted(before.items())))
        if not self.failures:
            lines.append("  no failures")
        lines.extend(f"  note: {n}" for n in self.notes)
        if coverage:
            lines.append(self.coverage.format(device_type=self.device.split(":")[0]))
            if self.pairs is not None:
                lines.append(self.pairs.format())
        return "\n".join(lines)


def _rarity(classes: dict, counts: Counter) -> float:
    """Sum over a case's contract classes of 1 / (1 + times drawn so far): high for rarely drawn classes."""
    return sum(1.0 / (1 + counts[(d, c)]) for d, cs in classes.items() for c in cs)


class _CaseFailed(AssertionError):
    """Raised inside the Hypothesis test so it shrinks the failing case."""


def _fail(result) -> None:
    """Raise the failure Hypothesis shrinks. One raise site: Hypothesis tells bugs apart by exception type
    and the line that raised, and every failure of a round must count as the same one."""
    raise _CaseFailed(result.explain())


class _StopRound(BaseException):
    """Ends a Hypothesis run from inside the test (shrink budget spent). A BaseException: Hypothesis lets
    it through instead of treating it as a failure of the test."""


class _StopCampaign(_StopRound):
    """Ends the campaign (deadline, or the coordinator asked)."""


class _Misregistered(_StopRound):
    """Carries a :class:`KernelConfigError` out of the Hypothesis test (a wrong registration is no failure of
    a case: nothing to shrink); the campaign raises the error itself."""


def classifier(kernel, device_type: str) -> Callable[[Case], set[str]]:
    """``classes_of(case)``: the input classes of a case under ``kernel``'s tiles on ``device_type``."""
    from jfa_verify.protocol.kernel import tiles_for_shape

    return lambda case: classify(case, tiles_for_shape(kernel, case.head_dim, case.dv, case.torch_dtype,
                                                       device_type).as_tuple())


@contextlib.contextmanager
def hypothesis_home(corpus_dir: "str | Path"):
    """Hypothesis's storage folder (its local-constants cache ``constants/``; its example database is the
    campaign's own, :func:`~jfa_verify.fuzz.database.default_database`) set to that database's folder,
    ``<corpus_dir>/.hypothesis``, for the duration, and the one before restored after. Hypothesis's default is
    ``.hypothesis`` in the current folder: a campaign (``fuzz``, ``gate``) left files there unasked.
    ``$HYPOTHESIS_STORAGE_DIRECTORY``, when set, is the user's choice and is kept."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    from hypothesis import configuration

    from jfa_verify.fuzz.database import default_database

    # (Hypothesis offers a setter only: the value before, None until its first use, is read to be restored)
    before = getattr(configuration, "__hypothesis_home_directory", None)
    configuration.set_hypothesis_home_dir(default_database(corpus_dir))
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(before)


def prepare_corpus(corpus_dir: "str | Path", kernel, verifier, classes_of) -> dict:
    """Before a campaign (one process): replay case files left ``"running"`` by a killed process, then
    :func:`~jfa_verify.fuzz.findings.recover` (shrink steps, duplicates, findings).

    A leftover ``"running"`` file is replayed through ``verifier`` (isolated: it may be the crash that
    killed the process): a failure of any kind is kept as a finding (source ``"leftover"``); a pass means
    the process was killed mid-case and the file is removed -- it is never reported as "fixed".

    A leftover packed case (``--pack``) that fails is split as a campaign splits it
    (:func:`~jfa_verify.judge.packing.stand_alone`): the case its failure stands in is kept, not the pack.

    Returns ``{"leftovers": [{"path", "status", "case", "kept"}...], "shrink_steps_removed", "duplicates_removed",
    "new_findings"}``; ``kept``: the leftover's file is still there after recovery (a finding, or a shrink round's
    survivor), False when it was removed (a pass, or a failure folded into a known finding as an example). A split
    leftover's ``path``, ``status`` and ``case`` are those of the case its failure stands in, ``split_from`` the
    packed file's path.
    """
    from jfa_verify.judge.packing import stand_alone

    def discard(superseded) -> None:
        if superseded.reproducer:
            Path(superseded.reproducer).unlink(missing_ok=True)

    leftovers = []
    for path, case, payload in running_files(corpus_dir, kernel.name):
        # a shrink step keeps its round's marks, so recover() collapses the round with it
        marks = {k: payload[k] for k in ("shrink_round", "shrink_step") if k in payload}
        result = verifier.verify(case, marks or None)
        left = {"path": str(path), "status": result.status, "case": case}
        if result.failed and case.parts is not None:  # a packed launch: split until its failure stands alone
            alone = stand_alone(result, lambda c: verifier.verify(c, marks or None), discard)
            if alone is not result and alone.reproducer:
                left.update(path=alone.reproducer, status=alone.status, case=alone.case, split_from=str(path))
        leftovers.append(left)
    done = recover(corpus_dir, kernel.name, classes_of)
    for left in leftovers:
        left["kept"] = Path(left["path"]).exists()
    return {"leftovers": leftovers, **done}


def saved_findings(corpus_dir: "str | Path", kernel_name: str) -> list[Path]:
    """The case files of ``kernel_name``'s findings that a campaign replays, in name order (after
    :func:`prepare_corpus`).

    Files of the gate's reruns (a key of :data:`~jfa_verify.run.corpus.RERUN_KEYS`: determinism, stress) and of its
    memory-mode runs (``"memory"``) are not among them: a campaign runs a case once, without a memory mode, which
    cannot show what those found, so it reported them fixed on every campaign; ``jfa-verify replay`` and the gate's
    checks judge them."""
    out = []
    for f in FindingIndex(corpus_dir, kernel_name).findings.values():
        try:
            payload = read_case_file(f.path)[1]
        except InvalidInput:
            continue  # removed or rewritten by another worker meanwhile
        if not any(payload.get(k) for k in (*RERUN_KEYS, "memory")):
            out.append(f.path)
    return sorted(out)


@dataclass
class _Round:
    """The state of one Hypothesis run."""

    id: str
    target: Optional[tuple] = None  # the key of the failure being shrunk
    best: Optional[tuple] = None  # (case, result, path) of the smallest failure of that key so far
    steps: list = field(default_factory=list)  # case files written while shrinking
    started_shrinking: float = 0.0
    cut_short: bool = False  # shrinking stopped by its time budget
    found_at: Optional[int] = None  # the campaign's cases run when the failure being shrunk was drawn
    keep_last: bool = False  # the last case was a known finding's example: keep its database entry
    supersedes: Optional[Finding] = None  # the unshrunk finding this round shrinks again (its case is the bound)
    calls_after_target: int = 0  # test calls since the target was set: shrink steps, then Hypothesis's final replay


# Hypothesis examples of a replay of the database's saved examples as secondary ones: more than a database holds.
_EVERY_SAVED = 10**6
# Rounds in a row that end in a Hypothesis error without drawing a case before a worker gives up.
STALLED_ROUNDS = 3
# Seconds a case still running when the campaign should end (--duration over, or told to stop) may go on before it is
# stopped without a verdict: a hanging case held a 10-second campaign, and a stop, for its whole --timeout (120 s).
STOP_GRACE_S = 5.0


class Campaign:
    """One campaign worker: fuzz ``kernel`` with Hypothesis; findings are written to ``corpus_dir``, shrunk and
    deduplicated. Build it, then call :meth:`run` (once).

    Args:
        kernel: a registered kernel or its name.
        settings: how each case runs (:class:`~jfa_verify.run.settings.RunSettings`; None: the defaults):
            ``seed``: the Hypothesis seed of the first round (round r uses ``seed + 1000003 * r``): same seed,
            same draws, whatever the database holds (its examples are replayed in a run of their own).
            ``timeout_s``: wall-clock limit per case. Isolated: past it the case is a ``"hang"`` finding and the
            campaign goes on. In-process: the case file is marked ``"hang"`` and the process exits with
            :data:`TIMEOUT_EXIT_CODE` (a hung kernel cannot be interrupted).
            ``backward``: run the backward pass too (when the kernel has one). ``plugins``: plugin files the kernel
            came from (named in replay commands; loaded by isolated workers). ``isolate``: run cases in a worker
            process (crashes and hangs become findings). ``accept``: the kernel's declared conventions the user
            accepts (:func:`jfa_verify.run.runner.run_case`). ``memory``, ``budgets``: as
            :class:`~jfa_verify.run.loop.Verifier`.
        strategy: a strategy of :class:`Case` (default: :func:`jfa_verify.strategies.cases` for the
            kernel and device).
        max_examples: new cases to draw (None: no limit; then ``duration_s`` or ``deadline`` must end it).
            Saved findings' replays and shrink steps come in addition.
        corpus_dir: the folder of case files.
        device: ``"cpu"``, ``"cuda"``, a ``torch.device`` or None (the process's device, see
            :func:`jfa_verify.core.device.current_device`).
        shrink: shrink a new failure to a minimal case (otherwise keep it as found).
        database: a folder or ``redis://HOST:PORT`` (see :func:`~jfa_verify.fuzz.database.open_database`),
            an :class:`ExampleDatabase`, or None for ``<corpus_dir>/.hypothesis``.
        read_from: databases read through but never written (``MultiplexedDatabase``).
        duration_s, deadline: stop after this many seconds, or at this ``time.time()``.
        worker: this worker's number (in case-file annotations and example logs).
        replay: saved case files to replay first (None: prepare the corpus and replay every saved finding
            of the kernel; a coordinator does that once and hands each worker its share).
        on_event: called with a dict per case (``{"event": "case", ...}``) and per finding (``"finding"``).
        should_stop: polled before each case; True ends the campaign (its round is finished first).
        shrink_seconds: longest time spent shrinking one failure.
        round_examples: new cases per Hypothesis run (between database re-reads).
        worker_env: environment of the isolated case worker (``CUDA_VISIBLE_DEVICES``).
        covering: run the covering array of the contract's dimensions first
            (:func:`jfa_verify.cases.pairs.covering_array`, cheap and dense first), before drawing: every pair
            of classes the kernel supports is exercised in the first cases, whatever the draws.
        pack: draw packs of up to this many cases that share every field but lengths and seed, each pack run as
            one launch (:func:`jfa_verify.strategies.packs`, :mod:`jfa_verify.judge.packing`); 1 (the default) runs
            every case alone. Each part counts as a verified case; a failing pack is split until the failure
            stands in a case of its own, and that case is the finding Hypothesis shrinks (a pack whose parts
            all pass alone is a finding of its own). With a given ``strategy``, the most cases its packs hold
            (it draws them itself, as ``packs(..., size=pack)`` does): ``max_examples`` counts cases, not packs.

    Drawn cases are steered toward rarely drawn classes of the contract model
    (:mod:`jfa_verify.cases.dimensions`) with Hypothesis ``target()``; the summary's ``pairs`` counts the
    pairs of classes the campaign exercised.

    Raises:
        InvalidInput: neither ``max_examples`` nor a duration; ``pack`` < 1 (here); a bad database spec (in
            :meth:`run`).
    """

    def __init__(self, kernel, settings: Optional[RunSettings] = None, *, corpus_dir: "str | Path",
                 strategy: Optional[st.SearchStrategy[Case]] = None, max_examples: Optional[int] = 50, device=None,
                 shrink: bool = True, database: "str | ExampleDatabase | None" = None, read_from: Sequence[str] = (),
                 duration_s: Optional[float] = None, deadline: Optional[float] = None, worker: int = 0,
                 replay: Optional[Sequence["str | Path"]] = None, on_event: Optional[Callable[[dict], None]] = None,
                 should_stop: Optional[Callable[[], bool]] = None, shrink_seconds: float = 120.0,
                 round_examples: int = 100, worker_env: Optional[dict] = None, covering: bool = False,
                 pack: int = 1):
        if max_examples is None and duration_s is None and deadline is None:
            raise InvalidInput("a campaign needs max_examples or a duration (--max-examples N or --duration S)")
        if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1:
            raise InvalidInput(f"pack={pack!r}: give the most cases one launch holds, an integer >= 1 (1: no packing)")
        self.kernel, self.settings = kernel, settings or RunSettings()
        self.corpus_dir, self.strategy = corpus_dir, strategy
        self.max_examples, self.device, self.shrink, self.database = max_examples, device, shrink, database
        self.read_from, self.duration_s, self.deadline, self.worker = read_from, duration_s, deadline, worker
        self.replay, self.on_event, self.should_stop = replay, on_event, should_stop
        self.shrink_seconds, self.round_examples, self.worker_env = shrink_seconds, round_examples, worker_env
        self.covering, self.pack = covering, pack

    @keeps_device_choice
    def run(self) -> CampaignSummary:
        """Replay the saved findings (or ``replay``), run the covering array when asked, then search in rounds.

        Returns:
            A :class:`CampaignSummary`. Never raises for kernel failures; Ctrl-C (``KeyboardInterrupt``) ends the
            campaign with ``summary.interrupted`` set and no ``"running"`` file left behind.

        Raises:
            InvalidInput: a bad database spec.
            KernelConfigError: the kernel's ``load()`` returned no implementation (at its first case).
        """
        import threading

        with hypothesis_home(self.corpus_dir):
            self._start()
            ended = threading.Event()
            threading.Thread(target=self._end_late_case, args=(ended,), name="jfa-verify-campaign-end",
                             daemon=True).start()
            try:
                try:
                    self._replay_saved()
                    if self.covering:
                        self._run_covering()
                except _StopCampaign:  # (the search below ends at once: the campaign's end has come)
                    pass
                except KeyboardInterrupt:
                    self.summary.interrupted = True
                    self.verifier.close()
                    self.summary.seconds = time.perf_counter() - self.t0
                    return self.summary
                self._search()
                return self.summary
            finally:
                ended.set()

    def _end_late_case(self, ended) -> None:
        """Watch, beside the campaign: once it should end (:meth:`_stop_now`), a case still running
        :data:`STOP_GRACE_S` later is stopped without a verdict (:meth:`~jfa_verify.run.loop.Verifier.abandon`), and
        :meth:`_run_one` ends the campaign; the summary names the case and how to replay it."""
        while not self._stop_now():
            if ended.wait(0.25):
                return
        if not ended.wait(STOP_GRACE_S) and self.in_flight is not None and self.verifier.isolated:  # (in-process: a
            # running kernel cannot be stopped, and a later Ctrl-C must stay the user's)
            self.abandoned = True
            self.verifier.abandon()

    def _start(self) -> None:
        """Choose the device, resolve the kernel and strategy, open the corpus, the verifier and the database."""
        import torch

        from jfa_verify.cases.dimensions import Target
        from jfa_verify.cases.pairs import PairCoverage
        from jfa_verify.core.device import current_device, select_device
        from jfa_verify.protocol.registry import get_kernel
        from jfa_verify.run.loop import Verifier
        from jfa_verify.strategies import cases, packs

        dev = current_device() if self.device is None else select_device(torch.device(self.device).type)
        if isinstance(self.kernel, str):
            self.kernel = get_kernel(self.kernel)
        kernel = self.kernel
        self.dev, self.name = dev, kernel.name
        self.corpus = corpus = Corpus(self.corpus_dir)
        corpus.root.mkdir(parents=True, exist_ok=True)
        if self.duration_s is not None:
            self.deadline = min(self.deadline or float("inf"), time.time() + self.duration_s)
        if self.strategy is None:
            self.strategy = cases(kernel, device_type=dev.type) if self.pack == 1 else \
                packs(kernel, device_type=dev.type, size=self.pack)
        self.classes_of = classifier(kernel, dev.type)
        self.model = Target(kernel, dev.type)
        self.summary = CampaignSummary(kernel=self.name, device=str(dev), seed=self.settings.seed,
                                       coverage=Coverage.for_kernel(kernel, dev.type), pairs=PairCoverage(self.model))
        self.drawn: Counter = Counter()  # (dimension, class) -> cases drawn in it, for the rarity target
        self.verdicts: dict[str, object] = {}  # case id -> verdict (different draws build one case; verdicts are
        # deterministic, and a hang must not cost its timeout twice)
        self.t0 = time.perf_counter()
        self.in_flight: Optional[Case] = None  # the case being verified (for _end_late_case)
        self.abandoned = False  # _end_late_case stopped it
        self.emit = self.on_event or (lambda event: None)
        self.state = _Round(id="")
        self.step = itertools.count()
        self.drawn_examples = 0  # Hypothesis examples drawn in this round (a pack is one)
        self.draws = hashlib.sha256()  # the ids of the drawn cases, in order (summary.draws)
        self.reusing = False  # the round's replay of the database's examples (not draws: see _search)
        self.set_aside: Optional[_Round] = None  # that replay's round left unshrunk (_put_aside_unshrunk)
        self.index = None
        self.reshrunk: set[str] = set()  # ids of unshrunk findings given their shrink round in this campaign
        self.verifier = Verifier(kernel, dev, corpus, self.settings, worker_env=self.worker_env)
        if isinstance(self.database, ExampleDatabase):
            shared = self.database
        else:
            shared = open_database(str(self.database) if self.database else str(corpus.root / ".hypothesis"),
                                   self.read_from)
        self.db = CampaignDatabase(shared, f"{self.name}/{dev.type}/".encode(), keep=lambda: self.state.keep_last)

    def _stop_now(self) -> bool:
        return (self.should_stop is not None and self.should_stop()) or \
            (self.deadline is not None and time.time() >= self.deadline)

    def _run_one(self, case: Case, phase: str, annotations: Optional[dict] = None):
        """Verify ``case`` (once per case id): ``(result, path of its kept case file or None)``. A packed case counts
        each of its parts as a case, with the part's own verdict."""
        from jfa_verify.judge.packing import part_statuses
        from jfa_verify.run.runner import FAILING_STATUSES

        summary, verdicts = self.summary, self.verdicts
        key = case.case_id()
        if key in verdicts:
            result = verdicts[key]
            if not result.failed:
                return result, None
            path = self.corpus.path_for(case, self.name)
            plugins = self.verifier.settings.plugins
            return result, path if path.exists() else self.corpus.write(case, self.name, str(self.dev), result, plugins)
        t = time.perf_counter()
        self.in_flight = case
        try:
            result = self.verifier.verify(case, annotations)
        except KeyboardInterrupt:
            if not self.abandoned:  # the user's Ctrl-C or SIGTERM
                raise
            from jfa_verify.run.corpus import replay_command

            self.summary.notes.append(
                f"a case still running {STOP_GRACE_S:g} s after the campaign's end (--duration, or a stop) was "
                f"stopped without a verdict, {time.perf_counter() - t:.0f} s into it; replay it: "
                f"{replay_command(case, self.name, self.verifier.settings.plugins, timeout_s=self.settings.timeout_s)}")
            raise _StopCampaign() from None
        finally:
            self.in_flight = None
        parts, statuses = case.split(), part_statuses(result)
        share = (time.perf_counter() - t) / len(parts)
        summary.packs += len(parts) > 1
        for part, status in zip(parts, statuses):
            classes = summary.coverage.add(part)
            summary.pairs.add(part)
            summary.cases_run += 1
            summary.statuses[status] += 1
            if phase == "shrink":
                summary.shrink_statuses[status] += 1
            if status in FAILING_STATUSES and summary.first_failure_at is None:
                summary.first_failure_at = summary.cases_run
            self.emit({"event": "case", "status": status, "phase": phase, "classes": sorted(classes), "seconds": share,
                       "breakdown": {k: v / len(parts) for k, v in result.seconds.items()}})
        verdicts[key] = result
        if not result.failed:
            return result, None
        return result, Path(result.reproducer) if result.reproducer else None

    def _split_pack(self, result, path, phase: str, ran: bool = True):
        """A failing packed run, split until its failure stands alone (:func:`~jfa_verify.judge.packing.stand_alone`):
        ``(result, path)`` of that case; the files of the runs it supersedes are removed. ``ran``: the pack was
        launched now (not a verdict met again: its split is counted once, as its launch is)."""
        from jfa_verify.judge.packing import stand_alone

        self.summary.packs_failed += ran
        paths = {id(result): path}

        def verify(case: Case):
            r, p = self._run_one(case, phase, {"shrink_round": self.state.id, "shrink_step": next(self.step)})
            paths[id(r)] = p
            return r

        def discard(superseded) -> None:
            p = paths.get(id(superseded))
            if p is not None and p not in {f.path for f in self.index.findings.values()}:
                p.unlink(missing_ok=True)

        alone = stand_alone(result, verify, discard)
        return alone, paths.get(id(alone))

    def _new_finding(self, case, result, path, source: str, sig: dict, found_at: Optional[int] = None,
                     look_up: bool = True) -> None:
        """``case``'s failure as a finding, or (a search's, ``look_up``) one more example of the finding it matches."""
        index, summary = self.index, self.summary
        index.refresh()
        known = index.findings.get(sig["id"]) or index.match(key_of(result.to_dict()), set(sig["classes"]))
        if source == "search" and look_up and known is not None and known.path.exists():
            # found before (here or by another worker): one finding, one more example
            self._as_example(known, case, path)
            return
        try:
            mark_finding(self.corpus, path, sig, found_by=f"{source} (worker {self.worker})")
        except FileNotFoundError:
            # Another worker drew the same case (one file name for both), met it as an example of a finding of its own
            # and removed the file (a new user's campaign lost a worker to this FileNotFoundError): one finding, or
            # the file written again from this verdict.
            index.refresh()
            known = index.findings.get(sig["id"]) or index.match(key_of(result.to_dict()), set(sig["classes"]))
            if known is not None and known.path.exists():
                self._as_example(known, case, None)
                return
            path = self.corpus.write(case, self.name, str(self.dev), result, self.verifier.settings.plugins)
            mark_finding(self.corpus, path, sig, found_by=f"{source} (worker {self.worker})")
        index.add(Finding(sig, path, case))
        failure = CampaignFailure(case, result.status, path, result.explain(), source, sig,
                                  found_at=summary.cases_run if found_at is None else found_at)
        summary.failures.append(failure)
        self.emit({"event": "finding", "id": finding_id(path), "signature": sig["id"], "status": result.status,
                   "source": source, "path": str(path),
                   "case": case.describe(), "error_kind": sig["error_kind"], "outputs": sig["outputs"]})

    def _as_example(self, finding: Finding, case: Case, path: Optional[Path]) -> None:
        new = record_example(self.corpus.root, finding.id, case, self.worker, own=finding.case)
        if path is not None and path not in {f.path for f in self.index.findings.values()}:
            path.unlink(missing_ok=True)  # (a finding's own file, met again, is never an example's to remove)
        if not new:  # its own case (the database hands it back every round), or an example met before
            return
        self.summary.known_examples[finding_id(finding.path)] += 1
        for f in self.summary.failures:
            if f.signature.get("id") == finding.id:
                f.examples += 1

    # -- saved findings first -------------------------------------------------------------------------
    def _replay_saved(self) -> None:
        corpus, name, summary, replay = self.corpus, self.name, self.summary, self.replay
        if replay is None:
            prep = prepare_corpus(corpus.root, self.kernel, self.verifier, self.classes_of)
            self.index = FindingIndex(corpus.root, name)
            by_path = {f.path: f for f in self.index.findings.values()}
            for left in prep["leftovers"]:
                found = by_path.get(Path(left["path"]))
                if found is None:
                    summary.notes.append(f"{left['path']}: left 'running' by a killed process; "
                                         f"{left['status']} on replay (removed; not a finding)")
                else:  # replayed once already: not again
                    text = read_case_file(found.path)[1].get("explanation", "")
                    summary.failures.append(CampaignFailure(found.case, found.signature["status"], found.path,
                                                            text, "leftover", found.signature))
            replay = [p for p in saved_findings(corpus.root, name) if p not in {f.path for f in summary.failures}]
        self.index = self.index or FindingIndex(corpus.root, name)
        for path in map(Path, replay):
            if self._stop_now():
                break
            try:
                case, payload = read_case_file(path)
            except InvalidInput:
                continue  # removed or rewritten by another worker meanwhile
            old_sig = payload.get("finding")
            result, kept = self._run_one(case, "replay")
            if kept is None:
                summary.fixed.append(path)
                continue
            sig = signature(result.to_dict(), self.classes_of(case))
            self._new_finding(case, result, kept, "corpus",
                              sig if old_sig is None or old_sig["id"] != sig["id"] else old_sig)

    # -- the search, in rounds ------------------------------------------------------------------------
    def _probe(self, case: Case) -> None:
        """The Hypothesis test of a round: run ``case``; a new failure raises for Hypothesis to shrink."""
        from jfa_verify.cases.pairs import exercised

        state, summary, index = self.state, self.summary, self.index
        state.keep_last = False
        if self._stop_now():
            raise _StopCampaign()
        shrinking = state.target is not None
        state.calls_after_target += shrinking
        if not shrinking and not self.reusing:
            if self.pack > 1 and self.max_examples is not None:
                left = self.max_examples - summary.generated  # (a round's budget is in examples, each pack one;
                # max_examples counts cases)
                if left <= 0:
                    raise _StopCampaign()
                if len(case.split()) > left:  # the last pack: only the cases still to draw (a pack drawn with one
                    # case left ran up to --pack cases past --max-examples)
                    case = Case.pack(case.split()[:left])
            summary.generated += len(case.split())
            self.drawn_examples += 1
            contract_classes = exercised(case, self.model)
            target(_rarity(contract_classes, self.drawn), label="rarely drawn contract classes")
            self.drawn.update((d, c) for d, cs in contract_classes.items() for c in cs)
            self.draws.update(case.case_id().encode() + b"\n")
            summary.draws = self.draws.hexdigest()
        elif not shrinking:  # a saved example replayed: scored as a draw would be (Hypothesis keeps the pareto front of
            # the scores in the database), but not counted (its own run: it cannot steer the draws)
            target(_rarity(exercised(case, self.model), self.drawn), label="rarely drawn contract classes")
        annotations = {"shrink_round": state.id, "shrink_step": next(self.step)}
        phase = "shrink" if shrinking else "reuse" if self.reusing else "generate"
        try:
            ran = case.case_id() not in self.verdicts
            result, path = self._run_one(case, phase, annotations)
            if result.failed and case.parts is not None:
                result, path = self._split_pack(result, path, phase, ran)
        except KernelConfigError as e:
            raise _Misregistered(e) from None
        if not result.failed:
            return
        case = result.case  # the part (or smaller pack) the failure stands in
        verdict = result.to_dict()
        key, classes = key_of(verdict), self.classes_of(case)
        if not shrinking:
            known = index.match(key, classes) or index.refresh().match(key, classes)
            if known is not None and (self.reusing or not self._shrinks_again(known)):
                self._as_example(known, case, path)
                state.keep_last = True
                return
            if known is not None:
                # An unshrunk finding (a kill, the campaign's end or the shrink budget cut its round short) is
                # matched on its key alone, so every later failure of it was folded in as an example and it stayed
                # unshrunk for good: its first drawn failure here gets one shrink round, whose smallest case takes
                # the finding's place. Not a database example's failure: Hypothesis takes a saved failing example
                # for one it shrank already and skips shrinking it (its reuse phase's fast path).
                self.reshrunk.add(known.id)
                state.supersedes = known
            state.target, state.best, state.started_shrinking = key, (case, result, path), time.perf_counter()
            state.found_at = summary.cases_run
            state.steps.append(path)
            if not self.shrink:
                raise _StopRound()
            _fail(result)
        if key != state.target:  # another failure met while shrinking: not this round's bug
            known = index.match(key, classes)
            if known is not None:
                self._as_example(known, case, path)
            elif path is not None:  # a shrink candidate, not a drawn case: the search will draw it again
                path.unlink(missing_ok=True)
                summary.side_failures += 1
            return
        state.best = (case, result, path)
        state.steps.append(path)
        if time.perf_counter() - state.started_shrinking > self.shrink_seconds:
            state.cut_short = True
            summary.notes.append(f"shrinking of a {result.status} stopped after {self.shrink_seconds:g} s "
                                 f"(--shrink-seconds); the smallest case so far is kept")
            raise _StopRound()
        _fail(result)

    def _cut_short(self, why: str) -> None:
        """The campaign ended while a failure was being shrunk: its smallest case so far is kept, marked unshrunk
        (a new user's two-worker campaign on one bug kept eight findings, each half-shrunk case's incidental
        classes required of every later match)."""
        state = self.state
        if state.best is not None and not state.cut_short and self.shrink:
            state.cut_short = True
            self.summary.notes.append(f"shrinking of a {state.best[1].status} stopped by {why}; the smallest case so "
                                      f"far is kept, matched on its key alone")

    def _shrinks_again(self, finding: Finding) -> bool:
        """Whether a failure matching ``finding`` starts a shrink round that may replace it: the finding is unshrunk
        (``"shrunk": false``), still on disk, and has had no such round in this campaign (one round, within
        ``shrink_seconds``, per campaign: a hang's steps each cost a whole timeout)."""
        return (self.shrink and finding.signature.get("shrunk", True) is False and finding.id not in self.reshrunk
                and finding.path.exists())

    def _finish_round(self) -> None:
        state = self.state
        if state.best is None:
            return
        case, result, path = state.best
        if state.supersedes is not None:
            if path is not None and path.exists():
                self._replace_unshrunk(state.supersedes, case, result, path)
        elif path is not None and path.exists():
            sig = signature(result.to_dict(), self.classes_of(case))
            if state.cut_short or not self.shrink:
                sig["shrunk"] = False  # its classes are not the bug's features: match on the key alone
            self._new_finding(case, result, path, "search", sig, found_at=state.found_at)
        findings_paths = {f.path for f in self.index.findings.values()}
        for p in state.steps:  # the shrink steps
            if p is not None and p != path and p not in findings_paths:
                p.unlink(missing_ok=True)

    def _replace_unshrunk(self, old: Finding, case: Case, result, path: Path) -> None:
        """The end of a shrink round started by a failure of the unshrunk finding ``old``: a smaller case than
        ``old``'s takes its place (the new file is made the finding before the old one is removed, so a kill between
        the two leaves both, never neither; ``old``'s case and examples become the new finding's examples); ``old``'s
        own case, shrunk no further by a round that was not cut short, is marked shrunk."""
        state, index, summary = self.state, self.index, self.summary
        sig = signature(result.to_dict(), self.classes_of(case))
        if state.cut_short:
            sig["shrunk"] = False
        index.refresh()
        if not old.path.exists():  # (another worker replaced it meanwhile)
            self._new_finding(case, result, path, "search", sig, found_at=state.found_at)
            return
        old_id = finding_id(old.path)
        if case.case_id() == old.case.case_id():
            if not state.cut_short:
                sig = {k: v for k, v in old.signature.items() if k != "shrunk"}  # (its id names its examples' log)
                mark_finding(self.corpus, old.path, sig)
                index.add(Finding(sig, old.path, old.case))
                self._replaced(old, old.case, old.path, sig, result)
                summary.notes.append(f"finding {old_id} was unshrunk (its shrinking was cut short); shrunk again, "
                                     f"no smaller case fails as it does: marked shrunk")
            return
        if size_key(case) >= size_key(old.case):  # (a draw shrunk no lower than the finding's case: its example)
            self._as_example(old, case, path)
            return
        # (as _new_finding looks a new failure up, less the finding being replaced and other unshrunk ones, which
        # match any case of the key)
        shrunk = [f for f in index.findings.values() if f.id != old.id and f.signature.get("shrunk", True)]
        other = match_finding(shrunk, key_of(result.to_dict()), set(sig["classes"]))
        other = other if other is not None and other.path.exists() else None
        needs = set((other.signature if other is not None else sig)["classes"])
        lacks = sorted(needs - set(old.signature.get("classes", ())) - SHRINK_BORN_CLASSES)
        if lacks and not state.cut_short:
            # The smaller failure, shrunk to the end, needs features old's case lacks (beyond those a shrink reaches
            # for any bug): old's case does not show them, so the two may be two bugs of one symptom (status, kind and
            # lead output). Old stays as it is; the smaller case is a finding of its own, or an example of the shrunk
            # finding it matches. (A new user's campaign on a kernel with three bugs slid, shrinking again, from a
            # bottom-right causal bug to a GQA one and dropped the first: its case was left an example of the other.)
            # A round cut short again says nothing of features: its case replaces old, unshrunk, as before.
            if other is not None:
                self._as_example(other, case, path)
            else:
                # (not looked up: the unshrunk finding kept beside it matches any case of its key)
                self._new_finding(case, result, path, "search", sig, found_at=state.found_at, look_up=False)
            summary.notes.append(f"finding {old_id} was unshrunk (its shrinking was cut short); the failure of its "
                                 f"kind shrunk again needs {', '.join(lacks)}, which its case lacks: it may be another "
                                 f"bug, so both are kept (finding {finding_id(other.path if other else path)})")
            return
        if other is not None:
            # the bug shrinks to a finding already kept: one bug, one finding (as recover() folds duplicates)
            self._as_example(other, case, path)
            fold_examples(self.corpus.root, old, other)
            old.path.unlink(missing_ok=True)
            index.findings.pop(old.id, None)
            self._replaced(old, other.case, other.path, other.signature, result)
            summary.notes.append(f"finding {old_id} was unshrunk (its shrinking was cut short); shrunk again, it is "
                                 f"finding {finding_id(other.path)} (its case file removed, its case an example)")
            return
        payload = read_case_file(old.path)[1]
        mark_finding(self.corpus, path, sig, found_by=payload.get("found_by", "recovered"), shrunk_from=old_id)
        new = Finding(sig, path, case)
        fold_examples(self.corpus.root, old, new)
        index.findings.pop(old.id, None)
        index.add(new)
        old.path.unlink(missing_ok=True)
        self._replaced(old, case, path, sig, result)
        summary.notes.append(f"finding {old_id} was unshrunk (its shrinking was cut short); shrunk again to "
                             f"{finding_id(path)}: {case.describe()} (from {old.case.describe()})"
                             + (", still cut short" if state.cut_short else ""))

    def _replaced(self, old: Finding, case: Case, path: Path, sig: dict, result) -> None:
        """The summary's failure of ``old`` (its replay) now names the finding that replaced it."""
        self.reshrunk.add(sig["id"])  # (given its round here: no "stays unshrunk" note if it was cut short again)
        for f in self.summary.failures:
            if f.path == old.path:
                f.case, f.path, f.signature, f.status, f.explanation = case, path, sig, result.status, result.explain()
                return
        self.summary.failures.append(CampaignFailure(case, result.status, path, result.explain(), "corpus", sig))

    # -- the covering array (small, dense cases: already minimal enough to keep as found) -------------
    def _run_covering(self) -> None:
        from jfa_verify.cases.pairs import covering_array

        index = self.index
        for case in covering_array(self.model, seed=self.settings.seed):
            if self._stop_now():
                break
            result, path = self._run_one(case, "covering")
            if result.failed and path is not None:
                key, classes = key_of(result.to_dict()), self.classes_of(case)
                known = index.match(key, classes) or index.refresh().match(key, classes)
                if known is not None:
                    self._as_example(known, case, path)
                else:
                    self._new_finding(case, result, path, "covering", signature(result.to_dict(), classes))

    def _pass(self, r: int, budget: int, phases: list, base, reusing: bool) -> Optional[str]:
        """One Hypothesis run of round ``r``: ``"end"`` (the campaign ends), ``"error"`` (Hypothesis's own verdict,
        noted) or None."""
        self.state = _Round(id=f"{uuid.uuid4().hex[:12]}-w{self.worker}")
        self.reusing = reusing
        run = settings(base, max_examples=budget, phases=phases)(
            hypothesis_seed(self.settings.seed + 1000003 * r)(given(case=self.strategy)(self._probe)))
        try:
            run()
        except _StopCampaign:
            self._cut_short("the campaign's end (its examples, --duration or a stop)")
            self._finish_round()
            return "end"
        except _Misregistered as e:
            raise e.args[0] from None
        except (_CaseFailed, _StopRound):
            pass
        except Exception as e:  # Hypothesis's own verdicts (flaky, unsatisfiable): note, next round
            if reusing and isinstance(e, (Unsatisfiable, SkipTest)):  # (nothing saved, or nothing that still makes a
                # case: no example ran)
                self._finish_round()
                return None
            what = "the replay of the database's examples" if reusing else "Hypothesis"
            self.summary.notes.append(f"round {r}: {what} ended with {type(e).__name__}: {str(e)[:300]}")
            self._cut_short(f"Hypothesis's {type(e).__name__}")
            self._finish_round()
            return "error"
        finally:
            self.reusing = False
        if reusing and self._put_aside_unshrunk():
            return None
        self._finish_round()
        return None

    def _put_aside_unshrunk(self) -> bool:
        """Whether the replay of the database's examples just ended on a failure of no finding here that Hypothesis
        did not shrink (one call after it failed: the final replay, no shrink step), which is then not filed yet:
        :meth:`_search` replays the saved examples once more to shrink it (:meth:`_settle_set_aside`).

        Hypothesis takes a saved example that fails as saved for one it shrank already (its reuse phase's fast path).
        One of no finding here was saved by another campaign sharing the database, maybe never shrunk (cut short):
        filed as found, and as shrunk, each such case was one more "new" finding of its bug, its incidental classes
        required of every later failure of it (a new user's three bugs, seven findings)."""
        state = self.state
        if (not self.shrink or self.set_aside is not None or state.best is None or state.cut_short
                or state.calls_after_target > 1):
            return False
        self.set_aside = state  # (its case file stays until the shrinking replay files the failure)
        return True

    def _settle_set_aside(self) -> None:
        """After the shrinking replay: the set-aside failure's file goes where that replay filed a failure of its
        own; where it filed none (the view served nothing to shrink), the set-aside round is filed as it was, so
        that no failure is lost."""
        aside, self.set_aside = self.set_aside, None
        if aside is None:
            return
        path = aside.best[2]
        if self.state is not aside and self.state.best is not None:
            if path is not None and path != self.state.best[2] and path not in {
                    f.path for f in self.index.findings.values()}:
                path.unlink(missing_ok=True)
            return
        self.state = aside
        self._finish_round()

    def _search(self) -> None:
        """The rounds. Each is two Hypothesis runs: the replay of the database's saved examples (failures first:
        Hypothesis's ``reuse`` phase, with shrinking), then the seeded draws (``generate`` and ``target``, with
        shrinking) without the ``reuse`` phase, which is the only one that reads the database: the draws of a seed
        are the same whatever the database holds (a new user's ``--seed 2`` in a folder with an earlier campaign's
        database drew other cases and missed the finding it made in a fresh folder: issue 43, 8). New failures are
        still saved into the database. The replayed examples are not draws: they count neither in ``generated``
        nor toward the rarity target, so that they cannot steer the draws either."""
        summary, max_examples = self.summary, self.max_examples
        shrink = [Phase.shrink] if self.shrink else []
        reuse_phases, draw_phases = [Phase.reuse] + shrink, [Phase.explicit, Phase.generate, Phase.target] + shrink
        base = settings(database=self.db, deadline=None, derandomize=False, print_blob=False,
                        report_multiple_bugs=False,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                               HealthCheck.filter_too_much])
        try:
            stalled = 0  # rounds in a row that drew no case
            for r in itertools.count():
                if self._stop_now() or (max_examples is not None and summary.generated >= max_examples):
                    break
                # Hypothesis examples: a pack holds at least one of the drawn cases max_examples counts, and the round
                # stops once they are drawn (a budget of packs of ``pack`` cases each ended rounds early, and each new
                # round's Hypothesis draws its simplest example first: --pack 8 --max-examples 8 ran one trivial case)
                budget = self.round_examples if max_examples is None else \
                    min(self.round_examples, max_examples - summary.generated)
                summary.rounds += 1
                # (Hypothesis replays max(2, max_examples) saved examples in a run without draws; in one with draws,
                # max(2, a tenth of them): as many as before the draws had a run of their own)
                if self._pass(r, -(-budget // 10), reuse_phases, base, reusing=True) == "end":
                    break
                if self.set_aside is not None:
                    # (every saved example is replayed: Hypothesis samples secondary examples down to max_examples)
                    end = self._pass(r, _EVERY_SAVED, reuse_phases, settings(base, database=SavedAsSecondary(self.db)),
                                     reusing=True)
                    self._settle_set_aside()
                    if end == "end":
                        break
                before, self.drawn_examples = summary.generated, 0
                end = self._pass(r, budget, draw_phases, base, reusing=False)
                if end == "end":
                    break
                hypothesis_error = end == "error"
                stalled = stalled + 1 if summary.generated == before else 0
                if hypothesis_error:
                    # A round cut short by Hypothesis drew fewer cases than its budget: that says nothing of the search
                    # space (a new user's worker took a FlakyFailure for exhaustion and drew 2 cases in 30 s). Go on,
                    # unless rounds keep ending so without drawing anything.
                    if stalled >= STALLED_ROUNDS:
                        summary.notes.append(f"stopped: {stalled} rounds in a row ended in Hypothesis errors before "
                                             f"drawing a case")
                        break
                elif self.state.best is None and self.drawn_examples < budget:
                    break  # Hypothesis exhausted the strategy's search space
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: keep what was found, leave no running file
            summary.interrupted = True
            self._cut_short("an interrupt")
            self._finish_round()
        finally:
            self.verifier.close()
            summary.seconds = time.perf_counter() - self.t0
            if self.shrink:
                for f in summary.failures:  # (saved findings: one found here and cut short has its own note)
                    if (f.source not in FOUND_HERE and f.signature.get("shrunk", True) is False
                            and f.signature.get("id") not in self.reshrunk):
                        summary.notes.append(f"finding {f.id} stays unshrunk: no failure of its kind was drawn to "
                                             f"shrink it again (a later campaign that draws one does)")


def run_campaign(
    kernel,
    *,
    strategy: Optional[st.SearchStrategy[Case]] = None,
    max_examples: Optional[int] = 50,
    corpus_dir: "str | Path",
    device=None,
    seed: int = 0,
    timeout_s: Optional[float] = None,
    backward: bool = True,
    shrink: bool = True,
    plugins: Sequence[str] = (),
    database: "str | ExampleDatabase | None" = None,
    read_from: Sequence[str] = (),
    duration_s: Optional[float] = None,
    deadline: Optional[float] = None,
    isolate: bool = False,
    worker: int = 0,
    replay: Optional[Sequence["str | Path"]] = None,
    on_event: Optional[Callable[[dict], None]] = None,
    should_stop: Optional[Callable[[], bool]] = None,
    shrink_seconds: float = 120.0,
    round_examples: int = 100,
    worker_env: Optional[dict] = None,
    accept: Sequence[str] = (),
    covering: bool = False,
    pack: int = 1,
) -> CampaignSummary:
    """:class:`Campaign` ``(kernel, settings, ...).run()`` with the run settings given one by one (``seed``,
    ``timeout_s``, ``backward``, ``plugins``, ``isolate``, ``accept``: the fields of
    :class:`~jfa_verify.run.settings.RunSettings`); every other argument as :class:`Campaign` takes it.

    Returns:
        A :class:`CampaignSummary` (:meth:`Campaign.run`).

    Raises:
        InvalidInput: neither ``max_examples`` nor a duration; a bad database spec; ``pack`` < 1; a setting
            :class:`~jfa_verify.run.settings.RunSettings` refuses.
        KernelConfigError: the kernel's ``load()`` returned no implementation (at its first case).
    """
    settings = RunSettings(seed=seed, timeout_s=timeout_s, backward=backward, plugins=plugins, isolate=isolate,
                           accept=accept)
    return Campaign(kernel, settings, strategy=strategy, max_examples=max_examples, corpus_dir=corpus_dir,
                    device=device, shrink=shrink, database=database, read_from=read_from, duration_s=duration_s,
                    deadline=deadline, worker=worker, replay=replay, on_event=on_event, should_stop=should_stop,
                    shrink_seconds=shrink_seconds, round_examples=round_examples, worker_env=worker_env,
                    covering=covering, pack=pack).run()
