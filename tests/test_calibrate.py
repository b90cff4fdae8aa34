"""Calibration: the multiplier each case needs, the proposed table, and the command end to end."""

import json
import math

import torch

from jfa_verify.budgets import Budget, BudgetTable, default_table
from jfa_verify.calibrate import OutputStats, needed_multiplier, propose_table
from jfa_verify.cli import main
from jfa_verify.compare import OutputComparison


def _cmp(kernel_error, sdpa_error, floors):
    return OutputComparison("o", kernel_error, sdpa_error, 0.0, None, None, None, None, floors)


def test_needed_multiplier_is_the_floor_scale_at_which_the_case_passes_exactly():
    b = Budget(sdpa_factor=2.0, floor_ulps=4.0, lowp_ulps=1.0, acc_ulps=0.0)
    # excess over 2 x SDPA = 1.0 - 0.2 = 0.8; current floor = 4 * 0.1 + 1 * 0.4 = 0.8 -> exactly 1
    assert math.isclose(needed_multiplier(_cmp(1.0, 0.1, (0.1, 0.4, 5.0)), b), 1.0)
    assert needed_multiplier(_cmp(0.1, 0.1, (0.1, 0.0, 0.0)), b) == 0.0  # covered by SDPA alone
    assert needed_multiplier(_cmp(1.0, 0.0, (0.0, 0.0, 0.0)), b) == float("inf")


def test_propose_scales_floors_with_safety_and_minimum():
    current = default_table()
    stats = {("float32", "o"): OutputStats(needed=[0.2, 0.5], headroom=[0.1, 0.2]),
             ("float32", "dq"): OutputStats(needed=[0.0], headroom=[0.0])}
    new = propose_table(current, stats, safety=2.0, min_multiplier=0.1, provenance={"source": "test"})
    old_o, new_o = current.budget(torch.float32, "o"), new.budget(torch.float32, "o")
    assert new.version == current.version + 1
    assert math.isclose(new_o.floor_ulps, old_o.floor_ulps * 1.0) and new_o.sdpa_factor == old_o.sdpa_factor
    assert math.isclose(new.budget(torch.float32, "dq").acc_ulps, current.budget(torch.float32, "dq").acc_ulps * 0.1)
    assert new.budget(torch.bfloat16, "o") == current.budget(torch.bfloat16, "o")  # not measured: kept


def test_calibrate_command_writes_a_loadable_versioned_table(tmp_path, capsys):
    out, stats = tmp_path / "budgets.json", tmp_path / "stats.json"
    rc = main(["calibrate", "--device", "cpu", "--cases", "2", "--out", str(out), "--stats", str(stats)])
    text = capsys.readouterr().out
    assert rc == 0, text
    table = BudgetTable.load(out)
    assert table.version == default_table().version + 1
    prov = table.provenance
    assert prov["cases_per_dtype"] == 2 and prov["seeds"] == [0] and prov["torch"] == torch.__version__
    assert "Triton interpreter" in prov["device"]
    raw = json.loads(stats.read_text())
    assert set(raw["outputs"]) == {f"{d}/{o}" for d in ("float32", "bfloat16", "float16")
                                   for o in ("o", "lse", "dq", "dk", "dv")}
    assert "headroom p50" in text
