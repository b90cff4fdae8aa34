"""The contract-coverage model: classes per dimension, cases built for chosen classes, pairs and the covering array."""

import math
from dataclasses import replace

import pytest
import torch

from jfa_verify import Case
from jfa_verify.cases.construct import build_case, case_cost, head_dims_for
from jfa_verify.cases.dimensions import DIMENSIONS, LENGTH_DIMENSIONS, Target, classify, dimension, padded_width
from jfa_verify.cases.pairs import PairCoverage, covering_array, exercised, pairs_of, universe
from jfa_verify.checks.suites import default_suite
from jfa_verify.protocol.kernel import Capabilities
from jfa_verify.protocol.registry import get_kernel
from tests.helpers import builtin_kernel_names


@pytest.fixture(scope="module")
def cpu_target():
    return Target(get_kernel("triton_jfa"), "cpu")


def test_every_dimension_classifies_every_case_into_its_own_classes(cpu_target):
    cases = [Case(kv_lengths=(0,)), Case(kv_lengths=(3, 40), mode="cross", q_lengths=(5, 1), head_dim=33,
                                          head_dim_v=80, sm_scale=0.01, layout="mixed", instrument=False)]
    for case in cases:
        got = classify(case, cpu_target)
        assert set(got) == {d.name for d in DIMENSIONS}
        for d in DIMENSIONS:
            assert got[d.name] and got[d.name] <= set(d.classes), (d.name, got[d.name])


@pytest.mark.parametrize("case, dim, want", [
    (Case(kv_lengths=(4, 4)), "relation", {"equal"}),
    (Case(kv_lengths=(4, 4), mode="cross", q_lengths=(2, 4)), "relation", {"shorter"}),
    (Case(kv_lengths=(4, 4), mode="cross", q_lengths=(5, 4)), "relation", {"longer"}),
    (Case(kv_lengths=(4, 4), mode="cross", q_lengths=(5, 3)), "relation", {"mixed"}),
    (Case(kv_lengths=(4,), mode="broadcast_q", broadcast_q_len=9), "relation", {"longer"}),
    (Case(kv_lengths=(4,), num_heads_q=6, num_heads_kv=2), "heads", {"gqa_non_pow2"}),
    (Case(kv_lengths=(4,), num_heads_q=3, num_heads_kv=1), "heads", {"mqa"}),
    (Case(kv_lengths=(4,), num_heads_q=4, num_heads_kv=2), "heads", {"gqa_pow2"}),
    (Case(kv_lengths=(4,), head_dim=40, head_dim_v=24), "value_dim", {"narrower_other_padding"}),
    (Case(kv_lengths=(4,), head_dim=40, head_dim_v=48), "value_dim", {"other_same_padding"}),
    (Case(kv_lengths=(4,), head_dim=33, head_dim_v=80), "value_dim", {"wider_other_padding"}),
    (Case(kv_lengths=(4,), head_dim=33), "head_dim", {"odd"}),
    (Case(kv_lengths=(4,), head_dim=16, sm_scale=0.1), "sm_scale", {"small"}),
    (Case(kv_lengths=(4,), head_dim=16, sm_scale=0.25), "sm_scale", {"large"}),
    (Case(kv_lengths=(0, 1, 5)), "edges", {"empty_q", "empty_k", "one_token"}),
    (Case(kv_lengths=(31, 3)), "tiles", {"boundary_m", "boundary_n", "multi_tile"}),
    (Case(kv_lengths=(3,) * 5), "batch", {"over_sms"}),
    (Case(kv_lengths=(3,) * 5), "waves", {"two_waves"}),
    (Case(kv_lengths=(3,) * 12), "waves", {"several_waves"}),
])
def test_classes_of_cases_on_the_interpreter_tiles_and_sms(cpu_target, case, dim, want):
    # triton_jfa on the CPU: BLOCK_M=32, BLOCK_N=16, 4 stand-in SMs
    assert cpu_target.tiles_of(case) == (32, 16) and cpu_target.num_sms == 4
    assert set(classify(case, cpu_target)[dim]) == want


def test_padding_is_the_power_of_two_tile_width():
    assert [padded_width(d) for d in (1, 16, 17, 24, 33, 64, 65)] == [16, 16, 32, 32, 64, 64, 128]


def test_build_case_lands_in_every_supported_class_of_every_dimension(cpu_target):
    supported = universe(cpu_target).classes  # (the tile shapes the kernel runs depend on the device too)
    for d in DIMENSIONS:
        for c in d.classes:
            case = build_case({d.name: c}, cpu_target)
            if c not in supported[d.name]:
                assert case is None, (d.name, c)
                continue
            assert case is not None and c in classify(case, cpu_target)[d.name], (d.name, c, case)


def test_build_case_for_several_length_classes_and_gpu_waves():
    gpu = Target(get_kernel("triton_jfa"), "cuda", num_sms=132)
    case = build_case({"mode": "self", "batch": "over_sms", "waves": "several_waves", "edges": "empty_q"}, gpu)
    bm = gpu.tiles_of(case)[0]
    assert case.batch > 132 and 0 in case.kv_lengths
    assert sum(math.ceil(n / bm) for n in case.kv_lengths) >= 3 * 132  # several times more tiles than SMs


def test_impossible_combinations_are_not_built(cpu_target):
    assert build_case({"mode": "self", "relation": "shorter"}, cpu_target) is None
    assert build_case({"batch": "one", "relation": "mixed"}, cpu_target) is None
    only_pow2 = Target(Capabilities(non_power_of_two_head_dims=False, distinct_value_head_dim=False), "cpu")
    assert build_case({"head_dim": "odd"}, only_pow2) is None
    assert head_dims_for("pow2", "same", only_pow2.capabilities) == (32, 32)


_DIM_ORDER = {d.name: i for i, d in enumerate(DIMENSIONS)}


def test_universe_names_the_infeasible_pairs_and_the_classes_outside_the_kernel(cpu_target):
    uni = universe(cpu_target)
    # a batch of no sequence (B = 0) computes no score (its values, scale, heads, head dims decide
    # nothing) and has no length of any kind but the vacuous ones
    no_scores = {"values", "sm_scale", "heads", "head_dim", "value_dim"}
    vacuous = {("relation", "equal"), ("edges", "none"), ("tiles", "single_tile"), ("waves", "one_wave")}
    masks, windows = dimension("mask").classes, dimension("window").classes
    empty_batch = {tuple(sorted([("batch", "empty"), (d, c)], key=lambda x: _DIM_ORDER[x[0]]))
                   for d, classes in uni.classes.items() for c in classes
                   if d in no_scores or (d in {n for n, _ in vacuous} and (d, c) not in vacuous)}
    assert uni.infeasible == {
        (("mode", "self"), ("relation", r)) for r in dimension("relation").classes if r != "equal"
    } | {(("relation", "mixed"), ("batch", "one")), (("tiles", "single_tile"), ("waves", "several_waves"))} | {
        (("relation", r), ("tiles", "single_tile")) for r in ("shorter_by_a_tile", "longer_by_a_tile")  # a tile apart
    } | {
        (("mode", m), ("offsets_start", "distinct")) for m in ("self", "broadcast_q")  # two starts: cross only
    } | {  # a window's shape goes with a windowed mask only; causal caps its right side at the diagonal
        (("mask", m), ("window", w)) for m in masks for w in windows if ("window" in m) != (w != "none")
    } | {(("mask", m), ("window", w)) for m in masks if m.startswith("causal+window")
         for w in ("wider_right", "right_unbounded")} | empty_batch
    # (the interpreter's tiles are 32 x 16 for every shape)
    assert set(uni.unsupported) == {("dtype", "float8_e4m3fn")}
    assert set(uni.not_on_device) == {("tile_shape", "square"), ("tile_shape", "n_larger")}
    assert len(uni.supported) > 1000
    no_gqa = universe(Target(Capabilities(gqa=False, causal_alignments=("top_left",)), "cpu"))
    assert ("heads", "mqa") in no_gqa.unsupported and ("mask", "causal/bottom_right") in no_gqa.unsupported


def test_a_batch_without_any_score_exercises_no_value_or_scale_pair(cpu_target):
    empty = Case(kv_lengths=(0, 0), values="tiny", sm_scale=0.5)
    assert "values" not in exercised(empty, cpu_target) and "sm_scale" not in exercised(empty, cpu_target)
    assert (("mode", "self"), ("edges", "empty_q")) in pairs_of(exercised(empty, cpu_target))


def test_covering_array_covers_every_supported_pair_cheaply(cpu_target):
    cases = covering_array(cpu_target)
    cov = PairCoverage(cpu_target).update(cases)
    assert not cov.missing_pairs and not cov.missing_classes, cov.format()
    assert len(cases) <= 160
    costs = [case_cost(c, cpu_target) for c in cases]
    # about 20 ms per unit on the interpreter; the window's shapes and the alignment of a window without
    # causal and the query/key gaps of a whole tile cost about 75% more than causal alone did (the whole
    # default suite: about 3 minutes on 2 cores)
    assert max(costs) <= 700 and sum(costs) <= 6500, costs
    assert [c.name for c in covering_array(cpu_target)] == [c.name for c in cases]  # deterministic
    # dense rows first: a dense-path bug must not wait behind the sparse rows (CI: 555 s regression gate, not 360 s)
    from jfa_verify.cases.pairs import computes_scores

    sparse = [c.block_sparsity is not None for c in cases if computes_scores(c)]  # (empty batches come last)
    assert any(sparse) and sparse == sorted(sparse), [c.name for c in cases if c.block_sparsity is not None][:5]
    assert cases[0].name.startswith("pairs/00/")


@pytest.fixture(scope="module")
def gpu_array():
    gpu = Target(get_kernel("triton_jfa"), "cuda", num_sms=132)
    return gpu, covering_array(gpu)


def test_covering_array_on_the_gpu_has_batches_of_several_times_more_tiles_than_sms(gpu_array):
    gpu, cases = gpu_array
    cov = PairCoverage(gpu).update(cases)
    assert not cov.missing_pairs, cov.format()
    assert cov.class_counts[("waves", "several_waves")] >= 3 and cov.class_counts[("batch", "over_sms")] >= 3


@pytest.mark.parametrize("name", builtin_kernel_names())  # (not those other test modules registered)
def test_every_covering_array_case_is_inside_the_kernels_capabilities(name):
    """Regression (H200, 2026-12-02): gluon_jfa's covering array asked for strided layouts it declares it cannot
    take (36 of its 61 cases came back unsupported, their pairs counted as covered all the same); tlx_jfa's asked
    for causal masks (it has none) and torch_fa2_varlen's for top-left windows (it aligns bottom-right)."""
    caps = get_kernel(name).capabilities
    target = Target(caps, "cpu")
    cases = covering_array(target)
    reasons = {c.name: caps.unsupported_reason(c.problem(c.materialize("cpu"))) for c in cases}
    # the device is the one reason left (a CUDA-only kernel on this CPU): it is checked last
    assert not {n: r for n, r in reasons.items() if r and r != caps.device_reason("cpu")}
    assert not PairCoverage(target).update(cases).missing_pairs


def test_pair_coverage_report_names_missing_pairs(cpu_target):
    cov = PairCoverage(cpu_target).update([Case(kv_lengths=(5, 7), dtype="float32")])
    text = cov.format()
    assert "pairs of classes" in text and "classes never exercised:" in text and "mode=cross" in text
    assert cov.to_dict()["pairs_covered"] < cov.to_dict()["pairs_supported"]


def test_coverage_table_says_why_a_dimensions_counts_need_not_add_up(cpu_target):
    # a run's table listed head_dim counts summing to 157 of 169 cases with no word why (2026-12-05)
    cov = PairCoverage(cpu_target).update([Case(kv_lengths=(5, 7), dtype="float32"),
                                           Case(kv_lengths=(0, 0), dtype="float32")])
    per_dim = {line.split()[0]: line for line in cov.format().splitlines() if line.startswith("  head_dim ")}
    assert sum(int(n.rstrip(",")) for n in per_dim["head_dim"].split()[2::2]) == 1  # the empty batch: no score
    assert "1 case(s) computing no score count in no class of heads, head_dim, value_dim, sm_scale, values)" \
        in cov.format()
    assert cov.to_dict()["cases_without_scores"] == 1 and cov.to_dict()["cases"] == 2


def test_the_length_dimensions_are_the_ones_lengths_decide():
    assert LENGTH_DIMENSIONS == ("mode", "relation", "edges", "tiles", "batch", "waves")
    assert set(dimension("window").classes) == {"none", "symmetric", "wider_left", "wider_right", "left_unbounded",
                                                "right_unbounded"}
    with pytest.raises(KeyError, match="dimension 'nope' is unknown"):
        dimension("nope")


def test_the_offsets_start_batch_and_layout_edges_are_built_as_their_tensors(cpu_target):
    distinct = build_case({"offsets_start": "distinct"}, cpu_target)
    t = distinct.materialize("cpu")
    assert distinct.mode == "cross" and t.q_offsets[0].item() != t.k_offsets[0].item()
    assert t.q.shape[0] == t.q_offsets[-1].item() and t.k.shape[0] == t.k_offsets[-1].item()
    assert build_case({"offsets_start": "distinct", "mode": "self"}, cpu_target) is None

    empty = build_case({"batch": "empty", "offsets_start": "nonzero"}, cpu_target)
    t = empty.materialize("cpu")
    assert empty.batch == 0 and t.k_offsets.tolist() == [empty.offsets_start] and t.k.shape[0] > 0

    # the token stride alone unaligned (H * D + 8), D and the head stride multiples of 16; the values as contiguous
    # (an ALIGNED flag that ignored the token stride survived the whole suite: blind set 7, 2026-12-07)
    padded = Case(kv_lengths=(20, 13), num_heads_q=2, num_heads_kv=2, head_dim=16, layout="token_padded")
    t, dense = padded.materialize("cpu"), replace(padded, layout="contiguous").materialize("cpu")
    for x, y in ((t.q, dense.q), (t.k, dense.k), (t.v, dense.v), (t.do, dense.do)):
        assert x.stride() == (2 * 16 + 8, 16, 1) and torch.equal(x, y)
    assert any(c.layout == "token_padded" for c in default_suite("cpu", kernel=get_kernel("triton_jfa")).cases)

    strided = build_case({"layout": "head_dim_strided"}, cpu_target).materialize("cpu")
    assert all(x.stride(-1) == 2 for x in (strided.q, strided.k, strided.v, strided.do))
    assert not any(x.isnan().any() for x in (strided.q, strided.k, strided.v))  # the gaps hold the NaN


def test_the_covering_array_puts_cases_that_compute_scores_first(cpu_target):
    # a new user's `run --max-cases 8` once got five B = 0 batches out of eight
    from jfa_verify.cases.pairs import computes_scores

    live = [computes_scores(c) for c in covering_array(cpu_target)]
    assert live.index(False) > 0 and all(live[:live.index(False)]) and not any(live[live.index(False):])


def test_window_shapes_are_judged_as_the_contract_applies_them():
    from jfa_verify.cases.dimensions import window_shape

    assert [window_shape(w, False) for w in (None, (3, 3), (5, 1), (1, 5), (-1, 4), (4, -1))] == [
        "none", "symmetric", "wider_left", "wider_right", "left_unbounded", "right_unbounded"]
    # causal caps the right side at the diagonal: what is given there does not count
    assert [window_shape(w, True) for w in ((0, 9), (5, 9), (5, -1), (-1, 7))] == [
        "symmetric", "wider_left", "wider_left", "left_unbounded"]


def test_the_covering_array_aligns_windows_without_causal_and_varies_their_shape(cpu_target):
    """Regression: the model had one 'windowed' class and aligned a window only through causal, so the default
    suite never ran a window without causal aligned bottom-right with L_q != L_k, nor a window wider on its
    right, nor one unbounded on one side (bugs in those places passed it)."""
    cases = covering_array(cpu_target)
    exercised_pairs = PairCoverage(cpu_target).update(cases).pairs
    for alignment in ("top_left", "bottom_right"):
        for relation in ("shorter", "longer"):
            assert (("mask", f"window/{alignment}"), ("relation", relation)) in exercised_pairs
    shapes = {w for c in cases for w in classify(c, cpu_target)["window"]}
    assert shapes == set(dimension("window").classes)
    tlx = Target(get_kernel("tlx_jfa").capabilities, "cpu")  # (left, left) windows only, aligned top-left
    assert {w for c in covering_array(tlx) for w in classify(c, tlx)["window"]} == {"none", "symmetric"}


def test_a_gap_of_a_whole_tile_between_query_and_key_lengths_is_its_own_relation_class(cpu_target):
    """Regression: the covering array's length search takes the cheapest lengths, so L_q and L_k never stood a whole
    tile apart: the bottom-right diagonal never moved past a tile, and bugs in the causal loop bounds (not their
    masks) passed the default suite."""
    tile = max(cpu_target.tiles(32, 32))
    near, far = Case(kv_lengths=(9,), mode="cross", q_lengths=(3,)), Case(kv_lengths=(9 + tile,), mode="cross",
                                                                           q_lengths=(9,))
    assert classify(near, cpu_target)["relation"] == {"shorter"}
    assert classify(far, cpu_target)["relation"] == {"shorter_by_a_tile"}
    empty_rows = Case(kv_lengths=(9 + tile,), mode="cross", q_lengths=(0,))  # no row to move past anything
    assert classify(empty_rows, cpu_target)["relation"] == {"shorter"}
    cases = covering_array(cpu_target)
    pairs = PairCoverage(cpu_target).update(cases).pairs
    for m in ("causal/top_left", "causal/bottom_right", "causal+window/bottom_right"):
        for r in ("shorter_by_a_tile", "longer_by_a_tile"):
            assert (("mask", m), ("relation", r)) in pairs


def test_the_covering_array_holds_every_combination_the_visibility_rule_takes_at_once(cpu_target):
    """Regression: pairs left a causal window's bottom-right diagonal a whole tile away only with an unbounded
    left side, so a dQ window start that ignored the shift passed the default suite."""
    from jfa_verify.cases.pairs import visibility_combinations

    combos = visibility_combinations(cpu_target)
    assert ((("mask", "window/bottom_right"), ("window", "wider_left"), ("relation", "longer_by_a_tile"))
            in combos)
    assert not any(dict(c)["mask"].startswith("causal+window") and dict(c)["window"] == "wider_right" for c in combos)
    cases = covering_array(cpu_target)
    for combo in combos:
        assert any(all(c in classify(case, cpu_target)[d] for d, c in combo) for case in cases), combo


def test_tile_shape_is_what_the_kernel_picks_for_the_head_dims_dtype_and_device(cpu_target):
    gpu = Target(get_kernel("triton_jfa"), "cuda", num_sms=132)
    narrow, wide = Case(kv_lengths=(5,), head_dim=128), Case(kv_lengths=(5,), head_dim=32, head_dim_v=192)
    assert gpu.tiles_of(narrow) == (64, 64) and classify(narrow, gpu)["tile_shape"] == {"square"}
    assert gpu.tiles_of(wide) == (64, 32) and classify(wide, gpu)["tile_shape"] == {"m_larger"}
    assert classify(narrow, cpu_target)["tile_shape"] == {"m_larger"}  # the interpreter's 32 x 16 tiles
    assert universe(cpu_target).classes["tile_shape"] == ["m_larger"]
    assert "square" in universe(cpu_target).not_on_device[("tile_shape", "square")]
    # a new user read "outside the kernel: tile_shape=square" as a gap like float8; it is the device's tiles
    lines = PairCoverage(cpu_target).format().splitlines()
    assert lines[-2] == "  outside the kernel: dtype=float8_e4m3fn"
    assert lines[-1].startswith("  not run on cpu") and lines[-1].endswith("tile_shape=n_larger, tile_shape=square")


def test_every_tile_shape_the_kernel_runs_on_the_gpu_meets_every_class(gpu_array):
    """Regression (H200, 2026-12-02): the GPU covering array had no head dim past 128, so triton_jfa's only
    oblong tiles there (64 x 32) never ran, and two blind bugs that take BLOCK_M for BLOCK_N (or the reverse)
    survived the default suite on the H200 while the CPU, whose tiles are 32 x 16, killed them."""
    gpu, cases = gpu_array
    uni = universe(gpu)
    assert uni.classes["tile_shape"] == ["square", "m_larger"] and ("tile_shape", "n_larger") in uni.not_on_device
    case = build_case({"tile_shape": "m_larger", "head_dim": "odd", "tiles": "multi_tile", "value_dim": "same"}, gpu)
    assert case.head_dim == case.dv > 128 and gpu.tiles_of(case) == (64, 32)
    cov = PairCoverage(gpu).update(cases)
    oblong = [c for c in cases if "m_larger" in classify(c, gpu)["tile_shape"]]
    assert oblong and not cov.missing_pairs
    assert {p for p in uni.supported if ("tile_shape", "m_larger") in p} <= set().union(
        *(pairs_of(exercised(c, gpu)) for c in oblong))


def test_a_self_case_wanting_another_relation_is_refused_without_a_search_and_rightly(monkeypatch):
    """The length search refuses self attention with a relation other than ``equal`` before drawing (a third of a
    GPU array's draws went there, all refused): right only while every self case classifies as ``equal``, which
    draws of every other length class check here."""
    import random

    from jfa_verify.cases import construct

    rng = random.Random(0)
    tiles = construct._TilesAt(16, 16, 4)
    relation = dimension("relation")
    for _ in range(300):
        want = {"mode": "self", **{d: rng.choice(list(dimension(d).classes))
                                   for d in ("batch", "edges", "tiles", "waves")}}
        mode, q, k = construct._draw(want, 16, 16, 4, rng)
        if k:
            assert relation.classify(construct._length_case(mode, q, k), tiles) == {"equal"}, (want, q, k)

    def no_draw(*args):
        raise AssertionError("drew a case for a want no self case can meet")

    monkeypatch.setattr(construct, "_draw", no_draw)
    for rel in relation.classes:
        if rel != "equal":
            assert construct.lengths_for((("mode", "self"), ("relation", rel)), 16, 16, 4, seed=12345) is None
