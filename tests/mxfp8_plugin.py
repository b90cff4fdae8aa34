"""An MXFP8 plugin kernel in plain torch, on the float64 reference, and planted-bug variants of it.

``mxfp8_ref`` declares ``Capabilities(mxfp8="e4m3")`` and computes exactly what the contract says (the float64
reference on the call's validated problem, O stored in bfloat16). ``mxfp8_ref_<mutation>`` is it with one of
:data:`MUTATIONS` (:func:`make_kernel`): a bug an MXFP8 fork may plant, each a wrong reading of the block scales:

* ``"per_row_scale"``: every block of a row read with the row's first block's scale (scales per row, not per 32
  elements);
* ``"neighbour_scales"``: key row ``t`` of K and V read with the scales of row ``t - 1`` (the previous token's, the
  neighbour sequence's at a sequence's first key), as an off-by-one in the scale pointer would;
* ``"v_unscaled"``: V's scales ignored (V read as plain e4m3).

``mxfp8_dequant_triton`` is the peer an MXFP8 fork is compared with: ``triton_jfa``'s dense bfloat16 kernel on the
dequantized inputs (:class:`jfa_verify.protocol.dequantizing.DequantizedMXFP8`), P rounded to bfloat16.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from jfa_verify import BlockScales, Capabilities, get_kernel, register_kernel, validate_inputs
from jfa_verify.oracles import reference_attention
from jfa_verify.protocol.dequantizing import DequantizedMXFP8

MUTATIONS = ("per_row_scale", "neighbour_scales", "v_unscaled")
CAPABILITIES = Capabilities(dtypes=(torch.float8_e4m3fn,), backward=False, head_dims=(32, 64, 96, 128),
                            masks=("none", "causal", "window", "causal+window"), mxfp8="e4m3")


def _mutated(scales: BlockScales, mutation: str) -> BlockScales:
    """``scales`` as the planted bug ``mutation`` reads them."""
    if mutation == "per_row_scale":
        return BlockScales(*(s[:, :, :1].expand(-1, -1, s.shape[2]).contiguous() for s in (scales.q, scales.k,
                                                                                          scales.v)))
    if mutation == "neighbour_scales":
        return BlockScales(scales.q, *(torch.cat([s[:1], s[:-1]]) for s in (scales.k, scales.v)))
    return BlockScales(scales.q, scales.k, torch.full_like(scales.v, 127))


def make_kernel(mutation: Optional[str] = None):
    """The contract callable, exact, or with the planted bug ``mutation`` (one of :data:`MUTATIONS`)."""

    def mxfp8_ref(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None,
                  window=None, block_scales=None):
        kw = dict(causal=causal, causal_alignment=causal_alignment, sm_scale=sm_scale, window=window)
        if mutation is not None and block_scales is not None:
            block_scales = _mutated(block_scales, mutation)
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, **kw, block_scales=block_scales)
        ref = reference_attention(problem, q, k, v)
        return ref["o"].to(torch.bfloat16), ref["lse"].float()

    return mxfp8_ref


register_kernel("mxfp8_ref", capabilities=CAPABILITIES,
                description="test plugin: MXFP8 attention on the float64 reference")(lambda: make_kernel())
for _mutation in MUTATIONS:
    register_kernel(f"mxfp8_ref_{_mutation}", capabilities=CAPABILITIES,
                    description=f"test plugin: mxfp8_ref with the planted bug {_mutation}",
                    )(lambda mutation=_mutation: make_kernel(mutation))

PEER_CAPABILITIES = dataclasses.replace(CAPABILITIES, mxfp8="bfloat16")
register_kernel("mxfp8_dequant_triton", capabilities=PEER_CAPABILITIES, requires=("triton",),
                tile_sizes=get_kernel("triton_jfa").tile_sizes_fn,
                description="test plugin: triton_jfa (bfloat16) on MXFP8 inputs dequantized into bfloat16",
                )(lambda: DequantizedMXFP8(get_kernel("triton_jfa").impl, PEER_CAPABILITIES))
