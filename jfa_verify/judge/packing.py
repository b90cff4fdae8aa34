"""Case packing: cases that share every input field but their lengths and seed run as one launch.

The sequences of a jagged batch are independent attention problems, so several drawn cases can be
concatenated into one packed case (:meth:`jfa_verify.cases.case.Case.pack`; each part keeps its own values)
and run once: one kernel launch, one float64 reference and one padded SDPA oracle for all of them.
The packed run is judged twice over (:func:`jfa_verify.run.runner.run_case`):

* as a case of its own (its composition, a batch larger than any part, can expose bugs no part does);
* per part (:func:`judge_parts`): each part's outputs are cut out of the packed outputs and judged
  against its own cut of the references, with the allowance its own magnitudes give (the float64
  reference's ``by_sequence`` terms), as the case standing alone would be.

A failing packed run is split (:func:`stand_alone`) until the failure stands in a case of its own.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional

import torch

from jfa_verify.cases.case import Case
from jfa_verify.judge.budgets import default_table, precision_of
from jfa_verify.judge.compare import OUTPUTS, scale_floor_terms, segment_verdict_terms

__all__ = ["judge_parts", "judge_sequences", "pack_failures_line", "part_statuses", "stand_alone"]

# Outputs indexed by query rows (LSE: its columns); dK and dV by key rows.
_QUERY_ROWS = ("o", "dq")


def judge_parts(case: Case, got: dict, ref: dict, sdpa: dict, *, budgets=None, tf32: bool = False
                ) -> list[list[str]]:
    """Judge each part of a packed case on its own: the outputs (of ``o``, ``lse``, ``dq``, ``dk``, ``dv``) each
    part fails.

    Args:
        case: a packed case (``case.parts`` set).
        got, sdpa: the kernel's and the padded SDPA oracle's outputs on the packed case (``[rows, H, D]``, LSE
            ``[H, rows]``).
        ref: :func:`oracles.float64.reference_attention` on the packed case with ``by_sequence=True``.
        budgets: the :class:`~jfa_verify.judge.budgets.BudgetTable` (None: the packaged one).
        tf32: judge by the ``float32-tf32`` row (a kernel declaring TF32).

    Returns: one list per part, in order, of its failing output names (empty: the part passes), each a
    :class:`FailingOutput` carrying its numbers. An output the kernel did not return, or returned in another shape,
    is left to the packed case's own judgement.

    Each part is judged as :func:`jfa_verify.judge.compare.compare_output` judges a case: the error against its
    float64 cut, the allowance from its SDPA cut's error and its own magnitudes (``max |ref|`` of its cut and
    the ``_lowp``/``_acc`` terms of its sequences). Every part of an output is measured at once
    (:func:`~jfa_verify.judge.compare.segment_verdict_terms`) and read back in one host transfer for the whole
    call, not one comparison (and a dozen device syncs) per part and output; the verdicts are
    :func:`~jfa_verify.judge.compare.compare_output`'s on each cut, exactly (the maxima are the same numbers).
    """
    row = precision_of(case.torch_dtype, tf32=tf32, block_scaled=case.block_scaling is not None)
    table = budgets or default_table()
    bounds = case.part_rows()
    judged = [name for name in OUTPUTS
              if name in ref and name in got and tuple(got[name].shape) == tuple(ref[name].shape)]
    terms = []
    for name in judged:
        rows = ref[name].shape[1] if name == "lse" else ref[name].shape[0]
        segment = torch.full((rows,), len(bounds), dtype=torch.long)  # rows in no part: a segment never read
        for i, ranges in enumerate(bounds):
            span = ranges[0] if name in _QUERY_ROWS + ("lse",) else ranges[1]
            segment[span.start: span.stop] = i
        flip = (lambda x: x.transpose(0, 1)) if name == "lse" else (lambda x: x)
        terms.append(segment_verdict_terms(flip(got[name]), flip(sdpa[name]), flip(ref[name]).to(torch.float64),
                                           segment.to(ref[name].device), len(bounds)))
    measured = torch.stack(terms).tolist() if terms else []  # [output][part][bad, error, sdpa error, scale]
    # (the reference's per-sequence magnitudes are on the host already: read once each, not per part)
    by_sequence = {key: ref[key].tolist() for key in (f"{name}_{kind}_by_sequence" for name in judged
                                                      for kind in ("lowp", "acc")) if key in ref}
    verdicts, first = [], 0
    for i, (n, _) in enumerate(case.parts):
        failing = []
        for name, per_part in zip(judged, measured):
            bad, k_err, s_err, scale = per_part[i]
            scales = [max(by_sequence[f"{name}_{kind}_by_sequence"][first: first + n]) if n and
                      f"{name}_{kind}_by_sequence" in by_sequence else 0.0 for kind in ("lowp", "acc")]
            floors = scale_floor_terms(name, scale, row, *scales)
            # (as compare_output: a broken baseline must not widen the allowance to infinity)
            allowance = table.budget(row, name).allowance(s_err if math.isfinite(s_err) else 0.0, floors)
            if bad or not k_err <= allowance:
                failing.append(FailingOutput(name, k_err, allowance, s_err, bool(bad)))
        verdicts.append(failing)
        first += n
    return verdicts


class FailingOutput(str):
    """A failing output's name (it compares and prints as the name) with the numbers that failed it on a part's or a
    sequence's own rows: ``error`` (max abs error against the float64 cut), ``allowance``, ``sdpa_error`` and ``bad``
    (a NaN or an infinity where the reference has none)."""

    def __new__(cls, name: str, error: float, allowance: float, sdpa_error: float, bad: bool) -> "FailingOutput":
        out = super().__new__(cls, name)
        out.error, out.allowance, out.sdpa_error, out.bad = error, allowance, sdpa_error, bad
        return out

    def __reduce__(self):  # (a case worker sends verdicts to its parent pickled)
        return FailingOutput, (str(self), self.error, self.allowance, self.sdpa_error, self.bad)

    def describe(self) -> str:
        """``"o: max abs error 0.0031 > allowance 1.2e-05 (SDPA same-dtype error 4e-06)"``, or the non-finite form."""
        if self.bad:
            return f"{self}: NaN or infinite where the reference is not (or the reverse)"
        return (f"{self}: max abs error {self.error:.3g} > allowance {self.allowance:.3g} (SDPA same-dtype error "
                f"{self.sdpa_error:.3g})")


def judge_sequences(case: Case, got: dict, ref: dict, sdpa: dict, *, budgets=None) -> list[list[str]]:
    """Judge each sequence of a block-scaled (MXFP8) case on its own rows, as :func:`judge_parts` judges packed parts:
    the outputs each sequence fails (one list per sequence; all empty for a case that is not judged so).

    Why: a case's allowance is scaled by its largest magnitudes, and E8M0 scales put one sequence's values many
    binades below another's, so a bug confined to the small one (its whole output zeroed, say) passed a case
    that also held an outlier block (a new user's trial of ``triton_jfa_mxfp8``). Judged alone, each sequence gets
    the allowance its own SDPA error and magnitudes give, which the budgets hold for any case of one sequence.
    Broadcast-Q cases (their sequences share Q's rows) and cases of one sequence are not judged again.

    Args: as :func:`judge_parts`; ``ref`` with ``by_sequence=True``.
    """
    if case.block_scaling is None or case.parts is not None or case.mode == "broadcast_q" or case.batch < 2:
        return [[] for _ in range(case.batch)]
    one_each = dataclasses.replace(case, parts=tuple((1, case.seed if i == 0 else i) for i in range(case.batch)))
    return judge_parts(one_each, got, ref, sdpa, budgets=budgets)


def stand_alone(result, verify: Callable[[Case], object], discard: Callable[[object], None]):
    """Split a failing packed run until the failure stands in a case of its own; returns that case's result.

    The parts its per-part judgement failed (``result.part_failures``) run alone first, in order: the first that
    fails is the answer. Otherwise (the pack failed as a whole: a crash, a hang, an error, a scheduler invariant, or
    no part fails alone) its parts are halved, each half run packed, and the search goes on in the first half
    that fails; when no half fails, the failure belongs to the composition and the packed result is the answer.

    Args:
        result: a failing :class:`~jfa_verify.run.runner.CaseResult` of a packed case (any other is returned as is).
        verify: runs one case and returns its ``CaseResult`` (the caller's loop: case file, counting).
        discard: called with each failing result the answer supersedes (the caller removes its case file).
    """
    if not result.failed or result.case.parts is None:
        return result
    parts = result.case.split()
    for i, failing in enumerate(result.part_failures or []):
        if failing:
            alone = verify(parts[i])
            if alone.failed:
                discard(result)
                return alone
    half = len(parts) // 2
    for lo, hi in ((0, half), (half, len(parts))):
        if hi - lo == 1 and result.part_failures is not None and result.part_failures[lo]:
            continue  # ran alone above, and passed
        smaller = verify(Case.pack(parts[lo:hi]))
        if smaller.failed:
            discard(result)
            return stand_alone(smaller, verify, discard)
    return result


def part_statuses(result) -> list[str]:
    """The verdict of each case a run held (one for a case that is not packed): a part's own judgement where the
    packed run was judged per part and some part failed on its own rows, else the run's status (a crash, hang or
    error has no per-part verdict; a failure of the launch as a whole, such as a scheduler invariant or an output
    that no gradient reaches, is counted for every part)."""
    parts = result.case.parts
    if parts is None:
        return [result.status]
    if result.part_failures is None or not result.failed or not any(result.part_failures):
        # (a pass: accepted conventions explain every part's; a failure of the launch as a whole, with every part's
        # rows right, is every part's: no part can be told apart from it)
        return [result.status] * len(parts)
    return ["fail" if failing else "pass" for failing in result.part_failures]


def pack_failures_line(result) -> Optional[str]:
    """The explanation's line on a packed run's parts that failed on their own (None when none did)."""
    if result.case.parts is None or not result.part_failures or not any(result.part_failures):
        return None
    bad = [f"part {i} (seed {seed}): {', '.join(failing)}"
           for i, ((_, seed), failing) in enumerate(zip(result.case.parts, result.part_failures)) if failing]
    return (f"  packed: {len(bad)} of {len(result.part_failures)} parts fail, each judged on its own rows of this "
            f"launch (run alone, such a part may pass: then the bug is the composition's): " + "; ".join(bad))
