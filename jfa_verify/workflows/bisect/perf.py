"""The performance step of ``jfa-verify bisect --perf``: the tested commit's kernel against the good
commit's, timed in the same run, interleaved and repeated; judged by :mod:`jfa_verify.checks.slowdown`.

Each kernel is timed by its own *timing server*, a process started the same way for both (``python
-m jfa_verify.workflows.bisect.step serve STATE WORKTREE``): the good commit's from a second worktree fixed at
the good commit, the tested commit's from the bisect worktree. Two versions of one kernel package
cannot share a Python process (the second import would return the first's cached modules), and two
identical processes leave no asymmetry between the sides but the kernels. For each round the step
asks one server for a timing block, then the other, alternating which goes first (baseline first in
even rounds, candidate first in odd ones). Only one ever runs at a time, so they never compete for
the device. On the CPU both servers run torch on one thread (``OMP_NUM_THREADS=1`` and friends, set
before torch starts its thread pools) pinned to the same core (:func:`jfa_verify.checks.timing.pin_cpu_timing`).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from jfa_verify.workflows.bisect.config import StepConfig

__all__ = ["perf_step", "serve"]

PREFIX = "@jfa-bisect "  # server replies; anything else a kernel prints on stdout is ignored
# Thread pools torch, MKL and OpenBLAS size at start: one thread each for CPU timing servers.
_ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


class _ServerFailed(Exception):
    pass


class _TimingServer:
    """One worktree's kernel in its own process, answering ``block`` with one timing sample (ms)."""

    def __init__(self, config: StepConfig, step: Path, worktree: str, label: str, cpu: bool):
        self.label, self.timeout = label, config.step_timeout
        self.log = step / f"{label}-server.log"
        env = {**os.environ, **(_ONE_THREAD if cpu else {})}
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jfa_verify.workflows.bisect.step", "serve", config.state, worktree],
                cwd=config.state, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                bufsize=1, env=env)
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            at = line.find(PREFIX)
            if at >= 0:
                self.replies.put(json.loads(line[at + len(PREFIX):]))
        self.replies.put(None)

    def _reply(self, key: str):
        try:
            msg = self.replies.get(timeout=self.timeout)
        except queue.Empty:
            raise _ServerFailed(f"no reply in {self.timeout:g} s") from None
        if msg is None:
            tail = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()][-1:]
            raise _ServerFailed(f"its process ended ({self.proc.wait()})" + (f": {tail[0][:300]}" if tail else ""))
        if "error" in msg:
            raise _ServerFailed(msg["error"])
        return msg[key]

    def ready(self) -> str:
        return self._reply("case")

    def block(self) -> float:
        self.proc.stdin.write("block\n")
        self.proc.stdin.flush()
        return float(self._reply("ms"))

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def perf_step(config: StepConfig, step: Path, device, role: str) -> tuple[str, str, dict]:
    """Time the bisect worktree's kernel against the good worktree's; ``(verdict, reason, details)``.

    Rounds of :attr:`StepConfig.rounds` are added while the judgement is undecided, up to
    :attr:`StepConfig.max_rounds`; still undecided then, the commit is skipped. A kernel that does
    not load, is outside its capabilities on the batch, or raises is skipped (it cannot be timed).
    With ``role="good"`` both sides are the good commit (two fresh processes, as in every step):
    the noise check. It passes only when the interval lies within ``+-threshold`` on both sides
    (:func:`_within_noise`), so a run whose processes differ by more than the threshold stops
    before it can blame a commit.
    """
    from jfa_verify.checks.slowdown import judge_slowdown

    cpu = device.type == "cpu"
    base = _TimingServer(config, step, config.good_worktree, "good", cpu)
    cand = _TimingServer(config, step, config.worktree, "tested", cpu)
    try:
        try:
            case = cand.ready()
        except _ServerFailed as e:
            return "skip", f"cannot time this commit's kernel on batch {config.batch!r}: {e}"[:500], {}
        try:
            base.ready()
        except _ServerFailed as e:
            return "skip", f"environment: the good commit's kernel could not be timed: {e}"[:500], {}
        (step / "phase").write_text("run")
        times: dict[str, list[float]] = {"good": [], "tested": []}
        try:
            while True:
                for _ in range(config.rounds):
                    order = (base, cand) if len(times["good"]) % 2 == 0 else (cand, base)
                    for server in order:
                        times[server.label].append(server.block())
                judged = judge_slowdown(times["good"], times["tested"], config.threshold, config.confidence)
                settled = _within_noise(judged) if role == "good" else judged.verdict != "undecided"
                if settled or len(times["good"]) + config.rounds > config.max_rounds:
                    break
        except _ServerFailed as e:
            return "skip", f"timing failed: {e}"[:500], {}
    finally:
        base.close()
        cand.close()
    details = {"batch": config.batch, "case": case, "device": str(device),
               "pass": "forward+backward" if config.perf_backward else "forward", "slowdown": judged.to_dict(),
               "baseline_ms": times["good"], "candidate_ms": times["tested"]}
    if role == "good":  # the good commit against itself: this run's own noise
        if _within_noise(judged):
            return "good", f"noise check (good against itself): {judged.describe()}", details
        return "skip", (f"noise check failed: the good commit against itself shows {judged.describe()}; its "
                        f"interval must lie within +-{config.threshold:.0%}: raise --threshold (or --rounds, "
                        f"--block-ms), or time on a quieter machine"), details
    if judged.verdict == "undecided":
        return "skip", f"undecided after {judged.rounds} rounds: {judged.describe()}", details
    return judged.verdict, judged.describe(), details


def _within_noise(judged) -> bool:
    """A timing of a kernel against itself resolves ``threshold`` when its whole interval lies within
    ``[1 / (1 + t), 1 + t]``: no slowdown or speedup that large can come from this run's noise."""
    return 1.0 / (1.0 + judged.threshold) <= judged.low and judged.high <= 1.0 + judged.threshold


def _emit(msg: dict) -> None:
    print(PREFIX + json.dumps(msg), flush=True)


def serve(state: str, worktree: str, load: Callable[[StepConfig, str], object]) -> int:
    """A timing server (``python -m jfa_verify.workflows.bisect.step serve STATE WORKTREE``): loads ``worktree``'s
    kernel with ``load(config, worktree)``, runs it twice on the batch (compiling it), then answers
    each ``block`` line on stdin with ``{"ms": ...}`` until ``quit``. Failures are replied as
    ``{"error": ...}``."""
    import torch

    from jfa_verify.checks.timing import batch_case, pin_cpu_timing, time_block, timed_call
    from jfa_verify.core.device import select_device

    config = StepConfig.read(state)
    device = select_device(config.device)
    try:
        kernel = load(config, worktree)
        case = batch_case(config.batch, device.type)
        fn = timed_call(kernel, case, device, backward=config.perf_backward)
        for _ in range(2):  # the first call compiles, on every core
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        pin_cpu_timing(device)
    except Exception as e:  # the kernel under test may fail in any way; the step skips the commit
        _emit({"error": f"{type(e).__name__}: {e}"[:400]})
        return 1
    _emit({"case": case.describe()})
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        try:
            _emit({"ms": time_block(fn, device, block_ms=config.block_ms)})
        except Exception as e:  # the kernel failed while being timed
            _emit({"error": f"{type(e).__name__}: {e}"[:400]})
            return 1
    return 0
