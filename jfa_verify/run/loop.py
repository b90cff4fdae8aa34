"""The one run loop: cases through a kernel with write-ahead reproducers (``run``, ``fuzz``, ``gate`` and
``bisect`` all verify through :class:`Verifier`)."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from pathlib import Path
from typing import Callable, Iterable, Optional

import torch

from jfa_verify.cases.case import Case
from jfa_verify.core.errors import KernelConfigError, PluginError
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.run.corpus import Corpus
from jfa_verify.run.interrupts import interrupt_behind
from jfa_verify.run.runner import CaseResult, ran_out_of_memory, run_case
from jfa_verify.run.settings import RunSettings

__all__ = ["Verifier"]


class Verifier:
    """Verifies cases one by one against one kernel on one device.

    Every case's reproducer file is written before the kernel runs (a crash,
    hang or kill leaves it behind), removed when the case passes and rewritten
    with the verdict when it fails (:class:`~jfa_verify.run.corpus.Corpus`).

    In-process (``isolate=False``) a kernel that aborts or segfaults takes the
    caller with it, and a hang past ``timeout_s`` ends the process (exit 3)
    after marking the case file ``"hang"``. Isolated (``isolate=True``), cases
    run in a :class:`~jfa_verify.run.isolation.CaseWorker` child process: a crash
    is the case's verdict (status ``"crash"``), a hang past ``timeout_s`` too
    (``"hang"``, the child is killed), the child is restarted, and the caller
    goes on with the next case. An interrupted case (Ctrl-C, SIGTERM as
    :class:`KeyboardInterrupt`) has no verdict: its file is removed, or put
    back as it was when it stood there before (a saved finding replayed).

    Args:
        kernel: the registered kernel under test.
        device: where the cases run.
        corpus: the reproducer folder (a :class:`Corpus` or a path).
        settings: how cases run and are judged (:class:`~jfa_verify.run.settings.RunSettings`: ``backward``,
            ``timeout_s``, ``plugins``, ``budgets``, ``isolate``, ``memory``, ``accept``, ``jobs``); None: the
            defaults. No ``plugins``: the plugin file that registered ``kernel``, if one did. ``jobs`` isolated
            workers run cases at the same time (``verify_all`` hands each the next case; verdicts do not depend on
            it); on a GPU they share the card: Triton compiles a kernel's variants on the CPU, which is most of a
            suite's time on a fresh cache, so workers overlap it.
        worker_env: environment variables of the isolated worker (``CUDA_VISIBLE_DEVICES`` to pin it).

    A variant of a run's settings is derived with ``settings.replace(...)`` (validated again: ``jobs`` < 1, or
    ``jobs`` > 1 without ``isolate``, raise :class:`~jfa_verify.core.errors.InvalidInput`).

    Use it as a context manager (or call :meth:`close`) to end an isolated worker.
    """

    def __init__(self, kernel: Kernel, device: torch.device, corpus: "Corpus | str | Path",
                 settings: Optional[RunSettings] = None, *, worker_env: Optional[dict] = None):
        settings = settings or RunSettings()
        if not settings.plugins:
            from jfa_verify.protocol.registry import plugin_of

            # The plugin file that registered the kernel, where one did: case files and replay commands name it, and
            # isolated workers load it (a pytest suite's Verifier(kernel, device, corpus) wrote replay commands
            # without --plugin, which failed "no kernel named ...": a new user's trial, 2026-12-07).
            registered_by = plugin_of(kernel.name)
            if registered_by:
                settings = settings.replace(plugins=(registered_by,))
        self.settings = settings
        self.kernel, self.device = kernel, torch.device(device)
        self.corpus = corpus if isinstance(corpus, Corpus) else Corpus(corpus)
        self.workers = []
        if settings.isolate:
            from jfa_verify.run.isolation import CaseWorker, WorkerSpec

            spec = WorkerSpec(kernel.name, self.device.type, settings, dict(worker_env or {}))
            self.workers = [CaseWorker(spec) for _ in range(settings.jobs)]
        self.worker = self.workers[0] if self.workers else None
        self._interrupted = threading.Event()  # set by verify_all when it ends its workers mid-case
        # the cases an interrupt stopped mid-run, with the seconds each had run: no verdict, so no case file, but the
        # caller names them (a new user's Ctrl-C on a hanging case left no word of which case it was)
        self.interrupted_cases: list[tuple[Case, float]] = []
        # verify_all's second runs of cases that ran out of device memory: [run again, no longer out of memory]
        self.memory_reruns = [0, 0]

    @property
    def isolated(self) -> bool:
        return self.worker is not None

    def verify(self, case: Case, annotations: Optional[dict] = None, *, worker=None) -> CaseResult:
        """Run one case; its reproducer stays in the corpus only if it failed (``annotations``: extra keys
        for its file, see :meth:`Corpus.guard`). ``result.seconds["io"]`` is the time spent on the file.
        ``worker``: which of the isolated workers runs it (default the first).

        Raises:
            KernelConfigError: the kernel's ``load()`` returned no implementation (its file is removed).
            PluginError: an isolated worker cannot load the kernel's plugins (its file is removed).
        """
        worker = worker or self.worker
        if self._interrupted.is_set():  # a thread of verify_all that took a case after Ctrl-C: do not start it
            raise KeyboardInterrupt
        t0 = time.perf_counter()
        settings = self.settings
        watchdog = None if self.isolated else settings.timeout_s  # isolated: the parent keeps the time
        if settings.memory:  # a replay must run it under the same memory conditions
            annotations = {**(annotations or {}), "memory": settings.memory}
        with self.corpus.guard(case, self.kernel.name, str(self.device), watchdog, settings.plugins,
                               annotations) as path:
            t1 = time.perf_counter()
            try:
                if self.isolated:
                    try:
                        result = worker.run(case, settings.timeout_s)
                    except Exception:
                        if not self._interrupted.is_set():
                            raise
                    if self._interrupted.is_set():  # its worker was killed by the interrupt (whatever run then
                        raise KeyboardInterrupt  # returned or raised): no verdict
                else:
                    result = run_case(case, self.kernel, self.device, settings)
            except KeyboardInterrupt:
                self.interrupted_cases.append((case, time.perf_counter() - t1))  # (list.append: thread-safe)
                self.corpus.discard(path)
                if self.isolated:
                    worker.kill()  # it is mid-case; the next case starts a fresh one
                raise
            except (KernelConfigError, PluginError):  # the kernel's registration is wrong, or its worker cannot
                self.corpus.discard(path)  # load it: no verdict, so no case file (a "running" one reads as a crash)
                raise
            t2 = time.perf_counter()
            saved = self.corpus.record(path, result)
            result.reproducer = str(saved) if saved else None
        result.seconds["io"] = (t1 - t0) + (time.perf_counter() - t2)
        return result

    def abandon(self) -> None:
        """End the isolated case in flight now, from another thread (a campaign whose time is up, or that was told to
        stop, while a case still runs: a hang would hold it for its whole ``timeout_s``). :meth:`verify` then raises
        :class:`KeyboardInterrupt` as for Ctrl-C: no verdict, the case file removed, the case in
        :attr:`interrupted_cases`; later calls raise it at once. In-process: nothing (a running kernel cannot be
        interrupted)."""
        if not self.isolated:
            return
        self._interrupted.set()
        for w in self.workers:
            w.kill()

    def verify_all(self, cases: Iterable[Case], on_result: Optional[Callable[[CaseResult], None]] = None, *,
                   deadline: Optional[float] = None) -> list[Optional[CaseResult]]:
        """Run every case (none after ``deadline``); the results come back in the order of ``cases``.
        ``on_result(result)`` is called after each, in this thread, in the order they finish (in order when
        ``jobs`` is 1).

        Args:
            cases: the cases to run.
            on_result: called with each :class:`~jfa_verify.run.runner.CaseResult` as it comes (progress).
            deadline: a :func:`time.monotonic` instant after which no further case starts (cases already
                running finish). A case not started by then has no result: its place in the list holds
                None, and ``on_result`` is not called for it. None (the default): every case runs, and
                every place holds its result.

        A case that ran out of device memory (:func:`~jfa_verify.run.runner.ran_out_of_memory`) runs once more, alone,
        after the others (before ``deadline``), with this verifier's other workers ended first; that verdict is the
        one returned (``on_result`` is not called again; its message says when it ran out again), and
        :attr:`memory_reruns` counts such runs and those no longer out of memory.
        """
        late = lambda: deadline is not None and time.monotonic() > deadline  # noqa: E731
        cases = list(cases)
        results = self._verify_pass(cases, on_result, late)
        # Out of device memory beside other work on the card (this verifier's own workers, another job's: on an
        # H200, 2026-12-02, two gates side by side lost 5 suite cases so), a verdict says nothing of the kernel:
        # such a case runs once more, alone, after the others; what that run says stands.
        again = [i for i, result in enumerate(results) if result is not None and ran_out_of_memory(result.message)]
        if again and not late():
            # Idle workers keep their CUDA context, compiled kernels and cached blocks: on an H100, 2026-12-07, eleven
            # idle ones held 5-7.5 GiB each, and a case needing 8.8 GiB ran out again "alone". They restart on use.
            for w in self.workers:
                if w is not self.worker:
                    w.close()
        for i in again:
            if late():
                break
            results[i] = self.verify(cases[i], worker=self.worker)
            self.memory_reruns[0] += 1
            if ran_out_of_memory(results[i].message):
                ended = max(len(self.workers) - 1, 0)
                results[i].message += ("\n  run again alone after the other cases"
                                       + (f" ({ended} other case worker(s) of this run ended first)" if ended else "")
                                       + ": out of device memory again")
            else:
                self.memory_reruns[1] += 1
        return results

    def _verify_pass(self, cases: list, on_result, late) -> list[Optional[CaseResult]]:
        """:meth:`verify_all`'s pass over ``cases``: in order in-process or on one worker, else on every worker."""
        if len(self.workers) <= 1:
            results = []
            for case in cases:
                if late():
                    results.append(None)
                    continue
                result = self.verify(case)
                results.append(result)
                if on_result is not None:
                    on_result(result)
            return results
        idle = queue.SimpleQueue()
        for w in self.workers:
            idle.put(w)

        def one(case: Case) -> Optional[CaseResult]:
            worker = idle.get()
            try:
                if late():  # its turn came after the deadline: it does not start
                    return None
                return self.verify(case, worker=worker)
            finally:
                idle.put(worker)

        results: list = [None] * len(cases)
        pool = ThreadPoolExecutor(max_workers=len(self.workers), thread_name_prefix="jfa-verify-case")
        futures: dict = {}
        try:
            for i, case in enumerate(cases):
                futures[pool.submit(one, case)] = i
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                if on_result is not None and results[futures[future]] is not None:
                    on_result(results[futures[future]])
        except BaseException as exc:  # Ctrl-C or a framework error: end every worker mid-case, wait for nothing
            self._interrupted.set()
            for future in futures:
                future.cancel()
            while True:  # again until every thread is done: one may still be starting its worker process
                for w in self.workers:
                    w.kill()
                if not wait(futures, timeout=0.5).not_done:
                    break
            interrupt = interrupt_behind(exc)
            if interrupt is not None and interrupt is not exc:
                raise interrupt from None  # a stop that landed in threading's lock code is still a stop
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self._interrupted.clear()
        return results

    def start_early(self) -> None:
        """Start the isolated workers' children now, without waiting for them to load
        (:meth:`~jfa_verify.run.isolation.CaseWorker.start_early`); nothing in-process."""
        for w in self.workers:
            w.start_early()

    def close(self) -> None:
        """End the isolated workers (nothing to do in-process)."""
        for w in self.workers:
            w.close()

    def __enter__(self) -> "Verifier":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
