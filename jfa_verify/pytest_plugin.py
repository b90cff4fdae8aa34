"""pytest plugin (entry point ``jfa_verify``): kernel and device selection, Hypothesis profiles.

Options: ``--jfa-kernel NAME`` (default ``triton_jfa``), ``--jfa-device cuda|cpu``
(default: cuda when available), ``--jfa-plugin FILE.py``. Hypothesis profiles
``dev``, ``ci`` and ``nightly`` are registered; ``HYPOTHESIS_PROFILE`` picks one
(default ``dev``). Nothing probes the GPU at import time: the device is chosen
in ``pytest_configure``, per process, so each pytest-xdist worker does its own.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=10, **_COMMON)
settings.register_profile("ci", max_examples=25, derandomize=True, print_blob=True, **_COMMON)
settings.register_profile("nightly", max_examples=2000, print_blob=True, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_addoption(parser):
    group = parser.getgroup("jfa-verify")
    group.addoption("--jfa-kernel", default="triton_jfa", help="kernel under test (registry name)")
    group.addoption("--jfa-device", default=None, choices=("cuda", "cpu"), help="device (default: cuda if available)")
    group.addoption("--jfa-plugin", action="append", default=[], help="file registering extra kernels")


def pytest_configure(config):
    from jfa_verify.device import select_device

    select_device(config.getoption("--jfa-device"))
    from kernels import load_plugin

    for path in config.getoption("--jfa-plugin"):
        load_plugin(path)


@pytest.fixture(scope="session")
def jfa_device():
    """The torch.device the suite runs on."""
    from jfa_verify.device import current_device

    return current_device()


@pytest.fixture(scope="session")
def jfa_kernel(pytestconfig):
    """The registered kernel named by ``--jfa-kernel``."""
    from kernels import get_kernel

    return get_kernel(pytestconfig.getoption("--jfa-kernel"))
