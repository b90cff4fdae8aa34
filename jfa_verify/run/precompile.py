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

The trace is kept on disk between runs (jfa-verify's cache, :mod:`jfa_verify.cases.search_cache`, file
``traces-<version>.json``): on an H100 with a warm Triton cache, tracing was 10.5 s of the step's 11.5 s
(190 cases, 217 variants), the same work every run. The answer (the variants, in first-launch order, and the
target they were traced for) is read back only under the key of everything it depends on (:func:`trace_key`):

* the file's version: a digest of every Python source of ``jfa_verify`` (the host code that runs while tracing:
  the case model, the runner's calls, the planners; :data:`RUN_WHILE_TRACING`) and of ``jfa_verify.kernels``
  (the shipped kernels, which import one another);
* the key, a SHA-256 of: every case's full :meth:`~jfa_verify.cases.case.Case.to_dict`, in order, and each
  relation check's name and cases; the device
  (its string and, for CUDA, its name, compute capability and SM count, which the host code reads); the target
  asked for; the backward and memory settings; Triton's and torch's versions and the ``TRITON_*`` environment but
  its folders (Triton's options); the kernel's name and a digest of its sources (:func:`kernel_sources_digest`:
  the package or plugin file that defines its loader, and its ``source_dirs``).

An answer read back is checked first (well-formed variants whose specialization data names their function, the
target asked for) and is traced again when it is not; each build then still refuses a variant whose function's
source is not the traced one (:func:`compile_variant`). A trace that left a case untraced is not kept (its failure
may pass, a GPU out of memory), nor is one whose key cannot be made (a kernel without a source file).
``JFA_VERIFY_CACHE=off`` traces every run.

The trace streams each variant to the build processes as it meets it (:func:`_trace_while_building`), so that the
builds start while it goes on. The builds start longest first where earlier runs timed them (file
``build-seconds-1.json`` of the same cache: each variant's seconds by its function and specialization, not its
source, so a kernel edit keeps its variants' times): variants never timed start first, as the trace meets them, then
the others by their last time, longest first, once the trace has ended. A pool that took them in trace
order ended with one process finishing a 20-s float32 backward alone (the pool's wall time in both orders, from
sm_90a build times measured on this project's CPU: ``docs/evidence/cpu-2026-12-07-build-order``). The order changes
no build, only when each starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

__all__ = ["Precompiled", "Variant", "compile_variant", "kernel_sources_digest", "longest_first", "precompile",
           "recording_variants", "trace_key", "trace_variants"]


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
    trace_cached: bool = False  # the variants came from jfa-verify's cache, traced by an earlier run
    skipped: Optional[str] = None  # why nothing was built (the interpreter, --no-precompile), else None
    untraced: list[str] = field(default_factory=list)  # "case: why" for cases whose launches are not known
    errors: list[str] = field(default_factory=list)  # "kernel: why" for variants that did not build here
    by_kernel: dict = field(default_factory=dict)  # kernel function name -> distinct variants
    timed_before: int = 0  # variants whose build time an earlier run recorded (these start longest first)
    slowest: list = field(default_factory=list)  # [kernel function name, seconds] of the longest builds, longest first
    built_while_tracing: int = 0  # builds started before the trace ended (the trace, in a child, streams its variants)

    def to_dict(self) -> dict:
        return {"cases": self.cases, "variants": self.variants, "compiled": self.compiled, "workers": self.workers,
                "seconds": round(self.seconds, 3), "trace_seconds": round(self.trace_seconds, 3),
                "trace_cached": self.trace_cached, "skipped": self.skipped, "by_kernel": dict(self.by_kernel),
                "untraced": self.untraced[:20], "untraced_count": len(self.untraced), "errors": self.errors[:20],
                "error_count": len(self.errors), "timed_before": self.timed_before,
                "built_while_tracing": self.built_while_tracing,
                "slowest": [[name, round(sec, 3)] for name, sec in self.slowest]}

    def summary(self) -> str:
        """One line for a run's header."""
        if self.skipped:
            return f"precompile: nothing built ({self.skipped}; {self.seconds:.1f} s)"
        line = (f"precompile: {self.variants} kernel variant(s) for {self.cases} case(s), {self.compiled} built in "
                f"{self.seconds:.1f} s ({self.workers} process(es); tracing {self.trace_seconds:.1f} s"
                f"{', cached' if self.trace_cached else ''}"
                f"{f', {self.built_while_tracing} build(s) started during it' if self.built_while_tracing else ''})")
        if self.slowest:
            line += f"; longest build {self.slowest[0][0]} {self.slowest[0][1]:.1f} s"
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
def recording_variants(found: dict, on_found: Optional[Callable[[Variant], None]] = None):
    """Within the block, a Triton launch that would build a variant records it in ``found`` (key -> :class:`Variant`)
    and builds and launches nothing (the kernel's outputs keep what they were allocated with), except the kernels of
    :data:`RUN_WHILE_TRACING`. ``on_found`` is called with each variant when first recorded."""
    from triton import knobs

    def hook(*, key, fn, compile, **_):
        jit = fn.jit_function
        if key not in found:
            found[key] = Variant(str(key), f"{fn.module}:{fn.name}", str(jit.cache_key),
                                 compile["specialization_data"])
            if on_found is not None:
                on_found(found[key])
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


def trace_variants(kernel, cases: Sequence, device, *, backward: bool = True, memory: Optional[str] = None,
                   relations: Sequence = (), on_found: Optional[Callable[[Variant], None]] = None,
                   ) -> tuple[list[Variant], list[str]]:
    """``(variants, untraced)``: the distinct Triton variants ``cases`` launch through ``kernel`` on ``device``, then
    ``relations`` (:class:`~jfa_verify.checks.relations.Relation` checks the run makes after its cases), in
    first-launch order, and ``"case name: why"`` for each case whose calls raised (its variants build at their first
    launch). Builds and launches no Triton kernel but those of :data:`RUN_WHILE_TRACING`; needs Triton's compiler path
    (not ``TRITON_INTERPRET``). ``on_found``: called with each variant as the trace first meets it."""
    from jfa_verify.core.errors import InvalidInput, UnsupportedCase

    found: dict = {}
    untraced: list[str] = []
    with recording_variants(found, on_found):
        for case in cases:
            try:
                _trace_case(kernel, case, device, backward=backward, memory=memory)
            except (UnsupportedCase, InvalidInput):  # the kernel refuses the case: it launches nothing
                pass
            except Exception as e:  # what the run will find; here only its variants stay unknown
                untraced.append(f"{case.name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200])
        # A relation check lays its inputs out anew (int64 offsets, other strides, a cut batch): variants of its own,
        # which built one after another in its worker (35.6 s of a cold H100 run, 3.7 s warm). Its verdict here, on
        # outputs no kernel wrote, means nothing, and it stops at the first difference it sees (here, almost
        # surely the first): each of its calls is also traced as a case of its own, to the end.
        for relation in relations:
            with contextlib.suppress(Exception):
                relation.check(kernel, device)
            for case in relation.cases():
                with contextlib.suppress(Exception):
                    _trace_case(kernel, case, device, backward=backward, memory=memory)
    return list(found.values()), untraced


# ----------------------------------------------------------------------------- the trace kept between runs

# At most this many traces in the file, the newest written: an answer holds ~5 kB of specialization data a variant
# (the GPU suite's 201 sm_90 variants traced on this project's CPU: 0.98 MB), and each run reads the whole file
# (16 such answers, 15.6 MB: 83 ms to read, 56 ms to write, on the same CPU).
TRACES_KEPT = 16
_SPECIALIZATION_FIELDS = ("signature", "constant_keys", "constant_vals", "attrs_keys", "attrs_vals", "options")


def _package_folders() -> list[Path]:
    """``jfa_verify``'s folder and ``jfa_verify.kernels``'s where it is elsewhere (an editable install maps it to
    the repository's ``kernels/``)."""
    import importlib.util

    import jfa_verify

    folders = [Path(jfa_verify.__file__).resolve().parent]
    spec = importlib.util.find_spec("jfa_verify.kernels")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location).resolve()
        if not any(path == f or f in path.parents for f in folders):
            folders.append(path)
    return folders


def _traces_version() -> str:
    """The version of :func:`precompile`'s trace file: a digest of every Python source of ``jfa_verify`` and of the
    kernels shipped with it (:func:`_package_folders`), the host code that runs while tracing, this module's too."""
    from jfa_verify.cases.search_cache import sources_digest

    return sources_digest(_package_folders())


def kernel_sources_digest(kernel) -> Optional[str]:
    """A digest of the Python sources that define ``kernel``: the package whose ``__init__`` defines its loader (all
    of it), or else the loader's file with the modules and regular packages beside it (a plugin imports those), and
    each folder of ``kernel.source_dirs``. None when the loader has no source file (nothing to tell versions by).

    A kernel whose host code lives elsewhere names that folder in ``source_dirs``; its Triton functions' own source
    is checked at each build all the same (:func:`compile_variant`).
    """
    import inspect

    from jfa_verify.cases.search_cache import sources_digest

    try:
        path = Path(inspect.getfile(kernel.loader)).resolve()
    except (AttributeError, TypeError, OSError):
        return None
    if not path.is_file():
        return None
    try:
        if path.name == "__init__.py":
            parts = [sources_digest([path.parent])]
        else:
            beside = [p for p in sorted(path.parent.iterdir()) if p.is_dir() and (p / "__init__.py").is_file()]
            parts = [sources_digest([path.parent], recursive=False),
                     *(p.name + ":" + sources_digest([p]) for p in beside)]
        parts += [sources_digest([Path(d)]) for d in getattr(kernel, "source_dirs", ())]
    except OSError:
        return None
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _device_facts(device) -> Optional[list]:
    """What the host code may read of ``device`` beyond its string: a CUDA device's name, compute capability and SM
    count (its persistent grids), and its architecture and warp size where torch names them (ROCm)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device.index if device.index is not None else torch.cuda.current_device())
    return [props.name, props.major, props.minor, props.multi_processor_count,
            getattr(props, "gcnArchName", None), getattr(props, "warp_size", None)]


def trace_key(kernel, cases: Sequence, device, *, backward: bool, memory: Optional[str],
              target: Optional[tuple], relations: Sequence = ()) -> Optional[str]:
    """The key (64 hex digits) of :func:`precompile`'s trace of ``cases`` through ``kernel`` on ``device`` in the
    trace file (whose name carries the framework's sources: :func:`_traces_version`); the module's docstring lists
    what it holds. None when it cannot be made (a kernel without source file, a device whose properties cannot be
    read): then the trace is neither read nor kept."""
    import os

    import torch
    import triton

    sources = kernel_sources_digest(kernel)
    if sources is None:
        return None
    try:
        facts = _device_facts(device)
    except Exception:  # (no CUDA here, a device that does not answer: the trace runs as it always did)
        return None
    doc = {"cases": [c.to_dict() for c in cases], "device": str(device), "device_facts": facts,
           "relations": [[r.name, [c.to_dict() for c in r.cases()]] for r in relations],
           "target": list(target) if target is not None else None, "backward": bool(backward), "memory": memory,
           "triton": triton.__version__, "torch": torch.__version__,
           "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith("TRITON_") and not _where(k)},
           "kernel": getattr(kernel, "name", None), "kernel_sources": sources}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode()).hexdigest()


def _where(name: str) -> bool:
    """Whether ``TRITON_*`` variable ``name`` only says where Triton keeps things (its cache, dumps: tests give each
    run a cache of its own), which no launch's variant depends on."""
    return name.endswith("_DIR") or name == "TRITON_HOME"


def _traces():
    from jfa_verify.cases.search_cache import SearchCache

    return SearchCache("traces", version=_traces_version, keep=TRACES_KEPT)


SLOWEST_KEPT = 5  # builds named in the report, longest first


def _build_seconds():
    from jfa_verify.cases.search_cache import SearchCache

    # (version "1": times only order the builds, so answers of older code are still worth reading)
    return SearchCache("build-seconds", version=lambda: "1", keep=20000)


def _shape(variant: Variant) -> str:
    """A variant's function and specialization, without its source: the key of its build time."""
    return hashlib.sha256(f"{variant.function}\0{variant.data}".encode()).hexdigest()[:24]


def longest_first(variants: Sequence[Variant], seconds: dict) -> list[Variant]:
    """``variants`` in build order: those without a time in ``seconds`` (by :func:`_shape`) first, in their order,
    then the others by time, longest first (the order that ends a pool's builds soonest when the times hold)."""
    def rank(v: Variant) -> tuple[int, float]:
        t = seconds.get(_shape(v))
        known = isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0
        return (1, -float(t)) if known else (0, 0.0)

    return sorted(variants, key=rank)


def _as_answer(variants: Sequence[Variant], target: tuple) -> dict:
    return {"target": list(target), "variants": [[v.key, v.function, v.source_key, v.data] for v in variants]}


def _checked_answer(answer, target: Optional[tuple]) -> Optional[tuple[list[Variant], tuple]]:
    """``(variants, target)`` of a cached trace, or None when it is not a well-formed one for ``target`` (given):
    a damaged or foreign entry is traced again, never built from."""
    if not isinstance(answer, dict) or set(answer) != {"target", "variants"}:
        return None
    traced, records = answer["target"], answer["variants"]
    if not (isinstance(traced, list) and len(traced) == 3 and isinstance(traced[0], str)
            and isinstance(traced[1], (int, str)) and not isinstance(traced[1], bool)
            and type(traced[2]) is int and traced[2] > 0):
        return None
    if target is not None and tuple(traced) != tuple(target):
        return None
    if not isinstance(records, list):
        return None
    variants: list[Variant] = []
    for record in records:
        if not (isinstance(record, list) and len(record) == 4 and all(isinstance(x, str) and x for x in record)):
            return None
        variant = Variant(*record)
        module, colon, qualname = variant.function.partition(":")
        if not (module and colon and qualname):
            return None
        try:
            data = json.loads(variant.data)
        except ValueError:
            return None
        # (what JITFunction.preload reads; the name is the one it checks against the function)
        if not isinstance(data, dict) or data.get("name") != f"{module}.{qualname}" \
                or any(name not in data for name in _SPECIALIZATION_FIELDS):
            return None
        variants.append(variant)
    if len({v.key for v in variants}) != len(variants):
        return None
    return variants, tuple(traced)


def _active_target() -> tuple:
    from triton.runtime import driver

    t = driver.active.get_current_target()
    return (t.backend, t.arch, t.warp_size)


# ----------------------------------------------------------------------------- building

_WORKER: dict = {}


def _init_worker(kernel_name: Optional[str], plugins: Sequence[str], target: Optional[tuple],
                 owner: Optional[int] = None, device_type: Optional[str] = None, found=None) -> None:
    """A build or trace process: the plugins and the kernel loaded as the run's, and (``target`` given) a driver that
    knows only the target, so that no GPU context is made. ``owner``: the run's pid (it ends with it). ``found``: the
    queue a trace here reports its variants to (passed here: a queue crosses to a process only as it starts)."""
    _WORKER["found"] = found
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
        from jfa_verify.protocol.registry import get_kernel, load_plugins

        load_plugins(plugins)
        _WORKER["kernel"] = get_kernel(kernel_name)
        # Its implementation loaded now, not at a first call: a build process calls nothing, and a kernel that makes
        # its Triton module when loaded (a mutant's edited copy) left every variant unbuildable there
        # ("No module named '_jfa_mutant_...'": 221 of 235 on an H100, 2026-12-07). A failure is the run's to report.
        with contextlib.suppress(Exception):
            _WORKER["kernel"].impl


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


def _trace_in_worker(cases, device: str, backward: bool, memory: Optional[str], relations=()):
    """The trace in a child. Where its pool was given a queue (:func:`_pool`'s ``found``), it is told the target
    first, then each variant as the trace meets it, then ``("done", None)``."""
    import torch

    found = _WORKER.get("found")
    try:
        if found is not None:
            found.put(("target", _active_target()))
        variants, untraced = trace_variants(_WORKER["kernel"], cases, torch.device(device), backward=backward,
                                            memory=memory, relations=relations,
                                            on_found=None if found is None else lambda v: found.put(("variant", v)))
    finally:
        if found is not None:
            found.put(("done", None))
    return variants, untraced, _active_target()


def _pool(workers: int, kernel_name: Optional[str], plugins, target,
          device_type: Optional[str] = None, found=None) -> ProcessPoolExecutor:
    """Processes of the run's worker context with the kernel loaded (:func:`_init_worker`); ``found``: a queue of that
    context a trace in them reports to (:func:`_trace_in_worker`)."""
    import os

    from jfa_verify.run.isolation import start_worker_server, worker_context

    ctx = worker_context()
    start_worker_server(ctx)  # (deaf to Ctrl-C while it imports, in the main thread)
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(kernel_name, tuple(plugins), target, os.getpid(), device_type, found))


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
               build: Optional[Callable[[Variant], float]] = None, trace_here: bool = False,
               relations: Sequence = ()) -> Precompiled:
    """Build every distinct Triton variant ``cases`` (and the run's ``relations`` checks after them) need on
    ``device`` once, before they run.

    Args:
        kernel: the kernel under test (a :class:`~jfa_verify.protocol.kernel.Kernel`; its name and ``plugins`` load it
            in the child processes). cases: the run's cases, in order. device: where they run.
        jobs: build processes (at most one per variant).
        backward, memory: as the run's settings (they decide which launches a case makes).
        target: ``(backend, arch, warp_size)`` to trace and build for with a target-only driver (a machine without
            the GPU); None: the device's own.
        build: builds one variant, returning its seconds (tests count the calls); given, the builds run in this
            process, one at a time. trace_here: trace in this process, not in a child.

    The trace is read from jfa-verify's cache where an earlier run made it under the same :func:`trace_key` (the
    result's ``trace_cached``), and kept there otherwise (see the module's docstring).

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
    traces = _traces()
    try:
        key = trace_key(kernel, cases, device, backward=backward, memory=memory, target=target, relations=relations)
        cached = _checked_answer(traces.lookup(key), target) if key is not None else None
    except Exception:  # (a case that does not serialise, an unreadable source: the trace runs as it always did)
        key, cached = None, None
    builds = _Builds(out, jobs, kernel.name, plugins, build)
    with builds:
        if cached is not None:
            variants, target = cached
            out.trace_cached = True
        else:
            try:
                if trace_here:
                    if target is not None:
                        _init_worker(None, (), target, None, torch.device(device).type)
                    variants, out.untraced = trace_variants(kernel, cases, torch.device(device), backward=backward,
                                                            memory=memory, relations=relations)
                    if target is None:  # (the builds compile for the target traced, as after a child's trace)
                        target = _active_target()
                else:
                    variants, out.untraced, target = _trace_while_building(
                        kernel, cases, device, builds, backward=backward, memory=memory, plugins=plugins,
                        target=target, relations=relations)
            except Exception as e:  # a child that died or could not load the kernel: the run builds as it goes
                builds.drop()
                out.skipped = f"tracing failed: {type(e).__name__}: {e}"[:300]
                out.seconds = time.perf_counter() - t0
                return out
            if key is not None and not out.untraced:
                traces.put(key, _as_answer(variants, target))
                traces.save()
        out.trace_seconds = time.perf_counter() - t0
        out.variants = len(variants)
        for v in variants:
            out.by_kernel[v.name] = out.by_kernel.get(v.name, 0) + 1
        builds.finish(variants, target)
    out.seconds = time.perf_counter() - t0
    return out


def _trace_while_building(kernel, cases, device: str, builds: "_Builds", *, backward: bool, memory: Optional[str],
                          plugins, target: Optional[tuple], relations) -> tuple[list[Variant], list[str], tuple]:
    """Trace in a child process, handing each variant to ``builds`` as the child meets it (the builds start while the
    trace goes on: on an H100 the trace was 7.5 s of a cold run's 67-s step, every build waiting on it); returns the
    trace's ``(variants, untraced, target)``.

    Raises:
        Exception: the child died or could not load the kernel (the caller builds nothing).
    """
    import queue

    import torch

    from jfa_verify.run.isolation import worker_context

    found = worker_context().Queue()
    try:
        with _stopping(_pool(1, kernel.name, plugins, target, torch.device(device).type, found)) as pool:
            traced = pool.submit(_trace_in_worker, list(cases), device, backward, memory, tuple(relations))
            while True:  # (read to its "done": a child whose queue is not emptied cannot exit)
                try:
                    what, value = found.get(timeout=0.1)
                except queue.Empty:
                    if traced.done() and traced.exception() is not None:  # it died, or failed before its "done"
                        break
                    continue
                if what == "done":
                    break
                if what == "target":
                    builds.start(tuple(value))
                else:
                    builds.add(value)
            return traced.result()
    finally:
        found.close()


class _Builds:
    """The step's builds, started as variants are handed in (:meth:`add`, while the trace goes on): a variant no
    earlier run timed starts at once, in trace order; those timed wait for the trace's end (:meth:`finish`) and then
    start longest first (:func:`longest_first`'s order: untimed first, then the timed longest first). ``build``
    given: each builds in this process, one at a time (tests count the calls), else in a pool of ``jobs`` processes
    (started by :meth:`start`, with the target to build for)."""

    def __init__(self, out: Precompiled, jobs: int, kernel_name: str, plugins, build):
        self.out, self.jobs, self.kernel_name, self.plugins, self.build = out, jobs, kernel_name, plugins, build
        self.times = _build_seconds()
        self.known: dict = {}  # variant key -> its recorded seconds, or None
        self.shapes: dict = {}  # variant key -> :func:`_shape` (hashed once: ~5 kB of specialization data each)
        self.held: list[Variant] = []  # timed variants waiting for the trace's end
        self.futures: dict = {}  # Future -> Variant
        self.took: list[tuple[Variant, float]] = []
        self.pool = None
        self.tracing = True
        self.early = 0  # builds started before the trace ended

    def start(self, target: tuple) -> None:
        if self.build is None and self.pool is None:
            # (its processes start as work comes: a short run's few variants start few)
            self.pool = _pool(max(1, self.jobs), self.kernel_name, self.plugins, target)

    def add(self, v: Variant) -> None:
        if v.key in self.known:
            return
        self.shapes[v.key] = _shape(v)
        t = self.known[v.key] = self.times.lookup(self.shapes[v.key])
        if t is None:
            self._begin(v)
        else:
            self.held.append(v)

    def finish(self, variants: Sequence[Variant], target: tuple) -> None:
        """The trace ended with ``variants``: the rest start, then every build is waited for and its time kept."""
        out = self.out
        self.tracing = False
        if not variants:
            return
        self.start(target)
        for v in variants:
            self.add(v)
        order = longest_first(self.held, {self.shapes[v.key]: self.known[v.key] for v in self.held})
        self.held = []
        for v in order:
            self._begin(v)
        out.timed_before = sum(self.known[v.key] is not None for v in variants)
        out.workers = 1 if self.build is not None else max(1, min(self.jobs, len(variants)))
        out.built_while_tracing = self.early
        try:
            for f in as_completed(self.futures):
                try:
                    self._built(self.futures[f], f.result())
                except Exception as e:
                    out.errors.append(f"{self.futures[f].name}: {type(e).__name__}: {e}"[:300])
        except Exception as e:  # the pool itself broke (a worker killed): the rest builds at first launch
            out.errors.append(f"build processes: {type(e).__name__}: {e}"[:300])
        # (kept at the longest seen: a build that found its variant in Triton's disk cache took next to no time, and
        # would otherwise put a 20-s variant last on the next cold machine)
        for v, sec in self.took:
            before = self.known[v.key]
            if not isinstance(before, (int, float)) or sec > before:
                self.times.put(self.shapes[v.key], round(sec, 3))
        self.times.save()
        out.slowest = [(v.name, sec) for v, sec in sorted(self.took, key=lambda x: -x[1])[:SLOWEST_KEPT]]

    def _begin(self, v: Variant) -> None:
        self.early += self.tracing
        if self.build is not None:
            try:
                self._built(v, self.build(v))
            except Exception as e:
                self.out.errors.append(f"{v.name}: {type(e).__name__}: {e}"[:300])
            return
        try:
            self.futures[self.pool.submit(compile_variant, v)] = v
        except Exception as e:  # a broken pool: the variant builds at its first launch
            self.out.errors.append(f"{v.name}: {type(e).__name__}: {e}"[:300])

    def _built(self, v: Variant, seconds) -> None:
        self.out.compiled += 1
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            self.took.append((v, float(seconds)))

    def drop(self) -> None:
        """Nothing more is built: what has not started is cancelled (the trace failed)."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None

    def __enter__(self) -> "_Builds":
        return self

    def __exit__(self, kind, *_) -> None:
        if self.pool is None:
            return
        if kind is None:
            self.pool.shutdown(wait=True)
        else:  # Ctrl-C, a failure: what has not started is dropped, nothing waited for (the processes end with the run)
            self.pool.shutdown(wait=False, cancel_futures=True)
