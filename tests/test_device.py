"""Device selection and the Triton mode of the process (compiled or interpreted)."""

import os
import subprocess
import sys

import pytest

import jfa_verify.core.device as device
from jfa_verify.core.errors import InvalidInput

# A process that runs CUDA kernels, then one command on the CPU inside a device_scope (a CPU test in a GPU
# pytest worker), then imports Gluon as a CUDA kernel's module does. ``PIN`` is what select_device("cuda")
# does first; the CPU interpreter is not needed to show it: no kernel runs.
_SCRIPT = """
import sys
from jfa_verify.core.device import _pin_triton_compiled, device_scope, select_device
if sys.argv[1] == "pin":
    _pin_triton_compiled()
with device_scope():
    select_device("cpu")
    import triton.language
import triton.experimental.gluon.language
import triton.language.standard as standard
from triton.runtime.jit import JITFunction
print("compiled" if isinstance(standard.cdiv, JITFunction) else "interpreted")
"""


def _run(arg, **env):
    base = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-c", _SCRIPT, arg], capture_output=True, text=True, timeout=300,
                          env={**base, **env})


def test_a_cuda_process_keeps_triton_compiled_after_a_cpu_command():
    """Regression (H200, GPU tests stage at dddf653, 11 failures): in a pytest worker whose first test ran a
    command on the CPU, Triton's library was first imported interpreted, and every CUDA test of that worker
    then failed (Gluon's import asserting ``isinstance(fn, JITFunction)``, triton_jfa raising). Selecting
    CUDA now imports Triton compiled first; without that the same sequence still fails, as the second run shows."""
    pinned = _run("pin")
    assert pinned.returncode == 0, pinned.stderr[-2000:]
    assert pinned.stdout.strip() == "compiled"
    unpinned = _run("no-pin")
    assert unpinned.returncode != 0 and "JITFunction" in unpinned.stderr


def test_selecting_cuda_pins_triton_compiled(monkeypatch):
    calls = []
    monkeypatch.setattr(device.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(device, "_pin_triton_compiled", lambda: calls.append("pin"))
    monkeypatch.setattr(device, "_chosen", None)
    assert device.select_device("cuda").type == "cuda" and calls == ["pin"]


def test_selecting_cuda_in_a_process_started_with_triton_interpret_imports_triton_compiled():
    """Regression (H100 GPU tests stage, 2026-12-07): case workers are forked from one server per process, which keeps
    the environment it started with; started during a CPU command (TRITON_INTERPRET=1), it handed that to a CUDA
    worker, whose select_device imported Triton under it and refused CUDA ("Triton was first imported ... with
    TRITON_INTERPRET=1"). No GPU needed: the choice is forced, and only the mode of Triton's import is read."""
    code = ("import torch\ntorch.cuda.is_available = lambda: True\n"
            "import os\nfrom jfa_verify.core.device import select_device\nselect_device('cuda')\n"
            "import triton.language.standard as standard\nfrom triton.runtime.jit import JITFunction\n"
            "print(isinstance(standard.cdiv, JITFunction), os.environ.get('TRITON_INTERPRET'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "None"]


def test_a_refused_cuda_keeps_the_callers_triton_interpret(monkeypatch):
    def refuse():
        raise InvalidInput("Triton was first imported ... with TRITON_INTERPRET=1")

    monkeypatch.setattr(device.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(device, "_pin_triton_compiled", refuse)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(InvalidInput):
        device.select_device("cuda")
    assert os.environ["TRITON_INTERPRET"] == "1"


def test_cuda_after_triton_was_imported_interpreted_is_refused_with_the_fix():
    code = ("import triton.language\nfrom jfa_verify.core.device import _pin_triton_compiled\n"
            "from jfa_verify.core.errors import InvalidInput\n"
            "try:\n    _pin_triton_compiled()\nexcept InvalidInput as e:\n    print('refused:', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused:" in proc.stdout and "TRITON_INTERPRET" in proc.stdout and "fresh process" in proc.stdout


def test_unknown_device_names_the_value():
    with pytest.raises(InvalidInput, match="'tpu'"):
        device.select_device("tpu")


def test_a_refused_cuda_leaves_no_device_chosen(monkeypatch):
    def refuse():
        raise InvalidInput("Triton was first imported ... with TRITON_INTERPRET=1")

    monkeypatch.setattr(device.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(device, "_pin_triton_compiled", refuse)
    monkeypatch.setattr(device, "_chosen", None)
    with pytest.raises(InvalidInput, match="TRITON_INTERPRET"):
        device.select_device("cuda")
    assert device.selected_device() is None


def test_a_test_that_selects_the_cpu_leaves_the_next_test_the_callers_choice(pytester):
    """Regression (H200 GPU tests, 2026-12-02): a test that selected the CPU in-process left ``TRITON_INTERPRET=1``
    for the tests after it in the same worker (nine CUDA tests then failed on interpreted kernels). The suite's
    autouse fixture restores the choice; shown here on a pytest run of two tests using this suite's conftest."""
    from pathlib import Path

    conftest = (Path(__file__).parent / "conftest.py").read_text()
    pytester.makeconftest(conftest.replace('pytest_plugins = ["pytester"]', ""))
    pytester.makepyfile(test_two="""
        import os
        import torch
        import jfa_verify.core.device as device

        def test_a_changes_the_choice():
            device._chosen = torch.device("meta")  # as select_device would, to a device the next test did not pick
            os.environ["TRITON_INTERPRET"] = "leaked"

        def test_b_finds_the_choice_of_the_session():
            assert device.selected_device() == torch.device("cpu")  # the conftest's --jfa-device
            assert os.environ["TRITON_INTERPRET"] == "1"
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--jfa-device", "cpu", "test_two.py")
    result.assert_outcomes(passed=2)


def test_library_functions_that_select_a_device_leave_the_callers_choice_alone(monkeypatch, tmp_path):
    """Regression (H200 GPU tests, 2026-12-02): ``run_mutant(..., device="cpu")``, called directly by a test in a
    CUDA pytest worker, left ``TRITON_INTERPRET=1`` behind; kernel modules that worker imported later were
    decorated for the interpreter and nine CUDA tests failed with "Cannot call @triton.jit'd outside of the scope
    of a kernel". ``run_mutant``, ``run_mutants``, ``shared_suite`` and ``run_campaign`` now restore both."""
    import torch

    from jfa_verify.fuzz.campaign import run_campaign
    from jfa_verify.fuzz.mutation import load_catalogue, run_mutant, run_mutants

    gluon = load_catalogue("gluon_jfa")
    name = next(iter(gluon.mutants))
    calls = [lambda: run_mutant(name, catalogue=gluon, device="cpu", stage="suite"),
             lambda: run_mutants([name], catalogue="gluon_jfa", device="cpu", stage="suite"),
             lambda: run_campaign("triton_jfa", max_examples=1, corpus_dir=str(tmp_path), device="cpu")]
    for call in calls:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        monkeypatch.setattr(device, "_chosen", torch.device("meta"))  # stands in for the caller's CUDA choice
        call()
        assert "TRITON_INTERPRET" not in os.environ
        assert device.selected_device() == torch.device("meta")


def test_selecting_cuda_clears_a_leftover_interpreter_setting(monkeypatch):
    """Regression (H200 GPU tests, 2026-12-02): ``TRITON_INTERPRET=1`` left by an earlier CPU choice made kernel
    modules imported after a CUDA choice interpreted. Selecting CUDA now clears it (the GPU stood in for here)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(device, "_pin_triton_compiled", lambda: None)
    monkeypatch.setattr(device, "_chosen", None)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert device.select_device("cuda") == torch.device("cuda")
    assert "TRITON_INTERPRET" not in os.environ
