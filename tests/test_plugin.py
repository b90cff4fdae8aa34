"""The pytest plugin runs the suite against a named kernel (--jfa-kernel, --jfa-plugin)."""

import subprocess
import sys
from pathlib import Path

import pytest

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


_USER_CODE = '''
from jfa_verify.core.contract import validate_inputs
from jfa_verify.oracles import reference_attention

SCALE = 1.0


def forward(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
    problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                              sm_scale=sm_scale)
    ref = reference_attention(problem, q, k, v)
    return (ref["o"] * SCALE).to(q.dtype), ref["lse"].float()
'''


def _user_catalogue(tmp_path, kernel: str, target: str, builder: str) -> Path:
    import json

    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps({
        "format": "jfa-verify-mutants/1", "name": "mine", "kernel": kernel, "builder": builder,
        "targets": {"code": target},
        "mutants": [{"name": "scaled", "description": "outputs scaled by 1.5", "target": "code",
                     "old": "SCALE = 1.0", "new": "SCALE = 1.5"}]}))
    return path


def _user_kernel(tmp_path, name: str) -> tuple[Path, str]:
    """A package ``<name>_k`` (its code, a builder) beside a plugin file registering it as kernel ``name``: the
    plugin's path and the package's name (one per test: Python keeps a package imported once per process)."""
    package = f"{name}_k"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "code.py").write_text(_USER_CODE)
    (tmp_path / package / "build.py").write_text(
        "import importlib\n\n\ndef build(*, code_module=None):\n"
        f"    return (code_module or importlib.import_module({package + '.code'!r})).forward\n")
    plugin = tmp_path / f"{name}_plugin.py"
    plugin.write_text(f"from jfa_verify import Capabilities, register_kernel\nfrom {package}.build import build\n\n"
                      f"register_kernel({name!r}, capabilities=Capabilities(backward=False))(lambda: build())\n")
    return plugin, package


def test_mutants_judge_a_plugin_kernel_given_with_plugin(tmp_path, capsys):
    """Regression (a new user's trial, 2026-12-07): `mutants` had no --plugin, though its error for a plugin kernel
    suggested one; a team could not mutate its own kernel without making it an installed package."""
    from jfa_verify.cli import main

    plugin, package = _user_kernel(tmp_path, "user_mutable")
    catalogue = _user_catalogue(tmp_path, "user_mutable", f"{package}.code", f"{package}.build:build")
    assert main(["mutants", "--catalogue", str(catalogue), "--device", "cpu", "--jobs", "1",
                 "--max-examples", "5"]) == 2  # the kernel unknown without its plugin: a usage error
    assert "--plugin" in capsys.readouterr().err
    rc = main(["mutants", "--catalogue", str(catalogue), "--plugin", str(plugin), "--device", "cpu", "--jobs", "1",
               "--max-examples", "5"])
    out = capsys.readouterr().out
    assert rc == 0 and "1/1 mutants killed" in out, out


def test_a_target_module_that_registers_its_kernel_is_not_judged_with_the_fix(tmp_path, capsys):
    """The README's one-file plugin, mutated: the copy registered the kernel's name again and the mutant came out
    'not judged' with a registry error that told the user to pass another name to --kernel (mutants has none)."""
    from jfa_verify.cli import main

    plugin = tmp_path / "userone.py"
    plugin.write_text(_USER_CODE + "\n\nfrom jfa_verify import Capabilities, register_kernel\n\n\n"
                      "def build(*, code_module=None):\n"
                      "    return code_module.forward if code_module else forward\n\n\n"
                      "register_kernel('user_one_file', capabilities=Capabilities(backward=False))(lambda: forward)\n")
    catalogue = _user_catalogue(tmp_path, "user_one_file", "userone", "userone:build")
    rc = main(["mutants", "--catalogue", str(catalogue), "--plugin", str(plugin), "--device", "cpu", "--jobs", "1",
               "--max-examples", "5"])
    out = capsys.readouterr().out
    assert rc == 1 and "registers kernel 'user_one_file' itself" in out, out
    assert "keep the register_kernel call in another module" in out


def test_a_gpu_marked_test_asking_for_the_jfa_device_is_skipped_where_it_would_be_the_cpu(tmp_path):
    """Regression (a new user's trial, 2026-12-07): without --jfa-device, a ``gpu`` test using ``jfa_device`` ran on
    a machine without CUDA and failed ("assert 'cpu' == 'cuda'"), though the marker is documented as skipped when
    the device is the CPU. A project's own ``gpu`` test that asks for no jfa_* fixture is left to the project."""
    import torch

    (tmp_path / "test_markers.py").write_text(
        "import pytest\n\n\n@pytest.mark.gpu\ndef test_gpu_only(jfa_device):\n"
        "    assert jfa_device.type == 'cuda'\n\n\n@pytest.mark.gpu\ndef test_own_gpu_marker():\n    pass\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "test_markers.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if torch.cuda.is_available():
        assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-2000:]
    else:
        assert run.returncode == 0 and "1 passed, 1 skipped" in run.stdout, run.stdout[-2000:]
        assert "gpu test; the selected device is the CPU" in run.stdout


def test_a_verifier_of_a_plugin_kernel_names_its_plugin_in_case_files_and_replays(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial, 2026-12-07): a pytest suite's ``Verifier(kernel, device, corpus)`` of a kernel
    loaded by --jfa-plugin wrote case files with "plugins": [], so `findings` printed replay commands without
    --plugin, which failed ("no kernel named ..."). A verifier given no plugins takes the file that registered it."""
    import json

    from jfa_verify import Case
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from jfa_verify.run.loop import Verifier

    plugin = misbehaving_plugin("wrong_for_batches", wrong="B >= 2")
    load_plugin(plugin)
    with Verifier(get_kernel("wrong_for_batches"), "cpu", tmp_path / "corpus") as verifier:
        result = verifier.verify(Case(kv_lengths=(5, 7), num_heads_q=2, num_heads_kv=2, head_dim=16, dtype="float32"))
    assert result.failed and result.reproducer
    assert json.loads(Path(result.reproducer).read_text())["plugins"] == [str(plugin.resolve())]
    assert f"--plugin {plugin.resolve()}" in result.replay_command()


@pytest.mark.parametrize("field, value, said", [
    ("targets", {"code": "{p}.nothere"}, "target 'code' is module '{p}.nothere', which cannot be imported"),
    ("targets", {"code": "nopackage.code"}, "target 'code' is module 'nopackage.code', which cannot be imported"),
    ("builder", "{p}.build:nosuch", "builder '{p}.build:nosuch' cannot be found"),
    ("builder", "{p}.nomodule:build", "builder '{p}.nomodule:build' cannot be found"),
    # (helper-68's catalogue targeting a module its builder takes no parameter for: every mutant "not judged")
    ("targets", {"code": "{p}.code", "plan": "{p}.code"},
     "target 'plan' reaches the builder as plan_module=, which builder '{p}.build:build' does not take"),
])
def test_a_catalogue_whose_target_or_builder_cannot_be_found_is_a_usage_error_before_any_mutant(
        tmp_path, capsys, field, value, said):
    """Regression (a new user's trial, 2026-12-07): a target module that does not exist made every mutant "not
    judged" ('NoneType' object has no attribute 'origin'; exit 70 with --no-isolate), and a builder that does not
    exist made each "not judged" with advice about register_kernel(requires=...). Both are checked first, exit 2."""
    import json

    from jfa_verify.cli import main

    name = f"user_bad_catalogue_{abs(hash(str(value))) % 10 ** 6}"
    plugin, package = _user_kernel(tmp_path, name)
    catalogue = _user_catalogue(tmp_path, name, f"{package}.code", f"{package}.build:build")
    doc = json.loads(catalogue.read_text())
    doc[field] = json.loads(json.dumps(value).replace("{p}", package))
    said = said.replace("{p}", package)
    catalogue.write_text(json.dumps(doc))
    for isolate in ("--isolate", "--no-isolate"):
        assert main(["mutants", "--catalogue", str(catalogue), "--plugin", str(plugin), "--device", "cpu",
                     isolate]) == 2
        captured = capsys.readouterr()
        assert said in captured.err and "scaled:" not in captured.out, captured


@pytest.mark.parametrize("args, said", [
    (["--jfa-plugin", "nope.py"], "plugin file"),
    (["--jfa-corpus", "afile"], "--jfa-corpus afile: a file, not a folder"),
    (["--jfa-kernel", "triton_jfa", "--jfa-plugin", "broken.py"], "SyntaxError"),
])
def test_the_pytest_plugins_bad_options_are_usage_errors(tmp_path, args, said):
    """Regression (a new user's trial, 2026-12-07): a missing --jfa-plugin file (and a CUDA device asked for on a
    machine without one, whose message named `--device`) ended pytest in an INTERNALERROR traceback, exit 3; a
    --jfa-corpus naming a file failed a test with a raw FileExistsError."""
    (tmp_path / "afile").write_text("")
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "test_nothing.py", *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 4 and said in run.stderr and "INTERNALERROR" not in run.stdout + run.stderr, (
        run.stdout[-2000:] + run.stderr[-2000:])


def test_the_pytest_plugins_device_error_names_its_own_flag(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("the machine has a CUDA device: asking for one is no error")
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "test_nothing.py", "--jfa-device", "cuda"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 4 and "use --jfa-device cpu" in run.stderr, run.stdout[-2000:] + run.stderr[-2000:]


def test_an_unknown_jfa_kernel_ends_the_session_as_a_usage_error(tmp_path):
    """Regression (a new user's trial): ``--jfa-kernel nope`` gave an UnknownKernel traceback as an ERROR of every
    test that asked for the kernel; it now ends the session at the first one, exit 4, naming the flag."""
    (tmp_path / "test_two.py").write_text("def test_one(jfa_kernel):\n    pass\n\n\ndef test_two(jfa_kernel):\n"
                                          "    pass\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "test_two.py", "--jfa-kernel", "nope"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 4 and "--jfa-kernel: no kernel named 'nope'" in out, out[-3000:]
    assert "Traceback" not in out and "ERROR at setup" not in out, out[-3000:]


def test_the_readmes_pytest_example_fails_on_a_planted_bug_and_leaves_a_replayable_file(tmp_path):
    """The README's property test (``<!-- pytest-example -->``), run as it says: on a wrong kernel it fails and
    leaves a case file in ``--jfa-corpus`` that ``jfa-verify replay`` fails again; on a correct kernel it passes (a
    new user's ``run_case`` test wrote no file there, and the README showed no way that does, helper-67)."""
    import re

    readme = (ROOT / "README.md").read_text()
    code = re.search(r"<!-- pytest-example -->\n```python\n(.*?)```", readme, re.S).group(1)
    test = tmp_path / "test_readme_example.py"
    test.write_text(code.replace("max_examples=25", "max_examples=4"))

    def run(kernel: str, plugin: str, corpus):
        # --hypothesis-seed: four drawn cases, the same every run. Unseeded, the wrong kernel passed one run in three
        # (2026-12-08): its mistake (O scaled by 1.5) is invisible where every output row is empty or the values are
        # tiny, and it raises on strided offsets, which is a pass (they are outside the contract)
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                               str(test), "--hypothesis-seed", "0", "--jfa-device", "cpu", "--jfa-plugin", plugin,
                               "--jfa-kernel", kernel, "--jfa-corpus", str(corpus)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600)

    plugin = str(ROOT / "tests" / "quality" / "memory_plugin.py")  # (plain-torch kernels, fast)
    bad = run("wrong-everywhere", plugin, tmp_path / "bad")
    assert bad.returncode == 1, bad.stdout[-2000:]
    files = sorted((tmp_path / "bad").glob("*.json"))
    assert files, bad.stdout[-2000:]
    replay = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "replay", str(files[0]), "--device", "cpu",
                             "--plugin", plugin], capture_output=True, text=True, timeout=600)
    assert replay.returncode == 1, replay.stdout[-2000:] + replay.stderr[-2000:]
    good = run("exact-ref", plugin, tmp_path / "good")
    assert good.returncode == 0, good.stdout[-2000:]
    assert not list((tmp_path / "good").glob("*.json"))


def test_a_failing_property_test_leaves_one_finding_file_not_one_per_shrink_step(tmp_path):
    """Regression (a new user's trial): the README's property test on a planted bug wrote about 29 case files into
    ``--jfa-corpus``, one per Hypothesis shrink step, which ``jfa-verify findings`` listed as one row. The test's
    failing files are now folded as a campaign folds a shrink round: one finding file, its shrunk case, the other
    failing cases its examples; ``findings`` lists it with a replay command that fails again."""
    import os
    import re
    import shlex

    from jfa_verify.fuzz.findings import list_findings

    readme = (ROOT / "README.md").read_text()
    code = re.search(r"<!-- pytest-example -->\n```python\n(.*?)```", readme, re.S).group(1)
    (tmp_path / "test_readme_example.py").write_text(code)  # (25 examples: it draws failures and shrinks them)
    plugin = str(ROOT / "tests" / "quality" / "memory_plugin.py")  # (plain-torch kernels, fast; seeded draws, as above)
    corpus = tmp_path / "found"
    # a Hypothesis database of its own: the suite's shared one holds the shrunk example of an earlier run, which
    # Hypothesis would replay alone (one call, no shrink steps to fold)
    env = {**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / ".hypothesis")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "test_readme_example.py", "--hypothesis-seed", "0", "--jfa-device", "cpu", "--jfa-plugin",
                          plugin, "--jfa-kernel", "wrong-everywhere", "--jfa-corpus", str(corpus)], cwd=tmp_path,
                         capture_output=True,
                         text=True, timeout=600, env=env)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    files = sorted(corpus.glob("*.json"))
    assert len(files) == 1, [f.name for f in files]
    (row,) = list_findings(corpus)
    assert row["path"] == str(files[0]) and row["found_by"] == "pytest" and row["examples"] > 1, row
    replay = subprocess.run([sys.executable, "-m", "jfa_verify.cli", *shlex.split(row["replay"])[1:], "--device",
                             "cpu"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert replay.returncode == 1, replay.stdout[-2000:] + replay.stderr[-2000:]


def test_a_jfa_plugin_that_registers_kernels_needs_jfa_kernel_named(tmp_path):
    """Regression (helper-67's trial, 2026-12-07): with ``--jfa-plugin mine.py`` and no ``--jfa-kernel``, the user's
    tests got the built-in triton_jfa and passed. Now the first test that asks for the kernel ends the session, exit 4,
    naming the plugin's kernels; a plugin that registers none keeps the default."""
    (tmp_path / "mine.py").write_text(
        "from jfa_verify import Capabilities, register_kernel\n\n"
        "@register_kernel('forgot_to_name_me', capabilities=Capabilities(backward=False))\n"
        "def load():\n    raise AssertionError('not to be loaded')\n")
    (tmp_path / "patch_only.py").write_text("import jfa_verify  # a plugin may only patch things\n")
    (tmp_path / "test_k.py").write_text("def test_k(jfa_kernel):\n    assert jfa_kernel.name == 'triton_jfa'\n")

    def run(plugin: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                               "test_k.py", "--jfa-device", "cpu", "--jfa-plugin", plugin], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)

    forgot = run("mine.py")
    out = forgot.stdout + forgot.stderr
    assert forgot.returncode == 4, out[-3000:]
    assert "--jfa-plugin registers forgot_to_name_me, and no --jfa-kernel was given" in out, out[-3000:]
    assert "--jfa-kernel forgot_to_name_me" in out and "Traceback" not in out, out[-3000:]
    kept = run("patch_only.py")
    assert kept.returncode == 0, kept.stdout[-3000:] + kept.stderr[-3000:]
