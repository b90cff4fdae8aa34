"""Determinism reruns: the same case through a kernel several times, outputs compared bit for bit.

A kernel that declares itself deterministic (``Capabilities.deterministic``) must give
bit-identical O, LSE, dQ, dK and dV on every run of the same inputs (no atomics whose
order varies, no races, no dependence on uninitialized memory or on earlier calls). A kernel
that declares itself non-deterministic is held to its budget on every rerun instead.
Reproducibility across runs is what lets a CI gate give the same verdict for the same commit.

The reruns of one case run in one process on the same tensors (:func:`check_reruns`); the gate runs them in a case
worker (:class:`RerunWorker`, :func:`verify_reruns`), so that a kernel that crashes is the case's ``crash`` and one
that hangs past the timeout its ``hang``, and writes each case's file first (:class:`~jfa_verify.run.corpus.Corpus`,
key :data:`DETERMINISM_KEY`): a finding is a case file that ``jfa-verify findings`` lists and ``jfa-verify replay``
reruns as many times, comparing bit for bit.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch

from jfa_verify.cases.case import Case
from jfa_verify.core.exits import ExitCode
from jfa_verify.judge.findings import Finding
from jfa_verify.judge.localize import locate
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.run.isolation import CaseWorker, WorkerSpec, release_cached_memory, sticky_device_error
from jfa_verify.run.runner import CaseResult, _traceback_tail, call_kernel, run_case
from jfa_verify.run.settings import RunSettings

__all__ = ["DETERMINISM_KEY", "RerunDifference", "RerunVerdict", "RerunWorker", "check_reruns", "first_difference",
           "rerun_difference", "rerun_result", "verify_reruns"]

# The key of a determinism finding's case file: {"reruns": N, "backward": ..., "first_difference": {...}, ...}
DETERMINISM_KEY = "determinism"


@dataclass(frozen=True)
class RerunDifference:
    """The first rerun of a case whose outputs differ bit-wise from rerun 0: the rerun, its mode (``plain`` outside
    the stress check), the output, the index and location (``(sequence, head, token, tile)`` in words) of the element
    that moved most, its two values, how many elements differ in their bits and the largest |difference|."""

    rerun: int
    mode: str
    output: str
    index: tuple[int, ...]
    where: str
    before: float
    after: float
    moved: int
    max_diff: float

    def describe(self) -> str:
        return (f"rerun {self.rerun} (mode {self.mode}): {self.output} differs bit-wise from rerun 0 at {self.where}: "
                f"{self.before!r} then {self.after!r} ({_movement(self.moved, self.max_diff)})")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "index": list(self.index)}


def _movement(differing: int, max_diff: float) -> str:
    """How ``differing`` elements whose bits differ between two runs moved (``max_diff``: the largest |difference|),
    in words: a difference in the bits only (signed zeros, NaN payloads) is said to be one (a new user read a
    0.0 / -0.0 flip reported as "0 element(s) moved")."""
    if max_diff == 0:
        return f"{differing} element(s) differ in their bits only: signed zeros or NaN payloads"
    return f"{differing} element(s) moved, max |diff| {max_diff:.3g}"


def _differing(a: torch.Tensor, b: torch.Tensor) -> int:
    """How many elements of ``a`` and ``b`` (same shape and dtype) differ in their bits."""
    return int(_bits(a).reshape(-1, a.element_size()).ne(_bits(b).reshape(-1, b.element_size())).any(1).sum())


def rerun_difference(problem, tiles, rerun: int, mode: str, name: str, index: tuple, before: torch.Tensor,
                     after: torch.Tensor) -> RerunDifference:
    """The :class:`RerunDifference` of output ``name`` between rerun 0 (``before``) and rerun ``rerun`` (``after``),
    whose first differing element is ``index`` (:func:`first_difference`; ``()``: the shape or dtype changed). The
    element described is the one that moved most (NaN counted as infinitely far); ``index`` itself when every
    difference is in the bits only (signed zeros, NaN payloads)."""
    if index == ():
        return RerunDifference(rerun, mode, name, (), "shape or dtype changed", float("nan"), float("nan"),
                               before.numel(), float("inf"))
    moved = (after.double() - before.double()).abs()
    size = torch.nan_to_num(moved, nan=float("inf"))
    if float(size.max()) > 0:  # the element that moved most, not the first (a new user was shown a 0.0 / -0.0 flip)
        index = tuple(int(i) for i in torch.unravel_index(size.argmax(), size.shape))
    where = locate(problem, name, index, tiles).describe()
    return RerunDifference(rerun, mode, name, tuple(index), where, before[index].item(), after[index].item(),
                           _differing(before, after), float(size.max()))


@dataclass
class RerunVerdict:
    """The reruns of one case. ``status``: ``pass``, ``fail``, ``error`` (the kernel raised), ``crash`` or ``hang``
    (the case worker died, or a rerun ran past the timeout: :class:`RerunWorker`) or ``unsupported``;
    ``differences``: one message per output that moved between reruns (a deterministic kernel) or per rerun that
    failed its budget (a non-deterministic one); ``first_difference``: the first bit difference, structured;
    ``seconds``: how long the worker was waited for when it crashed or hung."""

    case: Case
    kernel: str
    reruns: int
    deterministic: bool
    status: str = "pass"  # "pass", "fail", "error", "crash", "hang" or "unsupported"
    differences: list[str] = field(default_factory=list)
    message: str = ""
    first_difference: Optional[RerunDifference] = None
    differing_reruns: int = 0
    first_failing_rerun: Optional[int] = None
    seconds: float = 0.0

    def record(self, backward: bool) -> dict:
        """What a case file keeps under :data:`DETERMINISM_KEY`: the reruns, and what differed."""
        return {"reruns": self.reruns, "backward": backward, "deterministic": self.deterministic,
                "differing_reruns": self.differing_reruns, "first_failing_rerun": self.first_failing_rerun,
                "first_difference": None if self.first_difference is None else self.first_difference.to_dict()}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes (NaN payloads and signed zeros compared as bits, not values)."""
    return t.detach().contiguous().view(-1).view(torch.uint8)


def first_difference(a: torch.Tensor, b: torch.Tensor) -> Optional[tuple[int, ...]]:
    """The index of the first element whose bits differ between ``a`` and ``b`` (NaN payloads and signed zeros
    compared as bits), None when they are bit-identical, ``()`` when their shapes or dtypes differ."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return ()
    differ = _bits(a).reshape(-1, a.element_size()).ne(_bits(b).reshape(-1, b.element_size())).any(1)
    if not bool(differ.any()):
        return None
    flat = int(torch.nonzero(differ)[0])
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), a.shape))


def check_reruns(case: Case, kernel: Kernel, device, *, reruns: int = 3, backward: bool = True,
                 settings: Optional[RunSettings] = None,
                 on_rerun: Optional[Callable[[int], None]] = None) -> RerunVerdict:
    """Run ``case`` ``reruns`` times (>= 2) in this process, on the same tensors, and compare every output with the
    first run's, bit for bit.

    A non-deterministic kernel (by its declaration) is judged by :func:`jfa_verify.run.runner.run_case`
    on each rerun instead (``settings``: its budgets and accepted conventions; default the defaults).
    ``on_rerun(i)``: called after rerun ``i`` (a case worker's progress). Returns a :class:`RerunVerdict`;
    kernel exceptions become ``status="error"``.

    Raises:
        ValueError: ``reruns < 2``.
    """
    if reruns < 2:
        raise ValueError(f"reruns={reruns} must be >= 2 (one run has nothing to compare with)")
    device = torch.device(device)
    caps = kernel.capabilities
    verdict = RerunVerdict(case, kernel.name, reruns, caps.deterministic)
    tensors = case.materialize(device)
    problem = case.problem(tensors)
    reason = kernel.unsupported_reason(problem)
    if reason is not None:
        verdict.status, verdict.message = "unsupported", reason
        return verdict
    backward = backward and caps.backward_reason(problem) is None
    if not caps.deterministic:
        settings = (settings or RunSettings()).replace(backward=backward, isolate=False, jobs=1)
        for i in range(reruns):
            result = run_case(case, kernel, device, settings, tensors=tensors)
            if result.failed:
                verdict.status = "fail"
                verdict.differing_reruns += 1
                if verdict.first_failing_rerun is None:
                    verdict.first_failing_rerun = i
                verdict.differences.append(f"rerun {i}: {result.explain()}")
            if on_rerun is not None:
                on_rerun(i)
        return verdict
    first = None
    for i in range(reruns):
        try:
            got = call_kernel(kernel, problem, tensors, case, backward=backward).outputs
        except Exception as e:  # the kernel under test may fail in any way
            verdict.status, verdict.message = "error", f"rerun {i}: {type(e).__name__}: {e}"
            return verdict
        got = {n: t.detach().clone() for n, t in got.items() if isinstance(t, torch.Tensor)}
        if on_rerun is not None:
            on_rerun(i)
        if first is None:
            first = got
            continue
        differs = False
        for name, ref in first.items():
            index = first_difference(ref, got[name])
            if index is None:
                continue
            differs = True
            if index == ():
                verdict.differences.append(f"rerun {i}: {name} changed shape or dtype")
            else:
                moved = torch.nan_to_num((got[name].double() - ref.double()).abs(), nan=float("inf"))
                where = locate(problem, name, index, kernel.tile_sizes(problem)).describe()
                verdict.differences.append(
                    f"rerun {i}: {name} differs bit-wise from run 0 at {where}: {ref[index].item()!r} then "
                    f"{got[name][index].item()!r} ({_movement(_differing(ref, got[name]), float(moved.max()))})")
            if verdict.first_difference is None:
                verdict.first_difference = rerun_difference(problem, kernel.tile_sizes(problem), i, "plain", name,
                                                            index, ref, got[name])
        verdict.differing_reruns += differs
    if verdict.differences:
        verdict.status = "fail"
    return verdict


def rerun_result(case: Case, kernel: str, status: str, *, differences: Sequence[str] = (), failures: Sequence[str] = (),
                 message: str = "", plugins: tuple[str, ...] = (), seconds: float = 0.0) -> CaseResult:
    """The :class:`~jfa_verify.run.runner.CaseResult` of a case's reruns, as a case file keeps it: ``differences``
    (reruns differing bit-wise from the first) as findings of kind ``determinism``, ``failures`` (reruns judged
    failing against the references) of kind ``rerun``, each on one line; ``message``: an error's, a crash's or a
    hang's words."""
    def line(text: str) -> str:
        return "; ".join(x.strip() for x in text.splitlines() if x.strip() and not x.strip().startswith("replay:"))

    return CaseResult(case, kernel, status, message=message, plugins=tuple(plugins),
                      seconds={"kernel": seconds} if seconds else {},
                      findings=[Finding("determinism", line(d)) for d in differences]
                      + [Finding("rerun", line(f)) for f in failures])


def _answer_reruns(conn, spec: WorkerSpec, kernel, device) -> None:
    """A :class:`RerunWorker`'s child loop: for each ``(case, reruns, backward)`` received, ``("rerun", i)`` after
    each rerun, then ``("verdict", RerunVerdict)`` (or ``("not-judged", why)``: jfa-verify's own failure)."""
    while True:
        message = conn.recv()
        if message is None:
            return
        case, reruns, backward = message
        try:
            verdict = check_reruns(case, kernel, device, reruns=reruns, backward=backward, settings=spec.settings,
                                   on_rerun=lambda i: conn.send(("rerun", i)))
        except Exception as e:  # not the kernel's: said so, with where
            conn.send(("not-judged", f"not judged: {type(e).__name__}: {e}\n{_traceback_tail(e)}"))
            continue
        release_cached_memory(device)
        conn.send(("verdict", verdict))
        if verdict.status == "error" and sticky_device_error(verdict.message):
            os._exit(int(ExitCode.CRASH))  # this process's CUDA context is unusable


class RerunWorker(CaseWorker):
    """Runs each case's reruns (:func:`check_reruns`) in a child process, all reruns of one case in the same
    process on the same inputs, as :class:`~jfa_verify.run.isolation.CaseWorker` runs cases: a death of the child
    is a ``"crash"`` verdict, a rerun with no answer within the timeout a ``"hang"``; the next case gets a fresh
    child."""

    _answer = staticmethod(_answer_reruns)

    def reruns(self, case: Case, reruns: int, timeout_s: Optional[float] = None, *, backward: bool = True,
               deterministic: bool = True) -> RerunVerdict:
        """The :class:`RerunVerdict` of ``reruns`` reruns of ``case`` in the child. ``timeout_s`` holds for each rerun
        (the first one's counts from sending the case: its inputs made, the kernel compiled); None waits forever.
        ``deterministic``: the kernel's declaration, for a verdict the child did not give (a crash or a hang)."""
        kind, answer, elapsed = self._call((case, reruns, backward), timeout_s)
        done = 0
        while kind == "answer" and answer[0] == "rerun":
            done = answer[1] + 1
            kind, answer, elapsed = self._receive(timeout_s)
        if kind != "answer":  # "crash" or "hang"
            words = answer if kind == "crash" else (
                f"no answer within {timeout_s:g} s (--timeout, for each rerun); the worker process was killed")
            return RerunVerdict(case, self.spec.kernel, reruns, deterministic, kind,
                                message=f"in rerun {done} of {reruns}: {words}", seconds=elapsed)
        what, verdict = answer
        if what == "not-judged":
            return RerunVerdict(case, self.spec.kernel, reruns, deterministic, "error", message=verdict)
        if verdict.status == "error" and sticky_device_error(verdict.message):
            self.kill()  # the child is exiting: its CUDA context is unusable
            verdict.status = "crash"
            verdict.message = "illegal address (a sticky CUDA error; the worker was restarted): " + verdict.message
        return verdict


def verify_reruns(cases: Sequence[Case], kernel: Kernel, device, corpus, settings: RunSettings, *,
                  reruns: int) -> list[tuple[RerunVerdict, CaseResult]]:
    """Rerun each case ``reruns`` times in one :class:`RerunWorker` (``settings.timeout_s`` for each rerun) and keep a
    failing case's file in ``corpus`` (a :class:`~jfa_verify.run.corpus.Corpus`), written before its reruns start
    (so a crash or a hang of this process too leaves it), status ``fail``, ``error``, ``crash`` or ``hang``, with
    :data:`DETERMINISM_KEY` saying how many reruns and what differed; a passing case leaves none. Returns each
    supported case's ``(verdict, result)``, the result's ``reproducer`` the file kept (None for a pass).

    Raises:
        PluginError: the worker cannot load the kernel (a kernel registered in this process only cannot be isolated).
        KeyboardInterrupt: the case under way is discarded (its file put back as it was), the worker ended.
    """
    device = torch.device(device)
    out = []
    with RerunWorker(WorkerSpec(kernel.name, device.type, settings)) as worker:
        for case in cases:
            annotations = {DETERMINISM_KEY: {"reruns": reruns, "backward": settings.backward}}
            with corpus.guard(case, kernel.name, str(device), None, settings.plugins, annotations) as path:
                try:
                    v = worker.reruns(case, reruns, settings.timeout_s, backward=settings.backward,
                                      deterministic=kernel.capabilities.deterministic)
                except BaseException:  # Ctrl-C, or the worker cannot load the kernel: no verdict, no file
                    corpus.discard(path)
                    worker.kill()
                    raise
                if v.status == "unsupported":
                    corpus.discard(path)
                    continue
                bits = v.status == "fail" and v.deterministic
                result = rerun_result(case, kernel.name, v.status, differences=v.differences if bits else (),
                                      failures=() if bits else v.differences, message=v.message,
                                      plugins=settings.plugins, seconds=v.seconds)
                if result.failed:
                    result.reproducer = str(path)  # (the replay command the file's verdict holds)
                saved = corpus.record(path, result)
                result.reproducer = str(saved) if saved else None
                if saved:
                    corpus.update(saved, **{DETERMINISM_KEY: v.record(settings.backward)})
            out.append((v, result))
    return out
