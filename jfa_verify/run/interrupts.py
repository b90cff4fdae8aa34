"""SIGTERM handled like Ctrl-C, so a stopped ``run`` or ``fuzz`` writes what it has (summary, report) and
leaves no ``"running"`` case file behind; and worker processes that end with the process that started them."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Iterator, Optional

__all__ = ["children_start_deaf", "exit_with_parent", "hear_interrupts", "interrupt_behind", "process_alive",
           "process_start", "stops_deferred", "stops_held", "terminate_as_interrupt", "verdict_scope",
           "writing_verdict"]

# How often a worker checks that its parent is still there (where the kernel cannot tell it).
PARENT_POLL_S = 1.0


def process_start(pid: int) -> Optional[int]:
    """When process ``pid`` started (clock ticks since boot, Linux's ``/proc``), or None where that cannot be read:
    with its pid it names one process, even once a dead one's pid is reused."""
    try:
        return int(open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def process_alive(pid: int, start: Optional[int] = None) -> bool:
    """Process ``pid`` is still running and, when ``start`` (:func:`process_start` taken earlier) is known and can
    be read again, is the same process (not a later one given the dead one's pid). Another user's process of that
    pid counts as running unless its start time says otherwise (``kill`` may not signal it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        pass
    return start is None or process_start(pid) in (None, start)


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
        start = process_start(owner)

        def alive() -> bool:
            return process_alive(owner, start)

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
        if not _VERDICT["written"]:  # (once it is, a stop changes nothing until the scope ends: verdict_scope)
            signal.signal(signal.SIGTERM, previous)


# The command's verdict (:func:`verdict_scope`): "open" while a scope is open, "written" once its final report is on
# disk.
_VERDICT: dict = {"open": False, "written": False}
_STOPS = (signal.SIGINT, signal.SIGTERM)  # what stops a command: Ctrl-C, and a polite kill (terminate_as_interrupt)


def _after_verdict(signum, frame) -> None:
    """A stop that comes once the run's verdict is written: the run has finished, so it changes nothing."""


@contextlib.contextmanager
def verdict_scope(*, restore: bool = True) -> Iterator[None]:
    """A command's lifetime, inside which :func:`writing_verdict` can make the command's result final.

    Once the final report is written, SIGINT and SIGTERM no longer interrupt: what is left is printing, and the
    exit status is the report's (a new user's Ctrl-C just after a run finished gave exit 130 beside a report that
    said finished, all passed: issue 43, 10). ``restore``: put the handlers back when the scope ends (a caller's
    process: tests, the API); False for a process that exits right after (the console script), since a stop
    between the scope's end and the exit would still be an interrupt. Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread() or _VERDICT["open"]:
        yield
        return
    entry = {sig: signal.getsignal(sig) for sig in _STOPS}
    _VERDICT.update(open=True, written=False)
    try:
        yield
    finally:
        written = _VERDICT["written"]
        _VERDICT.update(open=False, written=False)
        if restore and written:
            _restore(entry)


def _stops_to(handler) -> dict:
    """Point SIGINT and SIGTERM at ``handler``; their handlers before (for :func:`_restore`)."""
    return {sig: signal.signal(sig, handler) for sig in _STOPS}


def _restore(before: dict) -> None:
    for sig, handler in before.items():
        signal.signal(sig, handler)


def _hold_stops() -> tuple[list, dict]:
    """Point SIGINT and SIGTERM at a handler that appends each signal number to the returned list; returns the list
    and the handlers before (for :func:`_restore`)."""
    held: list = []
    return held, _stops_to(lambda signum, frame: held.append(signum))


def _interrupt(held: list) -> KeyboardInterrupt:
    """The interrupt of the first stop ``held`` (signal numbers, in the order they came)."""
    return KeyboardInterrupt(f"signal {signal.Signals(held[0]).name}")


@contextlib.contextmanager
def writing_verdict() -> Iterator[None]:
    """Around the write of a command's final report, inside a :func:`verdict_scope`: a stop that comes during the
    write is held, and once the block ends the command has finished: that stop and any later one change nothing
    (they no longer raise :class:`KeyboardInterrupt`). A block that raises lets a held stop go as the interrupt it
    was. Outside a scope, or outside the main thread, it does nothing."""
    if not _VERDICT["open"] or threading.current_thread() is not threading.main_thread():
        yield
        return
    held, before = _hold_stops()
    try:
        yield
    except BaseException:
        _restore(before)
        if held:
            raise _interrupt(held)
        raise
    _stops_to(_after_verdict)
    _VERDICT["written"] = True


@contextlib.contextmanager
def stops_deferred() -> Iterator[None]:
    """Inside the block, a SIGINT or SIGTERM is held, then raised as :class:`KeyboardInterrupt` once the block ends:
    for a step that must neither be cut in two nor lose the stop (a child's start: a process object interrupted in
    it does not know its child, and joining it later raised "can only join a started process"). Outside the main
    thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held, before = _hold_stops()
    try:
        yield
    finally:
        _restore(before)
    if held:
        raise _interrupt(held)


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM change nothing: for the report of a command already interrupted, whose
    stop is already its outcome (a second Ctrl-C while `run` wrote its interrupted report left the start-of-run
    placeholder in its place). The handlers are restored on exit. Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = _stops_to(lambda signum, frame: None)
    try:
        yield
    finally:
        if not _VERDICT["written"]:  # (once it is, a stop changes nothing until the scope ends: verdict_scope)
            _restore(before)


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
    before = _stops_to(signal.SIG_IGN)
    try:
        yield
    finally:
        _restore(before)


def hear_interrupts() -> None:
    """Ctrl-C raises :class:`KeyboardInterrupt` again in a process started by :func:`children_start_deaf` (SIGTERM:
    see :func:`terminate_as_interrupt`)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
