"""Timing two live kernels against each other (``bisect --perf``): the timed call, one timed block.

The named batches are :func:`jfa_verify.checks.perf.workloads` (one table for the gate's performance check,
which compares repeated timings with a stored baseline, and for the bisect).

A *block* is one timing sample of one kernel call, taken over a short burst of calls (``block_ms``
milliseconds of them). On CUDA it is the median of CUDA-event times through
``triton.testing.do_bench`` (L2 cleared before every call, ``return_mode="median"``). On the CPU
(Triton's interpreter, or a plain-torch kernel) it is the *minimum* wall time (``time.perf_counter``)
of at least five calls: on a CPU shared with other processes, interference only ever adds time, so
the minimum is the stable estimate (the advice of Python's ``timeit`` documentation), where a
median of a burst can land on a descheduled call. CPU timing runs torch on one thread, pinned to
one core, the same core for every process timed in turn (:func:`pin_cpu_timing`): they then
share its speed and its neighbours, and never fight over cores. Inputs are
always drawn values (normal by default): timing on zeros flatters kernels whose cost depends on
values (softmax underflow shortcuts, sparsity checks) and hides slowdowns that only real data shows.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import torch

from jfa_verify.cases.case import Case
from jfa_verify.checks.perf import workloads
from jfa_verify.core.errors import InvalidInput, UnsupportedCase
from jfa_verify.protocol.kernel import Kernel

__all__ = ["batch_case", "pin_cpu_timing", "time_block", "timed_call"]


def batch_case(name: str, device_type: str) -> Case:
    """The case of the named benchmark batch on ``device_type``: one of :func:`jfa_verify.checks.perf.workloads`
    (the named batches the gate's performance check times too).

    Raises:
        InvalidInput: unknown name (the message lists the known ones).
    """
    batches = workloads(device_type)
    if name not in batches:
        raise InvalidInput(f"benchmark batch {name!r} is unknown; choose one of {sorted(batches)}")
    return batches[name]


def timed_call(kernel: Kernel, case: Case, device: torch.device, *, backward: bool = False) -> Callable[[], None]:
    """A zero-argument callable running ``kernel`` once on ``case`` (inputs made once, here).

    Forward only (under ``torch.no_grad``) unless ``backward``: then the forward and the backward
    with the case's output gradient, input gradients cleared before every call.

    Raises:
        UnsupportedCase: the case is outside the kernel's capabilities (or, with ``backward``, it
            has no backward for it).
    """
    tensors = case.materialize(device)
    problem = case.problem(tensors)
    kernel.check_supported(problem)
    qo, ko = tensors.q_offsets, tensors.k_offsets
    if not backward:
        q, k, v = tensors.q, tensors.k, tensors.v

        def forward() -> None:
            with torch.no_grad():
                kernel.run(problem, q, k, v, qo, ko, sm_scale=case.sm_scale)

        return forward
    reason = kernel.capabilities.backward_reason(problem)
    if reason:
        raise UnsupportedCase(f"kernel {kernel.name!r} cannot time a backward on {case.name}: {reason}")
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (tensors.q, tensors.k, tensors.v))

    def forward_backward() -> None:
        q.grad = k.grad = v.grad = None
        run = kernel.run(problem, q, k, v, qo, ko, sm_scale=case.sm_scale)
        run.o.backward(tensors.do)

    return forward_backward


def pin_cpu_timing(device: torch.device) -> None:
    """On the CPU: run torch's operators on one thread (an idle OpenMP pool keeps spinning for a while
    and would steal cores from the other process being timed) and pin this process to the lowest
    core it may use (Linux; processes started alike pick the same core). No effect on CUDA, where
    the device's own clock is what is timed."""
    if torch.device(device).type != "cpu":
        return
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def time_block(fn: Callable[[], None], device: torch.device, *, block_ms: float = 50.0) -> float:
    """One timing sample of ``fn`` in milliseconds per call, over about ``block_ms`` of calls.

    CUDA: ``triton.testing.do_bench(fn, warmup, rep=block_ms, return_mode="median")`` (CUDA
    events, L2 cleared before each call). CPU: the minimum wall time of the calls (at least 5).
    """
    if torch.device(device).type == "cuda":
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=max(1, int(block_ms / 5)), rep=max(1, int(block_ms)),
                              return_mode="median"))
    times = []
    end = time.perf_counter() + block_ms / 1000.0
    while len(times) < 5 or time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return float(min(times))
