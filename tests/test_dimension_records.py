"""Each dimension record of the contract model: its classes described and buildable; coverage a view over them."""

import pytest

from jfa_verify.cases.case import Case
from jfa_verify.cases.construct import BUILDERS, reachable
from jfa_verify.cases.coverage import CLASSES, COVERAGE, unsupported_classes
from jfa_verify.cases.dimensions import DIMENSIONS, Target, dimension
from jfa_verify.protocol.kernel import Capabilities
from jfa_verify.protocol.registry import get_kernel

TARGETS = [Target(None), Target(get_kernel("triton_jfa"))]


@pytest.mark.parametrize("target", TARGETS, ids=["contract", "triton_jfa"])
def test_every_class_has_a_description_and_a_builder_whose_case_is_in_it(target):
    assert set(BUILDERS) == {d.name for d in DIMENSIONS}
    for dim in DIMENSIONS:
        assert dim.description and dim.classes
        for cls, description in dim.classes.items():
            assert isinstance(description, str) and description, (dim.name, cls)
            if dim.support(cls, target.capabilities) is not None:
                continue
            fields = BUILDERS[dim.name](cls, target)
            assert fields is not None or dim.name == "tile_shape", (dim.name, cls)
            if fields is None:
                continue
            case = Case(**{"kv_lengths": (5, 3), **fields})
            assert cls in dim.classify(case, target), (dim.name, cls, fields)


def test_coverage_classes_are_a_view_over_the_dimension_records():
    assert list(CLASSES) == list(COVERAGE) and all(c.description == CLASSES[n] for n, c in COVERAGE.items())
    for name, c in COVERAGE.items():
        for dim, classes in c.of:
            assert classes and set(classes) <= set(dimension(dim).classes), (name, dim, classes)


def test_coverage_reach_follows_the_records():
    caps = Capabilities(masks=("none", "causal+window"), symmetric_window=True, head_dims=(64, 128))
    out = unsupported_classes(caps)
    assert {"window_asymmetric", "window_unbounded_side", "odd_head_dim", "non_pow2_head_dim"} <= out
    assert not {"window", "window_causal", "causal_top_left", "causal_misaligned"} & out
    assert not reachable("head_dim", "odd", Target(caps)) and reachable("head_dim", "pow2", Target(caps))
