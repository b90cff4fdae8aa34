"""Compile a run's kernel variants once, early and in parallel, before any case runs (issue 39, 2).

On a fresh Triton cache nearly all of a suite's time on a GPU is Triton building a variant at its first launch, each
case worker building its own copies. The cases are known before they run, so the variants they need are too:
:func:`trace_variants` runs each case's calls with Triton's ``jit_cache_hook`` answering "skip", which records every
launch's cache key and specialization data and neither builds nor launches anything; :func:`precompile` then builds
each distinct variant once, in a process pool (``JITFunction.preload``: the build lands in Triton's on-disk cache,
where every case worker finds it). The tracing runs in a child process (a kernel's host code that crashes must not
take the run with it, and the parent keeps no CUDA context), the builds in children that know only the target
(:class:`~jfa_verify.core.target_driver.TargetOnlyDriver`: no GPU needed to compile).

Nothing here changes a verdict: a case that cannot be traced, or a variant that does not build, is built at its
first launch as before, and the step says so. Under Triton's interpreter (the CPU) nothing compiles: the step is
a measured no-op that says why.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

__all__ = ["Precompiled", "Variant", "compile_variant", "precompile", "recording_variants", "trace_variants"]


@dataclass(frozen=True)
class Variant:
    """One compiled variant of a Triton kernel: what a launch asked Triton to build."""

    key: str  # Triton's cache key of the launch (its specialization and options): one build per key
    function: str  # "module:qualname" of the ``JITFunction``
    source_key: str  # the ``JITFunction``'s ``cache_key`` (its source and dependencies) when traced
    data: str  # Triton's specialization data (JSON), what ``JITFunction.preload`` builds from

    @property
    def name(self) -> str:
        return self.function.rsplit(".", 1)[-1].rsplit(":", 1)[-1]


@dataclass
class Precompiled:
    """What the precompile step did: the variants the cases need, how many it built, and the time it took."""

    cases: int = 0  # cases traced
    variants: int = 0  # distinct variants the traced cases launch
    compiled: int = 0  # variants built here (the others build at their first launch)
    workers: int = 0  # build processes
    seconds: float = 0.0  # the whole step, tracing included (wall time)
    trace_seconds: float = 0.0
    skipped: Optional[str] = None  # why nothing was built (the interpreter, --no-precompile), else None
    untraced: list[str] = field(default_factory=list)  # "case: why" for cases whose launches are not known
    errors: list[str] = field(default_factory=list)  # "kernel: why" for variants that did not build here
    by_kernel: dict = field(default_factory=dict)  # kernel function name -> distinct variants

    def to_dict(self) -> dict:
        return {"cases": self.cases, "variants": self.variants, "compiled": self.compiled, "workers": self.workers,
                "seconds": round(self.seconds, 3), "trace_seconds": round(self.trace_seconds, 3),
                "skipped": self.skipped, "by_kernel": dict(self.by_kernel), "untraced": self.untraced[:20],
                "untraced_count": len(self.untraced), "errors": self.errors[:20], "error_count": len(self.errors)}

    def summary(self) -> str:
        """One line for a run's header."""
        if self.skipped:
            return f"precompile: nothing built ({self.skipped}; {self.seconds:.1f} s)"
        line = (f"precompile: {self.variants} kernel variant(s) for {self.cases} case(s), {self.compiled} built in "
                f"{self.seconds:.1f} s ({self.workers} process(es); tracing {self.trace_seconds:.1f} s)")
        if self.untraced:
            line += f"; {len(self.untraced)} case(s) not traced (built at first launch), e.g. {self.untraced[0]}"
        if self.errors:
            line += f"; {len(self.errors)} variant(s) not built here (built at first launch), e.g. {self.errors[0]}"
        return line


# ----------------------------------------------------------------------------- tracing

# Kernels that build and run while tracing (recorded all the same): the framework's own, whose results a kernel's host
# code reads back (the tile plans of :mod:`jfa_verify.scheduling.plan_kernels`, planned on the GPU).
RUN_WHILE_TRACING = ("jfa_verify.scheduling.",)


@contextlib.contextmanager
def recording_variants(found: dict):
    """Within the block, a Triton launch that would build a variant records it in ``found`` (key -> :class:`Variant`)
    and builds and launches nothing (the kernel's outputs keep what they were allocated with), except the kernels of
    :data:`RUN_WHILE_TRACING`."""
    from triton import knobs

    def hook(*, key, fn, compile, **_):
        jit = fn.jit_function
        if key not in found:
            found[key] = Variant(str(key), f"{fn.module}:{fn.name}", str(jit.cache_key),
                                 compile["specialization_data"])
        return not fn.module.startswith(RUN_WHILE_TRACING)  # True: Triton skips the build and the launch

    before = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = hook
    try:
        yield found
    finally:
        knobs.runtime.jit_cache_hook = before


def _trace_case(kernel, case, device, *, backward: bool, memory: Optional[str]) -> None:
    """``case``'s kernel calls as :func:`~jfa_verify.run.runner.run_case` makes them (forward, the backward where the
    kernel has one for it, instrumented where it is), under :func:`recording_variants` by the caller."""
    from jfa_verify.run.runner import call_kernel

    tensors = case.materialize(device)
    problem = case.problem(tensors)
    if kernel.unsupported_reason(problem) is not None:
        return
    backward = backward and kernel.capabilities.backward_reason(problem) is None
    instrument = case.instrument and kernel.capabilities.instrumented
    call_kernel(kernel, problem, tensors, case, backward=backward, instrument=instrument, memory=memory)


def trace_variants(kernel, cases: Sequence, device, *, backward: bool = True,
                   memory: Optional[str] = None) -> tuple[list[Variant], list[str]]:
    """``(variants, untraced)``: the distinct Triton variants ``cases`` launch through ``kernel`` on ``device``, in
    first-launch order, and ``"case name: why"`` for each case whose calls raised (its variants build at their first
    launch). Builds and launches no Triton kernel but those of :data:`RUN_WHILE_TRACING`; needs Triton's compiler path
    (not ``TRITON_INTERPRET``)."""
    from jfa_verify.core.errors import InvalidInput, UnsupportedCase

    found: dict = {}
    untraced: list[str] = []
    with recording_variants(found):
        for case in cases:
            try:
                _trace_case(kernel, case, device, backward=backward, memory=memory)
            except (UnsupportedCase, InvalidInput):  # the kernel refuses the case: it launches nothing
                pass
            except Exception as e:  # what the run will find; here only its variants stay unknown
                untraced.append(f"{case.name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200])
    return list(found.values()), untraced


# ----------------------------------------------------------------------------- building

_WORKER: dict = {}


def _init_worker(kernel_name: Optional[str], plugins: Sequence[str], target: Optional[tuple],
                 owner: Optional[int] = None, device_type: Optional[str] = None) -> None:
    """A build or trace process: the plugins and the kernel loaded as the run's, and (``target`` given) a driver that
    knows only the target, so that no GPU context is made. ``owner``: the run's pid (it ends with it)."""
    if owner is not None:
        from jfa_verify.run.interrupts import exit_with_parent

        exit_with_parent(owner)
    from jfa_verify.core.device import choose_for_compiling, select_device

    # before the kernel's module is imported (its import sets Triton up for the device)
    if target is not None:  # compile for the target: no device needed, never the interpreter
        choose_for_compiling(device_type or "cuda")
    elif device_type is not None:
        select_device(device_type)
    if target is not None:
        from triton.backends.compiler import GPUTarget
        from triton.runtime import driver

        from jfa_verify.core.target_driver import TargetOnlyDriver

        only = TargetOnlyDriver()
        only.target = GPUTarget(*target)
        driver.set_active(only)
    if kernel_name is not None:
        from jfa_verify.protocol.registry import get_kernel, load_plugin

        for path in plugins:
            load_plugin(path)
        _WORKER["kernel"] = get_kernel(kernel_name)


def _resolve(function: str):
    import importlib

    module, _, qualname = function.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def compile_variant(variant: Variant) -> float:
    """Build ``variant`` into Triton's cache (this process's and the on-disk one); returns the seconds it took.

    Raises:
        RuntimeError: the kernel's source is not the one traced (a plugin that builds it differently here).
    """
    jit = _resolve(variant.function)
    if str(jit.cache_key) != variant.source_key:
        raise RuntimeError(f"{variant.function}: its source here is not the traced one")
    t0 = time.perf_counter()
    jit.preload(variant.data)
    return time.perf_counter() - t0


def _trace_in_worker(cases, device: str, backward: bool, memory: Optional[str]):
    import torch
    from triton.runtime import driver

    variants, untraced = trace_variants(_WORKER["kernel"], cases, torch.device(device), backward=backward,
                                        memory=memory)
    t = driver.active.get_current_target()
    return variants, untraced, (t.backend, t.arch, t.warp_size)


def _pool(workers: int, kernel_name: Optional[str], plugins, target,
          device_type: Optional[str] = None) -> ProcessPoolExecutor:
    import os

    from jfa_verify.run.isolation import start_worker_server, worker_context

    ctx = worker_context()
    start_worker_server(ctx)  # (deaf to Ctrl-C while it imports, in the main thread)
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(kernel_name, tuple(plugins), target, os.getpid(), device_type))


@contextlib.contextmanager
def _stopping(pool: ProcessPoolExecutor):
    """``pool``, shut down on leaving: waiting for its work when it ended normally, else (Ctrl-C, a failure) dropping
    what has not started and not waiting (its processes end with the run: ``exit_with_parent``)."""
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def precompile(kernel, cases: Sequence, device, *, jobs: int = 1, backward: bool = True,
               memory: Optional[str] = None, plugins: Sequence[str] = (), target: Optional[tuple] = None,
               build: Optional[Callable[[Variant], float]] = None, trace_here: bool = False) -> Precompiled:
    """Build every distinct Triton variant ``cases`` need on ``device`` once, before they run.

    Args:
        kernel: the kernel under test (a :class:`~jfa_verify.protocol.kernel.Kernel`; its name and ``plugins`` load it
            in the child processes). cases: the run's cases, in order. device: where they run.
        jobs: build processes (at most one per variant).
        backward, memory: as the run's settings (they decide which launches a case makes).
        target: ``(backend, arch, warp_size)`` to trace and build for with a target-only driver (a machine without
            the GPU); None: the device's own.
        build: builds one variant, returning its seconds (tests count the calls); given, the builds run in this
            process, one at a time. trace_here: trace in this process, not in a child.

    Never raises for a case or a variant: what cannot be traced or built is listed and builds at its first launch.
    """
    from jfa_verify.core.device import interpreting

    t0 = time.perf_counter()
    out = Precompiled(cases=len(cases))
    if interpreting():
        out.skipped = "Triton's interpreter on the CPU compiles nothing"
        out.seconds = time.perf_counter() - t0
        return out
    import torch

    device = str(device)
    try:
        if trace_here:
            if target is not None:
                _init_worker(None, (), target, None, torch.device(device).type)
            variants, out.untraced = trace_variants(kernel, cases, torch.device(device), backward=backward,
                                                    memory=memory)
        else:
            with _stopping(_pool(1, kernel.name, plugins, target, torch.device(device).type)) as pool:
                variants, out.untraced, target = pool.submit(_trace_in_worker, list(cases), device, backward,
                                                             memory).result()
    except Exception as e:  # a child that died or could not load the kernel: the run builds as it goes
        out.skipped = f"tracing failed: {type(e).__name__}: {e}"[:300]
        out.seconds = time.perf_counter() - t0
        return out
    out.trace_seconds = time.perf_counter() - t0
    out.variants = len(variants)
    for v in variants:
        out.by_kernel[v.name] = out.by_kernel.get(v.name, 0) + 1
    if variants:
        if build is not None:
            out.workers = 1
            for v in variants:
                try:
                    build(v)
                    out.compiled += 1
                except Exception as e:
                    out.errors.append(f"{v.name}: {type(e).__name__}: {e}"[:300])
        else:
            out.workers = max(1, min(jobs, len(variants)))
            try:
                with _stopping(_pool(out.workers, kernel.name, plugins, target)) as pool:
                    futures = {pool.submit(compile_variant, v): v for v in variants}
                    for f in as_completed(futures):
                        try:
                            f.result()
                            out.compiled += 1
                        except Exception as e:
                            out.errors.append(f"{futures[f].name}: {type(e).__name__}: {e}"[:300])
            except Exception as e:  # the pool itself broke (a worker killed): the rest builds at first launch
                out.errors.append(f"build processes: {type(e).__name__}: {e}"[:300])
    out.seconds = time.perf_counter() - t0
    return out
