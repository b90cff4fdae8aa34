"""``triton_jfa``'s block-sparse path against a float64 attention whose boolean mask is built here.

The mask is written from the contract's definition (the causal/window rule around the aligned diagonal, then
query block ``i // block_m`` and KV block ``j // block_n`` of the sequence), independently of
:mod:`jfa_verify.core.selection` and of the contract's mask helpers. Inputs carry NaN rows before the first
sequence and the selection tensors are views with poison entries on both sides, so a kernel that reads outside
what it was given changes the result. Small sizes: each test runs in a few seconds under the interpreter.
"""

from __future__ import annotations

import pytest
import torch

from jfa_verify.core.device import current_device

DEVICE = current_device()  # before any Triton kernel import: sets TRITON_INTERPRET=1 on CPU

from jfa_verify import BlockSelection  # noqa: E402
from jfa_verify.core.contract import JaggedProblem, validate_inputs  # noqa: E402
from jfa_verify.core.errors import InvalidInput  # noqa: E402
from jfa_verify.protocol.registry import get_kernel  # noqa: E402
from jfa_verify.scheduling.invariants import check_instrumented_run  # noqa: E402

F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: 1e-4, BF16: 2e-2}  # max abs error relative to max(1, max |reference|)
LSE_TOL = {F32: 1e-4, BF16: 1e-3}


@pytest.fixture(scope="module")
def jfa():
    return get_kernel("triton_jfa").impl


def _offsets(lengths, start, dtype=torch.int32):
    vals = [start]
    for n in lengths:
        vals.append(vals[-1] + n)
    return torch.tensor(vals, dtype=dtype, device=DEVICE)


def make_inputs(q_lens, k_lens, *, h_q=2, h_kv=1, d=16, dtype=F32, q_start=3, k_start=2, seed=0):
    """``q, k, v`` (leaf tensors) and offsets; the rows before each buffer's first sequence are NaN (poison).
    ``k_lens`` None: self-attention (one offsets tensor for both)."""
    gen = torch.Generator().manual_seed(seed)
    q_off = _offsets(q_lens, q_start)
    k_off, k_start = (q_off, q_start) if k_lens is None else (_offsets(k_lens, k_start), k_start)

    def rand(rows, heads, start):
        x = torch.randn(rows, heads, d, generator=gen)
        x[:start] = float("nan")
        return x.to(dtype).to(DEVICE).requires_grad_()

    rows_q, rows_k = int(q_off[-1]), int(k_off[-1])
    return rand(rows_q, h_q, q_start), rand(rows_k, h_kv, k_start), rand(rows_k, h_kv, k_start), q_off, k_off


def _poisoned_view(values, dtype, poison):
    """``values`` as a contiguous view into a buffer with ``poison`` on both sides (read outside: wrong result)."""
    buf = torch.tensor([poison, *values, poison], dtype=dtype, device=DEVICE)
    return buf[1:-1]


def selection_of(blocks, bm, bn, *, off_dtype=torch.int32, idx_dtype=torch.int64):
    """The :class:`BlockSelection` of per-sequence lists of per-query-block KV block lists. Poison: one past the
    last row pointer reads 0 (a query block that visits nothing) and an index read outside is block 0 (a block
    visited twice or where it was not selected)."""
    flat = [row for seq in blocks for row in seq]
    offsets = [0]
    for row in flat:
        offsets.append(offsets[-1] + len(row))
    indices = [j for row in flat for j in row]
    return BlockSelection(bm, bn, _poisoned_view(offsets, off_dtype, 0), _poisoned_view(indices, idx_dtype, 0))


def random_blocks(q_lens, k_lens, bm, bn, seed, ratio=0.5):
    gen = torch.Generator().manual_seed(seed)
    return [[[j for j in range(-(-lk // bn)) if torch.rand((), generator=gen).item() < ratio]
             for _ in range(-(-lq // bm))] for lq, lk in zip(q_lens, k_lens)]


def all_blocks(q_lens, k_lens, bm, bn):
    return [[list(range(-(-lk // bn))) for _ in range(-(-lq // bm))] for lq, lk in zip(q_lens, k_lens)]


def explicit_mask(lq, lk, blocks_of_seq, bm, bn, causal, alignment, window):
    """Bool ``[lq, lk]`` from the contract's words: the mask's rule, then the selected blocks."""
    mask = torch.zeros(lq, lk, dtype=torch.bool)
    shift = 0 if alignment == "top_left" else lk - lq
    for i in range(lq):
        chosen = set(blocks_of_seq[i // bm])
        for j in range(lk):
            ok = (j // bn) in chosen
            if causal and j > i + shift:
                ok = False
            if window is not None:
                left, right = window
                if left >= 0 and j < i + shift - left:
                    ok = False
                if right >= 0 and not causal and j > i + shift + right:
                    ok = False
            mask[i, j] = ok
    return mask


def reference(q, k, v, q_off, k_off, blocks, bm, bn, do, *, causal=False, alignment="top_left", window=None):
    """float64 ``o, lse, dq, dk, dv`` per sequence and head with the explicit mask; rows outside every sequence:
    0 and -inf, no gradient."""
    qd, kd, vd = (x.detach().double().cpu().requires_grad_() for x in (q, k, v))
    h_q, h_kv = q.shape[1], k.shape[1]
    group = h_q // h_kv
    scale = q.shape[2] ** -0.5
    o = torch.zeros(q.shape[0], h_q, v.shape[2], dtype=torch.float64)
    lse = torch.full((h_q, q.shape[0]), float("-inf"), dtype=torch.float64)
    qo, ko = q_off.tolist(), k_off.tolist()
    for b in range(len(qo) - 1):
        lq, lk = qo[b + 1] - qo[b], ko[b + 1] - ko[b]
        if lq == 0:
            continue
        mask = explicit_mask(lq, lk, blocks[b], bm, bn, causal, alignment, window)
        seen = mask.any(1)
        for h in range(h_q):
            s = qd[qo[b]:qo[b + 1], h] @ kd[ko[b]:ko[b + 1], h // group].T * scale
            s = torch.where(seen[:, None], s.masked_fill(~mask, float("-inf")), torch.zeros_like(s))
            row_lse = torch.logsumexp(s, 1) if lk else torch.zeros(lq, dtype=torch.float64)
            p = torch.exp(s - row_lse[:, None]) * mask
            o[qo[b]:qo[b + 1], h] = p @ vd[ko[b]:ko[b + 1], h // group]
            lse[h, qo[b]:qo[b + 1]] = torch.where(seen, row_lse, torch.full_like(row_lse, float("-inf"))).detach()
    o.backward(do.detach().double().cpu())
    return {"o": o.detach(), "lse": lse, "dq": qd.grad, "dk": kd.grad, "dv": vd.grad}


def check_close(got: dict, want: dict, dtype) -> None:
    failures = []
    for name in ("o", "dq", "dk", "dv"):
        if name not in got:
            continue
        val = got[name].detach().double().cpu()
        assert val.shape == want[name].shape, (name, val.shape, want[name].shape)
        err = (val - want[name]).abs()
        if not torch.isfinite(err).all():
            failures.append(f"{name}: {int((~torch.isfinite(err)).sum())} non-finite entries")
            continue
        scale = max(1.0, want[name].abs().max().item()) if val.numel() else 1.0
        if val.numel() and err.max().item() > TOL[dtype] * scale:
            failures.append(f"{name}: max abs err {err.max().item():.3g} > {TOL[dtype]} * {scale:.3g}")
    lse = got["lse"].detach().double().cpu()
    want_inf = torch.isinf(want["lse"])
    if not torch.equal(want_inf, torch.isinf(lse) & (lse < 0)):
        failures.append("lse: -inf entries differ from the reference's")
    elif (~want_inf).any() and (lse[~want_inf] - want["lse"][~want_inf]).abs().max().item() > LSE_TOL[dtype]:
        failures.append("lse: beyond tolerance")
    rows_empty = want_inf.all(0)
    if rows_empty.any() and (got["o"].detach().cpu()[rows_empty] != 0).any():
        failures.append("o: nonzero entries in rows that see no key")
    assert not failures, "; ".join(failures)


def run_sparse(fn, q, k, v, q_off, k_off, selection, *, seed=1, **mask):
    o, lse = fn(q, k, v, q_off, k_off, block_selection=selection, **mask)
    gen = torch.Generator().manual_seed(seed)
    do = torch.randn(o.shape, generator=gen).to(o.dtype).to(DEVICE)
    o.backward(do)
    return {"o": o, "lse": lse, "dq": q.grad, "dk": k.grad, "dv": v.grad}, do


# ----------------------------------------------------------------------------- against the reference

CASES = [
    # id, q_lens, k_lens (None: self), (h_q, h_kv), (block_m, block_n), mask options, dtype
    ("self-none-gqa-16x16", [37, 50], None, (4, 2), (16, 16), {}, F32),
    ("self-causal-64x32", [70, 0, 45], None, (2, 1), (64, 32), dict(causal=True), F32),
    ("cross-causal-br-32x64", [20, 3, 40], [70, 17, 0], (2, 1), (32, 64), dict(causal=True,
                                                                               causal_alignment="bottom_right"), F32),
    ("cross-none-16x32-bf16", [33, 18], [45, 31], (2, 2), (16, 32), {}, BF16),
    ("self-window-32x16", [60, 29], None, (2, 1), (32, 16), dict(window=(20, 9)), F32),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_random_selection_matches_explicit_mask_reference(jfa, case):
    _, q_lens, k_lens, (h_q, h_kv), (bm, bn), mask, dtype = case
    q, k, v, q_off, k_off = make_inputs(q_lens, k_lens, h_q=h_q, h_kv=h_kv, dtype=dtype)
    k_lens = q_lens if k_lens is None else k_lens
    blocks = random_blocks(q_lens, k_lens, bm, bn, seed=len(q_lens) + bm + bn)
    got, do = run_sparse(jfa, q, k, v, q_off, k_off, selection_of(blocks, bm, bn), **mask)
    want = reference(q, k, v, q_off, k_off, blocks, bm, bn, do, causal=mask.get("causal", False),
                     alignment=mask.get("causal_alignment", "top_left"), window=mask.get("window"))
    check_close(got, want, dtype)


def test_empty_selections_and_last_partial_block(jfa):
    """Query blocks that select nothing get O = 0, LSE = -inf and pass no gradient; blocks selecting only the
    last, partial KV block see exactly its keys; a sequence with no key and one with no query ride along."""
    q_lens, k_lens = [48, 0, 20, 33], [37, 12, 0, 50]
    bm, bn = 16, 16
    blocks = [[[], [2], [0, 2]], [], [[], []], [[3], [], [0, 1, 2, 3]]]  # KV block 2 of 37 keys: keys 32..36
    q, k, v, q_off, k_off = make_inputs(q_lens, k_lens, h_q=2, h_kv=1)
    got, do = run_sparse(jfa, q, k, v, q_off, k_off, selection_of(blocks, bm, bn))
    want = reference(q, k, v, q_off, k_off, blocks, bm, bn, do)
    check_close(got, want, F32)
    first = int(q_off[0])
    assert torch.isinf(got["lse"][:, first:first + 16]).all() and (got["o"][first:first + 16] == 0).all()
    assert (got["dq"][first:first + 16] == 0).all()
    assert (got["o"][:first] == 0).all() and torch.isinf(got["lse"][:, :first]).all()  # rows of no sequence


def dense_tiles(d=16):
    """The kernel's dense ``(BLOCK_M, BLOCK_N)`` on this device."""
    return get_kernel("triton_jfa").tile_sizes(JaggedProblem.of_shape(d, d, F32, DEVICE.type)).as_tuple()


@pytest.mark.parametrize("scale, mask", [(1, dict(causal=True, causal_alignment="bottom_right")),
                                         (2, dict(window=(17, 4)))], ids=["tiles-causal-br", "twice-tiles-window"])
def test_every_block_selected_is_dense_bit_for_bit(jfa, scale, mask):
    """With every block selected the sparse path walks the dense tiles in the dense order: the same bits, forward
    and backward (blocks of one or two dense tiles per side, so the tiles are the dense ones)."""
    bm, bn = (scale * t for t in dense_tiles())
    q_lens, k_lens = [70, 5, 0, 41], [33, 64, 9, 47]
    q, k, v, q_off, k_off = make_inputs(q_lens, k_lens, h_q=4, h_kv=2)
    got, do = run_sparse(jfa, q, k, v, q_off, k_off, selection_of(all_blocks(q_lens, k_lens, bm, bn), bm, bn), **mask)
    qq, kk, vv = (x.detach().clone().requires_grad_() for x in (q, k, v))
    o, lse = jfa(qq, kk, vv, q_off, k_off, **mask)
    o.backward(do)
    dense = {"o": o, "lse": lse, "dq": qq.grad, "dk": kk.grad, "dv": vv.grad}
    for name, val in dense.items():
        assert torch.equal(got[name], val), f"{name} differs from the dense call"


def test_broadcast_q_selection(jfa):
    """Broadcast-Q: every sequence has the same L_q query blocks, each with a selection of its own."""
    gen = torch.Generator().manual_seed(4)
    k_lens, l_q, bm, bn = [40, 0, 23], 20, 16, 16
    k_off = _offsets(k_lens, 0)
    q = torch.randn(l_q, 2, 16, generator=gen).to(DEVICE).requires_grad_()
    k, v = (torch.randn(int(k_off[-1]), 1, 16, generator=gen).to(DEVICE).requires_grad_() for _ in range(2))
    blocks = random_blocks([l_q] * 3, k_lens, bm, bn, seed=9, ratio=0.6)
    got, do = run_sparse(jfa, q, k, v, None, k_off, selection_of(blocks, bm, bn), causal=True)
    # the reference per sequence: Q repeated, dQ summed over the batch
    q_rep = q.detach().repeat(3, 1, 1).requires_grad_()
    want = reference(q_rep, k, v, _offsets([l_q] * 3, 0), k_off, blocks, bm, bn, do, causal=True)
    want["dq"] = want["dq"].view(3, l_q, 2, 16).sum(0)
    check_close(got, want, F32)


# ----------------------------------------------------------------------------- schedule and contract


def _expected_forward_costs(problem_q, problem_k, blocks, bm, bn, tile_m, causal, alignment):
    """Per forward tile: keys visible (mask and selection) to at least one of its rows, from the explicit mask."""
    costs = []
    for b, (lq, lk) in enumerate(zip(problem_q, problem_k)):
        if lq == 0:
            costs.append(0)
            continue
        mask = explicit_mask(lq, lk, blocks[b], bm, bn, causal, alignment, None)
        costs += [int(mask[m:m + tile_m].any(0).sum()) for m in range(0, lq, tile_m)]
    return costs


def test_instrumented_schedule_balances_the_selected_work(jfa):
    """The persistent plan's tiles cost what the kernel walks (the selected keys after the mask), each tile runs
    once, and the framework's schedule invariants (the zigzag load bound on those costs) hold."""
    q_lens, k_lens, bm, bn = [64, 0, 30, 47], [50, 6, 33, 70], 32, 16  # (sequence 1: keys but no query)
    blocks = random_blocks(q_lens, k_lens, bm, bn, seed=3)
    q, k, v, q_off, k_off = make_inputs(q_lens, k_lens)
    selection = selection_of(blocks, bm, bn)
    problem = validate_inputs(q, k, v, q_off, k_off, causal=True, block_selection=selection)
    run = jfa.launch(problem, q, k, v, q_off, k_off, instrument=True, block_selection=selection)
    tile_m = run.plan.tiles.block_m
    fwd = run.plan.passes["fwd"]
    assert [t.cost for t in fwd.workloads] == _expected_forward_costs(q_lens, k_lens, blocks, bm, bn, tile_m, True,
                                                                      "top_left")
    run.o.backward(torch.ones_like(run.o))
    assert check_instrumented_run(run.plan, run.visits) == []
    # dK/dV tiles: query rows that see one of their keys, from the explicit mask
    tile_n = run.plan.tiles.block_n
    want = []
    for b, (lq, lk) in enumerate(zip(q_lens, k_lens)):
        mask = explicit_mask(lq, lk, blocks[b], bm, bn, True, "top_left", None) if lq else torch.zeros(0, lk,
                                                                                                      dtype=torch.bool)
        want += [int(mask[:, n:n + tile_n].any(1).sum()) for n in range(0, lk, tile_n)] or [0]
    assert [t.cost for t in run.plan.passes["dkdv"].workloads] == want


def test_tiles_shrink_to_small_blocks_and_capabilities_list_every_pair():
    kernel = get_kernel("triton_jfa")
    assert len(kernel.capabilities.block_sparse) == 25 and (16, 256) in kernel.capabilities.block_sparse
    q, k, v, q_off, k_off = make_inputs([20], [20])
    tile_m, tile_n = dense_tiles()
    for bm, bn in ((16, 64), (256, 16), (64, 256), (16, 16)):
        sel = selection_of(all_blocks([20], [20], bm, bn), bm, bn)
        problem = validate_inputs(q, k, v, q_off, k_off, block_selection=sel)
        got = kernel.tile_sizes(problem).as_tuple()
        assert got == (min(tile_m, bm), min(tile_n, bn)) and bm % got[0] == 0 and bn % got[1] == 0
    assert kernel.tile_sizes(validate_inputs(q, k, v, q_off, k_off)).as_tuple() == (tile_m, tile_n)  # dense: as is


def test_launch_refuses_a_selection_the_problem_was_not_validated_with(jfa):
    q, k, v, q_off, k_off = make_inputs([20], [20])
    sel = selection_of(all_blocks([20], [20], 16, 16), 16, 16)
    dense = validate_inputs(q, k, v, q_off, k_off)
    with pytest.raises(InvalidInput, match="validate the call with its selection"):
        jfa.launch(dense, q, k, v, q_off, k_off, block_selection=sel)
    other = selection_of(all_blocks([20], [20], 32, 16), 32, 16)
    sparse = validate_inputs(q, k, v, q_off, k_off, block_selection=sel)
    with pytest.raises(InvalidInput, match="block sizes"):
        jfa.launch(sparse, q, k, v, q_off, k_off, block_selection=other)


def test_bad_selection_is_refused_by_the_public_call(jfa):
    q, k, v, q_off, k_off = make_inputs([20], [20])
    bad = BlockSelection(16, 16, torch.tensor([0, 1, 2], dtype=torch.int32, device=DEVICE),
                         torch.tensor([0, 5], dtype=torch.int32, device=DEVICE))  # KV block 5 of a 20-key sequence
    with pytest.raises(InvalidInput, match="outside its sequence's KV blocks"):
        jfa(q, k, v, q_off, k_off, block_selection=bad)


@pytest.mark.parametrize("kernel, pattern, mask", [
    ("triton_jfa", "topk", dict(causal=True, causal_alignment="bottom_right")),
    ("triton_jfa", "with_last", dict(window=(20, 3))),
    ("triton_jfa", "empty_block", {}),
    ("flex_document_mask", "edges", dict(causal=True)),
])
def test_framework_judges_block_sparse_cases_pass(kernel, pattern, mask):
    """Through the runner: the case's selection reaches the kernel as its keyword, the oracles apply it, the
    outputs, gradients (flex: forward only on the CPU) and triton_jfa's instrumented schedule are judged."""
    from jfa_verify import Case, run_case
    from jfa_verify.cases.sparsity import PATTERNS, Sparsity

    assert pattern in PATTERNS
    case = Case(mode="cross", q_lengths=(20, 5, 0, 40), kv_lengths=(40, 0, 33, 17), dtype="float32", head_dim=16,
                num_heads_q=2, num_heads_kv=1, seed=3, block_sparsity=Sparsity(16, 32, pattern=pattern), **mask)
    result = run_case(case, get_kernel(kernel), DEVICE.type)
    assert result.status == "pass", result.explain()


# ----------------------------------------------------------------------------- the flex_attention peer


def test_flex_peer_applies_the_same_selection_forward():
    """flex_document_mask with a block-sparse call: the selection as one more mask_mod condition (forward; flex
    has no CPU backward), against the same explicit-mask reference."""
    flex = get_kernel("flex_document_mask")
    q_lens, k_lens, bm, bn = [40, 0, 21], [37, 12, 50], 16, 32
    blocks = random_blocks(q_lens, k_lens, bm, bn, seed=11)
    blocks[0][1] = []  # a query block that selects nothing
    q, k, v, q_off, k_off = make_inputs(q_lens, k_lens, h_q=4, h_kv=2)
    o, lse = flex.impl(q.detach(), k.detach(), v.detach(), q_off, k_off, causal=True,
                       causal_alignment="bottom_right", block_selection=selection_of(blocks, bm, bn))
    want = reference(q, k, v, q_off, k_off, blocks, bm, bn, torch.zeros(o.shape, dtype=torch.float64), causal=True,
                     alignment="bottom_right")
    check_close({"o": o, "lse": lse}, want, F32)
