"""The differential runner: one case through a kernel and both oracles, judged per output.

Data flows one way: :class:`~jfa_verify.case.Case` -> tensors -> kernel and
oracle outputs -> :class:`~jfa_verify.compare.OutputComparison` per output ->
:class:`CaseResult` (the verdict).
"""

from __future__ import annotations

import contextlib
import time
import traceback
from dataclasses import dataclass, field
from typing import Optional

import torch

from oracles import padded_sdpa_attention, reference_attention

from .budgets import default_table, precision_of
from .case import Case
from .compare import OUTPUTS, OutputComparison, compare_output, reference_scales
from .contract import JaggedProblem, validate_inputs
from .errors import UnsupportedCase
from .localize import Location, locate

__all__ = ["CaseResult", "run_case", "poisoned_allocations"]


@contextlib.contextmanager
def poisoned_allocations():
    """Make ``torch.empty`` return NaN-filled floats (and max-value ints) inside the block.

    Uses torch's deterministic mode with ``fill_uninitialized_memory`` (warn-only,
    so no operation is refused), so an output row a kernel forgets to write reads
    NaN instead of whatever the allocator returned.
    """
    import torch.utils.deterministic as det

    was_on = torch.are_deterministic_algorithms_enabled()
    was_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    was_fill = det.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        yield
    finally:
        det.fill_uninitialized_memory = was_fill
        torch.use_deterministic_algorithms(was_on, warn_only=was_warn)


@dataclass
class CaseResult:
    """Everything known about one case after a run.

    ``status``: ``"pass"``, ``"fail"`` (an output outside its allowance, or
    non-finite), ``"error"`` (the kernel raised) or ``"unsupported"`` (outside
    the kernel's declared capabilities; not a failure).
    """

    case: Case
    kernel: str
    status: str
    comparisons: list[OutputComparison] = field(default_factory=list)
    locations: dict[str, Location] = field(default_factory=dict)
    message: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    block_sizes: tuple[int, int] = (1, 1)
    reproducer: Optional[str] = None
    schedule_violations: list[str] = field(default_factory=list)
    schedule_stats: dict[str, dict] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "error")

    @property
    def failing(self) -> list[OutputComparison]:
        return [c for c in self.comparisons if not c.passed]

    @property
    def worst(self) -> Optional[OutputComparison]:
        """The comparison with the largest headroom (error / allowance)."""
        return max(self.comparisons, key=lambda c: c.headroom, default=None)

    def replay_command(self) -> str:
        target = self.reproducer or f"--case '{self.case.to_json()}'"
        return f"jfa-verify replay {target} --kernel {self.kernel}"

    def explain(self) -> str:
        """A multi-line verdict: every failing output with its location, then the replay command."""
        head = f"[{self.status.upper()}] {self.case.name or self.case.case_id()}: {self.case.describe()} on {self.kernel}"
        lines = [head]
        if self.status == "error":
            lines.append(f"  kernel raised: {self.message}")
        if self.schedule_violations:
            lines.append(f"  scheduler invariants: {len(self.schedule_violations)} violation(s)")
            lines.extend(f"      {v}" for v in self.schedule_violations[:10])
        for c in self.failing:
            where = self.locations.get(c.name)
            what = c.problem or f"max abs error {c.kernel_error:.3g} > allowance {c.allowance:.3g}"
            lines.append(f"  {c.name}: {what} (SDPA same-dtype error {c.sdpa_error:.3g})")
            if where is not None:
                lines.append(
                    f"      worst at {where.describe()}: kernel {c.kernel_value!r}, reference {c.reference_value!r}"
                )
        if self.failed:
            lines.append(f"  replay: {self.replay_command()}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "case": self.case.to_dict(),
            "case_id": self.case.case_id(),
            "kernel": self.kernel,
            "status": self.status,
            "message": self.message,
            "seconds": self.seconds,
            "block_sizes": list(self.block_sizes),
            "reproducer": self.reproducer,
            "schedule_violations": self.schedule_violations,
            "schedule": self.schedule_stats,
            "outputs": {
                c.name: {
                    "passed": c.passed,
                    "kernel_error": c.kernel_error,
                    "sdpa_error": c.sdpa_error,
                    "allowance": c.allowance,
                    "floors": list(c.floors),  # the allowance's terms before their constants (calibration)
                    "headroom": c.headroom,
                    "problem": c.problem,
                    "worst_index": list(c.worst_index) if c.worst_index else None,
                    "kernel_value": c.kernel_value,
                    "reference_value": c.reference_value,
                    "location": self.locations[c.name].describe() if c.name in self.locations else None,
                }
                for c in self.comparisons
            },
        }


def _kernel_outputs(kernel, tensors, case: Case, backward: bool, instrument: Optional[dict]) -> dict[str, torch.Tensor]:
    q, k, v = (t.detach().clone().requires_grad_(backward) for t in (tensors.q, tensors.k, tensors.v))
    call = kernel if instrument is None else kernel.fn.run
    extra = {} if instrument is None else {"instrument": instrument}
    with poisoned_allocations():
        o, lse = call(
            q, k, v, tensors.q_offsets, tensors.k_offsets,
            causal=case.causal, causal_alignment=case.causal_alignment, sm_scale=case.sm_scale, **extra,
        )
        out = {"o": o.detach(), "lse": lse.detach()}
        if backward:
            o.backward(tensors.do)
            out.update(dq=q.grad, dk=k.grad, dv=v.grad)
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_case(case: Case, kernel, device: torch.device | str = "cpu", *, backward: bool = True,
             budgets=None, instrument: bool = True, tensors=None) -> CaseResult:
    """Run ``case`` through ``kernel`` (a :class:`kernels.registry.Kernel`) and both oracles.

    ``budgets``: the :class:`jfa_verify.budgets.BudgetTable` to judge by (default: the
    packaged table); a kernel declaring ``tf32`` is judged by the ``float32-tf32`` row.
    ``instrument``: record tile visits and check the scheduler invariants when the
    kernel supports it (calibration turns it off: it measures numerics only).
    ``tensors``: ``case.materialize(device)`` already made (several kernels judged on one
    huge case); None to materialize here.

    Returns a :class:`CaseResult`. Kernel exceptions become ``status="error"``
    with the traceback's last line; they are never raised from here, so one bad
    case cannot stop a suite. Invalid cases raise :class:`InvalidInput` when
    the case is built, before this is called.
    """
    device = torch.device(device)
    tensors = case.materialize(device) if tensors is None else tensors
    problem: JaggedProblem = validate_inputs(
        *tensors.call_args(), causal=case.causal, causal_alignment=case.causal_alignment, sm_scale=case.sm_scale
    )
    name = getattr(kernel, "name", str(kernel))
    caps = getattr(kernel, "capabilities", None)
    blocks = caps.block_sizes(case.head_dim, case.torch_dtype, device.type) if caps else (1, 1)
    result = CaseResult(case, name, "pass", block_sizes=blocks)
    backward = backward and (caps is None or caps.backward)
    try:
        if hasattr(kernel, "check_supported"):
            kernel.check_supported(problem)
    except UnsupportedCase as e:
        result.status, result.message = "unsupported", str(e)
        return result

    instrument = {} if instrument and caps is not None and caps.instrumented and hasattr(kernel.fn, "run") else None
    t0 = time.perf_counter()
    try:
        got = _kernel_outputs(kernel, tensors, case, backward, instrument)
        _sync(device)
    except Exception as e:  # the kernel under test may fail in any way
        result.status = "error"
        result.message = f"{type(e).__name__}: {e}".strip()
        result.seconds["kernel"] = time.perf_counter() - t0
        result.message += "\n" + "".join(traceback.format_exception(e)[-3:]).rstrip()
        return result
    t1 = time.perf_counter()
    do = tensors.do if backward else None
    ref = reference_attention(
        *tensors.call_args(), causal=case.causal, causal_alignment=case.causal_alignment, sm_scale=case.sm_scale, do=do
    )
    sdpa = padded_sdpa_attention(
        *tensors.call_args(), causal=case.causal, causal_alignment=case.causal_alignment, sm_scale=case.sm_scale, do=do
    )
    _sync(device)
    t2 = time.perf_counter()
    result.seconds.update(kernel=t1 - t0, oracles=t2 - t1)
    row = precision_of(case.torch_dtype, tf32=bool(getattr(caps, "tf32", False)))
    table = budgets or default_table()
    for out_name in OUTPUTS:
        if out_name not in ref:
            continue
        cmp = compare_output(out_name, got[out_name], sdpa[out_name], ref[out_name], case.torch_dtype,
                             *reference_scales(ref, out_name),
                             budget=table.budget(row, out_name), precision=row)
        result.comparisons.append(cmp)
        if cmp.worst_index is not None:
            result.locations[out_name] = locate(problem, out_name, cmp.worst_index, *blocks)
    if instrument is not None:
        _check_schedules(result, instrument, problem, backward)
    if result.failing or result.schedule_violations:
        result.status = "fail"
    return result


def _check_schedules(result: CaseResult, instrument: dict, problem: JaggedProblem, backward: bool) -> None:
    """Scheduler invariants of an instrumented run, and per-pass load statistics for the report."""
    from .invariants import check_instrumented_run

    passes = ("fwd", "dq", "dkdv") if backward else ("fwd",)
    result.schedule_violations = [str(v) for v in check_instrumented_run(instrument, problem, passes=passes)]
    for kind in passes:
        plan = instrument["plans"][kind]
        schedule = getattr(plan, "schedule", None)
        if schedule is not None:
            result.schedule_stats[kind] = {
                "scheduler": schedule.name, "programs": schedule.num_sms, "tiles": schedule.num_tiles,
                "imbalance": schedule.imbalance, "max_load": schedule.max_load, "bound": schedule.bound,
            }
