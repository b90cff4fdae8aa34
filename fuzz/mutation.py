"""Mutation testing: run the CI profile against each planted-bug kernel and collect a kill table.

Per mutant (see ``tests/quality/mutants.py``): first a fixed, cheap, targeted
set of cases (tile boundaries +-1, empty sequences, both causal alignments with
L_q != L_k, GQA, broadcast-Q, int64 offsets with offsets_start > 0, strided
layout), stopping at the first failure; then, if the
mutant survived them, a short Hypothesis campaign (:func:`fuzz.campaign.run_campaign`,
corpus in a temporary folder) with shrinking. A mutant is *killed* when a case
fails (an output outside its allowance, a non-finite output, a scheduler
invariant violation) or errors.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

from jfa_verify.case import Case
from jfa_verify.coverage import classify

__all__ = ["MutantResult", "targeted_cases", "run_mutants", "format_table"]

def targeted_cases(device_type: str = "cpu") -> list[Case]:
    """The fixed cases run against every mutant, cheapest and most discriminating first.

    Lengths are placed at ``triton_jfa``'s tile boundaries +-1 on ``device_type``: on the CPU
    interpreter BLOCK_M=32, BLOCK_N=16 (head dim 16: lengths 15/17/31/33); on CUDA head dim 160,
    whose tiles are BLOCK_M=64, BLOCK_N=32, so that BLOCK_M != BLOCK_N there too and a
    query-tile/key-tile mix-up changes the result.
    """
    from kernels.triton_jfa import block_sizes

    d = 16 if device_type != "cuda" else 160
    bm, bn = block_sizes(d, None, device_type)
    h = dict(num_heads_q=4, num_heads_kv=2, head_dim=d)
    return [
        Case(kv_lengths=(bn + 1, 0, bm + 1, 5), dtype="float32", name="self/gqa/tile-edges/empty", **h),
        Case(kv_lengths=(9, bm + 3, bn + 1), q_lengths=(bn + 4, 3, bm + 8), mode="cross", causal=True,
             causal_alignment="bottom_right", dtype="float32", name="cross/causal-bottom-right", **h),
        Case(kv_lengths=(9, bm + 3, bn + 1), q_lengths=(bn + 4, 3, bm + 8), mode="cross", causal=True,
             causal_alignment="top_left", dtype="float32", name="cross/causal-top-left", **h),
        Case(kv_lengths=(bn + 1, 0, bm + 1), mode="broadcast_q", broadcast_q_len=bm + 8, dtype="float32",
             name="broadcast-q/gqa", **h),
        Case(kv_lengths=(bm + 1, bn - 1, 0, bn + 1), causal=True, offsets_dtype="int64", offsets_start=5,
             layout="strided", dtype="float32", name="self/causal/int64-offsets/start-5/strided", **h),
        Case(kv_lengths=(3, 0, bm - 1), q_lengths=(0, 4, bm + 1), mode="cross", dtype="float32",
             name="cross/zero-length-q-and-k", **h),
    ]


def gpu_only_cases() -> list[Case]:
    """Cases for ``gpu_only`` mutants, run only on CUDA: Q of more than 2^31 elements.

    257 sequences of 4096 tokens, H_q=16, D=128: 2.16e9 Q elements (4 GiB in bf16),
    so a token x stride product past row 1,048,576 no longer fits in int32.
    Not exercised on the CPU interpreter; run forward only (see :func:`run_mutant`).
    """
    return [Case(kv_lengths=(4096,) * 257, num_heads_q=16, num_heads_kv=1, head_dim=128, dtype="bfloat16",
                 name="self/q-over-2^31-elements")]


@dataclass
class MutantResult:
    """The verdict on one mutant."""

    name: str
    description: str
    status: str  # "killed", "survived" or "skipped" (gpu-only on CPU)
    gpu_only: bool = False
    reason: str = ""
    stage: str = ""  # "targeted" or "campaign"
    killing_case: Optional[Case] = None
    killing_status: str = ""  # the failing CaseResult's status: "fail" or "error"
    outputs: list[str] = field(default_factory=list)  # failing outputs ("o", "lse", "dq", "dk", "dv", "schedule", "error")
    input_classes: list[str] = field(default_factory=list)
    seconds_to_failure: Optional[float] = None
    seconds: float = 0.0
    cases_run: int = 0
    reproducer_batch: Optional[int] = None
    reproducer_tokens: Optional[int] = None
    explanation: str = ""

    @property
    def killed(self) -> bool:
        return self.status == "killed"

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "killing_case"}
        d["killing_case"] = self.killing_case.to_dict() if self.killing_case is not None else None
        return d


def _failing_outputs(result) -> list[str]:
    if result.status == "error":
        return ["error"]
    out = [c.name for c in result.failing]
    if result.schedule_violations:
        out.append("schedule")
    return out


def _tokens(case: Case) -> int:
    q = case.broadcast_q_len if case.mode == "broadcast_q" else sum(case.query_lengths)
    return q + sum(case.kv_lengths)


def _record_kill(res: MutantResult, case: Case, result, kernel, device_type: str, stage: str, t0: float) -> None:
    res.status, res.stage, res.killing_case = "killed", stage, case
    res.killing_status = result.status
    res.outputs = _failing_outputs(result)
    blocks = kernel.capabilities.block_sizes(case.head_dim, case.torch_dtype, device_type)
    res.input_classes = sorted(classify(case, blocks))
    res.seconds_to_failure = time.perf_counter() - t0
    res.reproducer_batch, res.reproducer_tokens = case.batch, _tokens(case)
    res.explanation = result.explain()


def run_mutant(name: str, *, device="cpu", max_examples: int = 10, seed: int = 0,
               cases: Optional[Sequence[Case]] = None) -> MutantResult:
    """Targeted cases, then (if it survived) a short shrinking campaign, against mutant ``name``."""
    import torch

    from jfa_verify.device import select_device
    from jfa_verify.runner import run_case
    from tests.quality.mutants import MUTANTS, mutant_kernel

    from .campaign import run_campaign

    mutant = MUTANTS[name]
    dev = select_device(torch.device(device).type)
    res = MutantResult(name, mutant.description, "survived", gpu_only=mutant.gpu_only)
    if mutant.gpu_only and dev.type != "cuda":
        res.status, res.reason = "skipped", f"gpu-only: {mutant.gpu_reason}"
        return res
    kernel = mutant_kernel(name)
    t0 = time.perf_counter()
    if cases is None:
        cases = targeted_cases(dev.type)
        if mutant.gpu_only:
            cases = gpu_only_cases() + cases
    huge = {c.name for c in gpu_only_cases()}
    for case in cases:
        # the 2^31-element case runs forward only: its float64 backward reference needs ~twice the memory
        result = run_case(case, kernel, dev, backward=case.name not in huge)
        res.cases_run += 1
        if result.failed:
            _record_kill(res, case, result, kernel, dev.type, "targeted", t0)
            break
    if not res.killed and max_examples > 0:
        with tempfile.TemporaryDirectory(prefix="jfa-mutation-") as corpus:
            summary = run_campaign(kernel, max_examples=max_examples, corpus_dir=corpus, device=dev, seed=seed)
            res.cases_run += summary.cases_run
            if summary.failures:
                failure = summary.failures[-1]
                result = run_case(failure.case, kernel, dev)  # the shrunk reproducer's verdict
                _record_kill(res, failure.case, result, kernel, dev.type, "campaign", t0)
    res.seconds = time.perf_counter() - t0
    return res


def run_mutants(names: Optional[Sequence[str]] = None, *, device="cpu", max_examples: int = 10,
                seed: int = 0, jobs: int = 1) -> list["MutantResult"]:
    """Run every mutant in ``names`` (default: the whole catalogue) and return one result each, in order.

    ``jobs > 1`` runs that many mutants at once in separate processes (spawned: each has its own
    Triton state; on CUDA they share the GPU). A worker process that dies counts as its mutant's error.
    """
    from tests.quality.mutants import MUTANTS

    names = list(MUTANTS) if not names else list(names)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        from jfa_verify.errors import InvalidInput

        raise InvalidInput(f"unknown mutant(s) {unknown}; choose from {sorted(MUTANTS)}")
    if jobs <= 1:
        return [run_mutant(n, device=device, max_examples=max_examples, seed=seed) for n in names]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(run_mutant, n, device=device, max_examples=max_examples, seed=seed) for n in names]
        results = []
        for n, f in zip(names, futures):
            try:
                results.append(f.result())
            except Exception as e:  # a crashed worker: the mutant was not judged
                results.append(MutantResult(n, MUTANTS[n].description, "error", gpu_only=MUTANTS[n].gpu_only,
                                            reason=f"worker failed: {type(e).__name__}: {e}"))
        return results


def format_table(results: Sequence[MutantResult]) -> str:
    """A plain-text (markdown) kill table."""
    head = "| mutant | description | verdict | killing output | input classes | s to failure | reproducer (B / tokens) |"
    lines = [head, "|" + "---|" * 7]
    for r in results:
        verdict = r.status if r.status != "killed" else f"killed ({r.stage})"
        if r.status == "skipped":
            verdict = "gpu-only (skipped)"
        lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
            r.name, r.description, verdict, ", ".join(r.outputs) or "-",
            ", ".join(r.input_classes) or "-",
            f"{r.seconds_to_failure:.1f}" if r.seconds_to_failure is not None else "-",
            f"{r.reproducer_batch} / {r.reproducer_tokens}" if r.reproducer_batch is not None else "-"))
    killed = sum(r.killed for r in results)
    eligible = sum(r.status != "skipped" for r in results)
    lines.append("")
    lines.append(f"{killed}/{eligible} mutants killed ({len(results) - eligible} gpu-only skipped)")
    return "\n".join(lines)
