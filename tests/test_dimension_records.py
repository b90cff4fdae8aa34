"""Each dimension record of the contract model: its classes described and buildable; coverage a view over them."""

import pytest

from jfa_verify.cases.case import Case
from jfa_verify.cases.construct import BUILDERS, build_case, reachable
from jfa_verify.cases.coverage import CLASSES, COVERAGE, classify, unsupported_classes, views_of
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


def test_a_view_class_of_coverage_is_read_off_the_dimension_classes_a_built_case_has():
    target = TARGETS[1]  # (triton_jfa: every view reachable, windows too; block selections where it declares them)
    views = {name: c for name, c in COVERAGE.items() if c.view and name not in unsupported_classes(target.capabilities)}
    assert {"self", "float32", "gqa", "strided", "int64_offsets", "causal_bottom_right", "window"} <= set(views)
    for name, c in views.items():
        inside = build_case({dim: classes[0] for dim, classes in c.of}, target)
        assert name in classify(inside), (name, inside)
        # a case outside the first dimension's classes (its first other class) is outside the view
        dim, classes = c.of[0]
        other = next(x for x in dimension(dim).classes if x not in classes)
        outside = build_case({dim: other}, target)
        assert name not in classify(outside), (name, outside)


def test_each_record_names_its_classes_and_the_coverage_classes_that_view_it():
    mode = BUILDERS["mode"]
    assert mode.name == "mode" and mode.classes is dimension("mode").classes and mode.description
    assert {"self", "cross", "broadcast_q", "q_ne_k"} <= set(views_of("mode"))
    assert views_of("mode")["self"] == CLASSES["self"]
    assert views_of("relation") == {}  # no coverage class views the length relation
    assert BUILDERS["dtype"]("bfloat16", Target(None)) == {"dtype": "bfloat16"}
