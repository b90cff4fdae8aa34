"""The README says what is true: its example outputs match fresh runs, and its kernel example works."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_example_outputs_match_fresh_runs():
    proc = subprocess.run([sys.executable, str(ROOT / "ci" / "readme_examples.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_readme_kernel_is_short_and_passes_the_suite_and_a_campaign(tmp_path):
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Gate your own kernel.*?```python\n(.*?)```", text, re.S).group(1)
    assert len([line for line in code.splitlines() if line.strip()]) < 30
    plugin = tmp_path / "my_kernel.py"
    plugin.write_text(code)
    cli = [sys.executable, "-m", "jfa_verify.cli"]
    common = ["--plugin", str(plugin), "--kernel", "my_jfa", "--device", "cpu", "--reproducers", str(tmp_path / "r")]
    run = subprocess.run(cli + ["run", *common, "--filter", "layout-7-3-19-5-11", "--no-progress", "--report",
                                str(tmp_path / "report.json")], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "unsupported" in run.stdout  # broadcast-Q: outside the declared modes, said so
    fuzz = subprocess.run(cli + ["fuzz", *common, "--max-examples", "15"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert fuzz.returncode == 0, fuzz.stdout[-3000:] + fuzz.stderr[-2000:]
