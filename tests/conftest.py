"""Device and kernel selection, the ``gpu`` marker's skipping and the Hypothesis profiles come from
the ``jfa_verify`` pytest plugin (``jfa_verify/pytest_plugin.py``), registered as an entry point."""

import textwrap

import pytest


@pytest.fixture
def sleepy_plugin(tmp_path):
    """A plugin file registering ``sleepy``, a kernel that hangs for 60 s (for hang watchdog tests)."""
    plugin = tmp_path / "sleepy.py"
    plugin.write_text(textwrap.dedent("""
        import time
        from kernels.registry import Capabilities, register_kernel

        @register_kernel("sleepy", capabilities=Capabilities())
        def load():
            def hang(*args, **kwargs):
                time.sleep(60)
            return hang
    """))
    return plugin
