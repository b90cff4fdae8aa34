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
    monkeypatch.setattr(g, "edges", lambda m: (graph | {("jfa_verify.run.runner", "jfa_verify.kernels.triton_jfa"),
                                                        ("jfa_verify.core.errors", "jfa_verify.run.runner")}, []))
    found = g.problems()
    assert any("imports kernel module jfa_verify.kernels.triton_jfa" in p for p in found), found
    assert any(p.startswith("import cycle") and "jfa_verify.core.errors" in p for p in found), found


def _graph_module():
    sys.path.insert(0, str(ROOT / "ci"))
    try:
        import import_graph as g
    finally:
        sys.path.pop(0)
    return g


def test_the_check_sees_a_module_importing_a_higher_layer_and_one_in_no_layer(monkeypatch):
    """The layer order is enforced: the contract (core) importing the runner (run) is reported, as is a module
    that belongs to no layer."""
    g = _graph_module()
    assert g.problems() == []
    graph, _ = g.edges(g.modules())
    planted = {("jfa_verify.core.contract", "jfa_verify.run.runner"),
               ("jfa_verify.nowhere.thing", "jfa_verify.core.errors")}
    monkeypatch.setattr(g, "edges", lambda m: (graph | planted, []))
    found = g.problems()
    assert ("layer order: jfa_verify.core.contract (jfa_verify) imports jfa_verify.run.runner (jfa_verify.run), "
            "a higher layer") in found, found
    assert "module jfa_verify.nowhere.thing is in no layer (ci/import_graph.py LAYERS)" in found, found


def test_every_folder_of_the_package_is_a_layer_and_every_module_is_in_one():
    """A reader sees the layers from the tree: each folder under jfa_verify/ is named in LAYERS."""
    g = _graph_module()
    folders = {p.name for p in (ROOT / "jfa_verify").iterdir() if (p / "__init__.py").is_file()}
    named = {p.split(".")[1] for layer in g.LAYERS for p in layer if p.count(".") == 1}
    assert folders <= named, folders - named
    assert all(g.layer_of(m) is not None for m in g.modules())


def test_only_jfa_verify_is_installed_at_the_top_level_and_every_package_folder_is_installed():
    sys.path.insert(0, str(ROOT))
    try:
        import setup
    finally:
        sys.path.pop(0)
    packages = setup.packages()
    assert {p.split(".")[0] for p in packages} == {"jfa_verify"}
    assert set(setup.FOLDERS) <= set(packages)
    inits = [p for folder in ("jfa_verify", "kernels", "oracles", "fuzz") for p in (ROOT / folder).rglob("__init__.py")]
    assert len(packages) == len(inits) and "jfa_verify.workflows.bisect" in packages


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
