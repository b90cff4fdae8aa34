"""``exits_refused``: kernel code's ``os._exit`` inside a plugin's import or a kernel's load() is refused in the
loading thread, and only there (a hang's watchdog thread must still end the process)."""

import os
import subprocess
import sys
import textwrap

import pytest

from jfa_verify.core.exits import ExitRefused, exits_refused


def test_os_exit_in_the_block_raises_and_the_real_one_is_back_after_it():
    real = os._exit
    with pytest.raises(ExitRefused) as caught:
        with exits_refused():
            os._exit(0)
    assert caught.value.code == 0 and isinstance(caught.value, SystemExit) and os._exit is real


def test_another_thread_still_exits_the_process():
    script = textwrap.dedent("""
        import os, threading, time
        from jfa_verify.core.exits import exits_refused
        with exits_refused():
            threading.Thread(target=os._exit, args=(7,)).start()
            time.sleep(30)
        os._exit(0)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 7, proc.stderr
