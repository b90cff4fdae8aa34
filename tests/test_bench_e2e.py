"""``benchmarks/bench_e2e.py`` on the CPU: the same code path as on a GPU, on tiny batches (issue 38, item 1)."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench_e2e(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_e2e

    return bench_e2e


@pytest.fixture
def wrong_kernel(monkeypatch):
    """A registered kernel whose O is wrong (O times 1.5), removed again after the test."""
    from jfa_verify.core.contract import validate_inputs
    from jfa_verify.oracles import reference_attention
    from jfa_verify.protocol import registry
    from jfa_verify.protocol.kernel import Capabilities

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    def attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal)
        out = reference_attention(problem, q, k, v)
        return (out["o"] * 1.5).to(q.dtype), out["lse"].float()

    @registry.register_kernel("e2e_wrong_o", capabilities=Capabilities(device_types=("cpu",)))
    def load():
        return attention

    return "e2e_wrong_o"


def test_cpu_quick_rows_ratios_host_share_and_wrong(bench_e2e, wrong_kernel, capsys, tmp_path):
    rc = bench_e2e.main(["--device", "cpu", "--quick", "--heads", "2", "--head-dims", "64",
                         "--kernels", f"triton_jfa,{wrong_kernel}", "--json", str(tmp_path / "e2e.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    rows = [line for line in out.splitlines() if re.match(r"\S+\s+(full|causal)\s+bf16\s+64 ", line)]
    jfa = [r for r in rows if " triton_jfa " in r]
    assert len(jfa) == 2, out  # causal and not
    for row in jfa:
        cells = re.findall(r"([\d.]+) +([\d.]+)x +(\d+)%", row)
        assert len(cells) == 2, row  # fwd and fwd+bwd: ms, ratio, host share
        for ms, ratio, share in cells:
            # (printed to 2 decimals: a loaded CPU can print 0.00x; the JSON below holds the exact ratio)
            assert float(ms) > 0 and math.isfinite(float(ratio)) and float(ratio) >= 0, row
            assert 0 <= int(share) <= 100, row
    wrong = [r for r in rows if f" {wrong_kernel} " in r]
    assert len(wrong) == 2 and all("WRONG" in r for r in wrong), out
    # no FA2 on the CPU: the peer is chosen and named (nested_sdpa; padded SDPA where it refuses causal)
    assert "no FA2 floor here" in out and "nested_sdpa (peer)" in out

    import json

    data = json.loads((tmp_path / "e2e.json").read_text())
    kernel_rows = [r for r in data["rows"] if r["kernel"] == "triton_jfa"]
    assert len(kernel_rows) == 2 and all(0 <= r[f"{m}_host_share"] <= 1 and math.isfinite(r[f"{m}_ratio"])
                                         and r[f"{m}_ratio"] > 0 for r in kernel_rows for m in ("fwd", "fwd_bwd"))
    assert {r["status"] for r in data["rows"] if r["kernel"] == wrong_kernel} == {"WRONG"}


def test_no_cuda_exits_2(bench_e2e, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench_e2e.main(["--quick"]) == 2
    assert "--device cpu" in capsys.readouterr().err


def test_batches_are_bench_gluons(bench_e2e):
    sys.modules.pop("bench_gluon", None)
    import bench_gluon

    assert bench_e2e.run_batches("cuda") == bench_gluon.bench_batches()
    assert list(bench_e2e.run_batches("cpu")) == list(bench_gluon.bench_batches())
