"""The references apply a block selection as a mask: they equal an attention whose boolean mask is built here, from
the contract's definition (the mask's rule, then query block ``i // block_m`` and KV block ``j // block_n`` of the
sequence), independently of :mod:`jfa_verify.core.selection` and of the contract's mask helpers."""

from __future__ import annotations

import pytest
import torch

from jfa_verify import BlockSelection, Case
from jfa_verify.core.contract import validate_inputs
from jfa_verify.oracles import blockwise_attention, padded_sdpa_attention, reference_attention

BM, BN = 16, 16


def _random_selection(q_lengths, k_lengths, generator, *, ratio=0.5, block_m=BM, block_n=BN):
    """Per sequence and query block, a random set of its KV blocks (as lists), each kept with ``ratio``."""
    out = []
    for lq, lk in zip(q_lengths, k_lengths):
        nk = -(-lk // block_n)
        out.append([[j for j in range(nk) if torch.rand((), generator=generator).item() < ratio]
                    for _ in range(-(-lq // block_m))])
    return out


def _as_selection(blocks, device="cpu", block_m=BM, block_n=BN):
    """The BlockSelection of per-sequence lists of per-query-block KV block lists."""
    flat = [row for seq in blocks for row in seq]
    offsets = [0]
    for row in flat:
        offsets.append(offsets[-1] + len(row))
    indices = [j for row in flat for j in row]
    return BlockSelection(block_m, block_n, torch.tensor(offsets, dtype=torch.int32, device=device),
                          torch.tensor(indices, dtype=torch.int64, device=device))


def _allowed(i, j, lq, lk, causal, alignment, window):
    """The mask's rule, written from the contract's docstring."""
    d = i + (0 if alignment == "top_left" else lk - lq)
    if causal and j > d:
        return False
    if window is not None:
        left, right = window
        if left >= 0 and j < d - left:
            return False
        if right >= 0 and not causal and j > d + right:
            return False
    return True


def _explicit_reference(case, t, blocks, block_m=BM, block_n=BN):
    """float64 attention per sequence and head with an explicit boolean mask; gradients by autograd."""
    q, k, v = (x.detach().double().requires_grad_(True) for x in (t.q, t.k, t.v))
    q_len, k_len = case.query_lengths, case.kv_lengths
    q_off = [case.q_start] + list(torch.tensor(q_len).cumsum(0).add(case.q_start).tolist())
    k_off = [case.offsets_start] + list(torch.tensor(k_len).cumsum(0).add(case.offsets_start).tolist())
    rows = t.do.shape[0]
    o = torch.zeros(rows, case.num_heads_q, case.dv, dtype=torch.float64)
    lse = torch.full((case.num_heads_q, rows), float("-inf"), dtype=torch.float64)
    scale = case.sm_scale or case.head_dim ** -0.5
    group = case.num_heads_q // case.num_heads_kv
    pieces = []
    for b, (lq, lk) in enumerate(zip(q_len, k_len)):
        mask = torch.tensor([[_allowed(i, j, lq, lk, case.causal, case.causal_alignment, case.window)
                              and (j // block_n) in blocks[b][i // block_m] for j in range(lk)] for i in range(lq)],
                            dtype=torch.bool).reshape(lq, lk)
        has_key = mask.any(1)
        qs = q[:lq] if case.mode == "broadcast_q" else q[q_off[b]:q_off[b] + lq]
        out_start = b * lq if case.mode == "broadcast_q" else q_off[b]
        ks, vs = k[k_off[b]:k_off[b] + lk], v[k_off[b]:k_off[b] + lk]
        for h in range(case.num_heads_q):
            s = (qs[:, h] @ ks[:, h // group].T) * scale
            s = s.masked_fill(~mask, float("-inf"))
            row_lse = torch.logsumexp(torch.where(has_key[:, None], s, torch.zeros_like(s)), 1)
            p = torch.exp(s - row_lse[:, None]) * has_key[:, None]
            oh = p @ vs[:, h // group]
            pieces.append((out_start, lq, h, oh))
            lse[h, out_start:out_start + lq] = torch.where(has_key, row_lse.detach(), float("-inf"))
    for start, lq, h, oh in pieces:
        o[start:start + lq, h] = oh.detach()
    loss = sum((oh * t.do[start:start + lq, h].double()).sum() for start, lq, h, oh in pieces)
    dq, dk, dv = torch.autograd.grad(loss, (q, k, v), allow_unused=True) if pieces else (None,) * 3
    zero = lambda g, x: torch.zeros_like(x) if g is None else g  # noqa: E731
    return {"o": o, "lse": lse, "dq": zero(dq, q), "dk": zero(dk, k), "dv": zero(dv, v)}


def _close(got, want, atol, name):
    got, want = got.double(), want.double()
    assert torch.equal(torch.isinf(got), torch.isinf(want)), name
    fin = torch.isfinite(want)
    err = (got[fin] - want[fin]).abs().max().item() if fin.any() else 0.0
    assert err <= atol, f"{name}: max error {err} > {atol}"


CASES = [
    Case(kv_lengths=(40, 0, 33, 17), dtype="float32", num_heads_q=2, num_heads_kv=1, head_dim=16, seed=1),
    Case(kv_lengths=(40, 0, 33, 17), dtype="float32", causal=True, head_dim=16, seed=2, offsets_start=3),
    Case(kv_lengths=(50, 20, 9), mode="cross", q_lengths=(17, 35, 20), dtype="float32", causal=True,
         causal_alignment="bottom_right", head_dim=16, head_dim_v=24, seed=3),
    Case(kv_lengths=(50, 20, 9), mode="cross", q_lengths=(17, 35, 20), dtype="float32", window=(10, 5),
         causal_alignment="bottom_right", head_dim=16, seed=4),
    Case(kv_lengths=(37, 0, 18), mode="broadcast_q", broadcast_q_len=20, dtype="float32", head_dim=16, seed=5),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.describe())
def test_references_equal_an_explicitly_masked_attention(case):
    gen = torch.Generator().manual_seed(case.seed)
    blocks = _random_selection(case.query_lengths, case.kv_lengths, gen)
    t = case.materialize()
    problem = validate_inputs(*t.contract_args(), **case.contract_kwargs(), block_selection=_as_selection(blocks))
    want = _explicit_reference(case, t, blocks)
    ref = reference_attention(problem, t.q, t.k, t.v, do=t.do)
    sdpa = padded_sdpa_attention(problem, t.q, t.k, t.v, do=t.do)
    blk = blockwise_attention(problem, t.q, t.k, t.v, do=t.do, block_m=8, block_n=8)
    for name in ("o", "lse", "dq", "dk", "dv"):
        _close(ref[name], want[name], 1e-12, f"float64 {name}")
        _close(blk[name], want[name], 1e-12, f"blockwise {name}")
        _close(sdpa[name], want[name], 2e-5, f"padded SDPA {name}")


def test_an_empty_selection_gives_zero_output_and_minus_inf_lse():
    case = Case(kv_lengths=(40, 33), dtype="float32", head_dim=16, seed=6)
    t = case.materialize()
    # sequence 0: query block 1 (rows 16..31) selects nothing; sequence 1: query block 0 selects nothing
    blocks = [[[0, 2], [], [1]], [[], [0, 1, 2], [2]]]
    problem = validate_inputs(*t.contract_args(), block_selection=_as_selection(blocks))
    empty_rows = list(range(16, 32)) + list(range(40, 56))
    for fn in (reference_attention, padded_sdpa_attention):
        out = fn(problem, t.q, t.k, t.v, do=t.do)
        assert torch.equal(out["o"][empty_rows], torch.zeros_like(out["o"][empty_rows])), fn.__name__
        assert torch.isneginf(out["lse"][:, empty_rows]).all(), fn.__name__
        assert torch.isfinite(out["lse"][:, [0, 15, 32, 39, 56, 72]]).all(), fn.__name__  # the others see keys
        assert torch.equal(out["dq"][empty_rows], torch.zeros_like(out["dq"][empty_rows])), fn.__name__


@pytest.mark.parametrize("causal", [False, True])
def test_selecting_every_block_equals_dense(causal):
    case = Case(kv_lengths=(40, 0, 33, 5), dtype="float32", head_dim=16, causal=causal, seed=7)
    t = case.materialize()
    blocks = [[list(range(-(-lk // BN)))] * -(-lk // BM) for lk in case.kv_lengths]
    sparse = validate_inputs(*t.contract_args(), **case.contract_kwargs(), block_selection=_as_selection(blocks))
    dense = validate_inputs(*t.contract_args(), **case.contract_kwargs())
    for fn in (reference_attention, padded_sdpa_attention):
        a, b = fn(sparse, t.q, t.k, t.v, do=t.do), fn(dense, t.q, t.k, t.v, do=t.do)
        for name in ("o", "lse", "dq", "dk", "dv"):
            assert torch.equal(a[name], b[name]), (fn.__name__, name)
