"""Strategies draw their classes (found by ``hypothesis.find``), stay inside capabilities, and coverage names them."""

import pytest
import torch
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from jfa_verify import Case, run_case
from jfa_verify.cases.case import VALUE_DISTRIBUTIONS
from jfa_verify.cases.coverage import CLASSES, CPU_EXPECTED, Coverage, classify, element_extent
from jfa_verify.protocol.kernel import Capabilities, Kernel, TileSizes, tiles_for_shape
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.settings import RunSettings
from jfa_verify.strategies import (
    cases,
    cross_query_lengths,
    empty_batches,
    head_configs,
    head_dims,
    heavy_tailed_lengths,
    jagged_lengths,
    layouts,
    movielens_batches,
    offsets_configs,
    one_token_batches,
    overflow_cases,
    prime_lengths,
    reach_of,
    skewed_lengths,
    sparse_batches,
    tile_boundary_lengths,
    value_policies,
)

KERNEL = get_kernel("triton_jfa")

FIND = settings(database=None, max_examples=2000, suppress_health_check=list(HealthCheck))
DRAW = settings(database=None, max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
SMALL = dict(max_batch=4, max_len=40)


def blocks(case: Case) -> tuple[int, int]:
    return tiles_for_shape(KERNEL, case.head_dim, case.dv, case.torch_dtype, "cpu").as_tuple()


def kernel_tiles(d: int, device_type: str) -> tuple[int, int]:
    return tiles_for_shape(KERNEL, d, d, torch.bfloat16, device_type).as_tuple()


# -- every input class is reachable through cases(), from the kernel's own tile sizes ---------------------------


def test_cases_draws_every_class():
    cov = Coverage.for_kernel(KERNEL)

    @given(case=cases(KERNEL, **SMALL))
    @settings(DRAW, max_examples=400, derandomize=True)
    def draw(case):
        cov.add(case)

    draw()
    assert cov.missing(CPU_EXPECTED) == [], cov.format()
    # Every class at least 3 times, but the empty batch (B = 0), which cases() draws rarely on purpose (a drawn
    # integer at its top value; shrinking moves away from it): its count moves with what else Hypothesis has seen in
    # the process (its pool of the code's constants), 5 of 400 here, 1 of 400 in a CI worker. Reached is enough.
    rare = {"no_sequences"}
    assert min(cov.counts[c] for c in CPU_EXPECTED if c not in rare) >= 3, cov.format()


# -- length strategies ---------------------------------------------------------------------------------------


@given(lengths=empty_batches(max_batch=5))
@DRAW
def test_empty_batches_are_all_empty(lengths):
    assert lengths and set(lengths) == {0}


@given(lengths=sparse_batches(max_batch=6))
@DRAW
def test_sparse_batches_total_below_batch(lengths):
    assert len(lengths) >= 2 and sum(lengths) < len(lengths)


def test_sparse_batches_shrink_to_two_empty():
    assert find(sparse_batches(), lambda x: True, settings=FIND) == (0, 0)


@given(lengths=one_token_batches(max_len=40))
@DRAW
def test_one_token_batches_hold_a_one(lengths):
    assert 1 in lengths


@given(n=tile_boundary_lengths(kernel_tiles(32, "cpu"), max_len=200))
@DRAW
def test_tile_boundaries_come_from_the_kernel(n):
    bm, bn = kernel_tiles(32, "cpu")
    assert any((n + 1) % b in (0, 1, 2) and n >= b - 1 for b in (bm, bn))


def test_tile_boundaries_reach_both_sides_of_each_multiple():
    bm, bn = kernel_tiles(32, "cpu")
    for n in (bn - 1, bn + 1, bm, 3 * bm + 1):
        assert find(tile_boundary_lengths((bm, bn), max_len=200), lambda x, n=n: x == n, settings=FIND) == n
    gpu = kernel_tiles(64, "cuda")
    assert find(tile_boundary_lengths(gpu, max_len=200), lambda n: True, settings=FIND) == gpu[1] - 1


@given(n=prime_lengths(max_len=100))
@DRAW
def test_prime_lengths_are_prime(n):
    assert n >= 5 and all(n % p for p in range(2, n))


@given(lengths=skewed_lengths(max_len=48))
@DRAW
def test_skewed_lengths_have_one_mega_sequence(lengths):
    assert "skew" in classify(Case(kv_lengths=lengths))


def test_heavy_tail_parameter_and_shrink():
    # a heavy tail (alpha 0.5) reaches the clip; a light one (alpha 8) stays near min_len
    assert find(heavy_tailed_lengths(alpha=0.5, max_len=64), lambda xs: 64 in xs, settings=FIND)
    light = find(heavy_tailed_lengths(alpha=8.0, max_len=64), lambda xs: max(xs) >= 2, settings=FIND)
    assert max(light) == 2
    assert find(heavy_tailed_lengths(max_len=64), lambda xs: True, settings=FIND) == (1,)


def test_movielens_batches_sample_the_real_distribution():
    from jfa_verify.core.lengths import movielens_lengths

    raw = find(movielens_batches(max_len=10_000, scale=1.0), lambda xs: max(xs) > 1000, settings=FIND)
    assert set(raw) <= set(movielens_lengths())
    shortest = -(-min(movielens_lengths()) * 48 // 4 // 70.5)  # ceil(20 * 48 / 4 / 70.5) = 4
    assert find(movielens_batches(max_len=48), lambda xs: True, settings=FIND) == (shortest,) == (4,)


@pytest.mark.parametrize("kind", ["empty", "sparse", "skewed", "heavy_tail", "movielens", "prime", "boundary"])
def test_jagged_lengths_kinds_are_selectable(kind):
    strat = jagged_lengths(max_len=40, kinds=[kind])
    assert find(strat, lambda xs: True, settings=FIND) is not None


@given(data=st.data())
@DRAW
def test_cross_query_lengths_one_per_sequence(data):
    kv = data.draw(jagged_lengths(max_len=40))
    q = data.draw(cross_query_lengths(kv, max_len=40))
    assert len(q) == len(kv) and all(0 <= n <= 40 for n in q)


def test_cross_query_lengths_differ_from_keys():
    assert find(cross_query_lengths((5, 17), max_len=40), lambda q: q[0] == 6 and q[1] == 16, settings=FIND)


# -- heads, dims, values, layouts, offsets -------------------------------------------------------------------


def test_head_configs_draw_mha_gqa_mqa():
    assert find(head_configs(), lambda h: True, settings=FIND) == (1, 1)
    assert find(head_configs(), lambda h: h[1] > 1 and h[0] > h[1], settings=FIND) == (4, 2)
    assert find(head_configs(), lambda h: h[1] == 1 and h[0] > 1, settings=FIND) == (2, 1)
    assert find(head_configs(max_heads=8), lambda h: h[0] // h[1] >= 4, settings=FIND) == (8, 1)


def test_head_dims_include_odd_unless_kernel_forbids():
    assert find(head_dims(), lambda d: d % 2 == 1, settings=FIND) == 17
    pow2 = Capabilities(non_power_of_two_head_dims=False)
    with pytest.raises(Exception):
        find(head_dims(pow2), lambda d: d & (d - 1) != 0, settings=FIND)


@pytest.mark.parametrize("name", VALUE_DISTRIBUTIONS)
def test_value_policies_draw_each_and_inputs_stay_finite(name):
    assert find(value_policies(), lambda v: v == name, settings=FIND) == name
    t = Case(kv_lengths=(5, 17), values=name, dtype="float16", mode="cross", q_lengths=(3, 2)).materialize()
    assert all(torch.isfinite(x).all() for x in (t.q, t.k, t.v, t.do))


def test_value_adversaries_have_their_shape():
    ties = Case(kv_lengths=(9,), values="near_ties", dtype="float32", num_heads_kv=1, num_heads_q=1).materialize()
    assert (ties.k - ties.k[:1]).abs().max() < 2e-3 < ties.q.std()
    tiny = Case(kv_lengths=(9,), values="tiny", dtype="float32").materialize()
    assert tiny.q.abs().max() < 2**-7 and tiny.do.abs().max() > 0.1  # dO is not scaled


def test_layouts_and_offsets():
    assert find(layouts(), lambda x: x == "strided", settings=FIND) == "strided"
    assert find(offsets_configs(), lambda o: True, settings=FIND) == ("int32", 0, "contiguous")
    assert find(offsets_configs(), lambda o: o[0] == "int64" and o[1] > 0, settings=FIND) == ("int64", 1, "contiguous")
    assert find(offsets_configs(), lambda o: o[2] == "strided", settings=FIND) == ("int32", 0, "strided")


@pytest.mark.parametrize("mode", ["self", "cross", "broadcast_q"])
def test_strided_offsets_are_views_of_one_bounds_tensor_with_the_same_values(mode):
    extra = {"cross": dict(q_lengths=(4, 0, 9)), "broadcast_q": dict(broadcast_q_len=5)}.get(mode, {})
    kw = dict(kv_lengths=(3, 0, 17), mode=mode, offsets_start=2, offsets_dtype="int64", **extra)
    dense, strided = Case(**kw).materialize(), Case(offsets_layout="strided", **kw).materialize()
    assert torch.equal(dense.k_offsets, strided.k_offsets) and strided.k_offsets.stride(0) == 2
    if mode != "broadcast_q":
        assert torch.equal(dense.q_offsets, strided.q_offsets) and strided.q_offsets.stride(0) == 2
        assert strided.q_offsets.data_ptr() != strided.k_offsets.data_ptr()  # two columns of one tensor
    assert all(t is None or t.is_contiguous() for t in strided.contract_args()[3:])


def test_strided_layout_same_values_other_strides():
    kw = dict(kv_lengths=(3, 17), mode="cross", q_lengths=(5, 0), num_heads_q=4, num_heads_kv=2, head_dim=17, seed=3)
    dense, strided = Case(**kw).materialize(), Case(layout="strided", **kw).materialize()
    for a, b in zip((dense.q, dense.k, dense.v, dense.do), (strided.q, strided.k, strided.v, strided.do)):
        assert torch.equal(a, b) and a.is_contiguous() and not b.is_contiguous()
    assert strided.q.clone().stride() == strided.q.stride()  # the runner's clone keeps the layout
    dv = strided.do.shape[2]
    assert strided.do.stride(1) == dv + 3 and torch.isnan(strided.do.as_strided((3,), (1,), dv)).all()  # NaN margin


def test_layout_field_keeps_old_json_and_ids():
    c = Case(kv_lengths=(1, 2))
    assert "layout" not in c.to_dict()
    assert Case.from_dict(c.to_dict()) == c
    s = Case(kv_lengths=(1, 2), layout="strided")
    assert s.to_dict()["layout"] == "strided" and Case.from_json(s.to_json()) == s and s.case_id() != c.case_id()


@pytest.mark.parametrize("case", [
    Case(kv_lengths=(17, 0, 33), layout="strided", num_heads_q=4, num_heads_kv=2, head_dim=17, dtype="float16"),
    Case(kv_lengths=(16, 3), mode="cross", q_lengths=(31, 2), causal=True, causal_alignment="bottom_right",
         head_dim=33, head_dim_v=24, values="tiny", offsets_start=17),
    Case(kv_lengths=(16, 5), values="near_ties", causal=True, head_dim=33, head_dim_v=24),
], ids=["strided-gqa-d17", "tiny-cross-bottom-right-d33", "near-ties-causal-d33"])
def test_new_classes_pass_on_kernel(case, jfa_kernel, jfa_device):
    result = run_case(case, jfa_kernel, jfa_device)
    assert result.status in _passing(jfa_kernel), result.explain()


def _passing(kernel) -> tuple:
    """The verdicts that pass a case of the contract: triton_jfa declares the whole contract, so it must compute the
    case (issue 40: "unsupported" let a triton_jfa that declined the case pass); another kernel may decline it."""
    return ("pass",) if kernel.name == "triton_jfa" else ("pass", "unsupported")


# -- capabilities -----------------------------------------------------------------------------------------------


NARROW = Kernel("narrow", "", lambda: None,
                Capabilities(dtypes=(torch.float32,), min_head_dim=16, max_head_dim=32,
                             non_power_of_two_head_dims=False, distinct_value_head_dim=False, modes=("self",),
                             causal_alignments=(), gqa=False),
                lambda problem: TileSizes(8, 4))


@given(case=cases(NARROW, max_len=20))
@DRAW
def test_cases_stay_inside_capabilities(case):
    assert case.dtype == "float32" and case.mode == "self" and not case.causal
    assert case.head_dim in (16, 32) and case.dv == case.head_dim and case.num_heads_q == case.num_heads_kv


@pytest.mark.parametrize("name", ["triton_jfa", "gluon_jfa"])
def test_gpu_draws_leave_the_first_tile_of_the_kernels_own_tiles(name):
    """Regression (H200, 2026-12-02): 15,063 gluon_jfa campaign cases never drew a sequence longer than one of its
    128-row tiles (lengths stopped at 48): no multi-tile, tile-boundary or multi-tile broadcast-Q case."""
    kernel = get_kernel(name)
    tiles = lambda c: tiles_for_shape(kernel, c.head_dim, c.dv, c.torch_dtype, "cuda").as_tuple()  # noqa: E731
    for wanted in ("multi_tile", "tile_boundary", "broadcast_q_multi_tile"):
        found = find(cases(kernel, device_type="cuda"), lambda c: wanted in classify(c, tiles(c)), settings=FIND)
        longest = max(found.kv_lengths + (found.q_lengths or ()) + (found.broadcast_q_len or 0,))
        assert longest > 48, (wanted, found.describe())
    # a boundary of the second tile too: 2 * BLOCK +- 1
    bm = tiles_for_shape(kernel, 64, 64, torch.bfloat16, "cuda").as_tuple()[0]
    find(cases(kernel, device_type="cuda", length_kinds=["boundary"]), lambda c: 2 * bm + 1 in c.kv_lengths,
         settings=FIND)


def test_reach_is_the_default_unless_the_tiles_are_larger():
    assert reach_of((32, 16)) == 48 and reach_of((64, 64)) == 129 and reach_of((128, 64)) == 257
    assert reach_of((128, 128), max_len=20) == 20  # a given max_len is kept


def test_boundaries_follow_declared_block_sizes():
    found = find(cases(NARROW, max_len=20, length_kinds=["boundary"]), lambda c: True, settings=FIND)
    assert found.kv_lengths == (3,)  # BLOCK_N = 4, minus one


# -- the 2**31 class: drawn anywhere, run on a GPU only ---------------------------------------------------------


@given(case=overflow_cases())
@DRAW
def test_overflow_cases_pass_int32_offsets(case):
    assert "offset_overflow" in classify(case, (64, 64)) and element_extent(case) > 2**31
    rows_before_last = case.offsets_start + sum(case.kv_lengths) - 1
    assert rows_before_last * case.num_heads_q * case.head_dim >= 2**31  # the last row lies past the boundary


@pytest.mark.gpu_exclusive
@pytest.mark.slow
def test_overflow_case_on_gpu(jfa_kernel, jfa_device):
    """Element offsets past 2**31, forward (about 50 GiB of GPU memory). Skipped on CPU; never materialized there."""
    if jfa_device.type != "cuda":
        pytest.skip("the 2**31 class runs on a GPU only")
    from jfa_verify import run_case

    case = find(overflow_cases(), lambda c: len(c.kv_lengths) >= 2, settings=FIND)
    # forward only: the float64 reference's whole-buffer gradients (3 x 16 GiB) with the kernel's, the SDPA
    # oracle's and the inputs pass the H200's 139 GiB (OutOfMemoryError there, 2026-12-01)
    result = run_case(case, jfa_kernel, jfa_device, RunSettings(backward=False))
    assert result.status in _passing(jfa_kernel), result.explain()


@pytest.mark.gpu
@pytest.mark.gpu_exclusive
@pytest.mark.slow
def test_overflow_case_backward_on_gpu(jfa_kernel, jfa_device):
    """The same 2**31 case forward and backward, judged on chunks: O, LSE, dQ, dK and dV of the sequences past the
    boundary and of a sample elsewhere, each against a float64 reference of that sequence alone
    (:func:`jfa_verify.run.chunked.run_chunked`; the whole buffer's float64 gradients would not fit)."""
    if jfa_device.type != "cuda":
        pytest.skip("the 2**31 class runs on a GPU only")
    from jfa_verify.run.chunked import run_chunked

    case = find(overflow_cases(), lambda c: len(c.kv_lengths) >= 2, settings=FIND)
    result = run_chunked(case, jfa_kernel, jfa_device, kv_heads_per_chunk=1)
    assert result.status in _passing(jfa_kernel), result.explain()
    if result.status == "pass":
        assert {c.comparison.name for c in result.comparisons} >= {"o", "lse"} and len(result.sequences) >= 2
        assert jfa_kernel.name != "triton_jfa" or {"dq", "dk", "dv"} <= {c.comparison.name for c in result.comparisons}


# -- coverage ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case, present, absent", [
    (Case(kv_lengths=(0, 0, 0)), {"all_empty", "zero_length_q", "zero_length_k", "total_lt_batch", "self"},
     {"one_token", "tile_boundary", "skew"}),
    (Case(kv_lengths=(1, 0, 0)), {"one_token", "total_lt_batch", "zero_length_k"}, {"all_empty"}),
    (Case(kv_lengths=(15, 31)), {"tile_boundary", "multi_tile", "prime_length"}, {"zero_length_k", "skew"}),
    (Case(kv_lengths=(2, 3, 40)), {"skew", "multi_tile"}, {"tile_boundary"}),
    (Case(kv_lengths=(4, 5), mode="cross", q_lengths=(4, 2), causal=True, causal_alignment="bottom_right"),
     {"cross", "q_ne_k", "causal_bottom_right", "causal_misaligned"}, {"causal_top_left"}),
    (Case(kv_lengths=(4,), causal=True), {"causal_top_left", "single_sequence"}, {"causal_misaligned"}),
    (Case(kv_lengths=(4,), mode="broadcast_q", broadcast_q_len=33), {"broadcast_q", "broadcast_q_multi_tile"}, set()),
    (Case(kv_lengths=(4,), num_heads_q=4, num_heads_kv=2), {"gqa"}, {"mqa"}),
    (Case(kv_lengths=(4,), num_heads_q=4, num_heads_kv=1), {"mqa"}, {"gqa"}),
    (Case(kv_lengths=(4,), head_dim=33, head_dim_v=24),
     {"odd_head_dim", "non_pow2_head_dim", "distinct_value_head_dim"}, set()),
    (Case(kv_lengths=(4,), head_dim=64), set(), {"odd_head_dim", "non_pow2_head_dim", "distinct_value_head_dim"}),
    (Case(kv_lengths=(4,), offsets_start=3, offsets_dtype="int64", values="large_logits", layout="strided"),
     {"offsets_nonzero_start", "int64_offsets", "large_logits", "strided"}, {"offset_overflow"}),
    (Case(kv_lengths=(4,), offsets_start=2**25, head_dim=64), {"offset_overflow"}, set()),
])
def test_classify(case, present, absent):
    got = classify(case, (32, 16))
    assert present <= got and not absent & got and got <= set(CLASSES)


def test_classify_uses_the_given_block_sizes():
    assert "tile_boundary" in classify(Case(kv_lengths=(63,)), (64, 64))
    assert "tile_boundary" not in classify(Case(kv_lengths=(63,)), (30, 40))


def test_coverage_counts_and_reports_missing():
    cov = Coverage.for_kernel(KERNEL)
    cov.update([Case(kv_lengths=(0, 0)), Case(kv_lengths=(17,), num_heads_q=2, num_heads_kv=1)])
    assert cov.total == 2 and cov.counts["all_empty"] == 1 and cov.counts["self"] == 2 and cov.counts["mqa"] == 1
    assert "gqa" in cov.missing() and "all_empty" not in cov.missing() and "offset_overflow" not in cov.missing()
    assert cov.missing(["all_empty", "gqa"]) == ["gqa"]
    text = cov.format()
    never = next(line for line in text.splitlines() if line.startswith("  never drawn:"))
    assert "coverage over 2 case(s)" in text and "gqa" in never
    assert cov.to_dict()["counts"]["self"] == 2


def _zero_rows(text: str) -> set[str]:
    """The classes a coverage table shows with a count of 0."""
    return {line.split()[0] for line in text.splitlines()[2:] if len(line.split()) > 2 and line.split()[1] == "0"}


def _listed(text: str, head: str) -> set[str]:
    line = next((line for line in text.splitlines() if line.startswith(f"  {head}: ")), f"  {head}: none")
    return set(line.split(": ", 1)[1].split(", ")) - {"none"}


def test_coverage_never_claims_full_coverage_while_classes_show_zero():
    """Regression: every class a CPU run expects was drawn, so it said "never drawn: none", while the window
    classes (and offset_overflow) showed 0 right above: a CPU run does not expect them, and now says so."""
    cov = Coverage()
    cov.counts.update(CPU_EXPECTED)
    cov.counts["window"] = cov.total = 1  # one windowed case: the window rows are shown
    text = cov.format()
    assert _listed(text, "never drawn") == set()
    assert _listed(text, "not expected on cpu") == _zero_rows(text) == (
        {c for c in CLASSES if c.startswith("window")} - {"window"}) | {"offset_overflow"}
    cuda = cov.format(device_type="cuda")  # a GPU run expects every class: the same zeros are never drawn
    assert _listed(cuda, "never drawn") == _zero_rows(cuda) == _zero_rows(text) and "not expected" not in cuda


def test_float8_and_mxfp8_scale_patterns_are_coverage_classes_of_the_kernels_that_take_them():
    """Regression (issue 41, item 3): a campaign on triton_jfa_mxfp8 reported "37/41 input classes drawn" with no
    word of the E8M0 scale patterns it drew (extremes, zero blocks, outliers) nor of float8 inputs: the covering
    array had them as contract dimensions, the campaign's coverage did not."""
    from jfa_verify.cases.coverage import FP8_CLASSES, expected_classes, unsupported_classes
    from jfa_verify.cases.scaling import SCALE_PATTERNS

    mxfp8, fp8 = get_kernel("triton_jfa_mxfp8").capabilities, get_kernel("triton_jfa_fp8").capabilities
    scales = {f"mxfp8_{p}" for p in SCALE_PATTERNS}
    assert set(FP8_CLASSES) == scales | {"float8_e4m3fn"}
    assert set(FP8_CLASSES) <= set(expected_classes("cpu", mxfp8))
    assert "float8_e4m3fn" in expected_classes("cpu", fp8) and scales <= unsupported_classes(fp8)
    assert not set(FP8_CLASSES) & set(expected_classes("cpu")) and not set(FP8_CLASSES) & set(expected_classes("cuda"))
    for p in SCALE_PATTERNS:
        case = Case(kv_lengths=(5, 40), dtype="float8_e4m3fn", head_dim=64, block_scaling={"pattern": p})
        assert classify(case, (32, 16)) & set(FP8_CLASSES) == {"float8_e4m3fn", f"mxfp8_{p}"}
    assert not classify(Case(kv_lengths=(5,), dtype="float8_e4m3fn", head_dim=64), (32, 16)) & scales
    cov = Coverage.for_kernel(get_kernel("triton_jfa_mxfp8"))
    cov.add(Case(kv_lengths=(5, 40), dtype="float8_e4m3fn", head_dim=64, block_scaling={"pattern": "extremes"}))
    never = _listed(cov.format(), "never drawn")
    assert scales - {"mxfp8_extremes"} <= never and not never & {"mxfp8_extremes", "float8_e4m3fn"}
    # a kernel without float8 keeps its table as before: no float8 row unless a case had one
    assert "mxfp8_" not in Coverage.for_kernel(KERNEL).update([Case(kv_lengths=(5,))]).format()


def test_coverage_of_a_kernel_does_not_count_classes_outside_its_capabilities():
    """Regression (H200, 2026-12-02): a gluon_jfa campaign (bf16/fp16, D in {64, 128}, contiguous inputs, no
    windows) reported "28/46 classes; never drawn: ... float32, strided, odd_head_dim, window ...": 14 of the
    18 classes it named no run of that kernel can reach, hiding the 3 it could (multi-tile lengths)."""
    from jfa_verify.cases.coverage import expected_classes, unsupported_classes

    gluon = get_kernel("gluon_jfa")
    outside = unsupported_classes(gluon.capabilities)
    assert {"float32", "strided", "head_dim_strided", "odd_head_dim", "non_pow2_head_dim", "distinct_value_head_dim",
            "window"} <= outside and not outside & {"gqa", "mqa", "cross", "broadcast_q", "causal_bottom_right",
                                                      "bfloat16", "multi_tile", "tile_boundary"}
    # triton_jfa declares the whole contract (block selections once it declares a block-sparse path)
    from jfa_verify.cases.coverage import FP8_CLASSES, SPARSE_CLASSES

    assert unsupported_classes(KERNEL.capabilities) == (set() if KERNEL.capabilities.block_sparse else
                                                       set(SPARSE_CLASSES)) | set(FP8_CLASSES)
    nested = unsupported_classes(get_kernel("nested_sdpa").capabilities)
    assert {"broadcast_q", "gqa", "mqa", "causal_bottom_right"} <= nested and "causal_top_left" not in nested
    assert set(expected_classes("cuda", gluon.capabilities)) == set(CLASSES) - outside

    cov = Coverage.for_kernel(gluon, "cuda").update([Case(kv_lengths=(5, 129), dtype="bfloat16", head_dim=64)])
    text = cov.format(device_type="cuda")
    # the window, block-sparse and float8 rows are shown only when a case had one (as before): the rest are listed
    # apart
    assert _listed(text, "outside the kernel's capabilities") == {c for c in outside if not c.startswith(
        ("window", "sparse_", "mxfp8_", "float8"))}
    assert not _listed(text, "never drawn") & outside and "tile_boundary" not in _listed(text, "never drawn")
    assert "gqa" in _listed(text, "never drawn")


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_no_drawn_case_is_in_a_class_called_outside_its_kernels_capabilities(device_type):
    """Review: the classes left out of a kernel's coverage line must be ones its cases never reach (else the
    coverage line hides a class the campaign could, and should, draw)."""
    from jfa_verify.cases.coverage import unsupported_classes
    from jfa_verify.checks.suites import suite_inputs
    from tests.helpers import builtin_kernel_names

    models = set()
    for name in builtin_kernel_names():  # (not the kernels earlier tests of this worker registered)
        kernel = get_kernel(name)
        # Kernels of the same capabilities and tiles get the same draws: one of them is enough (in CI, tests
        # before this one in the worker had registered dozens of planted-bug copies: 84 s instead of 11).
        model = repr(suite_inputs(kernel, device_type))
        if model in models:
            continue
        models.add(model)
        outside = unsupported_classes(kernel.capabilities)
        tiles = lambda c: tiles_for_shape(kernel, c.head_dim, c.dv, c.torch_dtype, device_type).as_tuple()  # noqa: E731
        seen: set = set()

        @settings(database=None, max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=cases(kernel, device_type=device_type, max_len=40))
        def draw(case):
            seen.update(classify(case, tiles(case)))

        draw()
        assert not seen & outside, (name, seen & outside)


def test_public_api_is_exported():
    import jfa_verify.strategies as S
    from jfa_verify.strategies import _cases, _lengths

    public = {n for m in (_cases, _lengths) for n in m.__all__}
    assert set(S.__all__) == public and all(hasattr(S, n) for n in S.__all__)
    assert {"sequence_lengths", "jagged_lengths", "head_configs", "cases"} <= public


def test_gpu_draws_reach_every_tile_shape_the_kernel_runs():
    """Regression (H200, 2026-12-02): campaigns drew head dims up to 64, so triton_jfa's 64 x 32 tiles (its tiles
    past D = 128 on CUDA) never ran in a drawn case, and a BLOCK_M/BLOCK_N mix-up computed right on every one."""
    from jfa_verify.cases.dimensions import tile_shape

    kernel = get_kernel("triton_jfa")
    shapes = {"cpu": set(), "cuda": set()}
    for device_type, seen in shapes.items():
        @settings(database=None, max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=cases(kernel, device_type=device_type, max_len=40))
        def draw(case):
            seen.add(tile_shape(tiles_for_shape(kernel, case.head_dim, case.dv, case.torch_dtype,
                                                device_type).as_tuple()))

        draw()
    assert shapes == {"cpu": {"m_larger"}, "cuda": {"square", "m_larger"}}


def test_a_kernel_declaring_head_dims_gets_each_dim_class_it_supports_drawn():
    # regression: triton_jfa_mxfp8 declares 32, 64, 96 and 128; the default candidates kept 32 and 64 only, and a
    # 2,004-case campaign never drew a head dim that is not a power of two (96)
    caps = Capabilities(head_dims=(32, 64, 96, 128))
    assert find(cases(caps, device_type="cpu"), lambda c: c.head_dim == 96, settings=FIND).head_dim == 96
    # no odd dim declared: none added; of the two that are not powers of two, the smaller
    drawn = set()

    @DRAW
    @given(case=cases(Capabilities(head_dims=(16, 48, 80)), device_type="cpu"))
    def collect(case):
        drawn.add(case.head_dim)

    collect()
    assert drawn == {16, 48}


def test_a_fork_with_selection_blocks_larger_than_its_tiles_gets_sequences_of_several_blocks():
    # regression (a new user's trial): block_sparse=((64, 64),) with the CPU's 48-token reach never drew a sequence of
    # two selection blocks, and a 60 s campaign missed a fork reading its neighbour's selection
    caps = Capabilities(modes=("self", "cross"), block_sparse=((64, 64), (128, 64)))
    found = find(cases(caps, device_type="cpu", block_sparse=True),
                 lambda c: sum(k > 2 * 64 for k in c.kv_lengths) >= 2, settings=FIND)
    assert found.block_sparsity is not None and max(found.kv_lengths) > 128
    lengths = set()

    @DRAW
    @given(case=cases(caps, device_type="cpu", block_sparse=True))
    def collect(case):
        lengths.update(case.kv_lengths)

    collect()
    assert max(lengths) <= 2 * 64 + 1  # the reach of the smallest pair's two blocks, not of the largest
    # a kernel whose smallest selection blocks are no larger than its tiles keeps its reach (triton_jfa: 16 x 16)
    own = set()

    @DRAW
    @given(case=cases(get_kernel("triton_jfa"), device_type="cpu", block_sparse=True))
    def collect_own(case):
        own.update(case.kv_lengths)

    collect_own()
    assert max(own) <= 48
