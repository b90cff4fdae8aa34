"""Sliding windows: the one visibility rule, its validation, cases, capabilities, and triton_jfa on windows."""

import pytest
import torch
from hypothesis import find, given, settings
from hypothesis import strategies as st

from jfa_verify import Case, InvalidInput, run_case, validate_inputs
from jfa_verify.cases.coverage import WINDOW_CLASSES, Coverage, classify
from jfa_verify.core.contract import check_window, key_range, keys_seen, mask_kind, rows_seeing, visible_mask
from jfa_verify.protocol.kernel import Capabilities, Kernel
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.scheduling.schedules import workloads_backward, workloads_forward
from jfa_verify.strategies import cases, windows

SIDES = st.one_of(st.just(-1), st.integers(0, 12))
WINDOWS = st.one_of(st.none(), st.tuples(SIDES, SIDES).map(check_window))
PARAMS = dict(q_len=st.integers(0, 14), k_len=st.integers(0, 14), causal=st.booleans(),
              alignment=st.sampled_from(["top_left", "bottom_right"]), window=WINDOWS)


def brute(q_len, k_len, causal, alignment, window):
    """The contract's rule written out per element (the docstring's inequalities)."""
    shift = 0 if alignment == "top_left" else k_len - q_len
    out = torch.zeros(q_len, k_len, dtype=torch.bool)
    for i in range(q_len):
        for j in range(k_len):
            d = i + shift
            ok = True
            if causal:
                ok &= j <= d
            if window is not None:
                left, right = window
                ok &= (left < 0 or j >= d - left) and (right < 0 or j <= d + right)
            out[i, j] = ok
    return out


@given(**PARAMS)
@settings(max_examples=300, deadline=None)
def test_mask_and_key_range_follow_the_documented_rule(q_len, k_len, causal, alignment, window):
    expected = brute(q_len, k_len, causal, alignment, window)
    assert torch.equal(visible_mask(q_len, k_len, causal, alignment, "cpu", window), expected)
    for i in range(q_len):
        lo, hi = key_range(i, q_len, k_len, causal, alignment, window)
        assert 0 <= lo <= hi <= k_len
        row = torch.zeros(k_len, dtype=torch.bool)
        row[lo:hi] = True
        assert torch.equal(row, expected[i]), (i, lo, hi)


@given(**PARAMS, block=st.integers(1, 6))
@settings(max_examples=300, deadline=None)
def test_tile_costs_are_the_union_of_visible_rows_and_keys(q_len, k_len, causal, alignment, window, block):
    mask = brute(q_len, k_len, causal, alignment, window)
    for first in range(0, q_len, block):
        last = min(q_len, first + block) - 1
        seen = mask[first:last + 1].any(0)
        assert keys_seen(first, last, q_len, k_len, causal, alignment, window) == int(seen.sum()), (first, last)
    for first in range(0, k_len, block):
        end = min(k_len, first + block)
        assert rows_seeing(first, end, q_len, k_len, causal, alignment, window) == int(mask[:, first:end].any(1).sum())
    # spans reaching past the keys on either side count the rows that see the keys inside them
    for first, end in ((-block, block), (k_len - block, k_len + block), (-block, k_len + block), (k_len, k_len + 3)):
        inside = mask[:, max(first, 0): max(0, min(end, k_len))]
        assert (rows_seeing(first, end, q_len, k_len, causal, alignment, window)
                == int(inside.any(1).sum())), (first, end)


def test_flashattention_and_tlx_conventions():
    # FlashAttention: window_size=(2, 1), bottom-right: keys [i + Lk - Lq - 2, i + Lk - Lq + 1]
    assert key_range(0, 3, 8, False, "bottom_right", (2, 1)) == (3, 7)
    # causal caps the right side at the diagonal
    assert key_range(0, 3, 8, True, "bottom_right", (2, 1)) == (3, 6)
    # TLX: |i - j| <= w, top-left (w=1)
    assert [key_range(i, 4, 4, False, "top_left", (1, 1)) for i in range(4)] == [(0, 2), (0, 3), (1, 4), (2, 4)]
    # a row the window leaves with no key: lo == hi, past the keys
    assert key_range(9, 10, 3, False, "top_left", (0, 0)) == (3, 3)
    assert mask_kind(True, (1, 1)) == "causal+window" and mask_kind(False, None) == "none"


@pytest.mark.parametrize("window, match", [
    (3, r"window=3 is one number; pass \(left, right\), e.g. \(3, 3\)"),
    ((1, 2, 3), r"window=\(1, 2, 3\) is not a pair"),
    ((-2, 1), r"left=-2 is below -1"),
    ((1, 2.5), r"right=2.5 is not an int"),
    ((True, 1), r"left=True is not an int"),
    ("ab", r"is not a pair"),
])
def test_bad_window_names_the_value_and_fix(window, match):
    q = torch.randn(6, 2, 16)
    off = torch.tensor([0, 2, 6], dtype=torch.int32)
    with pytest.raises(InvalidInput, match=match):
        validate_inputs(q, q, q, off, off, window=window)
    with pytest.raises(InvalidInput, match=match):
        Case(kv_lengths=(2, 4), window=window)


def test_unbounded_window_is_no_window():
    q = torch.randn(6, 2, 16)
    off = torch.tensor([0, 2, 6], dtype=torch.int32)
    assert validate_inputs(q, q, q, off, off, window=(-1, -1)).window is None
    assert validate_inputs(q, q, q, off, off, window=[3, -1]).window == (3, -1)
    assert Case(kv_lengths=(2,), window=[-1, -1]) == Case(kv_lengths=(2,))


def test_case_window_round_trips_and_old_ids_stay():
    plain = Case(kv_lengths=(5, 3), causal=True)
    assert "window" not in plain.to_dict()  # a late field: old case files and ids unchanged
    old = Case.from_dict({"kv_lengths": [5, 3], "causal": True})  # (a file from before the counter generator)
    assert old.case_id() == Case(kv_lengths=(5, 3), causal=True, window=(-1, -1), generator="pcg64").case_id()
    win = Case(kv_lengths=(5, 3), causal=True, window=(2, -1), causal_alignment="bottom_right")
    assert win.to_dict()["window"] == [2, -1]
    assert Case.from_json(win.to_json()) == win and win.case_id() != plain.case_id()
    assert "causal+window[2, -1]/bottom_right" in win.describe()
    assert win.contract_kwargs()["window"] == (2, -1) and "window" not in plain.contract_kwargs()


def test_capabilities_declare_masks():
    q = torch.randn(6, 2, 16)
    off = torch.tensor([0, 2, 6], dtype=torch.int32)
    qo = torch.tensor([0, 3, 6], dtype=torch.int32)
    square = validate_inputs(q, q, q, off, off, window=(1, 2))
    cross = validate_inputs(q, q, q, qo, off, window=(1, 1), causal_alignment="bottom_right")
    assert "mask='window' not supported" in Capabilities().unsupported_reason(square)
    tlx = Capabilities(masks=("none", "window"), causal_alignments=("top_left",), symmetric_window=True)
    assert "not symmetric" in tlx.unsupported_reason(square)
    # alignment is irrelevant when every sequence is square, and matters otherwise
    assert tlx.unsupported_reason(validate_inputs(q, q, q, off, off, window=(2, 2),
                                                  causal_alignment="bottom_right")) is None
    assert "L_q != L_k" in tlx.unsupported_reason(cross)
    with pytest.raises(InvalidInput, match="masks=.*subset"):
        Capabilities(masks=("sliding",))


def test_workloads_follow_the_window():
    # one sequence of 8 queries and 8 keys, window (0, 0): each 4-row tile sees 4 keys
    assert [t.cost for t in workloads_forward([8], [8], 4, window=(0, 0))] == [4, 4]
    # window (1, 0): keys 0..3 are seen by rows 0..4, keys 4..7 by rows 4..7
    assert [t.cost for t in workloads_backward([8], [8], 4, window=(1, 0))] == [5, 4]
    # keys past the window of every row: a tile with rows but no key still runs (cost 0, not empty)
    (tile,) = workloads_forward([2], [9], 4, window=(0, 0), causal_alignment="top_left")
    assert tile.cost == 2 and tile.rows == 2
    with pytest.raises(InvalidInput, match="left=-3"):
        workloads_forward([2], [2], 4, window=(-3, 0))


def test_window_strategy_and_coverage():
    kernel = get_kernel("triton_jfa")
    cov = Coverage.for_kernel(kernel)

    @given(case=cases(kernel, max_batch=4, max_len=40, window=True))
    @settings(max_examples=150, database=None, deadline=None, derandomize=True)
    def draw(case):
        assert case.window is not None
        cov.add(case)

    draw()
    assert cov.missing(WINDOW_CLASSES) == [], cov.format(WINDOW_CLASSES)

    @given(w=windows((32, 16), max_len=20, symmetric=True))
    @settings(max_examples=50, database=None)
    def symmetric(w):
        assert w[0] == w[1] >= 0

    symmetric()
    no_window = Kernel("plain", "", lambda: None, Capabilities())
    with pytest.raises(InvalidInput, match="declares no 'window' mask"):
        find(cases(no_window, window=True, causal=False), lambda c: True)
    assert "window" not in classify(Case(kv_lengths=(3,)))


@pytest.mark.parametrize("window, causal, alignment, mode", [
    ((0, 0), False, "top_left", "self"),
    ((1, 1), False, "top_left", "self"),
    ((15, 17), False, "bottom_right", "cross"),
    ((3, -1), True, "bottom_right", "cross"),
    ((-1, 2), False, "top_left", "cross"),
    ((2, 5), False, "bottom_right", "broadcast_q"),
])
def test_triton_jfa_passes_window_cases(window, causal, alignment, mode, jfa_device):
    extra = {"cross": dict(q_lengths=(40, 3, 0, 20)), "broadcast_q": dict(broadcast_q_len=33)}.get(mode, {})
    case = Case(kv_lengths=(35, 17, 5, 1), mode=mode, window=window, causal=causal, causal_alignment=alignment,
                dtype="float32", num_heads_q=2, num_heads_kv=1, **extra)
    result = run_case(case, get_kernel("triton_jfa"), jfa_device)
    assert result.status == "pass", result.explain()
    assert not result.findings_of("schedule")


def test_triton_jfa_window_wider_than_every_sequence_is_bit_identical_to_no_window(jfa_device):
    """The window path (every KV block masked) does the same arithmetic as the unwindowed one when the window
    covers everything, so the window machinery cannot perturb unwindowed results' bits."""
    kernel = get_kernel("triton_jfa")
    base = Case(kv_lengths=(35, 17, 0, 1), dtype="bfloat16", num_heads_q=4, num_heads_kv=2, causal=True, seed=3)
    outs = []
    for window in (None, (60, 60)):
        t = Case.from_dict({**base.to_dict(), **({"window": window} if window else {})}).materialize(jfa_device)
        q, k, v = (x.detach().clone().requires_grad_(True) for x in (t.q, t.k, t.v))
        o, lse = kernel(q, k, v, t.q_offsets, t.k_offsets, causal=True, **({"window": window} if window else {}))
        o.backward(t.do)
        outs.append([o.detach(), lse, q.grad, k.grad, v.grad])
    for a, b in zip(*outs):
        assert torch.equal(a, b)


def test_blockwise_oracle_agrees_on_windows():
    from jfa_verify.oracles import blockwise_attention, reference_attention

    case = Case(kv_lengths=(30, 7, 0), q_lengths=(9, 20, 3), mode="cross", window=(3, 5),
                causal_alignment="bottom_right", dtype="float32")
    t = case.materialize("cpu")
    problem = case.problem(t)
    ref = reference_attention(problem, t.q, t.k, t.v, do=t.do)
    blk = blockwise_attention(problem, t.q, t.k, t.v, do=t.do, block_m=4, block_n=3)
    for name in ("o", "lse", "dq", "dk", "dv"):
        assert torch.allclose(blk[name], ref[name], atol=1e-12, equal_nan=False), name
    assert torch.isneginf(ref["lse"]).any()  # rows past the window's reach: -inf, O = 0


def test_tile_costs_of_sequences_of_two_billion_tokens_are_exact():
    # rows_seeing is a closed form (no per-row or per-step loop): the extremes of a 2^31-token sequence, by hand
    n = 2**31
    assert rows_seeing(0, 128, n, n, True, "top_left") == n  # every row sees key 0
    assert rows_seeing(n - 128, n, n, n, True, "top_left") == 128  # only the last 128 rows reach the last keys
    assert rows_seeing(n - 128, n, n, n, False, "top_left") == n
    # bottom-right, 10 queries on n keys: row i's diagonal is key n - 10 + i; keys [0, 128) are seen by all 10
    assert rows_seeing(0, 128, 10, n, True, "bottom_right") == 10
    assert rows_seeing(n - 5, n, 10, n, True, "bottom_right") == 5
    # a window (left 3, right 1) around top-left's diagonal: keys [1000, 1128) meet rows [999, 1130]
    assert rows_seeing(1000, 1128, n, n, False, "top_left", (3, 1)) == 1130 - 999 + 1
    assert rows_seeing(5, 3, n, n, False, "top_left") == 0  # an empty span of keys meets no row
