"""A watchdog for a block of code that may hang: a kernel call that never returns holds the thread that made it, so
only another thread can notice and act."""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, Optional

__all__ = ["watchdog"]


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
