"""Timing a kernel on named workloads, and comparing with a committed baseline (the gate's performance check).

Times are medians of repeated runs on random normal inputs (never zeros): CUDA events through
``triton.testing.do_bench`` on a GPU, the host clock on the CPU. A check is *noise-aware*: with
``r = median(now) / median(baseline)`` and ``noise = max(MAD(now) / median(now), MAD(baseline) /
median(baseline))`` (median absolute deviation), a workload regresses when ``r - 1 > threshold +
2 * noise``: a slowdown the run's own spread could explain is not blamed.

A baseline says nothing of how the kernel fares against the kernels beside it: :func:`measure_against_peer`
times a named peer in the same run, on the same inputs, both through the public contract call (validation and
any plan the kernel builds on the host included: nothing is prepared beforehand), alternating kernel and peer
round by round (kernel first, then peer first, ...: a drift of clocks or load hits both alike), and gives
``peer / kernel`` of the medians per configuration (below 1: the kernel is slower than the peer).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

from jfa_verify.cases.case import Case, CaseTensors
from jfa_verify.core.errors import InvalidInput, UnsupportedCase
from jfa_verify.core.lengths import sample_movielens_batch
from jfa_verify.protocol.kernel import Kernel

__all__ = ["FORMAT", "PeerRatio", "PerfVerdict", "compare", "measure", "measure_against_peer", "public_call",
           "read_baseline", "workloads", "write_baseline"]

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


def public_call(kernel: Kernel, case: Case, tensors: CaseTensors, *, backward: bool) -> Callable[[], None]:
    """A zero-argument callable making the contract call as a user makes it, ``kernel(q, k, v, q_offsets,
    k_offsets, causal=..., causal_alignment=..., sm_scale=...)`` on ``tensors`` (its own leaf copies of q, k and
    v): the kernel validates and plans on every call. With ``backward``, then the backward of ``o`` with the
    case's output gradient (input gradients cleared first); without, the call runs under ``torch.no_grad``."""
    q, k, v = (x.detach().clone().requires_grad_(backward) for x in (tensors.q, tensors.k, tensors.v))
    q_offsets, k_offsets, kwargs = tensors.q_offsets, tensors.k_offsets, case.contract_kwargs()
    if tensors.block_selection is not None:
        kwargs["block_selection"] = tensors.block_selection
    if tensors.block_scales is not None:
        kwargs["block_scales"] = tensors.block_scales

    def call() -> None:
        if not backward:
            with torch.no_grad():
                kernel(q, k, v, q_offsets, k_offsets, **kwargs)
            return
        q.grad = k.grad = v.grad = None
        result = kernel(q, k, v, q_offsets, k_offsets, **kwargs)
        (result[0] if isinstance(result, (tuple, list)) else result).backward(tensors.do)

    return call


def _sample(fn: Callable[[], None], device_type: str, block_ms: float) -> float:
    """One timing of ``fn`` in milliseconds: on CUDA the median of CUDA-event times over about ``block_ms`` of
    calls (``do_bench``, L2 cleared before each), on the CPU the host clock around one call."""
    if device_type == "cuda":
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=max(1, int(block_ms / 5)), rep=max(1, int(block_ms)), return_mode="median"))
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


@dataclass(frozen=True)
class PeerRatio:
    """One configuration (a workload and the passes timed) timed on the kernel and on the peer in alternating
    rounds; ``ratio`` is ``peer_ms / kernel_ms`` (medians): below 1 the kernel is slower than the peer."""

    configuration: str  # e.g. "movielens (forward+backward)"
    case: str  # the workload's shape (Case.describe)
    peer: str
    kernel_ms: float
    peer_ms: float
    rounds: int

    @property
    def ratio(self) -> float:
        return self.peer_ms / self.kernel_ms if self.kernel_ms > 0 else float("inf")

    def describe(self, kernel: str) -> str:
        return (f"{self.configuration} [{self.case}]: peer/kernel {self.ratio:.3f} ({self.peer} {self.peer_ms:.3f} ms, "
                f"{kernel} {self.kernel_ms:.3f} ms; medians of {self.rounds} alternating rounds)")

    def to_dict(self) -> dict:
        return {"configuration": self.configuration, "case": self.case, "peer": self.peer,
                "kernel_ms": self.kernel_ms, "peer_ms": self.peer_ms, "ratio": self.ratio, "rounds": self.rounds}


def measure_against_peer(kernel: Kernel, peer: Kernel, device, *, rounds: Optional[int] = None,
                         names: Optional[list[str]] = None,
                         block_ms: float = 50.0) -> tuple[list[PeerRatio], list[str]]:
    """``(ratios, not_compared)``: each named workload both kernels run, timed on the same inputs (random normal)
    through :func:`public_call`, forward and backward when both have a backward for it (else forward alone);
    ``rounds`` samples each (default 5 on CUDA, 9 on the CPU), the kernel first in even rounds and the peer first
    in odd ones, after one warm-up call each; on the CPU torch runs one thread meanwhile. ``not_compared``: one
    line per workload left out, with why (outside either's capabilities, or refused by either at call time).
    """
    device = torch.device(device)
    rounds = rounds or (5 if device.type == "cuda" else 9)
    threads = torch.get_num_threads()
    if device.type == "cpu":  # one thread, as timing.py's CPU timing: a shared machine's other work then
        torch.set_num_threads(1)  # slows both kernels alike instead of stalling a spinning thread pool
    try:
        return _alternate(kernel, peer, device, rounds, names, block_ms)
    finally:
        torch.set_num_threads(threads)


def _alternate(kernel: Kernel, peer: Kernel, device: torch.device, rounds: int, names: Optional[list[str]],
               block_ms: float) -> tuple[list[PeerRatio], list[str]]:
    ratios, not_compared = [], []
    for name, case in workloads(device.type).items():
        if names and name not in names:
            continue
        tensors = case.materialize(device)
        problem = case.problem(tensors)
        why = next((f"{x.name}: {r}" for x in (kernel, peer) for r in [x.unsupported_reason(problem)] if r), None)
        if why:
            not_compared.append(f"{name}: not compared with {peer.name} ({why})")
            continue
        backward = all(x.capabilities.backward_reason(problem) is None for x in (kernel, peer))
        calls = [public_call(x, case, tensors, backward=backward) for x in (kernel, peer)]
        try:
            for call in calls:  # warm-up: compiling, caches, allocator
                call()
        except UnsupportedCase as e:
            not_compared.append(f"{name}: not compared with {peer.name} ({e})")
            continue
        times: tuple[list[float], list[float]] = ([], [])
        for r in range(rounds):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                times[i].append(_sample(calls[i], device.type, block_ms))
        passes = "forward+backward" if backward else "forward"
        ratios.append(PeerRatio(f"{name} ({passes})", case.describe(), peer.name, statistics.median(times[0]),
                                statistics.median(times[1]), rounds))
    return ratios, not_compared


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
