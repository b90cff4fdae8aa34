"""A case's MXFP8 block scales, described: a pattern that draws the E8M0 scales (and the data they break).

A :class:`~jfa_verify.cases.case.Case` of an MXFP8 kernel (``Capabilities(mxfp8=...)``) carries a
:class:`Scaling` (JSON: an object ``{"pattern": "random"}``), never the scales: they are drawn from the case's
shape and seed when the case is materialized (NumPy's PCG64 seeded by ``(seed, role)``), the same on every machine,
so a reproducer replays them exactly; a packed case's parts draw their own, as they would standing alone.

Patterns (E8M0 exponents ``e``, value ``2^(e - 127)``; one per 32 elements of the head dim, per row and head):

* ``"unit"``: every scale 127 (a scale of 1: MXFP8 equals plain float8);
* ``"random"``: exponents uniform in ``[123, 131]`` (scales ``2^-4`` to ``2^4``);
* ``"extremes"``: near the E8M0 ends with every dequantized value and product finite and exact: in even head-dim
  blocks Q's exponents are in ``[18, 21]`` and K's in ``[233, 236]``, in odd blocks the reverse (so each
  ``q_d k_d`` is ``2^-3`` to ``2^3`` times the e4m3 product), V's in ``[220, 223]`` (even) and ``[30, 33]`` (odd);
  the largest dequantized value, ``448 * 2^109``, and the smallest nonzero, ``2^-9 * 2^-109``, are bfloat16 and
  float32 normals, and ``2^8 P V`` summed over a KV block of up to 2^10 keys stays below ``2^128``;
* ``"zero_blocks"``: as ``"random"``, except one block in half of the rows and heads (chosen at random) whose
  data are all zero, with the scale at an E8M0 end (0 or 254: ``0 * 2^127`` must stay 0, never NaN or inf);
* ``"outlier"``: exponents in ``[122, 125]`` for Q and K, as ``"random"`` for V, and one element per block set to
  +-448 (e4m3's largest finite value, the sign of the element it replaces), as block scaling of activations with
  outliers leaves them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.mxfp8 import MX_BLOCK

__all__ = ["SCALE_PATTERNS", "Scaling"]

SCALE_PATTERNS = ("unit", "random", "extremes", "zero_blocks", "outlier")
# Mixed into the generator seed, so that the scales' streams are none of the value streams'.
_STREAM = 0x3C8E0
_ROLES = ("q", "k", "v")
_E4M3_MAX = 448.0


@dataclass(frozen=True)
class Scaling:
    """How a case's E8M0 block scales are drawn (see the module docstring).

    Attributes:
        pattern: one of :data:`SCALE_PATTERNS`.

    Raises:
        InvalidInput: an unknown pattern (the message names it and the patterns).
    """

    pattern: str = "random"

    def __post_init__(self) -> None:
        if self.pattern not in SCALE_PATTERNS:
            raise InvalidInput(f"block_scaling.pattern={self.pattern!r} is not one of {SCALE_PATTERNS}")

    @classmethod
    def of(cls, value) -> Optional["Scaling"]:
        """``value`` as a :class:`Scaling`: one already, its JSON object (``{"pattern": ...}``), or None.

        Raises:
            InvalidInput: anything else, or a dict with other fields.
        """
        if value is None or isinstance(value, cls):
            return value
        if not isinstance(value, dict) or set(value) != {"pattern"}:
            raise InvalidInput(f"block_scaling={value!r} is not an object like {{\"pattern\": \"random\"}} or null; "
                               f"patterns: {SCALE_PATTERNS}")
        return cls(**value)

    def draw(self, role: str, shape: tuple[int, int, int], seed: int
             ) -> tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]:
        """The scales of input ``role`` (``"q"``, ``"k"`` or ``"v"``) of ``shape`` ``[rows, H, D]``, and what the
        pattern does to its data.

        Returns: ``(scales, zero, outlier)``: uint8 ``[rows, H, D / 32]`` exponents; for ``"zero_blocks"`` a bool
        ``[rows, H, D / 32]`` of the blocks whose data are zero (else None); for ``"outlier"`` an int64
        ``[rows, H, D / 32]`` of each block's outlier position within the block (else None).

        Raises:
            InvalidInput: an unknown role, or ``D`` not a multiple of 32.
        """
        if role not in _ROLES or shape[2] % MX_BLOCK:
            raise InvalidInput(f"Scaling.draw(role={role!r}, shape={shape}): role one of {_ROLES}, head dim a "
                               f"multiple of {MX_BLOCK}")
        rows, heads, dim = shape
        nb = dim // MX_BLOCK
        rng = np.random.Generator(np.random.PCG64([int(seed), _ROLES.index(role), _STREAM]))
        size = (rows, heads, nb)
        zero = outlier = None
        if self.pattern == "unit":
            scales = np.full(size, 127)
        elif self.pattern == "extremes":
            low, high = rng.integers(18, 22, size), rng.integers(233, 237, size)
            if role == "v":
                low, high = rng.integers(30, 34, size), rng.integers(220, 224, size)
            even = (np.arange(nb) % 2 == 0)[None, None, :]
            scales = np.where(even == (role != "q"), high, low)
        elif self.pattern == "outlier" and role != "v":
            scales = rng.integers(122, 126, size)
        else:
            scales = rng.integers(123, 132, size)
        if self.pattern == "zero_blocks":
            pick = np.where(rng.integers(0, 2, (rows, heads)) == 1, rng.integers(0, nb, (rows, heads)), -1)
            zero = np.arange(nb)[None, None, :] == pick[..., None]
            scales = np.where(zero, np.where(rng.integers(0, 2, size) == 1, 254, 0), scales)
        if self.pattern == "outlier":
            outlier = rng.integers(0, MX_BLOCK, size)
        return scales.astype(np.uint8), zero, outlier

    @staticmethod
    def apply(x, zero: Optional[np.ndarray], outlier: Optional[np.ndarray]):
        """``x`` (a float ``[rows, H, D]`` tensor, any device) with :meth:`draw`'s zero blocks and outliers written in
        (a new tensor of ``x``'s dtype; ``x`` itself when there are neither)."""
        import torch

        if zero is None and outlier is None:
            return x
        rows, heads, dim = x.shape
        y = x.to(torch.float32).reshape(rows, heads, dim // MX_BLOCK, MX_BLOCK).clone()
        if zero is not None:
            y[torch.from_numpy(zero).to(y.device)] = 0.0
        if outlier is not None:
            at = torch.from_numpy(outlier).to(y.device)[..., None]
            sign = torch.where(torch.gather(y, 3, at) < 0, -1.0, 1.0)
            y.scatter_(3, at, sign * _E4M3_MAX)
        return y.reshape(rows, heads, dim).to(x.dtype)
