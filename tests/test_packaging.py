"""The package as users install it: a wheel in a fresh virtual environment, run from outside the
repository, and a kernel from a separate installed package found through its entry point."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, cwd, timeout=600, env=None):
    env = {k: v for k, v in (env or os.environ).items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    return proc


_PATHS = ("import json, site, sysconfig; p = sysconfig.get_paths(); "
          "print(json.dumps([p['purelib'], p['platlib'], *site.getsitepackages()]))")


def _environment_paths(python) -> list[str]:
    """The package folders of interpreter ``python`` (its virtualenv's when it is one, else the base's)."""
    proc = _run([str(python), "-c", _PATHS], cwd=Path(str(python)).parent)
    assert proc.returncode == 0, proc.stderr
    return list(dict.fromkeys(p for p in json.loads(proc.stdout) if Path(p).is_dir()))


def _add_environment(python: Path, of) -> None:
    """Make the venv of ``python`` see the packages of interpreter ``of`` (torch, Triton, ...) through a .pth file."""
    purelib = _environment_paths(python)[0]
    Path(purelib, "jfa_verify_test_environment.pth").write_text("\n".join(_environment_paths(of)) + "\n")


def test_a_venv_made_from_a_venv_sees_the_outer_venvs_packages(tmp_path):
    """Regression (issue 43, 1): in a virtualenv, the test venv was made with --system-site-packages, which sees the
    *base* interpreter's site-packages, without torch: the wheel's tests failed with 'No module named torch'. Here
    the test environment is a venv holding a module the base interpreter does not have."""
    outer, inner = tmp_path / "outer", tmp_path / "inner"
    assert _run([sys.executable, "-m", "venv", str(outer)], cwd=tmp_path).returncode == 0
    outer_python = outer / "bin" / "python"
    Path(_environment_paths(outer_python)[0], "only_in_the_outer_venv.py").write_text("WHERE = 'outer venv'\n")
    assert _run([str(outer_python), "-m", "venv", str(inner)], cwd=tmp_path).returncode == 0
    _add_environment(inner / "bin" / "python", of=outer_python)
    seen = _run([str(inner / "bin" / "python"), "-c", "import only_in_the_outer_venv as m; print(m.WHERE)"],
                cwd=tmp_path)
    assert seen.stdout.strip() == "outer venv", seen.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv with jfa-verify installed from a wheel built from this repository.

    It sees the test environment's site-packages for torch, Triton and the rest (installing torch
    again would take minutes), but jfa_verify itself comes from the wheel (checked below).
    """
    import shutil

    base = tmp_path_factory.mktemp("venv")
    wheels = base / "wheels"
    # Built from a copy of what the wheel is made of: setuptools builds in the source tree's build/ and *.egg-info,
    # which in the checkout would be left there (issue 43, 2).
    source = base / "source"
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("jfa_verify", "kernels", "oracles", "fuzz"):
        shutil.copytree(ROOT / name, source / name, ignore=junk)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    build = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                  str(source)], cwd=base)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    (wheel,) = wheels.glob("jfa_verify-*.whl")
    env_dir = base / "env"
    made = _run([sys.executable, "-m", "venv", str(env_dir)], cwd=base)
    assert made.returncode == 0, made.stderr
    python = env_dir / "bin" / "python"
    # The test environment's packages, whether it is the base interpreter or a virtualenv: `venv
    # --system-site-packages` made inside a virtualenv sees the *base* interpreter's site-packages, which lack torch
    # when the README's commands ran in a virtualenv (issue 43, 1). Paths a .pth file adds come after the new venv's
    # own site-packages, so jfa_verify is still the wheel's.
    _add_environment(python, of=sys.executable)
    inst = _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], cwd=base)
    assert inst.returncode == 0, inst.stdout[-2000:] + inst.stderr[-2000:]
    where = _run([str(python), "-c", "import jfa_verify; print(jfa_verify.__file__)"], cwd=base)
    assert str(env_dir) in where.stdout, where.stdout + where.stderr  # the wheel, not the checkout
    return python, base


def test_wheel_holds_one_top_level_package_and_its_data(venv):
    import zipfile

    _, base = venv
    (wheel,) = (base / "wheels").glob("jfa_verify-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.startswith("jfa_verify-")} == {"jfa_verify"}
    for data in ("jfa_verify/data/budgets.json", "jfa_verify/fuzz/catalogues/triton_jfa.json",
                 "jfa_verify/data/movielens_small_user_history_lengths.txt",
                 "jfa_verify/kernels/triton_jfa/_kernels.py"):
        assert data in names, data


def test_wheel_runs_the_main_job_and_mutants_from_outside_the_repository(venv, tmp_path):
    python, _ = venv
    cli = [str(python), "-m", "jfa_verify.cli"]
    run = _run(cli + ["run", "--device", "cpu", "--max-cases", "2", "--no-progress", "--report", "r.json"],
               cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["pass"] == 2
    mut = _run(cli + ["mutants", "--device", "cpu", "--only", "offsets_at_b", "sched_repeats_tile",
                      "--max-examples", "0"], cwd=tmp_path)
    assert mut.returncode == 0, mut.stdout[-3000:] + mut.stderr[-3000:]
    assert "2/2 mutants killed" in mut.stdout
    # what runs is said before the first verdict (which can take minutes), not after the last
    assert mut.stdout.index(": 2 mutants, 1 at a time") < mut.stdout.index("  offsets_at_b: killed"), mut.stdout


def test_a_kernel_package_registers_through_its_entry_point(venv, tmp_path):
    """A team's kernel, installed as its own package, is found without --plugin and localized with its
    own tile sizes."""
    python, _ = venv
    pkg = tmp_path / "teamkernel"
    (pkg / "team_jfa").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "team-jfa"
        version = "1.0"

        [project.entry-points."jfa_verify.kernels"]
        team_jfa = "team_jfa"
    """))
    (pkg / "team_jfa" / "__init__.py").write_text(textwrap.dedent('''
        """A team's kernel: padded SDPA per sequence, with declared tiles (8 query rows, 4 keys)."""
        import torch
        from jfa_verify import Capabilities, TileSizes, register_kernel


        def attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
            from jfa_verify import validate_inputs
            from jfa_verify.oracles import reference_attention

            p = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                sm_scale=sm_scale)
            ref = reference_attention(p, q.detach(), k.detach(), v.detach())
            o = ref["o"].to(q.dtype) + 0 * q.sum() + 0 * k.sum() + 0 * v.sum()  # differentiable stand-in
            return o, ref["lse"].float()


        @register_kernel("team_jfa", capabilities=Capabilities(dtypes=(torch.float32,), backward=False),
                         tile_sizes=lambda problem: TileSizes(8, 4))
        def load():
            return attention
    '''))
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "w"),
                  str(pkg)], cwd=tmp_path)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    inst = _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                 str(next((tmp_path / "w").glob("team_jfa-*.whl")))], cwd=tmp_path)
    assert inst.returncode == 0, inst.stdout[-2000:] + inst.stderr[-2000:]
    listed = _run([str(python), "-m", "jfa_verify.cli", "kernels"], cwd=tmp_path)
    assert "team_jfa" in listed.stdout, listed.stdout + listed.stderr
    run = _run([str(python), "-m", "jfa_verify.cli", "run", "--device", "cpu", "--kernel", "team_jfa",
                "--filter", "tile-edges", "--no-progress", "--report", "r.json"], cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    checked = [c for c in report["cases"] if c["status"] == "pass"]
    assert checked and all(c["block_sizes"] == [8, 4] for c in checked)  # localized with the kernel's own tiles
    assert all(c["case"]["dtype"] == "float32" or c["status"] == "unsupported" for c in report["cases"])
