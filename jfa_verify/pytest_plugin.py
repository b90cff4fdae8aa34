"""pytest plugin (entry point ``jfa_verify``): kernel and device selection, Hypothesis profiles, a corpus.

Options: ``--jfa-kernel NAME`` (default ``triton_jfa``), ``--jfa-device cuda|cpu``
(default: cuda when available), ``--jfa-plugin FILE.py``, ``--jfa-corpus DIR``
(where the ``jfa_corpus`` fixture writes case files; default a per-session
temporary folder). Hypothesis profiles ``dev``, ``ci`` and ``nightly`` are
registered; ``HYPOTHESIS_PROFILE`` picks one (default ``dev``). Nothing probes
the GPU at import time: the device is chosen in ``pytest_configure``, per
process, so each pytest-xdist worker does its own; case files are written
atomically and named by case id, so workers can share a corpus folder.
Tests marked ``gpu`` are skipped when the selected device is the CPU.
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
    group.addoption("--jfa-corpus", default=None, help="folder for case files written by tests (default: a temp dir)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped when the selected device is the CPU)")
    from jfa_verify.device import select_device

    select_device(config.getoption("--jfa-device"))
    from kernels import load_plugin

    for path in config.getoption("--jfa-plugin"):
        load_plugin(path)


def pytest_collection_modifyitems(config, items):
    from jfa_verify.device import current_device

    if current_device().type == "cuda":
        return
    skip = pytest.mark.skip(reason="gpu test; the selected device is the CPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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


@pytest.fixture(scope="session")
def jfa_corpus(pytestconfig, tmp_path_factory):
    """A :class:`fuzz.Corpus` (``--jfa-corpus DIR`` or a session temp dir): wrap a case in
    ``with jfa_corpus.guard(case, kernel.name, str(device)) as p: jfa_corpus.record(p, run_case(...))``
    so a failing (or crashing) case leaves a replayable file.
    """
    from fuzz import Corpus

    root = pytestconfig.getoption("--jfa-corpus")
    return Corpus(root if root else tmp_path_factory.mktemp("jfa-corpus"))
