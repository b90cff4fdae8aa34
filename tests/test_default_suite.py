"""The default suite's fixed layouts, as the README describes them."""

import pytest

from jfa_verify.checks.suites import get_suite
from jfa_verify.protocol.kernel import Capabilities, Kernel, TileSizes


@pytest.mark.parametrize("bm, bn", [(8, 8), (16, 8), (64, 64)])
def test_tile_edge_lengths_sit_on_both_sides_of_the_first_two_boundaries_of_each_block(bm, bn):
    """Regression (a new user's trial, 2026-12-07): with tiles (64, 64) the lengths were 0, 1, 63, 65, 129: 127, one
    below the second boundary, was missing, though the README promises the kernel's tile boundaries +-1."""
    kernel = Kernel(f"tiles-{bm}x{bn}", "declares its tiles", lambda: (lambda *a, **k: None),
                    Capabilities(backward=False), lambda problem: TileSizes(bm, bn))
    suite = get_suite("default", "cpu", 0, kernel=kernel)
    lengths = {tuple(c.kv_lengths) for c in suite.cases if c.name.startswith("tile-edges/")}
    assert len(lengths) == 1, lengths
    (edges,) = lengths
    expected = {b * k + d for b in (bm, bn) for k in (1, 2) for d in (-1, 1)}
    assert edges[0] == 0 and set(edges[1:]) == expected | {1}, edges
    assert list(edges[1:]) == sorted(edges[1:]), edges


def test_filter_picks_cases_by_part_of_their_name_and_none_picks_all():
    """``--filter`` has one rule for run, matrix, bisect and kernel_only (it was written out in each): part of a case
    name, in the suite's order; no filter (None or empty) is every case."""
    suite = get_suite("default", "cpu", 0)
    names = [c.name for c in suite.cases]
    assert [c.name for c in suite.matching(None)] == names == [c.name for c in suite.matching("")]
    picked = [c.name for c in suite.matching("pairs/07/")]
    assert picked == [n for n in names if "pairs/07/" in n] and len(picked) == 1, picked
    bf16 = [c.name for c in suite.matching("bfloat16")]
    assert bf16 and all("bfloat16" in n for n in bf16) and len(bf16) < len(names)
    assert suite.matching("no-such-case") == []


def test_the_cpu_suite_reaches_production_head_dims_and_a_thousand_keys_and_queries():
    """Regression (helper-69's trial, 2026-12-07): the CPU suite, scaled for Triton's interpreter, never went past 256
    keys or a head dim of 40, so a user's kernel wrong past 300 keys, and another wrong at D >= 64, passed it. Four
    cases at a CPU's cost now reach D=64, D=128 and 1,100 keys (then queries) against a few; the GPU suite runs full
    sizes and needs none of them."""
    cases = {c.name.split("/")[0]: c for c in get_suite("default", "cpu", 0).cases}
    assert cases["production-d64"].head_dim == 64 and cases["production-d128"].head_dim == 128
    keys, queries = cases["long-keys"], cases["long-queries"]
    assert max(keys.kv_lengths) > 1024 and max(keys.q_lengths) < 8 and keys.causal
    assert max(queries.q_lengths) > 1024 and max(queries.kv_lengths) < 16
    assert not any(c.name.startswith(("production-", "long-")) for c in get_suite("default", "cuda", 0).cases)


def test_the_suite_has_two_offsets_starts_in_both_orders():
    """Regression (blind set 7, 2026-12-07): the suite's distinct starts always started the queries later, and a kernel
    clearing dK/dV's unsequenced rows up to q_offsets[0] instead of k_offsets[0] passed it. A fixed case starts the
    keys later, in cross-attention with a backward."""
    suite = get_suite("default", "cpu", 0).cases
    orders = {("keys" if c.offsets_start > c.q_start else "queries") for c in suite if c.distinct_starts}
    assert orders == {"keys", "queries"}, orders
    (later,) = [c for c in suite if c.distinct_starts and c.offsets_start > c.q_start]
    assert later.mode == "cross" and later.q_start > 0 and later.batch > 1


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_a_default_case_name_says_causal_exactly_when_the_case_is(device_type):
    """Regression (helper-73's trial): `long-keys/cross/bfloat16` ran causal bottom-right and
    `production-d64/self/...` causal, while every other case name says `-causal` where it is causal. A user reading
    the failing `long-keys/cross` case looked for a non-causal bug, and `--filter cross-causal` (to gate a
    causal-alignment change) left the long-keys case out. Names follow `LAYOUT/MODE[-causal]/DTYPE` throughout (the
    covering array's `pairs/NN/MODE[-causal-ALIGNMENT]/DTYPE`)."""
    for case in get_suite("default", device_type, 0).cases:
        parts = case.name.split("/")
        part = parts[2] if parts[0] == "pairs" else parts[1]
        mode, _, mask = part.partition("-")
        assert mode == case.mode and mask.startswith("causal") == case.causal, (case.name, case.mode, case.causal)
