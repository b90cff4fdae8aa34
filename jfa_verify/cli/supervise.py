"""Commands that run a kernel in their own process, watched by a second one, so that a kernel's crash ends in exit 4.

``run --no-isolate`` runs every case in the run's own process, and ``stress`` (also ``gate --checks stress``) reruns
its cases in its own process (the timing perturbation needs the kernel, the noise kernel and the launches in one
process). A kernel that segfaults, aborts or calls ``os._exit`` ends that process where it stands, and no code of its
own runs after (a new user's run exited 139 beside a report left a placeholder: issue 43, 9; a new user's kernel
calling ``os._exit(0)`` made ``stress`` and ``gate --checks stress`` exit 0 with no verdict, 2026-12-05). The console
script therefore runs such a command as a child of a small waiting process (this module): the cases still run in one
process, the command's own, with its terminal. The command writes its exit status to a file the watcher names
(:func:`~jfa_verify.core.exits.declare_exit`) whenever it ends by its own choice; a child that ended without writing
it (a signal, any ``os._exit`` of the kernel's, 0 included) died, and the watcher records the case in flight as a
crash (:func:`~jfa_verify.run.postmortem.record_death`: its case file, written before it ran, and ``run``'s report)
and exits 4. Only the console script is watched so (``main()`` called with no arguments); a caller of ``main([...])``
in its own process (tests, the API) runs in that process, as before, and a crash there takes it down.

Signals: SIGTERM (a CI timeout, ``kill``) is passed on to the command; so is SIGINT, except when it came from this
terminal's Ctrl-C, which reaches the command by itself (both are in the terminal's foreground group).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from jfa_verify.core.exits import WATCHED_ENV, ExitCode
from jfa_verify.core.paths import DEFAULT_REPRODUCERS

__all__ = ["needs_watching", "watched_run"]


def runs_kernel_in_process(args) -> bool:
    """Whether the parsed command runs the kernel in its own process: ``run --no-isolate``, ``stress``, and ``gate``
    with the stress check."""
    if args.command == "run":
        return getattr(args, "isolate", True) is False
    if args.command == "stress":
        return True
    return args.command == "gate" and "stress" in (getattr(args, "checks", None) or ())


def needs_watching(args, argv, watched: bool) -> bool:
    """Whether this process should run the command as a watched child: the console script (``argv`` None) running a
    command of :func:`runs_kernel_in_process`, not already watched (``watched``: it is that child)."""
    return argv is None and not watched and runs_kernel_in_process(args)


def _declared(path: Path) -> Optional[int]:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _terminal_sends_it() -> bool:
    """Whether a Ctrl-C here reaches the child directly: this process is in its terminal's foreground group."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def watched_run(args) -> int:
    """Run this command line again in a child (:data:`~jfa_verify.core.exits.WATCHED_ENV` naming the file it declares
    its exit status to) and wait; the status it declared, 130 if a signal stopped it before it could, or 4 after
    recording its death mid-case (see the module's docstring)."""
    since = time.time()
    fd, name = tempfile.mkstemp(prefix="jfa-verify-exit-")
    os.close(fd)
    marker = Path(name)
    try:
        status, declared = _wait_for(marker)
    finally:
        marker.unlink(missing_ok=True)
    if declared is not None:  # the command ended by its own choice (a crash in the interpreter's teardown after it
        if declared == ExitCode.HANG and args.command == "run":  # had said so is not the kernel's: its verdict stands)
            _hang(args, since)
        return declared
    if status in (-signal.SIGINT, -signal.SIGTERM):  # stopped before its own handlers were in place
        return int(ExitCode.INTERRUPTED)
    return _death(args, status, since)


def _wait_for(marker: Path) -> tuple:
    """Run the command line again in a child that declares its exit status to ``marker`` (an empty file);
    ``(status, declared)``."""
    child = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", *sys.argv[1:]],
                             env={**os.environ, WATCHED_ENV: str(marker)})
    terminal = _terminal_sends_it()

    def pass_on(signum, frame) -> None:
        if signum == signal.SIGINT and terminal:
            return  # the terminal's Ctrl-C reached the child too
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {sig: signal.signal(sig, pass_on) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        status: Optional[int] = None
        while status is None:
            try:
                status = child.wait()
            except KeyboardInterrupt:  # (a handler of ours does not raise; kept for safety) wait on
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status, _declared(marker)


def _hang(args, since: float) -> None:
    """``run --no-isolate``'s watchdog ended the run's process on a hung case (exit 3, its case file marked, a
    ``[HANG]`` line printed): the report says so too (:func:`~jfa_verify.run.postmortem.record_hang`)."""
    from jfa_verify.run.postmortem import record_hang  # (torch loads here, after a hang only)

    record_hang(args.report, getattr(args, "reproducers", None) or DEFAULT_REPRODUCERS, since)


def _death(args, status: int, since: float) -> int:
    """Record a watched command's death (``status``: a signal's, or an exit it did not declare) and say so; 4."""
    from jfa_verify.run.postmortem import death_in_words, record_death  # (torch loads here, after a death only)

    how = death_in_words(status) + ("" if status < 0 else " before jfa-verify had finished (an exit of the kernel's "
                                                         "own, such as os._exit)")
    folder = getattr(args, "reproducers", None) or DEFAULT_REPRODUCERS
    if args.command == "run":
        in_flight = record_death(args.report, folder, since, how)
        print(f"[CRASH] jfa-verify run: the run's process {how}"
              + (f" while running the case in {in_flight.case_file} (--no-isolate runs cases in the run's own "
                 f"process); the case file now says so, `jfa-verify findings` lists it and `{in_flight.replay}` "
                 f"replays it in a case worker" if in_flight else " between cases (no case was running)")
              + (f"; {in_flight.failed_before} case(s) had failed before it (their files are in {folder}, "
                 f"`jfa-verify findings {folder}` lists them)" if in_flight and in_flight.failed_before else "")
              + f"; the report ({args.report}) says what happened. Drop --no-isolate to have a crash be one case's "
                f"finding and the run go on.", file=sys.stderr, flush=True)
        return int(ExitCode.CRASH)
    # stress reruns its cases interleaved, each case's file written before the first rerun: the one in flight is
    # one of those it left running
    in_flight = record_death(None, folder, since, how, who="the stress check, which reruns its cases in its own "
                                                           "process (one of the cases left running)")
    what = "jfa-verify gate (its stress check)" if args.command == "gate" else "jfa-verify stress"
    print(f"[CRASH] {what}: its process {how} while rerunning the stress cases"
          + (f"; their case files in {folder} now say so (`jfa-verify findings {folder}` lists them, and "
             f"`{in_flight.replay}` replays one in a case worker)" if in_flight else "")
          + ". No report was written: the process that would write it is gone. Exit 4.", file=sys.stderr, flush=True)
    return int(ExitCode.CRASH)
