"""``triton_jfa`` against the float64 oracle: every mode, dtype, edge length and layout, small sizes.

On a CPU-only machine the kernels run in Triton's interpreter (the device is
selected before the kernel module is imported); tile-boundary lengths come
from the kernel's own ``tile_sizes``.
"""

from __future__ import annotations

import pytest
import torch

from jfa_verify.core.device import current_device

DEVICE = current_device()  # before any Triton kernel import: sets TRITON_INTERPRET=1 on CPU

from jfa_verify.core.contract import JaggedProblem, validate_inputs  # noqa: E402
from jfa_verify.core.errors import UnsupportedCase  # noqa: E402
from jfa_verify.oracles import reference_attention  # noqa: E402
from jfa_verify.protocol.kernel import PassPlan  # noqa: E402
from jfa_verify.protocol.registry import get_kernel  # noqa: E402
from tests.helpers import oracle  # noqa: E402


def block_sizes(d, dtype, device_type):
    return get_kernel("triton_jfa").tile_sizes(JaggedProblem.of_shape(d, d, dtype, device_type)).as_tuple()

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
# Max abs error allowed, relative to max(1, max |reference|) of the same output.
TOL = {F32: 1e-4, BF16: 2e-2, F16: 5e-3}
LSE_TOL = {F32: 1e-4, BF16: 1e-3, F16: 1e-3}


@pytest.fixture(scope="module")
def jfa():
    return get_kernel("triton_jfa").impl


def _offsets(lengths, start, dtype):
    vals = [start]
    for n in lengths:
        vals.append(vals[-1] + n)
    return torch.tensor(vals, dtype=dtype, device=DEVICE)


def make_case(q_lens, k_lens, *, h_q=2, h_kv=1, d=16, d_v=None, dtype=F32, off_dtype=torch.int32,
              q_start=0, k_start=0, broadcast_len=None, seed=0):
    """Random ``q, k, v, q_offsets, k_offsets`` (leaf tensors with grad); ``broadcast_len``: dense Q rows."""
    gen = torch.Generator().manual_seed(seed)
    d_v = d if d_v is None else d_v
    k_off = _offsets(k_lens, k_start, off_dtype)
    if broadcast_len is not None:
        q_off, rows_q = None, broadcast_len
    else:
        q_off = _offsets(q_lens, q_start, off_dtype)
        rows_q = int(q_off[-1])
    rows_k = int(k_off[-1])

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(dtype).to(DEVICE).requires_grad_()

    return rand(rows_q, h_q, d), rand(rows_k, h_kv, d), rand(rows_k, h_kv, d_v), q_off, k_off


def run_and_check(fn, q, k, v, q_off, k_off, *, causal=False, alignment="top_left", do=None, seed=1):
    """Forward + backward of ``fn`` against the float64 oracle; returns the kernel outputs."""
    o, lse = fn(q, k, v, q_off, k_off, causal=causal, causal_alignment=alignment)
    if do is None:
        gen = torch.Generator().manual_seed(seed)
        do = torch.randn(o.shape, generator=gen).to(o.dtype).to(DEVICE)
    o.backward(do)
    ref = oracle(reference_attention, q.detach(), k.detach(), v.detach(), q_off, k_off, causal=causal,
                 causal_alignment=alignment, do=do)
    got = {"o": o, "dq": q.grad, "dk": k.grad, "dv": v.grad}
    assert o.dtype == q.dtype and lse.dtype == F32
    assert tuple(lse.shape) == tuple(ref["lse"].shape)
    failures = []
    for name, val in got.items():
        want = ref[name]
        assert tuple(val.shape) == tuple(want.shape), f"{name}.shape={tuple(val.shape)} != {tuple(want.shape)}"
        if val.numel() == 0:
            continue
        err = (val.double() - want).abs()
        if not torch.isfinite(err).all():
            failures.append(f"{name}: {int((~torch.isfinite(err)).sum())} non-finite entries")
            continue
        scale = max(1.0, want.abs().max().item())
        if err.max().item() > TOL[q.dtype] * scale:
            idx = tuple(int(i) for i in torch.nonzero(err == err.max())[0])
            failures.append(f"{name}: max abs err {err.max().item():.3g} at {idx} > {TOL[q.dtype]} * {scale:.3g}")
    ref_inf = torch.isinf(ref["lse"])
    got_inf = torch.isinf(lse) & (lse < 0)
    if not torch.equal(ref_inf.cpu(), got_inf.cpu()):
        failures.append(f"lse: -inf at {int(got_inf.sum())} entries, oracle has {int(ref_inf.sum())}")
    elif (~ref_inf).any():
        lse_err = (lse.double()[~ref_inf] - ref["lse"][~ref_inf]).abs().max().item()
        if lse_err > LSE_TOL[q.dtype]:
            failures.append(f"lse: max abs err {lse_err:.3g} > {LSE_TOL[q.dtype]}")
    # rows without a visible key: exactly zero output
    empty_rows = ref_inf.any(0)
    if empty_rows.any() and o.numel():
        if (o[empty_rows] != 0).any():
            failures.append("o: nonzero entries in rows with no visible key")
    assert not failures, "; ".join(failures)
    return o, lse


# ----------------------------------------------------------------------------- modes, dtypes, head dims

CASES = [
    # id, q_lens, k_lens, heads (h_q, h_kv), d, d_v, dtype, offsets dtype, causal, alignment
    ("self-f32-d16-gqa", [5, 37], None, (4, 2), 16, 16, F32, torch.int32, False, "top_left"),
    ("self-f32-d40-causal", [33, 7, 18], None, (2, 2), 40, 40, F32, torch.int64, True, "top_left"),
    ("cross-f32-d64-dv32-mqa-br", [9, 40, 17], [30, 21, 5], (3, 1), 64, 32, F32, torch.int64, True, "bottom_right"),
    ("cross-f32-d40-tl", [9, 40, 17], [30, 21, 5], (2, 1), 40, 40, F32, torch.int32, True, "top_left"),
    ("self-bf16-d64-causal", [33, 15], None, (2, 1), 64, 64, BF16, torch.int32, True, "top_left"),
    ("cross-bf16-d40-dv48-br", [20, 3], [35, 17], (2, 1), 40, 48, BF16, torch.int64, True, "bottom_right"),
    ("cross-f16-d16-dv64", [31, 12], [8, 49], (2, 1), 16, 64, F16, torch.int32, False, "top_left"),
    ("self-f16-d40-br", [17, 34], None, (2, 2), 40, 40, F16, torch.int64, True, "bottom_right"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_packed_matches_oracle(jfa, case):
    _, q_lens, k_lens, (h_q, h_kv), d, d_v, dtype, off_dtype, causal, alignment = case
    q, k, v, q_off, k_off = make_case(q_lens, k_lens or q_lens, h_q=h_q, h_kv=h_kv, d=d, d_v=d_v,
                                      dtype=dtype, off_dtype=off_dtype)
    if k_lens is None:
        k_off = q_off  # self-attention: one offsets tensor
    run_and_check(jfa, q, k, v, q_off, k_off, causal=causal, alignment=alignment)


BROADCAST = [
    ("f32-d16", 17, [9, 33, 0, 4], (2, 1), 16, 16, F32, False, "top_left"),
    ("f32-d40-dv16-br", 20, [9, 33, 0, 4], (2, 2), 40, 16, F32, True, "bottom_right"),
    ("bf16-d64-gqa-tl", 33, [20, 5], (2, 1), 64, 64, BF16, True, "top_left"),
    ("f16-d16-mqa-br", 12, [30, 1, 16], (3, 1), 16, 32, F16, True, "bottom_right"),
]


@pytest.mark.parametrize("case", BROADCAST, ids=[c[0] for c in BROADCAST])
def test_broadcast_q_matches_oracle(jfa, case):
    _, l_q, k_lens, (h_q, h_kv), d, d_v, dtype, causal, alignment = case
    q, k, v, q_off, k_off = make_case(None, k_lens, h_q=h_q, h_kv=h_kv, d=d, d_v=d_v, dtype=dtype,
                                      broadcast_len=l_q)
    o, lse = run_and_check(jfa, q, k, v, q_off, k_off, causal=causal, alignment=alignment)
    assert o.shape[0] == len(k_lens) * l_q and q.grad.shape == q.shape


# ----------------------------------------------------------------------------- lengths at the edges


def test_tile_boundary_lengths(jfa):
    bm, bn = block_sizes(16, F32, DEVICE.type)
    # last: key block 1's first visible query (bottom-right) is the last row of a query block
    q_lens = [bm - 1, bm, bm + 1, 1, bn + 9 + bm - 1 - bn]
    k_lens = [bn + 1, bn - 1, bn, bm + 1, bn + 9]
    q, k, v, q_off, k_off = make_case(q_lens, k_lens, d=16)
    run_and_check(jfa, q, k, v, q_off, k_off, causal=True, alignment="bottom_right")


def test_tile_boundary_lengths_self_causal(jfa):
    bm, bn = block_sizes(16, F32, DEVICE.type)
    lens = [bn - 1, bn + 1, bm - 1, bm + 1]
    q, k, v, q_off, _ = make_case(lens, lens, d=16, h_q=1)
    run_and_check(jfa, q, k, v, q_off, q_off, causal=True)


def test_zero_length_sequences_and_leading_rows(jfa):
    # q-empty, k-empty (rows with no key: o=0, lse=-inf), both empty; rows before offsets[0] in q and k.
    q_lens = [0, 6, 0, 19, 5]
    k_lens = [7, 0, 0, 20, 3]
    q, k, v, q_off, k_off = make_case(q_lens, k_lens, q_start=3, k_start=5, off_dtype=torch.int64, d=16)
    o, lse = run_and_check(jfa, q, k, v, q_off, k_off, causal=True, alignment="bottom_right")
    assert (o[:3] == 0).all() and torch.isneginf(lse[:, :3]).all()
    assert (q.grad[:3] == 0).all() and (k.grad[:5] == 0).all() and (v.grad[:5] == 0).all()


@pytest.mark.parametrize("broadcast", [False, True], ids=["packed", "broadcast_q"])
def test_all_sequences_empty(jfa, broadcast):
    q, k, v, q_off, k_off = make_case([0, 0], [0, 0], q_start=2, k_start=0,
                                      broadcast_len=4 if broadcast else None, d=16)
    o, lse = run_and_check(jfa, q, k, v, q_off, k_off)
    assert (o == 0).all() and torch.isneginf(lse).all() and (q.grad == 0).all()


@pytest.mark.parametrize("broadcast", [False, True], ids=["packed", "broadcast_q"])
def test_empty_batch(jfa, broadcast):
    q, k, v, q_off, k_off = make_case([], [], q_start=3, k_start=2, broadcast_len=5 if broadcast else None, d=16)
    o, lse = run_and_check(jfa, q, k, v, q_off, k_off, causal=True)
    assert o.shape[0] == (0 if broadcast else 3)
    assert (q.grad == 0).all() and (k.grad == 0).all() and (v.grad == 0).all()


# ----------------------------------------------------------------------------- layouts


def test_non_contiguous_inputs_and_output_grad(jfa):
    gen = torch.Generator().manual_seed(3)
    lens = [21, 40]
    q_off = _offsets(lens, 0, torch.int32)
    t, h, d = sum(lens), 2, 40
    q = torch.randn(t, h, 2 * d, generator=gen).to(DEVICE)[:, :, 5:5 + d].requires_grad_()  # head-dim slice
    k = torch.randn(h, t, d, generator=gen).to(DEVICE).transpose(0, 1).requires_grad_()  # token stride != H*D
    v = torch.randn(t, h, d, generator=gen).to(DEVICE)[:, :, ::1].requires_grad_()
    assert not q.is_contiguous() and not k.is_contiguous()
    do = torch.randn(h, t, d, generator=gen).to(DEVICE).transpose(0, 1)  # non-contiguous dO
    assert not do.is_contiguous()
    run_and_check(jfa, q, k, v, q_off, q_off, causal=True, do=do)


def test_every_sequence_row_written(jfa, monkeypatch):
    """Outputs and gradients come from NaN-poisoned ``torch.empty``: a row the kernel skips stays NaN."""
    real_empty, real_empty_like = torch.empty, torch.empty_like

    def poisoned(t):
        return t.fill_(float("nan")) if t.is_floating_point() else t.fill_(-(2**30))

    monkeypatch.setattr(torch, "empty", lambda *a, **kw: poisoned(real_empty(*a, **kw)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **kw: poisoned(real_empty_like(*a, **kw)))
    q, k, v, q_off, k_off = make_case([0, 33, 1, 16], [5, 17, 0, 40], q_start=2, k_start=1, h_q=2, h_kv=2, d=16)
    run_and_check(jfa, q, k, v, q_off, k_off, causal=True, alignment="bottom_right")
    qb, kb, vb, _, kb_off = make_case(None, [0, 17, 3], broadcast_len=9, d=16)
    run_and_check(jfa, qb, kb, vb, None, kb_off, causal=True)


def test_non_power_of_two_head_dims(jfa):
    # d = 40 pads BLOCK_D to 64; d_v = 24 pads to 32: masked loads and stores on both.
    q, k, v, q_off, k_off = make_case([12, 30], [25, 9], d=40, d_v=24, h_q=2, h_kv=1)
    run_and_check(jfa, q, k, v, q_off, k_off, causal=True, alignment="bottom_right")


# ----------------------------------------------------------------------------- capabilities


@pytest.mark.parametrize("d, d_v", [(8, 8), (300, 300), (16, 8), (16, 264)])
def test_unsupported_head_dim_raises(jfa, d, d_v):
    q, k, v, q_off, k_off = make_case([3], [3], d=d, d_v=d_v)
    with pytest.raises(UnsupportedCase, match="head_dim"):
        jfa(q, k, v, q_off, k_off)


# ----------------------------------------------------------------------------- schedules and instrumentation


def _zigzag_two_programs(workloads, kind, problem):
    order = [t.index for t in workloads if not t.empty][::-1]
    return PassPlan(kind, tuple(workloads), (tuple(order[0::2]), tuple(order[1::2]), ()))  # an empty program is allowed


def _with_scheduler(jfa, scheduler):
    return type(jfa)(jfa.kernels, scheduler=scheduler)


def _launch(jfa, q, k, v, q_off, k_off, *, instrument=True, **kw):
    problem = validate_inputs(q, k, v, q_off, k_off, **kw)
    return jfa.launch(problem, q, k, v, q_off, k_off, instrument=instrument)


def test_custom_schedule_is_bitwise_equal_and_visits_each_tile_once(jfa):
    q, k, v, q_off, k_off = make_case([40, 5, 0, 33], [20, 31, 4, 9], h_q=2, h_kv=1, d=16)
    args = (q.detach(), k.detach(), v.detach(), q_off, k_off)
    o_ref, lse_ref = jfa(*args, causal=True, causal_alignment="bottom_right")
    run = _launch(_with_scheduler(jfa, _zigzag_two_programs), *args, causal=True, causal_alignment="bottom_right")
    assert torch.equal(run.o, o_ref) and torch.equal(run.lse, lse_ref)
    bm, _ = block_sizes(16, F32, DEVICE.type)
    assert run.plan.tiles.block_m == bm
    # one tile per query block, plus the empty placeholder (2, 0) of the 0-length sequence
    expected = [(b, m) for b, n in enumerate([40, 5, 0, 33]) for m in range(max(1, -(-n // bm)))]
    assert [(t.sequence, t.block) for t in run.plan.passes["fwd"].workloads] == expected
    empty = expected.index((2, 0))
    visits = run.visits.counts["fwd"]
    assert visits.shape == (len(expected), 2)
    assert visits[empty].tolist() == [0, 0]
    assert (torch.cat([visits[:empty], visits[empty + 1:]]) == 1).all()
    programs = run.visits.programs["fwd"]
    # non-empty tiles reversed and dealt in turn to programs 0 and 1
    non_empty = [i for i in range(len(expected)) if i != empty][::-1]
    assert [programs[i, 0].item() for i in non_empty] == [j % 2 for j in range(len(non_empty))]
    # A broken schedule (tile 0 twice, last tile never) is visible in the visit counts.
    n = len(expected)
    broken = _with_scheduler(jfa, lambda w, kind, p: PassPlan(kind, tuple(w),
                                                              ((0, 0),) + tuple((i,) for i in range(1, n - 1))))
    bad = _launch(broken, *args)
    assert bad.visits.counts["fwd"][0].tolist() == [2, 2] and bad.visits.counts["fwd"][-1].tolist() == [0, 0]


def test_backward_deterministic_under_custom_schedule(jfa):
    q, k, v, q_off, k_off = make_case([40, 5], [20, 9], h_q=2, h_kv=1, d=16)
    grads = []
    for sched in (None, _zigzag_two_programs):
        qq, kk, vv = (t.detach().clone().requires_grad_() for t in (q, k, v))
        o, _ = _with_scheduler(jfa, sched)(qq, kk, vv, q_off, k_off, causal=True)
        o.backward(torch.ones_like(o))
        grads.append((qq.grad, kk.grad, vv.grad))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_schedule_index_out_of_range_rejected(jfa):
    q, k, v, q_off, k_off = make_case([5], [5], d=16)
    past_end = _with_scheduler(jfa, lambda w, kind, p: PassPlan(kind, tuple(w), ((len(w),),)))
    with pytest.raises(ValueError, match="tile index"):
        past_end(q, k, v, q_off, k_off)


def test_localization_uses_the_tiles_the_kernel_runs_for_distinct_value_head_dim():
    """Regression: callers asked for tiles by D alone while the kernel sizes them by max(D, D_v): on CUDA,
    D=64 with D_v=160 runs BLOCK_N=32, but localization and tile-edge coverage used BLOCK_N=64."""
    from jfa_verify.protocol.kernel import tiles_for_shape

    kernel = get_kernel("triton_jfa")
    problem = JaggedProblem.of_shape(64, 160, torch.bfloat16, "cuda")
    assert kernel.tile_sizes(problem).as_tuple() == (64, 32)
    assert tiles_for_shape(kernel, 64, 160, torch.bfloat16, "cuda").as_tuple() == (64, 32)
    from jfa_verify.judge.localize import locate

    p = JaggedProblem("self", (100,), (100,), (0,), (0,), (0,), 100, 1, 1, 64, 160, False, "top_left", 0.125,
                      torch.bfloat16, torch.device("cuda"))
    where = locate(p, "dk", (40, 0, 3), kernel.tile_sizes(p))
    assert (where.sequence, where.token, where.tile, where.tile_kind) == (0, 40, 1, "BLOCK_N")  # 40 // 32


def test_runner_localizes_with_the_launch_plan_tiles():
    """The verdict's tiles are the ones the instrumented kernel reports it ran."""
    from jfa_verify import Case, run_case

    case = Case(kv_lengths=(20, 3), head_dim=16, head_dim_v=40, dtype="float32")
    result = run_case(case, get_kernel("triton_jfa"), DEVICE)
    assert result.status == "pass", result.explain()
    assert result.block_sizes == block_sizes(40, F32, DEVICE.type)


def test_value_head_dim_padded_narrower_than_qk_head_dim_gives_right_o():
    """Regression: on the H200 (Triton 3.6), D=40 with D_v=24 (padded 64 vs 32) returned wrong O
    (max error 1.56 in bf16) while LSE was right; found by the property tests' first GPU run."""
    from jfa_verify import Case, run_case

    case = Case(kv_lengths=(0, 17, 32, 1), dtype="bfloat16", head_dim=40, head_dim_v=24, num_heads_q=2,
                num_heads_kv=1, offsets_dtype="int64", offsets_start=3, seed=107)
    result = run_case(case, get_kernel("triton_jfa"), DEVICE)
    assert result.status == "pass", result.explain()
    o = {c.name: c for c in result.comparisons}["o"]
    assert o.kernel_error < 0.02  # the bug gave 1.56; bf16 rounding gives ~0.004


def test_backward_hidden_keys_with_large_logits_do_not_overflow_exp2():
    """Regression: the backward took exp2(S - lse) before masking, so a hidden (future) key scoring far
    above the row's lse overflowed to inf (numpy 'overflow encountered in exp2' under the interpreter)."""
    import warnings

    from jfa_verify import Case, run_case

    case = Case(kv_lengths=(40, 7), dtype="float32", causal=True, values="large_logits", head_dim=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = run_case(case, get_kernel("triton_jfa"), DEVICE)
    assert result.status == "pass", result.explain()


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("ON", True), ("0", False),
                                             ("false", False), ("", False)])
def test_interpreting_reads_triton_interpret_as_triton_does(monkeypatch, value, expected):
    """Regression: ``TRITON_INTERPRET=false`` (compiled kernels for Triton) counted as interpreting,
    which would send the interpreter-only code paths (``INTERPRET=True``) to the GPU compiler."""
    from jfa_verify.core.device import interpreting

    monkeypatch.setenv("TRITON_INTERPRET", value)
    assert interpreting() is expected
