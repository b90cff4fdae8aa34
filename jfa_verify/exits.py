"""Exit codes of every ``jfa-verify`` command (documented in the README; each is tested)."""

from __future__ import annotations

import enum

__all__ = ["ExitCode"]


class ExitCode(enum.IntEnum):
    """What a command's exit status means. A finding is not a usage error."""

    OK = 0  # everything checked passed
    FINDING = 1  # a kernel failed a check (wrong output, contract, invariant, kernel exception)
    USAGE = 2  # bad arguments or configuration; nothing (or nothing meaningful) was checked
    HANG = 3  # a case ran past --timeout (recorded as a finding with status "timeout")
    CRASH = 4  # the kernel crashed its process (abort, segfault, illegal address)
    INTERRUPTED = 130  # Ctrl-C / SIGTERM: what was done so far is written, then the command stops
