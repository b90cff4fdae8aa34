"""MXFP8 calls: float8 e4m3 inputs with E8M0 block scales (one per 32 elements of the head dim).

Expected values are built here from the definition (OCP MX v1.0: E8M0 ``e`` stands for ``2^(e - 127)``), element
by element, independently of :mod:`jfa_verify.core.mxfp8`.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from jfa_verify import BlockScales, Capabilities, InvalidInput, validate_call, validate_inputs
from jfa_verify.core.conventions import P_QUANTIZATIONS
from jfa_verify.core.mxfp8 import dequantize, e8m0_to_float

F8 = torch.float8_e4m3fn
# two sequences of 5 and 3 tokens, H = 2 heads, D = 64 (two scale blocks), D_v = 32 (one)
OFF = torch.tensor([0, 5, 8], dtype=torch.int32)


def _inputs(seed=0, d=64, dv=32, rows=8, lo=120, hi=135):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, 2, d, generator=g).to(F8)
    k = torch.randn(rows, 2, d, generator=g).to(F8)
    v = torch.randn(rows, 2, dv, generator=g).to(F8)
    scales = BlockScales(*(torch.randint(lo, hi, (rows, 2, x.shape[2] // 32), generator=g, dtype=torch.uint8)
                           for x in (q, k, v)))
    return q, k, v, scales


def test_valid_call_keeps_its_scales_on_the_problem_and_call_shape():
    q, k, v, s = _inputs()
    p = validate_inputs(q, k, v, OFF, OFF, block_scales=s)
    assert p.block_scales is s and p.call_shape().block_scales is s
    assert validate_call(q, k, v, OFF, OFF, block_scales=s).block_scales is s
    assert validate_inputs(q, k, v, OFF, OFF).block_scales is None  # plain float8 calls are unchanged


def test_dequantize_is_the_definition_element_by_element():
    q, _, _, s = _inputs(seed=1)
    got = dequantize(q, s.q)
    assert got.dtype == torch.float64
    for t in (0, 7):
        for h in (0, 1):
            for d in (0, 31, 32, 63):
                want = float(q[t, h, d].to(torch.float64)) * math.ldexp(1.0, int(s.q[t, h, d // 32]) - 127)
                assert got[t, h, d].item() == want
    ends = e8m0_to_float(torch.tensor([0, 127, 254, 255], dtype=torch.uint8))
    assert ends[:3].tolist() == [2.0 ** -127, 1.0, 2.0 ** 127] and math.isnan(ends[3].item())


@pytest.mark.parametrize("change, words", [
    (lambda q, k, v, s: (q, k, v, (s.q, s.k, s.v)), "is not a jfa_verify.BlockScales"),
    (lambda q, k, v, s: tuple(x.to(torch.bfloat16) for x in (q, k, v)) + (s,),
     "q.dtype=torch.bfloat16, but block_scales need float8_e4m3fn data"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q.to(torch.int32), s.k, s.v)), "block_scales.q.dtype=torch.int32"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q, s.k[:, :, :1], s.v)), "block_scales.k.shape=(8, 2, 1)"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q, s.k, s.v[:7])), "block_scales.v.shape=(7, 2, 1)"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q, s.k, s.v.tolist())), "block_scales.v is a list"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q, s.k, torch.where(s.v == s.v[3, 1, 0], 255, s.v)
                                              .to(torch.uint8))), "= 255, the E8M0 encoding of NaN"),
])
def test_bad_scales_are_refused_with_the_value_and_the_fix(change, words):
    q, k, v, s = change(*_inputs())
    with pytest.raises(InvalidInput) as err:
        validate_inputs(q, k, v, OFF, OFF, block_scales=s)
    assert words in str(err.value)


def test_nan_scale_names_its_element():
    q, k, v, s = _inputs()
    bad = s.k.clone()
    bad[6, 1, 1] = 255
    with pytest.raises(InvalidInput, match=r"block_scales\.k\[6, 1, 1\] = 255.*127 for a scale of 1"):
        validate_inputs(q, k, v, OFF, OFF, block_scales=BlockScales(s.q, bad, s.v))
    # validate_call reads no value: the NaN scale is found only by validate_inputs
    assert validate_call(q, k, v, OFF, OFF, block_scales=BlockScales(s.q, bad, s.v)).block_scales is not None


def test_head_dim_not_a_multiple_of_32_names_the_padding():
    q, k, v, _ = _inputs(d=48, dv=32)
    s = BlockScales(torch.full((8, 2, 1), 127, dtype=torch.uint8), torch.full((8, 2, 1), 127, dtype=torch.uint8),
                    torch.full((8, 2, 1), 127, dtype=torch.uint8))
    with pytest.raises(InvalidInput, match="q's head dim 48 is not a multiple of 32.*pad the head dim to 64"):
        validate_inputs(q, k, v, OFF, OFF, block_scales=s)


@pytest.mark.skipif(not torch.backends.mps.is_available() and not torch.cuda.is_available(),
                    reason="needs a second device type")
def test_scales_on_another_device_are_refused():  # pragma: no cover - no second device on CI
    q, k, v, s = _inputs()
    other = "cuda" if torch.cuda.is_available() else "mps"
    with pytest.raises(InvalidInput, match=r"block_scales\.q is on"):
        validate_inputs(q, k, v, OFF, OFF, block_scales=BlockScales(s.q.to(other), s.k, s.v))


def test_capabilities_declare_mxfp8_by_its_p_rule():
    q, k, v, s = _inputs()
    p = validate_inputs(q, k, v, OFF, OFF, block_scales=s)
    plain = Capabilities(dtypes=(F8,), backward=False)
    assert plain.mxfp8 is None
    assert "MXFP8 inputs (block_scales) not supported" in plain.unsupported_reason(p)
    assert plain.unsupported_reason(validate_inputs(q, k, v, OFF, OFF)) is None  # plain float8 still runs
    mx = Capabilities(dtypes=(F8,), backward=False, mxfp8="e4m3")
    assert mx.unsupported_reason(p) is None
    assert P_QUANTIZATIONS["e4m3"].precision == "mxfp8" and "2^8" in P_QUANTIZATIONS["e4m3"].description
    with pytest.raises(InvalidInput,
                       match=r"mxfp8='bf16' is not a P-quantization rule; pass one of \['bfloat16', 'e4m3'\]"):
        Capabilities(mxfp8="bf16")
    with pytest.raises(InvalidInput, match="mxfp8='e4m3' needs torch.float8_e4m3fn in dtypes"):
        Capabilities(mxfp8="e4m3")


# ----------------------------------------------------------------------------- oracles and budgets


def _problem_pair(seed=2, lo=120, hi=135):
    """An MXFP8 call (self-attention, causal) and the float32 call on the values it stands for, built here."""
    q, k, v, s = _inputs(seed=seed, lo=lo, hi=hi)
    deq = []
    for x, sc in ((q, s.q), (k, s.k), (v, s.v)):
        factor = torch.tensor([[[math.ldexp(1.0, int(e) - 127) for e in sc[t, h].tolist() for _ in range(32)]
                                for h in range(x.shape[1])] for t in range(x.shape[0])], dtype=torch.float64)
        deq.append((x.to(torch.float64) * factor).to(torch.float32))  # exact: scales 2^-7..2^7 keep normals
    mx = validate_inputs(q, k, v, OFF, OFF, causal=True, block_scales=s)
    plain = validate_inputs(*deq, OFF, OFF, causal=True, sm_scale=mx.sm_scale)
    return (mx, (q, k, v)), (plain, tuple(deq)), s


def test_references_see_the_dequantized_values_exactly():
    from jfa_verify.oracles import padded_sdpa_attention, reference_attention
    from jfa_verify.oracles.blockwise import blockwise_attention

    (mx, inputs), (plain, deq), _ = _problem_pair()
    got, want = reference_attention(mx, *inputs), reference_attention(plain, *deq)
    for name in ("o", "lse", "o_lowp", "o_acc", "lse_acc"):
        assert torch.equal(got[name], want[name]), name
    assert got["o"].abs().max() > 0.01  # not a trivially zero output
    sdpa = padded_sdpa_attention(mx, *inputs)
    sdpa_plain = padded_sdpa_attention(plain, *(x.to(torch.bfloat16) for x in deq))
    assert sdpa["o"].dtype == torch.bfloat16 and torch.equal(sdpa["o"], sdpa_plain["o"])
    assert torch.allclose(blockwise_attention(mx, *inputs)["o"], want["o"], rtol=0, atol=1e-12)


def test_mxfp8_budget_row_is_fitted_falls_back_to_float8_and_catches_a_wrong_scale():
    from jfa_verify.judge.budgets import PRECISIONS, BudgetTable, default_table, precision_of
    from jfa_verify.judge.compare import compare_output, reference_scales
    from jfa_verify.oracles import padded_sdpa_attention, reference_attention

    assert precision_of(F8, block_scaled=True) == "mxfp8"
    assert PRECISIONS["mxfp8"] == PRECISIONS["float8_e4m3fn"]
    table = default_table()
    assert "mxfp8" in table.budgets and table.budget("mxfp8", "o") != table.budget(F8, "o")  # its own fit (v4)
    without = BudgetTable(table.version, {}, {row: b for row, b in table.budgets.items() if row != "mxfp8"})
    assert without.budget("mxfp8", "o") == table.budget(F8, "o")  # a table with no mxfp8 row: the float8 one
    with pytest.raises(InvalidInput, match="block_scaled=True needs float8_e4m3fn inputs"):
        precision_of(torch.bfloat16, block_scaled=True)

    (mx, inputs), _, s = _problem_pair(seed=3, lo=125, hi=130)  # scales 2^-2..2^2: logits of a few units
    ref, sdpa = reference_attention(mx, *inputs), padded_sdpa_attention(mx, *inputs)

    def judged(o):
        return compare_output("o", o, sdpa["o"], ref["o"], F8, *reference_scales(ref, "o"), precision="mxfp8")

    assert judged(ref["o"].to(torch.bfloat16)).passed  # the exact answer, stored in bf16
    # V read with the scales of the key row before it (a neighbour's scales)
    wrong_v = BlockScales(s.q, s.k, torch.roll(s.v, 1, dims=0))
    bad = reference_attention(validate_inputs(*inputs, OFF, OFF, causal=True, block_scales=wrong_v), *inputs)
    verdict = judged(bad["o"].to(torch.bfloat16))
    assert not verdict.passed and verdict.kernel_error > 2 * verdict.allowance
    # Q's second block read with the first block's scale (scales per row, not per 32-element block)
    per_row = BlockScales(s.q[:, :, :1].expand(-1, -1, 2).contiguous(), s.k, s.v)
    bad = reference_attention(validate_inputs(*inputs, OFF, OFF, causal=True, block_scales=per_row), *inputs)
    verdict = judged(bad["o"].to(torch.bfloat16))
    assert not verdict.passed and verdict.kernel_error > 2 * verdict.allowance


# ----------------------------------------------------------------------------- cases


PLUGIN = __import__("pathlib").Path(__file__).resolve().parent / "mxfp8_plugin.py"


def _mx_case(pattern="random", **fields):
    from jfa_verify import Case

    base = dict(kv_lengths=(7, 0, 12), dtype="float8_e4m3fn", head_dim=64, head_dim_v=32, num_heads_q=2,
                num_heads_kv=1, seed=5)
    return Case(**{**base, **fields, "block_scaling": {"pattern": pattern}})


def test_case_json_round_trips_and_replays_the_same_scales():
    from jfa_verify import Case

    case = _mx_case(offsets_start=3)
    again = Case.from_json(case.to_json())
    assert again == case and again.case_id() == case.case_id()
    assert case.to_dict()["block_scaling"] == {"pattern": "random"} and "mxfp8=random" in case.describe()
    a, b = case.materialize(), again.materialize()
    for name in ("q", "k", "v"):
        assert torch.equal(getattr(a.block_scales, name), getattr(b.block_scales, name))
    assert a.block_scales.k.shape == (22, 1, 2) and a.block_scales.v.shape == (22, 1, 1)  # 3 rows before offsets
    assert case.problem(a).block_scales is a.block_scales
    plain = Case(kv_lengths=(7, 0, 12), dtype="float8_e4m3fn")
    assert "block_scaling" not in plain.to_dict() and plain.materialize().block_scales is None


def test_bad_scaling_fields_are_refused_at_construction():
    with pytest.raises(InvalidInput, match="block_scaling.pattern='huge' is not one of"):
        _mx_case("huge")
    with pytest.raises(InvalidInput, match="needs dtype='float8_e4m3fn' and head dims that are multiples of 32"):
        _mx_case(dtype="bfloat16")
    with pytest.raises(InvalidInput, match="head_dim_v=48"):
        _mx_case(head_dim_v=48)
    with pytest.raises(InvalidInput, match=r"is not an object like \{\"pattern\""):
        _mx_case().__class__(kv_lengths=(3,), block_scaling="random")


def test_patterns_draw_what_they_say():
    from jfa_verify.cases.scaling import Scaling

    def drawn(pattern):
        t = _mx_case(pattern).materialize()
        return t, t.block_scales

    t, s = drawn("unit")
    assert all(bool((x == 127).all()) for x in (s.q, s.k, s.v))
    t, s = drawn("random")
    assert all(int(x.min()) >= 123 and int(x.max()) <= 131 for x in (s.q, s.k, s.v)) and len(s.q.unique()) > 3
    t, s = drawn("extremes")
    assert set(s.q[:, :, 0].unique().tolist()) <= set(range(18, 22))  # even block: Q low, K high
    assert set(s.k[:, :, 0].unique().tolist()) <= set(range(233, 237))
    assert set(s.q[:, :, 1].unique().tolist()) <= set(range(233, 237))
    assert set(s.v[:, :, 0].unique().tolist()) <= set(range(220, 224))
    for x, sc in ((t.q, s.q), (t.k, s.k), (t.v, s.v)):
        d = dequantize(x, sc, torch.bfloat16)
        assert bool(torch.isfinite(d).all()) and torch.equal(d.double(), dequantize(x, sc))  # exact in bf16
    t, s = drawn("zero_blocks")
    blocks = t.q.to(torch.float32).reshape(*t.q.shape[:2], 2, 32)
    zero = (blocks == 0).all(-1)
    assert zero.any() and set(s.q[zero].unique().tolist()) <= {0, 254}
    t, s = drawn("outlier")
    for x in (t.q, t.k, t.v):
        blocks = x.to(torch.float32).reshape(*x.shape[:2], -1, 32)
        assert bool(((blocks.abs() == 448).sum(-1) >= 1).all())
    assert Scaling.of({"pattern": "unit"}) == Scaling("unit")


def test_packed_case_draws_each_parts_scales_as_alone():
    from jfa_verify import Case

    a, b = _mx_case(kv_lengths=(5, 9), seed=1), _mx_case(kv_lengths=(4,), seed=2)
    packed = Case.pack([a, b]).materialize().block_scales
    alone = [c.materialize().block_scales for c in (a, b)]
    for name in ("q", "k", "v"):
        assert torch.equal(getattr(packed, name), torch.cat([getattr(s, name) for s in alone]))


def test_scaling_dimension_is_drawn_for_mxfp8_kernels_only():
    from jfa_verify import get_kernel, load_plugin
    from jfa_verify.cases.construct import build_case
    from jfa_verify.cases.dimensions import Target, dimension
    from jfa_verify.cases.pairs import _has

    load_plugin(str(PLUGIN))
    target = Target(get_kernel("mxfp8_ref"), device_type="cpu")
    for pattern in ("unit", "random", "extremes", "zero_blocks", "outlier"):
        case = build_case({"scaling": pattern}, target)
        assert case.block_scaling.pattern == pattern and case.dtype == "float8_e4m3fn"
    plain = get_kernel("triton_jfa").capabilities
    assert not _has("scaling", plain) and _has("scaling", get_kernel("mxfp8_ref").capabilities)
    assert dimension("scaling").support("random", plain) == "the kernel has no MXFP8 path (mxfp8=None)"
    assert build_case({"scaling": "random"}, Target(get_kernel("triton_jfa"), device_type="cpu")) is None


def test_strategy_draws_scales_only_for_mxfp8_kernels():
    from hypothesis import given, settings

    from jfa_verify import get_kernel, load_plugin
    from jfa_verify.strategies import cases

    load_plugin(str(PLUGIN))
    seen = set()

    @settings(max_examples=25, deadline=None, database=None)
    @given(cases(kernel=get_kernel("mxfp8_ref"), device_type="cpu", mxfp8=True), cases(device_type="cpu"))
    def check(mx, dense):
        assert mx.block_scaling is not None and mx.head_dim % 32 == 0 and mx.dtype == "float8_e4m3fn"
        assert dense.block_scaling is None
        seen.add(mx.block_scaling.pattern)

    check()
    assert len(seen) >= 3


def test_suite_cases_pass_the_exact_plugin_and_fail_planted_scale_bugs():
    from jfa_verify import get_kernel, load_plugin, run_case
    from jfa_verify.cases.construct import build_case
    from jfa_verify.cases.dimensions import Target

    load_plugin(str(PLUGIN))
    target = Target(get_kernel("mxfp8_ref"), device_type="cpu")
    # two blocks along D (per-row and per-block scales differ), GQA (K/V scales per KV head)
    built = [dataclasses.replace(build_case({"scaling": p, "heads": "gqa_pow2", "batch": "few", "mode": "self"},
                                            target, seed=1), head_dim=64)
             for p in ("random", "extremes", "zero_blocks", "outlier")]
    assert all(c.num_heads_q > c.num_heads_kv > 0 and c.batch >= 2 for c in built)
    for name, wants in (("mxfp8_ref", "pass"), ("mxfp8_ref_per_row_scale", "fail"),
                        ("mxfp8_ref_neighbour_scales", "fail"), ("mxfp8_ref_v_unscaled", "fail")):
        statuses = [run_case(c, get_kernel(name), "cpu").status for c in built]
        if wants == "pass":
            assert statuses == ["pass"] * len(built), statuses
        else:
            assert statuses.count("fail") >= 3, (name, statuses)


# ----------------------------------------------------------------------------- triton_jfa_mxfp8 (Triton interpreter)


TRITON_PLUGIN = __import__("pathlib").Path(__file__).resolve().parent / "mxfp8_triton_plugin.py"


@pytest.fixture(scope="module")
def dev(interpreter_device):
    return interpreter_device


def _tiny(pattern, causal=False, **fields):
    # lengths past one 32 x 16 CPU tile, an empty sequence, GQA, two scale blocks along D and D_v
    return _mx_case(pattern, kv_lengths=(17, 0, 5, 33), num_heads_q=4, num_heads_kv=2, head_dim=64, head_dim_v=64,
                    causal=causal, seed=7, **fields)


def test_triton_mxfp8_passes_every_scale_pattern(dev):
    from jfa_verify import get_kernel, run_case

    kernel = get_kernel("triton_jfa_mxfp8")
    cases = [_tiny("random", causal=True), _tiny("extremes"), _tiny("zero_blocks", causal=True),
             _tiny("outlier", mode="cross", q_lengths=(9, 3, 0, 20))]
    for case in cases:
        result = run_case(case, kernel, dev)
        assert result.status == "pass", result.explain()
        assert [c.name for c in result.comparisons] == ["o", "lse"]  # forward only


def test_a_block_scaled_case_without_query_rows_is_judged(dev):
    # regression: judging each sequence reshaped the no-row outputs with reshape(0, -1), and every such case was an
    # error (seen in a CPU calibration sample, 2026-12-05); no rows at all, then keys without queries
    from jfa_verify import get_kernel, run_case
    from jfa_verify.judge.compare import segment_verdict_terms

    kernel = get_kernel("triton_jfa_mxfp8")
    for q_lengths, kv_lengths in [((0, 0), (0, 0)), ((0, 0), (1, 0))]:
        case = _mx_case("unit", mode="cross", q_lengths=q_lengths, kv_lengths=kv_lengths, num_heads_q=4,
                        num_heads_kv=1, head_dim=64, head_dim_v=64, seed=3)
        result = run_case(case, kernel, dev)
        assert result.status == "pass", result.explain()
    empty = torch.zeros(0, 4, 64, dtype=torch.float64)
    terms = segment_verdict_terms(empty, empty, empty, torch.zeros(0, dtype=torch.long), 2)
    assert torch.equal(terms, torch.zeros(2, 4, dtype=torch.float64))


def test_triton_mxfp8_public_call_matches_the_reference_and_refuses_bad_scales(dev):
    from jfa_verify import get_kernel
    from jfa_verify.oracles import reference_attention

    kernel, case = get_kernel("triton_jfa_mxfp8"), _tiny("extremes", causal=True)
    t = case.materialize(dev)
    o, lse = kernel(*t.call_args(), causal=True, block_scales=t.block_scales)
    ref = reference_attention(case.problem(t), t.q, t.k, t.v)
    assert o.dtype == torch.bfloat16 and ref["o"].abs().max() > 2.0 ** 80  # V's scales reach 2^93..2^96
    # per 32-column block of V (2^93.. in even blocks, 2^-97.. in odd ones): within e4m3's 2^-4 of the block's size
    err = (o.double() - ref["o"]).abs().reshape(*o.shape[:2], 2, 32).amax((0, 3))
    size = ref["o"].abs().reshape(*o.shape[:2], 2, 32).amax((0, 3))
    assert bool((err <= size / 16).all()) and bool((size[:, 1] < 2.0 ** -60).all())
    # the public call and the framework's launch are one computation
    run = kernel.run(case.problem(t), *t.call_args(), sm_scale=None)
    assert torch.equal(run.o, o) and torch.equal(run.lse, lse)
    bad = t.block_scales.v.clone()
    bad[0, 0, 0] = 255
    with pytest.raises(InvalidInput, match=r"block_scales\.v\[0, 0, 0\] = 255"):
        kernel(*t.call_args(), block_scales=BlockScales(t.block_scales.q, t.block_scales.k, bad))
    # kernels without an MXFP8 path report such cases unsupported
    assert get_kernel("triton_jfa_fp8").unsupported_reason(case.problem(t)) == (
        "MXFP8 inputs (block_scales) not supported (Capabilities.mxfp8=None: no MXFP8 path)")


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")  # the interpreter's NumPy, on a bug
@pytest.mark.parametrize("mutant", ["k_scale_per_row", "q_scale_per_row", "v_scale_per_row", "kv_neighbour_scales",
                                    "p_wrong_scale", "kv_scale_rows_by_query_heads"])
def test_planted_triton_scale_bugs_are_caught(dev, mutant):
    from jfa_verify import get_kernel, load_plugin, run_case

    load_plugin(str(TRITON_PLUGIN))
    result = run_case(_tiny("extremes"), get_kernel(f"mxfp8-mutant-{mutant}"), dev)
    assert result.status == "fail", result.explain()
    worst = max(c.kernel_error / c.allowance for c in result.comparisons if c.allowance > 0)
    assert worst > 2  # well past the allowance, not a near miss


def test_dense_peer_on_dequantized_inputs_passes(dev):
    from jfa_verify import get_kernel, load_plugin, run_case
    from jfa_verify.protocol.dequantizing import DequantizedMXFP8

    load_plugin(str(PLUGIN))
    peer = get_kernel("mxfp8_dequant_triton")
    case = _tiny("extremes", causal=True)
    result = run_case(case, peer, dev)
    assert result.status == "pass" and [c.name for c in result.comparisons] == ["o", "lse"], result.explain()
    # a wrong dequantization (V read unscaled) makes the same peer fail: the pass above is not vacuous
    unscaled = DequantizedMXFP8(get_kernel("triton_jfa").impl, peer.capabilities)
    t = case.materialize(dev)
    o, _ = unscaled(*t.call_args(), causal=True, block_scales=BlockScales(t.block_scales.q, t.block_scales.k,
                                                                          torch.full_like(t.block_scales.v, 127)))
    o_right, _ = peer(*t.call_args(), causal=True, block_scales=t.block_scales)
    assert o.dtype == o_right.dtype == torch.bfloat16 and o_right.abs().max() > 1e20 * o.abs().max()
    with pytest.raises(InvalidInput, match="dtype=torch.float8_e4m3fn is not a dense dtype"):
        DequantizedMXFP8(lambda *a, **k: None, peer.capabilities, dtype=F8)


def test_calibration_records_mxfp8_cases_in_their_own_row(dev, tmp_path):
    from jfa_verify import get_kernel
    from jfa_verify.workflows.calibrate import sample

    # the fixed case runs; the deadline then stops the drawn ones before they start
    out = sample(get_kernel("triton_jfa_mxfp8"), device=dev, dtypes=["float8_e4m3fn"], cases_per_dtype=1, seed=0,
                 records=tmp_path / "r.jsonl", fixed_cases=[_tiny("random", mode="cross", q_lengths=(9, 3, 0, 20))],
                 deadline_s=0.05)
    (record,) = out["records"]
    assert record.row == "mxfp8" and out["errors"] == [] and record.case["full"]["block_scaling"] == {
        "pattern": "random"}
    e, s, *floors = record.outputs["o"]
    assert 0 < e < 0.1 * max(floors)  # the kernel's O error, far inside its floors


def test_each_sequence_of_a_block_scaled_case_is_judged_against_its_own_magnitudes():
    """Regression (a new user's trial): an MXFP8 kernel that zeroed a whole sequence's output passed cases whose
    other sequence held large blocks, the case's one allowance being scaled by its largest values. Each sequence is
    now judged on its own rows too (``judge_sequences``), as a packed part is; an honest output passes."""
    from jfa_verify import Case
    from jfa_verify.judge.compare import compare_output
    from jfa_verify.judge.packing import judge_sequences

    case = Case(kv_lengths=(5, 7), dtype="float8_e4m3fn", head_dim=32, num_heads_q=2, num_heads_kv=2,
                block_scaling={"pattern": "random"}, seed=3)
    gen = torch.Generator().manual_seed(0)
    ref_o = torch.randn(12, 2, 32, dtype=torch.float64, generator=gen)
    ref_o[:5] *= 2.0 ** 20  # sequence 0: blocks scaled twenty binades above sequence 1's
    sdpa_o = (ref_o * (1 + 2e-3 * torch.randn(ref_o.shape, dtype=torch.float64, generator=gen))).to(torch.bfloat16)
    ref = {"o": ref_o}
    honest = {"o": sdpa_o.clone()}
    zeroed = {"o": sdpa_o.clone()}
    zeroed["o"][5:] = 0  # the bug: sequence 1's output never written
    whole = compare_output("o", zeroed["o"], sdpa_o, ref_o, torch.float8_e4m3fn, precision="mxfp8")
    assert whole.passed  # the case's one allowance, scaled by sequence 0's values, hides the bug
    assert judge_sequences(case, honest, ref, {"o": sdpa_o}) == [[], []]
    assert judge_sequences(case, zeroed, ref, {"o": sdpa_o}) == [[], ["o"]]
    # the finding carries the numbers (a trial found it saying only "o outside the allowance of its own rows")
    from jfa_verify.judge.findings import sequence_finding

    (failing,) = judge_sequences(case, zeroed, ref, {"o": sdpa_o})[1]
    worst = float((ref_o[5:] - zeroed["o"][5:].double()).abs().max())
    assert failing.error == pytest.approx(worst) and 0 < failing.allowance < worst and not failing.bad
    message = sequence_finding(1, [failing]).message
    assert message.startswith("sequence 1: outside the allowance of its own rows: o: max abs error ") and \
        f"> allowance {failing.allowance:.3g}" in message
    dense = Case(kv_lengths=(5, 7), dtype="bfloat16", head_dim=32, num_heads_q=2, num_heads_kv=2, seed=3)
    assert judge_sequences(dense, zeroed, ref, {"o": sdpa_o}) == [[], []]  # other cases: judged as before
