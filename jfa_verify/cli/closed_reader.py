"""Output to a reader that leaves early (``jfa-verify run | head``): the command still finishes its work.

Python raises ``BrokenPipeError`` on the first write after the reader has closed the pipe, and rich's console
answers that with ``SystemExit(1)``. ``jfa-verify run ... | head -2`` then exited 1 (the code of a finding) with
all its cases passed and its report never completed. Here the rest of the output goes to ``os.devnull`` instead:
the reports are written and the exit status is the command's own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator, TextIO

__all__ = ["output_outlives_reader"]


class _ReaderMayLeave:
    """A text stream that, once its reader has gone (EPIPE), sends everything on to ``os.devnull``."""

    def __init__(self, stream: TextIO):
        self._stream, self.reader_gone = stream, False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()

    def _leave(self) -> None:
        self.reader_gone = True
        with contextlib.suppress(OSError, ValueError):  # (a stream with no file descriptor: nothing to redirect)
            # the stream's own buffer is flushed again at exit: onto os.devnull now, not the closed pipe
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name):  # isatty, fileno, encoding, ...: the stream's own
        return getattr(self._stream, name)


@contextlib.contextmanager
def output_outlives_reader() -> Iterator[None]:
    """Within the block, ``sys.stdout`` and ``sys.stderr`` survive their readers leaving (see the module docstring;
    ``jfa-verify findings nodir 2>&1 | true`` exited 1 instead of 2 when the error line met the closed pipe)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _ReaderMayLeave(saved[0]), _ReaderMayLeave(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
