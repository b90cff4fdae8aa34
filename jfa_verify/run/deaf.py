"""Imported first by the case workers' fork server (:data:`jfa_verify.run.worker_server.PRELOAD`): from here on the
server ignores SIGINT and SIGTERM, before it imports torch.

:func:`~jfa_verify.run.worker_server.start_worker_server` launches the server with them blocked (a block, unlike a
handler, crosses the exec, from any thread); this first import ignores them and lifts the block. Before, a server
started from another thread (``run --jobs N`` starts its case workers, and with the first of them the server, from
its threads) heard a Ctrl-C while it imported torch (seconds), printed a ``KeyboardInterrupt`` traceback from inside
torch, and every later case worker (forked from the dead server) failed. The server is the run's to end (it ends when
its parent does); the children it forks keep these handlers (a campaign worker hears Ctrl-C again once in its own
code: :func:`~jfa_verify.run.interrupts.hear_interrupts`).
"""

import signal
import threading

if threading.current_thread() is threading.main_thread():  # (always so in the server, which imports it)
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, signal.SIG_IGN)
    # the server was launched with them blocked (start_worker_server): ignored now, a pending one is dropped
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
