"""Calibration: records, the multiplier each case needs, fitting, held-out judging, the command end to end."""

import gzip
import json
import math
from pathlib import Path

import pytest
import torch

from jfa_verify.cli import main
from jfa_verify.judge.budgets import Budget, BudgetTable, default_table
from jfa_verify.workflows.calibrate import Record, evaluate, fit, needed_multiplier, read_records


def _rec(row, out, numbers, problems=None):
    return Record(row, "k", 0, {"max_seqlen_k": 5, "tokens_k": 9}, {out: numbers}, problems or {})


def test_needed_multiplier_is_the_floor_scale_at_which_the_case_passes_exactly():
    b = Budget(sdpa_factor=2.0, floor_ulps=4.0, lowp_ulps=1.0, acc_ulps=0.0)
    # excess over 2 x SDPA = 1.0 - 0.2 = 0.8; current floor = 4 * 0.1 + 1 * 0.4 = 0.8 -> exactly 1
    assert math.isclose(needed_multiplier((1.0, 0.1, 0.1, 0.4, 5.0), b), 1.0)
    assert needed_multiplier((0.1, 0.1, 0.1, 0.0, 0.0), b) == 0.0  # covered by SDPA alone
    assert needed_multiplier((1.0, 0.0, 0.0, 0.0, 0.0), b) == float("inf")


def test_fit_scales_floors_by_safety_times_worst_need_with_minimums():
    current = default_table()
    b = current.budget("float32", "o")
    floor = b.floor_ulps * 1e-6  # f1 = 1e-6, f2 = f3 = 0
    records = [_rec("float32", "o", (0.5 * floor, 0.0, 1e-6, 0.0, 0.0)),  # needs 0.5
               _rec("float32", "o", (0.2 * floor, 0.0, 1e-6, 0.0, 0.0)),  # needs 0.2
               _rec("float32", "dq", (0.0, 1.0, 1e-6, 0.0, 0.0))]  # SDPA covers it: needs 0
    new = fit(records, current, safety=2.0, min_multiplier=0.1, min_floor_ulps=0.0)
    assert new.version == current.version + 1
    assert math.isclose(new.budget("float32", "o").floor_ulps, b.floor_ulps * 1.0)
    assert new.budget("float32", "o").sdpa_factor == b.sdpa_factor
    dq = current.budget("float32", "dq")
    assert math.isclose(new.budget("float32", "dq").acc_ulps, dq.acc_ulps * 0.1)  # the minimum multiplier
    assert new.budget(torch.bfloat16, "o") == current.budget(torch.bfloat16, "o")  # not measured: kept
    # floor_ulps never below min_floor_ulps
    assert new.budget("float32", "dq").floor_ulps == pytest.approx(dq.floor_ulps * 0.1)
    floored = fit(records, current, safety=2.0, min_multiplier=0.01, min_floor_ulps=1.0)
    assert floored.budget("float32", "dq").floor_ulps == 1.0
    # the fitted table passes its own records with headroom 1 / safety at the worst case
    stats = evaluate(records, new)
    assert stats[("float32", "o")].failures == 0
    assert max(stats[("float32", "o")].headroom) == pytest.approx(0.5, rel=1e-9)


def test_fit_refuses_a_non_finite_record_and_evaluate_counts_it_as_a_failure():
    bad = _rec("bfloat16", "o", (float("inf"), 0.0, 1.0, 0.0, 0.0), problems={"o": "1 NaN value(s)"})
    stats = evaluate([bad], default_table())
    assert stats[("bfloat16", "o")].failures == 1
    with pytest.raises(ValueError, match="infinite allowance"):
        fit([bad], default_table())


def test_evaluate_judges_like_the_runner():
    """A record's rebuilt allowance is the one compare_output computed for the same numbers."""
    from jfa_verify.judge.compare import compare_output

    ref = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    got = (ref + torch.tensor([3e-3, 0.0, 0.0], dtype=torch.float64)).to(torch.bfloat16)
    sdpa = (ref + torch.tensor([0.0, 1e-3, 0.0], dtype=torch.float64)).to(torch.bfloat16)
    c = compare_output("o", got, sdpa, ref, torch.bfloat16, 0.7, 3.0)
    rec = _rec("bfloat16", "o", (c.kernel_error, c.sdpa_error, *c.floors))
    h = evaluate([rec], default_table())[("bfloat16", "o")].headroom[0]
    assert h == pytest.approx(c.headroom, rel=1e-12)


def test_records_survive_a_torn_last_line_and_read_gzip(tmp_path):
    r = _rec("float16", "dv", (1e-3, 1e-3, 1e-4, 0.0, 0.0))
    plain = tmp_path / "r.jsonl"
    plain.write_text(r.to_json() + "\n" + r.to_json()[:20])  # a writer killed mid-line
    packed = tmp_path / "r.jsonl.gz"
    with gzip.open(packed, "wt") as fh:
        fh.write(r.to_json() + "\n")
    got = read_records([plain, packed])
    assert got == [r, r]


def test_a_records_file_whose_only_line_is_not_json_is_named(tmp_path):
    """Regression (a new user's trial, 2026-12-05): a file whose one line was not JSON read as a torn last line and
    `report` said "no calibration records to plot", naming nothing; the line is now named."""
    from jfa_verify.core.errors import InvalidInput

    bad = tmp_path / "notes.jsonl"
    bad.write_text("these are not records\n")
    with pytest.raises(InvalidInput, match=r"notes\.jsonl:1: not JSON"):
        read_records([bad])


def test_calibrate_command_samples_fits_and_judges_a_holdout(tmp_path, capsys):
    fit_records, held = tmp_path / "fit.jsonl", tmp_path / "held.jsonl"
    out = tmp_path / "budgets.json"
    rc = main(["calibrate", "--device", "cpu", "--cases", "1", "--seed", "3", "--records", str(held), "--no-fit"])
    assert rc == 0
    assert len(read_records([held])) == 3  # one case per dtype
    rc = main(["calibrate", "--device", "cpu", "--cases", "1", "--seed", "4", "--records", str(fit_records),
               "--holdout", str(held), "--out", str(out), "--allow-few-cases"])
    text = capsys.readouterr().out
    assert rc == 0, text
    table = BudgetTable.load(out)
    assert table.version == default_table().version + 1
    prov = table.provenance
    assert prov["cases_per_row"] == {"bfloat16": 1, "float16": 1, "float32": 1}
    assert prov["seeds"] == [4] and prov["torch"] == torch.__version__ and prov["triton"]
    assert "Triton interpreter" in prov["device"]
    assert prov["holdout"]["files"] == ["held.jsonl"]
    assert set(prov["holdout"]["outputs"]) == {f"{d}/{o}" for d in ("float32", "bfloat16", "float16")
                                               for o in ("o", "lse", "dq", "dk", "dv")}
    assert "held-out" in text
    rec = json.loads(fit_records.read_text().splitlines()[0])
    assert set(rec["outputs"]) == {"o", "lse", "dq", "dk", "dv"} and len(rec["outputs"]["o"]) == 5


def test_calibrate_deadline_stops_sampling_and_keeps_the_records(tmp_path):
    import time

    records = tmp_path / "r.jsonl"
    t0 = time.monotonic()
    rc = main(["calibrate", "--device", "cpu", "--cases", "1000", "--deadline", "3", "--records", str(records),
               "--no-fit"])
    assert rc == 0
    assert time.monotonic() - t0 < 60  # 3000 drawn cases would take many minutes
    n = len(read_records([records]))
    assert 1 <= n < 100


def test_report_command_draws_both_pngs_and_rejects_missing_records(tmp_path, capsys):
    records = tmp_path / "r.jsonl"
    rows = [Record(row, "k", 0, {"max_seqlen_k": n}, {o: (1e-3 * n, 1e-3, 1e-4, 1e-3, 1e-2)
                                                     for o in ("o", "lse", "dq", "dk", "dv")})
            for row in ("float32", "bfloat16") for n in (1, 17, 300)]
    records.write_text("".join(r.to_json() + "\n" for r in rows))
    assert main(["report", str(records), "--out-dir", str(tmp_path / "png")]) == 0
    for name in ("error_vs_length.png", "headroom.png"):
        assert (tmp_path / "png" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "6 records" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


def test_sample_runs_fixed_cases_of_the_sampled_dtypes_first(tmp_path):
    from jfa_verify import Case
    from jfa_verify.core.device import select_device
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.workflows.calibrate import sample

    long_case = Case(kv_lengths=(70, 3), num_heads_q=2, num_heads_kv=1, head_dim=16, dtype="float32", name="long")
    other = Case(kv_lengths=(5,), dtype="float16", name="not sampled")
    path = tmp_path / "r.jsonl"
    done = sample(get_kernel("triton_jfa"), device=select_device("cpu"), dtypes=["float32"], cases_per_dtype=1,
                  seed=0, records=path, fixed_cases=[long_case, other])
    got = read_records([path])
    assert done["cases"] == {"float32": 2} and len(got) == 2
    assert got[0].case["max_seqlen_k"] == 70 and got[0].case["dtype"] == "float32"


def test_calibrate_rejects_an_unknown_suite(capsys):
    assert main(["calibrate", "--device", "cpu", "--suite", "nope", "--cases", "1", "--no-fit"]) != 0
    assert "nope" in capsys.readouterr().err


def test_read_records_names_the_file_and_line_of_a_bad_record(tmp_path):
    from jfa_verify.core.errors import InvalidInput

    good = _rec("float32", "o", (1e-6, 1e-6, 1e-7, 0.0, 0.0)).to_json()
    mid = tmp_path / "mid.jsonl"
    mid.write_text(f"{good}\ngarbage\n{good}\n")
    with pytest.raises(InvalidInput, match=r"mid.jsonl:2: not JSON"):
        read_records([mid])
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"row": 1}\n' + good + "\n")
    with pytest.raises(InvalidInput, match=r"wrong.jsonl:1: not a calibration record"):
        read_records([wrong])
    fake = tmp_path / "fake.jsonl.gz"
    fake.write_text(good)
    with pytest.raises(InvalidInput, match="cannot read records file"):
        read_records([fake])
    with pytest.raises(InvalidInput, match="not a file"):
        read_records([tmp_path])


def test_calibrate_rejects_bad_arguments_before_any_work(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    records = tmp_path / "r.jsonl"
    records.write_text(_rec("float32", "o", (1e-6, 1e-6, 1e-7, 0.0, 0.0)).to_json() + "\n")
    cases = [
        (["--cases", "0"], "argument --cases: 0 must be > 0"),
        (["--deadline", "-5"], "argument --deadline: -5 must be > 0"),
        (["--safety", "0"], "argument --safety: 0 must be > 0"),
        (["--from-records", str(records), "--holdout", str(tmp_path / "nope.jsonl")], "argument --holdout"),
        (["--from-records", str(records), "--holdout", str(empty)], "no records to judge"),
        (["--from-records", str(records), "--out", str(tmp_path / "no" / "dir" / "b.json")], "does not exist"),
        (["--from-records", str(records), "--out", str(tmp_path / "b.json")],
         "refusing to write a table fitted on too few"),
        # (a new user's --cases 12 sampled first and was refused after: known before any work)
        (["--cases", "12", "--records", str(tmp_path / "new.jsonl")], "--cases 12 < --min-cases 100"),
    ]
    for extra, message in cases:
        assert main(["calibrate", "--device", "cpu", *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err, (extra, err)
    assert not (tmp_path / "new.jsonl").exists()  # nothing sampled


def test_calibrate_fits_only_this_runs_samples(tmp_path, capsys):
    records, out = tmp_path / "r.jsonl", tmp_path / "b.json"
    old = _rec("bfloat16", "o", (1e-3, 1e-3, 1e-4, 0.0, 0.0))
    records.write_text(old.to_json() + "\n")
    assert main(["calibrate", "--device", "cpu", "--dtypes", "float32", "--cases", "1", "--records", str(records),
                 "--out", str(out), "--allow-few-cases"]) == 0
    prov = BudgetTable.load(out).provenance
    assert prov["cases_per_row"] == {"float32": 1}  # not the earlier bfloat16 record
    assert len(read_records([records])) == 2  # appended, nothing lost
    # the rows this fit left alone keep their constants and the provenance they came with
    assert prov["kept_rows"] == sorted(set(default_table().budgets) - {"float32"})
    assert prov["kept_rows_provenance"] == default_table().provenance
    assert BudgetTable.load(out).budgets["bfloat16"] == default_table().budgets["bfloat16"]


def test_malformed_budget_file_is_a_clear_error_naming_it(tmp_path):
    from jfa_verify.core.errors import InvalidInput

    bad = tmp_path / "b.json"
    bad.write_text('{"format": "jfa-verify-budgets/1"}')
    with pytest.raises(InvalidInput, match=r"b.json.*malformed budget file"):
        BudgetTable.load(bad)
    bad.write_text('{"format": "jfa-verify-budgets/1", "version": 3, "budgets": {"float32": {"o": '
                   '{"sdpa_factor": "2", "floor_ulps": 1, "lowp_ulps": 1, "acc_ulps": 1}}}}')
    with pytest.raises(InvalidInput, match="sdpa_factor=2"):
        BudgetTable.load(bad)


def test_report_and_mutants_reject_bad_arguments(tmp_path, capsys):
    records = tmp_path / "r.jsonl"
    records.write_text(_rec("float32", "o", (1e-6, 1e-6, 1e-7, 0.0, 0.0)).to_json() + "\n")
    assert main(["report", str(records), "--out-dir", str(records)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["mutants", "--device", "cpu", "--jobs", "0"]) == 2
    assert "argument --jobs: 0 must be > 0" in capsys.readouterr().err


def test_refloor_derives_the_runners_floors_again_and_keeps_the_measured_errors(tmp_path, capsys):
    """A record's floors are a function of its case: refloor gives back what the runner recorded,
    for a backward (bfloat16) and a forward-only (float8) case, and keeps (e, s) as measured."""
    from jfa_verify.cases.case import Case
    from jfa_verify.judge.compare import floor_terms
    from jfa_verify.oracles import reference_attention
    from jfa_verify.workflows.calibrate import refloor

    cases = [Case(kv_lengths=(9, 0, 4), dtype="bfloat16", num_heads_q=2, num_heads_kv=1, head_dim=16, seed=3),
             Case(kv_lengths=(12, 5), mode="cross", q_lengths=(1, 3), dtype="float8_e4m3fn", head_dim=16, seed=4)]
    truth, stale = [], []
    for case, row, outs in ((cases[0], "bfloat16", ("o", "lse", "dq", "dk", "dv")),
                            (cases[1], "float8_e4m3fn", ("o", "lse"))):
        t = case.materialize("cpu")
        do = t.do if "dq" in outs else None
        ref = reference_attention(case.problem(t), t.q, t.k, t.v, do=do)
        floors = {o: floor_terms(o, ref[o], row, float(ref.get(f"{o}_lowp", 0.0)), float(ref.get(f"{o}_acc", 0.0)))
                  for o in outs}
        assert floors["lse"][2] > 0  # the forward-only LSE accumulation term is there (it was once dropped)
        truth.append({o: (1e-3, 2e-4, *floors[o]) for o in outs})
        stale.append(Record(row, "k", 7, {"full": case.to_dict()}, {o: (1e-3, 2e-4, 0.0, 0.0, 0.0) for o in outs}))
    fresh = refloor(stale)
    for rec, want in zip(fresh, truth):
        for o, numbers in want.items():
            assert rec.outputs[o] == pytest.approx(numbers, rel=1e-12), o
    # the command writes them (gzip by suffix), refuses to overwrite its input, needs the full case
    src = tmp_path / "stale.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in stale))
    assert main(["refloor", str(src), "--out", str(tmp_path / "fresh.jsonl.gz")]) == 0
    assert [r.outputs for r in read_records([tmp_path / "fresh.jsonl.gz"])] == [r.outputs for r in fresh]
    assert main(["refloor", str(src), "--out", str(src)]) == 2
    assert "one of the input files" in capsys.readouterr().err
    assert main(["refloor", str(src), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["refloor", str(src), "--out", str(tmp_path / "x.jsonl"), "--device", "tpu"]) == 2
    assert "'tpu'" in capsys.readouterr().err
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text(src.read_text().replace('"lse"', '"lsx"'))
    assert main(["refloor", str(renamed), "--out", str(tmp_path / "y.jsonl")]) == 2
    assert "renamed.jsonl:1: not a calibration record" in capsys.readouterr().err
    bare = tmp_path / "bare.jsonl"
    bare.write_text(_rec("bfloat16", "o", (1.0, 0.0, 0.0, 0.0, 0.0)).to_json() + "\n")
    assert main(["refloor", str(bare), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "keeps no full case" in capsys.readouterr().err


def test_records_that_fail_the_table_they_are_measured_against_exit_1_with_a_warning(tmp_path, capsys):
    """Regression (a new user's trial): calibrating a wrong kernel fitted a table around its failures (a floor of
    5.7 million ulps) and exited 0. The table is still written, to read, but the exit is 1 and a warning says that
    those records fail the current table."""
    plugin = Path(__file__).parent / "packing_plugin.py"  # pack_long_rows: wrong on every sequence of > 20 keys
    rc = main(["calibrate", "--device", "cpu", "--plugin", str(plugin), "--kernel", "pack_long_rows", "--dtypes",
               "float32", "--cases", "12", "--seed", "1", "--records", str(tmp_path / "w.jsonl"), "--allow-few-cases",
               "--out", str(tmp_path / "b.json")])
    captured = capsys.readouterr()
    assert rc == 1 and (tmp_path / "b.json").is_file(), captured.out[-2000:] + captured.err[-2000:]
    assert "record output(s) fail budget table version" in captured.err and "replay such cases first" in captured.err
