"""A watchdog for a block of code that may hang: a kernel call that never returns holds the thread that made it, so
only another thread can notice and act."""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, Optional

__all__ = ["MAX_TIMEOUT_S", "watchdog"]

# The longest --timeout taken: a week (a timer of 1e12 s overflowed the OS's clock in multiprocessing's wait, exit 70)
MAX_TIMEOUT_S = 7 * 24 * 3600.0


@contextlib.contextmanager
def watchdog(timeout_s: Optional[float], fire: Callable[[], None]) -> Iterator[None]:
    """Run the block; if it still runs ``timeout_s`` seconds (wall clock) after it began, call ``fire`` once from a
    daemon timer thread (which usually ends the process: the hung thread cannot be stopped). The timer is cancelled
    when the block ends, normally or by an exception. ``timeout_s`` None or 0: no watchdog."""
    if not timeout_s:
        yield
        return
    timer = threading.Timer(timeout_s, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
