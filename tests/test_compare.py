"""Comparison and localization: the rule, non-finite handling, and (sequence, head, token, tile)."""

import math

import pytest
import torch

from jfa_verify import Case, compare_output, locate, validate_inputs
from jfa_verify.judge.budgets import default_table
from jfa_verify.protocol.kernel import TileSizes


def test_budget_allowance_is_the_rule_with_its_constants():
    from jfa_verify.judge.budgets import Budget

    b = Budget(sdpa_factor=2.0, floor_ulps=3.0, lowp_ulps=5.0, acc_ulps=7.0)
    assert b.allowance(0.5, (1.0, 10.0, 100.0)) == 1.0 + 3.0 + 50.0 + 700.0
    assert b.needed_multiplier(1.0 + 753.0 * 2, 0.5, (1.0, 10.0, 100.0)) == 2.0
    assert b.needed_multiplier(0.9, 0.5, (1.0, 10.0, 100.0)) == 0.0  # the SDPA term covers it
    assert b.needed_multiplier(1.5, 0.5, (0.0, 0.0, 0.0)) == float("inf")  # an excess with no floor


def test_allowance_is_twice_sdpa_error_plus_floor():
    ref = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    sdpa = torch.tensor([1.0, -2.0 + 0.01, 0.5], dtype=torch.bfloat16)
    eps = torch.finfo(torch.bfloat16).eps
    sdpa_err = abs(float(sdpa[1]) + 2.0)
    b = default_table().budget(torch.bfloat16, "o")
    allowance = b.allowance(sdpa_err, (eps * 2.0, 0.0, 0.0))
    good = torch.tensor([1.0, -2.0, 0.5 + 0.5 * allowance], dtype=torch.float64)
    bad = torch.tensor([1.0, -2.0, 0.5 + 1.5 * allowance], dtype=torch.float64)
    c_good = compare_output("o", good, sdpa, ref, torch.bfloat16)
    c_bad = compare_output("o", bad, sdpa, ref, torch.bfloat16)
    assert math.isclose(c_good.allowance, allowance, rel_tol=1e-9)
    assert c_good.passed and not c_bad.passed
    assert c_bad.worst_index == (2,) and math.isclose(c_bad.headroom, 1.5, rel_tol=1e-6)


def test_nan_fails_and_is_located():
    ref = torch.zeros(2, 3, dtype=torch.float64)
    got = torch.zeros(2, 3)
    got[1, 2] = float("nan")
    c = compare_output("o", got, got.nan_to_num(), ref, torch.float32)
    assert not c.passed and "1 NaN" in c.problem and c.worst_index == (1, 2)


def test_lse_minus_inf_must_match_exactly():
    ref = torch.tensor([[0.5, float("-inf")]], dtype=torch.float64)
    ok = compare_output("lse", torch.tensor([[0.5, float("-inf")]]), ref.float(), ref, torch.bfloat16)
    finite_instead = compare_output("lse", torch.tensor([[0.5, -1e30]]), ref.float(), ref, torch.bfloat16)
    wrong_sign = compare_output("lse", torch.tensor([[0.5, float("inf")]]), ref.float(), ref, torch.bfloat16)
    assert ok.passed
    assert not finite_instead.passed and "infinite" in finite_instead.problem
    assert not wrong_sign.passed


def test_broken_sdpa_does_not_widen_allowance():
    ref = torch.ones(4, dtype=torch.float64)
    sdpa = torch.full((4,), float("nan"))
    c = compare_output("o", ref.float() + 0.5, sdpa, ref, torch.float32)
    assert not c.passed


def test_locate_maps_rows_to_sequence_token_tile():
    case = Case(kv_lengths=(5, 40, 0, 3), mode="cross", q_lengths=(2, 70, 1, 0), head_dim=16, offsets_start=4)
    t = case.materialize()
    p = validate_inputs(*t.call_args())
    # q rows: seq0 4..5, seq1 6..75, seq2 76; k rows: seq0 4..8, seq1 9..48, seq3 49..51
    loc = locate(p, "o", (6 + 65, 1, 3), TileSizes(32, 16))
    assert (loc.sequence, loc.head, loc.token, loc.tile) == (1, 1, 65, 2)
    loc = locate(p, "lse", (0, 76), TileSizes(32, 16))
    assert (loc.sequence, loc.token, loc.tile) == (2, 0, 0)
    loc = locate(p, "dk", (9 + 33, 0, 0), TileSizes(32, 16))
    assert (loc.sequence, loc.token, loc.tile, loc.tile_kind) == (1, 33, 2, "BLOCK_N")
    loc = locate(p, "dv", (2, 0, 0), TileSizes(32, 16))
    assert loc.sequence is None and "outside every sequence" in loc.describe()



def test_rows_outside_every_sequence_are_named_by_row_in_the_localization_text():
    """Regression (issue 43, 5): a wrong row before offsets[0] read ``worst at outside every sequence, head 0`` and
    its spread ``sequences  of 2`` (an empty list)."""
    from jfa_verify.judge.localize import spread

    case = Case(kv_lengths=(3, 4), head_dim=16, offsets_start=2, num_heads_q=2, num_heads_kv=2)
    t = case.materialize()
    p = validate_inputs(*t.call_args())  # rows 0..1 lie before offsets[0] = 2, the sequences in rows 2..8
    assert (locate(p, "o", (1, 0, 3), TileSizes(32, 16)).describe()
            == "row 1, outside every sequence, head 0 (index [1, 0, 3])")
    assert (locate(p, "lse", (1, 0), TileSizes(32, 16)).describe()
            == "row 0, outside every sequence, head 1 (index [1, 0])")
    ref = torch.zeros(9, 2, 16)
    bad = ref.clone()
    bad[0, 1, 0] = bad[1, 1, 5] = 1.0
    assert spread(p, "o", bad, ref, 0.1) == ("wrong in heads 1 of 2; no sequence of 2; rows 0, 1 of 9 outside every "
                                             "sequence")
    bad[5, 0, 0] = 1.0  # and in sequence 1 (rows 5..8)
    assert spread(p, "o", bad, ref, 0.1) == ("wrong in heads 0, 1 of 2; sequences 1 of 2; rows 0, 1 of 9 outside every "
                                             "sequence")
    bad[:2] = 0
    assert spread(p, "o", bad, ref, 0.1) == "wrong in heads 0 of 2; sequences 1 of 2"

def test_locate_broadcast_dq_is_dense():
    t = Case(kv_lengths=(3, 4), mode="broadcast_q", broadcast_q_len=40).materialize()
    p = validate_inputs(*t.call_args())
    loc = locate(p, "dq", (35, 0, 0), TileSizes(32, 16))
    assert loc.sequence is None and loc.tile == 1 and "dense Q" in loc.describe()
    loc = locate(p, "o", (45, 0, 0), TileSizes(32, 16))
    assert (loc.sequence, loc.token) == (1, 5)


def test_gradient_floor_uses_term_scale_when_reference_is_exactly_zero():
    # Regression: fp32 cross-attention with one key per sequence; dQ is exactly 0 in float64 but
    # the kernel computes it as P * (dP - Delta) and landed at 1.15e-06 while SDPA landed at 3.0e-07.
    # A floor relative to max|dQ| = 0 failed it; the float32 accumulation floor follows the terms.
    ACC_ULPS = default_table().budget(torch.float32, "dq").acc_ulps
    from jfa_verify.oracles import reference_attention
    from tests.helpers import oracle

    t = Case(kv_lengths=(1, 0), mode="cross", q_lengths=(3, 0), dtype="float32", num_heads_q=4,
             num_heads_kv=2, head_dim=16, seed=3).materialize()
    ref = oracle(reference_attention, *t.call_args(), do=t.do)
    assert ref["dq"].abs().max() < 1e-12 and ref["dk"].abs().max() < 1e-12  # zero up to float64 rounding
    terms = float(ref["dq_acc"])
    # at least sm_scale * max|K| * (|dP| + |Delta|) with P = 1 and dP = Delta = dO . v
    dp = torch.einsum("ihd,jhd->hij", t.do[:3].double(), t.v[:1].double().repeat_interleave(2, dim=1)).abs()
    assert terms >= 0.25 * t.k[:1].double().abs().max().item() * 2 * dp.max().item() * (1 - 1e-12)
    sdpa = torch.full_like(ref["dq"], 3.0e-7)
    kernel = torch.full_like(ref["dq"], 1.15e-6)
    assert not compare_output("dq", kernel, sdpa, ref["dq"], torch.float32).passed
    c = compare_output("dq", kernel, sdpa, ref["dq"], torch.float32, acc_scale=terms)
    assert c.passed and math.isclose(c.allowance, 6.0e-7 + ACC_ULPS * torch.finfo(torch.float32).eps * terms,
                                     rel_tol=1e-6)
    # a real bug of a thousandth of the terms' size still fails
    big = torch.full_like(kernel, 1e-3 * terms)
    assert not compare_output("dq", big, sdpa, ref["dq"], torch.float32, acc_scale=terms).passed


def test_lowp_floor_covers_rounding_ds_where_keys_share_an_offset():
    # Regression: bf16 dQ with keys sharing a large offset (the "correlated" and "near_ties" values):
    # sum_j dS_ij = 0 cancels the offset exactly, but dS rounded to bf16 does not, so a FlashAttention
    # kernel lands far above torch's CPU SDPA, which keeps P and dS in float32.
    LOWP_ULPS = default_table().budget(torch.bfloat16, "dq").lowp_ulps
    from jfa_verify.oracles import reference_attention
    from tests.helpers import oracle

    ref = oracle(reference_attention, *(t := Case(kv_lengths=(9, 12), dtype="bfloat16", head_dim=16,
                                                  values="correlated", seed=5).materialize()).call_args(), do=t.do)
    ds_bound = float(ref["dq_lowp"])
    assert ds_bound > 0
    eps = torch.finfo(torch.bfloat16).eps
    # an error at the first-order size of rounding dS passes ...
    half = torch.full_like(ref["dq"], 0.5 * eps * ds_bound) + ref["dq"]
    assert compare_output("dq", half, ref["dq"].bfloat16(), ref["dq"], torch.bfloat16, lowp_scale=ds_bound).passed
    # ... one of three ulps of the bound does not
    three = torch.full_like(ref["dq"], (LOWP_ULPS + 2) * eps * ds_bound) + ref["dq"]
    assert not compare_output("dq", three, ref["dq"].bfloat16(), ref["dq"], torch.bfloat16, lowp_scale=ds_bound).passed


def test_budget_table_is_versioned_with_provenance_and_used():
    from jfa_verify.judge.budgets import Budget, BudgetTable

    table = default_table()
    assert table.version >= 1 and "date" in table.provenance and "source" in table.provenance
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for out in ("o", "lse", "dq", "dk", "dv"):
            assert isinstance(table.budget(dtype, out), Budget)
    # the runner's verdict follows the table: a stricter budget turns a pass into a fail
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    floor = table.budget(torch.float32, "o").floor_ulps * torch.finfo(torch.float32).eps * 2.0
    got = ref + 0.5 * floor  # half the table's floor: the table passes it
    loose = compare_output("o", got, ref.float(), ref, torch.float32)
    strict = compare_output("o", got, ref.float(), ref, torch.float32, budget=Budget(2.0, 0.0, 0.0, 0.0))
    assert loose.passed and not strict.passed
    assert BudgetTable.from_dict(table.to_dict()) == table  # round trip


def test_bad_budget_file_is_a_clear_error(tmp_path):
    from jfa_verify.core.errors import InvalidInput
    from jfa_verify.judge.budgets import BudgetTable

    bad = tmp_path / "b.json"
    bad.write_text('{"format": "something-else"}')
    with pytest.raises(InvalidInput, match="not a budget file"):
        BudgetTable.load(bad)
    with pytest.raises(InvalidInput, match="does not exist"):
        BudgetTable.load(tmp_path / "missing.json")


def test_tf32_row_measures_operand_rounding_in_tf32_units():
    """float32 inputs multiplied in TF32 are judged by the "float32-tf32" row, whose lowp and
    acc terms use TF32's unit roundoff 2^-10 instead of float32's 2^-23."""
    from jfa_verify.judge.budgets import PRECISIONS, precision_of

    assert precision_of(torch.float32, tf32=True) == "float32-tf32"
    assert precision_of(torch.bfloat16, tf32=True) == "bfloat16"  # TF32 only changes float32 inputs
    assert PRECISIONS["float32-tf32"].operand_eps == 2.0 ** -10
    ref = torch.tensor([1.0, -1.0], dtype=torch.float64)
    got = ref + 2e-3  # a TF32-sized error
    lowp, acc = 4.0, 4.0
    ieee = compare_output("o", got, ref.float(), ref, torch.float32, lowp, acc)
    tf32 = compare_output("o", got, ref.float(), ref, torch.float32, lowp, acc, precision="float32-tf32")
    assert not ieee.passed and tf32.passed
    assert tf32.floors[1] == pytest.approx(2.0 ** -10 * lowp) and ieee.floors[1] == pytest.approx(
        torch.finfo(torch.float32).eps * lowp)


def test_runner_judges_a_tf32_kernel_by_the_tf32_row():
    from jfa_verify import Case
    from jfa_verify.core.device import select_device
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.runner import run_case

    case = Case(kv_lengths=(9, 4), num_heads_q=2, num_heads_kv=1, head_dim=16, dtype="float32")
    dev = select_device("cpu")
    plain, tf32 = run_case(case, get_kernel("triton_jfa"), dev), run_case(case, get_kernel("triton_jfa_tf32"), dev)
    assert plain.status == tf32.status == "pass"
    a, b = {c.name: c for c in plain.comparisons}, {c.name: c for c in tf32.comparisons}
    # same float32 numbers under the interpreter, a wider allowance from the TF32 row
    assert b["o"].kernel_error == a["o"].kernel_error and b["o"].allowance > a["o"].allowance


def test_a_failure_names_the_heads_and_sequences_it_is_wrong_in():
    # a new user's trial: a GQA head map bug (h % H_kv) printed 51 failures, each naming its single worst element;
    # nothing said "heads 1 and 2 of 4 wrong, 0 and 3 right", which points at the head map at once
    import dataclasses

    from jfa_verify import Case, run_case
    from jfa_verify.judge.localize import spread
    from jfa_verify.protocol.kernel import Kernel
    from jfa_verify.protocol.registry import add_kernel, get_kernel

    base = get_kernel("triton_jfa")
    case = Case(kv_lengths=(5, 0, 9), num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float32")

    class HeadsSwapped:  # query heads 1 and 2 take each other's output: what an interleaved GQA map gives
        def launch(self, problem, q, k, v, q_off, k_off, *, instrument=False):
            run = base.impl.launch(problem, q, k, v, q_off, k_off, instrument=instrument)
            run.o = run.o[:, [0, 2, 1, 3]]
            return run

    kernel = add_kernel(Kernel("planted-heads-swapped", "planted", HeadsSwapped, dataclasses.replace(
        base.capabilities, backward=False), base.tile_sizes_fn))
    result = run_case(case, kernel, "cpu")
    assert result.status == "fail" and result.spreads["o"] == "wrong in heads 1, 2 of 4; sequences 0, 2 of 3"
    assert "      wrong in heads 1, 2 of 4; sequences 0, 2 of 3" in result.explain()
    assert result.to_dict()["outputs"]["o"]["spread"] == result.spreads["o"]
    tensors = case.materialize("cpu")
    problem = case.problem(tensors)
    ref = torch.zeros(3, 4)
    assert spread(problem, "lse", ref, ref, 1e-6) is None  # nothing wrong: nothing to say


def test_a_base_2_lse_gets_a_hint_and_other_failures_do_not(jfa_device):
    """Regression (a new user's trial): a kernel returning log2 LSE was reported as "lse: max abs error 0.613 ...
    kernel 1.9987, reference 1.3854", a ratio of exactly 1 / ln 2, with no word of it. The explanation now says so."""
    from pathlib import Path

    from jfa_verify import get_kernel, load_plugin, run_case

    load_plugin(str(Path(__file__).parent / "quality" / "mutant_plugin.py"))
    case = Case(kv_lengths=(17, 5, 33), num_heads_q=2, num_heads_kv=1, head_dim=16, dtype="float32")
    log2 = run_case(case, get_kernel("mutant-lse_log2"), jfa_device)
    assert log2.status == "fail" and "LSE in base 2" in log2.hints["lse"]
    assert "hint: the kernel's LSE times ln 2 is the reference's" in log2.explain()
    assert log2.to_dict()["outputs"]["lse"]["hint"] == log2.hints["lse"]
    other = run_case(case, get_kernel("mutant-kv_bound_minus_one"), jfa_device)
    assert other.status == "fail" and not other.hints  # (a wrong LSE that is not log2 gets none)
    assert not run_case(case, get_kernel("triton_jfa"), jfa_device).hints


def test_a_natural_lse_from_a_kernel_declaring_base_2_gets_the_other_hint():
    """Regression (a new user's trial): a kernel declaring Capabilities(lse_base='2') but returning the natural-log
    LSE (judged as its LSE times ln 2) failed with no hint; the base-2 slip had one."""
    import math

    from jfa_verify.judge.hints import hint

    ref = torch.tensor([[1.5, -2.0], [3.25, 0.75]], dtype=torch.float64)
    said = hint("lse", ref * math.log(2.0), ref, 1e-6)
    assert said is not None and "declares Capabilities(lse_base='2')" in said and "Drop the declaration" in said
    assert "LSE in base 2 (log2)?" in hint("lse", ref / math.log(2.0), ref, 1e-6)
    assert hint("lse", ref + 0.5, ref, 1e-6) is None
