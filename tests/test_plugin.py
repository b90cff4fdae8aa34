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
