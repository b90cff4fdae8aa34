"""pytest plugin (entry point ``jfa_verify``): kernel and device selection and a corpus, for suites that use them.

It has no effect on a project that does not use it: importing it loads no
Hypothesis profile and changes no environment variable, and it imports no
kernel. What it adds:

* options ``--jfa-kernel NAME`` (default ``triton_jfa``, unless the ``--jfa-plugin`` files register kernels: then it
  must be given), ``--jfa-device cuda|cpu``
  (default: cuda when available), ``--jfa-plugin FILE.py``, ``--jfa-corpus DIR``;
* fixtures ``jfa_device``, ``jfa_kernel``, ``jfa_corpus``;
* the markers ``gpu`` (skipped when the selected device is the CPU) and
  ``gpu_exclusive`` (needs most of a GPU's memory: run alone, not under pytest-xdist workers).

The device is selected (and, on the CPU, Triton's interpreter switched on) only
when ``--jfa-device`` is given or a ``jfa_*`` fixture asks for it; a suite that
wants it for every test calls :func:`jfa_verify.core.device.select_device` in its own
``conftest.py``, where its Hypothesis profiles live too. Nothing probes the GPU
at import time; each pytest-xdist worker selects its own device. Case files are
written atomically and named by case id, so workers can share a corpus folder.

A Hypothesis test's failing calls each write a case file (before the kernel runs: a crash or a kill loses no case),
its shrink steps included; when the test is done they are folded as a campaign folds a shrink round
(:func:`jfa_verify.fuzz.findings.fold_round`): one finding file per failure, its shrunk case, the other failing cases
logged as its examples.
"""

from __future__ import annotations

import pytest

DEFAULT_KERNEL = "triton_jfa"


def pytest_addoption(parser):
    group = parser.getgroup("jfa-verify")
    group.addoption("--jfa-kernel", default=None,
                    help=f"kernel under test (registry name; default {DEFAULT_KERNEL}, unless --jfa-plugin files "
                         "register kernels: then name one)")
    group.addoption("--jfa-device", default=None, choices=("cuda", "cpu"), help="device (default: cuda if available)")
    group.addoption("--jfa-plugin", action="append", default=[], help="file registering extra kernels")
    group.addoption("--jfa-corpus", default=None, help="folder for case files written by tests (default: a temp dir)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped when the jfa-verify device is the CPU)")
    config.addinivalue_line("markers", "gpu_exclusive: needs most of a GPU's memory; run alone, not under xdist")
    from pathlib import Path

    from jfa_verify.core.errors import JFAError

    corpus = config.getoption("--jfa-corpus")
    if corpus is not None and Path(corpus).exists() and not Path(corpus).is_dir():
        raise pytest.UsageError(f"--jfa-corpus {corpus}: a file, not a folder; give the folder case files are written "
                                f"to (made when missing)")
    try:  # a bad option is a usage error, not an INTERNALERROR traceback (a new user's trial, 2026-12-07)
        if config.getoption("--jfa-device") is not None:
            from jfa_verify.core.device import select_device

            select_device(config.getoption("--jfa-device"))
        if config.getoption("--jfa-plugin"):
            from jfa_verify.protocol.registry import load_plugins

            load_plugins(config.getoption("--jfa-plugin"))
    except JFAError as e:  # (its words name the command line's flags; here they are the plugin's --jfa-* ones)
        raise pytest.UsageError(str(e).replace("--device ", "--jfa-device ").replace("--plugin ", "--jfa-plugin "))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A Hypothesis test that verifies cases into ``jfa_corpus``: its failing cases' files marked as one shrink round,
    folded into findings when it is done (a failing property test left one file per shrink step, 29 for one bug,
    where ``jfa-verify fuzz`` keeps one per failure: a new user's trial). Other tests' files are kept as written: each
    case of a loop over a suite is a case of its own."""
    corpus = getattr(item, "funcargs", {}).get("jfa_corpus")
    if not isinstance(corpus, _RoundCorpus) or not getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        yield
        return
    import uuid

    from jfa_verify.fuzz.findings import fold_round

    corpus.start_round(f"pytest-{uuid.uuid4().hex[:12]}")
    try:
        yield
    finally:
        round_id = corpus.end_round()
        fold_round(corpus.root, round_id, found_by="pytest")


def _round_corpus(root):
    """A :class:`~jfa_verify.run.corpus.Corpus` whose case files, while a round is open, carry its ``shrink_round``
    and their ``shrink_step`` (in the order they were written), as a campaign's shrink steps do."""
    import itertools

    from jfa_verify.run.corpus import Corpus

    class RoundCorpus(Corpus, _RoundCorpus):
        round_id = None

        def start_round(self, round_id: str) -> None:
            self.round_id, self._steps = round_id, itertools.count()

        def end_round(self) -> str:
            round_id, self.round_id = self.round_id, None
            return round_id

        def guard(self, case, kernel, device, timeout_s=None, plugins=(), annotations=None):
            if self.round_id is not None:
                annotations = {**(annotations or {}), "shrink_round": self.round_id, "shrink_step": next(self._steps)}
            return super().guard(case, kernel, device, timeout_s, plugins, annotations)

    return RoundCorpus(root)


class _RoundCorpus:
    """The mark of the corpus :func:`_round_corpus` makes (its class is made where it is needed, so that importing
    the plugin imports nothing of jfa-verify)."""


def pytest_collection_modifyitems(config, items):
    from jfa_verify.core.device import selected_device

    device = selected_device()
    if device is not None and device.type == "cuda":
        return
    gpu = [item for item in items if "gpu" in item.keywords or "gpu_exclusive" in item.keywords]
    if device is None:
        # No jfa-verify device chosen yet: the project's own markers are left alone, but a test that asks for a
        # jfa_* fixture gets the device those fixtures will choose, the CPU where torch sees no CUDA device (such a
        # test once failed "assert 'cpu' == 'cuda'" unless --jfa-device was given: a new user's trial, 2026-12-07).
        gpu = [item for item in gpu if {"jfa_device", "jfa_kernel"} & set(getattr(item, "fixturenames", ()))]
        if not gpu:
            return
        import torch

        if torch.cuda.is_available():
            return
    skip = pytest.mark.skip(reason="gpu test; the selected device is the CPU")
    for item in gpu:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def jfa_device():
    """The torch.device the suite runs on (selected on first use when ``--jfa-device`` was not given)."""
    from jfa_verify.core.device import current_device

    return current_device()


@pytest.fixture(scope="session")
def jfa_kernel(pytestconfig, jfa_device):
    """The registered kernel named by ``--jfa-kernel`` (default ``triton_jfa``). A name no kernel has, or no name
    where the ``--jfa-plugin`` files register kernels (the user's tests would check the built-in kernel and pass), ends
    the session as a usage error (exit 4) at the first test that asks (a kernel registered when a test module is
    imported is known only then)."""
    from jfa_verify.core.errors import UnknownKernel
    from jfa_verify.protocol.registry import get_kernel, kernels_of_plugins, unnamed_kernel_message

    name = pytestconfig.getoption("--jfa-kernel")
    if name is None:
        mine = kernels_of_plugins(pytestconfig.getoption("--jfa-plugin"))
        if mine:
            pytest.exit(unnamed_kernel_message(mine, DEFAULT_KERNEL, "--jfa-plugin", "--jfa-kernel"),
                        returncode=pytest.ExitCode.USAGE_ERROR)
        name = DEFAULT_KERNEL
    try:
        return get_kernel(name)
    except UnknownKernel as e:  # (a new user's typo gave a traceback per test, each an ERROR of its own)
        pytest.exit(f"--jfa-kernel: {e}", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def jfa_corpus(pytestconfig, tmp_path_factory):
    """A :class:`jfa_verify.run.corpus.Corpus` (``--jfa-corpus DIR`` or a session temp dir): verify cases with
    ``jfa_verify.Verifier(kernel, device, jfa_corpus).verify(case)`` so a failing (or crashing) case leaves a
    replayable file. A Hypothesis test's failing files are folded into one finding file per failure when it is done
    (:func:`pytest_runtest_call`).
    """
    root = pytestconfig.getoption("--jfa-corpus")
    return _round_corpus(root if root else tmp_path_factory.mktemp("jfa-corpus"))
