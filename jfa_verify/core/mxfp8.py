"""MXFP8 inputs: float8 e4m3 data with E8M0 block scales, one per 32 elements along the head dim.

An MXFP8 fork of a JFA kernel is called with one more keyword, ``block_scales=``, a :class:`BlockScales`
``(q, k, v)`` of uint8 tensors:

* ``q``, ``k``, ``v`` (the inputs) are ``torch.float8_e4m3fn``; their head dims ``D`` and ``D_v`` are multiples
  of :data:`MX_BLOCK` (32);
* ``block_scales.q`` is ``[rows_q, H_q, D / 32]``, ``block_scales.k`` ``[T_k, H_kv, D / 32]``,
  ``block_scales.v`` ``[T_k, H_kv, D_v / 32]`` (the inputs' shapes with the head dim counted in blocks),
  uint8, on the inputs' device;
* element ``x[t, h, d]`` stands for ``x[t, h, d] * 2^(s[t, h, d // 32] - 127)``.

E8M0 (OCP Microscaling Formats (MX) Specification v1.0, 2023, its scale data type E8M0): an 8-bit unsigned
biased exponent with no sign and no mantissa, value ``2^(e - 127)`` for ``e`` in ``[0, 254]``; ``e = 255`` is
NaN, which this contract refuses (a NaN scale makes its whole block NaN). The spec's block size for MXFP8 (its
table of MX-compliant formats) is 32, fixed here.

Dequantization is exact in float64 (a power of two times an e4m3 value); :func:`dequantize` is the one home of
that rule, which the references and the adapters apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from jfa_verify.core.errors import InvalidInput

__all__ = ["E8M0_BIAS", "E8M0_NAN", "MX_BLOCK", "BlockScales", "check_scale_tensors", "check_scale_values",
           "dequantize", "e8m0_to_float"]

MX_BLOCK = 32  # elements per E8M0 scale along the head dim (OCP MX spec v1.0: MXFP8's block size is 32)
E8M0_BIAS = 127  # value 2^(e - 127) (OCP MX spec v1.0, E8M0)
E8M0_NAN = 255  # the E8M0 encoding of NaN


@dataclass(frozen=True, eq=False)
class BlockScales:
    """The E8M0 block scales of an MXFP8 call's ``q``, ``k`` and ``v`` (see the module docstring).

    Attributes:
        q: uint8 ``[rows_q, H_q, D / 32]`` (``rows_q``: ``T_q``, or ``L_q`` for broadcast-Q).
        k: uint8 ``[T_k, H_kv, D / 32]``.
        v: uint8 ``[T_k, H_kv, D_v / 32]``.

    Building one checks nothing; :func:`jfa_verify.core.contract.validate_call` checks the tensors against the
    inputs and :func:`jfa_verify.core.contract.validate_inputs` also their values. Compared by identity.
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor

    def items(self) -> tuple[tuple[str, torch.Tensor], ...]:
        """``(("q", q), ("k", k), ("v", v))``."""
        return (("q", self.q), ("k", self.k), ("v", self.v))


def check_scale_tensors(scales, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Everything about an MXFP8 call that needs no scale value: no device synchronization.

    Args:
        scales: the call's ``block_scales`` (not None).
        q, k, v: the call's inputs (already checked as tensors of rank 3 by the contract).

    Raises:
        InvalidInput: ``scales`` not a :class:`BlockScales`; an input that is not float8_e4m3fn; a head dim that
            is not a multiple of 32; a scale tensor that is not a uint8 torch.Tensor of the input's shape with
            ``D / 32`` blocks, or is on another device (each message names the value and the fix).
    """
    if not isinstance(scales, BlockScales):
        raise InvalidInput(f"block_scales={type(scales).__name__} is not a jfa_verify.BlockScales; build one with "
                           f"BlockScales(q=..., k=..., v=...) of uint8 E8M0 tensors, or pass None for no MXFP8")
    for name, x, s in (("q", q, scales.q), ("k", k, scales.k), ("v", v, scales.v)):
        if x.dtype != torch.float8_e4m3fn:
            raise InvalidInput(f"MXFP8: {name}.dtype={x.dtype}, but block_scales need float8_e4m3fn data; cast "
                               f"with {name}.to(torch.float8_e4m3fn) after dividing by its scales, or pass "
                               f"block_scales=None")
        dim = x.shape[2]
        if dim % MX_BLOCK:
            raise InvalidInput(f"MXFP8: {name}'s head dim {dim} is not a multiple of {MX_BLOCK} (one E8M0 scale "
                               f"per {MX_BLOCK} elements); pad the head dim to {-(-dim // MX_BLOCK) * MX_BLOCK}")
        full = f"block_scales.{name}"
        if not isinstance(s, torch.Tensor):
            raise InvalidInput(f"{full} is a {type(s).__name__}, not a torch.Tensor; pass a uint8 tensor")
        if s.dtype != torch.uint8:
            raise InvalidInput(f"{full}.dtype={s.dtype}; E8M0 scales are uint8 biased exponents: pass "
                               f"{full}.to(torch.uint8) (value 2^(e - 127))")
        want = (x.shape[0], x.shape[1], dim // MX_BLOCK)
        if tuple(s.shape) != want:
            raise InvalidInput(f"{full}.shape={tuple(s.shape)}, expected {want} (the rows and heads of {name} and "
                               f"one scale per {MX_BLOCK} elements of its head dim {dim})")
        if s.device != x.device:
            raise InvalidInput(f"{full} is on {s.device}, {name} on {x.device}; move it with "
                               f"{full}.to({str(x.device)!r})")


def check_scale_values(scales: BlockScales) -> None:
    """No NaN (255) scale. Reads each scale tensor's maximum: one device synchronization per tensor.

    Raises:
        InvalidInput: a scale of 255 (E8M0 NaN), naming the tensor and the first such element.
    """
    for name, s in scales.items():
        if s.numel() and int(s.max()) == E8M0_NAN:
            where = tuple(int(i) for i in (s == E8M0_NAN).nonzero()[0].tolist())
            raise InvalidInput(f"block_scales.{name}{list(where)} = 255, the E8M0 encoding of NaN (OCP MX v1.0); "
                               f"use an exponent in [0, 254] (value 2^(e - 127)), 127 for a scale of 1")


def e8m0_to_float(scales: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``2^(e - 127)`` of uint8 E8M0 exponents ``scales`` (any shape), as ``dtype`` (exact in float64 and float32,
    whose range holds ``2^-127``; 255 gives NaN, as the spec says)."""
    e = scales.to(torch.float64)
    out = torch.ldexp(torch.ones_like(e), e - E8M0_BIAS)  # 1 * 2^(e - 127): exact
    out = torch.where(e == E8M0_NAN, torch.full_like(e, float("nan")), out)
    return out.to(dtype)


def dequantize(x: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``x[t, h, d] * 2^(scales[t, h, d // 32] - 127)`` as ``dtype``.

    Args:
        x: ``[rows, H, D]`` (float8_e4m3fn; any float dtype works), ``D`` a multiple of 32.
        scales: uint8 ``[rows, H, D / 32]`` on ``x``'s device.
        dtype: of the result; float64 (the default) is exact for every e4m3 value and scale; a narrower dtype is
            exact while the product stays in its normal range.

    Returns: ``[rows, H, D]`` of ``dtype``, computed in float64 and rounded once.

    Raises:
        InvalidInput: the shapes do not match (``scales`` must be ``x``'s shape with ``D / 32`` blocks).
    """
    if x.dim() != 3 or tuple(scales.shape) != (x.shape[0], x.shape[1], x.shape[2] // MX_BLOCK) \
            or x.shape[2] % MX_BLOCK:
        raise InvalidInput(f"dequantize: x.shape={tuple(x.shape)} and scales.shape={tuple(scales.shape)} do not "
                           f"match; scales must be [rows, H, D / {MX_BLOCK}] with D a multiple of {MX_BLOCK}")
    factor = e8m0_to_float(scales).repeat_interleave(MX_BLOCK, dim=2)
    return (x.to(torch.float64) * factor).to(dtype)
