"""The fork server the workers come from: what its children find imported, and when a command starts it."""

import subprocess
import sys
import textwrap

import pytest

from jfa_verify.run import worker_server
from jfa_verify.run.worker_server import start_early, worker_context

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux's")


def _first_backward_imports() -> list:
    import torch

    before = set(sys.modules)
    x = torch.ones(3, requires_grad=True)
    (x * 2).backward(torch.ones(3))  # a gradient given, as every case's backward gives dO
    return sorted(set(sys.modules) - before)


def test_a_workers_first_backward_imports_nothing():
    """Regression (H100, 2026-12-06): a case worker's first backward imported sympy (autograd's
    ``torch.fx.experimental.symbolic_shapes``), 2.7 s of its first case where nothing was byte-compiled; the fork
    server imports it once for all of them."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=worker_context()) as pool:
        imported = pool.submit(_first_backward_imports).result(timeout=300)
    assert imported == []


@pytest.mark.parametrize("argv, starts", [
    (["run", "--device", "cpu"], True),
    (["fuzz", "--seconds", "5"], True),
    (["--verbose", "mutants"], True),
    (["run", "--no-isolate"], False),
    (["run", "--help"], False),
    (["replay", "case.json"], False),
    (["kernels"], False),
    ([], False),
])
def test_commands_that_fork_workers_start_the_server_before_parsing(monkeypatch, argv, starts):
    started = []
    monkeypatch.setattr(worker_server, "start_worker_server", started.append)
    assert start_early(argv) is starts
    assert len(started) == int(starts)


def test_the_console_script_starts_the_server_before_it_imports_torch(tmp_path):
    """``jfa-verify run`` launches the fork server first, so that the server's imports (torch, seconds) run beside the
    command's own: the parent waited 4.8 s for it at its first worker start (H100, 2026-12-06)."""
    probe = textwrap.dedent("""
        import sys
        from jfa_verify.run import worker_server
        seen = []
        real = worker_server.start_worker_server
        def spy(ctx):
            seen.append("torch" in sys.modules)
            raise SystemExit(0 if seen == [False] else 9)
        worker_server.start_worker_server = spy
        from jfa_verify.cli import main
        sys.argv = ["jfa-verify", "run", "--device", "cpu", "--max-cases", "1"]
        main()
        sys.exit(8)  # the server was never started
    """)
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_stop_sent_while_the_server_is_launched_is_raised_once_it_is_launched(monkeypatch):
    """Regression (a new user's trial): the launch ignored SIGINT and SIGTERM in this process too (so that the server
    inherited the deafness), and one sent in that window was lost: a SIGTERM 0.7 s into ``fuzz`` let the campaign run
    to its end with exit 0. They are blocked instead, and the pending one lands after the launch."""
    import os
    import signal
    import time
    from multiprocessing import forkserver

    launched = []

    def launch():  # the signal comes while the server is being launched
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        launched.append(True)

    monkeypatch.setattr(forkserver, "ensure_running", launch)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            worker_server.start_worker_server(worker_context())
            time.sleep(1)  # (a lost signal: nothing comes)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert launched == [True]  # the launch itself was not cut short
