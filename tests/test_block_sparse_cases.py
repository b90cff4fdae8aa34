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
