"""The input-immutability check: counts and first index of changed elements, in slices or at once."""

import pytest
import torch

from jfa_verify.judge import immutability
from jfa_verify.judge.immutability import changed_inputs, snapshot


@pytest.mark.parametrize("slice_elements", [7, 1 << 26])
def test_changed_elements_are_counted_across_slices(monkeypatch, slice_elements):
    monkeypatch.setattr(immutability, "COMPARE_ELEMENTS", slice_elements)
    q = torch.randn(5, 3, 4)
    before = snapshot({"q": q, "k": q.clone()})
    q[2, 1, 3] = -q[2, 1, 3] - 1.0  # flat index 2*12 + 1*4 + 3 = 31: past the first slices of 7
    q[4, 0, 0] = float("nan")
    messages = changed_inputs(before, {"q": q, "k": before["k"][0].view(torch.float32)})
    assert messages == ["input q was modified by the call: 2 of 60 element(s) differ, first at index [2, 1, 3]; "
                        "a kernel must not write into its inputs"]


def test_a_sign_of_zero_is_a_change_and_an_untouched_input_is_not():
    k = torch.zeros(4, 2)
    before = snapshot({"k": k})
    assert changed_inputs(before, {"k": k}) == []
    k[3, 1] = -0.0
    assert changed_inputs(before, {"k": k}) == [
        "input k was modified by the call: 1 of 8 element(s) differ, first at index [3, 1]; "
        "a kernel must not write into its inputs"]
