"""The shipped kernels' public call planned on the device (issue 38, 2): same values as the host-planned launch,
no host synchronization when ``max_seqlen`` is given, capturable in a CUDA graph and replayable with new offsets.

The CPU tests run ``triton_jfa`` in Triton's interpreter; the ``gpu``-marked ones (skipped on the CPU) run both
kernels on a CUDA device: ``python -m pytest -m gpu --jfa-device cuda tests/test_device_planned_calls.py``.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jfa_verify.core.contract import validate_inputs
from jfa_verify.core.errors import InvalidInput
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.scheduling.planning import GridScheduler, PersistentScheduler

# (at import: a test module imported inside a @given test runs its own @given decorators there, which Hypothesis
# refuses as nested @given: the GPU test below failed so on an H100 before checking anything, 2026-12-08)
from .test_device_plan import _check_one_launch


def _offsets(lengths, first=0, device="cpu"):
    return torch.tensor([first, *itertools.accumulate(lengths, initial=first)][1:], dtype=torch.int32, device=device)


def _inputs(lengths, *, heads=(2, 1), d=16, dtype=torch.float32, device="cpu", first=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = first + sum(lengths)
    q, k, v = (torch.randn(rows, h, d, generator=g).to(dtype).to(device).requires_grad_()
               for h in (heads[0], heads[1], heads[1]))
    return q, k, v, _offsets(lengths, first, device)


def _host_planned(impl, q, k, v, off, **mask):
    """The launch as it was before the device planner: the framework's host workloads and scheduler."""
    from jfa_verify.kernels.triton_jfa import _host

    problem = validate_inputs(q, k, v, off, off, **mask)
    arrays, _ = _host.plan_launch(problem, impl.scheduler, tf32=impl.tf32)
    return _host._attention(q, k, v, off, off, impl.kernels, problem, arrays, None)


def _values_and_grads(o, lse, q, k, v):
    do = torch.randn(o.shape, generator=torch.Generator().manual_seed(1)).to(device=o.device, dtype=o.dtype)
    return (o, lse, *torch.autograd.grad(o, (q, k, v), do))


BATCHES = [
    # empty and one-row sequences, tile edges (the interpreter's tiles are 32 query rows, 16 keys), rows before
    # offsets[0] that belong to no sequence
    dict(lengths=[0, 5, 33, 16, 1, 0], first=3),
    dict(lengths=[47, 2, 31]),
]


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("mask", [dict(causal=False), dict(causal=True),
                                  dict(causal=True, causal_alignment="bottom_right", window=(7, 3))],
                         ids=["none", "causal", "causal+window"])
@pytest.mark.parametrize("scheduler", [None, GridScheduler()], ids=["zigzag", "grid"])
def test_triton_jfa_device_plan_gives_the_host_plans_values_bit_for_bit(batch, mask, scheduler, jfa_device):
    if jfa_device.type != "cpu":
        pytest.skip("Triton's interpreter on CPU tensors; the GPU runs the gpu-marked tests below")
    from jfa_verify.kernels.triton_jfa import build

    impl = build(scheduler=scheduler or PersistentScheduler(num_sms=3))
    q, k, v, off = _inputs(batch["lengths"], first=batch.get("first", 0))
    longest = max(batch["lengths"])
    want = _values_and_grads(*_host_planned(impl, q, k, v, off, **mask), q, k, v)
    hinted = _values_and_grads(*impl(q, k, v, off, off, max_seqlen_q=longest, max_seqlen_k=longest, **mask), q, k, v)
    checked = _values_and_grads(*impl(q, k, v, off, off, **mask), q, k, v)
    for name, a, b, c in zip(("o", "lse", "dq", "dk", "dv"), want, hinted, checked):
        assert torch.equal(a, b) and torch.equal(a, c), name
    first = batch.get("first", 0)
    assert not want[0][:first].any() and torch.isneginf(want[1][:, :first]).all()  # rows of no sequence


def test_a_device_plan_that_deals_otherwise_than_the_host_planner_fails_the_case(monkeypatch, jfa_device):
    """Issue 38: a planning kernel that disagrees with the host planner on a drawn case is a failing case, even when
    its numbers come out right (here two tiles trade programs: every tile still runs once)."""
    import dataclasses

    from jfa_verify import Case, run_case
    from jfa_verify.scheduling import device_plan

    planned = device_plan.DeviceLaunchPlan.arrays

    def swapped(self, kind, **kw):
        a = planned(self, kind, **kw)
        order = torch.arange(a.tile_seq.numel())
        order[:2] = torch.tensor([1, 0])
        return dataclasses.replace(a, tile_seq=a.tile_seq[order], tile_block=a.tile_block[order],
                                   tile_id=a.tile_id[order])

    case = Case(kv_lengths=(40, 0, 17, 3), dtype="float32", head_dim=16, num_heads_q=2, num_heads_kv=1)
    assert run_case(case, "triton_jfa", jfa_device).status == "pass"
    monkeypatch.setattr(device_plan.DeviceLaunchPlan, "arrays", swapped)
    result = run_case(case, "triton_jfa", jfa_device)
    assert result.status == "fail", result.explain()
    assert "not the host planner's" in result.explain(), result.explain()


def test_without_hints_the_offsets_are_still_checked():
    q, k, v, _ = _inputs([4, 4])
    bad = torch.tensor([0, 6, 5], dtype=torch.int32)
    with pytest.raises(InvalidInput, match="not non-decreasing"):
        get_kernel("triton_jfa")(q, k, v, bad, bad)
    with pytest.raises(InvalidInput, match="max_seqlen_q=-1 is negative"):
        get_kernel("triton_jfa")(q, k, v, bad, bad, max_seqlen_q=-1, max_seqlen_k=4)


# ----------------------------------------------------------------------------------------------------- GPU

GPU_KERNELS = [pytest.param("triton_jfa", marks=pytest.mark.gpu), pytest.param("gluon_jfa", marks=pytest.mark.gpu)]


def _gpu_inputs(kernel, lengths, device, first=0):
    return _inputs(lengths, heads=(4, 2), d=64, dtype=torch.bfloat16, device=device, first=first)


def _skip_unless_runs(kernel, device):
    if device.type != "cuda":
        pytest.skip("needs a CUDA device (--jfa-device cuda)")
    reason = get_kernel(kernel).capabilities.device_reason(device)
    if reason:
        pytest.skip(f"{kernel}: {reason}")


@st.composite
def _gpu_planner_cases(draw):
    """Batches as large as one planning program takes (``PLAN_SLOTS`` lanes): up to 1,200 sequences of 0-150 rows,
    tiles of 64 or 128, offsets starting past row 0 and, now and then, one spoiled (the planner clamps them)."""
    import numpy as np

    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    batch = draw(st.sampled_from([1, 2, 7, 300, 1200]))
    cut = draw(st.sampled_from([150, 64, 1]))  # (many rows, tile-sized ones, mostly single rows)
    lengths = rng.integers(0, cut + 1, batch).tolist()
    start = draw(st.integers(0, 3))
    off = [start, *itertools.accumulate(lengths, initial=start)][1:]
    total = off[-1] + draw(st.integers(0, 2))
    if draw(st.booleans()):
        off[draw(st.integers(0, batch))] = draw(st.integers(-2, total + 20))
    return draw(st.sampled_from([64, 128])), off, total


@pytest.mark.gpu
@settings(max_examples=40, deadline=None)
@given(_gpu_planner_cases(), _gpu_planner_cases(), st.sampled_from(["grid", "round_robin", "zigzag"]),
       st.sampled_from([1, 7, 132]), st.booleans(), st.sampled_from([None, (30, -1), (100, 5)]), st.booleans())
def test_the_compiled_one_launch_planner_writes_the_reference_arrays(jfa_device, a, b, scheduler, n, causal, window,
                                                                     backward):
    """Issue 38: the planner the public calls launch on CUDA (one program of PLAN_SLOTS lanes, compiled: the CPU
    tests run it in the interpreter with fewer lanes) against the torch reference, on batches up to its size."""
    from jfa_verify.scheduling.plan_kernels import PLAN_SLOTS

    if jfa_device.type != "cuda":
        pytest.skip("the compiled planner; tests/test_device_plan.py runs it in the interpreter")
    (block, a_off, t_a), (_, b_off, t_b) = a, b
    if len(b_off) != len(a_off):  # one batch size for both dimensions: the other's lengths cut or padded with 0
        b_off = (b_off + [b_off[-1]] * len(a_off))[: len(a_off)]
    a_t, b_t = (torch.tensor(o, dtype=torch.int32, device=jfa_device) for o in (a_off, b_off))
    _check_one_launch(block, (a_t, t_a), (b_t, t_b), None, scheduler, n, backward,
                      dict(causal=causal, causal_alignment="bottom_right", window=window), lanes=PLAN_SLOTS)


@pytest.mark.parametrize("kernel", GPU_KERNELS)
def test_the_hinted_call_and_its_backward_never_synchronize(kernel, jfa_device):
    _skip_unless_runs(kernel, jfa_device)
    fn = get_kernel(kernel)
    lengths = [300, 0, 129, 1, 700]
    q, k, v, off = _gpu_inputs(kernel, lengths, jfa_device)
    call = dict(causal=True, max_seqlen_q=700, max_seqlen_k=700)
    _values_and_grads(*fn(q, k, v, off, off, **call), q, k, v)  # compiles first
    do = torch.randn(q.shape[0], 4, 64, device=jfa_device, dtype=torch.bfloat16)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        o, _ = fn(q, k, v, off, off, **call)
        torch.autograd.grad(o, (q, k, v), do)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def _gpu_host_planned(kernel, q, k, v, off, causal):
    """The kernel launched on plans built on the host (lists of tiles and programs made in Python)."""
    if kernel == "gluon_jfa":
        from jfa_verify.kernels.gluon_jfa import build
        from jfa_verify.scheduling.planning import PersistentScheduler

        class HostOnly(PersistentScheduler):  # a subclass: only the host knows how it deals, so it plans there
            pass

        return build(scheduler=HostOnly(backward="zigzag"))(q, k, v, off, off, causal=causal)
    return _host_planned(get_kernel(kernel).impl, q, k, v, off, causal=causal)


@pytest.mark.parametrize("kernel", GPU_KERNELS)
def test_the_device_plan_gives_the_host_plans_values_bit_for_bit(kernel, jfa_device):
    _skip_unless_runs(kernel, jfa_device)
    fn = get_kernel(kernel)
    lengths = [1000, 3, 0, 257, 128, 129, 64]
    q, k, v, off = _gpu_inputs(kernel, lengths, jfa_device, first=5)
    for causal in (False, True):
        hinted = _values_and_grads(*fn(q, k, v, off, off, causal=causal, max_seqlen_q=1000, max_seqlen_k=1000),
                                   q, k, v)
        host = _values_and_grads(*_gpu_host_planned(kernel, q, k, v, off, causal), q, k, v)
        for name, a, b in zip(("o", "lse", "dq", "dk", "dv"), hinted, host):
            assert torch.equal(a, b), (kernel, causal, name)
        assert not hinted[0][:5].any() and torch.isneginf(hinted[1][:, :5]).all()


@pytest.mark.parametrize("kernel", GPU_KERNELS)
def test_a_captured_graph_replays_new_offsets_bit_for_bit(kernel, jfa_device):
    """Capture forward + backward once, then replay with other lengths in the same buffers (same capacity):
    each replay equals an eager call on those offsets, bit for bit."""
    _skip_unless_runs(kernel, jfa_device)
    fn = get_kernel(kernel)
    rows = 1024
    q, k, v, off = _gpu_inputs(kernel, [rows], jfa_device)
    do = torch.randn(rows, 4, 64, device=jfa_device, dtype=torch.bfloat16)
    call = dict(causal=True, max_seqlen_q=rows, max_seqlen_k=rows)
    static_off = _offsets([200, 0, 300, 524], device=jfa_device)

    def step(offsets):
        o, lse = fn(q, k, v, offsets, offsets, **call)
        return (o, lse, *torch.autograd.grad(o, (q, k, v), do))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step(static_off)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step(static_off)
    for lengths in ([1, 1023, 0, 0], [512, 256, 128, 128], [200, 0, 300, 524], [0, 0, 0, 1024]):
        static_off.copy_(_offsets(lengths, device=jfa_device))
        graph.replay()
        eager = step(_offsets(lengths, device=jfa_device))
        torch.cuda.synchronize()
        for name, a, b in zip(("o", "lse", "dq", "dk", "dv"), captured, eager):
            assert torch.equal(a, b), (kernel, lengths, name)
