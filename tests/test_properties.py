"""Property tests: drawn jagged cases pass the differential check, one property per pass (each output judged).

A draw the kernel declines (outside its capabilities, or raising UnsupportedCase) proves nothing of the output:
each property counts the draws it judged and fails unless at least :data:`MIN_JUDGED_SHARE` of its in-contract
draws were judged, so a kernel that declines most cases cannot pass vacuously. (Draws of out-of-contract offsets,
which the kernel rightly rejected, are checks of the contract, not of an output: they are counted apart.)
"""

import pytest
from hypothesis import event, given, note, settings, target
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from jfa_verify import Case, run_case
from jfa_verify.run.settings import RunSettings
from jfa_verify.strategies import cases

SMALL = dict(max_batch=4, max_len=40, head_dims=(16, 24, 40))
# Found by these properties on the H200: D=40 / D_v=24 gave wrong O (see test_triton_jfa.py).
H200_D40_DV24 = Case(kv_lengths=(0, 17, 32, 1), dtype="bfloat16", head_dim=40, head_dim_v=24, num_heads_q=2,
                     num_heads_kv=1, offsets_dtype="int64", offsets_start=3, seed=107)
# Found by these properties on CPU: one key per sequence makes dQ exactly 0, the kernel's rounding
# (1.15e-06) exceeded 2 x SDPA's (3.0e-07) with a floor relative to max|dQ| = 0 (see test_compare.py).
ONE_KEY_ZERO_DQ = Case(kv_lengths=(1, 0), mode="cross", q_lengths=(3, 0), dtype="float32", num_heads_q=4,
                       num_heads_kv=2, head_dim=16, seed=3)


# The share of a property's in-contract draws that must be judged (compared against the reference). triton_jfa:
# all of them (drawn cases sit inside the capabilities it declares); about a third of all draws are out-of-contract
# offsets, rightly rejected. A low share means the kernel declines cases it declares, or the strategy draws
# outside them.
MIN_JUDGED_SHARE = 0.8


def _draw(data, kernel, device):
    """A case for the kernel under test (``--jfa-kernel``): its capabilities and its own tile sizes."""
    return data.draw(cases(kernel, device_type=device.type, **SMALL), label="case")


def _check(case, kernel, device, outputs, backward) -> str:
    """Judge each of ``outputs`` of ``case``: ``"judged"``, ``"declined"`` (unsupported: nothing judged) or
    ``"rejected"`` (out-of-contract offsets the kernel rightly rejected: nothing to compare). Every output over its
    allowance is named in the failure, not only the first."""
    result = run_case(case, kernel, device, RunSettings(backward=backward))
    drawn = currently_in_test_context()
    (note if drawn else print)(result.explain())
    if result.status == "unsupported" or (result.status == "pass" and not result.comparisons):
        verdict = "declined" if result.status == "unsupported" else "rejected"
        if drawn:
            event(f"not judged: {verdict}")
        return verdict
    assert result.status != "error", result.explain()
    by_name = {c.name: c for c in result.comparisons}
    for output in outputs:
        if by_name[output].problem is None and drawn:
            target(min(by_name[output].headroom, 10.0), label=f"{output} headroom")
    over = [output for output in outputs if not by_name[output].passed]
    assert not over, f"{', '.join(over)} over the allowance: {result.explain()}"
    return "judged"


def check_property(kernel, device, outputs: tuple, backward: bool, min_share: float = MIN_JUDGED_SHARE,
                   max_examples: "int | None" = None) -> dict:
    """Run the property of ``outputs`` over drawn cases, then require that at least ``min_share`` of the draws
    inside the contract were judged (a property that judged nothing has not passed). Returns the tally."""
    tally = {"judged": 0, "declined": 0, "rejected": 0}

    @given(data=st.data())
    def prop(data):
        tally[_check(_draw(data, kernel, device), kernel, device, outputs, backward)] += 1

    (prop if max_examples is None else settings(max_examples=max_examples)(prop))()
    in_contract = tally["judged"] + tally["declined"]
    assert in_contract and tally["judged"] >= min_share * in_contract, (
        f"{kernel.name}: only {tally['judged']} of {in_contract} drawn in-contract cases were judged on "
        f"{', '.join(outputs)} (< {min_share:.0%}; {tally['declined']} declined): the property passed vacuously")
    return tally


# One property per pass, not per output: the outputs of one pass come from the same draws and the same kernel run
# (three gradient properties ran the same backward three times, 2026-12-04), and each keeps its own target.
def test_forward_outputs_o_and_lse_within_allowance(jfa_kernel, jfa_device):
    check_property(jfa_kernel, jfa_device, ("o", "lse"), backward=False)


def test_gradients_dq_dk_dv_within_allowance(jfa_kernel, jfa_device):
    check_property(jfa_kernel, jfa_device, ("dq", "dk", "dv"), backward=True)


@pytest.mark.parametrize("case, output, backward", [(H200_D40_DV24, "o", False), (ONE_KEY_ZERO_DQ, "dq", True)],
                         ids=["h200-d40-dv24-o", "one-key-zero-dq"])
def test_cases_these_properties_found(case, output, backward, jfa_kernel, jfa_device):
    assert _check(case, jfa_kernel, jfa_device, (output,), backward=backward) == "judged"


def test_a_property_fails_for_a_kernel_that_declines_every_case(jfa_device):
    # issue 40 (6): the properties returned a pass for draws they never judged, so a kernel that declined every
    # case passed all five of them
    import dataclasses

    from jfa_verify.core.errors import UnsupportedCase
    from jfa_verify.protocol.registry import get_kernel

    def load():
        def forward(*args, **kwargs):
            raise UnsupportedCase("this build takes no case")
        return forward

    declines = dataclasses.replace(get_kernel("triton_jfa"), name="declines_all", loader=load, _impl=None)
    with pytest.raises(AssertionError, match=r"only 0 of \d+ drawn in-contract cases were judged on o"):
        check_property(declines, jfa_device, ("o",), backward=False, max_examples=3)
