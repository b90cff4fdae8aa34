"""Block-sparse attention's block selection: which KV blocks each query block of each sequence visits.

A block-sparse fork of a JFA kernel (a cheap pooled score picks the top-k KV blocks of each query block) is
called with one more keyword, ``block_selection=``, a :class:`BlockSelection` the caller builds:

* query blocks are numbered per sequence and flattened in sequence order: sequence ``b`` has
  ``ceil(L_q[b] / block_m)`` query blocks (0 when it has no query), so the flattened list has
  ``NQB = sum_b ceil(L_q[b] / block_m)`` entries;
* ``offsets`` (``[NQB + 1]``, int32/int64, on the device of ``q``) are CSR row pointers into ``indices``
  (``[nnz]``, int32/int64): query block ``t``'s KV blocks are ``indices[offsets[t]:offsets[t + 1]]``, numbered
  *within the sequence* (KV block ``j`` is keys ``j * block_n`` to ``min((j + 1) * block_n, L_k[b]) - 1``),
  strictly increasing, each in ``[0, ceil(L_k[b] / block_n))``;
* ``block_m``, ``block_n``: powers of two in ``[16, 256]``.

The visibility rule itself (a key is visible iff the mask allows it *and* its KV block is selected for the row's
query block) lives with the rest of the rule in :mod:`jfa_verify.core.contract`
(:func:`~jfa_verify.core.contract.visible_masks`); this module holds the value, its validation and its host view
(:class:`SelectedBlocks`, what :attr:`JaggedProblem.block_selection` holds).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch

from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.index_tensors import check_index_tensor, first_fall

__all__ = ["BLOCK_SIZES", "BlockSelection", "SelectedBlocks", "check_block_size", "check_selection_tensors",
           "select_blocks"]

# The block sizes a selection may name: powers of two in [16, 256] (the tile sizes of GPU attention kernels).
BLOCK_SIZES = (16, 32, 64, 128, 256)


def check_block_size(name: str, value) -> int:
    """``value`` as an int when it is one of :data:`BLOCK_SIZES`.

    Raises:
        InvalidInput: not an int, or not a power of two in [16, 256] (the message names the value and the fix).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise InvalidInput(f"{name}={value!r} is not an int; pass a power of two in [16, 256], one of {BLOCK_SIZES}")
    if int(value) not in BLOCK_SIZES:
        raise InvalidInput(f"{name}={int(value)} is not a power of two in [16, 256]; pass one of {BLOCK_SIZES}")
    return int(value)


@dataclass(frozen=True, eq=False)
class BlockSelection:
    """The KV blocks each query block visits, CSR-style (see the module docstring for the numbering).

    Attributes:
        block_m: query rows per query block (int, one of :data:`BLOCK_SIZES`).
        block_n: keys per KV block (int, one of :data:`BLOCK_SIZES`).
        offsets: ``[NQB + 1]`` int32/int64 tensor on the device of ``q``: ``offsets[0] == 0``, non-decreasing,
            ``offsets[-1] == len(indices)``.
        indices: ``[nnz]`` int32/int64 tensor on the same device: per query block, its KV block numbers within
            the sequence, strictly increasing.

    The selection is the same for every head. Building one checks only the block sizes; the rest is checked
    against the lengths by :func:`jfa_verify.core.contract.validate_inputs`, which reads both tensors to the
    host once. Compared by identity (it holds tensors).

    Raises:
        InvalidInput: a block size that is not a power of two in [16, 256].
    """

    block_m: int
    block_n: int
    offsets: torch.Tensor
    indices: torch.Tensor

    def __post_init__(self) -> None:
        object.__setattr__(self, "block_m", check_block_size("block_selection.block_m", self.block_m))
        object.__setattr__(self, "block_n", check_block_size("block_selection.block_n", self.block_n))

    @property
    def block_sizes(self) -> tuple[int, int]:
        """``(block_m, block_n)``: what a kernel's ``Capabilities.block_sparse`` lists."""
        return (self.block_m, self.block_n)


@dataclass(frozen=True)
class SelectedBlocks:
    """The host view of a validated :class:`BlockSelection` (:attr:`JaggedProblem.block_selection`).

    Attributes:
        block_m, block_n: the block sizes (ints).
        q_block_starts: ``B + 1`` ints: the flattened index of each sequence's first query block (sequence ``b``'s
            query blocks are ``q_block_starts[b]:q_block_starts[b + 1]``).
        offsets: ``NQB + 1`` ints, the CSR row pointers.
        indices: ``nnz`` ints, each query block's KV blocks within its sequence, strictly increasing.
        source: the :class:`BlockSelection` the caller passed (its device tensors, which a kernel reads); not
            compared.
    """

    block_m: int
    block_n: int
    q_block_starts: tuple[int, ...]
    offsets: tuple[int, ...]
    indices: tuple[int, ...]
    source: Optional[BlockSelection] = field(default=None, compare=False, repr=False)

    @property
    def block_sizes(self) -> tuple[int, int]:
        return (self.block_m, self.block_n)

    @property
    def num_query_blocks(self) -> int:
        """``NQB``: query blocks of every sequence together."""
        return len(self.offsets) - 1

    def query_blocks(self, b: int) -> int:
        """How many query blocks sequence ``b`` has (``ceil(L_q[b] / block_m)``)."""
        return self.q_block_starts[b + 1] - self.q_block_starts[b]

    def selected(self, b: int, m: int) -> tuple[int, ...]:
        """The KV blocks (numbers within sequence ``b``, increasing) that query block ``m`` of sequence ``b`` visits.

        Raises:
            IndexError: ``m`` is not one of sequence ``b``'s query blocks.
        """
        if not 0 <= m < self.query_blocks(b):
            raise IndexError(f"query block {m} of sequence {b}: it has {self.query_blocks(b)} query blocks")
        t = self.q_block_starts[b] + m
        return self.indices[self.offsets[t]:self.offsets[t + 1]]

    def block_masks(self, sequences: Sequence[int], rows: int, cols: int, device) -> torch.Tensor:
        """Bool ``[n, rows, cols]``: True where key ``j``'s KV block is selected for row ``i``'s query block, for
        each sequence of ``sequences`` (``n`` sequence numbers). Query blocks a sequence does not have select
        nothing. The selection half of the visibility rule only: callers AND it with the mask's
        (:func:`jfa_verify.core.contract.visible_masks` does).
        """
        n, bm, bn = len(sequences), self.block_m, self.block_n
        row_blocks, col_blocks = -(-rows // bm), -(-cols // bn)
        blocks = np.zeros((n, row_blocks, col_blocks), dtype=bool)
        offsets, indices = self._arrays()
        for s, b in enumerate(sequences):
            first = self.q_block_starts[b]
            count = min(self.query_blocks(b), row_blocks)
            lo, hi = offsets[first], offsets[first + count]
            per_block = np.diff(offsets[first:first + count + 1])
            blocks[s, np.repeat(np.arange(count), per_block), indices[lo:hi]] = True
        block_of_row = torch.arange(rows, device=device) // bm
        block_of_col = torch.arange(cols, device=device) // bn
        dense = torch.from_numpy(blocks).to(device)
        return dense[:, block_of_row][:, :, block_of_col]

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``offsets`` and ``indices`` as int64 arrays, made once."""
        cached = self.__dict__.get("_cached_arrays")
        if cached is None:
            cached = (np.asarray(self.offsets, dtype=np.int64), np.asarray(self.indices, dtype=np.int64))
            object.__setattr__(self, "_cached_arrays", cached)
        return cached


def check_selection_tensors(selection, device: torch.device) -> None:
    """Type, rank, dtype, device and density of a selection's tensors: no value read (no synchronization).

    Raises:
        InvalidInput: ``selection`` is not a :class:`BlockSelection`; ``offsets``/``indices`` not 1-D int32/int64
            dense tensors on ``device`` (the message names the value and the fix).
    """
    if not isinstance(selection, BlockSelection):
        raise InvalidInput(f"block_selection={type(selection).__name__} is not a jfa_verify.BlockSelection; build "
                           f"one with BlockSelection(block_m, block_n, offsets, indices), or pass None for dense")
    check_index_tensor("block_selection.offsets", selection.offsets, device, "one entry per query block, plus one")
    check_index_tensor("block_selection.indices", selection.indices, device, "one entry per selected KV block")


def select_blocks(selection, q_lengths: Sequence[int], k_lengths: Sequence[int], device: torch.device
                  ) -> SelectedBlocks:
    """Validate ``selection`` against the call's lengths and describe it on the host (reads both tensors once).

    Args:
        selection: a :class:`BlockSelection`.
        q_lengths, k_lengths: each sequence's query and key counts (``B`` ints each).
        device: the device of ``q`` (the tensors must be on it).

    Returns: a :class:`SelectedBlocks`.

    Raises:
        InvalidInput: as :func:`check_selection_tensors`; ``offsets`` not of length ``NQB + 1``, not starting at
            0, decreasing or not ending at ``len(indices)``; an index outside its sequence's KV blocks; indices of
            a query block not strictly increasing (unsorted or duplicated). Each message names the query block
            (flattened index, sequence and block within it), the bad value and the fix.
    """
    check_selection_tensors(selection, device)
    bm, bn = selection.block_m, selection.block_n
    q_blocks = np.array([-(-int(n) // bm) for n in q_lengths], dtype=np.int64)
    k_blocks = np.array([-(-int(n) // bn) for n in k_lengths], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(q_blocks)]).astype(np.int64)
    nqb = int(starts[-1])
    offsets = selection.offsets.cpu().numpy().astype(np.int64)
    indices = selection.indices.cpu().numpy().astype(np.int64)
    where = _BlockNamer(starts, bm)
    if offsets.size != nqb + 1:
        raise InvalidInput(
            f"block_selection.offsets has {offsets.size} entries but the call has NQB={nqb} query blocks "
            f"(sum over sequences of ceil(L_q / block_m={bm})), so it needs NQB + 1 = {nqb + 1}; one CSR row "
            f"pointer per query block, in sequence order, plus the end")
    if offsets[0] != 0:
        raise InvalidInput(f"block_selection.offsets[0]={int(offsets[0])} is not 0; CSR row pointers start at 0")
    first_fall("block_selection.offsets", offsets, "build them with a cumsum of each query block's count", where)
    if offsets[-1] != indices.size:
        raise InvalidInput(
            f"block_selection.offsets[-1]={int(offsets[-1])} does not equal len(indices)={indices.size}; the last "
            f"row pointer is the number of selected blocks")
    block_seq = np.repeat(np.arange(len(q_blocks)), q_blocks)  # sequence of each flattened query block
    counts = np.diff(offsets)
    entry_block = np.repeat(np.arange(nqb), counts)  # flattened query block of each index
    limit = k_blocks[block_seq][entry_block] if nqb else np.zeros(0, dtype=np.int64)
    outside = np.flatnonzero((indices < 0) | (indices >= limit))
    if outside.size:
        e = int(outside[0])
        t = int(entry_block[e])
        raise InvalidInput(
            f"block_selection.indices[{e}]={int(indices[e])} ({where(t)}) is outside its sequence's KV blocks "
            f"[0, {int(limit[e])}) (L_k={int(k_lengths[block_seq[t]])}, block_n={bn}); KV block numbers are local "
            f"to the sequence: pass j in [0, ceil(L_k / block_n))")
    if indices.size > 1:
        first_of_block = np.zeros(indices.size, dtype=bool)
        first_of_block[offsets[:-1][counts > 0]] = True
        bad = np.flatnonzero((np.diff(indices) <= 0) & ~first_of_block[1:])
        if bad.size:
            e = int(bad[0])
            t = int(entry_block[e])
            what = "duplicated" if indices[e] == indices[e + 1] else "not increasing"
            raise InvalidInput(
                f"block_selection.indices of {where(t)} are {what}: indices[{e}]={int(indices[e])}, indices[{e + 1}]"
                f"={int(indices[e + 1])}; each query block's KV blocks must be strictly increasing: sort them and "
                f"drop duplicates (torch.unique sorts)")
    return SelectedBlocks(bm, bn, tuple(starts.tolist()), tuple(offsets.tolist()), tuple(indices.tolist()),
                          source=selection)


class _BlockNamer:
    """Names a flattened query block in a message: ``query block t (sequence b, block m: rows ...)``."""

    def __init__(self, starts: np.ndarray, block_m: int):
        self.starts, self.block_m = starts, block_m

    def __call__(self, t: int) -> str:
        b = int(np.searchsorted(self.starts, t, side="right") - 1)
        m = t - int(self.starts[b])
        return f"query block {t}: sequence {b}, block {m}, its rows from {m * self.block_m}"
