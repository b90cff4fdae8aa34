"""A case's block selection, described: block sizes and a pattern that draws the selected KV blocks.

A :class:`~jfa_verify.cases.case.Case` of a block-sparse kernel carries a :class:`Sparsity` (JSON: an object
``{"block_m": 64, "block_n": 64, "pattern": "topk", "ratio": 0.5}``), never the selection's indices: the
selection is drawn from the case's lengths and seed when the case is materialized, the same on every machine
(NumPy's PCG64 seeded by ``(seed, sequence)``), so a reproducer file replays it exactly and a shrunk case keeps its
pattern. A packed case's parts draw with their own seeds and sequence numbers, as they would standing alone.

Patterns (per sequence with ``nk = ceil(L_k / block_n)`` KV blocks, per query block of it):

* ``"all"``: every KV block (the selection changes nothing: dense attention);
* ``"topk"``: ``k = max(1, round(ratio * nk))`` KV blocks chosen at random (a top-k of random pooled scores);
* ``"one"``: one KV block chosen at random;
* ``"empty_block"``: as ``"topk"``, except one query block of each sequence (chosen at random) selects nothing,
  so its rows see no key (O = 0, LSE = -inf);
* ``"with_last"``: as ``"topk"``, plus always the last KV block, partial when ``block_n`` does not divide ``L_k``;
* ``"without_last"``: as ``"topk"``, minus the last KV block (possibly leaving a query block empty);
* ``"edges"``: the first and the last KV block of the sequence, the ones next to its neighbours in the packed
  buffer, where an off-by-one in a block's start or end reads the neighbour's keys.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.selection import BlockSelection, check_block_size

__all__ = ["PATTERNS", "Sparsity"]

PATTERNS = ("all", "topk", "one", "empty_block", "with_last", "without_last", "edges")
# Mixed into each sequence's generator seed, so that a selection's stream is none of the value streams'.
_STREAM = 0x5E1EC7


@dataclass(frozen=True)
class Sparsity:
    """How a case's block selection is drawn.

    Attributes:
        block_m, block_n: the selection's block sizes (powers of two in [16, 256]).
        pattern: one of :data:`PATTERNS` (see the module docstring).
        ratio: the share of a sequence's KV blocks ``"topk"`` and the patterns built on it keep (in ``(0, 1]``).

    Raises:
        InvalidInput: a block size, pattern or ratio out of range (the message names it and the fix).
    """

    block_m: int
    block_n: int
    pattern: str = "topk"
    ratio: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "block_m", check_block_size("block_sparsity.block_m", self.block_m))
        object.__setattr__(self, "block_n", check_block_size("block_sparsity.block_n", self.block_n))
        if self.pattern not in PATTERNS:
            raise InvalidInput(f"block_sparsity.pattern={self.pattern!r} is not one of {PATTERNS}")
        if isinstance(self.ratio, bool) or not isinstance(self.ratio, numbers.Real) or not 0 < self.ratio <= 1:
            raise InvalidInput(f"block_sparsity.ratio={self.ratio!r} is not a number in (0, 1]; pass the share of "
                               f"KV blocks a query block keeps, e.g. 0.5")
        object.__setattr__(self, "ratio", float(self.ratio))

    @classmethod
    def of(cls, value) -> Optional["Sparsity"]:
        """``value`` as a :class:`Sparsity`: one already, its JSON object (a dict of its fields), or None.

        Raises:
            InvalidInput: anything else, or a dict with unknown or missing fields.
        """
        if value is None or isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise InvalidInput(f"block_sparsity={value!r} is not an object like {{\"block_m\": 64, \"block_n\": 64, "
                               f"\"pattern\": \"topk\", \"ratio\": 0.5}} or null")
        known = ("block_m", "block_n", "pattern", "ratio")
        unknown = sorted(set(value) - set(known))
        if unknown or not {"block_m", "block_n"} <= set(value):
            raise InvalidInput(f"block_sparsity={value!r}: fields are {known} (block_m and block_n required)"
                               + (f"; unknown: {unknown}" if unknown else ""))
        return cls(**value)

    @property
    def block_sizes(self) -> tuple[int, int]:
        return (self.block_m, self.block_n)

    def describe(self) -> str:
        """E.g. ``topk0.5/64x64``."""
        ratio = f"{self.ratio:g}" if self.pattern in ("topk", "empty_block", "with_last", "without_last") else ""
        return f"{self.pattern}{ratio}/{self.block_m}x{self.block_n}"

    def blocks(self, q_lengths: Sequence[int], k_lengths: Sequence[int], seed: int) -> list[list[list[int]]]:
        """The selection this pattern draws: per sequence, per query block, its KV blocks (increasing ints).

        ``q_lengths``, ``k_lengths``: the sequences' query and key counts; ``seed``: the case's seed (each sequence
        ``b`` draws from PCG64 seeded by ``(seed, b)``).
        """
        out = []
        for b, (lq, lk) in enumerate(zip(q_lengths, k_lengths)):
            rng = np.random.Generator(np.random.PCG64([int(seed), b, _STREAM]))
            nq, nk = -(-int(lq) // self.block_m), -(-int(lk) // self.block_n)
            empty = int(rng.integers(nq)) if self.pattern == "empty_block" and nq else -1
            out.append([self._row(rng, nk) if m != empty else [] for m in range(nq)])
        return out

    def _row(self, rng: np.random.Generator, nk: int) -> list[int]:
        if nk == 0:
            return []
        if self.pattern == "all":
            return list(range(nk))
        if self.pattern == "edges":
            return sorted({0, nk - 1})
        k = 1 if self.pattern == "one" else max(1, round(self.ratio * nk))
        chosen = set(rng.choice(nk, size=min(k, nk), replace=False).tolist())
        if self.pattern == "with_last":
            chosen.add(nk - 1)
        elif self.pattern == "without_last":
            chosen.discard(nk - 1)
        return sorted(chosen)

    def selection(self, blocks: list[list[list[int]]], device) -> BlockSelection:
        """``blocks`` (as :meth:`blocks` returns them) as a :class:`~jfa_verify.core.selection.BlockSelection`
        of int32 tensors on ``device``."""
        rows = [row for sequence in blocks for row in sequence]
        offsets = np.zeros(len(rows) + 1, dtype=np.int32)
        offsets[1:] = np.cumsum([len(row) for row in rows], dtype=np.int64)
        indices = np.array([j for row in rows for j in row], dtype=np.int32)
        return BlockSelection(self.block_m, self.block_n, torch.from_numpy(offsets).to(device),
                              torch.from_numpy(indices).to(device))
