"""``jfa-verify gate``: planted bugs caught by its extra checks, its outputs, and every exit code."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from jfa_verify.cli import main
from tests.helpers import signal_when

PLUGIN = str(Path(__file__).parent / "quality" / "memory_plugin.py")
HOST_LOOP = str(Path(__file__).parent / "quality" / "host_loop_plugin.py")  # nested_sdpa with a planted host loop
CHEAP = ["--checks", "determinism", "canaries", "recycled_memory", "--small-cases", "2"]


def _gate(tmp_path, *args, plugin=PLUGIN):
    out = [f"--json={tmp_path / 'g.json'}", f"--junit={tmp_path / 'g.xml'}", f"--markdown={tmp_path / 'g.md'}",
           f"--reproducers={tmp_path / 'repro'}"]
    return main(["gate", "--device", "cpu", "--plugin", plugin, *out, *args])


def _results(tmp_path) -> dict:
    return {(r["kernel"], r["check"]): r for r in json.loads((tmp_path / "g.json").read_text())["results"]}


@pytest.mark.parametrize("kernel, caught_by, message", [
    ("writes-past-the-end", "canaries", "output o [{rows}, 4, 32] bfloat16 allocated at"),
    ("nondeterministic", "determinism", "differs bit-wise from run 0"),
    ("reads-uninitialized", "recycled_memory", "lse: max abs error"),
])
def test_planted_bug_is_caught_by_its_check(tmp_path, capsys, kernel, caught_by, message):
    rc = _gate(tmp_path, "--kernel", kernel, *CHEAP)
    out = capsys.readouterr().out
    assert rc == 1, out
    results = _results(tmp_path)
    finding = results[(kernel, caught_by)]["findings"][0]
    text = finding["summary"] + finding["explanation"]
    assert message.split("{")[0] in text, text
    if caught_by == "canaries":
        assert "1 element(s) past its end" in text
    if kernel != "writes-past-the-end":  # the others make only the one mistake their check exists for
        others = {c for (k, c), r in results.items() if k == kernel and r["status"] == "fail"}
        assert others == {caught_by}, others
    assert "replay:" in (tmp_path / "g.md").read_text() or caught_by == "canaries"


def test_a_check_that_cannot_import_a_dependency_names_it_and_the_gate_says_error(tmp_path, capsys, monkeypatch):
    # regression (new-user trial, --no-deps install): every check said "ModuleNotFoundError: ..." with no fix, and
    # the verdict read "NOTHING CHECKED" though other checks had run and passed
    monkeypatch.setitem(sys.modules, "allpairspy", None)  # `import allpairspy` raises ModuleNotFoundError
    rc = _gate(tmp_path, "--kernel", "exact-ref", "--checks", "suite", "campaign", "--campaign-examples", "3")
    assert rc == 2, capsys.readouterr().out
    results = _results(tmp_path)
    assert results[("exact-ref", "suite")]["status"] == "error"
    assert "a dependency is missing" in results[("exact-ref", "suite")]["reason"]
    assert "pip install allpairspy" in results[("exact-ref", "suite")]["reason"]
    assert results[("exact-ref", "campaign")]["status"] == "pass" and results[("exact-ref", "campaign")]["cases"] >= 1
    assert json.loads((tmp_path / "g.json").read_text())["verdict"] == "ERROR"
    assert "## jfa-verify gate: ERROR" in (tmp_path / "g.md").read_text()


def test_correct_kernel_passes_and_the_outputs_agree(tmp_path, capsys, monkeypatch):
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    rc = _gate(tmp_path, "--kernel", "exact-ref", *CHEAP, "--seed", "7")
    assert rc == 0, capsys.readouterr().out
    report = json.loads((tmp_path / "g.json").read_text())
    assert report["verdict"] == "PASS" and report["settings"]["seed"] == 7
    suites = ET.parse(tmp_path / "g.xml").getroot().findall("testsuite")
    assert {s.get("name") for s in suites} == {"exact-ref.determinism", "exact-ref.canaries",
                                               "exact-ref.recycled_memory"}
    assert all(s.get("failures") == "0" for s in suites)
    md = (tmp_path / "g.md").read_text()
    assert "## jfa-verify gate: PASS" in md and "seed 7" in md and summary.read_text() == md


def test_junit_counts_failures_and_names_the_case(tmp_path):
    assert _gate(tmp_path, "--kernel", "writes-past-the-end", "--checks", "canaries", "--small-cases", "1") == 1
    (suite,) = ET.parse(tmp_path / "g.xml").getroot().findall("testsuite")
    assert suite.get("name") == "writes-past-the-end.canaries" and suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert "past its end" in failure.get("message")


def test_junit_names_each_passed_case_after_the_case_it_ran(tmp_path):
    """Regression (a new user's trial, 2026-12-06): a check's passed testcases were named passed-0, passed-1, ...:
    a CI page said which checks passed but not on which cases. Each is named as the case (the names in the JSON)."""
    assert _gate(tmp_path, "--kernel", "exact-ref", *CHEAP) == 0
    suites = {s.get("name"): [c.get("name") for c in s.findall("testcase")]
              for s in ET.parse(tmp_path / "g.xml").getroot().findall("testsuite")}
    results = _results(tmp_path)
    for check in ("determinism", "canaries", "recycled_memory"):
        cases = suites[f"exact-ref.{check}"]
        assert len(cases) == results[("exact-ref", check)]["cases"] == 2, suites
        assert cases == results[("exact-ref", check)]["passed"] and not any(n.startswith("passed-") for n in cases)
    assert suites["exact-ref.canaries"] == suites["exact-ref.determinism"]  # the same small cases, by name


def test_kernel_the_device_cannot_run_is_skipped_with_the_reason_and_nothing_checked_exits_2(tmp_path, capsys):
    rc = main(["gate", "--device", "cpu", "--kernel", "gluon_jfa", "--checks", "suite",
               f"--json={tmp_path / 'g.json'}", f"--junit={tmp_path / 'g.xml'}", f"--markdown={tmp_path / 'g.md'}"])
    assert rc == 2
    (result,) = json.loads((tmp_path / "g.json").read_text())["results"]
    assert result["status"] == "skip" and "device=cpu not in ('cuda',)" in result["reason"]
    assert "### Skipped" in (tmp_path / "g.md").read_text()
    # the JUnit says it too: an error, not skips alone (a CI reading the XML saw errors="0"; a trial, 2026-12-06)
    root = ET.parse(tmp_path / "g.xml").getroot()
    assert root.get("errors") == "1" and root.get("skipped") == "1", ET.tostring(root)
    error = root.find("testsuite[@name='jfa-verify gate']/testcase/error")
    assert error is not None and "device=cpu not in ('cuda',)" in error.get("message")


def test_sanitizer_and_perf_say_why_they_are_skipped_or_run_on_cpu(tmp_path):
    baseline = tmp_path / "base.json"
    assert _gate(tmp_path, "--kernel", "exact-ref", "--checks", "canaries", "--small-cases", "1", "--sanitizer",
                 "memcheck", "--perf-record", str(baseline)) == 0
    results = _results(tmp_path)
    assert results[("exact-ref", "sanitizer")]["status"] == "skip"
    assert "CUDA" in results[("exact-ref", "sanitizer")]["reason"]
    assert results[("exact-ref", "perf")]["status"] == "pass" and baseline.is_file()
    # against that baseline every workload gets a verdict line (the pass/fail rule is tested below, on
    # numbers: CPU timings on a shared machine are too noisy to assert a verdict here)
    _gate(tmp_path, "--kernel", "exact-ref", "--checks", "canaries", "--small-cases", "1",
          "--perf-baseline", str(baseline))
    perf = _results(tmp_path)[("exact-ref", "perf")]
    assert perf["status"] in ("pass", "fail") and perf["cases"] == 3
    assert sum("vs baseline" in line for line in perf["details"]) == 3, perf["details"]
    assert not any("recorded for kernel" in line for line in perf["details"])
    # regression (a new user's trial): another kernel's baseline is said to be one; several kernels cannot share one
    # --perf-record file (each one's timings replaced the last's, each saying "baseline recorded")
    # (another plugin kernel, not triton_jfa: a GPU test process has imported that one compiled, not for the CPU)
    _gate(tmp_path, "--kernel", "nondeterministic", "--checks", "canaries", "--small-cases", "1",
          "--perf-baseline", str(baseline))
    perf = _results(tmp_path)[("nondeterministic", "perf")]
    assert "warning: baseline recorded for kernel 'exact-ref', compared here with 'nondeterministic'" in perf["details"]
    assert _gate(tmp_path, "--kernel", "exact-ref", "--kernel", "nondeterministic", "--checks", "canaries",
                 "--perf-record", str(tmp_path / "two.json")) == 2 and not (tmp_path / "two.json").exists()


def test_perf_comparison_is_noise_aware():
    from jfa_verify.checks.perf import compare

    base = {"w": [10.0, 10.2, 9.8, 10.1, 9.9]}
    assert not compare({"w": [10.3, 10.4, 10.2, 10.5, 10.3]}, base, 0.05)[0].regressed  # 3 % slower: within
    assert compare({"w": [13.0, 13.1, 12.9, 13.2, 13.0]}, base, 0.05)[0].regressed  # 30 % slower
    noisy = {"w": [7.0, 13.0, 10.0, 16.0, 4.0]}  # a spread that explains a 20 % slowdown
    assert not compare({"w": [12.0, 12.1, 11.9, 12.2, 12.0]}, noisy, 0.05)[0].regressed


def test_perf_peer_catches_a_planted_host_loop_over_the_sequences(tmp_path, capsys):
    # issue 38, 3: the perf check compared a kernel only with its own baseline, so one several times slower than the
    # peer beside it passed. host-loop-nested_sdpa is nested_sdpa plus a Python loop over the sequences in its call
    # (each sequence attended alone 3 times, read back with .item()): about 5x nested_sdpa's time, on any machine
    rc = _gate(tmp_path, "--kernel", "host-loop-nested_sdpa", "--checks", "perf", "--perf-peer", "nested_sdpa",
               "--perf-min-ratio", "0.8", plugin=HOST_LOOP)
    out = capsys.readouterr().out
    assert rc == 1, out
    perf = _results(tmp_path)[("host-loop-nested_sdpa", "perf")]
    assert perf["status"] == "fail", perf
    timed = {p["configuration"]: p for p in perf["peer_ratios"]}
    # the CPU workloads nested_sdpa runs; its CPU backend refuses causal nested tensors, and the report says so
    assert set(timed) == {"movielens (forward+backward)", "one-long-many-short (forward+backward)"}, timed
    assert any(line.startswith("movielens-causal: not compared") for line in perf["details"]), perf["details"]
    for p in timed.values():
        assert p["ratio"] < 0.8 and p["below_min_ratio"], p
        assert p["ratio"] == pytest.approx(p["peer_ms"] / p["kernel_ms"]) and p["rounds"] >= 5
    findings = {f["case"]: f["summary"] for f in perf["findings"]}
    assert set(findings) == {f"{c} vs nested_sdpa" for c in timed}, findings
    for c, p in timed.items():  # the configuration and the numbers, in the finding itself
        assert findings[f"{c} vs nested_sdpa"].startswith(c) and f"{p['ratio']:.3f} < --perf-min-ratio 0.8" in \
            findings[f"{c} vs nested_sdpa"]
    # the text, the Markdown and the JUnit XML carry each ratio too
    assert out.count("BELOW --perf-min-ratio 0.8") == 2, out
    md = (tmp_path / "g.md").read_text()
    assert "### Performance against a peer" in md and md.count(" | below 0.8 |") == 2, md
    (suite,) = ET.parse(tmp_path / "g.xml").getroot().findall("testsuite")
    assert suite.get("name") == "host-loop-nested_sdpa.perf" and suite.get("failures") == "2"
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    for c, p in timed.items():
        case = cases[f"{c} vs nested_sdpa"]
        assert case.find("failure") is not None
        ratio = case.find("properties/property[@name='peer_over_kernel']").get("value")
        assert float(ratio) == pytest.approx(p["ratio"], rel=1e-4)


def test_perf_peer_against_itself_passes_a_low_minimum_ratio(tmp_path, capsys):
    # the control of the test above: the unwrapped kernel timed against itself, same inputs, alternating rounds
    rc = _gate(tmp_path, "--kernel", "nested_sdpa", "--checks", "perf", "--perf-peer", "nested_sdpa",
               "--perf-min-ratio", "0.5")
    out = capsys.readouterr().out
    assert rc == 0, out
    report = json.loads((tmp_path / "g.json").read_text())
    assert report["settings"]["perf_peer"] == "nested_sdpa" and report["settings"]["perf_min_ratio"] == 0.5
    perf = _results(tmp_path)[("nested_sdpa", "perf")]
    assert perf["status"] == "pass" and perf["cases"] == 2 and not perf["findings"], perf
    assert [p["below_min_ratio"] for p in perf["peer_ratios"]] == [False, False], perf["peer_ratios"]
    assert all(p["ratio"] >= 0.5 for p in perf["peer_ratios"])
    assert (tmp_path / "g.md").read_text().count(" | at or above 0.5 |") == 2
    (suite,) = ET.parse(tmp_path / "g.xml").getroot().findall("testsuite")
    cases = suite.findall("testcase")
    assert suite.get("failures") == "0" and sorted(c.get("name") for c in cases) == [
        "movielens (forward+backward) vs nested_sdpa", "one-long-many-short (forward+backward) vs nested_sdpa"]
    assert all(c.find("properties/property[@name='peer_over_kernel']") is not None for c in cases)


def test_peer_timing_alternates_on_the_same_random_inputs_through_the_public_call():
    import torch

    from jfa_verify import Capabilities
    from jfa_verify.checks.perf import measure_against_peer
    from jfa_verify.protocol.kernel import Kernel

    calls = []

    def recorder(name):
        def attention(q, k, v, q_offsets, k_offsets, **kwargs):
            calls.append((name, q.clone(), q_offsets.tolist(), kwargs))
            return q.clone(), None
        return Kernel(name, "records its calls", lambda: attention, Capabilities(backward=False))

    ratios, not_compared = measure_against_peer(recorder("kernel"), recorder("peer"), "cpu", rounds=4,
                                                names=["movielens"])
    assert not not_compared and [r.configuration for r in ratios] == ["movielens (forward)"]
    assert ratios[0].rounds == 4 and ratios[0].ratio == ratios[0].peer_ms / ratios[0].kernel_ms
    # one warm-up call each, then the kernel first in even rounds and the peer first in odd ones
    assert [c[0] for c in calls] == ["kernel", "peer"] + ["kernel", "peer", "peer", "kernel"] * 2
    first = calls[0]
    assert first[1].std() > 0.5 and first[3]["causal"] is False  # random normal values, never zeros
    for name, q, offsets, kwargs in calls[1:]:  # the same inputs and the same public call, every time
        assert torch.equal(q, first[1]) and offsets == first[2] and kwargs == first[3]


def test_gate_options_refuse_a_non_positive_min_ratio_and_a_ratio_without_a_peer():
    from jfa_verify.core.errors import InvalidInput
    from jfa_verify.workflows.gate import GateOptions

    for bad in (0.0, -1.0):
        with pytest.raises(InvalidInput, match="perf_min_ratio=.* must be > 0"):
            GateOptions(perf_peer="nested_sdpa", perf_min_ratio=bad)
    with pytest.raises(InvalidInput, match="needs perf_peer"):
        GateOptions(perf_min_ratio=0.8)


@pytest.mark.parametrize("args, message", [
    (["--perf-peer", "nope"], "--perf-peer nope: no kernel named 'nope'; registered: "),
    (["--perf-peer", "gluon_jfa"], "--perf-peer gluon_jfa cannot run on cpu: device=cpu not in ('cuda',)"),
    (["--perf-peer", "nested_sdpa", "--perf-min-ratio", "0"], "--perf-min-ratio: 0 must be > 0"),
    (["--perf-peer", "nested_sdpa", "--perf-min-ratio", "-0.5"], "--perf-min-ratio: -0.5 must be > 0"),
    (["--perf-min-ratio", "0.8"], "--perf-min-ratio 0.8 needs --perf-peer KERNEL"),
])
def test_bad_perf_peer_arguments_exit_2_with_one_line_before_any_work(tmp_path, capsys, args, message):
    assert _gate(tmp_path, "--kernel", "exact-ref", "--checks", "perf", *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "g.json").exists()


def test_bad_gate_arguments_exit_2_with_one_line(tmp_path, capsys):
    for args, name in ((["--reruns", "1"], "--reruns"), (["--checks", "nope"], "--checks"),
                       (["--campaign-examples", "0"], "--campaign-examples"), (["--kernel", "nope"], "nope")):
        assert main(["gate", "--device", "cpu", *args]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and name in err[0], err


def _gate_subprocess(tmp_path, plugin, kernel, *args):
    return subprocess.run([sys.executable, "-m", "jfa_verify.cli", "gate", "--device", "cpu", "--plugin", str(plugin),
                           "--kernel", kernel, "--reproducers", str(tmp_path / "repro"),
                           f"--json={tmp_path / 'g.json'}",
                           f"--junit={tmp_path / 'g.xml'}", f"--markdown={tmp_path / 'g.md'}", *args],
                          capture_output=True, text=True, timeout=300)


def test_a_hang_exits_3_and_keeps_the_case_and_the_report(tmp_path, misbehaving_plugin):
    # a correct kernel that hangs on its first call only (a marker file outlives the killed worker), so
    # the suite goes on past the hang and the other cases pass
    mark = str(tmp_path / "hung-once")
    plugin = misbehaving_plugin("sleepy", hang=f"not os.path.exists({mark!r}) and not open({mark!r}, 'w').close()")
    # --timeout 15: at 2 s, on the H200 host loaded by eight pytest workers and two gates, a passing case
    # ran past it too and was a second "hang" (the kernel sleeps 600 s on its hang: 15 s cannot pass it)
    proc = _gate_subprocess(tmp_path, plugin, "sleepy", "--checks", "suite", "--timeout", "15")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    files = list((tmp_path / "repro").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["status"] == "hang"  # the passing cases leave none
    assert _results(tmp_path)[("sleepy", "suite")]["status"] == "hang"  # the report is written all the same


def test_a_crash_exits_4_and_the_gate_goes_on(tmp_path, misbehaving_plugin):
    # a correct kernel that aborts on its first call only: the suite records the crash and goes on, the
    # determinism reruns (in a case worker) and the isolated canaries judge
    mark = str(tmp_path / "crashed-once")
    plugin = misbehaving_plugin("aborts", crash=f"not os.path.exists({mark!r}) and not open({mark!r}, 'w').close()")
    proc = _gate_subprocess(tmp_path, plugin, "aborts", "--checks", "suite", "determinism", "canaries",
                            "--small-cases", "1", "--timeout", "60")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = _results(tmp_path)
    assert results[("aborts", "suite")]["status"] == "crash" and results[("aborts", "canaries")]["status"] == "pass"
    assert results[("aborts", "suite")]["cases"] > 1  # the cases after the crash were run
    assert results[("aborts", "determinism")]["status"] == "pass"  # a worker of its own: the gate's process is safe
    assert "SIGABRT" in results[("aborts", "suite")]["findings"][0]["explanation"]


def test_sanitizer_summaries_of_every_tool_are_read():
    # regression: on the H200 racecheck ended with its own summary line (below, as printed there), which
    # the gate did not read, so 13 reported hazards came out as "error: no ERROR SUMMARY"
    from jfa_verify.workflows.gate import sanitizer_errors

    assert sanitizer_errors("========= RACECHECK SUMMARY: 13 hazards displayed (13 errors, 0 warnings)\n") == 13
    assert sanitizer_errors("========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)\n") == 0
    assert sanitizer_errors("========= ERROR SUMMARY: 0 errors\n") == 0
    assert sanitizer_errors("========= ERROR SUMMARY: 1 error\n") == 1
    assert sanitizer_errors("a run that printed no summary\n") is None


def test_a_check_that_could_not_judge_is_not_a_finding():
    # regression: a compute-sanitizer run past its time made the gate exit 1, and the Gluon mutant table
    # counted four mutants as killed by it
    from jfa_verify.workflows.gate import CheckResult, GateOptions, GateReport

    report = GateReport("cpu", GateOptions())
    report.results = [CheckResult("k", "suite", "pass"), CheckResult("k", "sanitizer", "error", reason="timed out")]
    assert report.exit_code() == 2 and report.verdict == "ERROR"
    report.results.append(CheckResult("k", "determinism", "fail"))
    assert report.exit_code() == 1 and report.verdict == "FAIL"
    skipped = GateReport("cpu", GateOptions())
    skipped.results = [CheckResult("k", "suite", "skip", reason="device")]
    assert skipped.exit_code() == 2 and skipped.verdict == "NOTHING CHECKED"


def test_the_suite_check_names_the_cases_the_kernel_declared_unsupported_in_every_report(monkeypatch, tmp_path,
                                                                                          misbehaving_plugin):
    """Regression (a new user's trial): `gate --checks suite` on a kernel without broadcast-Q said "suite: pass, 99
    case(s)", and neither the log, the JSON, the Markdown nor the JUnit said that 7 broadcast-Q cases were never run."""
    import torch

    import jfa_verify.checks.suites as suites
    from jfa_verify.cases.case import Case
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from jfa_verify.run.settings import RunSettings
    from jfa_verify.workflows.gate import GateOptions, GateReport, _check_suite

    plugin = misbehaving_plugin("gate_self_only")
    plugin.write_text(plugin.read_text().replace("Capabilities(backward=False)",
                                                 "Capabilities(backward=False, modes=('self',))"))
    load_plugin(plugin)
    cases = [Case(kv_lengths=(5, 3), dtype="float32"), Case(kv_lengths=(4,), mode="broadcast_q", broadcast_q_len=3),
             Case(kv_lengths=(2, 7), mode="broadcast_q", broadcast_q_len=2, dtype="float32")]
    monkeypatch.setattr(suites, "get_suite", lambda *a, **k: suites.Suite("default", tuple(cases), ""))
    options = GateOptions(checks=("suite",), precompile=False, reproducers=str(tmp_path / "repro"),
                          run=RunSettings(isolate=True, backward=False, plugins=(str(plugin),)))
    out = _check_suite(get_kernel("gate_self_only"), torch.device("cpu"), options, (str(plugin),))
    assert out.status == "pass" and out.cases == 1
    ((why, n),) = out.unsupported.items()
    assert n == 2 and "broadcast_q" in why and any("skipped 2 case(s)" in d and why in d for d in out.details)
    report = GateReport("cpu", options, results=[out])
    assert report.to_dict()["results"][0]["unsupported"] == {why: 2}
    assert f"gate_self_only / suite: 2 case(s): {why}" in report.to_markdown()
    (suite,) = ET.fromstring(report.to_junit()).findall("testsuite")
    assert suite.get("skipped") == "1" and any("2 case(s) the kernel declared unsupported" in s.get("message")
                                               for s in suite.iter("skipped"))


_SHAPE_CACHE = '''
from jfa_verify import Capabilities, register_kernel
from jfa_verify.core.contract import validate_inputs
from jfa_verify.oracles import reference_attention

_plans = {{}}


@register_kernel({name!r}, capabilities=Capabilities(backward=False))
def load():
    """The float64 reference, rounded; with ``cache``, its plan (the validated offsets) kept per q shape at module
    level, so a later call of the same shape with other lengths reuses stale offsets."""
    def forward(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale)
        if {cache}:
            problem = _plans.setdefault((tuple(q.shape), tuple(k.shape), causal, causal_alignment), problem)
        ref = reference_attention(problem, q, k, v)
        return ref["o"].to(q.dtype), ref["lse"].float()
    return forward
'''


@pytest.mark.parametrize("cache", [True, False])
def test_the_suite_check_runs_the_relation_checks_that_run_runs(monkeypatch, tmp_path, cache):
    """Regression (a new user's trial): a kernel with a module-level plan cache keyed by shape failed two relation
    checks under `run` and passed `gate`, whose suite check ran none. The gate's suite check now runs the suite's
    relation checks too (in a worker), each broken one a finding with a replay command."""
    import torch

    import jfa_verify.checks.suites as suites
    from jfa_verify.cases.case import Case
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from jfa_verify.run.settings import RunSettings
    from jfa_verify.workflows.gate import GateOptions, _check_suite

    name = f"shape_cache_{cache}"
    plugin = tmp_path / f"{name}.py"
    plugin.write_text(_SHAPE_CACHE.format(name=name, cache=cache))
    load_plugin(plugin)
    kernel = get_kernel(name)
    relations = suites.relation_checks(Target(kernel, "cpu"), 0)
    assert {r.name for r in relations} >= {"permutation", "sequence"}
    case = Case(kv_lengths=(5, 3), dtype="float32", name="one")
    monkeypatch.setattr(suites, "get_suite", lambda *a, **k: suites.Suite("default", (case,), "", relations))
    options = GateOptions(checks=("suite",), precompile=False, reproducers=str(tmp_path / "repro"),
                          run=RunSettings(isolate=True, backward=False, plugins=(str(plugin),)))
    out = _check_suite(kernel, torch.device("cpu"), options, (str(plugin),))
    broken = [f for f in out.findings if "(" in f.case]
    if not cache:
        assert out.status == "pass" and not out.findings
        assert f"relation checks: {len(relations)}/{len(relations)} held" in out.details
        return
    assert out.status == "fail" and broken and len(out.findings) == len(broken)  # the one case passes on its own
    assert any(f"relation checks: {len(relations) - len(broken)}/{len(relations)} held" == d for d in out.details)
    for f in broken:
        assert f.summary.startswith("[FAIL] relation ") and f.replay.startswith("jfa-verify replay ")
        assert ".calls.json" in f.replay and str(plugin) in f.replay


def test_the_replay_check_replays_relation_findings_and_passes_them_once_fixed(monkeypatch, tmp_path):
    """Regression (a new user's trial, 2026-12-05): the replay check replayed only case files. A folder holding a
    relation check's finding (``*.calls.json``, what `run` writes for a stale host cache) was skipped as "no case
    file", and in a mixed folder the relation was passed over without a word. Each call file is now checked again,
    in a relation worker: a finding while the kernel keeps its stale cache, a pass once the plugin is fixed."""
    import torch

    import jfa_verify.checks.suites as suites
    from jfa_verify.cases.case import Case
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from jfa_verify.run.settings import RunSettings
    from jfa_verify.workflows.gate import GateOptions, _check_replay, _check_suite

    name, repro = "shape_cache_replayed", tmp_path / "repro"
    plugin = tmp_path / f"{name}.py"
    plugin.write_text(_SHAPE_CACHE.format(name=name, cache=True))
    load_plugin(plugin)
    kernel = get_kernel(name)
    relations = suites.relation_checks(Target(kernel, "cpu"), 0)
    case = Case(kv_lengths=(5, 3), dtype="float32", name="one")
    monkeypatch.setattr(suites, "get_suite", lambda *a, **k: suites.Suite("default", (case,), "", relations))
    run = RunSettings(isolate=True, backward=False, plugins=(str(plugin),))
    _check_suite(kernel, torch.device("cpu"), GateOptions(checks=("suite",), precompile=False,
                                                         reproducers=str(repro), run=run), (str(plugin),))
    calls = sorted(repro.glob("*.calls.json"))
    assert calls and not [p for p in repro.glob("*.json") if p not in calls]  # only relation findings
    options = GateOptions(checks=("replay",), replay_dirs=(str(repro),), reproducers=str(tmp_path / "out"), run=run)
    out = _check_replay(kernel, torch.device("cpu"), options, (str(plugin),))
    assert out.status == "fail" and out.cases == len(calls) and len(out.findings) == len(calls)
    assert {f.reproducer for f in out.findings} == {str(p) for p in calls}
    assert all(f.case.startswith("relation ") and ".calls.json" in f.replay for f in out.findings)
    plugin.write_text(_SHAPE_CACHE.format(name=name, cache=False))  # the fix: the worker loads the file again
    fixed = _check_replay(kernel, torch.device("cpu"), options, (str(plugin),))
    assert fixed.status == "pass" and fixed.cases == len(calls) and not fixed.findings
    # each says it was recorded failing and holds now; a sequence check's pass may be its state not rebuilt (a new
    # user's stale-plan kernel passed the replay check with no word, 2026-12-07)
    held = [line for line in fixed.details if "recorded fail, holds now" in line]
    assert len(held) == len(calls), fixed.details
    assert any("relation sequence" in line for line in held), held
    assert all(("did not recur" in line) == ("relation sequence" in line) for line in held), held


def test_jobs_run_the_suite_and_the_campaign_in_worker_processes_with_the_same_findings(tmp_path, misbehaving_plugin):
    # a kernel wrong on every float16 input: with two workers each suite case still gets its own verdict
    # (every float16 case a finding, no other), and the campaign's workers report theirs with replay commands
    from jfa_verify.checks.suites import get_suite
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    plugin = misbehaving_plugin("wrong-in-fp16", wrong="dtype == torch.float16")
    proc = _gate_subprocess(tmp_path, plugin, "wrong-in-fp16", "--checks", "suite", "campaign", "--jobs", "2",
                            "--campaign-examples", "12", "--timeout", "120")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = _results(tmp_path)
    load_plugin(plugin)
    suite = get_suite("default", "cpu", 0, kernel=get_kernel("wrong-in-fp16")).cases
    # (its validation rejects strided offsets before the planted raise: such a case passes, as "rejected or computed
    # right" allows)
    want = sorted(c.name for c in suite if c.dtype == "float16" and c.offsets_layout == "contiguous")
    assert want and sorted(f["case"] for f in results[("wrong-in-fp16", "suite")]["findings"]) == want
    campaign = results[("wrong-in-fp16", "campaign")]
    assert campaign["status"] == "fail" and campaign["findings"], campaign
    assert all(f"--plugin {plugin}" in f["replay"] and Path(f["reproducer"]).is_file() for f in campaign["findings"])
    assert "over 2 workers" in " ".join(campaign["details"])
    # the campaign's findings are its own draws, not the suite's reproducers replayed (a new user's gate counted
    # one bug's suite failures again as 47 campaign findings)
    assert all(Path(f["reproducer"]).parent.name == "campaign" for f in campaign["findings"])
    assert not {f["case"] for f in campaign["findings"]} & set(want)
    # and a listing of the gate's folder has them (a second trial: `findings REPRODUCERS` did not look there)
    from jfa_verify.fuzz.findings import list_findings

    listed = {r["path"] for r in list_findings(tmp_path / "repro")}
    assert {f["reproducer"] for f in campaign["findings"]} <= listed


def test_the_sanitizer_runs_the_kernel_alone_without_the_oracles(monkeypatch, capsys, misbehaving_plugin, jfa_device):
    # regression (H200): racecheck's hazards in the first gate were all in cuDNN's SDPA kernels, launched
    # by the padded oracle of the sanitized `jfa-verify run`, and were blamed on triton_jfa
    import jfa_verify.oracles as oracles
    import jfa_verify.run.runner as runner
    from jfa_verify.cli.kernel_only import main as kernel_only
    from jfa_verify.workflows.gate import SANITIZER_LAYOUT

    def oracle_called(*args, **kwargs):
        raise AssertionError("an oracle ran under the sanitizer")

    for module in (oracles, runner):
        monkeypatch.setattr(module, "padded_sdpa_attention", oracle_called)
        monkeypatch.setattr(module, "reference_attention", oracle_called)
    device = jfa_device.type
    assert kernel_only(["--kernel", "triton_jfa", "--device", device, "--filter", SANITIZER_LAYOUT,
                        "--max-cases", "1"]) == 0
    assert "ran (forward and backward)" in capsys.readouterr().out
    plugin = misbehaving_plugin("always-raises", wrong="True")
    assert kernel_only(["--kernel", "always-raises", "--device", device, "--plugin", str(plugin),
                        "--filter", SANITIZER_LAYOUT, "--max-cases", "1"]) == 1
    assert "kernel raised RuntimeError: planted failure" in capsys.readouterr().out
    assert kernel_only(["--kernel", "triton_jfa", "--device", device, "--filter", "no-such-case"]) == 2


def test_small_cases_stay_inside_the_contract():
    # regression (H200): gluon_jfa refuses strided offsets (a pass in the suite: they are outside the
    # contract), and the determinism check, handed such a case, reported the refusal as an error
    import torch

    from jfa_verify.checks.suites import get_suite
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.workflows.gate import small_cases

    kernel = get_kernel("triton_jfa")
    assert any(c.offsets_layout != "contiguous" for c in get_suite("default", "cpu", 0, kernel=kernel).cases)
    picked = small_cases(kernel, torch.device("cpu"), 50)
    assert len(picked) > 10 and all(c.offsets_layout == "contiguous" for c in picked)


def test_a_memory_check_finding_replays_under_its_memory_mode(tmp_path, capsys):
    # regression: the recycled-memory run's case file did not say it ran over large finite values, so its
    # replay (NaN-poisoned memory, where this planted read hides) passed: "replayed: pass (DIFFERENT)"
    assert _gate(tmp_path, "--kernel", "reads-uninitialized", *CHEAP) == 1
    finding = _results(tmp_path)[("reads-uninitialized", "recycled_memory")]["findings"][0]
    assert json.loads(Path(finding["reproducer"]).read_text())["memory"] == "large"
    assert finding["replay"].endswith("--memory large")
    capsys.readouterr()
    assert main(["replay", finding["reproducer"], "--device", "cpu", "--plugin", PLUGIN]) == 1
    assert "replayed: fail (same)" in capsys.readouterr().out
    assert main(["replay", finding["reproducer"], "--device", "cpu", "--plugin", PLUGIN, "--memory", "nan"]) == 0


def test_kernel_only_refuses_a_bad_max_cases_and_a_load_that_returns_nothing(capsys, tmp_path):
    # regression: --max-cases 0 was reported as "no case matches --filter ''", and a load() returning None
    # as a kernel exception per case (exit 1, a finding) instead of the configuration error it is (exit 2)
    from jfa_verify.cli.kernel_only import main as kernel_only

    for bad in ("0", "-1"):
        with pytest.raises(SystemExit) as e:
            kernel_only(["--kernel", "triton_jfa", "--device", "cpu", "--max-cases", bad])
        assert e.value.code == 2 and f"--max-cases: {bad} must be > 0" in capsys.readouterr().err
    # a name of its own: a registered name cannot be taken again in this process (test_cli has "returns_none")
    plugin = tmp_path / "kernel_only_returns_none.py"
    plugin.write_text("from jfa_verify import Capabilities, register_kernel\n\n"
                      "@register_kernel('kernel_only_returns_none', capabilities=Capabilities(backward=False))\n"
                      "def load():\n    pass\n")
    assert kernel_only(["--kernel", "kernel_only_returns_none", "--device", "cpu", "--plugin", str(plugin)]) == 2
    captured = capsys.readouterr()
    assert "kernel raised" not in captured.out and "returned None" in captured.err


def _recorded(folder, plugin, kernel, status, case, seconds=2.0):
    """A case file as an earlier run (a nightly campaign) wrote it for a crash or a hang of ``kernel``."""
    from jfa_verify.run.corpus import Corpus
    from jfa_verify.run.isolation import crash_result

    verdict = crash_result(case, kernel, status, f"recorded {status}", (str(plugin),), seconds)
    return Corpus(folder).write(case, kernel, "cpu", verdict, (str(plugin),))


def test_replayed_crash_and_hang_findings_are_judged_in_a_worker_and_the_report_is_written(tmp_path,
                                                                                         misbehaving_plugin):
    # regression: the replay check ran each earlier finding in the gate's own process: a recorded crash
    # aborted the gate (exit 134, no report) and a recorded hang held it for as long as the kernel hung
    from jfa_verify.cases.case import Case

    plugin = misbehaving_plugin("aborts-or-hangs", crash="B == 3", hang="B == 2")
    nightly = tmp_path / "nightly"
    for status, batch in (("crash", 3), ("hang", 2)):
        _recorded(nightly, plugin, "aborts-or-hangs", status,
                  Case(kv_lengths=tuple(range(5, 5 + batch)), head_dim=16, dtype="float32"))
    proc = _gate_subprocess(tmp_path, plugin, "aborts-or-hangs", "--checks", "replay", "--replay", str(nightly))
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    replay = _results(tmp_path)[("aborts-or-hangs", "replay")]
    assert replay["status"] == "crash" and sorted(f["status"] for f in replay["findings"]) == ["crash", "hang"]
    assert "SIGABRT" in " ".join(f["explanation"] for f in replay["findings"])


def test_the_replay_check_starts_one_case_worker_per_memory_mode_not_per_file(tmp_path, misbehaving_plugin,
                                                                              monkeypatch):
    # review: each case file recorded under a memory mode started a case worker of its own (a fork, an import of
    # torch and a kernel load per file); the files of one mode now share one worker, and each is still judged
    import torch

    from jfa_verify.cases.case import Case
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from jfa_verify.run import isolation
    from jfa_verify.run.settings import RunSettings
    from jfa_verify.workflows.gate import GateOptions, _check_replay

    plugin = misbehaving_plugin("replays-per-mode", wrong="B == 3")
    nightly = tmp_path / "nightly"
    memories = {}
    for i, memory in enumerate(("large", "large", "nan", None, None)):
        path = _recorded(nightly, plugin, "replays-per-mode", "crash",
                         Case(kv_lengths=(5, 6, 7 + i), head_dim=16, dtype="float32"))
        if memory:
            payload = json.loads(path.read_text())
            path.write_text(json.dumps({**payload, "memory": memory}))
        memories[str(path)] = memory
    specs = []
    real = isolation.CaseWorker

    class Counting(real):
        def __init__(self, spec, *args, **kwargs):
            # only case workers: a subclass of CaseWorker first imported while this patch holds (the relation worker
            # of checks.calls, when no earlier test imported it) would be counted too
            if type(self) is Counting:
                specs.append(spec.settings.memory)
            super().__init__(spec, *args, **kwargs)

    monkeypatch.setattr(isolation, "CaseWorker", Counting)
    load_plugin(plugin)
    options = GateOptions(checks=("replay",), replay_dirs=(str(nightly),),
                          run=RunSettings(isolate=True, plugins=(str(plugin),), backward=False))
    out = _check_replay(get_kernel("replays-per-mode"), torch.device("cpu"), options, (str(plugin),))
    assert sorted(specs, key=str) == sorted([None, "large", "nan"], key=str)
    assert out.cases == 5 and out.status == "fail" and len(out.findings) == 5  # B == 3 fails: every case is wrong
    assert {f.reproducer for f in out.findings} == set(memories)


def test_replay_check_names_an_unreadable_case_file_and_does_not_pass(tmp_path, misbehaving_plugin):
    # regression: a folder with a case that now passes and a truncated case file passed the replay check
    # (PASS, exit 0) with no word of the file, which `findings` names ("a finding may be lost in it", exit 2)
    from jfa_verify.cases.case import Case

    plugin = misbehaving_plugin("replays-clean")
    nightly = tmp_path / "nightly"
    _recorded(nightly, plugin, "replays-clean", "crash", Case(kv_lengths=(5, 6), head_dim=16, dtype="float32"))
    broken = nightly / "aaaa-bug_gqa.json"
    broken.write_text('{"format": "jfa-verify-case/1", "case": {"kv_len')
    proc = _gate_subprocess(tmp_path, plugin, "replays-clean", "--checks", "replay", "--replay", str(nightly))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "g.json").read_text())
    replay = _results(tmp_path)[("replays-clean", "replay")]
    assert report["verdict"] == "ERROR" and replay["status"] == "error" and replay["cases"] == 1
    assert str(broken) in replay["reason"] and any(str(broken) in why for why in replay["not_judged"])
    assert str(broken) in proc.stdout and "a finding may be lost in it" in proc.stdout
    assert str(broken) in (tmp_path / "g.md").read_text()


def test_sigterm_ends_the_gate_with_the_report_of_what_finished_and_no_running_file(tmp_path, misbehaving_plugin):
    # regression: a cancelled CI job (SIGTERM) killed the gate outright: no report, "running" case files, and
    # its case workers, hung in the kernel, outlived it; Ctrl-C ended it with no report either
    import signal

    plugin = misbehaving_plugin("hangs-in-the-gate", hang="True")
    cmd = [sys.executable, "-m", "jfa_verify.cli", "gate", "--device", "cpu", "--plugin", str(plugin), "--kernel",
           "hangs-in-the-gate", "--checks", "suite", "--jobs", "2", "--reproducers", str(tmp_path / "repro"),
           f"--json={tmp_path / 'g.json'}", f"--junit={tmp_path / 'g.xml'}", f"--markdown={tmp_path / 'g.md'}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # both workers inside the hanging kernel
    out, err = signal_when(proc, lambda: len(list((tmp_path / "repro").glob("*.json"))) >= 2, signal.SIGTERM,
                           settle_s=1)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    report = json.loads((tmp_path / "g.json").read_text())
    assert report["interrupted"] is True and report["verdict"] == "INTERRUPTED" and report["exit_code"] == 130
    assert "Traceback" not in err and "interrupted" in err
    assert not list((tmp_path / "repro").glob("*.json"))  # the interrupted cases have no verdict
    # the check under way is in every report as interrupted, with where its findings so far are (a new user's
    # interrupted gate wrote an empty JSON, Markdown and JUnit while 24 failing case files sat in the folder)
    (check,) = report["results"]
    # (its status "interrupted", not "error": a new user read "error" as a check that could not judge)
    assert check["check"] == "suite" and check["status"] == "interrupted" and "interrupted during" in check["reason"]
    assert f"jfa-verify findings {tmp_path / 'repro'}" in check["reason"]
    junit = (tmp_path / "g.xml").read_text()
    # (an error: a CI reading the JUnit alone must not take an interrupted gate for green)
    assert 'errors="1"' in junit and 'skipped="0"' in junit and "interrupted during" in junit
    markdown = (tmp_path / "g.md").read_text()
    assert "### Interrupted" in markdown and "interrupted during" in markdown


def test_an_interrupted_check_lists_the_failing_cases_it_had_found(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): an interrupted gate's table showed 0 findings for the suite, while the
    suite's failing case files were in the folder; the interrupted check now lists them, replay commands included."""
    import signal

    plugin = misbehaving_plugin("fails-then-hangs", wrong="B >= 2", hang="B < 2")
    repro = tmp_path / "repro"

    def failed_files(statuses=("error",)):
        out = []
        for path in repro.glob("*.json"):
            try:
                out += [path] if json.loads(path.read_text()).get("status") in statuses else []
            except (OSError, ValueError):
                pass  # (being written)
        return out

    cmd = [sys.executable, "-m", "jfa_verify.cli", "gate", "--device", "cpu", "--plugin", str(plugin), "--kernel",
           "fails-then-hangs", "--checks", "suite", "--jobs", "2", "--timeout", "3", "--reproducers", str(repro),
           f"--json={tmp_path / 'g.json'}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = signal_when(proc, lambda: len(failed_files()) >= 2, signal.SIGTERM, settle_s=1)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    (check,) = json.loads((tmp_path / "g.json").read_text())["results"]
    kept = {str(p) for p in failed_files(("fail", "error", "crash", "hang"))}  # (a hang: a case past --timeout)
    assert len(check["findings"]) == len(kept) >= 2, (check, kept)
    assert {f["reproducer"] for f in check["findings"]} == kept
    assert {f["status"] for f in check["findings"]} <= {"error", "hang"}
    assert all("jfa-verify replay" in f["replay"] for f in check["findings"])


_FAKE_SANITIZER = '''#!{python}
"""compute-sanitizer stand-in: prints the racecheck errors named in the environment, in racecheck's format
(blocks of "Error: Race reported between ..." and "and ..." lines); exit codes as the tool's."""
import os, sys
target = sys.argv[sys.argv.index("-m") + 1]
text = os.environ["FAKE_KERNEL_RACES" if target == "jfa_verify.cli.kernel_only" else "FAKE_CONTROL_RACES"]
if text == "none":  # the target did not run: no summary
    sys.exit(1)
blocks = [b.split("&") for b in text.split()]  # "R:fn:file:line&W:fn:file:line ..."
for block in blocks:
    for i, access in enumerate(block):
        kind, fn, name, line = access.split(":")
        kind = dict(R="Read", W="Write")[kind]
        lead = "Error: Race reported between" if i == 0 else "    and"
        print(f"========= {{lead}} {{kind}} access at {{fn}}+0x{{16 * (i + 1):x}} in {{name}}:{{line}} [7 hazards]")
    print("========= ")
shown = int(os.environ.get("FAKE_SHOWN", len(blocks)))
print(f"========= RACECHECK SUMMARY: {{shown}} hazards displayed ({{shown}} errors, 0 warnings)")
program = int(os.environ.get("FAKE_PROGRAM_EXIT", "0")) if target != "jfa_verify.cli.kernel_only" else 0
sys.exit(99 if blocks and "--error-exitcode" in sys.argv else program)
'''

_KERNEL_SOURCE = """import x


def kernel(a, b):                     # line 4: the compiler's prologue and epilogue
    s = smem.load()                   # line 5: the kernel's own shared-memory access
    gl.warp_specialize([(f, (s,))])   # line 6: the partitions' hand-off
    t = 1  # a comment naming warp_specialize( is not the call (line 7)


def helper(a):                        # line 10: a function without warp_specialize
    return a
"""

_CONTROL_SOURCE = """def outer():
    def ctl(o):          # line 2
        o.x = 1
        gl.warp_specialize([])   # line 4
"""

SCAFFOLD = "R:kernel:k.py:4&W:kernel:k.py:4&W:kernel:k.py:6"


def _sanitized(tmp_path, monkeypatch, kernel_races, control_races, control="ctl", **env):
    import torch

    from jfa_verify.protocol.kernel import Capabilities, Kernel
    from jfa_verify.workflows.gate import GateOptions, GateReport, _check_sanitizer

    bin_dir, src = tmp_path / "bin", tmp_path / "src"
    bin_dir.mkdir(exist_ok=True)
    src.mkdir(exist_ok=True)
    (src / "k.py").write_text(_KERNEL_SOURCE)
    (src / "ctl.py").write_text(_CONTROL_SOURCE)
    fake = bin_dir / "compute-sanitizer"
    fake.write_text(_FAKE_SANITIZER.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.setenv("FAKE_KERNEL_RACES", kernel_races)
    monkeypatch.setenv("FAKE_CONTROL_RACES", control_races)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    loader = type(lambda: None)(compile("def load(): pass", str(src / "k.py"), "exec").co_consts[0], {})
    kernel = Kernel("ws-kernel", "", loader, Capabilities(), sanitizer_control=control)
    options = GateOptions(checks=("sanitizer",), sanitizer_tools=("racecheck",), reproducers=str(tmp_path / "r"))
    result = _check_sanitizer(kernel, torch.device("cuda"), options, ())
    return result, GateReport("fake", options, results=[result])


CONTROL = "R:ctl:ctl.py:2&W:ctl:ctl.py:4"


@pytest.mark.parametrize("kernel_races, control_races, judged, env", [
    # the scaffold's form, shown by the control: not judged; the kernel's own statement stays a finding
    (f"{SCAFFOLD} R:kernel:k.py:5&W:kernel:k.py:6", CONTROL, 1, {}),
    # one error block whose second "and" line is the kernel's own statement: judged whole
    ("R:kernel:k.py:4&W:kernel:k.py:6&W:kernel:k.py:5", CONTROL, 1, {}),
    # a comment naming warp_specialize( is no call; a def without warp_specialize is no scaffold
    ("R:kernel:k.py:4&W:kernel:k.py:7 R:helper:k.py:10&W:helper:k.py:10", CONTROL, 2, {}),
    # write against write, a read against a read, accesses of two functions: not the hand-off's form
    ("W:kernel:k.py:4&W:kernel:k.py:6 R:kernel:k.py:4&R:kernel:k.py:6 R:kernel:k.py:4&W:helper:k.py:10",
     CONTROL, 3, {}),
    # a source the kernel's folders do not hold, or given as a path: judged
    ("R:kernel:other.py:4&W:kernel:other.py:6 R:kernel:/abs/k.py:4&W:kernel:/abs/k.py:6", CONTROL, 2, {}),
    # fewer blocks printed than the summary counts (the print limit): every error judged
    (SCAFFOLD, CONTROL, 2, {"FAKE_SHOWN": "2"}),
    # the control's errors are not of the scaffold's form, or it is clean, or it did not run, or ran wrong
    (SCAFFOLD, "R:ctl:ctl.py:3&W:ctl:ctl.py:4", 1, {}),
    (SCAFFOLD, "", 1, {}),
    (SCAFFOLD, "none", 1, {}),
    (SCAFFOLD, CONTROL, 1, {"FAKE_PROGRAM_EXIT": "1"}),
])
def test_racecheck_errors_of_the_scaffolds_form_are_not_judged_when_the_control_shows_them(
        tmp_path, monkeypatch, kernel_races, control_races, judged, env):
    # regression (H200): gluon_jfa's 12 racecheck errors were all a read at its kernels' def lines against
    # writes there or at their warp_specialize calls, the code Triton emits for the partitions; a race-free
    # control with one mbarrier hand-off draws the same. Only errors of exactly that form are set aside,
    # and only when the control shows them; a review found the first rule excused far more.
    result, report = _sanitized(tmp_path, monkeypatch, kernel_races, control_races, **env)
    total = int(env.get("FAKE_SHOWN", len(kernel_races.split())))
    set_aside = total - judged
    assert result.status == "fail" and result.findings[0].summary == f"racecheck: {judged} error(s)", result
    assert report.exit_code() == 1
    if set_aside:
        assert result.not_judged and result.not_judged[0].startswith(f"racecheck: {set_aside} of {total} error(s)")
        assert "Read kernel at k.py:4 vs Write k.py:4, Write k.py:6" in result.not_judged[0]
        assert "### Not judged" in report.to_markdown() and 'name="not-judged-0"' in report.to_junit()
    else:
        assert not result.not_judged, result.not_judged


def test_a_kernel_whose_racecheck_errors_are_all_the_scaffolds_passes_with_them_listed(tmp_path, monkeypatch):
    result, report = _sanitized(tmp_path, monkeypatch, f"{SCAFFOLD} R:kernel:k.py:4&W:kernel:k.py:4", CONTROL)
    assert result.status == "pass" and not result.findings and len(result.not_judged) == 1, result
    assert (tmp_path / "r" / "sanitizer-ws-kernel-racecheck-control.log").is_file()
    assert report.exit_code() == 0
    suite = ET.fromstring(report.to_junit()).find("testsuite")  # CI's totals count what was not judged
    assert (suite.get("skipped"), suite.get("failures")) == ("1", "0")
    assert len(suite.findall("testcase")) == int(suite.get("tests"))


def test_a_control_that_cannot_be_imported_leaves_every_error_judged(tmp_path, monkeypatch):
    result, _ = _sanitized(tmp_path, monkeypatch, SCAFFOLD, CONTROL, control="no_such_pkg.ctl")
    assert result.status == "fail" and result.findings[0].summary == "racecheck: 1 error(s)", result
    result, _ = _sanitized(tmp_path, monkeypatch, SCAFFOLD, CONTROL, control=None)
    assert result.status == "fail" and not result.not_judged


def test_the_h200_racecheck_reports_of_gluon_jfa_are_classified_as_the_scaffolds():
    # the real reports (H200, 2026-12-01): all 12 of gluon_jfa's errors are of the scaffold's form, as is the
    # control's one; the same report with one access moved to a statement of the kernel is judged
    from jfa_verify.checks import sanitizer

    data = Path(__file__).resolve().parent / "data" / "sanitizer"  # (copied from docs/evidence/gpu-2026-12-01-c)
    kernel_text = (data / "gluon_jfa-racecheck-h200.log").read_text()
    control = sanitizer.ToolRun([], 1, 0, (data / "gluon_jfa-racecheck-control-h200.log").read_text())
    kernel_dirs = sanitizer.source_dirs(__import__("jfa_verify.kernels.gluon_jfa", fromlist=["load"]).load)
    control_dirs = sanitizer.source_dirs("jfa_verify.kernels.gluon_jfa.sanitizer_control")
    verdict = sanitizer.classify_races(sanitizer.ToolRun([], 12, 99, kernel_text), kernel_dirs, control, control_dirs)
    assert (verdict.judged, len(verdict.not_judged), verdict.control_scaffold) == (0, 12, 1)
    moved = kernel_text.replace("_fwd_kernel+0xb170 in _kernels.py:289", "_fwd_kernel+0xb170 in _kernels.py:287", 1)
    verdict = sanitizer.classify_races(sanitizer.ToolRun([], 12, 99, moved), kernel_dirs, control, control_dirs)
    assert (verdict.judged, len(verdict.not_judged)) == (1, 11)


def test_checks_under_other_memory_modes_keep_their_own_case_files(tmp_path, capsys):
    # regression (new-user trial): the canary and recycled-memory checks ran the same case into one case file,
    # the second overwrote the first (its memory mode too), and a suite finding of that case then replayed
    # under recycled memory
    assert _gate(tmp_path, "--kernel", "writes-past-the-end", "--checks", "canaries", "recycled_memory",
                 "--small-cases", "1") == 1
    results = _results(tmp_path)
    files = {check: results[("writes-past-the-end", check)]["findings"][0]["reproducer"]
             for check in ("canaries", "recycled_memory")}
    assert files["canaries"] != files["recycled_memory"], files
    for check, memory in (("canaries", "nan"), ("recycled_memory", "large")):
        payload = json.loads(Path(files[check]).read_text())
        assert payload["memory"] == memory and payload["status"] == "fail", (check, payload.get("memory"))


def test_the_gate_names_only_the_settings_of_the_checks_it_runs(tmp_path, capsys):
    # regression (new-user trial): a gate of memory checks said "campaign 25 examples, 3 reruns"
    assert _gate(tmp_path, "--kernel", "exact-ref", "--checks", "canaries", "--small-cases", "1") == 0
    out, md = capsys.readouterr().out, (tmp_path / "g.md").read_text()
    for text in (out, md):
        assert "seed 0" in text and "campaign" not in text.split("|")[0] and "reruns" not in text, text[:400]


def test_a_crash_in_the_determinism_reruns_exits_4_with_every_report_and_a_case_file(tmp_path, misbehaving_plugin):
    # regression (new-user trial): the determinism check ran the kernel in the gate's own process: a kernel that
    # aborts ended the gate (exit 9 after its banner) with no JSON, JUnit, Markdown or case file
    plugin = misbehaving_plugin("crash_always", crash="True")
    proc = _gate_subprocess(tmp_path, plugin, "crash_always", "--checks", "determinism", "canaries",
                            "--small-cases", "1", "--timeout", "60")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = _results(tmp_path)
    determinism = results[("crash_always", "determinism")]
    assert determinism["status"] == "crash" and results[("crash_always", "canaries")]["status"] == "crash"
    (finding,) = determinism["findings"]
    assert "SIGABRT" in finding["summary"] and "rerun 0 of 3" in finding["summary"]
    payload = json.loads(Path(finding["reproducer"]).read_text())
    assert payload["status"] == "crash" and payload["determinism"]["reruns"] == 3
    junit = (tmp_path / "g.xml").read_text()
    assert '<testsuite name="crash_always.determinism"' in junit and 'type="crash"' in junit
    assert "crash_always / determinism" in (tmp_path / "g.md").read_text()


def test_a_hang_in_the_determinism_reruns_exits_3_at_the_timeout_and_its_case_file_says_hang(tmp_path,
                                                                                              misbehaving_plugin):
    # regression (new-user trial): --timeout 5 was ignored by the in-process determinism reruns (the gate sat until
    # interrupted at 40 s), and the reproducers folder it then named did not exist
    plugin = misbehaving_plugin("hang_always", hang="True")  # sleeps 600 s: only the timeout ends it
    proc = _gate_subprocess(tmp_path, plugin, "hang_always", "--checks", "determinism", "--small-cases", "1",
                            "--reruns", "2", "--timeout", "3")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    determinism = _results(tmp_path)[("hang_always", "determinism")]
    assert determinism["status"] == "hang" and "--timeout" in determinism["findings"][0]["summary"]
    (path,) = (tmp_path / "repro").glob("*-determinism.json")
    payload = json.loads(path.read_text())
    assert payload["status"] == "hang" and payload["determinism"]["reruns"] == 2


def test_a_nondeterminism_finding_is_a_case_file_that_findings_lists_and_replay_reruns(tmp_path, capsys):
    # regression (new-user trial): the determinism findings had no case file ("reproducer": null), `findings` did
    # not list them, and the printed replay ran the case once and said PASS, exit 0
    assert _gate(tmp_path, "--kernel", "nondeterministic", "--checks", "determinism", "--small-cases", "1") == 1
    (finding,) = _results(tmp_path)[("nondeterministic", "determinism")]["findings"]
    path = finding["reproducer"]
    assert path and f"jfa-verify replay {path}" in finding["replay"]
    payload = json.loads(Path(path).read_text())
    first = payload["determinism"]["first_difference"]
    assert payload["status"] == "fail" and payload["determinism"]["reruns"] == 3
    assert first["output"] in ("o", "lse") and first["rerun"] >= 1 and first["index"]
    capsys.readouterr()

    assert main(["findings", str(tmp_path / "repro")]) == 1
    out = capsys.readouterr().out
    assert path in out and "nondeterministic" in out

    assert main(["replay", path, "--plugin", PLUGIN]) == 1
    out = capsys.readouterr().out
    assert "rerunning it 3 times" in out and "the runs differ bit-wise" in out and "differs bit-wise" in out
    assert main(["replay", path, "--plugin", PLUGIN, "--kernel", "exact-ref"]) == 0  # a deterministic kernel
    out = capsys.readouterr().out
    assert "[PASS] 3 reruns" in out and "agree bit for bit" in out and "may need more reruns" not in out
    # (another kernel's verdict, said so: "replayed: pass (DIFFERENT)" read as a fix of the recorded one)
    assert "recorded for kernel 'nondeterministic': fail; replayed on 'exact-ref': pass (a different kernel" in out


@pytest.mark.parametrize("kernel, check, how", [("nondeterministic", "determinism", "differ bit-wise"),
                                                ("writes-past-the-end", "canaries", "allocated at")])
def test_the_replay_check_replays_a_finding_as_the_check_that_found_it(tmp_path, capsys, kernel, check, how):
    """Regression: `gate --replay` ran every earlier case file once, without a memory mode, so a nightly's
    determinism finding (bits that differ between reruns) or canary finding (a write past the end, seen only under
    guard bands) read as passing. Each is now replayed as its check ran it: reruns compared bit for bit, or the
    case under its memory mode."""
    assert _gate(tmp_path, "--kernel", kernel, "--checks", check, "--small-cases", "1") == 1
    capsys.readouterr()
    found = tmp_path / "found"
    (tmp_path / "repro").rename(found)
    assert _gate(tmp_path, "--kernel", kernel, "--checks", "replay", "--replay", str(found)) == 1
    replay = _results(tmp_path)[(kernel, "replay")]
    assert replay["status"] == "fail" and replay["findings"], replay
    assert any(how in f["summary"] + f["explanation"] for f in replay["findings"]), replay["findings"]


_NOISY = '''
import torch

from jfa_verify import Capabilities, register_kernel, validate_inputs
from jfa_verify.oracles import reference_attention


@register_kernel("noisy", capabilities=Capabilities(backward=False))
def load():
    def attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale)
        ref = reference_attention(problem, q.detach(), k.detach(), v.detach())
        # a reduction in a varying order gone wrong: an error past the budget that differs from run to run
        noise = torch.rand(ref["o"].shape, dtype=torch.float64, device=q.device) * 0.1
        return (ref["o"] + noise).to(q.dtype), ref["lse"].float()
    return attention
'''


@pytest.mark.parametrize("checks", [["recycled_memory"], ["recycled_memory", "determinism"]])
def test_a_nondeterministic_kernels_error_is_filed_as_nondeterminism_not_recycled_memory(tmp_path, capsys, checks):
    """Regression (a new user's trial): a nondeterministic kernel's extra error failed the recycled_memory check
    (any failure under the memory mode was taken for the memory's). A case failing there is run twice on fresh
    memory; outputs that differ there too are a determinism finding, and the memory check passes; with the
    determinism check also run (before it or after), its case is one finding there, not two."""
    plugin = tmp_path / "noisy.py"
    plugin.write_text(_NOISY)
    rc = _gate(tmp_path, "--kernel", "noisy", "--checks", *checks, "--small-cases", "2", plugin=str(plugin))
    out = capsys.readouterr().out
    assert rc == 1, out
    payload = json.loads((tmp_path / "g.json").read_text())["results"]
    assert sorted(r["check"] for r in payload) == ["determinism", "recycled_memory"], payload
    results = _results(tmp_path)
    memory, determinism = results[("noisy", "recycled_memory")], results[("noisy", "determinism")]
    assert memory["status"] == "pass" and not memory["findings"], memory
    assert any("nondeterminism, not memory" in d for d in memory["details"]), memory["details"]
    assert determinism["status"] == "fail" and determinism["findings"], determinism
    cases = [f["case"] for f in determinism["findings"]]
    assert len(cases) == len(set(cases)), cases
    assert any("differs bit-wise" in f["summary"] for f in determinism["findings"]), determinism["findings"]
    assert not list((tmp_path / "repro").glob("*-memory-*.json"))  # the memory mode's files: not its findings


def test_a_kernel_whose_load_raises_is_a_usage_error_before_the_gate_starts(tmp_path, capsys):
    """Regression (a new user's trial): a kernel whose load() raised was found by each check's first case: the gate
    printed its banner and filed the error as a determinism finding (exit 1) in its reports. It is loaded before
    anything is printed or written: one line, exit 2."""
    plugin = tmp_path / "load_raises.py"
    plugin.write_text("from jfa_verify import Capabilities, register_kernel\n\n\n"
                      "@register_kernel('gate_load_raises', capabilities=Capabilities())\n"
                      "def load():\n    raise RuntimeError('libfoo.so: cannot open shared object file')\n")
    rc = _gate(tmp_path, "--kernel", "gate_load_raises", "--checks", "determinism", "--small-cases", "1",
               plugin=str(plugin))
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", out
    assert "kernel 'gate_load_raises': its load()" in err and "RuntimeError: libfoo.so" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "g.json").exists()


def test_junit_counts_are_the_testcases_written_for_an_interrupted_check():
    """Regression (a new user's trial): an interrupted suite check with 5 findings so far wrote tests="1"
    failures="5" beside 6 testcases, which strict JUnit readers refuse."""
    from jfa_verify.workflows.gate import CheckResult, Finding, GateOptions, GateReport

    findings = [Finding("suite", f"case-{i}", "fail", "wrong o") for i in range(5)]
    report = GateReport("cpu", GateOptions(), results=[
        CheckResult("k", "suite", "interrupted", findings=findings, reason="interrupted during this check"),
        CheckResult("k", "campaign", "fail", cases=3, findings=findings[:1]),
        CheckResult("k", "replay", "skip", reason="no --replay folder given")])
    for suite in ET.fromstring(report.to_junit()).findall("testsuite"):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases), suite.get("name")
        counted = {a: sum(c.find(k) is not None for c in cases)
                   for k, a in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped"))}
        assert {a: int(suite.get(a)) for a in counted} == counted, suite.get("name")
    interrupted, campaign, replay = ET.fromstring(report.to_junit()).findall("testsuite")
    assert ([interrupted.get(a) for a in ("tests", "failures", "errors", "skipped")]) == ["6", "5", "1", "0"]
    assert (campaign.get("tests"), campaign.get("failures")) == ("3", "1")
    assert (replay.get("tests"), replay.get("skipped")) == ("1", "1")


def test_an_interrupted_check_is_a_junit_error_and_counts_the_cases_it_had_judged(monkeypatch, tmp_path):
    """Regression (a new user's trial): a gate stopped 15 s into its suite wrote JUnit failures="0" errors="0"
    skipped="1", which a CI reads as green, and every report said the suite ran 0 cases though cases had passed."""
    from types import SimpleNamespace

    import jfa_verify.checks.suites as suites
    import jfa_verify.run.loop as loop
    from jfa_verify.cases.case import Case
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.settings import RunSettings
    from jfa_verify.workflows.gate import GateOptions, run_gate

    class StoppedAfterFour:  # the Verifier: four verdicts (one of them unsupported), then Ctrl-C
        interrupted_cases = []  # (between cases: none cut short)

        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def verify_all(self, cases, on_result=None, **kwargs):
            for i, status in enumerate(("pass", "pass", "unsupported", "pass")):
                if on_result is not None:
                    on_result(SimpleNamespace(status=status, case=Case(kv_lengths=(5, 3), name=f"case-{i}")))
            raise KeyboardInterrupt

    monkeypatch.setattr(suites, "get_suite", lambda *a, **k: suites.Suite("default", (Case(kv_lengths=(5, 3)),), ""))
    monkeypatch.setattr(loop, "Verifier", StoppedAfterFour)
    options = GateOptions(checks=("suite", "campaign"), precompile=False, reproducers=str(tmp_path / "repro"),
                          run=RunSettings(isolate=True, backward=False))
    report = run_gate([get_kernel("triton_jfa")], "cpu", options, log=lambda line: None)
    assert report.interrupted and report.exit_code() == 130 and report.verdict == "INTERRUPTED"
    (check,) = report.results  # the campaign never started
    assert check.status == "interrupted" and check.cases == 3, check
    assert "interrupted during this check after 3 case(s)" in check.reason
    (suite,) = ET.fromstring(report.to_junit()).findall("testsuite")
    assert [suite.get(a) for a in ("tests", "failures", "errors", "skipped")] == ["4", "0", "1", "0"]
    assert [c.get("name") for c in suite.iter("testcase")][1:] == ["case-0", "case-1", "case-3"]
    (error,) = suite.iter("error")
    assert "after 3 case(s)" in error.get("message")
    markdown = report.to_markdown()
    assert "| triton_jfa | suite | interrupted | 3 | 0 |" in markdown and "after 3 case(s)" in markdown


def test_junit_passed_testcases_are_the_cases_that_passed_not_cases_less_findings():
    """Regression (a new user's trial, 2026-12-06): JUnit's passed testcases were the check's cases less its
    findings. A suite check's relation findings are not among its cases, so 3 of its 72 passed cases went missing;
    a campaign's findings are shrunk, one a bug, so 29 failing draws became 51 "passed" ones. The suite check's
    named passes are written as they are, the campaign's count of passing draws is used, and a check that names
    its passes writes none when none passed."""
    from jfa_verify.workflows.gate import CheckResult, Finding, GateOptions, GateReport

    relation = Finding("suite", "relations/0/cross: sequence", "fail", "a stale plan")
    report = GateReport("cpu", GateOptions(), results=[
        CheckResult("k", "suite", "fail", cases=4, passed=["a", "b", "c"],
                    findings=[Finding("suite", "d", "fail", "wrong o"), relation]),
        CheckResult("k", "campaign", "fail", cases=10, passes=6, findings=[Finding("campaign", "e", "fail", "o")]),
        CheckResult("k", "canaries", "fail", cases=2, passed=[],
                    findings=[Finding("canaries", f"f{i}", "fail", "past the end") for i in range(2)])])
    suite, campaign, canaries = ET.fromstring(report.to_junit()).findall("testsuite")
    passed = {s.get("name"): [c.get("name") for c in s.findall("testcase") if len(c) == 0]
              for s in (suite, campaign, canaries)}
    assert passed["k.suite"] == ["a", "b", "c"]
    assert len(passed["k.campaign"]) == 6 and campaign.get("tests") == "7"
    assert passed["k.canaries"] == [] and canaries.get("tests") == "2"


@pytest.mark.parametrize("jobs", ["1", "2"])  # (2: campaign workers, whose steps come as events)
def test_a_campaigns_shrink_steps_are_not_counted_as_its_cases_or_passing_tests(tmp_path, misbehaving_plugin, jobs):
    """Regression (a new user's trial, 2026-12-07): a 25-example campaign that shrank one failure reported 425 JUnit
    tests, 424 of them "passed" shrink steps: a CI's test count swung with shrinking."""
    plugin = misbehaving_plugin("fails_on_batches", wrong="B >= 2")
    _gate(tmp_path, "--kernel", "fails_on_batches", "--checks", "campaign", "--campaign-examples", "8", "--jobs", jobs,
          plugin=str(plugin))
    import re

    (result,) = json.loads((tmp_path / "g.json").read_text())["results"]
    assert result["status"] == "fail" and result["findings"], result
    steps = re.search(r"besides them, (\d+) shrink step\(s\) \(not counted as cases\)", result["details"][0])
    assert steps and int(steps[1]) > 0 and result["cases"] <= 8, result
    assert f"{result['cases']} case(s): " in result["details"][0], result  # the line's count is the check's
    campaign = ET.parse(tmp_path / "g.xml").getroot().find("testsuite[@name='fails_on_batches.campaign']")
    assert int(campaign.get("tests")) <= 8 + len(result["findings"]), ET.tostring(campaign)[:500]


def test_the_campaign_line_words_its_counts_and_they_add_up_to_its_cases():
    """Regression (a new user's trial): the gate's campaign line read "statuses {'pass': 69, 'fail': 30} (83 shrink
    step(s) among them, not counted as cases)" beside "16 case(s)": a raw dict over every run, 99, that no reader could
    reconcile with 16. It now words the cases' verdicts, which add up to the case count, and the shrink steps' apart."""
    import re

    from jfa_verify.workflows.gate import _unshrunk

    cases, passes, line = _unshrunk(99, {"pass": 69, "fail": 30}, {"pass": 56, "fail": 27})
    assert (cases, passes) == (16, 13), (cases, passes)
    assert "{" not in line and "statuses" not in line, line
    head, _, steps = line.partition("; besides them, ")
    assert head == "16 case(s): 13 passed, 3 failed", line
    assert steps == "83 shrink step(s) (not counted as cases): 56 passed, 27 failed", line
    counted = [int(n) for n in re.findall(r"(\d+) (?:passed|failed)", head)]
    assert sum(counted) == cases, line


def test_one_bug_kept_in_several_campaign_files_is_one_junit_failure_naming_the_others(tmp_path, monkeypatch):
    """Regression (a new user's trial): the gate wrote one JUnit failure per campaign finding FILE, so one planted bug
    kept as two files (shrunk to cases of other input classes, or a saved finding replayed beside a new one) read as
    two failures, where `fuzz` and `findings` group them as one (fuzz.findings.failure_groups). Now one testcase per
    distinct failure, naming the other files with their replay commands; JSON and Markdown count the same."""
    from collections import Counter

    import torch

    import jfa_verify.fuzz.campaign as campaign
    from jfa_verify.cases.case import Case
    from jfa_verify.workflows.gate import GateOptions, GateReport, _check_campaign

    def sig(status, classes, id_):
        return {"kernel": "k", "status": status, "error_kind": "mismatch", "outputs": ["lse"], "classes": classes,
                "id": id_}

    cases = [Case(kv_lengths=(1,), name="one-token"), Case(kv_lengths=(65,), name="tile-edge"),
             Case(kv_lengths=(3,), name="crashes")]
    wrong = "lse wrong\n  lse: base 2"
    failures = [campaign.CampaignFailure(cases[0], "fail", tmp_path / "aaa-k.json", wrong, "search",
                                         sig("fail", ["one-token"], "a" * 12), examples=1),
                campaign.CampaignFailure(cases[1], "fail", tmp_path / "bbb-k.json", wrong, "corpus",
                                         sig("fail", ["tile-edge"], "b" * 12), examples=4),
                campaign.CampaignFailure(cases[2], "crash", tmp_path / "ccc-k.json", "crash\n  SIGABRT", "search",
                                         sig("crash", [], "c" * 12))]

    class _Campaign:  # the campaign's summary, as a run that kept one bug in two files and a crash in a third
        def __init__(self, *args, **kwargs):
            pass

        def run(self):
            return campaign.CampaignSummary("k", "cpu", 0, cases_run=10,
                                            statuses=Counter({"pass": 7, "fail": 2, "crash": 1}), failures=failures)

    monkeypatch.setattr(campaign, "Campaign", _Campaign)
    kernel = type("K", (), {"name": "k"})()
    options = GateOptions(checks=("campaign",), reproducers=str(tmp_path))
    result = _check_campaign(kernel, torch.device("cpu"), options, ())
    assert [(f.case, f.status) for f in result.findings] == [("tile-edge", "fail"), ("crashes", "crash")], result
    (also,) = result.findings[0].also
    assert also["case"] == "one-token" and also["replay"].startswith(f"jfa-verify replay {tmp_path / 'aaa-k.json'}")
    report = GateReport("cpu", options, results=[result])
    (suite,) = ET.fromstring(report.to_junit()).findall("testsuite")
    failed = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["tile-edge", "crashes"], ET.tostring(suite)[:800]
    text = failed[0].find("failure").text
    assert str(tmp_path / "aaa-k.json") in text and also["replay"] in text, text
    assert (suite.get("tests"), suite.get("failures")) == (str(7 + 2), "2"), ET.tostring(suite)[:800]
    assert len(report.to_dict()["results"][0]["findings"]) == 2
    assert "| k | campaign | crash | 10 | 2 |" in report.to_markdown(), report.to_markdown()
    assert f"also `one-token`: `{also['replay']}`" in report.to_markdown(), report.to_markdown()


def test_the_replay_check_passes_over_a_gate_report_in_the_folder_it_replays(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): `gate --checks replay --replay DIR --json DIR/jfa-gate.json`, run twice, passed
    and then ended in ERROR: its own report in DIR was "not a readable case file; a finding may be lost in it", where
    `findings` passes over it. The replay check passes over jfa-verify's reports as `findings` does."""
    import torch

    from jfa_verify.cases.case import Case
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from jfa_verify.run.corpus import Corpus
    from jfa_verify.run.runner import CaseResult
    from jfa_verify.run.settings import RunSettings
    from jfa_verify.workflows.gate import GateOptions, _check_replay

    plugin = misbehaving_plugin("fixed_since")
    load_plugin(plugin)
    folder = tmp_path / "found"
    case = Case(kv_lengths=(3, 5), dtype="float32", head_dim=16)
    Corpus(folder).write(case, "fixed_since", "cpu", CaseResult(case, "fixed_since", "fail", message="recorded"))
    (folder / "jfa-gate.json").write_text(json.dumps({"results": [], "verdict": "PASS", "environment": {}}))
    options = GateOptions(checks=("replay",), replay_dirs=(str(folder),), reproducers=str(tmp_path / "out"),
                          run=RunSettings(isolate=True, backward=False, plugins=(str(plugin),)))
    out = _check_replay(get_kernel("fixed_since"), torch.device("cpu"), options, (str(plugin),))
    assert out.status == "pass" and out.cases == 1 and not out.not_judged, (out.status, out.reason, out.not_judged)


def test_a_step_summary_in_no_folder_is_a_usage_error_before_any_work(tmp_path, monkeypatch, capsys):
    # regression (a new user's trial): the gate passed every check, then appending its Markdown to
    # $GITHUB_STEP_SUMMARY in a missing folder ended it in an internal error, exit 70, beside a report saying PASS
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "nodir" / "summary.md"))
    rc = _gate(tmp_path, "--kernel", "triton_jfa", "--checks", "determinism")
    err = capsys.readouterr().err
    assert rc == 2 and "$GITHUB_STEP_SUMMARY=" in err and "does not exist" in err, err
    assert not (tmp_path / "g.json").exists()  # nothing ran


def test_a_kernel_named_twice_is_checked_once(tmp_path, capsys):
    """Regression (a new user's trial, 2026-12-07): `gate --kernel K --kernel K` ran each check twice, printed two
    rows and summed both times into one Markdown row. A name given twice is one kernel."""
    assert _gate(tmp_path, "--kernel", "exact-ref", "--kernel", "exact-ref", "--checks", "determinism") == 0
    out = capsys.readouterr().out
    assert out.count("exact-ref / determinism:") == 1 and "kernels exact-ref;" in out, out
    results = json.loads((tmp_path / "g.json").read_text())["results"]
    assert [(r["kernel"], r["check"]) for r in results] == [("exact-ref", "determinism")], results


def test_an_interrupted_gate_names_the_case_it_was_running_and_its_replay(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): a gate a CI job's time limit ended during a hung case said only "interrupted
    during this check after 43 case(s)"; ``run`` names the case and its replay. The cases that passed before the stop
    keep their names in the JUnit file (they were "passed-0", "passed-1", ... there)."""
    import signal
    import time

    plugin = misbehaving_plugin("hangs-on-broadcast-q", hang="broadcast")  # (a few cases pass first)
    repro = tmp_path / "repro"

    def hung():  # the broadcast-Q case's file, still "running" two seconds after it was written (not a slow case)
        for path in repro.glob("*.json"):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if doc.get("status") == "running" and doc.get("case", {}).get("mode") == "broadcast_q" \
                    and time.time() - path.stat().st_mtime > 2:
                return doc
        return None

    cmd = [sys.executable, "-m", "jfa_verify.cli", "gate", "--device", "cpu", "--plugin", str(plugin), "--kernel",
           "hangs-on-broadcast-q", "--checks", "suite", "--jobs", "1", "--timeout", "300", "--reproducers",
           str(repro), f"--json={tmp_path / 'g.json'}", f"--junit={tmp_path / 'g.xml'}",
           f"--markdown={tmp_path / 'g.md'}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cut_short = []
    out, err = signal_when(proc, lambda: cut_short.append(hung()) or cut_short[-1] is not None, signal.SIGTERM)
    assert proc.returncode == 130, out[-2000:] + err[-2000:]
    name = cut_short[-1]["case"]["name"]
    (check,) = json.loads((tmp_path / "g.json").read_text())["results"]
    (line,) = [d for d in check["details"] if d.startswith("interrupted while running ")]
    assert line.startswith(f"interrupted while running {name} (") and "jfa-verify replay" in line, line
    assert "1 case(s) cut short" in check["reason"], check["reason"]
    assert line in (tmp_path / "g.md").read_text() and line in out + err
    passed = [c.get("name") for c in ET.parse(tmp_path / "g.xml").getroot().iter("testcase")
              if len(c) == 0]  # (no failure, error or skipped inside)
    assert passed and passed == check["passed"] and len(passed) == check["cases"], (passed, check["cases"])
    assert not any(n.startswith("passed-") for n in passed), passed


def test_a_plain_wrong_result_is_the_suites_finding_not_a_memory_checks(tmp_path, capsys):
    """A new user's gate (2026-12-07) filed a plain causal-mask bug under canaries and recycled_memory too, each with
    the suite's text: the summary sent them looking for a stray write. A memory-mode failure with no guard band
    written that fails alike on fresh memory is now a line of the check's details, not its finding, where the gate
    runs the suite or the campaign (which report it); a guard band written (writes-past-the-end) still fails both
    memory checks."""
    assert _gate(tmp_path, "--kernel", "wrong-everywhere", "--checks", "campaign", "canaries", "recycled_memory",
                 "--campaign-examples", "8", "--small-cases", "1") == 1
    results = _results(tmp_path)
    assert results[("wrong-everywhere", "campaign")]["findings"]
    for check in ("canaries", "recycled_memory"):
        r = results[("wrong-everywhere", check)]
        assert r["status"] == "pass" and not r["findings"], r
        assert any("fails alike on fresh memory (o)" in line and "not a finding of this check" in line
                   for line in r["details"]), r["details"]
    assert not list((tmp_path / "repro").glob("*-memory-*.json"))  # the memory runs' files are not kept
    assert _gate(tmp_path, "--kernel", "writes-past-the-end", "--checks", "canaries", "recycled_memory",
                 "--small-cases", "1") == 1
    assert {_results(tmp_path)[("writes-past-the-end", c)]["status"] for c in ("canaries", "recycled_memory")} == {
        "fail"}
    from jfa_verify.fuzz.findings import list_findings

    # `findings` prints a memory-mode file's replay with its mode, as `replay` prints it (it named none: helper-67)
    rows = {Path(row["path"]).name: row["replay"] for row in list_findings(tmp_path / "repro")}
    large = [replay for name, replay in rows.items() if name.endswith("-memory-large.json")]
    assert large and all(replay.endswith("--memory large") for replay in large), rows


def test_a_gate_of_memory_checks_alone_fails_on_a_plain_wrong_result_and_keeps_it(tmp_path, capsys):
    """Regression (helper-76's trial, 2026-12-08): `gate --checks recycled_memory canaries` passed a kernel whose
    outputs both checks saw wrong on fresh memory too (exit 0, no case file, the note naming the suite and the
    campaign, which that gate did not run). With neither in the gate, such a case is the memory check's finding."""
    assert _gate(tmp_path, "--kernel", "wrong-everywhere", "--checks", "canaries", "recycled_memory",
                 "--small-cases", "1") == 1
    results = _results(tmp_path)
    for check in ("canaries", "recycled_memory"):
        r = results[("wrong-everywhere", check)]
        assert r["status"] == "fail" and r["findings"], r
        assert any("a finding here, as this gate runs neither the suite nor the campaign" in line
                   for line in r["details"]), r["details"]
    kept = list((tmp_path / "repro").glob("*.json"))
    assert kept and all(main(["replay", str(f), "--device", "cpu", "--plugin", PLUGIN]) == 1 for f in kept), kept
