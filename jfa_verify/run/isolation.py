"""Crash and hang isolation: cases run in a long-lived worker process that the parent can kill.

A kernel that aborts, segfaults, leaves a sticky CUDA error (an illegal address) or
hangs cannot be contained inside the process that runs it: Python cannot interrupt a
running GPU kernel, and a sticky CUDA error poisons every later launch of that process.
:class:`CaseWorker` runs cases in a child process that loads the same plugins, kernel and
device as the parent; the parent enforces the per-case timeout, kills the child when it
is exceeded, and turns the child's death into a :class:`~jfa_verify.run.runner.CaseResult`
with status ``"hang"`` or ``"crash"``. The next case starts a fresh child. The child is
kept between cases, so a case costs one round trip over a pipe, not a process start.

Children come from a fork server that has already imported torch and jfa-verify (a
restart after a crash costs a fork, not a Python start-up); where there is no fork
server, they are spawned. Nothing in a child touches the parent's CUDA context: the
parent need not initialise CUDA at all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Optional

from jfa_verify.cases.case import Case
from jfa_verify.core.errors import InvalidInput, KernelConfigError, PluginError
from jfa_verify.core.exits import ExitCode
from jfa_verify.run.runner import CaseResult, not_judged, sticky_device_error
from jfa_verify.run.settings import RunSettings
from jfa_verify.run.worker_server import launch_server, start_worker_server, worker_context

__all__ = ["CaseWorker", "WorkerSpec", "adopt_environment", "crash_result", "death_in_words", "start_child",
           "start_worker_server", "sticky_device_error", "worker_context"]

STARTUP_TIMEOUT_S = 300.0  # loading plugins and the kernel module; compiling happens per case, not here


def crash_result(case: Case, kernel: str, status: str, message: str, plugins: tuple[str, ...] = (),
                 seconds: float = 0.0) -> CaseResult:
    """The verdict of a case whose worker died (``status="crash"``) or ran past its timeout (``"hang"``)."""
    return CaseResult(case, kernel, status, message=message, seconds={"kernel": seconds}, plugins=tuple(plugins))


def death_in_words(status: int) -> str:
    """How a process ended, by its exit code as :mod:`subprocess` and :mod:`multiprocessing` give it (negative: the
    signal): ``"killed by SIGSEGV (signal 11)"``, or ``"exited with status 7"``."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"killed by {name} (signal {-status})"
    return f"exited with status {status}"


def _death(exitcode: Optional[int]) -> str:
    if exitcode is None:
        return "worker process ended without an exit status"
    return f"worker process {death_in_words(exitcode)}" + ("" if exitcode < 0 else " before returning a verdict")


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker loads and how it runs cases: the kernel by registry name, the device type, and the run's
    :class:`~jfa_verify.run.settings.RunSettings` whole (its ``plugins`` are the files that register the kernel; its
    ``backward``, ``budgets``, ``memory`` and ``accept`` judge each case, as :func:`~jfa_verify.run.runner.run_case`
    reads them)."""

    kernel: str
    device_type: str
    settings: RunSettings = field(default_factory=RunSettings)
    env: dict = field(default_factory=dict)  # set in the child before anything runs (CUDA_VISIBLE_DEVICES)

    @property
    def plugins(self) -> tuple[str, ...]:
        return self.settings.plugins


# A case worker keeps at most this much device memory cached between cases (PyTorch's caching allocator holds a
# case's peak until told): on an H200, 2026-12-02, 16 idle workers of two gates held 4-14 GiB each and the next
# large case of either gate ran out of memory.
KEEP_CACHED_BYTES = 2 << 30


def release_cached_memory(device) -> bool:
    """Return the cached device memory of this process to the driver when it holds more than
    :data:`KEEP_CACHED_BYTES` (a CUDA ``device`` only); True when it did."""
    import torch

    if torch.device(device).type != "cuda" or torch.cuda.memory_reserved(device) <= KEEP_CACHED_BYTES:
        return False
    torch.cuda.empty_cache()
    return True


def _peak_device_memory(device):
    """Start measuring: returns a function giving the most memory torch's allocator held on ``device`` since, in MiB
    (None off CUDA). What a worker count must leave room for (:data:`~jfa_verify.run.parallelism.GPU_GIB_PER_JOB`)."""
    import torch

    if torch.device(device).type != "cuda":
        return lambda: None
    torch.cuda.reset_peak_memory_stats(device)
    return lambda: round(torch.cuda.max_memory_allocated(device) / 2 ** 20, 1)


def _serve(conn, spec: WorkerSpec, owner: int, answer=None) -> None:
    """The child: load the kernel as ``owner`` (the process that started it) did, then answer one case per message
    until told to stop (``answer(conn, spec, kernel, device)``: another worker's loop, default :func:`_answer`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends us
    from jfa_verify.run.interrupts import exit_with_parent

    exit_with_parent(owner)  # (a case that hangs never reads the closed pipe that would tell us)
    os.environ.update(spec.env)
    try:
        from jfa_verify.core.device import select_device
        from jfa_verify.protocol.registry import get_kernel, load_plugins

        device = select_device(spec.device_type)
        load_plugins(spec.plugins)
        kernel = get_kernel(spec.kernel)
    except Exception as e:  # reported to the parent, which raises it with the worker's words
        with contextlib.suppress(OSError):
            conn.send(("setup-error", f"{type(e).__name__}: {e}"))
        return
    try:
        conn.send(("ready", os.getpid()))
        _warm_up(kernel, device)
        (answer or _answer)(conn, spec, kernel, device)
    except (EOFError, OSError):  # the parent went away (killed: a broken pipe or a reset connection): end quietly,
        return  # not with a traceback on the terminal (a new user's kill -9 of a campaign printed one per orphan)


def _warm_up(kernel, device) -> None:
    """What the first case would wait for: the kernel's implementation loaded and the device's context made, done
    before the first case arrives (a child started early does it while the run precompiles; on an H100 the first case
    of each worker took 3-4 s more than the rest). Best effort: a failure here is the first case's to report."""
    with contextlib.suppress(Exception):
        kernel.impl
        if device.type == "cuda":
            import torch

            torch.zeros(1, device=device).add_(1)
            torch.cuda.synchronize(device)
            if "triton" in sys.modules:  # (the kernel uses Triton: its driver loads its launch helpers once)
                from triton.runtime import driver

                driver.active.get_current_device()


def _answer(conn, spec: WorkerSpec, kernel, device) -> None:
    """:func:`_serve`'s loop: one verdict per case received, until told to stop."""
    from jfa_verify.run.runner import run_case

    while True:
        msg = conn.recv()
        if msg is None:
            return
        case, settings = msg
        settings = settings or spec.settings  # (None: the spec's, which the child already holds)
        memory = settings.memory
        t0 = time.perf_counter()
        peak = _peak_device_memory(device)
        try:
            result = run_case(case, kernel, device, settings)
        except KernelConfigError as e:  # the parent raises it: a usage error, not this case's verdict
            conn.send(("config-error", str(e)))
            continue
        except InvalidInput as e:  # likewise: the case itself is outside the contract
            conn.send(("invalid-input", str(e)))
            continue
        except Exception as e:  # run_case keeps its own failures as verdicts; this is the backstop: a verdict
            # with the traceback, not a worker dead of "status 1" with the traceback on its stderr only
            result = not_judged(CaseResult(case, spec.kernel, "error", memory=memory, plugins=spec.plugins),
                                "the case worker", e)
        result.seconds["worker"] = time.perf_counter() - t0
        result.peak_device_mib = peak()
        release_cached_memory(device)
        if result.status == "error" and sticky_device_error(result.message):
            result.status = "crash"
            result.message = "illegal address (a sticky CUDA error; the worker was restarted): " + result.message
            conn.send(result)
            os._exit(int(ExitCode.CRASH))  # this process's CUDA context is unusable
        conn.send(result)


def adopt_environment(env: dict) -> None:
    """Make this process's environment ``env``, whole: a process forked by :func:`worker_context`'s fork server has
    the server's older environment, not that of the process that asked for it (as a spawned one would)."""
    os.environ.clear()
    os.environ.update(env)


def start_child(ctx, proc) -> None:
    """Start ``proc`` (a process of ``ctx``) so that it imports deaf to Ctrl-C, without this process losing one: a
    fork server's child is forked by the server, started deaf (:func:`start_worker_server`), so this process waits for
    it with a stop held, raised once the child has started (the wait covers the server's imports, seconds: a
    campaign's Ctrl-C 2.5 s after its start was lost, and the campaign ran to its end); any other child starts inside
    :func:`children_start_deaf`.

    Raises:
        KeyboardInterrupt: a SIGINT or SIGTERM came while the child started (it has started).
    """
    from jfa_verify.run.interrupts import children_start_deaf, stops_deferred

    if ctx.get_start_method() == "forkserver":
        with stops_deferred():  # (one block: a stop is raised once the child has started, never between)
            launch_server(ctx)
            proc.start()
    else:
        with children_start_deaf():  # (a spawned child's imports would die of a Ctrl-C)
            proc.start()


class CaseWorker:
    """Runs cases in a child process, restarted after a crash or hang.

    Args:
        spec: what the child loads (:class:`WorkerSpec`).

    The child starts on the first :meth:`run`. Call :meth:`close` (or use ``with``) to end it.

    Raises:
        PluginError: from :meth:`run`, when the child cannot load the plugins or find the kernel
            (a kernel registered in the parent only, by :func:`~jfa_verify.protocol.registry.add_kernel`, cannot
            be isolated: register it from a plugin file or an entry point).
    """

    _answer = None  # the child's loop (a module-level function); None: :func:`_answer`, one verdict per case

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self._proc = None
        self._conn = None
        self._started = 0
        self._loading = False  # a child launched whose "ready" has not been read yet (start_early)
        self._launched_at = 0.0
        self.restarts = 0  # children started after the first (one per crash or hang)
        self.kills = 0  # calls of kill(), so that a call can tell one came while it launched its child
        self.startup_s = 0.0  # seconds from launching children to their "ready" (an early start counts from its launch)

    # -- lifecycle -----------------------------------------------------------------
    def start_early(self) -> None:
        """Start the child now without waiting for it to load (its imports, the kernel and the device's context
        load while the caller does other work: the run's precompile step); the first :meth:`run` waits for it.
        Nothing when a child is already there."""
        if self._proc is None:
            self._launch()

    def _start(self) -> None:
        self._launch()
        self._wait_ready()

    def _launch(self) -> None:
        self._launched_at = time.perf_counter()
        ctx = worker_context()
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, self.spec, os.getpid(), self._answer), daemon=True,
                           name="jfa-verify-case-worker")
        start_child(ctx, proc)
        child.close()
        # Known at once, so that kill() from another thread (Ctrl-C under Verifier.verify_all) ends a child
        # still loading too, instead of leaving it to run its case to the end (or hang in it).
        self._proc, self._conn, self._loading = proc, parent, True

    def _wait_ready(self) -> None:
        """Wait for the launched child's word that it loaded the kernel (a child started early may have sent it)."""
        proc, parent = self._proc, self._conn
        self._loading = False
        if not parent.poll(STARTUP_TIMEOUT_S):
            self.kill()
            raise PluginError(f"the case worker for kernel {self.spec.kernel!r} did not start within "
                              f"{STARTUP_TIMEOUT_S:.0f} s")
        try:
            kind, detail = parent.recv()
        except (EOFError, OSError):
            proc.join()
            self.kill()
            raise PluginError(f"the case worker for kernel {self.spec.kernel!r} died while loading it: "
                              f"{_death(proc.exitcode)}") from None
        if kind != "ready":
            proc.join()
            self.kill()
            raise PluginError(f"the case worker cannot load kernel {self.spec.kernel!r}: {detail} (an isolated "
                              f"kernel must come from a --plugin file or an installed entry point)")
        self.restarts = self._started
        self._started += 1
        self.startup_s += time.perf_counter() - self._launched_at

    def kill(self) -> None:
        """End the child now (it may be hung in a kernel); the next :meth:`run` starts a new one.

        Safe to call from another thread while :meth:`run` waits (``Verifier.verify_all`` ends its workers
        mid-case on Ctrl-C): that :meth:`run` returns a ``"crash"`` verdict."""
        self.kills += 1
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None  # first, so that a second caller (the run that saw it die) has nothing to do
        self._loading = False
        if proc is None:
            return
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        conn.close()

    def close(self) -> None:
        """Ask the child to stop, then make sure it has."""
        if self._proc is None or self._conn is None:
            return
        try:
            self._conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self._proc.join(5)
        self.kill()

    def __enter__(self) -> "CaseWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> Optional[int]:
        """The current child's process id (None before the first case or after a crash)."""
        return self._proc.pid if self._proc is not None else None

    def _call(self, message, timeout_s: Optional[float]) -> tuple[str, object, float]:
        """Send ``message`` to the child (started first when there is none) and wait for its answer:
        ``("answer", answer, seconds)``, or ``("hang", why, seconds)`` past ``timeout_s`` and ``("crash", why,
        seconds)`` when the child died; the child is killed in both, and the next call starts another."""
        kills = self.kills
        if self._conn is None:
            self._start()
        elif self._loading:
            self._wait_ready()
        if self.kills != kills:  # killed from another thread while the child launched, before it was known to kill()
            self.kill()  # (a campaign's end 2 s in, during the fork server's first start: the case ran its timeout)
            return "crash", "worker process was killed before it was sent its case", 0.0
        t0 = time.perf_counter()
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError):  # died between cases (e.g. killed from outside): start again
            self.kill()
            self._start()
            self._conn.send(message)
        return self._receive(timeout_s, t0)

    def _receive(self, timeout_s: Optional[float], t0: Optional[float] = None) -> tuple[str, object, float]:
        """Wait for the child's next answer to the message in flight, as :meth:`_call` does (a child that answers
        one message in steps, each within ``timeout_s``, sends several: the determinism check's reruns); ``t0``:
        where the seconds count from (default now)."""
        t0 = time.perf_counter() if t0 is None else t0
        proc, conn = self._proc, self._conn  # kept: kill() from another thread clears the attributes
        if conn is None:  # killed from another thread (Ctrl-C) between two answers
            return "crash", "worker process was killed before it answered", 0.0
        ready = conn.poll(timeout_s)  # also True when the child died (end of file)
        elapsed = time.perf_counter() - t0
        if not ready:
            self.kill()
            return "hang", f"no verdict after {timeout_s:g} s (--timeout); the worker process was killed", elapsed
        try:
            return "answer", conn.recv(), elapsed
        except (EOFError, OSError):
            proc.join(10)
            message = _death(proc.exitcode)
            self.kill()
            return "crash", message, elapsed

    # -- cases ---------------------------------------------------------------------
    def run(self, case: Case, timeout_s: Optional[float] = None, settings: Optional[RunSettings] = None) -> CaseResult:
        """Run ``case`` in the child; a death is a ``"crash"`` verdict, no answer within ``timeout_s`` a ``"hang"``.

        ``timeout_s`` counts from sending the case (kernel compilation included); None waits forever.
        ``settings``: how this case is judged (:func:`jfa_verify.run.runner.run_case`; default the spec's: a memory
        mode or ``backward`` of one case, ``spec.settings.replace(memory="nan")``; the child keeps the plugins it
        loaded).

        Raises:
            KernelConfigError: the kernel's ``load()`` returned no implementation in the child.
        """
        kind, result, elapsed = self._call((case, settings), timeout_s)
        if kind != "answer":
            return crash_result(case, self.spec.kernel, kind, result, self.spec.plugins, elapsed)
        if isinstance(result, tuple) and result[0] == "config-error":
            raise KernelConfigError(result[1], self.spec.kernel)
        if isinstance(result, tuple) and result[0] == "invalid-input":
            raise InvalidInput(result[1])
        if result.status == "crash":  # the child saw a sticky device error and is exiting
            self.kill()
        result.seconds["ipc"] = max(0.0, elapsed - result.seconds.get("worker", elapsed))
        return result
