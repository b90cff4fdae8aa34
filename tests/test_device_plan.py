"""The device planner against the host planner: equal launch arrays on drawn batches, every scheduler it covers."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jfa_verify.core.errors import InvalidInput
from jfa_verify.scheduling.device_plan import (
    DEVICE_SCHEDULERS,
    FILLER_BLOCK,
    DeviceLaunchPlan,
    capacity,
    clamped_lengths,
    clamped_offsets,
    device_tiles,
    fused_pass,
    host_arrays,
    one_launch_fits,
    one_launch_pass,
    plan_pass,
    to_pass_plan,
)
from jfa_verify.scheduling.invariants import check_schedule
from jfa_verify.scheduling.planning import GridScheduler, PersistentScheduler
from jfa_verify.scheduling.schedules import workloads_backward, workloads_forward

windows = st.one_of(st.none(), st.tuples(st.integers(-1, 70), st.integers(-1, 70)).filter(lambda w: w != (-1, -1)))


@st.composite
def batches(draw):
    """Lengths with the shapes that break planners: empty sequences, one-row ones, exact multiples of a block."""
    block = draw(st.sampled_from([1, 16, 32, 64]))
    special = st.sampled_from([0, 1, block - 1, block, block + 1, 2 * block, 3 * block + 5])
    length = st.one_of(special, st.integers(0, 200))
    b = draw(st.integers(0, 12))
    q = draw(st.lists(length, min_size=b, max_size=b))
    k = draw(st.one_of(st.just(q), st.lists(length, min_size=b, max_size=b)))
    return q, k, block


def _host_plan(q, k, block, kind, scheduler, n, mask):
    make = workloads_backward if kind == "dkdv" else workloads_forward
    workloads = make(q, k, block, **mask)
    if scheduler == "grid":
        return workloads, GridScheduler()(workloads, kind, None)
    return workloads, PersistentScheduler(scheduler, scheduler, num_sms=n)(workloads, kind, None)


def _device_plan(q, k, block, kind, scheduler, n, mask):
    ql, kl = torch.tensor(q, dtype=torch.int64), torch.tensor(k, dtype=torch.int64)
    lengths, other = (kl, ql) if kind == "dkdv" else (ql, kl)
    tiles = device_tiles(lengths, other, block, capacity(int(lengths.sum()), len(q), block),
                         backward=kind == "dkdv", **mask)
    return plan_pass(tiles, scheduler, n)


@settings(max_examples=300, deadline=None)
@given(batches(), st.sampled_from(DEVICE_SCHEDULERS), st.integers(1, 9), st.booleans(),
       st.sampled_from(["top_left", "bottom_right"]), windows, st.sampled_from(["fwd", "dkdv"]))
def test_device_plan_equals_the_host_plan(batch, scheduler, n, causal, alignment, window, kind):
    q, k, block = batch
    mask = dict(causal=causal, causal_alignment=alignment, window=window)
    workloads, host = _host_plan(q, k, block, kind, scheduler, n, mask)
    dev = _device_plan(q, k, block, kind, scheduler, n, mask)
    want = host_arrays(host)
    used = want["prog_start"][-1]
    assert dev.tile_seq[:used].tolist() == want["tile_seq"]
    assert dev.tile_block[:used].tolist() == want["tile_block"]
    assert dev.tile_id[:used].tolist() == want["tile_id"]
    starts = dev.prog_start.tolist()
    # grid: one program per slot; the host lists one per real tile, the extra device programs are empty
    assert starts[: len(want["prog_start"])] == want["prog_start"]
    assert set(starts[len(want["prog_start"]):]) <= {used}
    back = to_pass_plan(dev, kind, workloads)
    assert back.programs == tuple(p for p in host.programs if p or scheduler != "grid")
    if back.schedule is not None:  # zigzag's load bound included
        assert check_schedule(back.schedule, workloads) == []


@settings(max_examples=120, deadline=None)
@given(batches(), st.sampled_from(DEVICE_SCHEDULERS), st.integers(1, 9), st.booleans(),
       st.sampled_from(["top_left", "bottom_right"]), windows, st.booleans())
def test_the_triton_planner_writes_the_torch_planners_arrays(jfa_device, batch, scheduler, n, causal, alignment,
                                                            window, backward):
    """The two Triton launches (run here by the interpreter, on the GPU compiled) against the torch reference,
    entry for entry, fillers past the real tiles included (a grid kernel runs one program per slot)."""
    if jfa_device.type != "cpu":
        pytest.skip("the interpreter run; the GPU runs it inside tests/test_device_planned_calls.py")
    q, k, block = batch
    mask = dict(causal=causal, causal_alignment=alignment, window=window)
    lengths, other = (torch.tensor(k), torch.tensor(q)) if backward else (torch.tensor(q), torch.tensor(k))
    cap = capacity(int(lengths.sum()), len(q), block)
    want = plan_pass(device_tiles(lengths, other, block, cap, backward=backward, **mask), scheduler, n)
    got = fused_pass(lengths, other, block, cap, scheduler, n, backward=backward, with_ids=True, **mask)
    assert got.programs == want.programs
    for name in ("tile_seq", "tile_block", "tile_id", "prog_start"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    used = int(want.prog_start[-1])
    assert (got.tile_block[used:] == FILLER_BLOCK).all()


def test_tile_costs_are_the_host_costs_under_a_window():
    q, k = [0, 5, 130, 64], [7, 0, 90, 200]
    mask = dict(causal=True, causal_alignment="bottom_right", window=(20, 3))
    for kind, make in (("fwd", workloads_forward), ("dkdv", workloads_backward)):
        lengths, other = (k, q) if kind == "dkdv" else (q, k)
        host = [t for t in make(q, k, 32, **mask) if not t.empty]
        tiles = device_tiles(torch.tensor(lengths), torch.tensor(other), 32, capacity(sum(lengths), 4, 32),
                             backward=kind == "dkdv", **mask)
        n = int(tiles.count)
        assert n == len(host)
        assert tiles.cost[:n].tolist() == [t.cost for t in host]
        assert tiles.index[:n].tolist() == [t.index for t in host]


def test_offsets_are_clamped_into_the_buffer():
    starts, lengths = clamped_lengths(torch.tensor([0, 9, 4, 50]), total_rows=20)
    assert starts.tolist() == [0, 9, 9]
    assert lengths.tolist() == [9, 0, 11]


def test_the_offsets_kernels_read_are_int32_whatever_the_callers_dtype_while_every_row_fits():
    # issue 39: the offsets' dtype is part of a kernel's compiled signature; int64 offsets built every variant twice
    for dtype in (torch.int32, torch.int64):
        off = clamped_offsets(torch.tensor([0, 9, 4, 50], dtype=dtype), total_rows=20)
        assert off.dtype == torch.int32 and off.tolist() == [0, 9, 9, 20]
    # past int32's range the caller's int64 stays (a cast would wrap the last offset negative)
    big = clamped_offsets(torch.tensor([0, 2**31 + 5], dtype=torch.int64), total_rows=2**31 + 5)
    assert big.dtype == torch.int64 and big.tolist() == [0, 2**31 + 5]


def test_unknown_scheduler_and_missing_program_count_are_named():
    tiles = device_tiles(torch.tensor([3]), torch.tensor([3]), 16, 2, backward=False)
    with pytest.raises(InvalidInput, match="dynamic"):
        plan_pass(tiles, "dynamic", 4)
    with pytest.raises(InvalidInput, match="SM count"):
        plan_pass(tiles, "zigzag")


def test_a_process_with_the_compiled_planner_plans_cpu_tensors_with_torch(tmp_path):
    """Regression (H200 gate, 2026-12-04): the GPU tests' process imports the planner compiled, then mutant tests run
    CPU cases in the interpreter; the compiled planner was handed CPU tensors, every case raised, and two mutants
    came out "broken". The planner's own mode decides now."""
    import subprocess
    import sys

    probe = (
        "import os, torch\n"
        "os.environ.pop('TRITON_INTERPRET', None)\n"
        "from jfa_verify.scheduling import plan_kernels, device_plan\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "print(type(plan_kernels._deal_kernel).__name__, device_plan.triton_planner_runs(torch.device('cpu')))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["JITFunction", "False"], out.stdout


def _slots_for(*sizes: int) -> int:
    """The fewest lanes (a power of two, at least 16) one-launch planning of these counts needs: the interpreter
    runs the program's sort in Python, so tests plan with few lanes where the GPU has ``PLAN_SLOTS``."""
    return max(16, 1 << max(sizes).bit_length())


def _raw_offsets(draw, lengths):
    """``lengths``' offsets starting past row 0, some spoiled: the first past the rows or negative, the last past the
    rows, one out of order (trusted offsets: the planner clamps them as ``clamped_offsets`` does).
    ``(offsets, total_rows)``."""
    start = draw(st.integers(0, 5))
    off = [start]
    for n in lengths:
        off.append(off[-1] + n)
    total = off[-1] + draw(st.integers(0, 3))
    spoil = draw(st.sampled_from(["none", "first past the rows", "first negative", "last past the rows",
                                  "one out of order"]))
    if spoil == "first past the rows":
        off[0] = total + draw(st.integers(1, 9))
    elif spoil == "first negative":
        off[0] = -draw(st.integers(1, 5))
    elif spoil == "last past the rows":
        off[-1] = total + draw(st.integers(1, 40))
    elif spoil == "one out of order":
        off[draw(st.integers(0, len(off) - 1))] = draw(st.integers(-3, total + 40))
    return torch.tensor(off, dtype=draw(st.sampled_from([torch.int32, torch.int64]))), total


@st.composite
def one_launch_cases(draw):
    block = draw(st.sampled_from([16, 32, 64]))
    special = st.sampled_from([0, 1, block - 1, block, block + 1, 2 * block, 3 * block + 5])
    length = st.one_of(special, st.integers(0, 200))
    b = draw(st.integers(1, 12))
    q = draw(st.lists(length, min_size=b, max_size=b))
    k = draw(st.lists(length, min_size=b, max_size=b))
    return block, _raw_offsets(draw, q), _raw_offsets(draw, k), draw(st.sampled_from([None, 0, 1]))


def _check_one_launch(block, a, b, same, scheduler, n, backward, mask, lanes=None):
    """:func:`one_launch_pass` on offsets ``a = (offsets, rows)`` and ``b`` against the torch reference on their
    clamped lengths, entry for entry, and the offsets it writes against :func:`clamped_offsets`. ``same``: None, or
    the dimension (0: a, 1: b) whose every sequence has ``rows // batch`` rows (its offsets unread). ``lanes``: the
    program's (default: the fewest that fit, :func:`_slots_for`)."""
    (a_off, t_a), (b_off, t_b) = a, b
    batch = a_off.numel() - 1
    a_len = clamped_lengths(a_off, t_a)[1] if same != 0 else torch.full((batch,), t_a // batch)
    b_len = clamped_lengths(b_off, t_b)[1] if same != 1 else torch.full((batch,), t_b // batch)
    cap = capacity(t_a, batch, block)
    programs = cap if scheduler == "grid" else n
    slots = lanes or _slots_for(batch, cap, programs)
    assert one_launch_fits(batch, cap, programs, max(t_a, t_b), slots)
    want = plan_pass(device_tiles(a_len, b_len, block, cap, backward=backward, **mask), scheduler, n)
    a_out, b_out = (torch.full((batch + 1,), -7, dtype=torch.int32, device=b_off.device) for _ in range(2))
    got = one_launch_pass((a_off, b_off), (t_a, t_b), batch, block, cap, scheduler, n, backward=backward,
                          with_ids=True, same_lengths=(t_a // batch if same == 0 else None,
                                                       t_b // batch if same == 1 else None),
                          write=(a_out, b_out), slots=slots, **mask)
    assert got.programs == want.programs
    for name in ("tile_seq", "tile_block", "tile_id", "prog_start"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    assert (got.tile_block[int(want.prog_start[-1]):] == FILLER_BLOCK).all()
    for out, off, total, unread in ((a_out, a_off, t_a, same == 0), (b_out, b_off, t_b, same == 1)):
        assert out.tolist() == ([-7] * (batch + 1) if unread else clamped_offsets(off, total).tolist())


@settings(max_examples=60, deadline=None)
@given(one_launch_cases(), st.sampled_from(DEVICE_SCHEDULERS), st.integers(1, 9), st.booleans(),
       st.sampled_from(["top_left", "bottom_right"]), windows, st.booleans())
def test_the_one_launch_planner_writes_the_torch_planners_arrays_and_the_clamped_offsets(
        interpreter_device, case, scheduler, n, causal, alignment, window, backward):
    """Issue 38: one program plans a whole pass from the caller's offsets (clamp, lengths, tiles, zigzag ranks, deal)
    and writes the offsets the kernels read; against the torch reference on the same offsets, entry for entry."""
    block, a, b, same = case
    _check_one_launch(block, a, b, same, scheduler, n, backward,
                      dict(causal=causal, causal_alignment=alignment, window=window))


@pytest.mark.parametrize("spoiled", [[40, 3, 9, 20], [-4, 3, 9, 20], [0, 3, 9, 31], [0, 12, 9, 20], [2, 3, 9, 20]])
@pytest.mark.parametrize("backward", [False, True])
def test_the_one_launch_planner_clamps_each_kind_of_bad_offset_as_the_reference(interpreter_device, spoiled,
                                                                               backward):
    """The clamp's cases, each on every pass: the first offset past the rows or negative, the last past them, one
    out of order, and a valid batch starting past row 0 (drawn cases meet them only now and then)."""
    good = (torch.tensor([0, 7, 7, 25]), 25)
    for a, b in ((good, (torch.tensor(spoiled), 25)), ((torch.tensor(spoiled, dtype=torch.int32), 25), good)):
        _check_one_launch(8, a, b, None, "zigzag", 3, backward, dict(causal=True, causal_alignment="bottom_right",
                                                                     window=None))


def _call_shape(mode, q_len, k_len, causal, window=None):
    from jfa_verify.core.contract import CallShape

    total_q = sum(q_len) if mode != "broadcast_q" else len(k_len) * q_len[0]
    return CallShape(mode, len(k_len), total_q, sum(k_len), 2, 1, 16, 16, causal, "bottom_right", 0.25,
                     torch.float32, torch.device("cpu"), window=window)


def _offsets(lengths):
    return torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32)


@pytest.mark.parametrize("mode", ["self", "cross", "broadcast_q"])
def test_a_call_planned_in_one_launch_per_pass_equals_the_two_kernel_plan(interpreter_device, mode):
    """The whole call: one-launch planning (on CUDA by default; here with few lanes) gives the offsets and every
    pass's arrays of the two-kernel planner, the passes too large for it (dK/dV's one-key tiles here) included."""
    q_len, k_len = [37, 0, 5, 60], [20, 9, 0, 70]
    if mode == "self":
        q_len = k_len
    k_off = _offsets(k_len)
    q_off = {"self": k_off, "cross": _offsets(q_len), "broadcast_q": None}[mode]
    shape = _call_shape(mode, [12] if mode == "broadcast_q" else q_len, k_len, causal=True, window=(30, -1))
    sched = PersistentScheduler("zigzag", "round_robin", num_sms=5)
    one = DeviceLaunchPlan(shape, q_off, k_off, sched, 16, 1, with_ids=True, one_launch_slots=64)
    two = DeviceLaunchPlan(shape, q_off, k_off, sched, 16, 1, with_ids=True)
    assert one._one_launch("fwd") and not one._one_launch("dkdv")  # (the dK/dV pass: 4 + 99 slots > 63)
    assert not two._one_launch("fwd")
    assert torch.equal(one.k_off, two.k_off) and torch.equal(one.q_off, two.q_off)
    for kind, grid in (("fwd", False), ("dq", False), ("dkdv", False), ("dq", True)):
        a, b = one.arrays(kind, grid=grid), two.arrays(kind, grid=grid)
        for name in ("tile_seq", "tile_block", "tile_id", "prog_start"):
            assert torch.equal(getattr(a, name), getattr(b, name)), (kind, grid, name)
