"""Determinism reruns: the same case through a kernel several times, outputs compared bit for bit.

A kernel that declares itself deterministic (``Capabilities.deterministic``) must give
bit-identical O, LSE, dQ, dK and dV on every run of the same inputs (no atomics whose
order varies, no races, no dependence on uninitialized memory or on earlier calls). A kernel
that declares itself non-deterministic is held to its budget on every rerun instead.
Reproducibility across runs is what lets a CI gate give the same verdict for the same commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from jfa_verify.cases.case import Case
from jfa_verify.judge.localize import locate
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.run.runner import call_kernel, run_case
from jfa_verify.run.settings import RunSettings

__all__ = ["RerunVerdict", "check_reruns", "first_difference"]


@dataclass
class RerunVerdict:
    """``differences``: one message per output that moved between reruns (empty: reproducible)."""

    case: Case
    kernel: str
    reruns: int
    deterministic: bool
    status: str = "pass"  # "pass", "fail", "error" or "unsupported"
    differences: list[str] = field(default_factory=list)
    message: str = ""


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


def check_reruns(case: Case, kernel: Kernel, device, *, reruns: int = 3, backward: bool = True) -> RerunVerdict:
    """Run ``case`` ``reruns`` times (>= 2) and compare every output with the first run's, bit for bit.

    A non-deterministic kernel (by its declaration) is judged by :func:`jfa_verify.run.runner.run_case`
    on each rerun instead. Returns a :class:`RerunVerdict`; kernel exceptions become ``status="error"``.

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
        for i in range(reruns):
            result = run_case(case, kernel, device, RunSettings(backward=backward), tensors=tensors)
            if result.failed:
                verdict.status = "fail"
                verdict.differences.append(f"rerun {i}: {result.explain()}")
        return verdict
    first = None
    for i in range(reruns):
        try:
            got = call_kernel(kernel, problem, tensors, case, backward=backward).outputs
        except Exception as e:  # the kernel under test may fail in any way
            verdict.status, verdict.message = "error", f"rerun {i}: {type(e).__name__}: {e}"
            return verdict
        got = {n: t.detach().clone() for n, t in got.items() if isinstance(t, torch.Tensor)}
        if first is None:
            first = got
            continue
        for name, ref in first.items():
            index = first_difference(ref, got[name])
            if index is None:
                continue
            if index == ():
                verdict.differences.append(f"rerun {i}: {name} changed shape or dtype")
                continue
            tiles = kernel.tile_sizes(problem)
            where = locate(problem, name, index, tiles).describe()
            moved = (got[name].double() - ref.double()).abs()
            verdict.differences.append(
                f"rerun {i}: {name} differs bit-wise from run 0 at {where}: {ref[index].item()!r} then "
                f"{got[name][index].item()!r} ({int((moved != 0).sum())} element(s) moved, max |diff| "
                f"{float(torch.nan_to_num(moved, nan=float('inf')).max()):.3g})")
    if verdict.differences:
        verdict.status = "fail"
    return verdict
