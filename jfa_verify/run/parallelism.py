"""How many worker processes a command starts when ``--jobs`` is not given: the one rule for ``run``, ``gate``,
``fuzz`` and ``mutants`` (:func:`choose_jobs`).

On an H200 with a cold Triton cache nearly all of a suite's time is Triton compiling, which workers overlap: the
default suite ran 25 of its 175 cases in 200 s with one worker, and all of them in 112 s with 16 (issue 39). The
machine's default is one worker per CPU core this process may run on, no more than free memory holds
(:data:`HOST_GIB_PER_JOB` of host memory a worker; on CUDA also :data:`GPU_GIB_PER_JOB` of free memory on the GPUs
the workers share), no more than the work has items (cases, mutants), and at most :data:`MAX_JOBS`.
``$JFA_VERIFY_JOBS`` replaces that figure (a shared host's limit, or a test session's); ``--jobs`` wins over both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional, Sequence

from jfa_verify.core.errors import InvalidInput

__all__ = ["ENV", "GPU_GIB_PER_JOB", "HOST_GIB_PER_JOB", "MAX_JOBS", "Jobs", "build_jobs", "choose_jobs", "counted",
           "jobs_for", "describe_jobs"]

ENV = "JFA_VERIFY_JOBS"
MAX_JOBS = 16  # (16 workers ran the default suite on the H200 without running out of its memory)
HOST_GIB_PER_JOB = 2.0  # a worker with torch and Triton loaded holds a few hundred MiB; its cases' tensors beside
GPU_GIB_PER_JOB = 8.0  # a CUDA context, Triton's modules and a case's tensors, with room for the larger cases


@dataclass(frozen=True)
class Jobs:
    """A worker count and how it was chosen.

    Attributes:
        count: worker processes (>= 1).
        source: ``"given"`` (``--jobs``), ``"env"`` (``$JFA_VERIFY_JOBS``) or ``"machine"`` (the default rule).
        reason: what set it, in words (the run header prints it).
        limits: for the machine's default, each bound the rule took, as ``{"what": ..., "jobs": n}``.
    """

    count: int
    source: str
    reason: str
    limits: tuple = field(default=())

    def __str__(self) -> str:
        return describe_jobs(self.count, self.reason)

    def to_dict(self) -> dict:
        return {"count": self.count, "chosen_by": self.source, "reason": self.reason,
                "limits": [dict(what=what, jobs=n) for n, what in self.limits]}


def build_jobs(jobs: Jobs) -> int:
    """Processes for building a run's kernel variants (its precompile step): ``jobs.count`` where it was given
    (``--jobs``, ``$JFA_VERIFY_JOBS``), else the machine's default without the bound of the GPU's memory. The builds
    compile for the target alone and make no GPU context: an H100 run of 9 workers (79 GiB free, 8 GiB a worker)
    built its 265 variants in 9 processes on 16 cores (2026-12-06)."""
    if jobs.source != "machine":
        return jobs.count
    return choose_jobs(None).count


def describe_jobs(count: int, reason: str) -> str:
    """``"2 workers (default: 2 CPU cores; --jobs N to choose)"``: a count and its reason, as headers print them."""
    return counted(count, "worker") + (f" ({reason})" if reason else "")


def jobs_for(cores: int, *, host_free_gib: Optional[float] = None, gpu_free_gib: Optional[float] = None,
             gpu_where: str = "the GPU", work: Optional[int] = None, unit: str = "case",
             option: str = "--jobs") -> Jobs:
    """The machine's default worker count from what the machine has (the rule, without probing it).

    Args:
        cores: CPU cores this process may run on.
        host_free_gib: host memory available (None: not known, no bound).
        gpu_free_gib: free memory on the GPUs the workers share (None: a CPU run, or not known).
        gpu_where: those GPUs, in words (``"cuda:0"``).
        work: items the workers share (cases, mutants); None: no bound.
        unit: what one item is, in words (``"case"``, ``"mutant"``, ``"case to draw"``).
        option: the option that chooses instead, named in the reason.
    """
    limits = []
    if work is not None:
        limits.append((work, counted(work, unit)))
    limits.append((cores, counted(cores, "CPU core", "CPU cores")))
    if gpu_free_gib is not None:
        limits.append((int(gpu_free_gib // GPU_GIB_PER_JOB),
                       f"{gpu_free_gib:.0f} GiB free on {gpu_where}, {GPU_GIB_PER_JOB:g} GiB a worker"))
    if host_free_gib is not None:
        limits.append((int(host_free_gib // HOST_GIB_PER_JOB),
                       f"{host_free_gib:.0f} GiB of free memory, {HOST_GIB_PER_JOB:g} GiB a worker"))
    limits.append((MAX_JOBS, f"at most {MAX_JOBS}"))
    count, binding = min(limits, key=lambda limit: limit[0])  # (the first of equal bounds: the work's, then cores)
    return Jobs(max(1, count), "machine", f"default: {binding}; {option} N to choose", tuple(limits))


def choose_jobs(given: Optional[int], device=None, *, gpus: Sequence[str] = (), work: Optional[int] = None,
                unit: str = "case", option: str = "--jobs") -> Jobs:
    """The worker count of a command: ``given`` when it is not None, else ``$JFA_VERIFY_JOBS`` when set, else the
    machine's default (:func:`jobs_for` on what this process sees: :func:`available_cores`, the host's available
    memory, and on a CUDA ``device`` the free memory of ``gpus``, or of the device's GPU when none are named).

    Raises:
        InvalidInput: ``$JFA_VERIFY_JOBS`` is not an integer >= 1 (the message names it and the fix).
    """
    if given is not None:
        return _at_most_work(Jobs(given, "given", option), work, unit)
    text = os.environ.get(ENV, "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise InvalidInput(f"${ENV}={text!r}: give a worker count, an integer >= 1, or unset it for the "
                               f"machine's default (or give {option} N)")
        return _at_most_work(Jobs(int(text), "env", f"${ENV}"), work, unit)
    gpu_free, where = None, ""
    if device is not None and getattr(device, "type", str(device)) == "cuda":
        gpu_free, where = _gpu_free_gib(device, gpus)
    return jobs_for(available_cores(), host_free_gib=_host_free_gib(), gpu_free_gib=gpu_free, gpu_where=where,
                    work=work, unit=unit, option=option)


def _at_most_work(jobs: Jobs, work: Optional[int], unit: str) -> Jobs:
    """A chosen count no larger than the work it shares: workers beyond one an item would wait for nothing (a new
    user's ``--jobs 500`` on three cases was announced as 500 workers)."""
    if work is None or jobs.count <= max(work, 1):
        return jobs
    return Jobs(max(work, 1), jobs.source, f"{jobs.reason} {jobs.count}, one per {unit}: {counted(work, unit)}")


def counted(n: int, unit: str, plural: Optional[str] = None) -> str:
    """``n`` items of ``unit`` in words, the noun singular for one: ``"1 case"``, ``"3 cases to draw"`` for
    ``unit="case to draw"`` (its first word takes the "s"); ``plural`` where that rule is wrong (``"packed
    launches"``). For the counts the commands print (a campaign's "1 cases run" and "1 worker(s)" read badly)."""
    if n != 1 and plural is not None:
        return f"{n} {plural}"
    noun, _, rest = unit.partition(" ")
    return f"{n} {noun}{'' if n == 1 else 's'}" + (f" {rest}" if rest else "")


def available_cores() -> int:
    """CPU cores this process may run on (its affinity where the system has one, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _host_free_gib() -> Optional[float]:
    """Host memory available to new processes (Linux's ``MemAvailable``), in GiB; None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20  # (kB)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gpu_free_gib(device, gpus: Sequence[str]) -> tuple[Optional[float], str]:
    """Free memory on ``gpus`` (indices; a UUID is skipped), or on ``device``'s GPU when none are named, in GiB, and
    those GPUs in words; (None, "") when CUDA cannot say."""
    import torch

    indices = [int(g) for g in gpus if str(g).isdigit()]
    if not indices:
        indices = [device.index if getattr(device, "index", None) is not None else torch.cuda.current_device()]
    try:
        free = sum(torch.cuda.mem_get_info(i)[0] for i in indices)
    except Exception:  # (no driver, a GPU gone): no GPU bound; a case out of memory is run again alone anyway
        return None, ""
    return free / 2**30, ", ".join(f"cuda:{i}" for i in indices)
