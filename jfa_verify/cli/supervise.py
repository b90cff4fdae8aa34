"""``jfa-verify run --no-isolate`` watched by a second process, so that a kernel's crash still ends in exit 4.

``--no-isolate`` runs every case in the run's own process: a kernel that segfaults, aborts or calls ``os._exit``
ends that process where it stands, and no code of its own runs after (a new user's run exited 139 beside a report
left a placeholder: issue 43, 9). The console script therefore runs such a run as a child of a small waiting
process (this module): the cases still run in one process, the run's own, with its terminal, and the waiting
process, when that child dies by a signal or with a status no command gives, records the case in flight as a crash
(:func:`~jfa_verify.run.postmortem.record_death`: its case file, written before it ran, and the report) and exits
4. Only the console script is watched so (``main()`` called with no arguments); a caller of ``main([...])`` in its
own process (tests, the API) runs in that process, as before, and a crash there takes it down.

Signals: SIGTERM (a CI timeout, ``kill``) is passed on to the run; so is SIGINT, except when it came from this
terminal's Ctrl-C, which reaches the run by itself (both are in the terminal's foreground group).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Optional

from jfa_verify.core.exits import ExitCode
from jfa_verify.core.paths import DEFAULT_REPRODUCERS

__all__ = ["ENV", "needs_watching", "watched_run"]

ENV = "JFA_VERIFY_WATCHED"  # set in the watched child: it runs the command itself
# The statuses a command exits with: any other (a death by a signal, or an os._exit of the kernel's own) is a crash.
_STATUSES = {int(code) for code in ExitCode}


def needs_watching(args, argv) -> bool:
    """Whether this process should run the command as a watched child: the console script (``argv`` None) running
    ``run --no-isolate``, not already watched."""
    return (argv is None and args.command == "run" and getattr(args, "isolate", True) is False
            and not os.environ.get(ENV))


def _terminal_sends_it() -> bool:
    """Whether a Ctrl-C here reaches the child directly: this process is in its terminal's foreground group."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def watched_run(args) -> int:
    """Run this command line again in a child (with :data:`ENV` set) and wait; its exit status, or 4 after recording
    its death mid-case (see the module's docstring)."""
    since = time.time()
    child = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", *sys.argv[1:]], env={**os.environ, ENV: "1"})
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
    if status in _STATUSES:
        return status
    if status in (-signal.SIGINT, -signal.SIGTERM):  # stopped before its own handlers were in place
        return int(ExitCode.INTERRUPTED)
    from jfa_verify.run.postmortem import death_in_words, record_death  # (torch loads here, after a death only)

    how = death_in_words(status)
    in_flight = record_death(args.report, args.reproducers or DEFAULT_REPRODUCERS, since, how)
    print(f"[CRASH] jfa-verify run: the run's process {how}"
          + (f" while running the case in {in_flight.case_file} (--no-isolate runs cases in the run's own process); "
             f"the case file now says so, `jfa-verify findings` lists it and `{in_flight.replay}` replays it in a "
             f"case worker" if in_flight else " between cases (no case was running)")
          + f"; the report ({args.report}) says what happened. Drop --no-isolate to have a crash be one case's "
            f"finding and the run go on.", file=sys.stderr, flush=True)
    return int(ExitCode.CRASH)
