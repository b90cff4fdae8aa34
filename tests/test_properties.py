"""Property tests: drawn jagged cases pass the differential check, one property per output."""

import pytest
from hypothesis import given, note, target
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st

from jfa_verify import Case, run_case
from jfa_verify.strategies import cases

SMALL = dict(max_batch=4, max_len=40, head_dims=(16, 24, 40))
# Found by these properties on the H200: D=40 / D_v=24 gave wrong O (see test_triton_jfa.py).
H200_D40_DV24 = Case(kv_lengths=(0, 17, 32, 1), dtype="bfloat16", head_dim=40, head_dim_v=24, num_heads_q=2,
                     num_heads_kv=1, offsets_dtype="int64", offsets_start=3, seed=107)
# Found by these properties on CPU: one key per sequence makes dQ exactly 0, the kernel's rounding
# (1.15e-06) exceeded 2 x SDPA's (3.0e-07) with a floor relative to max|dQ| = 0 (see test_compare.py).
ONE_KEY_ZERO_DQ = Case(kv_lengths=(1, 0), mode="cross", q_lengths=(3, 0), dtype="float32", num_heads_q=4,
                       num_heads_kv=2, head_dim=16, seed=3)


def _draw(data, kernel, device):
    """A case for the kernel under test (``--jfa-kernel``): its capabilities and its own tile sizes."""
    return data.draw(cases(kernel, device_type=device.type, **SMALL), label="case")


def _check(case, kernel, device, output, backward):
    result = run_case(case, kernel, device, backward=backward)
    drawn = currently_in_test_context()
    (note if drawn else print)(result.explain())
    if result.status == "unsupported" or (result.status == "pass" and not result.comparisons):
        return  # outside the capabilities, or out-of-contract offsets the kernel rightly rejected
    assert result.status != "error", result.explain()
    cmp = {c.name: c for c in result.comparisons}[output]
    if cmp.problem is None and drawn:
        target(min(cmp.headroom, 10.0), label=f"{output} headroom")
    assert cmp.passed, result.explain()


@given(data=st.data())
def test_output_o_within_allowance(data, jfa_kernel, jfa_device):
    _check(_draw(data, jfa_kernel, jfa_device), jfa_kernel, jfa_device, "o", backward=False)


@given(data=st.data())
def test_lse_within_allowance(data, jfa_kernel, jfa_device):
    _check(_draw(data, jfa_kernel, jfa_device), jfa_kernel, jfa_device, "lse", backward=False)


@pytest.mark.parametrize("output", ["dq", "dk", "dv"])
@given(data=st.data())
def test_gradient_within_allowance(output, data, jfa_kernel, jfa_device):
    _check(_draw(data, jfa_kernel, jfa_device), jfa_kernel, jfa_device, output, backward=True)


@pytest.mark.parametrize("case, output, backward", [(H200_D40_DV24, "o", False), (ONE_KEY_ZERO_DQ, "dq", True)],
                         ids=["h200-d40-dv24-o", "one-key-zero-dq"])
def test_cases_these_properties_found(case, output, backward, jfa_kernel, jfa_device):
    _check(case, jfa_kernel, jfa_device, output, backward=backward)
