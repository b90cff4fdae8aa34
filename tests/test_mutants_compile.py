"""Planted bugs of ``triton_jfa`` that read its runtime flags compile for a GPU, checked on the CPU.

Triton's interpreter runs code its compiler refuses: ``if not BOTTOM_RIGHT:`` on a runtime (not ``constexpr``) flag
ran on the CPU and raised ``CompilationError`` on the H100 (2026-12-05), so that mutant was "broken", not killed,
in the GPU tests stage once the alignment flags became runtime arguments. Every kernel mutant of the catalogues
that are read (not the blind sets) whose edit touches a runtime flag is compiled here for ``sm_90a`` with the
target-only driver, with the causal and window paths on.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOGUES = ("fuzz/catalogues/triton_jfa.json", "tests/quality/regression_catalogue.json")
RUNTIME_FLAGS = ("BOTTOM_RIGHT", "BROADCAST_Q")

_SCRIPT = """
import json, sys, torch
from triton.runtime import driver
from jfa_verify.core.target_driver import TargetOnlyDriver
driver.set_active(TargetOnlyDriver(90))
from jfa_verify.fuzz.mutation import load_catalogue

SCALARS = ("L_Q", "GROUP", "NUM_HEADS", "HEAD_DIM", "HEAD_DIM_V", "WIN_LEFT", "WIN_RIGHT")
INDEX = ("Q_OFF", "K_OFF", "TILE_SEQ", "TILE_BLOCK", "TILE_ID", "PROG_TILE_START", "VISITS", "PROGS")
KERNELS = ("_fwd_kernel", "_bwd_preprocess_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel")

def arguments(fn):
    out = {}
    for p in fn.params:
        if p.has_default:
            continue  # the block-sparse and MXFP8 extras: off
        if p.is_constexpr:
            out[p.name] = 64 if p.name.startswith("BLOCK") else p.name in ("CAUSAL", "WINDOW")
        elif p.name in ("BOTTOM_RIGHT", "BROADCAST_Q"):
            out[p.name] = 1
        elif p.name in SCALARS:
            out[p.name] = 2 if p.name == "GROUP" else 16
        elif p.name.endswith("scale"):
            out[p.name] = 0.5
        elif p.name in INDEX:
            out[p.name] = torch.zeros(16, dtype=torch.int32)
        elif p.name in ("LSE", "DELTA"):
            out[p.name] = torch.zeros(64, dtype=torch.float32)
        elif p.name[0].isupper():
            out[p.name] = torch.zeros(64, dtype=torch.bfloat16)
        else:
            out[p.name] = 16
    return out

failed = {}
for path, names in json.loads(sys.argv[1]).items():
    cat = load_catalogue(path)
    for name in names:
        module = cat.module(name)
        for kernel in KERNELS:
            fn = getattr(module, kernel)
            try:
                fn.warmup(**arguments(fn), grid=(1,), num_warps=4, num_stages=2)
            except Exception as e:
                failed[f"{name}:{kernel}"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}"
print("FAILED" + json.dumps(failed))
"""


def _flag_mutants() -> dict:
    picked = {}
    for rel in CATALOGUES:
        mutants = json.loads((ROOT / rel).read_text())["mutants"]
        picked[str(ROOT / rel)] = [m["name"] for m in mutants if m.get("target", "kernels") == "kernels"
                                   and any(f in m.get("old", "") + m.get("new", "") for f in RUNTIME_FLAGS)]
    return picked


def _compile(picked: dict, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), TMPDIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(picked)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(next(x for x in run.stdout.splitlines() if x.startswith("FAILED"))[len("FAILED"):])


def test_kernel_mutants_that_read_a_runtime_flag_compile_for_sm_90a(tmp_path):
    picked = _flag_mutants()
    assert sum(map(len, picked.values())) >= 3, picked  # the selection still finds the flag-reading mutants
    assert _compile(picked, tmp_path) == {}


def test_the_compile_check_fails_on_not_of_a_runtime_flag(tmp_path):
    """The check can fail: the old edit of ``alignment_swapped`` (``if not BOTTOM_RIGHT:``) does not compile."""
    catalogue = json.loads((ROOT / CATALOGUES[0]).read_text())
    mutant = next(m for m in catalogue["mutants"] if m["name"] == "alignment_swapped")
    mutant["new"] = mutant["new"].replace("if BOTTOM_RIGHT == 0:", "if not BOTTOM_RIGHT:")
    catalogue["mutants"] = [mutant]
    path = tmp_path / "old_alignment_swapped.json"
    path.write_text(json.dumps(catalogue))
    failed = _compile({str(path): ["alignment_swapped"]}, tmp_path)
    assert set(failed) == {"alignment_swapped:_fwd_kernel", "alignment_swapped:_bwd_dkdv_kernel",
                           "alignment_swapped:_bwd_dq_kernel"}, failed
