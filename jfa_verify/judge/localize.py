"""Map an element of an output tensor back to (sequence, head, token, tile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.protocol.kernel import TileSizes

__all__ = ["Location", "locate", "spread"]


@dataclass(frozen=True)
class Location:
    """Where an element sits in the jagged problem.

    ``sequence`` is None for rows outside every sequence, and for broadcast-Q's
    dQ (a sum over all sequences). ``token`` is the row inside the sequence (or
    inside the dense Q); ``tile`` is ``token // BLOCK_M`` for query-side outputs
    (O, LSE, dQ) and ``token // BLOCK_N`` for key-side ones (dK, dV), with the
    tiles the kernel ran (None when the kernel declares no tiles).
    """

    output: str
    index: tuple[int, ...]
    sequence: Optional[int]
    head: int
    token: Optional[int]
    tile: Optional[int]
    tile_kind: str  # "BLOCK_M" or "BLOCK_N"

    @property
    def row(self) -> int:
        """The element's row of the packed tensor (LSE's second index, every other output's first)."""
        return self.index[1] if self.output == "lse" else self.index[0]

    def describe(self) -> str:
        # (a row outside every sequence: before offsets[0] or past offsets[-1] of a view into a larger buffer)
        seq = f"row {self.row}, outside every sequence" if self.sequence is None else f"sequence {self.sequence}"
        if self.sequence is None and self.output == "dq" and self.token is not None:
            seq = "dense Q (sum over sequences)"
        tok = "" if self.token is None else f", token {self.token}"
        tile = "" if self.tile is None else f", {self.tile_kind.replace('BLOCK_', '')}-tile {self.tile}"
        return f"{seq}, head {self.head}{tok}{tile} (index {list(self.index)})"


def _find(starts, lengths, row: int) -> Optional[int]:
    for b, (s, n) in enumerate(zip(starts, lengths)):
        if s <= row < s + n:
            return b
    return None


def locate(problem: JaggedProblem, output: str, index: tuple[int, ...], tiles: Optional[TileSizes]) -> Location:
    """Locate ``index`` of output ``output`` (``o``, ``lse``, ``dq``, ``dk``, ``dv``).

    Shapes: ``o``/``dq``/``dk``/``dv`` are ``[rows, H, D]`` (index = row, head,
    dim); ``lse`` is ``[H, rows]``. ``tiles``: the kernel's own tile sizes for
    ``problem`` (its launch plan's, or ``kernel.tile_sizes(problem)``); None: no tile.
    """
    if output == "lse":
        head, row = index[0], index[1]
    else:
        row, head = index[0], index[1]
    block_m, block_n = tiles.as_tuple() if tiles is not None else (None, None)
    if output in ("dk", "dv"):
        starts, lengths, block, kind = problem.k_starts, problem.k_lengths, block_n, "BLOCK_N"
    elif output == "dq":
        starts, lengths, block, kind = problem.q_starts, problem.q_lengths, block_m, "BLOCK_M"
    else:
        starts, lengths, block, kind = problem.out_starts, problem.q_lengths, block_m, "BLOCK_M"

    def tile(token: int) -> Optional[int]:
        return None if block is None else token // block

    if output == "dq" and problem.mode == "broadcast_q":
        return Location(output, index, None, head, row, tile(row), kind)
    b = _find(starts, lengths, row)
    if b is None:
        return Location(output, index, None, head, None, None, kind)
    token = row - starts[b]
    return Location(output, index, b, head, token, tile(token), kind)


def _listed(indices: list, total: int, what: str, most: int = 8) -> str:
    shown = ", ".join(map(str, indices[:most])) + (f", ... ({len(indices)} in all)" if len(indices) > most else "")
    return f"{what} {shown} of {total}"


def spread(problem: JaggedProblem, output: str, kernel, reference, allowance: float) -> Optional[str]:
    """Which heads and which sequences of output ``output`` hold a wrong element: one past ``allowance`` from the
    reference, or non-finite where the reference is not (shapes as :func:`locate`; tensors on any device). A
    bug's pattern is in it, where the worst element alone hides it: a GQA head map wrong in heads 1 and 2 of 4,
    a tile-edge bug in the sequences of one length. None when no element is wrong.
    """
    import torch

    k, r = kernel.detach().double(), reference.detach().double()
    bad = ~((k - r).abs() <= allowance) & torch.isfinite(r) | ~torch.isfinite(r) & ~(k == r)
    if not bool(bad.any()):
        return None
    head_axis, row_axis = (0, 1) if output == "lse" else (1, 0)
    per_head = bad.transpose(0, head_axis).reshape(bad.shape[head_axis], -1).any(1)
    per_row = bad.transpose(0, row_axis).reshape(bad.shape[row_axis], -1).any(1).cpu()
    parts = [_listed(per_head.nonzero().flatten().tolist(), bad.shape[head_axis], "heads")]
    if not (output == "dq" and problem.mode == "broadcast_q"):  # (the dense Q's dQ sums over every sequence)
        starts, lengths = ((problem.k_starts, problem.k_lengths) if output in ("dk", "dv") else
                           (problem.q_starts if output == "dq" else problem.out_starts, problem.q_lengths))
        wrong = [b for b, (s, n) in enumerate(zip(starts, lengths)) if n and bool(per_row[s:s + n].any())]
        inside = torch.zeros_like(per_row)
        for s, n in zip(starts, lengths):
            inside[s:s + n] = True
        outside = (per_row & ~inside).nonzero().flatten().tolist()
        if wrong or not outside:
            parts.append(_listed(wrong, len(lengths), "sequences"))
        else:
            parts.append(f"no sequence of {len(lengths)}")
        if outside:
            parts.append(_listed(outside, len(per_row), "rows") + " outside every sequence")
    return "wrong in " + "; ".join(parts)
