"""The precompile step (issue 39, 2): a run's kernel variants are found before any case runs and each is built once.

On the CPU Triton's interpreter builds nothing, so the step is a measured no-op there, and ``run`` and ``gate`` say so.
The tracing and the building are checked on the CPU the way ``tests/test_triton_jfa_variants.py`` reads cache keys:
in a subprocess without ``TRITON_INTERPRET``, with a driver that knows only the target (sm_90).
"""

import dataclasses
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch

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


_OFFSETS_DTYPES = """
import json, torch
from triton.runtime.driver import driver
from jfa_verify.cases.case import Case
from jfa_verify.core.device import choose_for_compiling
from jfa_verify.core.target_driver import TargetOnlyDriver
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.precompile import trace_variants

choose_for_compiling("cuda")  # before the kernel's module is imported: compiled for sm_90, never interpreted
driver.set_active(TargetOnlyDriver(90))
kernel = get_kernel("triton_jfa")
shape = dict(num_heads_q=4, num_heads_kv=2, head_dim=64, dtype="bfloat16")
keys = {}
for odt in ("int32", "int64"):
    for name, extra in (("self", {}), ("cross-causal", dict(mode="cross", q_lengths=(7, 3, 30), causal=True)),
                        ("offsets-start-3", dict(offsets_start=3))):
        case = Case(kv_lengths=(5, 40, 17), seed=1, offsets_dtype=odt, name=name, **shape, **extra)
        keys[f"{name}-{odt}"] = sorted(v.key for v in trace_variants(kernel, [case], torch.device("cpu"))[0])
print("RESULT" + json.dumps(keys))
"""


def test_int64_and_int32_offsets_launch_the_same_variants(tmp_path):
    # issue 39, 3: the offsets' dtype was part of every kernel's signature, so a campaign built each variant twice
    # (1,000 drawn cases: 511 variants, 406 with the offsets in one type); the kernels now read them as int32
    keys = _compiled_mode(_OFFSETS_DTYPES, tmp_path)
    for name in ("self", "cross-causal", "offsets-start-3"):
        assert keys[f"{name}-int32"] and keys[f"{name}-int64"] == keys[f"{name}-int32"], name


_RELATIONS = """
import json, torch
from jfa_verify.cases.dimensions import Target
from jfa_verify.checks.suites import relation_checks
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.precompile import _init_worker, trace_variants

_init_worker(None, (), ("cuda", 90, 32), None, "cpu")  # (a target-only driver: sm_90 without a GPU)
kernel, cpu = get_kernel("triton_jfa"), torch.device("cpu")
relations = relation_checks(Target(kernel, "cuda"))
keys = lambda found: sorted(v.key for v in found[0])
sequence = relations[-1]
print("RESULT" + json.dumps({"names": [r.name for r in relations],
                             "none": keys(trace_variants(kernel, [], cpu)),
                             "checks": keys(trace_variants(kernel, [], cpu, relations=relations[:2])),
                             "case": keys(trace_variants(kernel, [relations[0].case], cpu)),
                             "sequence": keys(trace_variants(kernel, [], cpu, relations=[sequence])),
                             "sequence_calls": keys(trace_variants(kernel, list(sequence.cases()), cpu))}))
"""


def test_the_relation_checks_launches_are_traced_with_the_cases(tmp_path):
    # a cold H100 run spent 35.6 s in its relation checks, building their variants one after another in their worker
    out = _compiled_mode(_RELATIONS, tmp_path)
    assert out["names"][:2] == ["permutation", "batch_invariance"] and out["none"] == []
    assert out["checks"] and set(out["case"]) <= set(out["checks"])  # the checks' own calls, recorded
    # a check stops at its first difference (here, on outputs no kernel wrote, its first comparison): every call of
    # a sequence of calls is traced all the same
    assert out["names"][-1] == "sequence" and set(out["sequence_calls"]) <= set(out["sequence"])


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


_WAITING_PLUGIN = """
import os, pathlib, time
from jfa_verify import register_kernel
from jfa_verify.protocol.registry import get_kernel

base = get_kernel("triton_jfa")
calls = []


def load():
    inner = base.impl

    def forward(*args, **kwargs):  # from the second call on, traced only once a build has landed in Triton's cache
        calls.append(1)
        if len(calls) > 1 and os.environ.get("DIE"):  # (the trace's process dies mid-way instead)
            os._exit(3)
        if len(calls) > 1:
            cache, end = pathlib.Path(os.environ["TRITON_CACHE_DIR"]), time.monotonic() + 90
            while not any(cache.rglob("_fwd_kernel*.cubin")):
                if time.monotonic() > end:
                    raise TimeoutError("no build landed while the trace went on")
                time.sleep(0.2)
        return inner(*args, **kwargs)
    return forward


register_kernel("waits_for_a_build", capabilities=base.capabilities, tile_sizes=base.tile_sizes)(load)
"""

_STREAMED = """
import json, os, torch
from jfa_verify.cases.case import Case
from jfa_verify.protocol.registry import get_kernel, load_plugin
from jfa_verify.run.precompile import precompile

load_plugin(os.environ["PLUGIN"])
shape = dict(kv_lengths=[5, 40], num_heads_q=2, num_heads_kv=2, head_dim=32)
cases = [Case(seed=1, dtype="bfloat16", **shape), Case(seed=2, dtype="float16", **shape)]
result = precompile(get_kernel("waits_for_a_build"), cases, torch.device("cpu"), jobs=2, backward=False,
                    target=("cuda", 90, 32), plugins=[os.environ["PLUGIN"]])
print("RESULT" + json.dumps({"result": result.to_dict()}))
"""


def test_builds_start_while_the_trace_goes_on(tmp_path, monkeypatch):
    """The trace streams each variant to the build processes as it meets it (issue 39: on an H100 the trace was 7.5 s
    of a cold run's 67-s step, every build waiting on it). The second case's call here is traced only once the first
    case's variant has been built into Triton's cache: a step that built only after its trace would never get there."""
    plugin = tmp_path / "waits_for_a_build.py"
    plugin.write_text(_WAITING_PLUGIN)
    monkeypatch.setenv("PLUGIN", str(plugin))
    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path / "cache"))  # (no trace kept by another test)
    result = _compiled_mode(_STREAMED, tmp_path)["result"]
    assert result["untraced_count"] == 0 and result["error_count"] == 0, result
    assert result["variants"] == result["compiled"] == 2 and result["built_while_tracing"] >= 1, result


def test_a_trace_whose_process_dies_mid_way_builds_nothing_more_and_says_why(tmp_path, monkeypatch):
    """A kernel that ends the tracing process after its first variant was handed to the builds: the step ends (no
    wait on a queue no one writes to any more) and says the trace failed; the run builds at first launch."""
    plugin = tmp_path / "waits_for_a_build.py"
    plugin.write_text(_WAITING_PLUGIN)
    monkeypatch.setenv("PLUGIN", str(plugin))
    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path / "cache"))  # (no trace kept by another test)
    monkeypatch.setenv("DIE", "1")
    result = _compiled_mode(_STREAMED, tmp_path, timeout=240)["result"]
    assert result["skipped"].startswith("tracing failed: BrokenProcessPool"), result
    assert result["variants"] == 0, result


_MUTANT_POOL = """
import json, os, torch
from jfa_verify.cases.case import Case
from jfa_verify.protocol.registry import get_kernel, load_plugin
from jfa_verify.run.precompile import precompile

plugin = os.path.join(os.environ["ROOT"], "ci", "catalogue_mutant_plugin.py")
load_plugin(plugin)
kernel = get_kernel("mutant-triton_jfa-kv_bound_minus_one")
cases = [Case(kv_lengths=[5, 40], seed=1, num_heads_q=2, num_heads_kv=2, head_dim=32, dtype="bfloat16")]
result = precompile(kernel, cases, torch.device("cpu"), jobs=2, backward=False, target=("cuda", 90, 32),
                    plugins=[plugin])
print("RESULT" + json.dumps({"result": result.to_dict()}))
"""


def test_a_plugin_kernel_whose_module_is_made_when_loaded_is_built_in_the_pool(tmp_path, monkeypatch):
    """Regression (H100, 2026-12-07): a mutant's Triton module is written and imported when its kernel loads, and the
    build processes never loaded it: every variant of the mutant but the framework's own failed to build there
    ("No module named '_jfa_mutant_...'") and was built at its first launch, one after another in the case workers."""
    monkeypatch.setenv("ROOT", str(ROOT))
    monkeypatch.setenv("JFA_MUTANT_CATALOGUE", "triton_jfa")
    result = _compiled_mode(_MUTANT_POOL, tmp_path)["result"]
    assert result["error_count"] == 0 and result["untraced_count"] == 0, result
    assert result["variants"] == result["compiled"] == 1 and result["by_kernel"] == {"_fwd_kernel": 1}


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


# ----------------------------------------------------------------------------- the trace kept between runs
# (a warm H100 run spent 10.5 s of its 11.5 s precompile step tracing again what the last run traced)

_TRACE_TWICE = """
import collections, json, sys, torch
from jfa_verify.cases.case import Case
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run import precompile as pc

if sys.argv[1] == "warm":  # a trace now, in this process or a child, fails the test: it must come from the file
    def no_tracing(*a, **k):
        raise AssertionError("traced")
    pc.trace_variants = pc._pool = no_tracing
shape = dict(num_heads_q=2, num_heads_kv=1, head_dim=32, dtype="bfloat16")
cases = [Case(kv_lengths=[5, 40], seed=1, name="a", **shape),
         Case(kv_lengths=[9, 12], seed=2, causal=True, name="b-causal", **shape)]
built = []
result = pc.precompile(get_kernel("triton_jfa"), cases, torch.device("cpu"), target=("cuda", 90, 32),
                       build=lambda v: built.append([v.key, v.function, v.source_key, v.data]) or 0.0,
                       trace_here=sys.argv[1] == "cold")
print("RESULT" + json.dumps({"result": result.to_dict(), "summary": result.summary(), "built": built}))
"""


def test_a_warm_run_reads_the_trace_from_the_cache_and_builds_the_same_variants(tmp_path, monkeypatch):
    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path / "cache"))
    cold = _compiled_mode(_TRACE_TWICE.replace("sys.argv[1]", "'cold'"), tmp_path)
    (path,) = (tmp_path / "cache").glob("traces-*.json")
    warm = _compiled_mode(_TRACE_TWICE.replace("sys.argv[1]", "'warm'"), tmp_path)  # (and through the pool path)
    assert cold["result"]["trace_cached"] is False and warm["result"]["trace_cached"] is True
    assert cold["result"]["variants"] == 7 and cold["result"]["untraced_count"] == 0, cold["result"]
    assert warm["built"] == cold["built"]  # the same variants, in the same order, with their specialization data
    assert {k: warm["result"][k] for k in ("variants", "compiled", "by_kernel", "error_count")} == \
        {k: cold["result"][k] for k in ("variants", "compiled", "by_kernel", "error_count")}
    assert "tracing" in cold["summary"] and "cached" not in cold["summary"]
    assert ", cached)" in warm["summary"], warm["summary"]
    assert len(json.loads(path.read_text())) == 1


_FIELDS = {"signature": {}, "constant_keys": [], "constant_vals": [], "attrs_keys": [], "attrs_vals": [], "options": {}}


class _FakeTracing:
    """``trace_variants`` for a machine without Triton's compiler path: one variant per case (and backward setting),
    counted."""

    def __init__(self, untraced=()):
        self.calls, self.untraced = 0, list(untraced)

    def __call__(self, kernel, cases, device, *, backward=True, memory=None, relations=()):
        from jfa_verify.run.precompile import Variant

        self.calls += 1
        data = json.dumps({"name": "m.f", **_FIELDS})
        return [Variant(f"key-{c.case_id()}-{backward}", "m:f", "source", data) for c in cases], list(self.untraced)


def _plugin_kernel(folder: Path, source: str = "VERSION = 1"):
    """A kernel object whose loader is defined in ``folder/plug.py``, beside a helper module ``helper.py``."""
    import importlib.util

    folder.mkdir(exist_ok=True)
    (folder / "plug.py").write_text("def load():\n    return None\n")
    (folder / "helper.py").write_text(source + "\n")
    spec = importlib.util.spec_from_file_location(f"_plug_{abs(hash(str(folder)))}", folder / "plug.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return types.SimpleNamespace(name="plug", loader=module.load, source_dirs=())


@pytest.fixture
def compiled_here(monkeypatch, tmp_path):
    """The step as off the interpreter, its tracing :class:`_FakeTracing` (returned), its cache in ``tmp_path``."""
    import jfa_verify.core.device
    from jfa_verify.run import precompile as pc

    monkeypatch.setattr(jfa_verify.core.device, "interpreting", lambda: False)
    monkeypatch.setattr(pc, "_init_worker", lambda *a, **k: None)  # (no target-only driver in this process)
    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path / "cache"))
    tracing = _FakeTracing()
    monkeypatch.setattr(pc, "trace_variants", tracing)
    return tracing


_SHAPE = dict(num_heads_q=2, num_heads_kv=1, head_dim=16, dtype="float32")
_CASES = [Case(kv_lengths=[3, 17], seed=1, name="a", **_SHAPE), Case(kv_lengths=[4], seed=2, name="b", **_SHAPE)]


def _step(kernel, cases=_CASES, **settings):
    built: list = []
    settings = {"backward": True, "memory": None, "target": ("cuda", 90, 32), **settings}
    result = precompile(kernel, cases, "cpu", build=lambda v: built.append(v.key) or 0.0, trace_here=True, **settings)
    return result, built


def test_the_same_step_again_reads_its_trace_and_traces_nothing(compiled_here, tmp_path, monkeypatch):
    kernel = _plugin_kernel(tmp_path / "plugin")
    first, built_first = _step(kernel)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "another-triton-cache"))  # (where builds go: no matter)
    second, built_second = _step(kernel)
    assert compiled_here.calls == 1
    assert (first.trace_cached, second.trace_cached) == (False, True)
    assert built_second == built_first and len(built_first) == 2 and second.variants == 2 == second.compiled
    assert second.to_dict()["trace_cached"] is True and ", cached)" in second.summary()


@pytest.mark.parametrize("change", ["a case", "the cases' order", "a case's name", "backward", "memory", "target",
                                    "the kernel's source", "the kernel's name", "Triton's options",
                                    "the relation checks"])
def test_a_change_in_anything_the_trace_depends_on_traces_again(compiled_here, tmp_path, monkeypatch, change):
    kernel = _plugin_kernel(tmp_path / "plugin")
    _step(kernel)
    cases, settings = list(_CASES), {}
    if change == "a case":
        cases[1] = dataclasses.replace(cases[1], seed=3)
    elif change == "the cases' order":
        cases.reverse()
    elif change == "a case's name":
        cases[0] = dataclasses.replace(cases[0], name="renamed")
    elif change == "backward":
        settings["backward"] = False
    elif change == "memory":
        settings["memory"] = "cuda"
    elif change == "target":
        settings["target"] = ("cuda", 100, 32)
    elif change == "the kernel's source":  # a module beside the plugin file (what it imports)
        kernel = _plugin_kernel(tmp_path / "plugin", "VERSION = 2")
    elif change == "the kernel's name":
        kernel.name = "plug-2"
    elif change == "the relation checks":
        from jfa_verify.checks.relations import Relation

        settings["relations"] = (Relation("permutation", _CASES[0]),)
    else:  # (options are part of each launch's key)
        monkeypatch.setenv("TRITON_DEBUG", "1")
    again, _ = _step(kernel, cases, **settings)
    assert compiled_here.calls == 2 and again.trace_cached is False
    assert _step(kernel, cases, **settings)[0].trace_cached is True  # (and that answer is kept too)


def test_a_kernels_source_digest_covers_its_package_plugin_file_modules_beside_it_and_source_dirs(tmp_path):
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.precompile import kernel_sources_digest

    assert kernel_sources_digest(get_kernel("triton_jfa")) == kernel_sources_digest(get_kernel("triton_jfa_grid"))
    kernel = _plugin_kernel(tmp_path / "plugin")
    digests = [kernel_sources_digest(kernel)]
    (tmp_path / "plugin" / "plug.py").write_text("def load():\n    return 1\n")
    digests.append(kernel_sources_digest(kernel))
    (tmp_path / "plugin" / "pkg").mkdir()
    (tmp_path / "plugin" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "plugin" / "pkg" / "inner.py").write_text("X = 1\n")
    digests.append(kernel_sources_digest(kernel))
    (tmp_path / "plugin" / "pkg" / "inner.py").write_text("X = 2\n")
    digests.append(kernel_sources_digest(kernel))
    (tmp_path / "elsewhere").mkdir()
    kernel.source_dirs = (str(tmp_path / "elsewhere"),)
    (tmp_path / "elsewhere" / "host.py").write_text("Y = 1\n")
    digests.append(kernel_sources_digest(kernel))
    assert len(set(digests)) == len(digests), digests
    assert kernel_sources_digest(types.SimpleNamespace(name="no-file", loader=len)) is None  # (a builtin: no file)


@pytest.mark.parametrize("damage", ["not an answer", "a variant short of a field", "data that is not JSON",
                                    "data of another function", "another target", "one key twice", "null"])
def test_a_damaged_entry_is_traced_again_and_replaced(compiled_here, tmp_path, damage):
    kernel = _plugin_kernel(tmp_path / "plugin")
    first, built = _step(kernel)
    (path,) = (tmp_path / "cache").glob("traces-*.json")
    answers = json.loads(path.read_text())
    (key, answer), = answers.items()
    records = answer["variants"]
    if damage == "not an answer":
        answer = ["a", "list"]
    elif damage == "a variant short of a field":
        records[0] = records[0][:3]
    elif damage == "data that is not JSON":
        records[0][3] = "{not json"
    elif damage == "data of another function":
        records[0][3] = json.dumps({"name": "m.other", **_FIELDS})
    elif damage == "another target":
        answer["target"] = ["cuda", 100, 32]
    elif damage == "one key twice":
        records[1] = records[0]
    else:
        answer = None
    path.write_text(json.dumps({key: answer}))
    again, built_again = _step(kernel)
    assert compiled_here.calls == 2 and again.trace_cached is False and built_again == built
    assert _step(kernel)[0].trace_cached is True  # the entry was written afresh


def test_a_trace_that_left_a_case_untraced_is_not_kept(compiled_here, tmp_path):
    compiled_here.untraced = ["b: RuntimeError: out of memory"]
    kernel = _plugin_kernel(tmp_path / "plugin")
    assert _step(kernel)[0].untraced and not _step(kernel)[0].trace_cached
    assert compiled_here.calls == 2 and not list((tmp_path / "cache").glob("traces-*.json"))


def test_cache_off_traces_every_run_and_writes_nothing(compiled_here, tmp_path, monkeypatch):
    monkeypatch.setenv("JFA_VERIFY_CACHE", "off")
    kernel = _plugin_kernel(tmp_path / "plugin")
    results = [_step(kernel)[0] for _ in range(3)]
    assert compiled_here.calls == 3 and not any(r.trace_cached for r in results)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plugin"]


def test_a_campaign_builds_the_covering_arrays_variants_before_its_workers_start(tmp_path, monkeypatch):
    # issue 39: a cold H100 campaign (bench_verify, 16 workers) built 354 variants in 30 s, each worker the variants
    # it met, one after another: 92% of its time
    import jfa_verify.core.device
    import jfa_verify.run.precompile as pc
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.cases.pairs import covering_array
    from jfa_verify.fuzz.workers import FuzzConfig, precompile_campaign
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.settings import RunSettings

    kernel, seen = get_kernel("triton_jfa"), {}
    monkeypatch.setattr(jfa_verify.core.device, "interpreting", lambda: False)
    monkeypatch.setattr(pc, "precompile", lambda kernel, cases, device, **kw: seen.update(cases=cases, **kw) or "done")
    config = FuzzConfig(kernel="triton_jfa", device_type="cpu", corpus_dir=str(tmp_path),
                        run=RunSettings(seed=3, backward=False, memory="nan", plugins=("p.py",)))
    assert precompile_campaign(config, kernel, torch.device("cpu")) == "done"
    assert seen["cases"] == covering_array(Target(kernel, "cpu"), seed=3) and len(seen["cases"]) > 100
    assert (seen["backward"], seen["memory"], seen["plugins"]) == (False, "nan", ("p.py",)) and seen["jobs"] >= 1


def test_a_campaigns_report_records_the_step_and_no_precompile_turns_it_off(tmp_path, capsys):
    common = ["fuzz", "--device", "cpu", "--max-examples", "1", "--seed", "1", "--no-progress"]
    for flag, want in (("--precompile", "Triton's interpreter on the CPU compiles nothing"), ("--no-precompile", None)):
        report = tmp_path / f"{flag}.json"
        assert main([*common, flag, "--reproducers", str(tmp_path / flag), "--report", str(report)]) == 0
        recorded = json.loads(report.read_text())["precompile"]
        assert (recorded["skipped"] if recorded else None) == want, recorded
    assert "precompile:" not in capsys.readouterr().out  # (the interpreter's no-op: the report says it, not a line)


def test_builds_start_longest_first_by_the_times_earlier_runs_recorded(compiled_here, tmp_path, monkeypatch):
    """Issue 39: the pool took the variants in trace order and its last process finished a 20-s float32 backward alone
    (docs/evidence/cpu-2026-12-07-build-order: the default GPU suite's sm_90a builds in both orders). A run
    records each build's seconds; the next one starts the variants never timed first, then the rest longest first. A
    build found in Triton's cache (next to no time) never lowers a recorded time."""
    from jfa_verify.run import precompile as pc

    def tracing(kernel, cases, device, *, backward=True, memory=None, relations=()):
        return [pc.Variant(f"key-{c.name}", "m:f", "source", json.dumps({"name": "m.f", "case": c.name, **_FIELDS}))
                for c in cases], []

    monkeypatch.setattr(pc, "trace_variants", tracing)
    cases = [Case(kv_lengths=[n + 1], seed=n, name=name, **_SHAPE) for n, name in enumerate("abcd")]
    seconds = {"key-a": 1.0, "key-b": 7.0, "key-c": 3.0, "key-d": 5.0}
    kernel = _plugin_kernel(tmp_path / "plugin")

    def step(cases, times):
        order: list = []
        result = precompile(kernel, cases, "cpu", target=("cuda", 90, 32), trace_here=True,
                            build=lambda v: order.append(v.key) or times[v.key])
        return result, order

    first, order = step(cases[:3], seconds)
    assert order == ["key-a", "key-b", "key-c"] and first.timed_before == 0  # nothing timed yet: trace order
    assert first.slowest == [("f", 7.0), ("f", 3.0), ("f", 1.0)] and "longest build f 7.0 s" in first.summary()
    assert first.to_dict()["slowest"][0] == ["f", 7.0]
    second, order = step(cases, {k: 0.01 for k in seconds})  # (d never timed; the rest found in Triton's cache)
    assert order == ["key-d", "key-b", "key-c", "key-a"] and second.timed_before == 3
    third, order = step(cases, seconds)
    assert order == ["key-b", "key-c", "key-a", "key-d"], order  # d's 0.01 s recorded; the others' kept
    assert pc.longest_first([], {}) == []
