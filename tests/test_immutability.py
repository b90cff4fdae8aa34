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


def _clobbering(base: str, name: str, clobber):
    """``base``'s kernel, calling ``clobber(kwargs)`` after each correct call (a kernel that writes into an input)."""
    import dataclasses

    from jfa_verify.protocol.registry import get_kernel

    kernel = get_kernel(base)

    def load():
        inner = kernel.impl  # the contract callable (its launch path is not wrapped)

        def call(*args, **kwargs):
            out = inner(*args, **kwargs)
            clobber(kwargs)
            return out
        return call

    return dataclasses.replace(kernel, name=name, loader=load, _impl=None)


@pytest.mark.parametrize("base, clobber, named", [
    ("triton_jfa", lambda kw: kw["block_selection"].indices.zero_(), "block_selection.indices"),
    ("triton_jfa", lambda kw: kw["block_selection"].offsets.zero_(), "block_selection.offsets"),
    ("triton_jfa_mxfp8", lambda kw: kw["block_scales"].k.fill_(127), "block_scales.k"),
])
def test_a_kernel_writing_into_its_selection_or_scales_is_a_contract_finding(base, clobber, named, interpreter_device):
    # regression (a new user's trial): only q, k, v, the offsets and dO were compared; a kernel zeroing the block
    # selection it was handed passed, and one rewriting the MXFP8 scales showed as a wrong O (the references then
    # read the rewritten scales) with no word of the cause
    from jfa_verify import Case, run_case
    from jfa_verify.cases.sparsity import Sparsity

    extra = ({"block_sparsity": Sparsity(16, 16, pattern="topk")} if base == "triton_jfa" else
             {"dtype": "float8_e4m3fn", "block_scaling": {"pattern": "random"}, "head_dim": 64, "head_dim_v": 64})
    case = Case(**{"kv_lengths": (40, 35), "num_heads_q": 2, "num_heads_kv": 1, "head_dim": 32, "dtype": "float32",
                   "seed": 4, **extra})
    assert run_case(case, _clobbering(base, "untouched", lambda kw: None), interpreter_device).status == "pass"
    result = run_case(case, _clobbering(base, "clobbers", clobber), interpreter_device)
    assert result.status == "fail" and any(f"input {named} was modified by the call" in v
                                           for v in result.findings_of("contract")), result.explain()
