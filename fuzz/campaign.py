"""Fuzz campaigns: Hypothesis drives cases through a kernel, failures shrink and land in the corpus.

:func:`run_campaign` first replays the corpus folder's saved failures for the
kernel (as explicit examples), then draws new cases. Every case runs through
:class:`jfa_verify.loop.Verifier` (the one run loop), so its case file exists before the kernel
runs: a crash, a kill or a hang (with ``timeout_s``) leaves it behind. The
first failure is shrunk by Hypothesis to a minimal case; that minimal case's
file is kept (intermediate shrink steps' files are removed). Hypothesis's own
example database lives under ``<corpus_dir>/.hypothesis``, so the next
campaign starts from the last failure
(one database per kernel, ``<corpus_dir>/.hypothesis/<kernel>``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from hypothesis import HealthCheck, Phase, example, given, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from jfa_verify.case import Case
from jfa_verify.corpus import TIMEOUT_EXIT_CODE, Corpus, read_case_file
from jfa_verify.coverage import Coverage
from jfa_verify.errors import InvalidInput

__all__ = ["CampaignFailure", "CampaignSummary", "run_campaign", "TIMEOUT_EXIT_CODE"]



@dataclass
class CampaignFailure:
    """One failing case kept in the corpus: its file, status and verdict text."""

    case: Case
    status: str
    path: Optional[Path]
    explanation: str
    source: str  # "corpus" (a saved failure replayed), "search" (found and shrunk now) or "crash" (a process died)


@dataclass
class CampaignSummary:
    """What a campaign did. ``statuses`` counts verdicts (pass/fail/error/unsupported) over every run case."""

    kernel: str
    device: str
    seed: int
    cases_run: int = 0
    statuses: Counter = field(default_factory=Counter)
    failures: list[CampaignFailure] = field(default_factory=list)
    fixed: list[Path] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    pairs: object = None  # a jfa_verify.pairs.PairCoverage
    seconds: float = 0.0
    first_failure_at: Optional[int] = None  # cases run up to and including the first failing one

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    def to_dict(self) -> dict:
        return {
            "kernel": self.kernel, "device": self.device, "seed": self.seed, "cases_run": self.cases_run,
            "first_failure_at": self.first_failure_at,
            "statuses": dict(self.statuses), "seconds": self.seconds,
            "failures": [{"case": f.case.to_dict(), "status": f.status, "path": str(f.path) if f.path else None,
                          "source": f.source} for f in self.failures],
            "fixed": [str(p) for p in self.fixed], "coverage": self.coverage.to_dict(),
            "pairs": self.pairs.to_dict() if self.pairs is not None else None,
        }

    def format(self, *, coverage: bool = True) -> str:
        """A human report: counts, each kept failure with its verdict and replay command, then coverage."""
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())) or "none"
        lines = [f"campaign on {self.kernel} ({self.device}, seed {self.seed}): {self.cases_run} case(s) in "
                 f"{self.seconds:.1f} s: {counts}"]
        for p in self.fixed:
            lines.append(f"  fixed (now passes, file removed): {p}")
        for f in self.failures:
            lines.append(f"  {f.source} failure [{f.status}] {f.case.describe()} lengths={f.case.kv_lengths}")
            lines.extend("    " + line for line in f.explanation.splitlines()[1:])
            if f.path is not None:
                lines.append(f"    case file: {f.path}")
        if not self.failures:
            lines.append("  no failures")
        if coverage:
            lines.append(self.coverage.format())
            if self.pairs is not None:
                lines.append(self.pairs.format())
        return "\n".join(lines)


class _CaseFailed(AssertionError):
    """Raised inside the Hypothesis test so it shrinks the failing case."""


def _saved_failures(corpus: Corpus, kernel_name: str) -> list[tuple[Path, Case, str]]:
    """``(path, case, status)`` of the kernel's saved case files that did not pass."""
    out = []
    for path in corpus.files():
        try:
            case, payload = read_case_file(path)
        except InvalidInput:
            continue
        if payload.get("kernel") == kernel_name and payload.get("status") != "pass":
            out.append((path, case, payload.get("status")))
    return out


def _mark_crash(path: Path) -> None:
    """A case file left ``running``: the process running it died (a crash, a kill). Record that before it
    is replayed, so that a replay that crashes again leaves a ``crash`` finding, not another retry."""
    payload = json.loads(path.read_text())
    payload.update(status="crash", explanation="the process running this case died before a verdict (a kernel "
                                               "crash, or the process was killed); replayed once by the next "
                                               "campaign")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True))
    tmp.replace(path)


def _rarity(classes: dict, counts: Counter) -> float:
    """Sum over a case's contract classes of 1 / (1 + times drawn so far): high for rarely drawn classes."""
    return sum(1.0 / (1 + counts[(d, c)]) for d, cs in classes.items() for c in cs)


def run_campaign(
    kernel,
    *,
    strategy: Optional[st.SearchStrategy[Case]] = None,
    max_examples: int = 50,
    corpus_dir: str | Path,
    device=None,
    seed: int = 0,
    timeout_s: Optional[float] = None,
    backward: bool = True,
    shrink: bool = True,
    plugins: Sequence[str] = (),
    covering: bool = False,
) -> CampaignSummary:
    """Fuzz ``kernel`` with Hypothesis; failures are written to ``corpus_dir`` and shrunk.

    Args:
        kernel: a registered kernel or its name.
        strategy: a strategy of :class:`Case` (default: :func:`jfa_verify.strategies.cases` for the
            kernel and device).
        max_examples: new cases to draw (saved failures are replayed in addition).
        corpus_dir: the folder of case files; Hypothesis's database goes to ``corpus_dir/.hypothesis/<kernel>``.
        device: ``"cpu"``, ``"cuda"``, a ``torch.device`` or None (the process's device, see
            :func:`jfa_verify.device.current_device`).
        seed: the Hypothesis seed (same seed, same draws).
        timeout_s: wall-clock limit per case: past it the case file is marked ``"timeout"`` and the
            process exits with :data:`TIMEOUT_EXIT_CODE` (a hung kernel cannot be interrupted).
        backward: run the backward pass too (when the kernel has one).
        shrink: shrink the first failure to a minimal case (otherwise stop at it).
        plugins: plugin files the kernel came from (named in replay commands).
        covering: run the covering array of the contract's dimensions first
            (:func:`jfa_verify.pairs.covering_array`, cheap and dense first), as explicit examples,
            before drawing; every pair of classes the kernel supports is then exercised in the first
            examples, whatever the draws.

    Drawn cases are steered toward rarely drawn classes of the contract model
    (:mod:`jfa_verify.dimensions`) with Hypothesis ``target()``; the summary's ``pairs``
    counts the pairs of classes the campaign exercised. A case file left ``running`` by a process
    that died is a crash finding: it is marked ``crash`` and replayed once; one already marked
    ``crash`` is reported as a finding and not run again in this process.

    Returns:
        A :class:`CampaignSummary`. Never raises for kernel failures.
    """
    from jfa_verify.device import current_device, select_device
    from jfa_verify.loop import Verifier
    from jfa_verify.registry import get_kernel
    from jfa_verify.strategies import cases

    import torch

    dev = current_device() if device is None else select_device(torch.device(device).type)
    if isinstance(kernel, str):
        kernel = get_kernel(kernel)
    name = kernel.name
    corpus = Corpus(corpus_dir)
    corpus.root.mkdir(parents=True, exist_ok=True)
    verifier = Verifier(kernel, dev, corpus, backward=backward, timeout_s=timeout_s, plugins=plugins)
    if strategy is None:
        strategy = cases(kernel, device_type=dev.type)
    from jfa_verify.dimensions import Target
    from jfa_verify.pairs import PairCoverage, covering_array, exercised

    model = Target(kernel, dev.type)
    summary = CampaignSummary(kernel=name, device=str(dev), seed=seed, coverage=Coverage.for_kernel(kernel, dev.type),
                              pairs=PairCoverage(model))
    drawn: Counter = Counter()
    search_failures: list[tuple[Case, object, Path]] = []
    seen: dict[str, object] = {}
    t0 = time.perf_counter()

    def run_one(case: Case):
        key = case.case_id()
        if key in seen:  # different draws can build the same case; a verdict is deterministic
            return seen[key]
        result = verifier.verify(case)
        kept = Path(result.reproducer) if result.reproducer else None
        seen[key] = (result, kept)
        summary.coverage.add(case)
        summary.pairs.add(case)
        summary.cases_run += 1
        summary.statuses[result.status] += 1
        if result.failed and summary.first_failure_at is None:
            summary.first_failure_at = summary.cases_run
        return result, kept

    saved = []
    for path, case, status in _saved_failures(corpus, name):
        if status == "crash":  # a replay crashed its process already: a finding, not run again here
            summary.failures.append(CampaignFailure(case, "crash", path, json.loads(path.read_text()).get(
                "explanation", "the process died running this case"), "crash"))
            continue
        if status == "running":
            _mark_crash(path)
        saved.append((path, case))

    def probe(case: Case, from_corpus: bool) -> None:
        if not from_corpus:
            classes = exercised(case, model)
            target(_rarity(classes, drawn), label="rarely drawn contract classes")
            drawn.update((d, c) for d, cs in classes.items() for c in cs)
        result, kept = run_one(case)
        if from_corpus:
            path = corpus.path_for(case, name)
            if kept is None:
                summary.fixed.append(path)
            elif not any(f.path == kept for f in summary.failures):
                summary.failures.append(CampaignFailure(case, result.status, kept, result.explain(), "corpus"))
            return
        if result.failed:
            search_failures.append((case, result, kept))
            raise _CaseFailed(result.explain())

    phases = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink] if shrink else [])
    test = given(case=strategy, from_corpus=st.just(False))(probe)
    # explicit examples run last-applied first: the saved failures, then the covering array in its order
    if covering:
        for case in reversed(covering_array(model, seed=seed)):
            test = example(case=case, from_corpus=False)(test)
    for _, case in saved:
        test = example(case=case, from_corpus=True)(test)
    test = hypothesis_seed(seed)(test)  # before settings: @seed alone would switch the database off
    test = settings(
        database=DirectoryBasedExampleDatabase(str(corpus.root / ".hypothesis" / name)),
        max_examples=max_examples, deadline=None, phases=phases, derandomize=False, print_blob=False,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )(test)
    try:
        test()
    except _CaseFailed:
        pass
    if search_failures:
        # Hypothesis replays the minimal example last: keep its file, drop the shrink steps' files.
        case, result, kept = search_failures[-1]
        for _, _, other in search_failures[:-1]:
            if other is not None and other != kept and other not in {f.path for f in summary.failures}:
                other.unlink(missing_ok=True)
        if kept not in {f.path for f in summary.failures}:  # else: a saved failure found again
            summary.failures.append(CampaignFailure(case, result.status, kept, result.explain(), "search"))
    summary.seconds = time.perf_counter() - t0
    return summary
