"""Replaying a rerun finding: a case file of the gate's determinism or stress check, rerun and compared bit for bit.

Such a file holds its case and, under :data:`~jfa_verify.checks.determinism.DETERMINISM_KEY` or
:data:`~jfa_verify.checks.stress.STRESS_KEY`, how many reruns found it and what differed. One run of its case says
nothing (each run alone may pass its budget): :func:`replay_reruns` reruns it as its check did, in one process on the
same inputs, and says whether the runs still differ. A stress file's reruns may be long (200 on CUDA): its replay
runs at most :data:`STRESS_REPLAY_RERUNS` unless asked for more, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from jfa_verify.cases.case import Case
from jfa_verify.checks.determinism import DETERMINISM_KEY, RerunWorker, check_reruns
from jfa_verify.checks.stress import STRESS_KEY, StressOptions, run_stress
from jfa_verify.core.errors import InvalidInput
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.run.corpus import RUNNING
from jfa_verify.run.isolation import WorkerSpec
from jfa_verify.run.settings import RunSettings

__all__ = ["STRESS_REPLAY_RERUNS", "RerunReplay", "rerun_check", "replay_reruns"]

STRESS_REPLAY_RERUNS = 50  # a stress file's replay reruns at most this many unless asked (--reruns)


@dataclass
class RerunReplay:
    """What a replay of a rerun finding found. ``check``: ``determinism`` or ``stress``; ``status``: ``pass`` (the
    runs agree bit for bit, or every rerun of a non-deterministic kernel is within its budget), ``fail`` (they still
    differ, or a rerun fails), ``error``, ``crash``, ``hang`` or ``unsupported``; ``reruns``: the reruns made,
    ``recorded``: the file's; ``lines``: the verdict in words (its first line starts ``[STATUS]``)."""

    check: str
    status: str
    reruns: int
    recorded: int
    notes: list[str] = field(default_factory=list)  # how it is replayed (fewer reruns, in a worker), said first
    lines: list[str] = field(default_factory=list)


def rerun_check(payload: dict) -> Optional[str]:
    """The check whose rerun finding a case file's ``payload`` is (``"determinism"``, ``"stress"``), or None."""
    for key in (DETERMINISM_KEY, STRESS_KEY):
        if isinstance(payload.get(key), dict):
            return key
    return None


def replay_reruns(case: Case, payload: dict, kernel: Kernel, device, settings: RunSettings, *,
                  reruns: Optional[int] = None, timeout_s: Optional[float] = None) -> RerunReplay:
    """Rerun the case of a rerun finding's file (``payload``, :func:`rerun_check` not None) on ``kernel``.

    Args:
        reruns: how many (>= 2); None: the file's count (a stress file's, at most :data:`STRESS_REPLAY_RERUNS`).
        timeout_s: a limit for each rerun; with one, or for a file recorded as a crash, a hang or left running, the
            reruns run in a case worker (:class:`~jfa_verify.checks.determinism.RerunWorker`: a crash or a hang is the
            replay's verdict, not this process's end), as plain reruns.

    Raises:
        InvalidInput: ``reruns < 2``, or a payload of no rerun finding.
    """
    import torch

    check = rerun_check(payload)
    if check is None:
        raise InvalidInput("this case file is no determinism or stress finding (no 'determinism' or 'stress' key)")
    if reruns is not None and reruns < 2:
        raise InvalidInput(f"reruns={reruns} must be >= 2 (one run has nothing to compare with)")
    device = torch.device(device)
    record = payload[check]
    recorded = max(2, int(record.get("reruns") or 2))
    n = reruns or (min(recorded, STRESS_REPLAY_RERUNS) if check == STRESS_KEY else recorded)
    replay = RerunReplay(check, "pass", n, recorded)
    first = (record.get("first_difference") or {}).get("rerun", record.get("first_failing_rerun"))
    if n < recorded:
        replay.notes.append(f"replaying {n} of the {recorded} recorded reruns" + (
            f" (it first showed at rerun {first})" if first is not None else "") + "; --reruns N for more")
    if first is not None and n <= int(first):  # (reruns count from 0: n of them end at rerun n - 1)
        replay.notes.append(f"{n} reruns end at rerun {n - 1}, before rerun {first} where it first showed: a pass here "
                            f"says little; --reruns {int(first) + 1} or more reaches it")
    backward = bool(record.get("backward", settings.backward))
    name = f"{case.name or case.case_id()} on {kernel.name}"
    isolated = timeout_s is not None or payload.get("status") in ("crash", "hang", RUNNING)
    if check == STRESS_KEY and not isolated:
        modes = tuple(record.get("modes") or StressOptions().modes)
        report = run_stress(kernel, device, StressOptions(reruns=n, modes=modes, seed=int(record.get("seed") or 0),
                                                          backward=backward), cases=[case], settings=settings)
        v = report.verdicts[0]
        replay.notes += [f"stress modes: {line}" for line in report.mode_lines()]
        # (the stress run reran this case among others; alone, their timing and launch orders are not recreated)
        replay.notes.append("replayed alone: the stress run's other cases, between whose launches this one ran, and "
                            "their launch orders are not rerun; a race that needs them can pass here")
        replay.status, replay.reruns = v.status, v.reruns or n
        differences = [f"{v.differing_reruns} rerun(s) differ bit-wise; first: {v.first_difference.describe()}"] \
            if v.first_difference is not None else []
        _verdict(replay, name, kernel.capabilities.deterministic, differences + v.failures, v.message)
        return replay
    if isolated:
        replay.notes.append("replayed in a case worker" + (f", {timeout_s:g} s for each rerun" if timeout_s else "")
                            + (" (plain reruns, no timing perturbation)" if check == STRESS_KEY else ""))
        with RerunWorker(WorkerSpec(kernel.name, device.type, settings)) as worker:
            v = worker.reruns(case, n, timeout_s, backward=backward, deterministic=kernel.capabilities.deterministic)
    else:
        v = check_reruns(case, kernel, device, reruns=n, backward=backward, settings=settings)
    replay.status = v.status
    _verdict(replay, name, v.deterministic, v.differences, v.message)
    return replay


def _verdict(replay: RerunReplay, name: str, deterministic: bool, differences: list[str], message: str) -> None:
    """``replay.lines``: the verdict line and what differed (at most 5 lines of it)."""
    n = replay.reruns
    if replay.status == "pass":
        replay.lines.append(f"[PASS] {n} reruns of {name}: " + (
            "the runs agree bit for bit" if deterministic else
            "every rerun within its budget (the kernel declares itself non-deterministic: not compared bit for bit)"))
    elif replay.status == "fail":
        replay.lines.append(f"[FAIL] {n} reruns of {name}: " + (
            "the runs differ bit-wise" if deterministic and differences and "bit-wise" in differences[0] else
            "rerun(s) fail against the references"))
        replay.lines += [f"  {line.strip()}" for d in differences for line in d.splitlines()
                         if line.strip() and not line.strip().startswith("replay:")][:5]
    elif replay.status == "unsupported":
        replay.lines.append(f"[UNSUPPORTED] {name}: {message}")
    else:
        replay.lines.append(f"[{replay.status.upper()}] {n} reruns of {name}: {message}")
