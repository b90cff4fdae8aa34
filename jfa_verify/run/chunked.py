"""A huge case (past 2^31 elements) through a kernel, forward and backward, judged on chunks.

:func:`jfa_verify.run.runner.run_case` judges every output against a float64 reference of the whole buffer, which a
2^31-element case's backward does not leave room for. :func:`run_chunked` calls the kernel the same way
(:func:`~jfa_verify.run.runner.call_kernel`, backward included), then judges O, LSE, dQ, dK and dV only on the
sequences an int32 index overflow can reach plus a sample elsewhere
(:func:`~jfa_verify.oracles.chunked.reachable_sequences`), each sequence in KV-head chunks
(:func:`~jfa_verify.oracles.chunked.chunked_reference`, :func:`~jfa_verify.judge.chunks.judge_chunks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from jfa_verify.cases.case import Case
from jfa_verify.judge.chunks import ChunkComparison, judge_chunks
from jfa_verify.oracles.chunked import INT32_ELEMENTS, chunked_reference, reachable_sequences
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.run.runner import call_kernel
from jfa_verify.run.settings import RunSettings

__all__ = ["ChunkedResult", "run_chunked"]


@dataclass
class ChunkedResult:
    """``status``: ``pass``, ``fail`` (an output of a chunk outside its allowance), ``error`` (the kernel raised) or
    ``unsupported``; ``sequences``: the sequences judged; ``comparisons``: one per chunk and output."""

    case: Case
    kernel: str
    status: str
    sequences: list[int] = field(default_factory=list)
    comparisons: list[ChunkComparison] = field(default_factory=list)
    message: str = ""

    def explain(self) -> str:
        failing = [c for c in self.comparisons if not c.passed]
        lines = [f"{self.kernel} on {self.case.name or 'the case'}: {self.status}; sequences judged {self.sequences}, "
                 f"{len(self.comparisons)} chunk output(s), {len(failing)} failing"]
        lines += [f"  {c.describe()}" for c in failing[:12]]
        if self.message:
            lines.append(f"  {self.message}")
        return "\n".join(lines)


def run_chunked(case: Case, kernel: Kernel, device: "torch.device | str", *, tensors=None,
                settings: Optional[RunSettings] = None, backward: bool = True, limit: int = INT32_ELEMENTS,
                sample: int = 2, kv_heads_per_chunk: Optional[int] = None) -> ChunkedResult:
    """Run ``case`` through ``kernel`` (forward, and backward when ``backward`` and the kernel has one) and judge
    its outputs on chunks.

    Args:
        case, kernel, device: as :func:`~jfa_verify.run.runner.run_case` takes them.
        tensors: ``case.materialize(device)`` already made (None: made here).
        settings: ``budgets`` is read (None: the packaged table).
        limit, sample: the sequences judged (:func:`~jfa_verify.oracles.chunked.reachable_sequences`).
        kv_heads_per_chunk: KV heads per chunk (None: one chunk per sequence; fewer heads, less memory).

    Returns a :class:`ChunkedResult`; kernel exceptions become ``status="error"`` (never raised).

    Raises:
        InvalidInput: a broadcast-Q or block-sparse case, or a bad ``limit``, ``sample`` or ``kv_heads_per_chunk``.
    """
    settings = settings or RunSettings()
    device = torch.device(device)
    tensors = case.materialize(device) if tensors is None else tensors
    problem = case.problem(tensors)
    sequences = reachable_sequences(problem, limit=limit, sample=sample)
    result = ChunkedResult(case, kernel.name, "pass", sequences)
    reason = kernel.unsupported_reason(problem)
    if reason is not None:
        result.status, result.message = "unsupported", reason
        return result
    backward = backward and kernel.capabilities.backward_reason(problem) is None
    try:
        got = call_kernel(kernel, problem, tensors, case, backward=backward).outputs
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as e:  # the kernel under test may fail in any way
        result.status, result.message = "error", f"{type(e).__name__}: {e}"
        return result
    got = {n: t.detach() for n, t in got.items() if isinstance(t, torch.Tensor)}
    chunks = chunked_reference(problem, tensors.q, tensors.k, tensors.v, tensors.do if backward else None, sequences,
                               kv_heads_per_chunk=kv_heads_per_chunk, with_sdpa=True)
    result.comparisons = judge_chunks(chunks, got, case.torch_dtype, budgets=settings.budgets,
                                      tf32=kernel.capabilities.tf32, tiles=kernel.tile_sizes(problem))
    if any(not c.passed for c in result.comparisons):
        result.status = "fail"
    return result
