"""The three references agree with each other and with hand-computable cases."""

import itertools
import math

import pytest
import torch

from jfa_verify import Case
from jfa_verify.oracles import blockwise_attention, padded_sdpa_attention, reference_attention
from tests.helpers import oracle


def _finite_close(a, b, atol):
    a, b = a.double(), b.double()
    assert torch.equal(torch.isinf(a), torch.isinf(b))
    fin = torch.isfinite(b)
    assert (a[fin] - b[fin]).abs().max().item() <= atol if fin.any() else True


CASES = [
    Case(kv_lengths=(5, 0, 17, 1), dtype="float32", num_heads_q=4, num_heads_kv=2, head_dim=16, seed=1),
    Case(kv_lengths=(6, 9, 0), mode="cross", q_lengths=(9, 3, 4), dtype="float32", causal=True,
         causal_alignment="bottom_right", head_dim=16, head_dim_v=24, seed=2),
    Case(kv_lengths=(6, 9, 0), mode="cross", q_lengths=(9, 3, 4), dtype="float32", causal=True, head_dim=16, seed=3),
    Case(kv_lengths=(4, 11, 0, 7), mode="broadcast_q", broadcast_q_len=5, dtype="float32", num_heads_q=2,
         num_heads_kv=1, head_dim=16, seed=4, offsets_start=3),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.describe())
def test_references_agree(case):
    t = case.materialize()
    kw = dict(causal=case.causal, causal_alignment=case.causal_alignment, do=t.do)
    ref = oracle(reference_attention, *t.call_args(), **kw)
    sdpa = oracle(padded_sdpa_attention, *t.call_args(), **kw)
    blk = oracle(blockwise_attention, *t.call_args(), block_m=4, block_n=3, **kw)
    for name in ("o", "lse", "dq", "dk", "dv"):
        _finite_close(blk[name], ref[name], 1e-12)  # the algorithm, in float64: exact to rounding
        _finite_close(sdpa[name], ref[name], 2e-5)  # float32 SDPA


def test_blockwise_float32_with_rounded_p_is_close():
    case = Case(kv_lengths=(20, 33), dtype="bfloat16", head_dim=16, causal=True)
    t = case.materialize()
    ref = oracle(reference_attention, *t.call_args(), causal=True, do=t.do)
    blk = oracle(blockwise_attention, *t.call_args(), causal=True, do=t.do, compute_dtype=torch.float32,
                 round_p=True)
    for name in ("o", "dq", "dk", "dv"):
        err = (blk[name].double() - ref[name]).abs().max().item()
        assert 1e-6 < err < 0.05 * ref[name].abs().max().item(), name  # rounding shows, but small


def test_single_key_returns_its_value_row():
    q = torch.randn(3, 1, 16, dtype=torch.float64).float()
    k = torch.randn(1, 1, 16)
    v = torch.randn(1, 1, 16)
    q_off = torch.tensor([0, 3])
    k_off = torch.tensor([0, 1])
    for fn in (reference_attention, padded_sdpa_attention, blockwise_attention):
        out = oracle(fn, q, k, v, q_off, k_off)
        assert torch.allclose(out["o"].double(), v.double().expand(3, 1, 16), atol=1e-6)
        scores = (q.double() @ k.double()[0, 0]) / 4.0  # [3, 1]
        assert torch.allclose(out["lse"].double(), scores.T, atol=1e-5)


def test_identical_keys_return_mean_of_values():
    q = torch.randn(4, 2, 16)
    k = torch.randn(1, 2, 16).expand(6, 2, 16).contiguous()
    v = torch.randn(6, 2, 16)
    off = torch.tensor([0, 4])
    koff = torch.tensor([0, 6])
    for fn in (reference_attention, padded_sdpa_attention, blockwise_attention):
        out = oracle(fn, q, k, v, off, koff)
        assert torch.allclose(out["o"].double(), v.double().mean(0, keepdim=True).expand(4, 2, 16), atol=1e-5)
        # lse = score + log(6) for every key identical
        s = torch.einsum("ihd,hd->hi", q.double(), k[0].double()) / 4.0
        assert torch.allclose(out["lse"].double(), s + math.log(6), atol=1e-5)


def test_query_with_no_visible_key_is_zero_and_minus_inf():
    # Bottom-right causal with L_k=2 < L_q=5: rows 0..2 see no key; L_k=0 sees nothing.
    q = torch.randn(7, 1, 16)
    k = torch.randn(2, 1, 16)
    v = torch.randn(2, 1, 16)
    q_off = torch.tensor([0, 5, 7])
    k_off = torch.tensor([0, 2, 2])
    do = torch.randn(7, 1, 16)
    for fn in (reference_attention, padded_sdpa_attention, blockwise_attention):
        out = oracle(fn, q, k, v, q_off, k_off, causal=True, causal_alignment="bottom_right", do=do)
        empty = [0, 1, 2, 5, 6]
        assert torch.all(out["o"][empty] == 0)
        assert torch.all(torch.isneginf(out["lse"][:, empty]))
        assert torch.all(torch.isfinite(out["lse"][:, [3, 4]]))
        assert torch.all(out["dq"][empty] == 0)
        assert not any(torch.isnan(out[n]).any() for n in out)


def test_broadcast_q_dq_is_sum_over_sequences():
    case = Case(kv_lengths=(3, 5), mode="broadcast_q", broadcast_q_len=4, dtype="float32", head_dim=16)
    t = case.materialize()
    full = oracle(reference_attention, *t.call_args(), do=t.do)
    parts = []
    for b, (s, e) in enumerate([(0, 3), (3, 8)]):
        koff = torch.tensor([0, e - s], dtype=torch.int32)
        qoff = torch.tensor([0, 4], dtype=torch.int32)
        parts.append(oracle(reference_attention, t.q, t.k[s:e], t.v[s:e], qoff, koff, do=t.do[4 * b : 4 * b + 4])["dq"])
    assert torch.allclose(full["dq"], parts[0] + parts[1], atol=1e-12)


@pytest.fixture
def buckets_only(monkeypatch):
    """Small test batches are padded by length bucket as large skewed ones are, not merged into one group."""
    import jfa_verify.oracles._common as common

    monkeypatch.setattr(common, "SMALL_BATCH_SCORES", 0)
    monkeypatch.setattr(common, "PADDING_FACTOR", 0)


def test_a_batch_is_one_group_unless_padding_it_whole_costs_more_than_its_buckets():
    from jfa_verify.oracles._common import length_groups

    def groups(lengths, heads=1, max_scores=1 << 30):
        t = Case(kv_lengths=lengths, num_heads_q=heads, num_heads_kv=heads, head_dim=16, dtype="float32")
        return length_groups(t.problem(t.materialize("cpu")), max_scores)

    assert groups((5, 0, 17, 9)) == [[0, 2, 3]]  # small: one call
    assert groups((200,) * 6 + (150, 130)) == [list(range(8))]  # padded to 200: under 4x its scores
    skewed = groups((1,) * 20 + (300,))  # padding every sequence to 300 keys: 21 x 300^2 scores for 300^2 + 20
    assert len(skewed) == 2 and skewed[-1] == [20]
    assert len(groups((200,) * 6, max_scores=200 * 200 * 3)) == 2  # the cap splits even a uniform batch


def test_padded_sdpa_in_length_groups_equals_it_one_sequence_at_a_time(monkeypatch, buckets_only):
    """The padded SDPA oracle pads sequences of similar lengths together (``sequence_groups``), no longer the whole
    batch to its longest sequence (a skewed batch's cost); each group also bounds the LSE's float32 score block
    (the whole-batch block was 128.5 GiB for the 2^31-element case on the H200). With ``GROUP_SCORE_ELEMENTS = 1``
    every sequence runs alone, unpadded: the same outputs and gradients, and both agree with the float64 reference."""
    import jfa_verify.oracles.padded_sdpa as mod

    case = Case(kv_lengths=(5, 0, 17, 9, 1, 30, 6, 7, 18), num_heads_q=2, num_heads_kv=1, head_dim=16,
                dtype="float32", causal=True, causal_alignment="bottom_right", seed=4)
    t = case.materialize("cpu")
    problem = case.problem(t)
    groups = mod.sequence_groups(problem)
    assert any(len(g) > 1 for g in groups) and len(groups) > 1  # grouped, and not the whole batch as one
    assert sorted(b for g in groups for b in g) == [b for b in range(problem.batch) if problem.q_lengths[b]]
    kw = dict(causal=True, causal_alignment="bottom_right", do=t.do)
    grouped = oracle(padded_sdpa_attention, *t.call_args(), **kw)
    monkeypatch.setattr(mod, "GROUP_SCORE_ELEMENTS", 1)
    assert all(len(g) == 1 for g in mod.sequence_groups(problem))
    alone = oracle(padded_sdpa_attention, *t.call_args(), **kw)
    ref = oracle(reference_attention, *t.call_args(), **kw)
    for name in ("o", "lse", "dq", "dk", "dv"):
        assert torch.equal(torch.isinf(grouped[name]), torch.isinf(alone[name])), name
        assert torch.equal(torch.isinf(grouped[name]), torch.isinf(ref[name])), name
        _finite_close(grouped[name], alone[name], 1e-5)
        _finite_close(grouped[name].double(), ref[name], 2e-5)


def test_forward_only_reference_keeps_the_forward_floor_terms():
    """Regression: without ``do`` the reference dropped ``o_acc`` and ``lse_acc``, so forward-only
    runs (the float8 row) judged LSE and O without their accumulation floors; an H200 float8 case
    (one query, 192 keys) then failed LSE at 17x its allowance."""
    case = Case(kv_lengths=(7, 3), mode="cross", q_lengths=(1, 2), dtype="float32", head_dim=16, seed=5,
                values="correlated")
    t = case.materialize("cpu")
    with_do = oracle(reference_attention, *t.call_args(), do=t.do)
    forward = oracle(reference_attention, *t.call_args())
    for name in ("o_lowp", "o_acc", "lse_acc"):
        assert name in forward, name
        assert float(forward[name]) == float(with_do[name]) > 0
    # lse_acc = 1 + max_rows sum_j P_ij |S_ij|, computed here by hand for the first sequence's row.
    q, k = t.q[:1].double(), t.k[:7].double()
    s = (q[:, 0] @ k[:, 0].T) / math.sqrt(case.head_dim)
    p = torch.softmax(s, -1)
    assert float(forward["lse_acc"]) >= 1 + float((p * s.abs()).sum())
    assert not any(name in forward for name in ("dq_acc", "dk_acc", "dv_acc", "dq_lowp"))


def test_the_padded_oracle_reads_only_the_rows_sequences_use():
    # regression (H200): the 2^31-element case ran out of the card's 139 GiB inside this oracle, which cloned
    # q, k and v whole (and took whole-buffer gradients) although its sequences use a few hundred rows.
    # Here 2^20 rows precede the sequences: no operation may copy a whole input buffer (the whole-size
    # outputs the contract asks for are made by allocating, and views copy nothing).
    from torch.utils._python_dispatch import TorchDispatchMode

    class LargeResults(TorchDispatchMode):
        def __init__(self, limit):
            super().__init__()
            self.limit, self.ops = limit, set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            inputs = {a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs))
                      if isinstance(a, torch.Tensor)}
            for t in out if isinstance(out, (tuple, list)) else (out,):  # new memory of a whole buffer's size
                if isinstance(t, torch.Tensor) and t.numel() >= self.limit and \
                        t.untyped_storage().data_ptr() not in inputs:
                    self.ops.add(func.overloadpacket.__name__)
            return out

    gen = torch.Generator().manual_seed(1)
    start = 2**20  # rows before the two sequences (3 and 5 tokens)
    compact_qkv = [torch.randn(8, 1, 16, generator=gen) for _ in range(3)]
    q, k, v = (torch.cat([torch.zeros(start, 1, 16), x]) for x in compact_qkv)
    do = torch.cat([torch.zeros(start, 1, 16), torch.randn(8, 1, 16, generator=gen)])
    offsets = torch.tensor([start, start + 3, start + 8], dtype=torch.int64)
    with LargeResults(start * 16) as seen:
        got = oracle(padded_sdpa_attention, q, k, v, offsets, offsets, causal=True, do=do)
    assert seen.ops <= {"zeros", "zeros_like", "full", "new_zeros", "index_put_", "empty", "empty_like"}, seen.ops
    compact = oracle(padded_sdpa_attention, *compact_qkv, offsets - start, offsets - start, causal=True, do=do[start:])
    for name in ("o", "dq", "dk", "dv"):
        assert got[name].shape == (start + 8, 1, 16)
        assert torch.equal(got[name][start:], compact[name]) and not got[name][:start].any(), name
    assert torch.equal(got["lse"][:, start:], compact["lse"])


def test_padded_oracle_gradients_land_on_the_rows_read_and_nowhere_else():
    # the oracle's gradients are gathered-row leaves scattered back: the same as autograd through the packed
    # buffers, zero on rows outside every sequence, summed where GQA heads share a KV head
    case = Case(kv_lengths=(4, 11, 0, 7), mode="cross", q_lengths=(3, 5, 2, 7), dtype="float32", num_heads_q=4,
                num_heads_kv=2, head_dim=16, seed=5, offsets_start=6, causal=True)
    t = case.materialize()
    kw = dict(causal=True, causal_alignment=case.causal_alignment, do=t.do)
    sdpa = oracle(padded_sdpa_attention, *t.call_args(), **kw)
    ref = oracle(reference_attention, *t.call_args(), **kw)
    for name in ("dq", "dk", "dv"):
        assert sdpa[name].shape == ref[name].shape
        _finite_close(sdpa[name], ref[name], 2e-5)
        assert not sdpa[name][:6].any(), name  # the rows before offsets_start belong to no sequence


GROUPED = [
    Case(kv_lengths=(5, 7, 0, 6, 17, 1, 20, 31, 16), dtype="float32", num_heads_q=6, num_heads_kv=2, head_dim=16,
         causal=True, causal_alignment="bottom_right", values="large_logits", seed=5),
    Case(kv_lengths=(6, 5, 0, 7, 12, 5), mode="cross", q_lengths=(9, 0, 4, 6, 13, 10), dtype="bfloat16",
         causal=True, causal_alignment="bottom_right", window=(3, 1), head_dim=16, head_dim_v=24, seed=6),
    Case(kv_lengths=(4, 11, 0, 7, 9, 5), mode="broadcast_q", broadcast_q_len=5, dtype="float32", num_heads_q=3,
         num_heads_kv=1, head_dim=16, window=(2, 4), seed=7, offsets_start=3),
]


@pytest.mark.parametrize("case", GROUPED, ids=lambda c: c.describe())
def test_the_reference_padded_in_groups_equals_it_one_sequence_at_a_time(case, monkeypatch, buckets_only):
    """The float64 reference pads sequences of similar lengths into one batch (``sequence_groups``); with
    ``GROUP_SCORE_ELEMENTS = 1`` every sequence runs alone, unpadded. Both must give the same outputs,
    gradients and error-scale terms (to float64 rounding): padded rows and keys add exact zeros."""
    import jfa_verify.oracles.float64 as mod

    t = case.materialize("cpu")
    problem = case.problem(t)
    groups = mod.sequence_groups(problem)
    assert any(len(g) > 1 for g in groups) and sorted(b for g in groups for b in g) == [
        b for b in range(problem.batch) if problem.q_lengths[b]]
    grouped = reference_attention(problem, t.q, t.k, t.v, do=t.do)
    monkeypatch.setattr(mod, "GROUP_SCORE_ELEMENTS", 1)
    assert all(len(g) == 1 for g in mod.sequence_groups(problem))
    alone = reference_attention(problem, t.q, t.k, t.v, do=t.do)
    assert grouped.keys() == alone.keys()
    for name in grouped:
        a, b = grouped[name], alone[name]
        assert torch.equal(torch.isinf(a), torch.isinf(b)) and not a.isnan().any(), name
        fin = torch.isfinite(b)
        assert torch.allclose(a[fin], b[fin], rtol=1e-12, atol=1e-12), name


@pytest.mark.parametrize("case", [
    Case(kv_lengths=(300,), dtype="float32", num_heads_q=4, num_heads_kv=2, head_dim=16, causal=True, window=(40, 7),
         seed=3),
    Case(kv_lengths=(90, 0, 70), mode="cross", q_lengths=(120, 5, 33), dtype="bfloat16", causal=True,
         causal_alignment="bottom_right", head_dim=16, head_dim_v=24, seed=4),
], ids=lambda c: c.describe())
def test_a_sequence_too_large_for_one_group_runs_in_blocks_of_query_rows(case, monkeypatch):
    """A sequence with more scores than ``GROUP_SCORE_ELEMENTS`` runs in blocks of query rows, so that no score
    tensor holds more than that (one 25k x 25k windowed float32 case held 63 GiB at once on the H200 and went
    unjudged); its outputs, gradients and error-scale terms equal those of one block (to float64 rounding)."""
    import jfa_verify.oracles.float64 as mod

    t = case.materialize("cpu")
    problem = case.problem(t)
    whole = reference_attention(problem, t.q, t.k, t.v, do=t.do, by_sequence=True)
    limit = 4 * problem.num_heads_q * max(problem.k_lengths)  # four query rows of the longest sequence
    scores = []
    einsum = torch.einsum

    def spy(spec, *operands):
        out = einsum(spec, *operands)
        if spec.endswith("->nhij"):
            scores.append(out.numel())
        return out

    monkeypatch.setattr(mod, "GROUP_SCORE_ELEMENTS", limit)
    monkeypatch.setattr(torch, "einsum", spy)
    blocked = reference_attention(problem, t.q, t.k, t.v, do=t.do, by_sequence=True)
    assert scores and max(scores) <= limit
    assert len(scores) >= 2 * max(problem.q_lengths) // 4  # forward and backward: one per block of 4 rows
    assert whole.keys() == blocked.keys()
    for name in whole:
        a, b = whole[name], blocked[name]
        assert torch.equal(torch.isinf(a), torch.isinf(b)) and not b.isnan().any(), name
        fin = torch.isfinite(a)
        assert torch.allclose(b[fin], a[fin], rtol=1e-12, atol=1e-12), name


@pytest.mark.parametrize("case", [c for c in GROUPED if c.dtype == "float32"], ids=lambda c: c.describe())
def test_the_padded_sdpa_oracle_in_groups_agrees_with_the_reference(case, buckets_only):
    # windows, GQA, bottom-right masks and broadcast-Q (whose sequences share query rows, so dQ sums over groups)
    t = case.materialize("cpu")
    problem = case.problem(t)
    from jfa_verify.oracles.padded_sdpa import sequence_groups

    assert len(sequence_groups(problem)) > 1
    ref = reference_attention(problem, t.q, t.k, t.v, do=t.do)
    sdpa = padded_sdpa_attention(problem, t.q, t.k, t.v, do=t.do)
    for name in ("o", "lse", "dq", "dk", "dv"):  # float32 rounding, relative to the largest magnitude (large logits)
        fin = torch.isfinite(ref[name])
        _finite_close(sdpa[name], ref[name], 1e-5 * max(1.0, ref[name][fin].abs().max().item()))


@pytest.mark.parametrize("shape", [(7, 4, 16), (8, 2, 16), (8, 4, 8), (8, 1, 16)])
def test_both_references_refuse_an_output_gradient_not_shaped_like_the_output(shape):
    # regression (new-user trial): the padded SDPA oracle took a wrong `do` and failed deep inside with an
    # IndexError or an autograd shape mismatch; the float64 reference named the bad shape
    from jfa_verify.core.errors import InvalidInput

    case = Case(kv_lengths=(3, 5), num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float32")
    t = case.materialize("cpu")
    problem = case.problem(t)
    for fn in (reference_attention, padded_sdpa_attention, blockwise_attention):  # (blockwise broadcast some)
        with pytest.raises(InvalidInput, match=r"do.shape=\(%d, %d, %d\) must equal o.shape=\(8, 4, 16\)" % shape):
            fn(problem, t.q, t.k, t.v, do=torch.zeros(shape))


def test_group_rows_take_is_the_boolean_selection_it_replaces():
    # the references select a group's valid rows by index (no device-to-host synchronization on CUDA) where they
    # used a boolean mask: both must pick the same rows in the same order, empty sequences included
    from oracles._common import group_rows

    lengths, starts, width = [3, 0, 5, 1], [10, 13, 13, 20], 5
    rows = group_rows(starts, lengths, width, "cpu")
    valid = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    assert torch.equal(rows.valid, valid)
    x = torch.randn(len(lengths), width, 2, 3)
    assert torch.equal(rows.take(x), x[valid])
    assert torch.equal(rows.rows, rows.index[valid])
    assert rows.rows.tolist() == [10, 11, 12, 13, 14, 15, 16, 17, 20]
    empty = group_rows([4], [0], 0, "cpu")
    assert empty.flat.numel() == 0 and empty.take(torch.zeros(1, 0, 2)).shape == (0, 2)


def test_the_references_synchronize_once_a_call_however_many_groups(jfa_device):
    # on CUDA every group used to cost host round trips (index tensors copied from pageable memory, rows picked
    # by boolean masks); now a call synchronizes a fixed number of times, whatever its number of groups
    if jfa_device.type != "cuda":
        pytest.skip("synchronizations are counted on CUDA only (--jfa-device cuda)")
    import warnings

    from jfa_verify.core.contract import validate_inputs
    from oracles._common import length_groups

    def syncs(lengths):
        off = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device=jfa_device)
        q, k, v, do = (torch.randn(int(off[-1]), 2, 16, device=jfa_device) for _ in range(4))
        problem = validate_inputs(q, k, v, off, off, causal=True)
        groups = len(length_groups(problem, 1 << 26))
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                reference_attention(problem, q, k, v, do=do)
                padded_sdpa_attention(problem, q, k, v, do=do)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return groups, sum("synchroniz" in str(w.message) for w in seen)

    syncs([5, 6])  # a process's first call pays one more, from outside the references (H100, 2026-12-05)
    few_groups, few = syncs([64, 60, 50])
    many_groups, many = syncs([1, 3, 7, 15, 31, 63, 127, 255, 1000])
    assert few_groups == 1 and many_groups >= 6
    assert many == few, (few, many)
