"""The precompile step (issue 39, 2): a run's kernel variants are found before any case runs and each is built once.

On the CPU Triton's interpreter builds nothing, so the step is a measured no-op there, and ``run`` and ``gate`` say so.
The tracing and the building are checked on the CPU the way ``tests/test_triton_jfa_variants.py`` reads cache keys:
in a subprocess without ``TRITON_INTERPRET``, with a driver that knows only the target (sm_90).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from jfa_verify.cases.case import Case
from jfa_verify.cli import main
from jfa_verify.run.precompile import Precompiled, precompile

ROOT = Path(__file__).resolve().parents[1]


def _compiled_mode(script: str, tmp_path, timeout: int = 420) -> dict:
    """Run ``script`` in a fresh Python without ``TRITON_INTERPRET`` (its cache in ``tmp_path``); the JSON it printed
    after ``RESULT``."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    run = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=timeout)
    assert run.returncode == 0, run.stderr[-4000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


_COUNTING = """
import collections, json, torch
from jfa_verify.cases.case import Case
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.precompile import precompile, trace_variants

kernel = get_kernel("triton_jfa")
shape = dict(num_heads_q=4, num_heads_kv=2, head_dim=64, dtype="bfloat16")
cases = [
    Case(kv_lengths=[5, 40, 17], seed=1, name="a", **shape),
    Case(kv_lengths=[33, 1, 0, 64], seed=2, name="a-other-lengths", **shape),  # the same variants as "a"
    Case(kv_lengths=[5, 40, 17], seed=3, causal=True, name="b-causal", **shape),
    Case(kv_lengths=[9, 12], seed=4, name="c-float16", **{**shape, "dtype": "float16"}),
    Case(kv_lengths=[9, 12], seed=5, causal=True, name="b-causal-again", **shape),  # the same as "b-causal"
]
built = collections.Counter()

def counting_build(variant):
    built[variant.key] += 1
    return 0.0

result = precompile(kernel, cases, torch.device("cpu"), target=("cuda", 90, 32), build=counting_build,
                    trace_here=True)
alone = {c.name: {v.key for v in trace_variants(kernel, [c], torch.device("cpu"))[0]} for c in cases}
print("RESULT" + json.dumps({"result": result.to_dict(), "built": dict(built),
                             "alone": {k: sorted(v) for k, v in alone.items()}}))
"""


def test_each_variant_the_cases_need_is_built_once_and_none_twice(tmp_path):
    out = _compiled_mode(_COUNTING, tmp_path)
    result, built, alone = out["result"], out["built"], out["alone"]
    needed = set().union(*map(set, alone.values()))
    # forward, dK/dV and dQ per (dtype, mask) combination, three of them; the delta preprocess has no mask argument:
    # one per dtype
    assert len(needed) == 11 == result["variants"] == result["compiled"]
    assert set(built) == needed and set(built.values()) == {1}, built
    assert result["by_kernel"] == {"_fwd_kernel": 3, "_bwd_preprocess_kernel": 2, "_bwd_dkdv_kernel": 3,
                                   "_bwd_dq_kernel": 3}
    # cases that differ only in lengths or values share every variant: nothing is built for them again
    assert alone["a"] == alone["a-other-lengths"] and alone["b-causal"] == alone["b-causal-again"]
    assert len(set(alone["a"]) & set(alone["b-causal"])) == 1  # the preprocess only
    assert not set(alone["a"]) & set(alone["c-float16"])
    assert result["skipped"] is None and result["untraced_count"] == 0 and result["error_count"] == 0


_POOL = """
import json, pathlib, torch
from jfa_verify.cases.case import Case
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.precompile import precompile

cases = [Case(kv_lengths=[5, 40], seed=s, num_heads_q=2, num_heads_kv=2, head_dim=32, dtype="bfloat16")
         for s in range(3)]
result = precompile(get_kernel("triton_jfa"), cases, torch.device("cpu"), jobs=2, backward=False,
                    target=("cuda", 90, 32))
files = [p.name for p in pathlib.Path("triton-cache").rglob("*") if p.is_file()]
print("RESULT" + json.dumps({"result": result.to_dict(), "files": files}))
"""


def test_the_pool_traces_in_a_child_and_builds_into_tritons_disk_cache(tmp_path):
    """The real path: a child traces, build processes compile (sm_90, no GPU) into the cache every worker reads."""
    out = _compiled_mode(_POOL, tmp_path)
    result = out["result"]
    assert result["error_count"] == 0 and result["untraced_count"] == 0, result
    assert result["variants"] == result["compiled"] == 1 and result["by_kernel"] == {"_fwd_kernel": 1}
    assert result["workers"] == 1  # never more build processes than variants
    assert any(name.startswith("_fwd_kernel") and name.endswith(".cubin") for name in out["files"]), out["files"]


def test_under_the_interpreter_the_step_is_a_measured_no_op(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    built = []
    case = Case(kv_lengths=[3, 4], num_heads_q=2, num_heads_kv=2, head_dim=16, dtype="float32")
    result = precompile("unused: nothing is traced", [case], "cpu", build=built.append)
    assert isinstance(result, Precompiled) and built == []
    assert (result.variants, result.compiled, result.cases) == (0, 0, 1) and result.seconds >= 0
    assert "interpreter" in result.skipped and "nothing built" in result.summary()
    assert result.to_dict()["skipped"] == result.skipped


def test_run_reports_the_step_in_its_header_and_report_and_no_precompile_turns_it_off(tmp_path, capsys):
    common = ["run", "--device", "cpu", "--filter", "layout-7-3-19-5-11/self", "--max-cases", "1",
              "--no-progress", "--reproducers", str(tmp_path / "repro")]
    assert main([*common, "--report", str(tmp_path / "on.json")]) == 0
    out = capsys.readouterr().out
    assert "precompile: nothing built (Triton's interpreter on the CPU compiles nothing" in out
    on = json.loads((tmp_path / "on.json").read_text())["precompile"]
    assert on["variants"] == 0 and on["cases"] == 1 and on["seconds"] >= 0 and "interpreter" in on["skipped"]
    assert main([*common, "--no-precompile", "--report", str(tmp_path / "off.json")]) == 0
    assert "precompile: nothing built (--no-precompile" in capsys.readouterr().out
    assert json.loads((tmp_path / "off.json").read_text())["precompile"]["skipped"] == "--no-precompile"


def test_gate_suite_check_reports_the_step_and_no_precompile_turns_it_off(tmp_path, monkeypatch):
    import jfa_verify.checks.suites as suites
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.workflows.gate import GateOptions, run_gate

    case = Case(kv_lengths=[3, 17], num_heads_q=2, num_heads_kv=1, head_dim=16, dtype="float32", name="tiny")
    monkeypatch.setattr(suites, "get_suite", lambda *a, **k: suites.Suite("default", (case,), ""))
    logged: list[str] = []
    for enabled, said in ((True, "Triton's interpreter on the CPU compiles nothing"), (False, "--no-precompile")):
        options = GateOptions(checks=("suite",), reproducers=str(tmp_path / "repro"), precompile=enabled)
        report = run_gate([get_kernel("triton_jfa")], "cpu", options, log=logged.append)
        (suite,) = report.to_dict()["results"]
        assert suite["status"] == "pass" and suite["precompile"]["skipped"].startswith(said), suite
        assert report.to_dict()["settings"]["precompile"] is enabled
        assert any(said in line for line in logged)


def test_run_reports_where_its_time_went_phase_by_phase(tmp_path, capsys):
    # issue 39: a GPU run's 50 s warm and 209 s cold could not be split between building the suite, compiling, the
    # cases and the relation checks from its report
    report = tmp_path / "r.json"
    t0 = time.perf_counter()
    assert main(["run", "--device", "cpu", "--filter", "layout-7-3-19-5-11/self", "--max-cases", "1", "--no-progress",
                 "--reproducers", str(tmp_path / "repro"), "--report", str(report)]) == 0
    wall = time.perf_counter() - t0
    phases = json.loads(report.read_text())["phases_seconds"]
    assert list(phases) == ["suite", "precompile", "cases"], phases  # (--max-cases: no relation check ran)
    assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= wall, (phases, wall)
    case = json.loads(report.read_text())["cases"][0]
    assert phases["cases"] >= case["seconds"]["worker"], (phases, case["seconds"])  # the case ran inside the phase
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("time: "))
    assert f"cases {phases['cases']:.1f} s" in line and f"({sum(phases.values()):.1f} s)" in line, line
