"""The ``flex_document_mask`` adapter: a document (+ causal / window) ``mask_mod`` and one flex_attention call.

The mask is written here the way a flex user writes it (per-row sequence ids, positions and diagonal
shifts read by index inside ``mask_mod``), not taken from the framework's rule: the framework's
references judge it, so a mistake in either shows.

A block-sparse call (``block_selection=``) adds one more condition, built from the same selection: a table
``selected[query block, KV block]`` (query blocks flattened in sequence order, KV blocks numbered within the
sequence) read by each row's query block and each key's KV block. flex's own 128 x 128 blocks are global to the
packed rows and do not line up with per-sequence selection blocks, so the selection goes into ``mask_mod`` and
``create_block_mask`` derives flex's block mask (and skips its empty blocks) from it.
"""

from __future__ import annotations

import inspect
import os
import warnings

import torch

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.protocol.adapting import ContractAdapter, restore_rows, varlen_inputs
from jfa_verify.protocol.kernel import KernelRun

__all__ = ["FlexDocumentMask", "document_mask_mod", "selection_table"]

_COMPILED: dict = {}


def _flex():
    """flex_attention: eager on the CPU; on CUDA compiled once per process (``JFA_FLEX_DYNAMIC=0`` compiles
    per shape instead of with dynamic shapes; every case has other lengths, so per-shape compiles
    would soon hit dynamo's recompile limit and fall back to eager without saying so)."""
    from torch.nn.attention.flex_attention import flex_attention

    if "fn" not in _COMPILED:
        _COMPILED["fn"] = torch.compile(flex_attention, dynamic=os.environ.get("JFA_FLEX_DYNAMIC", "1") != "0")
    return _COMPILED["fn"]


def _rows(lengths, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Per packed row: its sequence id and its position inside the sequence (int64 ``[sum(lengths)]``)."""
    n = torch.tensor(lengths, dtype=torch.int64, device=device)
    doc = torch.repeat_interleave(torch.arange(len(lengths), device=device), n)
    starts = torch.cumsum(n, 0) - n
    return doc, torch.arange(int(n.sum()), device=device) - starts[doc]


def selection_table(problem: JaggedProblem, device) -> torch.Tensor:
    """Bool ``[NQB, max KV blocks]`` (at least ``[1, 1]``) of a block-sparse ``problem``: entry ``[t, j]`` True iff
    flattened query block ``t`` selects KV block ``j`` of its sequence (from ``problem.block_selection``)."""
    sel = problem.block_selection
    widest = max([-(-lk // sel.block_n) for lk in problem.k_lengths], default=0)
    table = torch.zeros(max(sel.num_query_blocks, 1), max(widest, 1), dtype=torch.bool)
    rows = [t for t in range(sel.num_query_blocks) for _ in range(sel.offsets[t + 1] - sel.offsets[t])]
    table[torch.tensor(rows, dtype=torch.int64), torch.tensor(sel.indices, dtype=torch.int64)] = True
    return table.to(device)


def document_mask_mod(problem: JaggedProblem, device):
    """``mask_mod(b, h, q_idx, kv_idx)`` for the packed rows of ``problem`` (broadcast-Q: Q repeated per sequence),
    cut to the selected blocks when ``problem.block_selection`` is set."""
    q_doc, q_pos = _rows(problem.q_lengths, device)
    k_doc, k_pos = _rows(problem.k_lengths, device)
    if problem.mask != "none" and problem.causal_alignment == "bottom_right":
        shift = torch.tensor([lk - lq for lq, lk in zip(problem.q_lengths, problem.k_lengths)], dtype=torch.int64,
                             device=device)
    else:
        shift = torch.zeros(max(problem.batch, 1), dtype=torch.int64, device=device)
    left, right = problem.window if problem.window is not None else (-1, -1)
    causal = problem.causal
    sel = problem.block_selection
    if sel is not None:
        table = selection_table(problem, device)
        starts = torch.tensor(sel.q_block_starts, dtype=torch.int64, device=device)
        q_block = starts[q_doc] + q_pos // sel.block_m  # each packed query row's flattened query block
        k_block = k_pos // sel.block_n  # each packed key row's KV block within its sequence

        document = _document_mod(q_doc, q_pos, k_doc, k_pos, shift, causal, left, right)

        def mask_mod(b, h, q_idx, kv_idx):
            return document(b, h, q_idx, kv_idx) & table[q_block[q_idx], k_block[kv_idx]]

        return mask_mod
    return _document_mod(q_doc, q_pos, k_doc, k_pos, shift, causal, left, right)


def _document_mod(q_doc, q_pos, k_doc, k_pos, shift, causal, left, right):
    def mask_mod(b, h, q_idx, kv_idx):
        diag = q_pos[q_idx] + shift[q_doc[q_idx]]
        keep = q_doc[q_idx] == k_doc[kv_idx]
        if causal:
            keep = keep & (k_pos[kv_idx] <= diag)
        if left >= 0:
            keep = keep & (k_pos[kv_idx] >= diag - left)
        if right >= 0 and not causal:
            keep = keep & (k_pos[kv_idx] <= diag + right)
        return keep

    return mask_mod


class FlexDocumentMask(ContractAdapter):
    """The contract callable (and :meth:`launch`) for flex_attention with a document mask."""

    def launch(self, problem: JaggedProblem, q, k, v, q_offsets, k_offsets, *, instrument: bool = False,
               block_selection=None) -> KernelRun:
        """One call on a validated ``problem``; a block-sparse one's selection is read from its host view
        (``problem.block_selection``), so ``block_selection`` (the same values on the device) is not needed."""
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        call = varlen_inputs(problem, q, k, v, q_offsets, k_offsets)
        dev = q.device
        block_mask = create_block_mask(document_mask_mod(problem, dev), None, None, call.q.shape[0], call.k.shape[0],
                                       device=dev)
        q4, k4, v4 = (t.transpose(0, 1)[None] for t in (call.q, call.k, call.v))  # [1, H, T, D]
        fn = _flex() if dev.type == "cuda" else flex_attention
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")  # eager on CPU
        kwargs = dict(block_mask=block_mask, scale=problem.sm_scale, enable_gqa=problem.group_size != 1)
        if "return_aux" in inspect.signature(flex_attention).parameters:
            from torch.nn.attention.flex_attention import AuxRequest

            o, aux = fn(q4, k4, v4, return_aux=AuxRequest(lse=True), **kwargs)
            lse = aux.lse
        else:  # torch before AuxRequest
            o, lse = fn(q4, k4, v4, return_lse=True, **kwargs)
        if lse is None:  # torch 2.11 and 2.13 (CUDA and CPU) when the query has no row: a finding of flex's
            raise RuntimeError(f"flex_attention returned no LSE (None) for a query of {call.q.shape[0]} rows, "
                               "though asked for one")
        o, lse = restore_rows(problem, o[0].transpose(0, 1), lse[0].detach().float())
        return KernelRun(o, lse)
