"""The pytest plugin runs the suite against a named kernel (--jfa-kernel, --jfa-plugin)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "tests/test_corpus_replay.py", "--jfa-device", "cpu", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_corpus_fails_on_named_planted_bug_kernel_and_passes_on_real_one():
    bad = _pytest("--jfa-plugin", "tests/quality/mutant_plugin.py", "--jfa-kernel", "mutant-kv_tail_dropped")
    assert bad.returncode == 1, bad.stdout[-2000:]
    assert "mutant-kv_tail_dropped" in bad.stdout and "failed" in bad.stdout
    good = _pytest("--jfa-kernel", "triton_jfa")
    assert good.returncode == 0, good.stdout[-2000:]


def test_a_plugin_imports_a_module_beside_it(tmp_path):
    """Regression (a new user's trial): a plugin's ``from base import attention`` (a helper file in the plugin's
    folder) failed with ``ModuleNotFoundError`` even when run from that folder; the folder is now importable."""
    import subprocess
    import sys

    folder = tmp_path / "mykernels"
    folder.mkdir()
    (folder / "jfa_trial_base.py").write_text("from jfa_verify.oracles import reference_attention\n")
    (folder / "plug.py").write_text(
        "from jfa_trial_base import reference_attention\n"
        "from jfa_verify import Capabilities, register_kernel\n\n"
        "@register_kernel('beside_helper', capabilities=Capabilities(backward=False))\n"
        "def load():\n"
        "    return lambda *a, **k: None\n")
    # a fresh process: this suite's own sys.path must not decide it
    proc = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "kernels", "--device", "cpu", "--plugin",
                           str(folder / "plug.py")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0 and "beside_helper" in proc.stdout, proc.stdout + proc.stderr
