"""What one bisect step is told and what it records: the step configuration, the step record, and the
verdict codes (the one home of git's meanings).

``git bisect run`` reads a step's exit status: 0 good, 1..127 except 125 bad, 125 "cannot test"
(skip), 128 and above abort the bisect (``git help bisect``, "Bisect run"). The step's Python process
never exits with git's codes itself: a Python that fails before any jfa-verify code runs exits 1,
which git would read as *bad*. It exits with :data:`STEP_EXIT`; the generated shell wrapper
(:func:`step_script`) translates those to :data:`GIT_EXIT` and hands every other status (a signal,
a watchdog, an interpreter that never started) to the step's ``died`` handler, which decides; a
handler that cannot answer either stops the bisect.

This module imports nothing heavy: the orchestrator reads it without loading torch.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Optional

__all__ = ["GIT_EXIT", "MODES", "ROLES", "STEP_EXIT", "StepConfig", "StepRecord", "TARGETS", "VERDICTS",
           "read_records", "step_script"]

VERDICTS = ("good", "bad", "skip", "abort")
# git bisect run's exit codes: 0 good, 1 bad, 125 skip (cannot test), >= 128 aborts the bisect.
GIT_EXIT = {"good": 0, "bad": 1, "skip": 125, "abort": 255}
# The step process's own codes: none of them is a status Python or a shell produces by accident.
STEP_EXIT = {"good": 10, "bad": 11, "skip": 12, "abort": 13}
MODES = ("verdict", "drift", "perf")
TARGETS = ("case", "suite", "campaign", "batch")
# "good"/"bad": the endpoint checks before git bisect starts; "candidate": a commit git asked about.
ROLES = ("good", "bad", "candidate")


@dataclass(frozen=True)
class StepConfig:
    """Everything a step needs, written once by the orchestrator as ``<state>/config.json``.

    Paths are absolute. ``worktree``: the temporary worktree git bisect checks commits out in;
    ``good_worktree``: a second one fixed at the good commit (performance mode's baseline).
    ``plugins``: plugin files relative to the repository root; ``module``: a module to import
    with ``<worktree>/<module_root>`` first on ``sys.path`` (a kernel package in the repository).
    ``mode``: ``verdict`` (the float64 verdict), ``drift`` (outputs against the good commit's) or
    ``perf`` (time against the good commit). ``target``: what is run (see :data:`TARGETS`).
    ``threshold``: the slowdown (fraction, 0.05 = 5%) a perf step calls bad. ``atol``: drift
    tolerance (None: bit for bit). Times are seconds; ``block_ms`` is milliseconds.
    """

    state: str
    repo: str
    worktree: str
    good_commit: str
    kernel: str
    mode: str = "verdict"
    target: str = "case"
    plugins: tuple[str, ...] = ()
    module: Optional[str] = None
    module_root: str = "."
    good_worktree: Optional[str] = None
    case: Optional[dict] = None
    suite: str = "default"
    filter: str = ""
    max_cases: Optional[int] = None
    max_examples: int = 20
    seed: int = 0
    batch: str = "movielens"
    threshold: float = 0.05
    confidence: float = 0.95
    rounds: int = 8
    max_rounds: int = 24
    block_ms: float = 50.0
    perf_backward: bool = False
    atol: Optional[float] = None
    device: Optional[str] = None
    backward: bool = True
    build: Optional[str] = None
    case_timeout: Optional[float] = None
    hang_is_bad: bool = False  # a case past case_timeout is bad (a hang is the regression), not a skip
    step_timeout: float = 1800.0
    python: str = "python3"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r} is not one of {MODES}")
        if self.target not in TARGETS:
            raise ValueError(f"target={self.target!r} is not one of {TARGETS}")
        object.__setattr__(self, "plugins", tuple(self.plugins))

    @property
    def state_dir(self) -> Path:
        return Path(self.state)

    def write(self) -> Path:
        path = self.state_dir / "config.json"
        path.write_text(json.dumps(asdict(self), indent=2))
        return path

    @classmethod
    def read(cls, state: "str | Path") -> "StepConfig":
        data = json.loads((Path(state) / "config.json").read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class StepRecord:
    """One tested commit: its verdict (one of :data:`VERDICTS`), why, how long the step took (seconds,
    build included), and mode-specific details (failing outputs and locations, drift, timings)."""

    commit: str
    subject: str
    role: str
    verdict: str
    reason: str
    seconds: float
    details: dict = field(default_factory=dict)

    def line(self) -> str:
        """The one line a step prints (and git's log keeps)."""
        return (f"jfa-verify bisect: {self.commit[:10]} {self.verdict.upper():5s} ({self.role}, {self.seconds:.1f} s) "
                f"{self.reason}")

    def to_dict(self) -> dict:
        return asdict(self)


def read_records(state: "str | Path") -> list[StepRecord]:
    """Every step record of a bisect, in the order the steps ran (``<state>/steps.jsonl``)."""
    path = Path(state) / "steps.jsonl"
    if not path.is_file():
        return []
    return [StepRecord(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def step_script(config: StepConfig) -> str:
    """The POSIX shell wrapper ``git bisect run`` calls (``sh step.sh [ROLE]``).

    It runs the step from the state folder (so a repository that contains a ``jfa_verify/``
    folder cannot shadow the fixed framework), under ``timeout`` when the system has it, and
    translates :data:`STEP_EXIT` to :data:`GIT_EXIT`; any other status goes to ``died``, and if that
    handler cannot answer either, the bisect stops (a broken framework must not blame commits).
    """
    state, py = shlex.quote(config.state), shlex.quote(config.python)
    limit = f"{config.step_timeout:g}"
    cases = "\n".join(f"  {STEP_EXIT[v]}) exit {GIT_EXIT[v]} ;;" for v in VERDICTS)
    return f"""#!/bin/sh
# Generated by jfa-verify bisect: one bisect step. Usage: sh step.sh [good|bad|candidate]
role=${{1:-candidate}}
cd {state} || exit {GIT_EXIT['abort']}
export PYTHONDONTWRITEBYTECODE=1
if command -v timeout >/dev/null 2>&1; then
  timeout -k 10 {limit} {py} -m jfa_verify.workflows.bisect.step run {state} --role "$role"
else
  {py} -m jfa_verify.workflows.bisect.step run {state} --role "$role"
fi
rc=$?
case $rc in
{cases}
esac
{py} -m jfa_verify.workflows.bisect.step died {state} --role "$role" --status "$rc"
rc=$?
case $rc in
{cases}
esac
echo "jfa-verify bisect: the step and its crash handler both failed (exit $rc); stopping the bisect" >&2
exit {GIT_EXIT['abort']}
"""
