"""Hypothesis strategies for jagged attention cases.

Each strategy is a small factory returning a ``SearchStrategy``, documented
with what it draws and how it shrinks. They adapt to a kernel's declared
:class:`~kernels.registry.Capabilities` (dtypes, head dims, modes, tile
sizes), so no case outside what the kernel supports is drawn.

Input policy: every drawn input is finite. Inf/NaN inputs are outside the
kernel contract and are never generated.

Length classes (batches): :func:`jagged_lengths` composes :func:`empty_batches`,
:func:`sparse_batches` (total < B), :func:`one_token_batches`,
:func:`tile_boundary_lengths` (the kernel's own BLOCK_M/BLOCK_N +-1),
:func:`prime_lengths`, :func:`skewed_lengths` (one mega-sequence),
:func:`heavy_tailed_lengths` (Pareto tail index ``alpha``) and
:func:`movielens_batches` (real history lengths).
Case classes: :func:`cases` (modes, both causal alignments, sliding windows (:func:`windows`)
for kernels that declare them, GQA/MQA, odd head
dims, broadcast-Q, value adversaries, strided layout, offsets not at 0,
int32/int64 offsets; block selections (:func:`block_sparsities`) for kernels declaring
``block_sparse``; MXFP8 block scales (:func:`block_scalings`) for kernels declaring
``mxfp8``); :func:`packs` (cases sharing all but lengths and seed, packed into
one launch); :func:`overflow_cases` (GPU only, element offsets past
2**31). :mod:`jfa_verify.cases.coverage` names the classes a case belongs to.
"""

from jfa_verify.strategies._cases import (
    DEFAULT_HEAD_DIMS,
    DEFAULT_MAX_LEN,
    block_scalings,
    block_sparsities,
    cases,
    head_configs,
    head_dims,
    layouts,
    offsets_configs,
    overflow_cases,
    packs,
    reach_of,
    sm_scales,
    undrawable_reason,
    value_policies,
    windows,
)
from jfa_verify.strategies._lengths import (
    LENGTH_KINDS,
    cross_query_lengths,
    empty_batches,
    heavy_tailed_lengths,
    jagged_lengths,
    movielens_batches,
    one_token_batches,
    prime_lengths,
    sequence_lengths,
    skewed_lengths,
    sparse_batches,
    tile_boundary_lengths,
)

__all__ = [
    "DEFAULT_HEAD_DIMS",
    "DEFAULT_MAX_LEN",
    "LENGTH_KINDS",
    "block_scalings",
    "block_sparsities",
    "cases",
    "packs",
    "cross_query_lengths",
    "empty_batches",
    "head_configs",
    "head_dims",
    "heavy_tailed_lengths",
    "jagged_lengths",
    "layouts",
    "movielens_batches",
    "offsets_configs",
    "one_token_batches",
    "overflow_cases",
    "prime_lengths",
    "reach_of",
    "sequence_lengths",
    "undrawable_reason",
    "skewed_lengths",
    "sm_scales",
    "sparse_batches",
    "tile_boundary_lengths",
    "value_policies",
    "windows",
]
