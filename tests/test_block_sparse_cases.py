"""Block-sparse cases: described in JSON, materialized into a selection, run through kernels that declare the block
sizes (and reported unsupported by the rest), and judged so that planted selection bugs fail."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from jfa_verify import Capabilities, Case, InvalidInput, get_kernel, load_plugin, register_kernel, run_case
from jfa_verify.cases.sparsity import PATTERNS, Sparsity
from jfa_verify.run.settings import RunSettings

PLUGIN = Path(__file__).resolve().parent / "block_sparse_plugin.py"


def _case(pattern="topk", block=(16, 16), **fields):
    base = dict(kv_lengths=(40, 0, 33, 17), dtype="float32", head_dim=16, num_heads_q=2, num_heads_kv=1, seed=3)
    return Case(**{**base, **fields, "block_sparsity": Sparsity(*block, pattern=pattern)})


def test_case_json_round_trips_and_replays_the_same_selection():
    case = _case(causal=True)
    again = Case.from_json(case.to_json())
    assert again == case and again.case_id() == case.case_id()
    assert case.to_dict()["block_sparsity"] == {"block_m": 16, "block_n": 16, "pattern": "topk", "ratio": 0.5}
    a, b = case.materialize().block_selection, again.materialize().block_selection
    assert torch.equal(a.offsets, b.offsets) and torch.equal(a.indices, b.indices)
    assert "sparse=topk0.5/16x16" in case.describe()
    # a dense case's JSON and id do not mention it (old case files and ids stay valid)
    dense = Case(kv_lengths=(40, 0, 33, 17))
    assert "block_sparsity" not in dense.to_dict() and dense.materialize().block_selection is None
    assert Case.from_dict({**dense.to_dict(), "block_sparsity": None}).case_id() == dense.case_id()


def test_bad_sparsity_fields_are_refused_at_construction():
    for bad, text in (({"block_m": 16}, "block_n required"), ({"block_m": 16, "block_n": 16, "pattern": "x"},
                                                               "pattern='x'"),
                      ({"block_m": 12, "block_n": 16}, "block_m=12"), ({"block_m": 16, "block_n": 16, "ratio": 0},
                                                                        "ratio=0"),
                      ({"block_m": 16, "block_n": 16, "k": 1}, "unknown"), ("topk", "is not an object")):
        with pytest.raises(InvalidInput, match=text):
            Case(kv_lengths=(4,), block_sparsity=bad)


def test_patterns_select_what_they_say():
    q, k = (40, 0, 33, 17), (40, 0, 33, 17)
    nk = [-(-n // 16) for n in k]
    for pattern in PATTERNS:
        blocks = Sparsity(16, 16, pattern=pattern).blocks(q, k, seed=1)
        assert [len(seq) for seq in blocks] == [-(-n // 16) for n in q]
        for b, seq in enumerate(blocks):
            for row in seq:
                assert row == sorted(set(row)) and all(0 <= j < nk[b] for j in row)
                if pattern == "all":
                    assert row == list(range(nk[b]))
                if pattern == "one":
                    assert len(row) == 1
                if pattern == "with_last":
                    assert nk[b] - 1 in row
                if pattern in ("without_last",):
                    assert nk[b] - 1 not in row
                if pattern == "edges":
                    assert row == sorted({0, nk[b] - 1})
            if pattern == "empty_block" and seq:
                assert sum(row == [] for row in seq) >= 1


def test_packed_parts_draw_their_selection_as_alone():
    a, b = _case(seed=1), _case(kv_lengths=(20, 50), seed=9)
    packed = Case.pack([a, b])
    assert packed.selected_blocks() == a.selected_blocks() + b.selected_blocks()
    assert Case.from_json(packed.to_json()).selected_blocks() == packed.selected_blocks()


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_exact_plugin_passes_every_pattern(pattern):
    load_plugin(PLUGIN)
    case = _case(pattern, causal=pattern in ("topk", "edges"), causal_alignment="bottom_right", mode="cross",
                 q_lengths=(20, 5, 0, 40))
    result = run_case(case, get_kernel("block_sparse_ref"), "cpu")
    assert result.status == "pass", result.explain()


def test_kernels_without_the_block_sizes_report_unsupported():
    load_plugin(PLUGIN)
    result = run_case(_case(block=(128, 128)), get_kernel("block_sparse_ref"), "cpu")
    assert result.status == "unsupported" and "(128, 128)" in result.message
    calls = []

    @register_kernel("dense_only_test", capabilities=Capabilities(backward=False))
    def _load():
        return lambda *a, **kw: calls.append(kw)

    result = run_case(_case(), get_kernel("dense_only_test"), "cpu")
    assert result.status == "unsupported" and "no block-sparse path" in result.message and not calls


def test_the_selection_reaches_the_kernel_as_its_keyword():
    seen = {}

    def kernel(q, k, v, q_offsets, k_offsets, **kw):
        seen.update(kw)
        raise RuntimeError("stop")

    register_kernel("keyword_probe_test", capabilities=Capabilities(block_sparse=((16, 16),)))(lambda: kernel)
    case = _case()
    run_case(case, get_kernel("keyword_probe_test"), "cpu")
    want = case.materialize().block_selection
    got = seen["block_selection"]
    assert torch.equal(got.offsets, want.offsets) and torch.equal(got.indices, want.indices)
    assert (got.block_m, got.block_n) == (16, 16)
    seen.clear()
    run_case(Case(kv_lengths=(5, 3), dtype="float32"), get_kernel("keyword_probe_test"), "cpu")
    assert "block_selection" not in seen  # dense calls keep the shorter signature


# Each planted bug, and a case of its class that shows it (the default checks: O, LSE and the gradients).
PLANTED = [
    ("off_by_one_block", _case("topk")),
    ("drop_last_partial", _case("with_last")),
    ("neighbour_selection", _case("topk", kv_lengths=(40, 33, 17))),
]


@pytest.mark.parametrize("mutation, case", PLANTED, ids=[p[0] for p in PLANTED])
def test_planted_selection_bugs_fail(mutation, case):
    load_plugin(PLUGIN)
    assert run_case(case, get_kernel("block_sparse_ref"), "cpu").status == "pass"
    result = run_case(case, get_kernel(f"block_sparse_ref_{mutation}"), "cpu", RunSettings())
    assert result.status == "fail", result.explain()


# ----------------------------------------------------------------------------- strategies, dimension, coverage

SPARSE_CAPS = Capabilities(block_sparse=((16, 16), (32, 16)), backward=False)


def test_strategies_draw_selections_only_for_block_sparse_kernels():
    from hypothesis import given, settings

    from jfa_verify.strategies import block_sparsities, cases

    drawn = set()

    @settings(max_examples=40, deadline=None, database=None)
    @given(cases(SPARSE_CAPS, dtypes=["float32"]), cases(Capabilities(), dtypes=["float32"]),
           block_sparsities([(64, 32)]))
    def check(sparse, dense, alone):
        assert dense.block_sparsity is None
        assert alone.block_sizes == (64, 32)
        if sparse.block_sparsity is not None:
            assert sparse.block_sparsity.block_sizes in SPARSE_CAPS.block_sparse
            drawn.add(sparse.block_sparsity.pattern)
            problem = sparse.problem(sparse.materialize())  # the drawn selection is valid for the drawn lengths
            assert problem.block_selection.block_sizes == sparse.block_sparsity.block_sizes

    check()
    assert len(drawn) >= 3

    @settings(max_examples=1, deadline=None, database=None)
    @given(cases(Capabilities(), block_sparse=True))
    def forced(case):
        pass

    with pytest.raises(InvalidInput, match="block_sparse=True"):
        forced()
    with pytest.raises(InvalidInput, match="patterns"):
        block_sparsities([(16, 16)], patterns=["nope"])


def test_the_sparsity_dimension_builds_and_classifies_each_pattern():
    from jfa_verify.cases.construct import build_case, reachable
    from jfa_verify.cases.coverage import SPARSE_CLASSES, classify, expected_classes, unsupported_classes
    from jfa_verify.cases.dimensions import Target, dimension

    target = Target(SPARSE_CAPS)
    for pattern in PATTERNS:
        case = build_case({"sparsity": pattern}, target)
        # the smallest declared blocks that do not shrink the CPU's 32x16 tiles (16x16 would halve BLOCK_M)
        assert case.block_sparsity.pattern == pattern and case.block_sparsity.block_sizes == (32, 16)
        assert dimension("sparsity").classify(case, target) == {pattern}
        assert f"sparse_{pattern}" in classify(case)
    small = Target(Capabilities(block_sparse=((16, 16), (16, 32))))  # none as large as the tiles: the smallest
    assert build_case({"sparsity": "topk"}, small).block_sparsity.block_sizes == (16, 16)
    dense_target = Target(Capabilities())
    assert reachable("sparsity", "dense", dense_target) and not reachable("sparsity", "topk", dense_target)
    assert set(SPARSE_CLASSES) <= unsupported_classes(Capabilities())
    # (no block this kernel declares is larger than the CPU's tiles: no selection spans several of them)
    assert set(SPARSE_CLASSES) - {"sparse_multi_tile_blocks"} <= set(expected_classes("cpu", SPARSE_CAPS))
    assert "sparse_multi_tile_blocks" in unsupported_classes(SPARSE_CAPS)
    # a dense case's classes and seed are what they were before the dimension existed
    dense = build_case({"mode": "self"}, dense_target)
    assert dense.block_sparsity is None and not any(c.startswith("sparse_") for c in classify(dense))


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_selection_blocks_against_the_tiles_are_a_dimension_built_and_classified(device_type):
    """Regression (blind set 4, read): a block-sparse dQ that took the query tile's number for the selection's query
    block, and a dK/dV that did the same for KV blocks, survived the default suite: every sparse row had blocks of
    the kernel's own tiles, where tile and block numbers agree. Blocks larger and smaller than the tiles are now
    classes of a contract dimension, so the covering array pairs each with the patterns, masks and lengths."""
    from jfa_verify.cases.construct import build_case
    from jfa_verify.cases.coverage import classify as coverage_classes
    from jfa_verify.cases.dimensions import Target, dimension
    from jfa_verify.cases.pairs import covering_array

    kernel = get_kernel("triton_jfa")
    target = Target(kernel, device_type)
    bm, bn = target.tiles(32, 32)
    for regime, smaller, larger in (("tiles", False, False), ("multi_tile", False, True), ("sub_tile", True, False)):
        case = build_case({"selection_blocks": regime, "sparsity": "topk"}, target)
        blocks = case.block_sparsity.block_sizes
        assert (any(b < t for b, t in zip(blocks, (bm, bn))), any(b > t for b, t in zip(blocks, (bm, bn)))) == (
            smaller, larger), (regime, blocks)
        if regime == "multi_tile":  # both mappings exercised: query blocks and KV blocks of several tiles
            assert blocks[0] > bm and blocks[1] > bn
        assert dimension("selection_blocks").classify(case, target) == {regime}
        named = {c for c in coverage_classes(case, (bm, bn)) if c.endswith("_blocks")}
        assert named == ({f"sparse_{regime}_blocks"} if regime != "tiles" else set())
    assert build_case({"selection_blocks": "none", "sparsity": "topk"}, target) is None  # dense exactly without blocks
    assert build_case({"selection_blocks": "multi_tile", "sparsity": "dense"}, target) is None
    assert build_case({"selection_blocks": "multi_tile"}, target).block_sparsity is not None  # a pattern is chosen
    if device_type == "cpu":  # (the CUDA universe needs the GPU's SM count; the CPU's is fixed)
        regimes = {next(iter(dimension("selection_blocks").classify(c, target))) for c in covering_array(target)}
        assert regimes == {"none", "tiles", "multi_tile", "sub_tile"}


def test_a_selection_beside_non_empty_neighbours_is_its_own_class():
    from jfa_verify.cases.coverage import classify

    assert "sparse_beside_neighbours" in classify(_case("edges", kv_lengths=(20, 33, 17)))
    assert "sparse_beside_neighbours" not in classify(_case("edges", kv_lengths=(20, 0, 0)))
    assert "sparse_beside_neighbours" not in classify(Case(kv_lengths=(20, 33, 17)))


def test_drawn_block_sparse_cases_pass_the_exact_plugin():
    from hypothesis import given, settings

    from jfa_verify.strategies import cases

    load_plugin(PLUGIN)
    kernel = get_kernel("block_sparse_ref")

    @settings(max_examples=10, deadline=None, database=None)
    @given(cases(kernel, dtypes=["float32"], block_sparse=True, max_batch=3))
    def check(case):
        result = run_case(case, kernel, "cpu")
        assert result.status == "pass", result.explain()

    check()
