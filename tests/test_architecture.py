"""The package's shape: one import root, no import cycles, the framework imports no kernel by name,
and the pytest plugin changes nothing for projects that do not use it."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_graph_has_no_cycles_and_no_kernel_imported_by_name():
    proc = subprocess.run([sys.executable, str(ROOT / "ci" / "import_graph.py"), "--check"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout
    assert "OK" in proc.stdout


def test_the_check_sees_a_cycle_and_a_kernel_imported_by_name(tmp_path, monkeypatch):
    """The graph check is not vacuous: planted edges are reported."""
    sys.path.insert(0, str(ROOT / "ci"))
    try:
        import import_graph as g
    finally:
        sys.path.pop(0)
    assert g.cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    mods = g.modules()
    graph, _ = g.edges(mods)
    monkeypatch.setattr(g, "edges", lambda m: (graph | {("jfa_verify.runner", "jfa_verify.kernels.triton_jfa"),
                                                        ("jfa_verify.errors", "jfa_verify.runner")}, []))
    found = g.problems()
    assert any("imports kernel module jfa_verify.kernels.triton_jfa" in p for p in found), found
    assert any(p.startswith("import cycle") and "jfa_verify.errors" in p for p in found), found


def test_only_jfa_verify_is_installed_at_the_top_level():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {p.split(".")[0] for p in config["packages"]} == {"jfa_verify"}
    assert set(config["package-dir"]) <= set(config["packages"])


def _pytest_in(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "HYPOTHESIS_PROFILE", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
                          cwd=repo, capture_output=True, text=True, timeout=300, env=env)


def test_a_user_repository_with_its_own_kernels_package_runs_pytest_untouched(tmp_path):
    """Regression: the package installed a top-level ``kernels``; in a repository with its own ``kernels/``,
    ``python -m pytest`` died with ``INTERNALERROR ... cannot import name 'load_plugin' from 'kernels'``,
    and the auto-loaded plugin set TRITON_INTERPRET=1 and max_examples=10 for every project."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("MINE = 'the user kernels package'\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mine.py").write_text(textwrap.dedent("""
        import os

        from hypothesis import settings

        import kernels


        def test_own_package_and_untouched_settings():
            assert kernels.MINE == "the user kernels package"
            assert "TRITON_INTERPRET" not in os.environ
            assert settings.default.max_examples == 100  # Hypothesis's own default, no profile loaded


        def test_plugin_fixtures_still_work_for_those_who_ask(jfa_kernel, jfa_device):
            assert jfa_kernel.name == "triton_jfa" and jfa_device.type in ("cpu", "cuda")
    """))
    proc = _pytest_in(tmp_path, "tests")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout
