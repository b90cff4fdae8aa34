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
                                str(tmp_path / "report.json")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "unsupported" in run.stdout  # broadcast-Q: outside the declared modes, said so
    fuzz = subprocess.run(cli + ["fuzz", *common, "--max-examples", "15"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert fuzz.returncode == 0, fuzz.stdout[-3000:] + fuzz.stderr[-2000:]


def test_readme_check_ignores_float_digits_but_not_counts_or_words():
    # the README's outputs were made on one CPU; another rounds float32 SDPA differently in the last digits
    sys.path.insert(0, str(ROOT / "ci"))
    try:
        from readme_examples import comparable
    finally:
        sys.path.remove(str(ROOT / "ci"))
    made = "dq: max abs error 0.575 > allowance 2.79e-05 (SDPA same-dtype error 1.53e-06) at [18, 0, 0]; 3 cases"
    other_cpu = "dq: max abs error 0.575 > allowance 2.82e-05 (SDPA same-dtype error 1.67e-06) at [18, 0, 0]; 3 cases"
    assert comparable(made) == comparable(other_cpu)
    assert comparable(made) != comparable(made.replace("3 cases", "4 cases"))
    assert comparable(made) != comparable(made.replace("[18, 0, 0]", "[19, 0, 0]"))
    assert comparable(made) != comparable(made.replace("dq:", "dk:"))
    assert comparable("torch 2.13.0, Triton 3.6.0") == "torch 2.13.0, Triton 3.6.0"


def test_readme_kernel_passes_the_gates_memory_checks_on_a_first_sequence_that_is_empty(tmp_path):
    """Regression (a new user's trial): `jfa-verify gate` failed the README's kernel in its canaries and
    recycled-memory checks: on a guard-banded allocation (then an autograd view of its buffer) the kernel's
    `o[rows] = ...` into an empty first slice, then into the next, raised "a leaf Variable that requires grad is
    being used in an in-place operation"."""
    from jfa_verify import Case, RunSettings, run_case
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Gate your own kernel.*?```python\n(.*?)```", text, re.S).group(1)
    plugin = tmp_path / "my_kernel.py"
    plugin.write_text(code.replace('"my_jfa"', '"my_jfa_memory"'))
    load_plugin(plugin)
    case = Case(kv_lengths=(0, 3), head_dim=32, head_dim_v=33, num_heads_q=4, num_heads_kv=2, dtype="bfloat16",
                causal=True, causal_alignment="bottom_right", layout="head_dim_strided", values="large_logits")
    for memory in (None, "nan", "large"):
        result = run_case(case, get_kernel("my_jfa_memory"), "cpu", RunSettings(memory=memory))
        assert result.status == "pass", (memory, result.explain())


def test_a_kernel_whose_output_is_detached_fails_when_it_declares_a_backward(tmp_path):
    """Regression (a new user's trial): the README's kernel returning `o.detach(), lse.detach()` passed all 99 cases
    of `jfa-verify run` and a campaign with its gradients never judged (the backward was skipped without a word)."""
    from jfa_verify import Case, RunSettings, run_case
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Gate your own kernel.*?```python\n(.*?)```", text, re.S).group(1)
    assert "    return o, lse\n" in code
    plugin = tmp_path / "detached.py"
    plugin.write_text(code.replace('"my_jfa"', '"my_jfa_detached"').replace("    return o, lse\n",
                                                                            "    return o.detach(), lse.detach()\n"))
    load_plugin(plugin)
    kernel = get_kernel("my_jfa_detached")
    case = Case(kv_lengths=(5, 3), head_dim=16, dtype="float32")
    result = run_case(case, kernel, "cpu")
    assert result.status == "fail" and "o does not require grad" in result.explain(), result.explain()
    assert run_case(case, kernel, "cpu", RunSettings(backward=False)).status == "pass"  # the forward itself is right
    # where every true gradient is zero (no sequence with a score) an O no gradient reaches is right: the README's
    # own kernel leaves O a fresh tensor for a batch of no sequence (a second trial's gate failed it there)
    for empty in (Case(kv_lengths=(0, 0), head_dim=16, dtype="float32"),
                  Case(kv_lengths=(), head_dim=16, dtype="float32", offsets_start=3)):
        assert run_case(empty, kernel, "cpu").status == "pass", run_case(empty, kernel, "cpu").explain()


def test_a_kernel_that_declares_an_lse_and_returns_none_for_it_is_told_so(tmp_path):
    """Regression (a new user's trial): the README's kernel returning `o, None` passed every case with LSE never
    judged and nothing said, while returning `o` alone was refused with the fix named."""
    from jfa_verify import Case, run_case
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    code = re.search(r"## Gate your own kernel.*?```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    plugin = tmp_path / "no_lse.py"
    code = code.replace('"my_jfa"', '"my_jfa_no_lse"')
    plugin.write_text(code.replace("    return o, lse\n", "    return o, None\n"))
    load_plugin(plugin)
    result = run_case(Case(kv_lengths=(5, 3), head_dim=16, dtype="float32"), get_kernel("my_jfa_no_lse"), "cpu")
    assert result.status in ("fail", "error") and "returned (o, None)" in result.explain(), result.explain()
    assert "Capabilities(returns_lse=False)" in result.explain()


def test_a_kernel_that_declares_no_lse_and_returns_one_is_told_so(tmp_path):
    """Regression (a new user's trial, 2026-12-05): the README's kernel declaring Capabilities(returns_lse=False)
    and still returning (o, lse) passed with its LSE dropped unjudged and nothing said (a 3-tuple was refused)."""
    from jfa_verify import Case, run_case
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    code = re.search(r"## Gate your own kernel.*?```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    declared = 'capabilities=Capabilities(modes=("self", "cross"))'
    assert declared in code
    plugin = tmp_path / "undeclared_lse.py"
    code = code.replace('"my_jfa"', '"my_jfa_undeclared_lse"')
    plugin.write_text(code.replace(declared, 'capabilities=Capabilities(modes=("self", "cross"), returns_lse=False)'))
    load_plugin(plugin)
    result = run_case(Case(kv_lengths=(5, 3), head_dim=16, dtype="float32"), get_kernel("my_jfa_undeclared_lse"),
                      "cpu")
    assert result.status in ("fail", "error") and "returned (o, lse) but declares" in result.explain()
    assert "returns_lse=True" in result.explain()


def test_a_kernel_whose_backward_reaches_only_some_inputs_is_a_contract_finding(tmp_path):
    """Regression (a new user's trial): a kernel detaching k inside its call had dK None after O's backward; the
    judging crashed on it and the case read "kernel raised: not judged: ... 'NoneType' object has no attribute
    'shape'". Now an unreached input's gradient is judged as zero, and the case names the input and the fix."""
    from jfa_verify import Case, run_case
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    code = re.search(r"## Gate your own kernel.*?```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    first_line = "    scale = q.shape[-1] ** -0.5"
    assert first_line in code
    code = code.replace('"my_jfa"', '"my_jfa_detached_k"')
    plugin = tmp_path / "detached_k.py"
    plugin.write_text(code.replace(first_line, "    k = k.detach()\n" + first_line, 1))
    load_plugin(plugin)
    result = run_case(Case(kv_lengths=(5, 3), head_dim=16, dtype="float32"), get_kernel("my_jfa_detached_k"), "cpu")
    assert result.status == "fail" and "no gradient reaches k (.grad is None" in result.explain(), result.explain()
    assert "not judged" not in result.explain()
