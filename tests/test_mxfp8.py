"""MXFP8 calls: float8 e4m3 inputs with E8M0 block scales (one per 32 elements of the head dim).

Expected values are built here from the definition (OCP MX v1.0: E8M0 ``e`` stands for ``2^(e - 127)``), element
by element, independently of :mod:`jfa_verify.core.mxfp8`.
"""

from __future__ import annotations

import math

import pytest
import torch

from jfa_verify import BlockScales, Capabilities, InvalidInput, validate_call, validate_inputs
from jfa_verify.core.conventions import P_QUANTIZATIONS
from jfa_verify.core.mxfp8 import dequantize, e8m0_to_float

F8 = torch.float8_e4m3fn
# two sequences of 5 and 3 tokens, H = 2 heads, D = 64 (two scale blocks), D_v = 32 (one)
OFF = torch.tensor([0, 5, 8], dtype=torch.int32)


def _inputs(seed=0, d=64, dv=32, rows=8):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, 2, d, generator=g).to(F8)
    k = torch.randn(rows, 2, d, generator=g).to(F8)
    v = torch.randn(rows, 2, dv, generator=g).to(F8)
    scales = BlockScales(*(torch.randint(120, 135, (rows, 2, x.shape[2] // 32), generator=g, dtype=torch.uint8)
                           for x in (q, k, v)))
    return q, k, v, scales


def test_valid_call_keeps_its_scales_on_the_problem_and_call_shape():
    q, k, v, s = _inputs()
    p = validate_inputs(q, k, v, OFF, OFF, block_scales=s)
    assert p.block_scales is s and p.call_shape().block_scales is s
    assert validate_call(q, k, v, OFF, OFF, block_scales=s).block_scales is s
    assert validate_inputs(q, k, v, OFF, OFF).block_scales is None  # plain float8 calls are unchanged


def test_dequantize_is_the_definition_element_by_element():
    q, _, _, s = _inputs(seed=1)
    got = dequantize(q, s.q)
    assert got.dtype == torch.float64
    for t in (0, 7):
        for h in (0, 1):
            for d in (0, 31, 32, 63):
                want = float(q[t, h, d].to(torch.float64)) * math.ldexp(1.0, int(s.q[t, h, d // 32]) - 127)
                assert got[t, h, d].item() == want
    ends = e8m0_to_float(torch.tensor([0, 127, 254, 255], dtype=torch.uint8))
    assert ends[:3].tolist() == [2.0 ** -127, 1.0, 2.0 ** 127] and math.isnan(ends[3].item())


@pytest.mark.parametrize("change, words", [
    (lambda q, k, v, s: (q, k, v, (s.q, s.k, s.v)), "is not a jfa_verify.BlockScales"),
    (lambda q, k, v, s: tuple(x.to(torch.bfloat16) for x in (q, k, v)) + (s,),
     "q.dtype=torch.bfloat16, but block_scales need float8_e4m3fn data"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q.to(torch.int32), s.k, s.v)), "block_scales.q.dtype=torch.int32"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q, s.k[:, :, :1], s.v)), "block_scales.k.shape=(8, 2, 1)"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q, s.k, s.v[:7])), "block_scales.v.shape=(7, 2, 1)"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q, s.k, s.v.tolist())), "block_scales.v is a list"),
    (lambda q, k, v, s: (q, k, v, BlockScales(s.q, s.k, torch.where(s.v == s.v[3, 1, 0], 255, s.v)
                                              .to(torch.uint8))), "= 255, the E8M0 encoding of NaN"),
])
def test_bad_scales_are_refused_with_the_value_and_the_fix(change, words):
    q, k, v, s = change(*_inputs())
    with pytest.raises(InvalidInput) as err:
        validate_inputs(q, k, v, OFF, OFF, block_scales=s)
    assert words in str(err.value)


def test_nan_scale_names_its_element():
    q, k, v, s = _inputs()
    bad = s.k.clone()
    bad[6, 1, 1] = 255
    with pytest.raises(InvalidInput, match=r"block_scales\.k\[6, 1, 1\] = 255.*127 for a scale of 1"):
        validate_inputs(q, k, v, OFF, OFF, block_scales=BlockScales(s.q, bad, s.v))
    # validate_call reads no value: the NaN scale is found only by validate_inputs
    assert validate_call(q, k, v, OFF, OFF, block_scales=BlockScales(s.q, bad, s.v)).block_scales is not None


def test_head_dim_not_a_multiple_of_32_names_the_padding():
    q, k, v, _ = _inputs(d=48, dv=32)
    s = BlockScales(torch.full((8, 2, 1), 127, dtype=torch.uint8), torch.full((8, 2, 1), 127, dtype=torch.uint8),
                    torch.full((8, 2, 1), 127, dtype=torch.uint8))
    with pytest.raises(InvalidInput, match="q's head dim 48 is not a multiple of 32.*pad the head dim to 64"):
        validate_inputs(q, k, v, OFF, OFF, block_scales=s)


@pytest.mark.skipif(not torch.backends.mps.is_available() and not torch.cuda.is_available(),
                    reason="needs a second device type")
def test_scales_on_another_device_are_refused():  # pragma: no cover - no second device on CI
    q, k, v, s = _inputs()
    other = "cuda" if torch.cuda.is_available() else "mps"
    with pytest.raises(InvalidInput, match=r"block_scales\.q is on"):
        validate_inputs(q, k, v, OFF, OFF, block_scales=BlockScales(s.q.to(other), s.k, s.v))


def test_capabilities_declare_mxfp8_by_its_p_rule():
    q, k, v, s = _inputs()
    p = validate_inputs(q, k, v, OFF, OFF, block_scales=s)
    plain = Capabilities(dtypes=(F8,), backward=False)
    assert plain.mxfp8 is None
    assert "MXFP8 inputs (block_scales) not supported" in plain.unsupported_reason(p)
    assert plain.unsupported_reason(validate_inputs(q, k, v, OFF, OFF)) is None  # plain float8 still runs
    mx = Capabilities(dtypes=(F8,), backward=False, mxfp8="e4m3")
    assert mx.unsupported_reason(p) is None
    assert P_QUANTIZATIONS["e4m3"].precision == "mxfp8" and "2^8" in P_QUANTIZATIONS["e4m3"].description
    with pytest.raises(InvalidInput, match=r"mxfp8='bf16' is not a P-quantization rule; pass one of \['e4m3'\]"):
        Capabilities(mxfp8="bf16")
