"""The project's own test configuration: its Hypothesis profiles and its device.

The ``jfa_verify`` pytest plugin (an entry point) adds the ``--jfa-*`` options,
fixtures and the ``gpu`` marker's skipping, and changes nothing by itself; this
suite opts in here: it selects its device (``--jfa-device``, else CUDA when
available, else the CPU interpreter) for every test, and picks a Hypothesis
profile with ``HYPOTHESIS_PROFILE`` (tox environments of the same names).
"""

import os
import textwrap

# Under pytest-xdist every worker (and every process a test starts: mutant workers, CLI runs) would run torch
# with one thread per core, so two workers on the 2-core CI machine ran several times more threads than
# cores. One thread each, set before torch starts its pool (child processes inherit the variables).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

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
    if device.type == "cuda":
        # A kernel module keeps the mode of its first import: a CPU test run in-process first in a GPU worker
        # (inside device_scope) would otherwise leave the shipped kernels interpreted for every later CUDA test.
        from jfa_verify.protocol.registry import get_kernel

        for kernel in (get_kernel("triton_jfa"), get_kernel("gluon_jfa")):
            if kernel.device_reason(device) is None:
                kernel.impl


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
