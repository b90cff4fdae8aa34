"""The options of a run that travel together: one frozen :class:`RunSettings`, built once (by the command line
from its arguments, by a workflow from its options) and passed whole to :class:`~jfa_verify.run.loop.Verifier`,
:class:`~jfa_verify.fuzz.campaign.Campaign` and :func:`~jfa_verify.run.runner.run_case` instead of loose keywords.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable, Optional

from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.watchdog import MAX_TIMEOUT_S
from jfa_verify.judge.memory import FILLS

__all__ = ["DEFAULT_CASE_TIMEOUT_S", "MAX_TIMEOUT_S", "MEMORY_MODES", "RunSettings"]

MEMORY_MODES = tuple(f for f in FILLS if f is not None)  # the tracked-memory fills (None: no tracking)

# `run`'s and `gate`'s --timeout when none is given: seconds a case may run, its Triton compiling included, before it
# is a hang. A hung kernel once held `run` forever (no default). Sized for the slowest honest case with room to
# spare: on the CPU interpreter the default suite's slowest case (layout-128-4096-512-2048/self/bfloat16, triton_jfa)
# took 66 s in its worker, the next 48 s, on 2 cores shared with other jobs (load 6, 2026-12-04); on an H200 a suite
# case took 2-16 s on a fresh Triton cache, nearly all of it compiling (README, issue 39). `fuzz` keeps its own
# 120 s: a campaign's cases are small draws, and a hang there costs its timeout at every shrink step.
DEFAULT_CASE_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class RunSettings:
    """How cases are run and judged, the same for every case of a run.

    Attributes:
        backward: judge dQ, dK and dV too (when the kernel has a backward for the case).
        timeout_s: seconds a case may run, its compilation included, before it is a ``"hang"`` (None: no limit).
            Isolated, the worker is killed and the run goes on; in-process, the case file is marked ``"hang"`` and
            the process exits (a hung kernel cannot be interrupted).
        isolate: run cases in a worker process (:class:`~jfa_verify.run.isolation.CaseWorker`), so a crash or a
            hang is that case's verdict.
        jobs: isolated worker processes running cases at once (more than 1 needs ``isolate``).
        plugins: the plugin files the kernel came from (named in replay commands and case files; loaded by
            isolated workers). Any iterable of paths; kept as a tuple of strings.
        accept: names of the kernel's declared conventions the user accepts (:mod:`jfa_verify.core.conventions`):
            a case whose every failure one of them explains passes, marked ``accepted``.
        memory: None (allocations read NaN), or ``"nan"``/``"large"``: guard bands around every allocation and
            that fill of uninitialized memory (:func:`~jfa_verify.run.runner.run_case`).
        budgets: the :class:`~jfa_verify.judge.budgets.BudgetTable` to judge by (None: the packaged one).
        seed: the seed of what a run draws (a suite's values, a campaign's first round).

    Raises:
        InvalidInput: a value of the wrong kind or out of range; the message names the value and the fix.

    Derive a variant with :meth:`replace` (``settings.replace(memory="nan")``): it is validated again.
    """

    backward: bool = True
    timeout_s: Optional[float] = None
    isolate: bool = False
    jobs: int = 1
    plugins: tuple[str, ...] = ()
    accept: tuple[str, ...] = ()
    memory: Optional[str] = None
    budgets: object = None
    seed: int = 0

    def __post_init__(self):
        # (the kinds first: frozen, so normalized through object.__setattr__)
        object.__setattr__(self, "plugins", _strings("plugins", self.plugins))
        object.__setattr__(self, "accept", _strings("accept", self.accept))
        for name in ("backward", "isolate"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInput(f"{name}={getattr(self, name)!r}: give True or False")
        if self.timeout_s is not None and (isinstance(self.timeout_s, bool)
                                           or not isinstance(self.timeout_s, (int, float))
                                           or not 0 < self.timeout_s <= MAX_TIMEOUT_S):
            raise InvalidInput(f"timeout_s={self.timeout_s!r}: give the seconds a case may run, a number > 0 and at "
                               f"most {MAX_TIMEOUT_S:g} (a week), or None for no limit")
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1 or \
                (self.jobs > 1 and not self.isolate):
            raise InvalidInput(f"jobs={self.jobs!r}: give an integer >= 1; more than one needs isolated workers "
                               f"(isolate=True, the CLI's default)")
        if self.memory is not None and self.memory not in MEMORY_MODES:
            raise InvalidInput(f"memory={self.memory!r}: give None, or one of "
                               f"{', '.join(repr(m) for m in MEMORY_MODES)} (the fill of uninitialized memory)")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InvalidInput(f"seed={self.seed!r}: give an integer")

    def replace(self, **changes) -> "RunSettings":
        """These settings with ``changes`` (field names as keywords), validated again.

        Raises:
            TypeError: a name that is no field of :class:`RunSettings`.
            InvalidInput: a value refused (as the constructor refuses it).
        """
        return dataclasses.replace(self, **changes)


def _strings(name: str, values: Iterable) -> tuple[str, ...]:
    """``values`` as a tuple of strings (paths as their text); a lone string is refused (it is no list of names)."""
    if isinstance(values, str):
        raise InvalidInput(f"{name}={values!r}: give a list of names, e.g. {name}=[{values!r}]")
    try:
        return tuple(str(v) for v in values)
    except TypeError:
        raise InvalidInput(f"{name}={values!r}: give a list (or tuple) of names") from None
