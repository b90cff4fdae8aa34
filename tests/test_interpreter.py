"""Triton's CPU interpreter as jfa-verify runs it (``jfa_verify/core/interpreter.py``): ``triton.language`` patched
once per launch gives the same values, bit for bit, with far fewer patches."""

import pytest
import torch

from jfa_verify.cases.case import Case
from jfa_verify.core.device import select_device
from jfa_verify.core.interpreter import PATCHED_VERSION, patch_once
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.runner import call_kernel

CASES = [Case(kv_lengths=(20, 40, 5), num_heads_q=2, num_heads_kv=1, head_dim=32, dtype="bfloat16", causal=causal,
              seed=seed, window=window)
         for seed, causal, window in ((0, False, None), (1, True, None), (2, False, (17, 3)))]


def _outputs(kernel, case):
    tensors = case.materialize(torch.device("cpu"))
    got = call_kernel(kernel, case.problem(tensors), tensors, case, backward=True).outputs
    return {name: t.detach().clone() for name, t in got.items() if isinstance(t, torch.Tensor)}


def test_patching_the_language_once_per_launch_changes_no_value_and_saves_the_repatching(monkeypatch):
    import triton
    from triton.runtime import interpreter

    select_device("cpu")
    if triton.__version__ != PATCHED_VERSION:
        pytest.skip(f"Triton {triton.__version__}: the interpreter runs as Triton wrote it")
    assert patch_once() and patch_once()  # idempotent
    original = interpreter._jfa_verify_original_patch_lang
    calls = {"patches": 0}

    def counted(fn):
        calls["patches"] += 1
        return original(fn)

    kernel = get_kernel("triton_jfa")
    # Triton's own: every device function's call patches again (counted through the same function)
    monkeypatch.setattr(interpreter, "_patch_lang", counted)
    plain = [_outputs(kernel, case) for case in CASES]
    plain_patches, calls["patches"] = calls["patches"], 0
    monkeypatch.setattr(interpreter, "_jfa_verify_patch_once", False)
    monkeypatch.setattr(interpreter, "_patch_lang", counted)
    assert patch_once()  # now over the counting original
    once = [_outputs(kernel, case) for case in CASES]
    for case, a, b in zip(CASES, plain, once):
        assert a.keys() == b.keys() == {"o", "lse", "dq", "dk", "dv"}
        for name in a:
            assert torch.equal(a[name], b[name]), (case, name)
    # one patch per grid launch (a few launches a call) instead of one per device function call as well
    # (these 3 cases: 2,642 patches as Triton wrote it, 36 once per launch and library module)
    assert 0 < calls["patches"] * 20 < plain_patches, (calls["patches"], plain_patches)


def test_another_triton_version_runs_the_interpreter_as_triton_wrote_it(monkeypatch):
    import triton
    from triton.runtime import interpreter

    before = interpreter._patch_lang
    monkeypatch.setattr(interpreter, "_jfa_verify_patch_once", False, raising=False)
    monkeypatch.setattr(triton, "__version__", "9.9.9")
    assert patch_once() is False and interpreter._patch_lang is before
