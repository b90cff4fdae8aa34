"""The packaged budget table is the reproducible fit of its recorded calibration, and passes the held-out cases.

The records (one per drawn case, raw errors and floors per output) are in
``docs/evidence/calibration-2026-11-29/``: H200 and CPU-interpreter cases, split by
Hypothesis seed into a fitting set and a held-out set. Regenerate the table with::

    jfa-verify calibrate --from-records $C/h200-fit.jsonl.gz $C/cpu-fit.jsonl.gz $C/cpu-fp8-fit.jsonl.gz \\
        --holdout $C/h200-holdout.jsonl.gz $C/cpu-holdout.jsonl.gz $C/cpu-fp8-holdout.jsonl.gz \\
        --against $C/budgets-v1.json --safety 4 --out jfa_verify/data/budgets.json
"""

from collections import Counter
from pathlib import Path

import pytest

from jfa_verify.budgets import BudgetTable, default_table
from jfa_verify.calibrate import evaluate, fit, read_records

EVIDENCE = Path(__file__).resolve().parents[1] / "docs" / "evidence" / "calibration-2026-11-29"


@pytest.fixture(scope="module")
def table():
    return default_table()


def test_packaged_table_is_the_fit_of_its_recorded_cases(table):
    prov = table.provenance
    assert table.version == 2
    records = read_records([EVIDENCE / name for name in prov["fitted_on"]])
    assert dict(Counter(r.row for r in records)) == prov["cases_per_row"]
    assert {r.device for r in records} == {"NVIDIA H200", "cpu (Triton interpreter)"}
    # the float8 row comes from the interpreter only (no H200 time was left for it)
    assert {r.device for r in records if r.row == "float8_e4m3fn"} == {"cpu (Triton interpreter)"}
    assert "NVIDIA H200" in prov["device"] and "2.11.0+cu130" in prov["torch"]
    refit = fit(records, BudgetTable.load(EVIDENCE / "budgets-v1.json"), safety=prov["safety"],
                min_multiplier=prov["min_multiplier"], min_floor_ulps=prov["min_floor_ulps"])
    assert set(refit.budgets) == set(table.budgets)
    for row, outputs in table.budgets.items():
        for out, budget in outputs.items():
            assert refit.budget(row, out) == pytest.approx(budget), (row, out)


def test_packaged_table_has_zero_false_failures_on_the_held_out_cases(table):
    held = read_records([EVIDENCE / name for name in table.provenance["holdout"]["files"]])
    stats = evaluate(held, table)
    rows = {row for row, _ in stats}
    assert rows == {"float32", "float32-tf32", "bfloat16", "float16", "float8_e4m3fn"}
    for (row, out), st in stats.items():
        assert st.failures == 0, f"{row}/{out}: {st.failures} false failures, worst headroom {max(st.headroom)}"
        assert max(st.headroom) < 1.0
    # every correct-kernel case of the H200 held-out set is a sample (none was dropped)
    h200 = Counter(r.row for r in held if r.device == "NVIDIA H200")
    assert min(h200.values()) >= 300 and sum(h200.values()) >= 3000
    recorded = table.provenance["holdout"]["outputs"]
    for (row, out), st in stats.items():
        assert recorded[f"{row}/{out}"]["cases"] == len(st.headroom)
