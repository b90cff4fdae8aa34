"""A block-sparse plugin kernel in plain torch, on the float64 reference, and planted-bug variants of it.

``block_sparse_ref`` declares ``Capabilities(block_sparse=...)`` and computes exactly what the contract says (the
float64 reference on the call's validated problem, its gradients the reference's too, through an autograd
function). ``block_sparse_ref_<mutation>`` is it with one of :data:`MUTATIONS` (:func:`make_kernel`): a bug a
block-sparse fork may plant, each a wrong selection the kernel then attends with:

* ``"off_by_one_block"``: every selected KV block ``j`` read as ``j + 1`` (the block past the sequence's last is
  dropped);
* ``"drop_last_partial"``: the last KV block of a sequence left out when it is partial (``L_k % block_n != 0``);
* ``"neighbour_selection"``: sequence ``b`` attends with the selection of sequence ``b - 1`` (its query blocks
  and KV blocks cut to ``b``'s), as an indexing slip in the per-sequence offsets would.
"""

from __future__ import annotations

from typing import Optional

import torch

from jfa_verify import BlockSelection, Capabilities, register_kernel, validate_inputs
from jfa_verify.oracles import reference_attention

MUTATIONS = ("off_by_one_block", "drop_last_partial", "neighbour_selection")
BLOCK_PAIRS = ((16, 16), (32, 16), (16, 32), (64, 64))
CAPABILITIES = Capabilities(block_sparse=BLOCK_PAIRS, masks=("none", "causal", "window", "causal+window"))


class _Reference(torch.autograd.Function):
    """The float64 reference as a differentiable function of ``q``, ``k``, ``v`` (outputs in the input dtype)."""

    @staticmethod
    def forward(ctx, problem, q, k, v):
        ctx.problem = problem
        ctx.save_for_backward(q, k, v)
        ref = reference_attention(problem, q, k, v)
        return ref["o"].to(q.dtype), ref["lse"].float()

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v = ctx.saved_tensors
        ref = reference_attention(ctx.problem, q, k, v, do=do)
        return None, ref["dq"].to(q.dtype), ref["dk"].to(k.dtype), ref["dv"].to(v.dtype)


def _mutated(problem, mutation: str, device) -> BlockSelection:
    """The selection of ``problem`` as the planted bug ``mutation`` reads it."""
    sel = problem.block_selection
    bm, bn = sel.block_m, sel.block_n
    kv_blocks = [-(-n // bn) for n in problem.k_lengths]
    rows = []  # per sequence, per query block: the KV blocks the buggy kernel visits
    for b in range(problem.batch):
        own = [list(sel.selected(b, m)) for m in range(sel.query_blocks(b))]
        if mutation == "off_by_one_block":
            own = [[j + 1 for j in row if j + 1 < kv_blocks[b]] for row in own]
        elif mutation == "drop_last_partial":
            if problem.k_lengths[b] % bn:
                own = [[j for j in row if j != kv_blocks[b] - 1] for row in own]
        elif mutation == "neighbour_selection" and b > 0:
            prev = [list(sel.selected(b - 1, m)) for m in range(sel.query_blocks(b - 1))]
            own = [[j for j in (prev[m] if m < len(prev) else []) if j < kv_blocks[b]] for m in range(len(own))]
        rows += own
    offsets = [0]
    for row in rows:
        offsets.append(offsets[-1] + len(row))
    return BlockSelection(bm, bn, torch.tensor(offsets, dtype=torch.int32, device=device),
                          torch.tensor([j for row in rows for j in row], dtype=torch.int32, device=device))


def make_kernel(mutation: Optional[str] = None):
    """The contract callable, exact, or with the planted bug ``mutation`` (one of :data:`MUTATIONS`)."""

    def block_sparse_ref(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None,
                         window=None, block_selection=None):
        kw = dict(causal=causal, causal_alignment=causal_alignment, sm_scale=sm_scale, window=window)
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, **kw, block_selection=block_selection)
        if mutation is not None and problem.block_selection is not None:
            problem = validate_inputs(q, k, v, q_offsets, k_offsets, **kw,
                                      block_selection=_mutated(problem, mutation, q.device))
        return _Reference.apply(problem, q, k, v)

    return block_sparse_ref


register_kernel("block_sparse_ref", capabilities=CAPABILITIES,
                description="test plugin: block-sparse attention on the float64 reference")(lambda: make_kernel())
for _mutation in MUTATIONS:
    register_kernel(f"block_sparse_ref_{_mutation}", capabilities=CAPABILITIES,
                    description=f"test plugin: block_sparse_ref with the planted bug {_mutation}",
                    )(lambda mutation=_mutation: make_kernel(mutation))
