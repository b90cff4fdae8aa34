"""Exit codes of every ``jfa-verify`` command (documented in the README; each is tested)."""

from __future__ import annotations

import contextlib
import enum
import os
import threading
from typing import Iterable, Iterator, Optional

__all__ = ["WATCHED_ENV", "ExitCode", "ExitRefused", "FINDINGS_IN_WORDS", "REPORT_INTERNAL_ERRORS", "declare_exit",
           "exit_call", "exit_code_for", "exits_refused", "take_watch"]


class ExitCode(enum.IntEnum):
    """What a command's exit status means. A finding is not a usage error."""

    OK = 0  # everything checked passed
    FINDING = 1  # a kernel failed a check (wrong output, contract, invariant, kernel exception)
    USAGE = 2  # bad arguments or configuration; nothing (or nothing meaningful) was checked; a gate check that
    # could not judge (a tool that failed or ran past its time) and found nothing
    HANG = 3  # a case ran past --timeout (recorded as a finding with status "hang"; older case files say "timeout")
    CRASH = 4  # the kernel crashed its process (abort, segfault, illegal address)
    INTERNAL = 70  # a bug in jfa-verify itself (an uncaught exception): no verdict on the kernel
    # (sysexits' EX_SOFTWARE)
    INTERRUPTED = 130  # Ctrl-C / SIGTERM: what was done so far is written, then the command stops


# Where an internal error (ExitCode.INTERNAL) is to be reported, as its message says.
REPORT_INTERNAL_ERRORS = ("report it to jfa-verify's maintainers (the project's issue tracker) with the command line, "
                          "`jfa-verify --version` and this traceback")


# Which finding decides the exit status when a run has several kinds: a crash first (the kernel can
# take down the process, or the device, of whatever runs it), then a hang (it can block a whole
# CI job), then any ordinary failure (wrong output, contract, invariant, exception).
_PRECEDENCE = (("crash", ExitCode.CRASH), ("hang", ExitCode.HANG), ("fail", ExitCode.FINDING),
               ("error", ExitCode.FINDING))


# The finding statuses in words, for the commands' help (each adds its own 0 and 2).
FINDINGS_IN_WORDS = "1 a wrong output or kernel error; 3 a hang (--timeout); 4 a crash (the worst decides)"


def exit_code_for(statuses: Iterable[str]) -> ExitCode:
    """The exit status of a run whose cases ended with ``statuses``: crash (4) > hang (3) > fail or error (1) >
    OK (0). ``"timeout"`` (the old name of a hang) counts as a hang."""
    seen = {"hang" if s == "timeout" else s for s in statuses}
    for status, code in _PRECEDENCE:
        if status in seen:
            return code
    return ExitCode.OK


# Set by a process that watches a command run in its child (:mod:`jfa_verify.cli.supervise`): a file the command
# writes its exit status to when it ends by its own choice. A kernel that ends the process (``os._exit(0)``, a
# signal) cannot write it, which is how the watcher tells a command's 0 or 1 from a kernel's (a new user's kernel
# calling ``os._exit(0)`` made ``stress`` exit 0 with no verdict).
WATCHED_ENV = "JFA_VERIFY_WATCHED"
_declared_to: Optional[str] = None


def take_watch() -> bool:
    """At a command's start: whether a watching process waits on this one (it set :data:`WATCHED_ENV`). The variable
    is removed, so that no process this one starts (a nested ``jfa-verify``) writes to the watcher's file."""
    global _declared_to
    path = os.environ.pop(WATCHED_ENV, None)
    if path:
        _declared_to = path
    return bool(path)


def declare_exit(status: int) -> int:
    """Tell the watching process, if any (:func:`take_watch`), that this command is ending with ``status`` by its
    own choice; returns ``status``. Called before every deliberate exit, ``os._exit`` ones included (a hang's)."""
    if _declared_to:
        try:
            with open(_declared_to, "w") as fh:
                fh.write(str(int(status)))
        except OSError:
            pass  # the watcher then reports a death: louder, never quieter
    return int(status)


class ExitRefused(SystemExit):
    """``os._exit(code)`` called by kernel code inside :func:`exits_refused`: raised instead of ending the process."""


def exit_call(e: SystemExit) -> str:
    """The call that raised ``e``, as its code wrote it: ``os._exit(0)`` (refused) or ``sys.exit(0)``."""
    return f"{'os._exit' if isinstance(e, ExitRefused) else 'sys.exit'}({e.code!r})"


@contextlib.contextmanager
def exits_refused() -> Iterator[None]:
    """Inside the block, ``os._exit`` called from this thread raises :class:`ExitRefused` (a ``SystemExit``) instead
    of ending the process; other threads (a hang's watchdog) exit as before. For kernel code run in a command's own
    process to register or load a kernel (a plugin's import, a kernel's ``load()``): a new user's ``load()`` calling
    ``os._exit(0)`` ended ``run``, ``gate`` and ``fuzz`` silently with exit 0, having checked nothing (2026-12-05)."""
    real, owner = os._exit, threading.get_ident()

    def refused(code: int) -> None:
        if threading.get_ident() != owner:
            real(code)
        raise ExitRefused(code)

    os._exit = refused
    try:
        yield
    finally:
        os._exit = real
