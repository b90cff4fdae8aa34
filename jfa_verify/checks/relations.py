"""Checks that no single case can make: relations between the outputs of several calls.

* ``permutation``: permuting the sequences of a batch permutes the outputs
  (o, lse, dq, dk, dv row for row); a kernel that mixes up sequence indices,
  offsets or per-sequence state passes single cases whose sequences look alike,
  not this.
* ``batch_invariance``: each sequence's outputs do not depend on its neighbours:
  the sequence run alone (a batch of one) gives the rows it had in the batch.
* ``sequence``: related calls one after another on the same kernel object (same
  shapes with other lengths; same maxima with other offsets), each judged by the
  oracles: host state kept from one call to the next (a cached plan, offsets or
  workspace) shows only here.

Where the kernel declares ``deterministic``, the relations hold bit for bit
(the same tiles do the same arithmetic in any order and any batch); broadcast-Q's
dQ, a sum over the batch, is compared within a few units of its dtype's
roundoff, as is everything for a kernel that is not deterministic.

A relation's reproducer is a *call file* (:mod:`jfa_verify.checks.calls`): the cases,
in order, and the relation; ``jfa-verify replay FILE`` re-checks it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from jfa_verify.cases.case import Case, CaseTensors
from jfa_verify.judge.immutability import bits, copy_keeping_strides

__all__ = ["RELATIONS", "Relation", "permuted", "single_sequence"]

RELATIONS = ("permutation", "batch_invariance", "sequence")
_OUTPUTS = ("o", "lse", "dq", "dk", "dv")


@dataclass(frozen=True)
class Relation:
    """One relation check: ``name`` (one of :data:`RELATIONS`) over ``case`` (for ``sequence``: the
    first call; ``calls`` the rest, run in order on the same kernel object)."""

    name: str
    case: Case
    calls: tuple = ()

    def cases(self) -> tuple:
        """Every case the check runs as a call of its own (a reproducer's ``calls``)."""
        return (self.case,) + tuple(self.calls)

    def check(self, kernel, device) -> Optional[str]:
        """Run the check; a message naming the broken relation and where, or None when it holds.

        Exceptions of the kernel's call, and inputs it changed, are findings (returned as messages);
        an exception of the framework itself propagates (it says nothing about the kernel).
        """
        device = torch.device(device)
        try:
            if self.name == "sequence":
                return _check_sequence(self.cases(), kernel, device)
            if self.case.block_sparsity is not None or self.case.block_scaling is not None:
                return None  # a permuted or cut batch would need its selection (or block scales) moved with it
            if kernel.unsupported_reason(self.case.problem(self.case.materialize(device))) is not None:
                return None
            if self.name == "permutation":
                return _check_permutation(self.case, kernel, device)
            if self.name == "batch_invariance":
                return _check_batch_invariance(self.case, kernel, device)
        except _KernelFinding as e:
            return str(e)
        raise ValueError(f"relation {self.name!r} is not one of {RELATIONS}")


class _KernelFinding(Exception):
    """What the kernel's call did wrong (it raised, or it changed its inputs), raised out of a relation's
    middle to :meth:`Relation.check`."""


# ----------------------------------------------------------------------------- running


def _outputs(kernel, case: Case, tensors: CaseTensors, problem) -> dict:
    from jfa_verify.run.runner import call_kernel

    backward = kernel.capabilities.backward_reason(problem) is None
    instrument = case.instrument and kernel.capabilities.instrumented
    try:
        call = call_kernel(kernel, problem, tensors, case, backward=backward, instrument=instrument)
    except Exception as e:  # the kernel under test may fail in any way
        raise _KernelFinding(f"kernel raised: {type(e).__name__}: {e}") from e
    if call.input_changes:
        raise _KernelFinding("; ".join(call.input_changes))
    return {k: v.detach() for k, v in call.outputs.items() if isinstance(v, torch.Tensor)}


def _rows(starts: Sequence[int], lengths: Sequence[int], order: Sequence[int], first: int) -> list[int]:
    """Row indices that lay the sequences out in ``order`` after ``first`` leading rows."""
    out = list(range(first))
    for b in order:
        out.extend(range(starts[b], starts[b] + lengths[b]))
    return out


def _gather(t: torch.Tensor, rows: list[int], dim: int = 0) -> torch.Tensor:
    """``t`` with its rows (along ``dim``) taken in ``rows`` order, stored with ``t``'s strides."""
    out = copy_keeping_strides(t)
    out.copy_(t.index_select(dim, torch.tensor(rows, dtype=torch.long, device=t.device)))
    return out


def _offsets(lengths: Sequence[int], start: int, like: torch.Tensor) -> torch.Tensor:
    vals = [start]
    for n in lengths:
        vals.append(vals[-1] + n)
    return torch.tensor(vals, dtype=like.dtype, device=like.device)


def permuted(case: Case, tensors: CaseTensors, order: Sequence[int]) -> tuple[CaseTensors, dict]:
    """The batch of ``case`` with its sequences in ``order`` (same values, same strides), and per output
    the row indices (``lse``: columns) of the original that each permuted row holds."""
    q_len, k_len = case.query_lengths, case.kv_lengths
    pad = case.offsets_start
    k_starts = [pad + sum(k_len[:b]) for b in range(case.batch)]
    k_rows = _rows(k_starts, k_len, order, pad)
    k, v = _gather(tensors.k, k_rows), _gather(tensors.v, k_rows)
    k_off = _offsets([k_len[b] for b in order], pad, tensors.k_offsets)
    if case.mode == "broadcast_q":
        out_starts = [b * case.broadcast_q_len for b in range(case.batch)]
        o_rows = _rows(out_starts, q_len, order, 0)
        q, q_off = tensors.q, None
    else:
        q_pad = case.q_start
        q_starts = [q_pad + sum(q_len[:b]) for b in range(case.batch)]
        o_rows = _rows(q_starts, q_len, order, q_pad)
        q = _gather(tensors.q, o_rows)
        q_off = k_off if case.mode == "self" else _offsets([q_len[b] for b in order], q_pad, tensors.q_offsets)
    do = _gather(tensors.do, o_rows)
    rows = {"o": o_rows, "lse": o_rows, "dq": o_rows if case.mode != "broadcast_q" else None,
            "dk": k_rows, "dv": k_rows}
    return CaseTensors(q, k, v, q_off, k_off, do), rows


def single_sequence(case: Case, b: int) -> Case:
    """Sequence ``b`` of ``case`` as a batch of one (offsets from 0)."""
    extra = {"q_lengths": (case.q_lengths[b],)} if case.mode == "cross" else {}
    return dataclasses.replace(case, kv_lengths=(case.kv_lengths[b],), offsets_start=0, q_offsets_start=None,
                               name=f"{case.name or case.case_id()}/sequence-{b}", **extra)


def _compare(name: str, got: torch.Tensor, want: torch.Tensor, exact: bool, dtype: torch.dtype) -> Optional[str]:
    if got.shape != want.shape:
        return f"{name}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
    if exact:  # (bit for bit, but a zero is a zero: a row with no key to see came out -0.0 alone and 0.0 in a batch
        # from the float64 reference itself)
        diff = (bits(got) != bits(want)) & ~((got == 0) & (want == 0))
    else:
        eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
        g, w = got.double(), want.double()
        scale = w[torch.isfinite(w)].abs().max().item() if torch.isfinite(w).any() else 1.0
        both_inf = (g == w) | (torch.isnan(g) & torch.isnan(w))
        diff = ~both_inf & ~((g - w).abs() <= 8 * eps * max(scale, 1e-30))
    n = int(diff.sum())
    if not n:
        return None
    first = [int(i) for i in diff.nonzero()[0]]
    return (f"{name}: {n} of {diff.numel()} element(s) differ{' (bit for bit)' if exact else ''}, first at "
            f"{first}: {got[tuple(first)].item()!r} vs {want[tuple(first)].item()!r}")


def _unsteady(kernel, case: Case, tensors: CaseTensors, problem, base: dict, exact: bool) -> Optional[str]:
    """Before a broken relation is reported: the same call as ``base`` once more. A message when its outputs differ
    from ``base`` (a kernel whose own reruns differ breaks every relation, and the finding is that, not the batch
    order; a new user's nondeterministic kernel was reported as permutation-sensitive), else None."""
    again = _outputs(kernel, case, tensors, problem)
    for name in _OUTPUTS:
        if name in base and name in again:
            bad = _compare(name, again[name], base[name], exact, case.torch_dtype)
            if bad:
                return (f"the same call twice gave different outputs ({bad}): the kernel is not "
                        f"{'deterministic' if exact else 'repeatable within 8 units of roundoff'}, so "
                        f"this relation cannot be judged; `jfa-verify stress` or the gate's determinism check "
                        f"shows which reruns move")
    return None


def _check_permutation(case: Case, kernel, device) -> Optional[str]:
    if case.batch < 2:
        return None
    tensors = case.materialize(device)
    base = _outputs(kernel, case, tensors, case.problem(tensors))
    order = list(range(1, case.batch)) + [0]  # a rotation: every sequence moves
    perm, rows = permuted(case, tensors, order)
    problem = _validated(perm, case)
    got = _outputs(kernel, case, perm, problem)
    exact = kernel.capabilities.deterministic
    for name in _OUTPUTS:
        if name not in base or name not in got:
            continue
        want = base[name]
        if name == "lse":
            want = want[:, rows["lse"]]
        elif rows.get(name) is not None:
            want = want[rows[name]]
        bad = _compare(name, got[name], want, exact and rows.get(name) is not None, case.torch_dtype)
        if bad:
            return (_unsteady(kernel, case, tensors, case.problem(tensors), base, exact)
                    or f"permuting the sequences in order {order} does not permute the outputs: {bad}")
    return None


def _validated(t: CaseTensors, case: Case):
    from jfa_verify.core.contract import validate_inputs

    return validate_inputs(t.q, t.k, t.v, t.q_offsets, t.k_offsets, **case.contract_kwargs())


def _check_batch_invariance(case: Case, kernel, device) -> Optional[str]:
    if case.batch < 2:
        return None
    tensors = case.materialize(device)
    problem = case.problem(tensors)
    base = _outputs(kernel, case, tensors, problem)
    exact = kernel.capabilities.deterministic
    for b in _picked(case):
        # sequence b alone, with the very values it had in the batch
        others = [i for i in range(case.batch) if i != b]
        perm, rows = permuted(case, tensors, [b] + others)
        alone = single_sequence(case, b)
        t = _slice_first(case, perm, b)
        got = _outputs(kernel, alone, t, _validated(t, alone))
        for name in _OUTPUTS:
            if name not in base or name not in got or (name == "dq" and case.mode == "broadcast_q"):
                continue
            if name in ("dk", "dv"):
                idx = rows[name][case.offsets_start:case.offsets_start + case.kv_lengths[b]]
            else:  # query rows follow the leading rows (none under broadcast-Q)
                start = case.q_start
                idx = rows["o"][start:start + case.query_lengths[b]]
            want = base[name][:, idx] if name == "lse" else base[name][idx]
            bad = _compare(name, got[name], want, exact, case.torch_dtype)
            if bad:
                return (_unsteady(kernel, case, tensors, problem, base, exact)
                        or f"sequence {b} run alone differs from its rows in the batch: {bad}")
    return None


def _picked(case: Case) -> list[int]:
    """The sequences batch invariance runs alone: all of a small batch, else the first, a middle and the last
    non-empty ones."""
    live = [b for b in range(case.batch) if case.kv_lengths[b] or case.query_lengths[b]]
    return live if len(live) <= 3 else [live[0], live[len(live) // 2], live[-1]]


def _slice_first(case: Case, perm: CaseTensors, b: int) -> CaseTensors:
    """The first sequence of a permuted batch (sequence ``b`` first) as tensors of a batch of one."""
    pad = case.offsets_start
    lq, lk = case.query_lengths[b], case.kv_lengths[b]
    k = copy_keeping_strides(perm.k[pad:pad + lk])
    v = copy_keeping_strides(perm.v[pad:pad + lk])
    k_off = _offsets([lk], 0, perm.k_offsets)
    if case.mode == "broadcast_q":
        return CaseTensors(perm.q, k, v, None, k_off, copy_keeping_strides(perm.do[:lq]))
    q_pad = case.q_start
    q = copy_keeping_strides(perm.q[q_pad:q_pad + lq])
    q_off = k_off if case.mode == "self" else _offsets([lq], 0, perm.q_offsets)
    return CaseTensors(q, k, v, q_off, k_off, copy_keeping_strides(perm.do[q_pad:q_pad + lq]))


def _check_sequence(cases: Sequence[Case], kernel, device) -> Optional[str]:
    import dataclasses

    from jfa_verify.run.runner import run_case

    for i, case in enumerate(cases):
        result = run_case(case, kernel, device)
        if not result.failed:
            continue
        # Before blaming state carried between calls, the failing call runs first on a fresh kernel object (its
        # loader called again): one that fails there too is a wrong result of the case itself (a new user read
        # "call 2 failed after 1 earlier call" of a kernel that keeps no state and was wrong on that case alone).
        alone = result if i == 0 else run_case(case, dataclasses.replace(kernel, _impl=None), device)
        if i == 0 and alone.failed:
            # (calls this process made before the check, earlier cases of a run, can have left state outside the
            # kernel object: a new user's module-level call counter, wrong from its 3rd call, was told "not state")
            return (f"call 1 of {len(cases)} failed, the first call of this check (on a fresh kernel object), so no "
                    f"call of the check carried state into it: a wrong result of this case, or state the kernel keeps "
                    f"outside its object (a module-level cache, say) from calls this process made before the check; "
                    f"replaying the call file in a new process tells the two apart (it passes there if it is "
                    f"state):\n" + result.explain())
        if alone.failed:
            # (a fresh object does not reset what the kernel keeps outside it: a new user's module-level cache,
            # keyed by shape, was called "a wrong result of this case", and the case then passed in a new process)
            return (f"call {i + 1} of {len(cases)} failed after {i} earlier call(s), and as the first call on a "
                    f"fresh kernel object too: a wrong result of this case, or state the kernel keeps outside its "
                    f"object (a module-level cache, say) from calls before; replaying the case in a new process "
                    f"tells the two apart (it passes there if it is state):\n" + result.explain())
        return (f"call {i + 1} of {len(cases)} failed after {i} earlier call(s) on the same kernel object, and "
                f"passed as the first call on a fresh one: state carried between calls:\n" + result.explain())
    return None

