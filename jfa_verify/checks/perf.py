"""Timing a kernel on named workloads, and comparing with a committed baseline (the gate's performance check).

Times are medians of repeated runs on random normal inputs (never zeros): CUDA events through
``triton.testing.do_bench`` on a GPU, the host clock on the CPU. A check is *noise-aware*: with
``r = median(now) / median(baseline)`` and ``noise = max(MAD(now) / median(now), MAD(baseline) /
median(baseline))`` (median absolute deviation), a workload regresses when ``r - 1 > threshold +
2 * noise``: a slowdown the run's own spread could explain is not blamed.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

from jfa_verify.cases.case import Case
from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.lengths import sample_movielens_batch
from jfa_verify.protocol.kernel import Kernel

__all__ = ["FORMAT", "PerfVerdict", "compare", "measure", "read_baseline", "workloads", "write_baseline"]

FORMAT = "jfa-verify-perf/1"


def workloads(device_type: str) -> dict[str, Case]:
    """The named batches the performance check times (forward and backward): real MovieLens lengths,
    one skewed batch, causal and not; GPU sizes on CUDA, small ones on the CPU interpreter."""
    if device_type == "cuda":
        heads = dict(num_heads_q=8, num_heads_kv=8, head_dim=128, dtype="bfloat16")
        ml = sample_movielens_batch(256, 0)
        skew = (16384,) + (64,) * 255
    else:
        heads = dict(num_heads_q=2, num_heads_kv=2, head_dim=32, dtype="float32")
        ml = sample_movielens_batch(6, 0, scale=1 / 8)
        skew = (96,) + (4,) * 5
    return {
        "movielens": Case(kv_lengths=ml, name="movielens", **heads),
        "movielens-causal": Case(kv_lengths=ml, causal=True, name="movielens-causal", **heads),
        "one-long-many-short": Case(kv_lengths=skew, name="one-long-many-short", **heads),
    }


def _time(fn: Callable[[], object], device_type: str, repeats: int) -> list[float]:
    """``repeats`` timings of ``fn`` in milliseconds (after one warm-up call)."""
    fn()
    if device_type == "cuda":
        from triton.testing import do_bench

        return [float(x) for x in do_bench(fn, warmup=10, rep=max(50, 10 * repeats), return_mode="all")]
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def measure(kernel: Kernel, device, *, repeats: int = 5, names: Optional[list[str]] = None) -> dict[str, list[float]]:
    """``{workload: [ms, ...]}``: forward + backward of ``kernel`` on each named workload it supports."""
    device = torch.device(device)
    out = {}
    for name, case in workloads(device.type).items():
        if names and name not in names:
            continue
        t = case.materialize(device)
        problem = case.problem(t)
        if kernel.unsupported_reason(problem):
            continue
        backward = kernel.capabilities.backward_reason(problem) is None
        q, k, v = (x.detach().clone().requires_grad_(backward) for x in (t.q, t.k, t.v))

        def step():
            run = kernel.run(problem, q, k, v, t.q_offsets, t.k_offsets, sm_scale=case.sm_scale)
            if backward:
                run.o.backward(t.do)

        out[name] = _time(step, device.type, repeats)
    return out


def _mad(xs: list[float]) -> float:
    m = statistics.median(xs)
    return statistics.median(abs(x - m) for x in xs)


@dataclass(frozen=True)
class PerfVerdict:
    workload: str
    baseline_ms: float
    now_ms: float
    ratio: float  # now / baseline: above 1 is slower
    noise: float
    regressed: bool

    def describe(self) -> str:
        return (f"{self.workload}: {self.now_ms:.3f} ms vs baseline {self.baseline_ms:.3f} ms ({self.ratio:.3f}x, "
                f"noise {self.noise:.1%}){'  REGRESSED' if self.regressed else ''}")


def compare(now: dict[str, list[float]], baseline: dict[str, list[float]], threshold: float) -> list[PerfVerdict]:
    """The noise-aware verdict of every workload timed in both (see the module docstring)."""
    out = []
    for name in sorted(set(now) & set(baseline)):
        a, b = now[name], baseline[name]
        ma, mb = statistics.median(a), statistics.median(b)
        noise = max(_mad(a) / ma if ma else 0.0, _mad(b) / mb if mb else 0.0)
        ratio = ma / mb if mb else float("inf")
        out.append(PerfVerdict(name, mb, ma, ratio, noise, ratio - 1 > threshold + 2 * noise))
    return out


def write_baseline(path: "str | Path", kernel: str, device_name: str, times: dict[str, list[float]]) -> Path:
    """Write a baseline file (``jfa-verify-perf/1``): the kernel, the device and every workload's timings."""
    path = Path(path)
    path.write_text(json.dumps({"format": FORMAT, "kernel": kernel, "device": device_name, "times_ms": times},
                               indent=1))
    return path


def read_baseline(path: "str | Path") -> dict:
    """Read a baseline file.

    Raises:
        InvalidInput: missing, not JSON, or not a baseline.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise InvalidInput(f"performance baseline {str(path)!r} cannot be read: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("times_ms"), dict):
        raise InvalidInput(f"{str(path)!r} is not a performance baseline (format {FORMAT!r}); record one with "
                           f"jfa-verify gate --perf-record FILE")
    return doc
