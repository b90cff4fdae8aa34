"""benchmarks/bench_verify.py runs on the CPU: cases per minute and where a case's time goes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_bench_verify_short_cpu_run(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/bench_verify.py", "--device", "cpu", "--workers", "1",
                           "--pack", "1,6", "--seconds", "4", "--forward-only", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    row, packed = json.loads((tmp_path / "bench_verify.json").read_text())["rows"]
    # packed: every part of a launch is a verified case
    assert packed["pack"] == 6 and packed["cases"] >= packed["launches"] >= 1 and set(packed["statuses"]) == {"pass"}
    assert sum(packed["statuses"].values()) == packed["cases"]
    assert "packing buys" in proc.stdout and "launches" in proc.stdout
    assert row["pack"] == 1 and row["cases"] == row["launches"]
    assert row["workers"] == row["finished_workers"] == 1 and row["cases"] >= 1
    assert row["cases_per_minute"] == round(60 * row["cases"] / 4, 1)
    share = row["breakdown_share"]
    assert share["kernel"] > 0 and share["oracles"] > 0 and 0.5 < sum(share.values()) <= 1.001
    assert "cases/min" in proc.stdout
    assert row["compile_share"] is None and row["variants_built"] is None  # the interpreter builds no variant
    for r in (row, packed):  # the stages: ms per case and shares, which sum to the measured total
        stages = r["stages"]
        assert set(stages) == {"draw", "materialize", "validate", "kernel", "reference", "sdpa", "compare", "parts",
                               "invariants", "io", "ipc", "other"}
        assert stages["reference"]["ms_per_case"] > 0 and stages["sdpa"]["ms_per_case"] > 0
        assert sum(v["ms_per_case"] for v in stages.values()) == pytest.approx(r["mean_case_ms"], rel=0.02, abs=0.2)
        # (an honest check: "other" is what no stage timed; it stays small, and the timed stages never exceed the
        # wall time measured around them)
        named = sum(v["share"] for k, v in stages.items() if k != "other")
        assert 0.8 <= named <= 1.001 and stages["other"]["share"] <= 0.2
        assert r["breakdown_share"]["oracles"] == pytest.approx(stages["reference"]["share"] +
                                                                stages["sdpa"]["share"], abs=0.002)
        assert "stages, ms per case (share): " in proc.stdout and "reference " in proc.stdout
    assert row["stages"]["parts"]["ms_per_case"] == 0  # no launch of the unpacked row has parts
    if packed["cases"] > packed["launches"]:  # some launch held several parts: they were judged apart
        assert packed["stages"]["parts"]["ms_per_case"] > 0


def test_bench_verify_counts_the_variants_triton_builds(monkeypatch):
    # on a GPU a case's kernel time is mostly building new kernel variants until the mix's variants are cached
    # (H200, 2026-12-02: 4.3 s a case, "kernel 100%"): the benchmark counts them through Triton's JIT hooks
    import time

    from triton import knobs

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_verify
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    monkeypatch.setattr(knobs.runtime, "jit_cache_hook", None)
    monkeypatch.setattr(knobs.runtime, "jit_post_compile_hook", None)
    counts = bench_verify._compile_counter()
    assert counts == {"variants": 0, "seconds": 0.0}
    for _ in range(2):  # what Triton calls around each build (triton/runtime/jit.py, _do_compile)
        assert not knobs.runtime.jit_cache_hook(key="k", repr="r", fn=None, compile={}, is_manual_warmup=False,
                                                already_compiled=False)
        time.sleep(0.01)
        knobs.runtime.jit_post_compile_hook(key="k", repr="r", fn=None, compile={}, is_manual_warmup=False,
                                            already_compiled=False)
    assert counts["variants"] == 2 and 0.02 <= counts["seconds"] < 5


def test_bench_reference_times_both_forms_and_checks_they_agree():
    """benchmarks/bench_reference.py (the script behind the grouped reference's timings in docs/campaigns.md): both
    workloads, three timings each, and the grouped and one-at-a-time references agreeing."""
    import re

    # smaller workloads than the defaults (64 of the 256 Pareto sequences, 40 of the 150 campaign cases): the same
    # code paths, several groups each, in a quarter of the time (the one-at-a-time form took most of 32 s)
    proc = subprocess.run([sys.executable, "benchmarks/bench_reference.py", "--device", "cpu", "--repeats", "1",
                           "--sequences", "64", "--cases", "40"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for name in ("pareto-64", "campaign-mix"):
        line = next(x for x in proc.stdout.splitlines() if x.strip().startswith(name))
        assert re.search(r"grouped [\d.]+ ms, one sequence at a time [\d.]+ ms \(grouped [\d.]+x", line), line
        assert line.endswith("ok"), line


def test_bench_reference_judges_differences_relative_to_the_output_size():
    # regression: an absolute 1e-12 failed a float64 dK accumulator of 3e4 whose two summation orders differed by
    # 2.5e-11 (under one ulp per term); a real disagreement of 1e-9 at unit size must still fail
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_reference import largest_difference
    finally:
        sys.path.pop(0)
    big = torch.tensor([29922.313041607427, -1.0], dtype=torch.float64)
    assert largest_difference([{"dk_acc": big + 2.5e-11}], [{"dk_acc": big}]) < 1e-12
    unit = torch.tensor([0.5, float("-inf")], dtype=torch.float64)
    assert largest_difference([{"o": unit + torch.tensor([1e-9, 0.0], dtype=torch.float64)}], [{"o": unit}]) > 1e-12
    assert largest_difference([{"o": unit}], [{"o": unit}]) == 0.0


def test_bench_verify_refuses_bad_counts_before_starting_a_worker():
    # regression (new-user trial): --workers x and --seconds 0 ended in raw tracebacks (the latter after a worker ran)
    for bad, said in ((["--workers", "x"], "--workers 'x'"), (["--workers", "0"], "--workers '0'"),
                      (["--seconds", "0"], "--seconds 0"), (["--seconds", "nan"], "--seconds nan"),
                      (["--seconds", "inf"], "--seconds inf"), (["--warmup", "nan"], "--warmup nan")):
        proc = subprocess.run([sys.executable, "benchmarks/bench_verify.py", *bad], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_bench_reference_refuses_no_repeats_before_timing():
    # regression (new-user trial): --repeats 0 took the median of no timing, a raw traceback
    for bad in ("0", "-2"):
        proc = subprocess.run([sys.executable, "benchmarks/bench_reference.py", "--repeats", bad], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and f"--repeats {bad}: give 1 or more" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_bench_host_plan_times_the_plan_of_drawn_cases():
    """benchmarks/bench_host_plan.py (the measurement behind not caching host plans, docs/campaigns.md): the plan's
    time per case and its share of a given case time."""
    import re

    proc = subprocess.run([sys.executable, "benchmarks/bench_host_plan.py", "--device", "cpu", "--cases", "20",
                           "--case-ms", "200"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    mean = float(re.search(r"host plan median [\d.]+ ms, mean ([\d.]+) ms", proc.stdout).group(1))
    share = float(re.search(r"share of a verified case \(200 ms\): ([\d.]+)%", proc.stdout).group(1))
    assert mean > 0 and share == pytest.approx(100 * mean / 200, abs=0.01)
    bad = subprocess.run([sys.executable, "benchmarks/bench_host_plan.py", "--cases", "0"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--cases 0" in bad.stderr


def test_bench_gluon_batches_and_variants_without_a_gpu():
    """The issue's four batches, the variant grammar, and a clear refusal on a machine without CUDA."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_gluon
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    batches = bench_gluon.bench_batches()
    assert list(batches) == ["pareto-512", "one-mega-16384+255x64", "movielens-1024", "uniform-32"]
    assert len(batches["uniform-32"]) == 32 and all(1024 <= n <= 3072 for n in batches["uniform-32"])
    assert batches["one-mega-16384+255x64"] == [16384] + [64] * 255
    v = bench_gluon.parse_variant("fast:head_groups=8,dkdv=zigzag,dq_block_n=128")
    assert (v["name"], v["head_groups"], v["dkdv"], v["dq_block_n"], v["kernels"]) == ("fast", "8", "zigzag", "128",
                                                                                       None)
    assert bench_gluon.parse_variant("plain")["dkdv"] is None  # the host's own dK/dV plan
    for bad, word in (("x:foo=1", "foo"), ("x:dkdv=random", "random"), ("x:bwd_stages=abc", "abc"),
                      ("x:head_groups=0", "positive"), ("x:kernels=/nonexistent.py", "not a file")):
        with pytest.raises(ValueError, match=word):
            bench_gluon.parse_variant(bad)
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gluon.py"), "--variant", "x:foo=1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "unknown key 'foo'" in run.stderr
    twice = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gluon.py"), "--variant", "a",
                            "--variant", "a:dkdv=zigzag"], capture_output=True, text=True, timeout=120)
    assert twice.returncode == 2 and "its own non-empty name" in twice.stderr
