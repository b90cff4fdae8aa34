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
    capacity,
    clamped_lengths,
    clamped_offsets,
    device_tiles,
    fused_pass,
    host_arrays,
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
