"""The differential runner: one case through a kernel and both oracles, judged per output.

Data flows one way: :class:`~jfa_verify.cases.case.Case` -> tensors -> validated
:class:`~jfa_verify.core.contract.JaggedProblem` (once) -> kernel run
(:class:`~jfa_verify.protocol.kernel.KernelRun`) and references -> output contract and
:class:`~jfa_verify.judge.compare.OutputComparison` per output -> :class:`CaseResult`
(the verdict).
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Optional

import torch

from jfa_verify.cases.case import Case
from jfa_verify.core.contract import JaggedProblem, output_violations
from jfa_verify.core.conventions import normalized
from jfa_verify.core.device import as_device
from jfa_verify.core.errors import InvalidInput, KernelConfigError, KernelUnavailable, UnsupportedCase
from jfa_verify.judge.budgets import default_table, precision_of
from jfa_verify.judge.compare import OUTPUTS, OutputComparison, compare_output, reference_scales
from jfa_verify.judge.findings import Finding, explain_findings, messages, part_finding, sequence_finding
from jfa_verify.judge.hints import hint
from jfa_verify.judge.immutability import changed_inputs, copy_keeping_strides, snapshot
from jfa_verify.judge.localize import Location, locate, spread
from jfa_verify.judge.packing import judge_parts, judge_sequences, pack_failures_line
from jfa_verify.oracles import padded_sdpa_attention, reference_attention
from jfa_verify.protocol.kernel import PASSES, Kernel, KernelRun
from jfa_verify.run.settings import RunSettings

__all__ = ["CaseResult", "FAILING_STATUSES", "KernelCall", "STATUSES", "call_kernel", "judge_outputs", "judged_status",
           "not_judged", "ran_out_of_memory", "run_case", "poisoned_allocations", "skipped_lines",
           "unsupported_reasons"]

# Every verdict a case can get. "crash" and "hang" come from an isolated run
# (jfa_verify.run.isolation): the worker process died, or ran past the timeout and was killed.
STATUSES = ("pass", "fail", "error", "crash", "hang", "unsupported")
FAILING_STATUSES = ("fail", "error", "crash", "hang")


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    # torch.use_deterministic_algorithms also mirrors the flag into torch._inductor's config, importing
    # inductor and dynamo on first use (2.7 s per process with torch 2.13 on a CPU, paid by every
    # subprocess that runs a case); unless inductor is already loaded, set the flag itself.
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None or "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


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
    _set_deterministic(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        yield None
    finally:
        det.fill_uninitialized_memory = was_fill
        _set_deterministic(was_on, warn_only=was_warn)


@dataclass
class CaseResult:
    """Everything known about one case after a run.

    ``status``: ``"pass"``, ``"fail"`` (an output outside its allowance,
    non-finite, or breaking the output contract; a scheduler invariant broken),
    ``"error"`` (the kernel raised), ``"crash"`` (the kernel killed its worker process:
    abort, segfault, a sticky CUDA error such as an illegal address), ``"hang"`` (no verdict
    within the timeout; the worker was killed) or ``"unsupported"`` (outside the kernel's
    declared capabilities; not a failure). Older case files call a hang ``"timeout"``
    (:func:`jfa_verify.run.corpus.read_case_file` reads it as ``"hang"``). ``block_sizes``: the tiles the kernel
    ran, ``(BLOCK_M, BLOCK_N)``, None when it declares none. ``notes``: what was
    not checked and why (a backward the kernel lacks), and declared conventions.
    ``conventions``: the kernel's declared conventions (:mod:`jfa_verify.core.conventions`) that explain
    every failing output; ``accepted``: the user accepted all of them (``--accept``), so the status
    is ``"pass"`` but the finding is still shown. ``findings``: everything found besides the outputs'
    comparisons (:class:`~jfa_verify.judge.findings.Finding`: the output contract, guard bands, scheduler
    invariants, packed parts failing on their own rows); :meth:`findings_of` picks one kind.
    """

    case: Case
    kernel: str
    status: str
    comparisons: list[OutputComparison] = field(default_factory=list)
    locations: dict[str, Location] = field(default_factory=dict)
    spreads: dict[str, str] = field(default_factory=dict)  # failing output -> its wrong heads and sequences
    hints: dict[str, str] = field(default_factory=dict)  # failing output -> the classic mistake it looks like
    message: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    block_sizes: Optional[tuple[int, int]] = None
    reproducer: Optional[str] = None
    findings: list[Finding] = field(default_factory=list)
    schedule_stats: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    plugins: tuple[str, ...] = ()
    conventions: list[str] = field(default_factory=list)
    accepted: bool = False
    memory: Optional[str] = None  # the memory mode it ran under (guard bands and that fill), if any
    parts_judged: bool = False  # a packed case judged per part (jfa_verify.judge.packing.judge_parts)
    # most device memory the case held at once, MiB (torch's allocator: the kernel's call, the references, the judging),
    # measured by an isolated worker on CUDA; None elsewhere
    peak_device_mib: Optional[float] = None

    def findings_of(self, kind: str) -> list[str]:
        """The messages of this run's findings of ``kind`` (a key of :data:`jfa_verify.judge.findings.KINDS`)."""
        return messages(self.findings, kind)

    @property
    def part_failures(self) -> Optional[list[list[str]]]:
        """Each part's failing outputs when the packed case was judged per part (None otherwise)."""
        if not self.parts_judged:
            return None
        failing = {f.part: list(f.outputs) for f in self.findings if f.kind == "part"}
        return [failing.get(i, []) for i in range(len(self.case.parts or ()))]

    @property
    def failed(self) -> bool:
        return self.status in FAILING_STATUSES

    @property
    def unjudged(self) -> bool:
        """An ``"error"`` of jfa-verify's own work on the case (:func:`not_judged`), not of the kernel."""
        return is_unjudged(self.status, self.message)

    @property
    def failing(self) -> list[OutputComparison]:
        return [c for c in self.comparisons if not c.passed]

    @property
    def worst(self) -> Optional[OutputComparison]:
        """The comparison with the largest headroom (error / allowance)."""
        return max(self.comparisons, key=lambda c: c.headroom, default=None)

    def replay_command(self) -> str:
        """The command that replays this case as printed: the reproducer (or the case inline), the kernel,
        and every ``--plugin`` the kernel needs (:func:`replay_command`)."""
        from jfa_verify.run.corpus import HANG_REPLAY_S, replay_command, replay_timeout

        inline_death = self.reproducer is None and self.status in ("crash", "hang")
        return replay_command(self.reproducer or self.case, self.kernel, self.plugins, self.memory,
                              replay_timeout({"status": self.status, "verdict": {"seconds": self.seconds}}) or
                              HANG_REPLAY_S if inline_death else None)

    def explain(self) -> str:
        """A multi-line verdict: every failing output with its location, then the replay command."""
        head = (f"[{self.status.upper()}] {self.case.name or self.case.case_id()}: {self.case.describe()} "
                f"on {self.kernel}")
        lines = [head]
        if self.status == "error":  # (jfa-verify's own failure is not the kernel's: "not judged: <stage> failed")
            lines.append(f"  {self.message}" if self.unjudged else f"  kernel raised: {self.message}")
        elif self.status in ("crash", "hang"):
            lines.append(f"  {self.status}: {self.message}")
        elif self.status == "unsupported" and self.message:
            lines.append(f"  {self.message}")
        lines += explain_findings(self.findings)
        if self.conventions:
            names = ", ".join(self.conventions)
            lines.append(f"  accepted convention (--accept {names}): the failures below are the kernel's declared "
                         f"convention" if self.accepted else
                         f"  explained by the kernel's declared convention {names}; still a finding "
                         f"(pass --accept {names} to accept it knowingly)")
        packed = pack_failures_line(self)
        if packed:
            lines.append(packed)
        for c in self.failing:
            where = self.locations.get(c.name)
            what = c.problem or f"max abs error {c.kernel_error:.3g} > allowance {c.allowance:.3g}"
            lines.append(f"  {c.name}: {what} (SDPA same-dtype error {c.sdpa_error:.3g})")
            if where is not None:
                lines.append(
                    f"      worst at {where.describe()}: kernel {c.kernel_value!r}, reference {c.reference_value!r}"
                )
            if c.name in self.spreads:
                lines.append(f"      {self.spreads[c.name]}")
            if c.name in self.hints:
                lines.append(f"      hint: {self.hints[c.name]}")
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
            "block_sizes": list(self.block_sizes) if self.block_sizes else None,
            "reproducer": self.reproducer,
            "replay": self.replay_command(),
            "findings": [f.to_dict() for f in self.findings],
            "schedule": self.schedule_stats,
            "notes": self.notes,
            "conventions": self.conventions,
            "accepted": self.accepted,
            "parts_judged": self.parts_judged,
            "peak_device_mib": self.peak_device_mib,
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
                    "spread": self.spreads.get(c.name),
                    "hint": self.hints.get(c.name),
                }
                for c in self.comparisons
            },
        }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# Messages of CUDA errors after which the process's context is unusable (every later call fails).
_STICKY = re.compile(r"illegal memory access|illegal address|misaligned address|unspecified launch failure|"
                     r"device-side assert|CUDA_ERROR_ILLEGAL|an illegal instruction", re.IGNORECASE)


def sticky_device_error(message: str) -> bool:
    """True when ``message`` (a kernel exception's text) is a CUDA error that poisons the process."""
    return bool(_STICKY.search(message or ""))


def _device_fault(detail: str, device: torch.device) -> Optional[str]:
    """Why a kernel's exception is not a clean rejection of offsets outside the contract (which the contract allows),
    or None when it is one: a device fault, which a rejection raised in place of a launch cannot be, or a device that
    fails after it (a launch that faulted before the host code raised shows at the next synchronize: its text is
    returned, so that a worker that saw it is restarted). A kernel that reads strided offsets out of bounds must not
    pass as one that refused them."""
    if sticky_device_error(detail):
        return detail
    try:
        _sync(device)
    except Exception as fault:
        return f"{type(fault).__name__}: {fault}".strip()
    return None


def _traceback_tail(e: BaseException) -> str:
    """The last lines of ``e``'s traceback: where it was raised, for a verdict's message."""
    return "".join(traceback.format_exception(e)[-3:]).rstrip()


_OUT_OF_MEMORY = "[out of device memory"


def _out_of_memory_hint(e: BaseException) -> str:
    if isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower():
        return (f" {_OUT_OF_MEMORY}: other processes on the card, or a case too large for it; replay the case "
                "alone to tell which]")
    return ""


def unsupported_reasons(results) -> dict[str, int]:
    """``{reason: cases}`` of the results whose kernel declared the case unsupported, most cases first: the cases a
    run did not check, which every report of it names (``run``'s lines, the gate's reports)."""
    from collections import Counter

    return dict(Counter(r.message for r in results if r.status == "unsupported").most_common())


def skipped_lines(reasons: dict[str, int]) -> list[str]:
    """One line per reason of :func:`unsupported_reasons`, as every command prints it."""
    return [f"skipped {n} case(s) the kernel declared unsupported: {why}" for why, n in reasons.items()]


def forward_only_lines(results) -> list[str]:
    """One line per reason the backward was not judged on checked cases (their ``"forward only: ..."`` note), most
    cases first: a run that printed "3 passed" for a forward-only kernel never said dQ, dK, dV went unchecked."""
    from collections import Counter

    reasons = Counter(n[len("forward only: "):] for r in results if r.status != "unsupported"
                      for n in r.notes if n.startswith("forward only: "))
    return [f"judged forward only (O, LSE; dQ, dK, dV not checked) in {n} case(s): {why}"
            for why, n in reasons.most_common()]


def judged_status(result: CaseResult) -> str:
    """The status a judged run earns (the one rule): ``"fail"`` when an output is outside its allowance or the run
    has any finding, else ``"pass"``."""
    return "fail" if result.failing or result.findings else "pass"


def is_unjudged(status: str, message: str) -> bool:
    """Whether a case's ``status`` and ``message`` (a result's, or a report's case entry's) say it has no
    verdict: an ``"error"`` of jfa-verify's own work (:func:`not_judged`), not of the kernel."""
    return status == "error" and (message or "").startswith(_NOT_JUDGED)


def _broadcast_q_hint(case: Case, e: BaseException) -> str:
    """For a kernel that raised on a broadcast-Q case as code written for packed Q does on ``q_offsets=None`` (an
    ``AttributeError`` or ``TypeError`` naming ``NoneType``): what that mode is, and how a kernel that does not take it
    says so (``Capabilities.modes`` takes broadcast-Q by default; a new user's kernel raised ``AttributeError:
    'NoneType' object has no attribute 'tolist'`` with no word on why). Other raises get no hint: a kernel without
    fp16 was told of broadcast-Q on its fp16 broadcast-Q cases (helper-69)."""
    if case.mode != "broadcast_q" or not (isinstance(e, (AttributeError, TypeError)) and "NoneType" in str(e)):
        return ""
    return (" [a broadcast-Q case: q_offsets=None, one dense Q of L_Q rows for every sequence; a kernel that does "
            "not take it declares Capabilities(modes=('self', 'cross'))]")


def ran_out_of_memory(message: str) -> bool:
    """True when a verdict's ``message`` says the device ran out of memory (in the kernel's call or in
    jfa-verify's own work on the case): a verdict that may say more of the card's load than of the kernel."""
    return _OUT_OF_MEMORY in (message or "")


_NOT_JUDGED = "not judged"


def not_judged(result: CaseResult, stage: str, e: Exception) -> CaseResult:
    """``result`` as an ``"error"`` whose message says that jfa-verify's own ``stage`` failed (not the kernel's
    call), with the exception and where it was raised: a worker must not die of it, nor lose its traceback
    (a sticky device error in it still ends an isolated worker, as a crash)."""
    result.status = "error"
    result.message = (f"{_NOT_JUDGED}: {stage} failed{_out_of_memory_hint(e)}: {type(e).__name__}: {e}".strip() + "\n"
                      + _traceback_tail(e))
    return result


@dataclass
class KernelCall:
    """One call of a kernel on a case, unjudged: its run, its outputs (``o``, ``lse``, and ``dq``/``dk``/``dv``
    after a backward), the guard bands it wrote (tracked memory only) and how it changed its inputs.
    ``unreached``: the gradients (of ``dq``, ``dk``, ``dv``) that O's backward never reached (``.grad`` None: the
    kernel detached that input); each is in ``outputs`` as zeros, the gradient the call gives it."""

    run: KernelRun
    outputs: dict
    memory_violations: list[str]
    input_changes: list[str]
    unreached: list[str] = field(default_factory=list)


class KernelExited(RuntimeError):
    """The kernel under test called ``sys.exit`` (raised ``SystemExit``) during its call: an error of the kernel's,
    judged as any exception it raises (in this process, a ``SystemExit`` let through would end the command with
    the kernel's code: ``sys.exit(0)`` was a silent green run)."""


@contextlib.contextmanager
def _exit_is_an_error():
    try:
        yield
    except SystemExit as e:
        raise KernelExited(f"the kernel called sys.exit({e.code!r}) during its call: a kernel returns its outputs "
                           "or raises") from None


def call_kernel(kernel: Kernel, problem: JaggedProblem, tensors, case: Case, *, backward: bool,
                instrument: bool = False, memory: Optional[str] = None) -> KernelCall:
    """The kernel's forward (and backward) on fresh leaf copies of the inputs (same strides). No backward when the
    outputs break the output contract (:func:`~jfa_verify.core.contract.output_violations`): no gradients then.

    ``memory`` None: allocations read NaN (:func:`poisoned_allocations`); ``"nan"`` or ``"large"``:
    every allocation gets guard bands and that fill (:func:`jfa_verify.judge.memory.tracked_allocations`).
    The inputs are compared bit for bit before and after (:mod:`jfa_verify.judge.immutability`).
    """
    from jfa_verify.judge.memory import tracked_allocations

    q, k, v = (copy_keeping_strides(t).requires_grad_(backward) for t in (tensors.q, tensors.k, tensors.v))
    inputs = dict(q=q, k=k, v=v, q_offsets=tensors.q_offsets, k_offsets=tensors.k_offsets, do=tensors.do)
    # the tensors a block-sparse or MXFP8 call also hands the kernel (Kernel.run passes these very objects)
    selection = problem.block_selection.source if problem.block_selection is not None else None
    if selection is not None:
        inputs.update({"block_selection.offsets": selection.offsets, "block_selection.indices": selection.indices})
    if problem.block_scales is not None:
        inputs.update({f"block_scales.{name}": getattr(problem.block_scales, name) for name in ("q", "k", "v")})
    before = snapshot(inputs)
    unreached: list[str] = []
    block = poisoned_allocations() if memory is None else tracked_allocations(fill=memory)
    with block as log, _exit_is_an_error():
        run = kernel.run(problem, q, k, v, tensors.q_offsets, tensors.k_offsets, sm_scale=case.sm_scale,
                         instrument=instrument)
        got = {"o": run.o.detach() if isinstance(run.o, torch.Tensor) else run.o}
        if run.lse is not None:
            got["lse"] = run.lse.detach() if isinstance(run.lse, torch.Tensor) else run.lse
        # Not on outputs that break the contract (a wrong shape or device): the autograd error would stand for the
        # contract finding the caller names (issue 43, 4: o[:, :, :-1] surfaced as an autograd traceback)
        if backward and isinstance(run.o, torch.Tensor) and run.o.requires_grad \
                and not output_violations(problem, got["o"], got.get("lse")):
            try:
                run.o.backward(tensors.do)
            except RuntimeError:
                # autograd refuses a backward through an input the kernel wrote into in place (its version changed
                # under the saved tensor): that write is the finding, judged as the caller judges changed inputs,
                # not "kernel raised" (a new user's planted q.add_(1) was reported as autograd's error alone)
                if not changed_inputs(before, inputs):
                    raise
            else:
                # (a None gradient crashed the judging, reported as "kernel raised ... not judged": a new user's trial)
                grads = dict(dq=(q, q.grad), dk=(k, k.grad), dv=(v, v.grad))
                unreached = [name for name, (_, grad) in grads.items() if grad is None]
                got.update({name: torch.zeros_like(x) if grad is None else grad for name, (x, grad) in grads.items()})
    return KernelCall(run, got, [] if log is None else log.violations(got), changed_inputs(before, inputs),
                      unreached)


def _as_kernel(kernel: "Kernel | str") -> Kernel:
    """``kernel``, or the registered kernel of that name."""
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, str):
        from jfa_verify.protocol.registry import get_kernel

        return get_kernel(kernel)
    raise InvalidInput(f"kernel={kernel!r} is a {type(kernel).__name__}: give a registered kernel's name or a "
                       f"jfa_verify.Kernel (jfa_verify.get_kernel(name))")


def run_case(case: Case, kernel: "Kernel | str", device: "torch.device | str" = "cpu",
             settings: Optional[RunSettings] = None, *, instrument: bool = True, tensors=None) -> CaseResult:
    """Run ``case`` through ``kernel`` (a registered :class:`~jfa_verify.protocol.kernel.Kernel`) and both oracles.

    Args:
        case: the case. kernel: the kernel under test, or its registered name. device: where the tensors live
            (``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a :class:`torch.device`).
        settings: how the case is run and judged (:class:`~jfa_verify.run.settings.RunSettings`; None: the
            defaults). Of it one case run in this process reads ``backward`` (judge dQ, dK, dV too, when the
            kernel has a backward for this case), ``budgets`` (the :class:`jfa_verify.judge.budgets.BudgetTable`
            to judge by, default the packaged table; a kernel declaring ``tf32`` is judged by the
            ``float32-tf32`` row), ``plugins`` (the files the kernel came from, named in the replay command),
            ``memory`` (None: allocations read NaN; ``"nan"``/``"large"``: guard bands around every allocation,
            a write outside being a failure naming the buffer and offset, and that fill of uninitialized memory,
            ``"large"`` recycled memory holding large finite values) and ``accept`` (the kernel's declared
            conventions the user accepts: a case whose every failure one of them explains passes, marked
            ``accepted``; see :mod:`jfa_verify.core.conventions`).
        instrument: ask an instrumented kernel for its launch plan and tile visits and check the
            scheduler invariants (calibration turns it off: it measures numerics only); a case with
            ``instrument=False`` runs the production launch whatever this says.
        tensors: ``case.materialize(device)`` already made (several kernels judged on one huge
            case); None to materialize here.

    Returns a :class:`CaseResult`. Kernel exceptions become ``status="error"``
    with the traceback's last lines; they are never raised from here, so one bad
    case cannot stop a suite. A failure of jfa-verify's own work on the case (materializing it, the
    references, the judging: out of device memory, say) is an ``"error"`` whose message starts
    ``not judged:`` and names the stage (:func:`not_judged`). Invalid cases raise :class:`InvalidInput` when
    the case is built, before this is called. A case whose offsets are outside
    the contract (``offsets_layout="strided"``) passes when the kernel rejects it
    (raises, leaving the device working: a CUDA fault is an error, as on any case) or computes the right result.
    A kernel that cannot be loaded here (:class:`KernelUnavailable`) or raises :class:`UnsupportedCase` is
    ``"unsupported"`` with its reason: declared, not a finding. A kernel whose ``load()`` returns no implementation
    raises :class:`KernelConfigError` from here: a configuration error, not a verdict. A name no kernel is registered
    under raises :class:`~jfa_verify.core.errors.UnknownKernel`; a device that is not one, :class:`InvalidInput`
    naming it and the fix.
    """
    settings = settings or RunSettings()
    backward, budgets, plugins = settings.backward, settings.budgets, settings.plugins
    memory, accept = settings.memory, settings.accept
    kernel = _as_kernel(kernel)
    device = as_device(device)
    t_start = time.perf_counter()
    try:
        tensors = case.materialize(device) if tensors is None else tensors
    except InvalidInput:
        raise
    except Exception as e:  # out of memory, or a sticky device error a kernel left behind
        return not_judged(CaseResult(case, kernel.name, "error", memory=memory, plugins=tuple(plugins)),
                           "materializing the case's tensors", e)
    t_made = time.perf_counter()
    problem = case.problem(tensors)  # the one validation; kernel adapter and oracles share it
    try:
        tiles = kernel.tile_sizes(problem)  # the kernel's own code
    except (KernelUnavailable, UnsupportedCase) as e:
        return CaseResult(case, kernel.name, "unsupported", message=f"kernel {kernel.name!r}: {type(e).__name__}: {e}",
                          memory=memory, plugins=tuple(plugins))
    except Exception as e:
        return CaseResult(case, kernel.name, "error", memory=memory, plugins=tuple(plugins),
                          message=f"{type(e).__name__}: {e} (in the kernel's tile_sizes)\n"
                                  + _traceback_tail(e))
    t_valid = time.perf_counter()
    result = CaseResult(case, kernel.name, "pass", block_sizes=tiles.as_tuple() if tiles else None, memory=memory,
                        plugins=tuple(plugins), seconds={"materialize": t_made - t_start, "validate": t_valid - t_made})
    reason = kernel.unsupported_reason(problem)
    if reason is not None:
        result.status, result.message = "unsupported", f"kernel {kernel.name!r} does not support this case: {reason}"
        return result
    no_backward = kernel.capabilities.backward_reason(problem) if backward else None
    if no_backward:
        result.notes.append(f"forward only: {no_backward}")
    backward = backward and no_backward is None
    if kernel.capabilities.lse_base == "2":
        result.notes.append("LSE returned in base 2 (declared); converted to natural log before judging")
    instrument = instrument and case.instrument and kernel.capabilities.instrumented
    t0 = time.perf_counter()
    try:
        call = call_kernel(kernel, problem, tensors, case, backward=backward, instrument=instrument, memory=memory)
        run, got, changed, unreached = call.run, call.outputs, call.input_changes, call.unreached
        result.findings += [Finding("memory", m) for m in call.memory_violations]
        _sync(device)
    except (KernelUnavailable, UnsupportedCase) as e:
        result.status, result.message = "unsupported", f"kernel {kernel.name!r}: {type(e).__name__}: {e}"
        return result
    except KernelConfigError:  # a registration mistake (load() gave no implementation): no verdict at all
        raise
    except Exception as e:  # the kernel under test may fail in any way
        result.seconds["kernel"] = time.perf_counter() - t0
        detail = f"{type(e).__name__}: {e}".strip()
        if case.offsets_layout != "contiguous":
            fault = _device_fault(detail, device)
            if fault is None:
                result.message = f"kernel rejected offsets outside the contract ({case.offsets_layout}): {detail}"
                return result
            if fault != detail:
                detail += f"; then the device failed: {fault}"
        result.status = "error"
        result.message = detail + _out_of_memory_hint(e) + _broadcast_q_hint(case, e) + "\n" + _traceback_tail(e)
        return result
    t1 = time.perf_counter()
    result.findings += [Finding("contract", m) for m in output_violations(problem, got["o"], got.get("lse")) + changed]
    detached = backward and isinstance(run.o, torch.Tensor) and not run.o.requires_grad
    if result.findings_of("contract"):
        result.status = judged_status(result)
        result.seconds["kernel"] = t1 - t0
        return result
    if run.plan is not None:
        tiles = run.plan.tiles  # the tiles the kernel says it ran
        result.block_sizes = tiles.as_tuple()
    do = tensors.do if backward else None
    result.seconds["kernel"] = t1 - t0
    stage = "the references (float64 and padded SDPA)"
    try:  # the verifier's own work from here: a failure in it is no verdict on the kernel's outputs
        by_sequence = case.parts is not None or case.block_scaling is not None  # (judged per part or per sequence)
        ref = reference_attention(problem, tensors.q, tensors.k, tensors.v, do=do, by_sequence=by_sequence)
        _sync(device)
        t_ref = time.perf_counter()
        result.seconds["reference"] = t_ref - t1  # the float64 reference; "sdpa" the same-dtype oracle
        sdpa = padded_sdpa_attention(problem, tensors.q, tensors.k, tensors.v, do=do)
        _sync(device)
        t2 = time.perf_counter()
        result.seconds["sdpa"] = t2 - t_ref
        stage = "judging the outputs"
        explained_outputs = _compare_outputs(result, problem, got, ref, sdpa, kernel, budgets, tiles)
        parts_explained = True  # every part's own failure explained by the conventions that explain the pack's
        sequence_failures = judge_sequences(case, got, ref, sdpa, budgets=budgets)
        result.findings += [sequence_finding(i, failing) for i, failing in enumerate(sequence_failures) if failing]
        if case.parts is not None:  # each part judged as it would be standing alone
            t_parts = time.perf_counter()
            part_failures = judge_parts(case, got, ref, sdpa, budgets=budgets, tf32=kernel.capabilities.tf32)
            result.parts_judged = True
            result.findings += [part_finding(i, failing) for i, failing in enumerate(part_failures) if failing]
            if any(part_failures):
                # (the pack's own allowance is its largest part's: a part's failure of another output, or one its
                # rows show only against its own allowance, is no failure a convention of the pack's explains)
                fixed = dict(got)
                for name in (n for n in OUTPUTS if n in got and n in ref):
                    for convention in result.conventions:
                        for _, out in normalized((convention,), name, fixed[name], ref[name]):
                            fixed[name] = out
                parts_explained = not any(judge_parts(case, fixed, ref, sdpa, budgets=budgets,
                                                      tf32=kernel.capabilities.tf32))
            result.seconds["parts"] = time.perf_counter() - t_parts
        if detached and any(g in ref and bool(ref[g].ne(0).any()) for g in ("dq", "dk", "dv")):
            # (a new user's kernel returning o.detach() passed 99 cases with its gradients never judged; an O that
            # no gradient can reach is right only where every true gradient is zero: no sequence with a score)
            result.findings.append(Finding("contract",
                "o does not require grad, so no gradient reaches q, k, v, and theirs are not all zero: the kernel "
                "declares a backward (Capabilities.backward); return O attached to q, k, v (not detached, not "
                "computed under torch.no_grad), or register the kernel with backward=False"))
        wrong_zero = [g for g in unreached if g in ref and bool(ref[g].ne(0).any())]
        if wrong_zero:
            result.findings.append(Finding("contract",
                f"no gradient reaches {', '.join(g[1] for g in wrong_zero)} (.grad is None after O's backward), and "
                f"the true {', '.join(wrong_zero)} are not all zero: the kernel declares a backward "
                f"(Capabilities.backward); keep O attached to every input (no .detach() or torch.no_grad on the path "
                f"from q, k and v to O), or register the kernel with backward=False"))
        t3 = time.perf_counter()
        # "compare": the launch's outputs judged and localized; "parts": a packed launch's parts judged apart
        result.seconds["compare"] = t3 - t2 - result.seconds.get("parts", 0.0)
        if run.plan is not None:  # visits None: a kernel that records none has its plan judged alone
            stage = "checking the scheduler invariants"
            _check_schedules(result, run, backward)
            result.seconds["invariants"] = time.perf_counter() - t3
        _sync(device)  # the judging's own device work: an error in it shows in this case, not in the next one
    except Exception as e:
        return not_judged(result, stage, e)
    return _settle(result, explained_outputs, parts_explained, accept)


def _settle(result: CaseResult, explained_outputs: list[bool], parts_explained: bool, accept) -> CaseResult:
    """``result``'s status from its comparisons and findings (:func:`judged_status`), then the declared
    conventions: kept only where they explain every failure, and a pass (marked accepted) where the user accepts
    them all."""
    result.status = judged_status(result)
    if not all(explained_outputs) or any(f.kind != "part" for f in result.findings) or not parts_explained:
        result.conventions = []  # a failure no declared convention explains: the whole case is a plain finding
    elif result.conventions and set(result.conventions) <= set(accept):
        result.status, result.accepted = "pass", True
        result.notes.append(f"accepted convention(s) {', '.join(result.conventions)} (--accept): "
                            f"{len(result.failing)} output(s) differ from the contract as the kernel declares")
    return result


def judge_outputs(case: Case, kernel: Kernel, problem: JaggedProblem, got: dict, ref: dict, sdpa: dict,
                  settings: Optional[RunSettings] = None, *, tiles=None) -> CaseResult:
    """Judge outputs of one kernel call already made (``got``: :attr:`KernelCall.outputs`) against references
    already computed, as :func:`run_case` judges its own call: the output contract, then each output against
    ``ref`` (:func:`~jfa_verify.oracles.reference_attention` of ``problem``'s tensors) within the budget that
    ``sdpa`` (:func:`~jfa_verify.oracles.padded_sdpa_attention`) calibrates, then the kernel's declared conventions.
    For many calls of one case (reruns) with the references made once; a packed case's parts are not judged
    apart here (use :func:`run_case`).

    Args:
        case, kernel, problem: the case, the kernel that made ``got`` and the validated problem.
        got, ref, sdpa: dicts of tensors by output name (``o``, ``lse``, ``dq``, ``dk``, ``dv``).
        settings: ``budgets`` and ``accept`` are read (None: the defaults).
        tiles: the kernel's tiles for ``problem`` (localization); None: ``kernel.tile_sizes(problem)``.

    Returns a :class:`CaseResult` with status ``"pass"`` or ``"fail"``.
    """
    settings = settings or RunSettings()
    tiles = kernel.tile_sizes(problem) if tiles is None else tiles
    result = CaseResult(case, kernel.name, "pass", block_sizes=tiles.as_tuple() if tiles else None,
                        plugins=tuple(settings.plugins))
    result.findings += [Finding("contract", m) for m in output_violations(problem, got["o"], got.get("lse"))]
    if result.findings:
        result.status = judged_status(result)
        return result
    explained = _compare_outputs(result, problem, got, ref, sdpa, kernel, settings.budgets, tiles)
    return _settle(result, explained, True, settings.accept)


# Outputs past this many elements get no spread (:func:`~jfa_verify.judge.localize.spread` holds a few float64 copies: a
# 2^31-element case's would not fit beside its references on an H200).
SPREAD_MAX_ELEMENTS = 1 << 27


def _compare_outputs(result: CaseResult, problem: JaggedProblem, got: dict, ref: dict, sdpa: dict, kernel: Kernel,
                     budgets, tiles) -> list[bool]:
    """Judge each output the kernel returned against the references (into ``result``); returns, per failing
    output, whether a convention the kernel declares explains it."""
    case = result.case
    row = precision_of(case.torch_dtype, tf32=kernel.capabilities.tf32, block_scaled=problem.block_scales is not None)
    table = budgets or default_table()
    explained_outputs: list[bool] = []
    for out_name in OUTPUTS:
        if out_name not in ref or out_name not in got:
            continue
        judge = lambda x: compare_output(out_name, x, sdpa[out_name], ref[out_name], case.torch_dtype,  # noqa: E731
                                         *reference_scales(ref, out_name), budget=table.budget(row, out_name),
                                         precision=row)
        cmp = judge(got[out_name])
        if not cmp.passed:
            explained = [n for n, fixed in normalized(kernel.capabilities.conventions, out_name, got[out_name],
                                                      ref[out_name]) if judge(fixed).passed]
            result.conventions += [n for n in explained if n not in result.conventions]
            explained_outputs.append(bool(explained))
        result.comparisons.append(cmp)
        if cmp.worst_index is not None:
            result.locations[out_name] = locate(problem, out_name, cmp.worst_index, tiles)
        if (not cmp.passed and isinstance(got[out_name], torch.Tensor) and got[out_name].shape == ref[out_name].shape
                and got[out_name].numel() <= SPREAD_MAX_ELEMENTS):
            where = spread(problem, out_name, got[out_name], ref[out_name], cmp.allowance)
            if where:
                result.spreads[out_name] = where
            why = hint(out_name, got[out_name], ref[out_name], cmp.allowance)
            if why:
                result.hints[out_name] = why
    return explained_outputs


def _check_schedules(result: CaseResult, run: KernelRun, backward: bool) -> None:
    """Scheduler invariants of an instrumented run, and per-pass load statistics for the report."""
    from jfa_verify.scheduling.invariants import check_instrumented_run

    passes = PASSES if backward else ("fwd",)
    result.findings += [Finding("schedule", str(v))
                        for v in check_instrumented_run(run.plan, run.visits, passes=passes)]
    for kind in passes:
        schedule = run.plan.passes[kind].schedule
        if schedule is not None:
            result.schedule_stats[kind] = {
                "scheduler": schedule.name, "programs": schedule.num_sms, "tiles": schedule.num_tiles,
                "imbalance": schedule.imbalance, "max_load": schedule.max_load, "bound": schedule.bound,
            }
