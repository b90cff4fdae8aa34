"""Host-side tile schedulers: invariants hold, planted scheduler bugs are caught.

Fast CPU tests (no GPU, no Triton). A persistent kernel is emulated by
:func:`walk`, which records per-tile visit counts and program ids the way an
instrumented kernel would.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jfa_verify.core.errors import InvalidInput
from jfa_verify.scheduling.invariants import (
    ScheduleInvariantError,
    assert_schedule_ok,
    check_deterministic,
    check_schedule,
    check_visits,
    imbalance,
)
from jfa_verify.scheduling.schedule_report import compare_schedulers, plot_per_sm_load
from jfa_verify.scheduling.schedules import (
    SCHEDULERS,
    SENTINEL,
    Schedule,
    Tile,
    dynamic,
    launch_order,
    prune_empty,
    round_robin,
    workloads_backward,
    workloads_forward,
    zigzag,
)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- strategies

pareto_lengths = st.lists(
    st.floats(min_value=1e-3, max_value=1.0).map(lambda u: min(int(4 / u ** (1 / 1.2)), 1500)),
    min_size=1,
    max_size=24,
)


@st.composite
def mega_lengths(draw):
    small = draw(st.lists(st.integers(0, 20), min_size=0, max_size=16))
    at = draw(st.integers(0, len(small)))
    return small[:at] + [draw(st.integers(500, 3000))] + small[at:]


equal_lengths = st.tuples(st.integers(0, 400), st.integers(1, 24)).map(lambda t: [t[0]] * t[1])
empty_lengths = st.integers(1, 12).map(lambda n: [0] * n)
any_lengths = st.one_of(pareto_lengths, mega_lengths(), equal_lengths, empty_lengths)


@st.composite
def batches(draw):
    """(workloads, num_sms): forward or backward tiles of a self- or cross-attention batch."""
    q = draw(any_lengths)
    k = draw(st.one_of(st.just(q), st.lists(st.integers(0, 700), min_size=len(q), max_size=len(q))))
    causal = draw(st.booleans())
    alignment = draw(st.sampled_from(["top_left", "bottom_right"]))
    block = draw(st.sampled_from([1, 16, 64, 128]))
    make = draw(st.sampled_from([workloads_forward, workloads_backward]))
    tiles = make(q, k, block, causal=causal, causal_alignment=alignment)
    # small grids, grids near the tile count, and more SMs than tiles
    num_sms = draw(st.one_of(st.integers(1, 8), st.integers(1, 300)))
    return tiles, num_sms


def walk(schedule: Schedule, num_tiles: int):
    """Emulate a persistent kernel walking the CSR arrays; return (visits, program_ids)."""
    flat, start = schedule.flat_order()
    visits = np.zeros(num_tiles, dtype=np.int32)
    pids = np.full(num_tiles, -1, dtype=np.int32)
    for p in range(schedule.num_sms):
        for t in flat[start[p] : start[p + 1]]:
            if t >= 0:  # sentinel: skip
                visits[t] += 1
                pids[t] = p
    return visits, pids


def build_all(tiles, num_sms, cluster_size=1):
    out = [launch_order(tiles, num_sms), zigzag(tiles, num_sms), dynamic(tiles, num_sms)]
    if num_sms % cluster_size == 0:
        out.append(round_robin(tiles, num_sms, cluster_size=cluster_size))
    return out


# --------------------------------------------------------------------------- planted scheduler bugs


def with_lists(schedule: Schedule, lists) -> Schedule:
    return dataclasses.replace(schedule, sm_tiles=tuple(tuple(x) for x in lists))


def drops_last_tile(schedule: Schedule) -> Schedule:
    lists = [list(x) for x in schedule.sm_tiles]
    sm = max(i for i, x in enumerate(lists) if any(not t.sentinel for t in x))
    real = [j for j, t in enumerate(lists[sm]) if not t.sentinel]
    del lists[sm][real[-1]]
    return with_lists(schedule, lists)


def duplicates_a_tile(schedule: Schedule) -> Schedule:
    lists = [list(x) for x in schedule.sm_tiles]
    tile = next(t for x in lists for t in x if not t.sentinel)
    lists[-1].insert(0, tile)
    return with_lists(schedule, lists)


def keeps_an_empty_tile(schedule: Schedule, workloads) -> Schedule:
    lists = [list(x) for x in schedule.sm_tiles]
    lists[0].insert(0, next(t for t in workloads if t.rows == 0))
    return with_lists(schedule, lists)


# --------------------------------------------------------------------------- workloads


def brute_force_costs(q_lengths, k_lengths, block, causal, alignment, backward):
    """Costs from explicit per-sequence masks (the slow, obvious way)."""
    costs = []
    for lq, lk in zip(q_lengths, k_lengths):
        i = np.arange(lq)[:, None]
        j = np.arange(lk)[None, :]
        shift = 0 if alignment == "top_left" else lk - lq
        mask = (j <= i + shift) if causal else np.ones((lq, lk), dtype=bool)
        n_rows = lk if backward else lq
        if n_rows == 0:
            costs.append(0)
            continue
        for start in range(0, n_rows, block):
            if backward:
                costs.append(int(mask[:, start : start + block].any(axis=1).sum()))
            else:
                costs.append(int(mask[start : start + block].any(axis=0).sum()))
    return costs


@FAST
@given(
    st.lists(st.tuples(st.integers(0, 70), st.integers(0, 70)), min_size=1, max_size=6),
    st.sampled_from([1, 7, 16, 64]),
    st.booleans(),
    st.sampled_from(["top_left", "bottom_right"]),
    st.booleans(),
)
def test_tile_costs_match_brute_force_masks(pairs, block, causal, alignment, backward):
    q, k = [p[0] for p in pairs], [p[1] for p in pairs]
    make = workloads_backward if backward else workloads_forward
    tiles = make(q, k, block, causal=causal, causal_alignment=alignment)
    assert [t.cost for t in tiles] == brute_force_costs(q, k, block, causal, alignment, backward)
    assert [t.index for t in tiles] == list(range(len(tiles)))
    # block-innermost order; one empty tile per sequence with no rows
    assert [(t.sequence, t.block) for t in tiles] == sorted((t.sequence, t.block) for t in tiles)
    blocked = k if backward else q
    assert sum(t.rows for t in tiles) == sum(blocked)
    assert sum(t.rows == 0 for t in tiles) == sum(n == 0 for n in blocked)


def test_rows_without_visible_keys_are_not_empty():
    # L_k = 0: the query tile still has to write O = 0, LSE = -inf
    (t,) = workloads_forward([5], [0], 64)
    assert t.rows == 5 and t.cost == 0 and not t.empty
    # bottom-right with L_k < L_q: the first query block sees no key
    first = workloads_forward([128], [32], 64, causal=True, causal_alignment="bottom_right")[0]
    assert first.rows == 64 and first.cost == 0
    both = workloads_forward([5, 128], [0, 32], 64, causal=True, causal_alignment="bottom_right")
    assert [x.cost for x in both] == [0, 0, 32]
    for fn in SCHEDULERS.values():
        assert fn(both, 2).num_tiles == 3


def test_prune_empty_drops_only_rowless_tiles():
    tiles = workloads_forward([0, 3, 0, 130], [4, 0, 0, 130], 64)
    assert [t.index for t in prune_empty(tiles)] == [1, 3, 4, 5]


# --------------------------------------------------------------------------- invariants hold


@FAST
@given(batches(), st.sampled_from([1, 2, 4]))
def test_every_scheduler_meets_every_invariant(batch, cluster_size):
    tiles, num_sms = batch
    for s in build_all(tiles, num_sms):
        assert_schedule_ok(s, tiles)
        visits, pids = walk(s, len(tiles))
        assert_schedule_ok(s, tiles, visits=visits, program_ids=pids)
        flat, start = s.flat_order()
        assert start.shape == (num_sms + 1,) and start[0] == 0 and start[-1] == len(flat)
        assert np.all(np.diff(start) >= 0)
        assert s.num_tiles == len(prune_empty(tiles))
        assert imbalance(s) >= 1.0 - 1e-12
    rr_sms = num_sms * cluster_size
    s = round_robin(tiles, rr_sms, cluster_size=cluster_size)
    assert_schedule_ok(s, tiles, cluster_size=cluster_size)


@FAST
@given(batches())
def test_list_scheduling_bound(batch):
    tiles, num_sms = batch
    valid = prune_empty(tiles)
    total, biggest = sum(t.cost for t in valid), max((t.cost for t in valid), default=0)
    for s in (zigzag(tiles, num_sms), dynamic(tiles, num_sms)):
        assert s.max_load <= total / num_sms + biggest + 1e-9, s
        assert s.max_load <= s.bound + 1e-9
    s = dynamic(tiles, num_sms, tile_overhead=3)
    assert not check_schedule(s, tiles)
    assert max(s.durations) <= (total + 3 * len(valid)) / num_sms + biggest + 3 + 1e-9


def test_imbalance_defined_for_zero_total():
    s = zigzag(workloads_forward([4, 9], [0, 0], 16), 3)
    assert s.total_load == 0 and s.imbalance == 1.0
    s = zigzag([], 5)
    assert s.imbalance == 1.0 and s.max_load == 0 and s.flat_order()[1].tolist() == [0] * 6
    assert not check_schedule(s, [])


@FAST
@given(batches())
def test_schedulers_are_deterministic(batch):
    tiles, num_sms = batch
    for fn in (launch_order, zigzag, dynamic, round_robin):
        assert not check_deterministic(fn, tiles, num_sms)


def test_nondeterministic_scheduler_is_caught():
    rng = random.Random(0)

    def shuffled(workloads, num_sms):
        tiles = prune_empty(workloads)
        rng.shuffle(tiles)
        return launch_order([dataclasses.replace(t) for t in tiles], num_sms)

    tiles = workloads_forward([300, 200, 100], [300, 200, 100], 32)
    found = check_deterministic(shuffled, tiles, 4)
    assert found and {v.kind for v in found} == {"nondeterministic"}


# --------------------------------------------------------------------------- zigzag and round-robin specifics


def make_tiles(costs):
    return [Tile(i, i, 0, c, 1, 1, 1) for i, c in enumerate(costs)]


def test_zigzag_deals_in_boustrophedon_passes():
    s = zigzag(make_tiles([4, 10, 7, 9, 6, 8, 5]), 3)
    assert [[t.cost for t in x] for x in s.sm_tiles] == [[10, 5, 4], [9, 6], [8, 7]]


@FAST
@given(batches(), st.randoms(use_true_random=False))
def test_zigzag_ties_are_stable_and_input_order_free(batch, rnd):
    tiles, num_sms = batch
    s = zigzag(tiles, num_sms)
    # recover each tile's dealing slot from (sm, position)
    slot = {}
    for sm, x in enumerate(s.sm_tiles):
        for pos, t in enumerate(x):
            slot[t.index] = pos * num_sms + (sm if pos % 2 == 0 else num_sms - 1 - sm)
    order = sorted(prune_empty(tiles), key=lambda t: (-t.cost, t.index))
    assert [slot[t.index] for t in order] == list(range(len(order)))
    shuffled = list(tiles)
    rnd.shuffle(shuffled)
    assert zigzag(shuffled, num_sms) == s


def test_zigzag_equal_costs_keep_index_order():
    s = zigzag(make_tiles([5] * 7), 3)
    assert [[t.index for t in x] for x in s.sm_tiles] == [[0, 5, 6], [1, 4], [2, 3]]


def test_dynamic_takes_the_first_free_sm():
    # ties at equal clocks go to the SM with fewer tiles, then the lowest id
    s = dynamic(make_tiles([5, 3, 2, 4]), 2)
    assert [[t.index for t in x] for x in s.sm_tiles] == [[0, 3], [1, 2]]
    # cost-0 tiles (which still write outputs) spread instead of piling on SM 0
    s = dynamic(make_tiles([0, 0, 0, 5]), 3)
    assert [[t.index for t in x] for x in s.sm_tiles] == [[0, 3], [1], [2]]
    s = dynamic(make_tiles([0, 0, 0, 5]), 3, tile_overhead=1)
    assert [[t.index for t in x] for x in s.sm_tiles] == [[0, 3], [1], [2]]
    assert s.durations == (7, 1, 1) and s.loads == (5, 0, 0)


@FAST
@given(batches(), st.sampled_from([1, 2, 3, 4]))
def test_round_robin_sentinel_padding(batch, cluster_size):
    tiles, num_sms = batch
    num_sms *= cluster_size
    s = round_robin(tiles, num_sms, cluster_size=cluster_size)
    n_valid = len(prune_empty(tiles))
    assert s.num_sentinels == -n_valid % cluster_size < cluster_size
    assert (s.num_tiles + s.num_sentinels) % cluster_size == 0
    flat, start = s.flat_order()
    assert (flat == -1).sum() == s.num_sentinels
    for p in range(num_sms):  # sentinels only at the end of a program's run
        run = flat[start[p] : start[p + 1]].tolist()
        assert run == sorted(run, key=lambda i: i == -1)
    # block-innermost input order, dealt slot i to SM i % num_sms
    dealt = {}
    for sm, x in enumerate(s.sm_tiles):
        for pos, t in enumerate(x):
            dealt[pos * num_sms + sm] = -1 if t.sentinel else t.index
    assert [dealt[i] for i in range(len(dealt))] == [t.index for t in prune_empty(tiles)] + [-1] * s.num_sentinels


def test_round_robin_padding_example():
    s = round_robin(make_tiles([3, 3, 3]), 4, cluster_size=2)
    assert s.flat_order()[0].tolist() == [0, 1, 2, -1]
    assert s.sm_tiles[3] == (SENTINEL,)


# --------------------------------------------------------------------------- planted bugs are caught


@FAST
@given(batches())
def test_planted_drop_duplicate_and_unpruned_bugs_are_caught(batch):
    tiles, num_sms = batch
    assume(any(t.rows > 0 for t in tiles))
    has_empty = any(t.rows == 0 for t in tiles)
    for s in build_all(tiles, num_sms):
        kinds = {v.kind for v in check_schedule(drops_last_tile(s), tiles)}
        assert "missing" in kinds
        kinds = {v.kind for v in check_schedule(duplicates_a_tile(s), tiles)}
        assert "duplicate" in kinds
        if has_empty:
            kinds = {v.kind for v in check_schedule(keeps_an_empty_tile(s, tiles), tiles)}
            assert "empty" in kinds


def test_all_violations_reported_in_one_error():
    tiles = workloads_forward([0, 200, 50], [0, 200, 50], 64)
    bad = keeps_an_empty_tile(duplicates_a_tile(drops_last_tile(zigzag(tiles, 2))), tiles)
    with pytest.raises(ScheduleInvariantError) as info:
        assert_schedule_ok(bad, tiles)
    kinds = {v.kind for v in info.value.violations}
    assert {"missing", "duplicate", "empty"} <= kinds
    for kind in ("missing", "duplicate", "empty"):
        assert f"[{kind}]" in str(info.value)
    assert "SM " in str(info.value) and "tile " in str(info.value)


def test_sentinel_and_range_violations_are_caught():
    tiles = make_tiles([3, 3, 3])
    good = round_robin(tiles, 4, cluster_size=2)
    assert not check_schedule(good, tiles, cluster_size=2)
    # sentinels are not allowed without clusters
    assert {v.kind for v in check_schedule(good, tiles)} == {"sentinel_count"}
    # a sentinel in front of a real tile
    lists = [list(x) for x in good.sm_tiles]
    lists[0].insert(0, SENTINEL)
    lists[3] = []
    kinds = {v.kind for v in check_schedule(with_lists(good, lists), tiles, cluster_size=2)}
    assert "sentinel_position" in kinds
    # too much padding
    lists = [list(x) for x in good.sm_tiles]
    lists[2] += [SENTINEL, SENTINEL]
    kinds = {v.kind for v in check_schedule(with_lists(good, lists), tiles, cluster_size=2)}
    assert "sentinel_count" in kinds
    # an index outside the workload list, and a tile whose block lies outside its sequence
    lists = [list(x) for x in good.sm_tiles]
    lists[1].append(Tile(7, 0, 0, 1, 1, 1, 1))
    lists[2][0] = Tile(2, 2, 5, 3, 1, 1, 1)
    found = check_schedule(with_lists(good, lists), tiles, cluster_size=2)
    assert {v.kind for v in found} == {"out_of_range", "mismatch", "cluster_padding"}
    outside = [Tile(0, 0, 2, 5, 8, 64, 100)]  # block 2 starts at row 128 > length 100
    assert {v.kind for v in check_schedule(zigzag(outside, 1), outside)} == {"block_bounds"}


def test_overloaded_sm_breaks_the_bound():
    tiles = make_tiles([5] * 8)
    s = zigzag(tiles, 4)
    piled = with_lists(s, [[t for x in s.sm_tiles for t in x], [], [], []])
    found = check_schedule(piled, tiles)
    assert [v.kind for v in found] == ["bound"] and found[0].sm == 0
    assert not check_schedule(piled, tiles, bound=False)
    assert not check_schedule(with_lists(launch_order(tiles, 4), piled.sm_tiles), tiles)  # no claim, no check


# --------------------------------------------------------------------------- instrumented runs


@FAST
@given(batches(), st.data())
def test_check_visits_catches_double_and_missing_visits(batch, data):
    tiles, num_sms = batch
    assume(any(t.rows > 0 for t in tiles))
    s = dynamic(tiles, num_sms)
    visits, pids = walk(s, len(tiles))
    assert not check_visits(s, visits, pids)
    i = data.draw(st.sampled_from(sorted(s.assignments)))
    twice = visits.copy()
    twice[i] += 1
    (v,) = check_visits(s, twice)
    assert v.kind == "visit_count" and v.tile == i and "more than once" in v.message
    missed = visits.copy()
    missed[i] = 0
    (v,) = check_visits(s, missed)
    assert v.kind == "visit_count" and v.tile == i and "missing" in v.message
    wrong = pids.copy()
    wrong[i] = (wrong[i] + 1) % (num_sms + 1)
    assert [v.kind for v in check_visits(s, visits, wrong)] == ["program_id"]


def test_check_visits_pruned_tile_run_and_array_types():
    import torch

    tiles = workloads_forward([0, 70], [5, 70], 64)  # tile 0 is empty
    s = zigzag(tiles, 2)
    visits, pids = walk(s, len(tiles))
    assert not check_visits(s, torch.from_numpy(visits), torch.from_numpy(pids))
    assert not check_visits(s, visits.tolist(), pids.tolist(), num_tiles=3)
    ran_empty = visits.copy()
    ran_empty[0] = 1
    (v,) = check_visits(s, ran_empty)
    assert v.kind == "visit_count" and v.tile == 0 and "not scheduled" in v.message
    assert [v.kind for v in check_visits(s, visits[:2], num_tiles=3)] == ["visits_shape"]
    assert [v.kind for v in check_visits(s, visits.reshape(1, -1))] == ["visits_shape"]
    with pytest.raises(ScheduleInvariantError, match="visit_count"):
        assert_schedule_ok(s, tiles, visits=ran_empty)


# --------------------------------------------------------------------------- argument validation


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: workloads_forward([1, 2], [1], 64), "len(q_lengths)=2"),
        (lambda: workloads_forward([1, -3], [1, 1], 64), "q_lengths[1]=-3"),
        (lambda: workloads_forward([1.5], [1], 64), "q_lengths[0]=1.5"),
        (lambda: workloads_forward([True], [1], 64), "q_lengths[0]=True"),
        (lambda: workloads_forward([1], [1], 0), "block_m=0"),
        (lambda: workloads_backward([1], [1], -2), "block_n=-2"),
        (lambda: workloads_forward([1], [1], 64, causal_alignment="diag"), "causal_alignment='diag'"),
        (lambda: workloads_forward([1], [1], 64, causal=1), "causal=1"),
        (lambda: zigzag([], 0), "num_sms=0"),
        (lambda: dynamic([], 2, tile_overhead=-1), "tile_overhead=-1"),
        (lambda: round_robin([], 4, cluster_size=0), "cluster_size=0"),
        (lambda: round_robin([], 3, cluster_size=2), "num_sms=3 is not a multiple of cluster_size=2"),
        (lambda: launch_order([SENTINEL], 2), "sentinel"),
        (lambda: launch_order(make_tiles([1, 1]) * 2, 2), "index=0 repeats"),
        (lambda: launch_order([(0, 1)], 2), "is not a Tile"),
    ],
)
def test_bad_arguments_name_the_value(call, needle):
    with pytest.raises(InvalidInput) as info:
        call()
    assert needle in str(info.value)


def test_numpy_lengths_are_accepted():
    a = workloads_forward(np.array([3, 0, 70]), np.array([3, 0, 70]), np.int64(64), causal=True)
    b = workloads_forward([3, 0, 70], [3, 0, 70], 64, causal=True)
    assert a == b


# --------------------------------------------------------------------------- report


def test_compare_schedulers_and_plot(tmp_path):
    rng = np.random.default_rng(0)
    q = np.minimum((8 / rng.random(64) ** (1 / 1.2)).astype(int), 4096).tolist()
    rows = compare_schedulers(q, q, num_sms=16, block_m=64, causal=True)
    assert [r["name"] for r in rows] == list(SCHEDULERS)
    by = {r["name"]: r for r in rows}
    assert len({r["mean_load"] for r in rows}) == 1
    assert by["zigzag"]["max_load"] <= by["launch_order"]["max_load"]
    for r in rows:
        assert r["max_load"] == max(r["loads"]) and len(r["loads"]) == 16
        assert r["imbalance"] == pytest.approx(r["max_load"] / r["mean_load"])
        assert r["within_bound"] or not r["bounded"]
    out = plot_per_sm_load(rows[:2] + [zigzag(workloads_forward(q, q, 64), 16)], tmp_path / "sub" / "load.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(InvalidInput, match="results_or_schedules"):
        plot_per_sm_load([{"name": "x"}], tmp_path / "bad.png")
