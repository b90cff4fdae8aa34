"""The project's own test configuration: its Hypothesis profiles and its device.

The ``jfa_verify`` pytest plugin (an entry point) adds the ``--jfa-*`` options,
fixtures and the ``gpu`` marker's skipping, and changes nothing by itself; this
suite opts in here: it selects its device (``--jfa-device``, else CUDA when
available, else the CPU interpreter) for every test, and picks a Hypothesis
profile with ``HYPOTHESIS_PROFILE`` (tox environments of the same names).

Tests never write into the checkout: each runs with its current folder in a temporary
folder of its own (a test that needs a file of the repository names it by an absolute path, from its ``ROOT``),
and Hypothesis keeps its example database outside it (``HYPOTHESIS_STORAGE_DIRECTORY``,
default ``$TMPDIR/jfa-verify-hypothesis``); ``ci/check_clean.sh`` checks it after pytest.
Each test, and each test module, also leaves the kernel registry as it found it.
"""

import atexit
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

# Hypothesis's home (its example database) defaults to .hypothesis/ in the folder pytest starts in: the
# checkout. Outside it, for this process and the processes the tests start (CLI runs, campaign workers).
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(tempfile.gettempdir()) / "jfa-verify-hypothesis"))
# jfa-verify's own cache (jfa_verify/cases/search_cache.py) defaults to the user's home: one folder of this test
# session's instead, shared by the xdist workers and the processes the tests start (they inherit it)
# (removed when the process that made it ends: each test session left one in the temporary folder)
if "JFA_VERIFY_CACHE" not in os.environ:
    os.environ["JFA_VERIFY_CACHE"] = tempfile.mkdtemp(prefix="jfa-verify-cache-")
    atexit.register(shutil.rmtree, os.environ["JFA_VERIFY_CACHE"], ignore_errors=True)

# Under pytest-xdist every worker (and every process a test starts: mutant workers, CLI runs) would run torch
# with one thread per core, so two workers on the 2-core CI machine ran several times more threads than
# cores. One thread each, set before torch starts its pool (child processes inherit the variables).
# For the same reason the commands the tests run (run, gate, fuzz, mutants) start one worker each, as they did before
# they chose their worker count from the machine (issue 39): each pytest worker already has a core of its own.
# (tests/test_parallelism.py tests the machine's default with this variable removed)
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "JFA_VERIFY_JOBS"):
        os.environ.setdefault(_name, "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402

set_hypothesis_home_dir(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"])

pytest_plugins = ["pytester"]  # (tests that run a small pytest session of their own)

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=10, **_COMMON)
settings.register_profile("ci", max_examples=25, derandomize=True, print_blob=True, **_COMMON)
settings.register_profile("nightly", max_examples=2000, print_blob=True, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_configure(config):
    from jfa_verify.core.device import select_device

    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)  # (in case a plugin imported torch before the variables above were set)

    device = select_device(config.getoption("--jfa-device"))
    _SESSION_DEVICE[:] = [device]
    if device.type == "cuda":
        # A kernel module keeps the mode of its first import: a CPU test run in-process first in a GPU worker
        # (inside device_scope) would otherwise leave the shipped kernels interpreted for every later CUDA test.
        from jfa_verify.protocol.registry import get_kernel

        for kernel in (get_kernel("triton_jfa"), get_kernel("gluon_jfa")):
            if kernel.device_reason(device) is None:
                kernel.impl


_SESSION_DEVICE = []  # the device pytest_configure selected for this process (one entry)


def _session_compiles_triton() -> bool:
    return bool(_SESSION_DEVICE) and _SESSION_DEVICE[0].type == "cuda"


@pytest.fixture(scope="module")
def interpreter_device():
    """The CPU device, for a test that runs Triton kernels in the CPU interpreter; skipped in a CUDA session.

    A process keeps the mode of its first Triton import: in a GPU worker the shipped kernels are compiled, so CPU
    tensors reach a compiled launch ("cpu tensor?"), and an interpreted run there patches Triton's library for
    good, failing every later CUDA test of the worker. On the H200 (2026-12-05) two module-scoped fixtures that
    selected the CPU left a worker on it: 40 CUDA tests after them failed. CPU CI runs these tests.
    """
    if _session_compiles_triton():
        pytest.skip("runs Triton kernels in the CPU interpreter; this session compiles them for CUDA "
                    "(--jfa-device cuda): CPU CI runs it")
    from jfa_verify.core.device import select_device

    return select_device("cpu")


@pytest.fixture(autouse=True)
def _device_choice_restored():
    """Each test leaves the device choice and ``TRITON_INTERPRET`` as it found them.

    On the H200 (2026-12-02) a test calling ``run_mutant(..., device="cpu")`` in a CUDA worker left
    ``TRITON_INTERPRET=1`` set; kernel modules that worker imported later were decorated for the interpreter
    and nine CUDA tests failed with "Cannot call @triton.jit'd outside of the scope of a kernel".
    """
    from jfa_verify.core.device import device_scope

    with device_scope():
        yield


@pytest.fixture(scope="session", autouse=True)
def _session_outside_the_checkout(tmp_path_factory):
    """Module- and session-scoped fixtures run in a temporary folder too (they start before ``_cwd_outside``)."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("session-cwd"))
    try:
        yield
    finally:
        os.chdir(before)


@pytest.fixture(autouse=True)
def _cwd_outside_the_checkout(tmp_path_factory, monkeypatch):
    """Each test runs in an empty temporary folder of its own: a command run without ``--report`` (say) writes its
    ``jfa-report.json`` and ``jfa-reproducers/`` there, never over the user's files in the checkout (issue 43, 2).
    A folder apart from ``tmp_path``, so a test listing its ``tmp_path`` sees only what it put there."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    yield


def _registry_state():
    """A copy of the kernel registry's state (every module-level table) and of the plugin modules imported."""
    from jfa_verify.protocol import registry

    registry.discover()  # the installed kernels, once: restoring to an undiscovered state would lose them for good
    tables = {name: getattr(registry, name) for name in ("_REGISTRY", "_BROKEN", "_EMPTY_PLUGINS", "_CONFLICTS",
                                                          "_PLUGIN_OF")}
    copies = {name: type(table)(table) for name, table in tables.items()}
    plugins = {name for name in sys.modules if name.startswith("_jfa_plugin_")}
    return registry, tables, copies, registry._discovered, plugins


def _restore_registry(state) -> None:
    registry, tables, copies, discovered, plugins = state
    for name, table in tables.items():
        setattr(registry, name, table)  # the very objects (a test may have swapped in its own)
        table.clear()
        (table.extend if isinstance(table, list) else table.update)(copies[name])
    registry._discovered = discovered
    for name in [name for name in sys.modules if name.startswith("_jfa_plugin_") and name not in plugins]:
        del sys.modules[name]  # so a later load_plugin of the same file registers its kernels again


@pytest.fixture(scope="module", autouse=True)
def _registry_restored_per_module():
    """What a module's fixtures register (a module-scoped ``load_plugin``) is gone after the module (issue 40, 3)."""
    state = _registry_state()
    yield
    _restore_registry(state)


@pytest.fixture(autouse=True)
def _registry_restored():
    """Each test leaves the kernel registry as it found it (issue 40, 3): kernels a test registers, directly or by
    ``load_plugin``, are gone in the next one, so no result depends on which tests ran before in the worker."""
    state = _registry_state()
    yield
    _restore_registry(state)


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


_MISBEHAVING = '''
import os
import time

import torch

from jfa_verify import Capabilities, register_kernel
from jfa_verify.core.contract import validate_inputs
from jfa_verify.oracles import reference_attention


@register_kernel({name!r}, capabilities=Capabilities(backward=False))
def load():
    """A correct forward in plain torch (the float64 reference, rounded) that misbehaves on some inputs."""
    def forward(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale)
        B, dtype, broadcast = len(k_offsets) - 1, q.dtype, q_offsets is None
        lengths = [int(n) for n in (k_offsets[1:] - k_offsets[:-1])]
        if {crash}:
            os.abort()
        if {hang}:
            time.sleep(600)
        if {wrong}:
            raise RuntimeError("planted failure")
        ref = reference_attention(problem, q, k, v)
        return ref["o"].to(q.dtype), ref["lse"].float()
    return forward
'''


@pytest.fixture
def misbehaving_plugin(tmp_path):
    """``make(name, crash=..., hang=..., wrong=...)``: a plugin file registering kernel ``name``, a correct
    plain-torch forward that calls ``os.abort()`` where the ``crash`` expression holds, sleeps 600 s where
    ``hang`` holds and raises where ``wrong`` holds (expressions over ``B``, ``dtype``, ``causal``,
    ``broadcast``, ``lengths``, ``torch``)."""
    def make(name, crash="False", hang="False", wrong="False"):
        path = tmp_path / f"{name}.py"
        path.write_text(_MISBEHAVING.format(name=name, crash=crash, hang=hang, wrong=wrong))
        return path
    return make
