"""Judge a huge case's outputs chunk by chunk against the chunked reference (:mod:`jfa_verify.oracles.chunked`).

Each chunk (one sequence, a range of heads) is judged as that sequence and those heads would be alone: the kernel's
part of each output against the chunk's float64 reference, within the budget its padded-SDPA oracle calibrates
(:func:`~jfa_verify.judge.compare.compare_output`, the one allowance), the worst element located in the full tensors
(:func:`~jfa_verify.judge.localize.locate`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from jfa_verify.core.errors import InvalidInput
from jfa_verify.judge.budgets import default_table, precision_of
from jfa_verify.judge.compare import OUTPUTS, OutputComparison, compare_output, reference_scales
from jfa_verify.judge.localize import Location, locate
from jfa_verify.oracles.chunked import Chunk
from jfa_verify.protocol.kernel import TileSizes

__all__ = ["ChunkComparison", "judge_chunks"]


@dataclass(frozen=True)
class ChunkComparison:
    """One output of one chunk judged: ``comparison`` as :func:`compare_output` gives it (errors in the output's
    units), ``where`` the worst element in the full tensors (None when the chunk's output is empty)."""

    sequence: int
    kv_heads: tuple[int, int]
    comparison: OutputComparison
    where: Optional[Location]

    @property
    def passed(self) -> bool:
        return self.comparison.passed

    def describe(self) -> str:
        c = self.comparison
        at = f" at {self.where.describe()}" if self.where is not None else ""
        verdict = "ok" if c.passed else "FAIL"
        why = f" ({c.problem})" if c.problem else ""
        return (f"{c.name} of sequence {self.sequence}, KV heads {self.kv_heads[0]}..{self.kv_heads[1] - 1}: "
                f"{verdict}, max abs error {c.kernel_error:.3g} (allowance {c.allowance:.3g}, SDPA {c.sdpa_error:.3g})"
                f"{at}{why}")


def _full_location(chunk: Chunk, name: str, index: tuple[int, ...], tiles: Optional[TileSizes]) -> Location:
    """The chunk-relative ``index`` of output ``name`` located in the whole problem's tensors."""
    local = locate(chunk.problem, name, index, tiles)
    head0 = chunk.kv_heads[0] if name in ("dk", "dv") else chunk.q_heads[0]
    row0 = {"o": chunk.out_rows, "lse": chunk.out_rows, "dq": chunk.q_rows, "dk": chunk.k_rows, "dv": chunk.k_rows}
    start = row0[name][0]
    full = ((index[0] + head0, index[1] + start) if name == "lse"
            else (index[0] + start, index[1] + head0, *index[2:]))
    return dataclasses.replace(local, index=full, sequence=chunk.sequence, head=local.head + head0)


def judge_chunks(chunks: Sequence[Chunk], got: dict, dtype: torch.dtype, *, budgets=None, tf32: bool = False,
                 tiles: Optional[TileSizes] = None, outputs: Sequence[str] = OUTPUTS) -> list[ChunkComparison]:
    """Judge the kernel's outputs ``got`` (full tensors by name: ``o``, ``lse``, ``dq``, ``dk``, ``dv``) on every
    chunk, for each name of ``outputs`` present in both ``got`` and the chunk's reference.

    Args:
        chunks: from :func:`~jfa_verify.oracles.chunked.chunked_reference` with ``with_sdpa=True``.
        got: the kernel's outputs on the whole problem (any device; each chunk's part is moved to the chunk's).
        dtype: the case's input dtype (the budget row, with ``tf32``). budgets: a budget table (None: packaged).
        tiles: the kernel's tiles for the whole problem (localization; None: no tile).

    Returns one :class:`ChunkComparison` per chunk and output.

    Raises:
        InvalidInput: a chunk made without its SDPA oracle.
    """
    table = budgets or default_table()
    row = precision_of(dtype, tf32=tf32)
    judged = []
    for chunk in chunks:
        if chunk.sdpa is None:
            raise InvalidInput(f"chunk of sequence {chunk.sequence} has no SDPA oracle: make the chunks with "
                               f"chunked_reference(..., with_sdpa=True)")
        for name in outputs:
            if name not in got or name not in chunk.ref or name not in chunk.sdpa:
                continue
            part = chunk.of(name, got[name]).to(chunk.ref[name].device)
            cmp = compare_output(name, part, chunk.sdpa[name], chunk.ref[name], dtype,
                                 *reference_scales(chunk.ref, name), budget=table.budget(row, name), precision=row)
            where = _full_location(chunk, name, cmp.worst_index, tiles) if cmp.worst_index is not None else None
            judged.append(ChunkComparison(chunk.sequence, chunk.kv_heads, cmp, where))
    return judged
