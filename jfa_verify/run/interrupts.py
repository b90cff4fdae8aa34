"""SIGTERM handled like Ctrl-C, so a stopped ``run`` or ``fuzz`` writes what it has (summary, report) and
leaves no ``"running"`` case file behind; and worker processes that end with the process that started them."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Iterator, Optional

__all__ = ["children_start_deaf", "exit_with_parent", "hear_interrupts", "interrupt_behind", "terminate_as_interrupt"]

# How often a worker checks that its parent is still there (where the kernel cannot tell it).
PARENT_POLL_S = 1.0


def exit_with_parent(owner: Optional[int] = None) -> None:
    """Kill this process (SIGKILL) as soon as the process that started it is gone; call it first thing in a worker.

    ``owner``: the pid of the process this worker serves, when that is not its parent (a case worker forked by
    multiprocessing's fork server, which outlives a killed owner); None for the parent.

    A new user's ``kill -9`` of ``jfa-verify fuzz`` left its campaign workers and their case workers running for
    good (one at 95% of a core in a hanging kernel), still writing into the reproducer folder and the database.
    Case files are written before each case runs, so a killed worker loses nothing that a later campaign does
    not recover. For a parent on Linux the kernel delivers the signal (``prctl(PR_SET_PDEATHSIG)``); a daemon
    thread also checks every :data:`PARENT_POLL_S` seconds (other systems, and an ``owner``).
    """
    if owner is None:
        parent = os.getppid()
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # not Linux: the thread below does it
            pass

        def alive() -> bool:
            return os.getppid() == parent
    else:
        def alive() -> bool:
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                return False
            except PermissionError:  # there, but another user's: a reused pid, so the owner is gone
                return False
            return True

    def watch() -> None:
        while alive():
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="jfa-verify-parent-watch").start()


def interrupt_behind(exc: BaseException) -> Optional[KeyboardInterrupt]:
    """The :class:`KeyboardInterrupt` that ``exc`` is, or was raised while handling (its ``__context__`` chain).

    An interrupt that lands inside :mod:`threading`'s lock code (a main thread waiting on futures) can
    surface as ``RuntimeError: release unlocked lock`` raised while handling it: on an H200, 2026-12-03, a
    ``timeout`` SIGTERM to ``jfa-verify run --jobs 6`` ended with that traceback and no interrupted report.
    Callers re-raise what this returns, so such a stop is handled as the interrupt it was.
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        seen.add(id(exc))
        exc = exc.__context__
    return None


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside the block, SIGTERM raises :class:`KeyboardInterrupt` in the main thread (as SIGINT does).

    Outside the main thread (where Python cannot install handlers) it does nothing. The previous
    handler is restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def children_start_deaf() -> Iterator[None]:
    """Inside the block, processes started (spawned, or a fork server) begin with SIGINT and SIGTERM ignored.

    A Ctrl-C reaches a terminal's whole process group: a worker still importing torch (Python's start-up, before
    any code of ours) died of it with a traceback, and the campaign reported "worker 0 died: KeyboardInterrupt"
    instead of an interrupt. A child started so imports undisturbed (an ignored signal stays ignored across exec,
    and Python then installs no handler); a campaign worker takes the signals again once in its own code
    (:func:`hear_interrupts`), where the coordinator's stop (or the signal) ends it cleanly. The block's own
    process ignores them for as long as the start takes (milliseconds). Outside the main thread it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def hear_interrupts() -> None:
    """Ctrl-C raises :class:`KeyboardInterrupt` again in a process started by :func:`children_start_deaf` (SIGTERM:
    see :func:`terminate_as_interrupt`)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
