"""Map an element of an output tensor back to (sequence, head, token, tile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .contract import JaggedProblem
from .protocol import TileSizes

__all__ = ["Location", "locate"]


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

    def describe(self) -> str:
        seq = "outside every sequence" if self.sequence is None else f"sequence {self.sequence}"
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
