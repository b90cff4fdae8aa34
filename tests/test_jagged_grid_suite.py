"""The ``jagged-grid`` suite (issue 37, 7b): ``ci/gpu_gluon_check.py``'s configuration grid as framework cases,
run by ``jfa-verify run --suite jagged-grid`` on any kernel and judged by the one tolerance rule.

On the CPU it runs on ``triton_jfa`` in Triton's interpreter (about 2 minutes with 2 jobs) and every configuration
of the grid must be judged (forward and backward) and pass; on the GPU
(``jfa-verify run --device cuda --kernel gluon_jfa --suite jagged-grid``) it is the check the script was.
"""

from __future__ import annotations

import json

import pytest

from jfa_verify.checks.suites import get_suite
from jfa_verify.protocol.registry import get_kernel

CONFIGURATIONS = {"boundary", "mixed", "empties", "one_token", "cross", "bq", "movielens", "long", "offset0",
                  "gqa8/2", "mqa8/1"}


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
@pytest.mark.parametrize("kernel", ["triton_jfa", "gluon_jfa"])
def test_the_grid_covers_every_configuration_of_the_gluon_check(device_type, kernel):
    suite = get_suite("jagged-grid", device_type, kernel=get_kernel(kernel))
    names = [c.name for c in suite.cases]
    assert len(names) == len(set(names)) == 36
    for part in CONFIGURATIONS:
        assert any(part in n for n in names), part
    modes = {c.mode for c in suite.cases}
    masks = {(c.causal, c.causal_alignment) for c in suite.cases}
    assert modes == {"self", "cross", "broadcast_q"}
    assert masks == {(False, "top_left"), (True, "top_left"), (True, "bottom_right")}
    assert {c.dtype for c in suite.cases} == {"bfloat16", "float16"}
    assert any(c.offsets_start for c in suite.cases)
    assert any(0 in c.kv_lengths for c in suite.cases) and any(1 in c.kv_lengths for c in suite.cases)
    if device_type == "cuda" and kernel == "gluon_jfa":  # the check's own lengths at gluon's 128-row tiles
        assert {c.head_dim for c in suite.cases} == {64, 128}
        assert suite.cases[0].kv_lengths == (1, 127, 128, 129, 255, 256, 257, 0, 64)
        assert any(c.kv_lengths == (4097,) for c in suite.cases)
        caps = get_kernel("gluon_jfa").capabilities
        assert all(caps.supports_head_dim(c.head_dim) for c in suite.cases)


def test_the_grid_runs_through_jfa_verify_run_on_triton_jfa_on_the_cpu_and_judges_every_output(tmp_path, capsys):
    # The grid is for the GPU (gluon_jfa runs nowhere else); on the CPU its two smallest cases (the empties rows)
    # show that the command runs it and judges all five outputs of each (the whole grid took 116 s on 2 cores, its
    # first five cases 35 s: too long for CI's budget).
    from jfa_verify.cli import main

    report = tmp_path / "grid.json"
    code = main(["run", "--device", "cpu", "--kernel", "triton_jfa", "--suite", "jagged-grid", "--no-progress",
                 "--filter", "empties", "--jobs", "1", "--report", str(report),
                 "--reproducers", str(tmp_path / "repro")])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    results = json.loads(report.read_text())["cases"]
    suite = get_suite("jagged-grid", "cpu", kernel=get_kernel("triton_jfa"))
    empties = [c.name for c in suite.cases if "empties" in c.name]
    assert len(empties) == 2 and [r["case"]["name"] for r in results] == empties
    for r in results:
        assert r["status"] == "pass", r
        judged = set(r["outputs"])
        assert {"o", "lse", "dq", "dk", "dv"} <= judged, (r["case"]["name"], judged)
    assert "2 passed" in out
