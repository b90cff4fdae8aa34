"""The GPU scripts (ci/gpu_*.sh) run only on a lent GPU machine; what can be checked without one is checked here."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "ci").glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_parses(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_only_gpu_env_installs_the_package():
    """One home for the install: scripts run side by side raced on pip's entry-point file."""
    scripts = [*SCRIPTS, *(ROOT / "ci").glob("*.py")]
    installers = [p.name for p in scripts if p.name != "gpu_env.sh" and '"pip", "install"' in p.read_text()
                  or p.suffix == ".sh" and p.name != "gpu_env.sh" and "pip install" in p.read_text()]
    assert installers == []


def _check_deps(dist, tmp_path, **env):
    """``gpu_check_deps DIST`` with this test's Python first on PATH (the scripts call ``python3``)."""
    bindir = Path(sys.executable).parent
    assert (bindir / "python3").exists(), f"the test needs python3 beside {sys.executable}"
    return subprocess.run(["bash", "-c", f"source ci/gpu_env.sh && gpu_check_deps {dist}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path), **env})


def test_a_missing_dependency_stops_the_gpu_run_and_names_the_fix(tmp_path):
    """Regression (H200, tests stage at d975167): without the carried allpairspy wheel, 19 GPU tests failed as
    "NOTHING CHECKED" one by one; the install step now stops with the requirement named."""
    info = tmp_path / "fake_kernel_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-kernel-pkg\nVersion: 1.0\n"
                                   "Requires-Dist: no-such-dependency-xyz>=1\n"
                                   "Requires-Dist: plots-only; extra == 'plots'\n")
    proc = _check_deps("fake-kernel-pkg", tmp_path, PYTHONPATH=str(tmp_path))
    assert proc.returncode == 2
    assert "no-such-dependency-xyz>=1" in proc.stdout and ".whl" in proc.stdout and "plots-only" not in proc.stdout


def test_the_installed_package_has_its_dependencies(tmp_path):
    proc = _check_deps("jfa-verify", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _mutant_verdict(capsys, *args: str) -> tuple[int, str, str]:
    """``ci/mutant_verdict.py ARGS`` run in this process (its import of the framework costs two seconds a
    subprocess): ``(exit status, stdout, stderr)``. Each test also runs the script once as a program."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mutant_verdict", ROOT / "ci" / "mutant_verdict.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    capsys.readouterr()
    rc = module.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_planted_bug_run_cut_by_its_time_limit_still_counts_the_verdicts_it_wrote(tmp_path, capsys):
    """Regression (H200, 2026-12-03): gpu_gluon_mutants.sh called ten runs cut at 200 s "inconclusive" by their
    exit status alone; their reports held failing and hung cases for eight of them."""
    import json

    def verdict(cases, rc):
        path = tmp_path / "r.json"
        path.write_text(json.dumps({"cases": cases, "interrupted": rc != 0}))
        code, out, err = _mutant_verdict(capsys, str(path), str(rc), "200")
        assert code == 0, err
        return out.strip().split("|")

    ok = {"status": "pass"}
    dq = {"status": "fail", "outputs": {"o": {"passed": True}, "dq": {"passed": False}}}
    oom = {"status": "error", "message": "not judged: out of device memory"}
    hang = {"status": "hang", "message": "no verdict after 90 s (--timeout); the worker process was killed"}
    assert verdict([ok, dq, ok], 124) == ["killed", "fail: dq (1 of 3 cases)"]
    assert verdict([ok, hang], 124)[0] == "killed" and verdict([ok, hang], 124)[1].startswith("hang (watchdog)")
    assert verdict([ok, oom, ok], 124) == ["inconclusive", "the run passed 200 s (2 cases passed by then)"]
    assert verdict([ok, oom], 1)[0] == "inconclusive"  # only a case not judged failed: no kill
    assert verdict([ok, ok], 0) == ["survived", "- (2 cases passed)"]
    assert verdict([ok, dq], 2) == ["error", "usage or configuration"]  # exit 2: the report there is an old one
    assert verdict([], 3)[0] == "killed" and verdict([], 139) == ["killed", "crash (exit 139)"]
    # found by the new-user trial: an interrupted run (130) was a "crash", a missing report "survived" or
    # "only cases not judged", a null message or a bad status a traceback
    assert verdict([ok], 130) == ["inconclusive", "interrupted (1 cases passed by then)"]
    assert verdict([{"status": "error", "message": None}], 1)[0] == "killed"
    for rc in ("0", "1"):
        assert _mutant_verdict(capsys, str(tmp_path / "missing.json"), rc)[1].strip() == \
            f"error|no readable report (exit {rc})"
    bad = _mutant_verdict(capsys, str(tmp_path / "r.json"), "abc")
    assert bad[0] == 2 and "usage" in bad[2]
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"cases": [ok], "relations": ["permutation | broke: a|b"]}))
    out = subprocess.run([sys.executable, str(ROOT / "ci" / "mutant_verdict.py"), str(path), "1"],
                         capture_output=True, text=True, timeout=60).stdout.strip()
    assert out.startswith("killed|relation: permutation / broke") and out.count("|") == 1


def test_a_mutant_whose_gate_fails_is_killed_whatever_its_cut_suite_run_said(tmp_path, capsys):
    """Regression (H200 race kill table, 2026-12-06): a mutant whose suite run was cut by its limit
    ("inconclusive") and whose gate's stress check failed was listed "inconclusive"; a gate that hung before
    writing its markdown printed a grep error into the table."""
    md = tmp_path / "g.md"
    md.write_text("| kernel | check | verdict |\n|---|---|---|\n| m | determinism | pass |\n| m | stress | fail |\n")

    def gate(run_verdict, run_by, rc, path=md):
        code, out, err = _mutant_verdict(capsys, "--gate", run_verdict, run_by, str(rc), str(path))
        assert code == 0 and out.count("|") == 1, (out, err)
        return out.strip().split("|")

    cut = ("inconclusive", "the run passed 150 s (70 cases passed by then)")
    verdict, by = gate(*cut, 1)
    assert verdict == "killed" and "stress / fail" in by and "suite run: inconclusive" in by
    assert gate("survived", "- (71 cases passed)", 1)[0] == "killed"
    assert gate(*cut, 0) == ["inconclusive", f"{cut[1]}; gate passed"]  # nothing failed anywhere: no kill
    assert gate("survived", "- (71 cases passed)", 0) == ["survived", "- (71 cases passed)"]
    assert gate("survived", "-", 2)[0] == "survived (gate inconclusive, exit 2)"  # could not judge: no kill
    hung = gate("killed", "hang (watchdog): x (2 of 30 cases)", 3, tmp_path / "none.md")
    assert hung == ["killed", "hang (watchdog): x (2 of 30 cases); gate (exit 3): no markdown written"]
    assert gate(*cut, 3, tmp_path / "none.md")[0] == "killed"
    bad = subprocess.run([sys.executable, str(ROOT / "ci" / "mutant_verdict.py"), "--gate", "x", "y", "z", str(md)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_the_gluon_check_refuses_a_machine_without_cuda_before_checking_anything(tmp_path):
    """Found by the new-user trial: on a CPU machine it ran 124 s of 38 "Cannot get CUDA generator" rows and
    exited 1, a finding's code."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run = subprocess.run([sys.executable, str(ROOT / "ci" / "gpu_gluon_check.py"),
                          "--report", str(tmp_path / "r.json")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "needs a CUDA device" in run.stderr


def test_the_kernels_gpu_tests_are_all_marked_gpu_and_run_by_the_gpu_gate():
    """Issue 40, 2: ``tests/test_kernels_gpu.py`` (gluon_jfa and triton_jfa's compiled branch against the oracles)
    cannot silently run nothing: it collects tests, every one marked ``gpu`` (none is left once they are deselected),
    collecting it imports no Triton, and the GPU gate runs it (``ci/gpu_run.sh``'s tests stage and the workflow)."""
    import re

    def collect(*args):
        proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "--jfa-device", "cpu", *args, str(ROOT / "tests" / "test_kernels_gpu.py")],
                              capture_output=True, text=True, timeout=300, cwd=ROOT)
        return proc.stdout + proc.stderr

    everything = collect()
    ids = [line for line in everything.splitlines() if "::test_" in line]
    assert any("gluon_jfa" in i for i in ids) and any("triton_jfa_tf32" in i for i in ids), everything
    assert any("triton_jfa_fp8" in i for i in ids), everything
    assert re.search(rf"\b{len(ids)} tests? collected", everything), everything
    not_gpu = collect("-m", "not gpu")
    assert re.search(rf"no tests collected \({len(ids)} deselected\)", not_gpu), not_gpu
    probe = "import sys, tests.test_kernels_gpu; print(sorted(m for m in sys.modules if m.split('.')[0] == 'triton'))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr

    run_sh = (ROOT / "ci" / "gpu_run.sh").read_text()
    listed = re.search(r"^tests=\(([^)]*)\)", run_sh, re.M)
    assert listed and "tests/test_kernels_gpu.py" in listed.group(1).split()
    workflow = " ".join((ROOT / ".github" / "workflows" / "gpu-gate.yml").read_text().split())  # folded lines joined
    assert re.search(r"pytest [^\n]*?-m gpu --jfa-device cuda [^\n]*?tests/test_kernels_gpu\.py", workflow), workflow
    assert '"kernels/**"' in workflow and "required" in workflow


def test_no_module_fixture_of_a_gpu_tested_file_selects_the_cpu():
    """Regression (H200, 2026-12-05): ``test_mxfp8.py`` and ``test_fp8.py`` had module-scoped fixtures calling
    ``select_device("cpu")``. In the GPU gate's tests stage such a choice outlives each test's ``device_scope``, runs
    the shipped Triton kernels interpreted in a CUDA worker, and 40 CUDA tests after it in that worker failed. A
    module fixture that needs the CPU interpreter takes ``interpreter_device`` (conftest: skipped in a CUDA
    session)."""
    import ast
    import re

    run_sh = (ROOT / "ci" / "gpu_run.sh").read_text()
    files = re.search(r"^tests=\(([^)]*)\)", run_sh, re.M).group(1).split()
    offenders = []
    for rel in files:
        tree = ast.parse((ROOT / rel).read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            scoped = any(isinstance(d, ast.Call) and any(k.arg == "scope" and getattr(k.value, "value", None)
                                                         in ("module", "session", "package") for k in d.keywords)
                         for d in fn.decorator_list)
            picks_cpu = any(isinstance(c, ast.Call) and getattr(c.func, "id", getattr(c.func, "attr", None))
                            == "select_device" and any(getattr(a, "value", None) == "cpu" for a in c.args)
                            for c in ast.walk(fn))
            if scoped and picks_cpu:
                offenders.append(f"{rel}::{fn.name}")
    assert len(files) >= 10 and not offenders, offenders


def test_a_kill_table_of_named_mutants_refuses_a_name_outside_its_catalogue(tmp_path):
    """``MUTANTS=...`` splits a kill table over calls of a lent machine; a name not in the catalogue (a typo) stops the
    script at once with exit 2 and the catalogue's names, instead of a table that leaves mutants out unnoticed."""
    bindir = Path(sys.executable).parent
    proc = subprocess.run(["bash", "ci/gpu_gluon_mutants.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(tmp_path),
                               "CATALOGUE": "gluon_jfa_races", "MUTANTS": "fwd_v_empty_phase_constant no_such_one"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "MUTANTS: no_such_one is not a mutant of gluon_jfa_races" in proc.stderr
    assert "fwd_v_empty_phase_constant" in proc.stderr and not list(tmp_path.rglob("*.log"))
