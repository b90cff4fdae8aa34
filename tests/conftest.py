"""The project's own test configuration: its Hypothesis profiles and its device.

The ``jfa_verify`` pytest plugin (an entry point) adds the ``--jfa-*`` options,
fixtures and the ``gpu`` marker's skipping, and changes nothing by itself; this
suite opts in here: it selects its device (``--jfa-device``, else CUDA when
available, else the CPU interpreter) for every test, and picks a Hypothesis
profile with ``HYPOTHESIS_PROFILE`` (tox environments of the same names).
"""

import os
import textwrap

import pytest
from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=10, **_COMMON)
settings.register_profile("ci", max_examples=25, derandomize=True, print_blob=True, **_COMMON)
settings.register_profile("nightly", max_examples=2000, print_blob=True, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_configure(config):
    from jfa_verify.device import select_device

    select_device(config.getoption("--jfa-device"))


@pytest.fixture
def sleepy_plugin(tmp_path):
    """A plugin file registering ``sleepy``, a kernel that hangs for 60 s (for hang watchdog tests)."""
    plugin = tmp_path / "sleepy.py"
    plugin.write_text(textwrap.dedent("""
        import time
        from jfa_verify import Capabilities, register_kernel

        @register_kernel("sleepy", capabilities=Capabilities())
        def load():
            def hang(*args, **kwargs):
                time.sleep(60)
            return hang
    """))
    return plugin
