"""Imported first by the case workers' fork server (:data:`jfa_verify.run.worker_server.PRELOAD`): from here on the
server ignores SIGINT and SIGTERM, before it imports torch.

:func:`~jfa_verify.run.worker_server.start_worker_server` starts the server deaf to them (they are ignored across the
exec) only from the main thread: a process cannot change its signal handlers from any other, and ``run --jobs N``
starts its case workers, and with the first of them the server, from its threads. A Ctrl-C then reached the
server while it imported torch (seconds) and printed a ``KeyboardInterrupt`` traceback from inside torch, and every
later case worker (forked from the dead server) failed. The server is the run's to end (it ends when its parent
does); the children it forks keep these handlers, as they did when it started deaf (a campaign worker hears Ctrl-C
again once in its own code: :func:`~jfa_verify.run.interrupts.hear_interrupts`).
"""

import signal
import threading

if threading.current_thread() is threading.main_thread():  # (always so in the server, which imports it)
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, signal.SIG_IGN)
