"""The block-sparse contract: a block selection's validation, its host view and the visibility rule it extends.

The expected masks here are built from the definition itself (query block ``i // block_m`` of the sequence, KV
block ``j // block_n``, both local to the sequence), independently of :mod:`jfa_verify.core.selection`.
"""

from __future__ import annotations

import pytest
import torch

from jfa_verify import BlockSelection, Capabilities, InvalidInput, validate_call, validate_inputs
from jfa_verify.core.contract import visible_mask, visible_masks

# three sequences: 20 rows (query blocks of 16: 2), none, 30 rows (2); keys alike (KV blocks of 16: 2, 0, 2)
OFF = torch.tensor([0, 20, 20, 50], dtype=torch.int32)
X = torch.randn(50, 2, 16)


def _sel(offsets, indices, block_m=16, block_n=16, dtype=torch.int32):
    return BlockSelection(block_m, block_n, torch.tensor(offsets, dtype=dtype), torch.tensor(indices, dtype=dtype))


GOOD = ([0, 1, 3, 3, 4], [1, 0, 1, 0])


def _expected_mask(q_len, k_len, blocks_of, block_m, block_n, causal=False):
    """From the definition: row i sees key j iff (causal: j <= i) and j // block_n in blocks_of[i // block_m]."""
    mask = torch.zeros(q_len, k_len, dtype=torch.bool)
    for i in range(q_len):
        for j in range(k_len):
            mask[i, j] = (not causal or j <= i) and (j // block_n) in blocks_of[i // block_m]
    return mask


def test_host_view_names_each_query_blocks_selection():
    p = validate_inputs(X, X, X, OFF, OFF, block_selection=_sel(*GOOD))
    sel = p.block_selection
    assert sel.block_sizes == (16, 16) and sel.q_block_starts == (0, 2, 2, 4)
    assert sel.offsets == (0, 1, 3, 3, 4) and sel.indices == (1, 0, 1, 0)
    assert [sel.selected(0, m) for m in range(2)] == [(1,), (0, 1)]
    assert [sel.selected(2, m) for m in range(2)] == [(), (0,)]
    assert sel.query_blocks(1) == 0
    with pytest.raises(IndexError):
        sel.selected(1, 0)
    assert validate_inputs(X, X, X, OFF, OFF).block_selection is None  # dense calls are unchanged


def test_visible_masks_apply_the_selection_with_the_mask():
    p = validate_inputs(X, X, X, OFF, OFF, causal=True, block_selection=_sel(*GOOD))
    lens = torch.tensor([[20, 30], [20, 30]])
    got = visible_masks(lens[0], lens[1], 30, 30, True, "top_left", None, p.block_selection, [0, 2])
    for s, (b, n) in enumerate(((0, 20), (2, 30))):
        blocks_of = [p.block_selection.selected(b, m) for m in range(-(-n // 16))]
        want = _expected_mask(n, n, blocks_of, 16, 16, causal=True)
        assert torch.equal(got[s, :n, :n], want)
        assert not got[s, n:].any() and not got[s, :, n:].any()  # padding stays invisible
        assert torch.equal(visible_mask(n, n, True, "top_left", "cpu", None, p.block_selection, b), want)
    # key_spans says the same row by row
    for b, n in ((0, 20), (2, 30)):
        mask = visible_mask(n, n, True, "top_left", "cpu", None, p.block_selection, b)
        for i in range(n):
            seen = torch.zeros(n, dtype=torch.bool)
            for lo, hi in p.key_spans(i, b):
                assert lo < hi
                seen[lo:hi] = True
            assert torch.equal(seen, mask[i]), (b, i)


def test_visible_masks_need_the_sequence_numbers_with_a_selection():
    p = validate_inputs(X, X, X, OFF, OFF, block_selection=_sel(*GOOD))
    lens = torch.tensor([20])
    with pytest.raises(InvalidInput, match="sequence number"):
        visible_masks(lens, lens, 20, 20, False, "top_left", None, p.block_selection)


def test_block_sizes_differ_and_rows_without_keys_are_empty_spans():
    # block_m 32, block_n 16: sequence 0 (20 rows) is one query block; sequence 2 (30 rows) one too
    sel = _sel([0, 1, 1], [1], block_m=32, block_n=16)
    p = validate_inputs(X, X, X, OFF, OFF, block_selection=sel)
    assert p.key_spans(5, 0) == ((16, 20),)  # the last, partial KV block
    assert p.key_spans(0, 2) == ()  # an empty selection: the row sees nothing
    mask = visible_mask(30, 30, False, "top_left", "cpu", None, p.block_selection, 2)
    assert not mask.any()


def test_validate_call_checks_the_tensors_without_reading_them():
    shape = validate_call(X, X, X, OFF, OFF, block_selection=_sel(*GOOD))
    assert shape.block_selection.block_sizes == (16, 16)
    with pytest.raises(InvalidInput, match="block_selection.indices.dtype=torch.float32"):
        validate_call(X, X, X, OFF, OFF, block_selection=BlockSelection(16, 16, torch.tensor([0]), torch.zeros(0)))


def test_capabilities_declare_block_pairs_and_refuse_the_rest():
    p = validate_inputs(X, X, X, OFF, OFF, block_selection=_sel(*GOOD))
    assert "no block-sparse path" in Capabilities().unsupported_reason(p)
    assert Capabilities(block_sparse=((16, 16),)).unsupported_reason(p) is None
    assert "(16, 16)" in Capabilities(block_sparse=[(32, 16)]).unsupported_reason(p)
    assert Capabilities(block_sparse=[[64, 32]]).block_sparse == ((64, 32),)
    for bad, text in ((((24, 16),), "block_m=24"), (((16, 512),), "block_n=512"), ((16, 16), "is not a (block_m"),
                      ("16x16", "not a tuple of pairs")):
        with pytest.raises(InvalidInput, match=text.replace("(", r"\(")):
            Capabilities(block_sparse=bad)


# (label, selection or a callable making it, text the error must contain)
BAD = [
    ("block_m not a power of two", lambda: BlockSelection(24, 16, *(torch.tensor(x) for x in GOOD)),
     "block_selection.block_m=24 is not a power of two"),
    ("block_n too large", lambda: BlockSelection(16, 512, *(torch.tensor(x) for x in GOOD)),
     "block_selection.block_n=512"),
    ("block_m too small", lambda: BlockSelection(8, 16, *(torch.tensor(x) for x in GOOD)), "block_m=8"),
    ("block size not an int", lambda: BlockSelection(16.0, 16, *(torch.tensor(x) for x in GOOD)), "not an int"),
    ("not a BlockSelection", lambda: GOOD, "is not a jfa_verify.BlockSelection"),
    ("offsets float", lambda: BlockSelection(16, 16, torch.tensor(GOOD[0], dtype=torch.float32), torch.tensor(GOOD[1])),
     "block_selection.offsets.dtype=torch.float32"),
    ("indices int16", lambda: BlockSelection(16, 16, torch.tensor(GOOD[0]), torch.tensor(GOOD[1], dtype=torch.int16)),
     "block_selection.indices.dtype=torch.int16"),
    ("offsets 2-D", lambda: BlockSelection(16, 16, torch.tensor([GOOD[0]]), torch.tensor(GOOD[1])), "must be 1-D"),
    ("indices a list", lambda: BlockSelection(16, 16, torch.tensor(GOOD[0]), GOOD[1]), "must be a 1-D int32/int64"),
    ("offsets strided", lambda: BlockSelection(16, 16, torch.tensor([0, 9, 1, 9, 3, 9, 3, 9, 4])[::2],
                                               torch.tensor(GOOD[1])), "not contiguous"),
    ("offsets on the meta device", lambda: BlockSelection(16, 16, torch.tensor(GOOD[0], device="meta"),
                                                          torch.tensor(GOOD[1])), "differs from q.device"),
    ("offsets too short", lambda: _sel([0, 1, 3, 4], [1, 0, 1, 0]), "needs NQB + 1 = 5"),
    ("offsets too long", lambda: _sel([0, 1, 3, 3, 4, 4], [1, 0, 1, 0]), "has 6 entries"),
    ("offsets not from 0", lambda: _sel([1, 1, 3, 3, 4], [1, 0, 1, 0]), "offsets[0]=1 is not 0"),
    ("offsets decreasing", lambda: _sel([0, 2, 1, 3, 4], [1, 0, 1, 0]),
     "offsets is not non-decreasing: block_selection.offsets[1]=2 > block_selection.offsets[2]=1 (query block 1"),
    ("offsets end short of nnz", lambda: _sel([0, 1, 3, 3, 3], [1, 0, 1, 0]), "offsets[-1]=3 does not equal"),
    ("index past the sequence", lambda: _sel([0, 1, 3, 3, 4], [1, 0, 2, 0]), "indices[2]=2"),
    ("index negative", lambda: _sel([0, 1, 3, 3, 4], [-1, 0, 1, 0]), "indices[0]=-1"),
    ("index in the next sequence's blocks", lambda: _sel([0, 1, 3, 3, 4], [1, 0, 1, 3], dtype=torch.int64),
     "indices[3]=3"),
    ("indices unsorted", lambda: _sel([0, 1, 3, 3, 4], [1, 1, 0, 0]), "are not increasing"),
    ("indices duplicated", lambda: _sel([0, 1, 3, 3, 4], [1, 1, 1, 0]), "are duplicated"),
]


@pytest.mark.parametrize("label, make, text", BAD, ids=[b[0] for b in BAD])
def test_bad_selections_raise_naming_the_value_and_the_fix(label, make, text):
    with pytest.raises(InvalidInput) as info:
        validate_inputs(X, X, X, OFF, OFF, block_selection=make())
    assert text in str(info.value), str(info.value)


def test_unsorted_across_query_blocks_is_fine():
    # a new query block may start lower than the previous one ended: only within a block must indices increase
    p = validate_inputs(X, X, X, OFF, OFF, block_selection=_sel([0, 2, 3, 4, 5], [0, 1, 0, 1, 0]))
    assert p.block_selection.selected(0, 1) == (0,)


def test_the_selection_read_by_kv_block_lists_each_kv_blocks_query_blocks_in_order():
    # the framework's transposed selection (scheduling/selected.py), which prices dK/dV tiles and feeds a dK/dV
    # kernel: sequence 0 (40 queries, 3 query blocks; 40 keys, 3 KV blocks) selects {0}, {0, 1}, {2};
    # sequence 1 (20 queries and keys, 2 blocks each) selects {1}, {0, 1}
    from jfa_verify.scheduling.selected import transposed_selection

    q = torch.zeros(60, 1, 16)
    off = torch.tensor([0, 40, 60], dtype=torch.int32)
    sel = _sel([0, 1, 3, 4, 5, 7], [0, 0, 1, 2, 1, 0, 1])
    starts, offsets, indices = transposed_selection(validate_inputs(q, q, q, off, off, block_selection=sel))
    assert starts == [0, 3, 5]
    by_kv = [indices[offsets[t]:offsets[t + 1]] for t in range(starts[-1])]
    assert by_kv == [[0, 1], [1], [2], [1], [0, 1]]
    with pytest.raises(ValueError, match="dense"):
        transposed_selection(validate_inputs(q, q, q, off, off))
