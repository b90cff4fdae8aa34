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
