"""SIGTERM handled like Ctrl-C, so a stopped ``run`` or ``fuzz`` writes what it has (summary, report) and
leaves no ``"running"`` case file behind."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

__all__ = ["terminate_as_interrupt"]


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
