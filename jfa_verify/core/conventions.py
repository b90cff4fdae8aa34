"""Documented deviations from the contract that a kernel may declare, and how a finding is matched to one.

A peer kernel sometimes follows a convention of its own where the contract is explicit; FlashAttention-2's
varlen kernels, for example, return LSE = +inf for a query row that sees no key, where the contract says
-inf (a consumer that merges partial results by LSE then gets garbage). A kernel adapter may declare
such a convention (:attr:`jfa_verify.protocol.kernel.Capabilities.conventions`) so that a team can accept it
knowingly. The finding is never converted away: the case stays a failure, its verdict names the
convention that explains it, and only a user who passes ``--accept NAME`` turns it into a pass
(still marked "accepted convention" in every report).

A convention explains a failing output when the output, *normalized* by the convention (the
kernel's value rewritten into the contract's), passes the same comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

__all__ = ["CONVENTIONS", "Convention", "P_QUANTIZATIONS", "PQuantization", "normalized"]


@dataclass(frozen=True)
class Convention:
    """One declarable deviation: the output it concerns, what it is, and the rewrite into the contract.

    ``normalize(kernel_output, reference)`` returns the kernel's output as the contract would have it
    (same shape; ``reference`` is the float64 reference of that output, ``-inf`` where a row sees no key).
    """

    output: str
    description: str
    normalize: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _plus_inf_to_minus_inf(got: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    # Only where the reference says "no visible key" (-inf): a +inf anywhere else stays a finding.
    empty = torch.isneginf(ref.to(got.device))
    return torch.where(empty & torch.isposinf(got), torch.full_like(got, float("-inf")), got)


CONVENTIONS: dict[str, Convention] = {
    "lse_plus_inf_empty_rows": Convention(
        "lse", "LSE = +inf (the contract: -inf) for query rows that see no key (FlashAttention-2 varlen)",
        _plus_inf_to_minus_inf),
}


@dataclass(frozen=True)
class PQuantization:
    """A low-precision kernel's declared rule for rounding the softmax probabilities ``P`` before ``P V``.

    Not a departure from the contract (the references compute ``P`` exactly and nothing is normalized): the
    rounding is an error the kernel makes on purpose, and its rule names the budget row that bounds it.

    Attributes:
        description: the rule, in words (shown in reports and ``jfa-verify kernels``).
        precision: the budget row (:data:`jfa_verify.judge.budgets.PRECISIONS`) whose ``operand_eps`` is the
            unit roundoff of the rounded ``P``.
    """

    description: str
    precision: str


# The P-quantization rules an MXFP8 kernel may declare (``Capabilities(mxfp8=NAME)``).
P_QUANTIZATIONS: dict[str, PQuantization] = {
    "e4m3": PQuantization(
        "P = exp(S - m) in float32, times 2^8 (so that P >= 2^-14 keeps 3 mantissa bits), rounded to float8 e4m3 "
        "(round to nearest even) before P V; P V accumulates in float32 and is divided by 2^8; V dequantized "
        "by its block scales exactly", "mxfp8"),
    # A dense kernel on the dequantized inputs (jfa_verify.protocol.dequantizing.DequantizedMXFP8): P as the dense
    # kernel rounds it; the mxfp8 row bounds it (bfloat16's unit roundoff is below e4m3's).
    "bfloat16": PQuantization(
        "inputs dequantized into bfloat16 (exact in range), then a dense kernel: P rounded to bfloat16 before P V, "
        "accumulated in float32", "mxfp8"),
}


def normalized(names, output: str, got: torch.Tensor, ref: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """``[(convention name, normalized output)]`` for each declared convention of ``output`` that changes it."""
    out = []
    for name in names:
        conv = CONVENTIONS[name]
        if conv.output == output:
            fixed = conv.normalize(got, ref)
            both_nan = torch.isnan(fixed) & torch.isnan(got)
            if bool(((fixed != got) & ~both_nan).any()):
                out.append((name, fixed))
    return out
