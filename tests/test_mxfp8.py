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


def _inputs(seed=0, d=64, dv=32, rows=8, lo=120, hi=135):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, 2, d, generator=g).to(F8)
    k = torch.randn(rows, 2, d, generator=g).to(F8)
    v = torch.randn(rows, 2, dv, generator=g).to(F8)
    scales = BlockScales(*(torch.randint(lo, hi, (rows, 2, x.shape[2] // 32), generator=g, dtype=torch.uint8)
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


# ----------------------------------------------------------------------------- oracles and budgets


def _problem_pair(seed=2, lo=120, hi=135):
    """An MXFP8 call (self-attention, causal) and the float32 call on the values it stands for, built here."""
    q, k, v, s = _inputs(seed=seed, lo=lo, hi=hi)
    deq = []
    for x, sc in ((q, s.q), (k, s.k), (v, s.v)):
        factor = torch.tensor([[[math.ldexp(1.0, int(e) - 127) for e in sc[t, h].tolist() for _ in range(32)]
                                for h in range(x.shape[1])] for t in range(x.shape[0])], dtype=torch.float64)
        deq.append((x.to(torch.float64) * factor).to(torch.float32))  # exact: scales 2^-7..2^7 keep normals
    mx = validate_inputs(q, k, v, OFF, OFF, causal=True, block_scales=s)
    plain = validate_inputs(*deq, OFF, OFF, causal=True, sm_scale=mx.sm_scale)
    return (mx, (q, k, v)), (plain, tuple(deq)), s


def test_references_see_the_dequantized_values_exactly():
    from jfa_verify.oracles import padded_sdpa_attention, reference_attention
    from jfa_verify.oracles.blockwise import blockwise_attention

    (mx, inputs), (plain, deq), _ = _problem_pair()
    got, want = reference_attention(mx, *inputs), reference_attention(plain, *deq)
    for name in ("o", "lse", "o_lowp", "o_acc", "lse_acc"):
        assert torch.equal(got[name], want[name]), name
    assert got["o"].abs().max() > 0.01  # not a trivially zero output
    sdpa = padded_sdpa_attention(mx, *inputs)
    sdpa_plain = padded_sdpa_attention(plain, *(x.to(torch.bfloat16) for x in deq))
    assert sdpa["o"].dtype == torch.bfloat16 and torch.equal(sdpa["o"], sdpa_plain["o"])
    assert torch.allclose(blockwise_attention(mx, *inputs)["o"], want["o"], rtol=0, atol=1e-12)


def test_mxfp8_budget_is_the_float8_row_and_catches_a_wrong_scale():
    from jfa_verify.judge.budgets import PRECISIONS, default_table, precision_of
    from jfa_verify.judge.compare import compare_output, reference_scales
    from jfa_verify.oracles import padded_sdpa_attention, reference_attention

    assert precision_of(F8, block_scaled=True) == "mxfp8"
    assert PRECISIONS["mxfp8"] == PRECISIONS["float8_e4m3fn"]
    table = default_table()
    assert table.budget("mxfp8", "o") == table.budget(F8, "o")
    with pytest.raises(InvalidInput, match="block_scaled=True needs float8_e4m3fn inputs"):
        precision_of(torch.bfloat16, block_scaled=True)

    (mx, inputs), _, s = _problem_pair(seed=3, lo=125, hi=130)  # scales 2^-2..2^2: logits of a few units
    ref, sdpa = reference_attention(mx, *inputs), padded_sdpa_attention(mx, *inputs)

    def judged(o):
        return compare_output("o", o, sdpa["o"], ref["o"], F8, *reference_scales(ref, "o"), precision="mxfp8")

    assert judged(ref["o"].to(torch.bfloat16)).passed  # the exact answer, stored in bf16
    # V read with the scales of the key row before it (a neighbour's scales)
    wrong_v = BlockScales(s.q, s.k, torch.roll(s.v, 1, dims=0))
    bad = reference_attention(validate_inputs(*inputs, OFF, OFF, causal=True, block_scales=wrong_v), *inputs)
    verdict = judged(bad["o"].to(torch.bfloat16))
    assert not verdict.passed and verdict.kernel_error > 2 * verdict.allowance
    # Q's second block read with the first block's scale (scales per row, not per 32-element block)
    per_row = BlockScales(s.q[:, :, :1].expand(-1, -1, 2).contiguous(), s.k, s.v)
    bad = reference_attention(validate_inputs(*inputs, OFF, OFF, causal=True, block_scales=per_row), *inputs)
    verdict = judged(bad["o"].to(torch.bfloat16))
    assert not verdict.passed and verdict.kernel_error > 2 * verdict.allowance
