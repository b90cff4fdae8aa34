"""Related calls in sequence, as a Hypothesis stateful test: host state kept from one call to the next.

A kernel's host code may keep state between calls: a plan, offsets or a
workspace cached under a key that two different calls share (the shapes, the
longest sequence). Each call alone is right; the second of two related calls is
not. :func:`call_sequence_machine` builds a ``RuleBasedStateMachine`` whose
rules make such calls on one kernel object, each judged by the oracles
(:func:`jfa_verify.run.runner.run_case`):

* ``first``: a drawn case (small, inside the kernel's capabilities);
* ``same_shapes_other_lengths``: the last call's tensors' shapes, its tokens
  moved between sequences (other offsets, same totals);
* ``same_maxima_other_offsets``: the last call's longest sequences kept, the
  others' boundaries and the offsets' start moved;
* ``fresh``: another drawn case.

When a call fails, the sequence so far is written as a call file
(:mod:`jfa_verify.checks.calls`) before the failure is raised; Hypothesis shrinks the
sequence and the last file written is the shortest sequence that shows the bug:
``jfa-verify replay FILE`` runs it again, in order, on one kernel object.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from jfa_verify.cases.case import Case
from jfa_verify.checks.relations import Relation

__all__ = ["call_sequence_machine", "moved_tokens", "same_maxima"]


def moved_tokens(case: Case, i: int, j: int, n: int) -> Case:
    """``case`` with ``n`` tokens moved from sequence ``i`` to ``j`` (query and key rows alike where the mode
    ties them), so every tensor keeps its shape and the offsets change."""
    k = list(case.kv_lengths)
    n = min(n, k[i])
    k[i] -= n
    k[j] += n
    extra = {}
    if case.mode == "cross":
        q = list(case.q_lengths)
        m = min(n, q[i])
        q[i] -= m
        q[j] += m
        extra["q_lengths"] = tuple(q)
    return dataclasses.replace(case, kv_lengths=tuple(k), seed=case.seed + 1, **extra)


def same_maxima(case: Case, start: int, order: list[int]) -> Case:
    """``case`` with the same longest sequence (and so the same maxima), the other sequences in ``order``
    and the offsets starting at ``start``."""
    k = list(case.kv_lengths)
    longest = max(range(len(k)), key=lambda b: k[b])
    rest = [b for b in range(len(k)) if b != longest]
    picked = [rest[i] for i in order] if sorted(order) == list(range(len(rest))) else rest
    new_order = [longest] + picked
    extra = {}
    if case.mode == "cross":
        extra["q_lengths"] = tuple(case.q_lengths[b] for b in new_order)
    return dataclasses.replace(case, kv_lengths=tuple(k[b] for b in new_order), offsets_start=start,
                               seed=case.seed + 2, **extra)


def call_sequence_machine(kernel, device, *, corpus: "str | Path", case_strategy=None, plugins: tuple = ()):
    """A ``RuleBasedStateMachine`` class calling ``kernel`` on ``device`` (see the module docstring).

    Args:
        kernel: the registered kernel; each sequence runs on a fresh implementation object (its state
            persists within the sequence, never across sequences).
        device: where the cases run.
        corpus: folder for the call file of a failing sequence
            (``sequence-<kernel>.calls.json``, rewritten by each failing run, so the last is the shortest).
        case_strategy: the strategy of first and fresh cases (default: small
            :func:`jfa_verify.strategies.cases` of the kernel, contract-valid offsets only).
        plugins: plugin files the kernel came from (named in the call file).
    """
    from jfa_verify.checks.calls import write_call_file
    from jfa_verify.run.corpus import CALL_FILE_SUFFIX, replay_command
    from jfa_verify.run.runner import run_case
    from jfa_verify.strategies import cases

    if case_strategy is None:
        dev = str(getattr(device, "type", device))
        # small on the interpreter; on a GPU the kernel's own tiles decide (40 would never leave a 64-row one)
        case_strategy = cases(kernel, device_type=dev, max_batch=4, max_len=None if dev == "cuda" else 40,
                              offsets_layouts=["contiguous"])
    path = Path(corpus) / f"sequence-{kernel.name}{CALL_FILE_SUFFIX}"

    class CallSequence(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.calls: list[Case] = []
            # a fresh implementation object per sequence: state may persist within it, never across
            # sequences (so a failing sequence replays alone, on a fresh object)
            self.kernel = dataclasses.replace(kernel, _impl=None)

        def _call(self, case: Case) -> None:
            self.calls.append(case)
            result = run_case(case, self.kernel, device)
            if result.failed:
                relation = Relation("sequence", self.calls[0], tuple(self.calls[1:]))
                finding = f"call {len(self.calls)} of {len(self.calls)} failed:\n{result.explain()}"
                write_call_file(path, relation, kernel=kernel.name, device=str(device), status="fail",
                                finding=finding, plugins=tuple(plugins))
                raise AssertionError(f"{finding}\nthe sequence: {replay_command(path, kernel.name, plugins)}")

        @property
        def last(self) -> Optional[Case]:
            return self.calls[-1] if self.calls else None

        @initialize(case=case_strategy)
        def first(self, case):
            self._call(case)

        @precondition(lambda self: self.last is not None and self.last.batch >= 2)
        @rule(data=st.data())
        def same_shapes_other_lengths(self, data):
            b = self.last.batch
            i = data.draw(st.integers(0, b - 1), label="from")
            j = data.draw(st.integers(0, b - 1).filter(lambda x: x != i), label="to")
            n = data.draw(st.integers(1, 8), label="tokens")
            self._call(moved_tokens(self.last, i, j, n))

        @precondition(lambda self: self.last is not None and self.last.batch >= 2)
        @rule(data=st.data())
        def same_maxima_other_offsets(self, data):
            start = data.draw(st.sampled_from([0, 1, 3, 17]), label="offsets_start")
            order = data.draw(st.permutations(list(range(self.last.batch - 1))), label="order")
            self._call(same_maxima(self.last, start, list(order)))

        @rule(case=case_strategy)
        def fresh(self, case):
            self._call(case)

    return CallSequence
