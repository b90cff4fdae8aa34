"""The fork server that case workers, the precompile step's processes and campaign workers are forked from.

Light on purpose (no torch here): a command that will fork workers starts the server before it imports torch itself
(:func:`start_early`), so that the server's imports (torch, jfa-verify, sympy: seconds) run beside the command's
own instead of after them. On an H100 machine the main job's parent waited 4.8 s for the server in its first worker
start, and each worker's first case spent 2.7 s importing sympy for autograd (``docs/evidence/h100-2026-12-06-c``).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
from typing import Optional, Sequence

__all__ = ["PRELOAD", "WORKER_COMMANDS", "launch_server", "start_early", "start_worker_server", "worker_context"]

# Imported once by the fork server, so that every child starts with them: jfa_verify.run.deaf first, so that a Ctrl-C
# while it imports torch does not end it with a traceback (a server started from a thread hears it: see that module);
# torch.fx.experimental.symbolic_shapes (and sympy with it) because autograd imports it in the first backward of a
# process (2.7 s of a worker's first case on an H100 machine, where nothing was byte-compiled). None of these imports
# Triton, which must come after the command has chosen the device (TRITON_INTERPRET).
PRELOAD = ["jfa_verify.run.deaf", "torch", "jfa_verify", "jfa_verify.run.runner", "jfa_verify.oracles",
           "torch.fx.experimental.symbolic_shapes"]

# Commands that fork workers from the server (unless given --no-isolate; `gate` runs its stress check in-process)
WORKER_COMMANDS = ("run", "fuzz", "mutants", "matrix")


def worker_context():
    """The multiprocessing context for fresh worker processes: a fork server that has imported :data:`PRELOAD`
    (a child costs a fork, not a Python start-up of seconds), else spawn. A child must set what it needs from the
    environment itself (the fork server's is the one it started with)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def start_worker_server(ctx) -> None:
    """Start :func:`worker_context`'s fork server now if it is one, deaf to Ctrl-C while it imports (a Ctrl-C then
    would kill it, and every later child with it). Returns once the server is launched, not once it has imported: the
    first child forked waits for that.

    SIGINT and SIGTERM are blocked in the launching thread, not ignored: the server inherits the block, and its first
    import (jfa_verify.run.deaf) ignores them and lifts it, before torch. This process holds a stop sent meanwhile and
    raises it once the launch is done (:func:`~jfa_verify.run.interrupts.stops_deferred`; ignored here, it was lost: a
    new user's SIGTERM 0.7 s into ``fuzz`` let the campaign run to its end, exit 0).

    Raises:
        KeyboardInterrupt: a SIGINT or SIGTERM came while the server was launched (it was launched).
    """
    from jfa_verify.run.interrupts import stops_deferred

    with stops_deferred():
        launch_server(ctx)


def launch_server(ctx) -> None:
    """:func:`start_worker_server` inside a block the caller holds stops in (``stops_deferred``: a child's start,
    which must not be cut between the server and the child)."""
    import signal

    if ctx.get_start_method() != "forkserver":
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def start_early(argv: Optional[Sequence[str]]) -> bool:
    """Start the fork server when the command line ``argv`` (without the program name) is one of
    :data:`WORKER_COMMANDS` that will fork workers (not ``--no-isolate``, ``--help``, ``--version``); returns whether it
    did. Read from the raw arguments, before anything imports torch: the server's imports then run beside the
    command's."""
    args = list(argv)
    command = next((a for a in args if not a.startswith("-")), None)
    if command not in WORKER_COMMANDS or {"--no-isolate", "-h", "--help", "--version"} & set(args):
        return False
    ctx = worker_context()
    if ctx.get_start_method() != "forkserver":
        return False
    start_worker_server(ctx)
    return True
