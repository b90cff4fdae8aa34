"""Whole-case strategies: heads, head dims, values, layouts, offsets, and :func:`cases` that composes them."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

from hypothesis import strategies as st

from jfa_verify.cases.case import LAYOUTS, OFFSETS_LAYOUTS, VALUE_DISTRIBUTIONS, Case
from jfa_verify.cases.dimensions import tile_shape
from jfa_verify.cases.scaling import SCALE_PATTERNS, Scaling
from jfa_verify.cases.sparsity import PATTERNS, Sparsity
from jfa_verify.core.contract import MODES, Mask
from jfa_verify.core.dtypes import DTYPES, dtype_name
from jfa_verify.core.errors import InvalidInput
from jfa_verify.protocol.kernel import Capabilities, Kernel, tiles_for_shape
from jfa_verify.strategies._lengths import cross_query_lengths, jagged_lengths, sequence_lengths, tile_boundary_lengths

__all__ = [
    "DEFAULT_HEAD_DIMS",
    "DEFAULT_MAX_LEN",
    "reach_of",
    "undrawable_reason",
    "packs",
    "head_configs",
    "sm_scales",
    "head_dims",
    "value_policies",
    "layouts",
    "offsets_configs",
    "cases",
    "overflow_cases",
    "windows",
    "block_sparsities",
    "block_scalings",
]

DEFAULT_HEAD_DIMS = (16, 17, 24, 32, 33, 40, 64)
DEFAULT_MAX_LEN = 48  # past one of the interpreter's 32-row query tiles and two of its 16-key tiles


def reach_of(blocks: Sequence[int], max_len: Optional[int] = None) -> int:
    """The longest sequence :func:`cases` draws for a kernel running tiles ``blocks`` (BLOCK_M, BLOCK_N).

    ``max_len`` when given; else :data:`DEFAULT_MAX_LEN`, raised to ``2 * max(blocks) + 1`` where 48 would
    not leave the largest tile (a GPU's 64- and 128-row tiles: there, the boundaries of the first two tiles
    are reached too), so that multi-tile sequences are drawn on every device (on an H200 a campaign of
    15,063 cases against 128-row tiles never left the first tile with 48).
    """
    if max_len is not None:
        return max_len
    largest = max(blocks, default=0)
    return DEFAULT_MAX_LEN if DEFAULT_MAX_LEN > largest else 2 * largest + 1


@st.composite
def head_configs(draw, *, gqa: bool = True, max_heads: int = 4) -> tuple[int, int]:
    """``(num_heads_q, num_heads_kv)``: MHA, GQA (group 2, 3 (not a power of two) or up to
    ``max_heads // H_kv``, several KV heads) or MQA (one KV head).

    ``gqa=False`` draws MHA only. Shrinks toward ``(1, 1)``.
    """
    h_kv = draw(st.integers(1, 2))
    group = draw(st.sampled_from(sorted({1, 2, 3, max(1, max_heads // h_kv)}) if gqa else [1]))
    return h_kv * group, h_kv


def sm_scales(head_dim: int) -> st.SearchStrategy:
    """A softmax scale for head dim ``head_dim``: None (the default ``1/sqrt(D)``) or a given one below or
    above it (:data:`jfa_verify.cases.construct.SM_SCALE_FACTORS` times the default). Shrinks toward None."""
    from jfa_verify.cases.construct import SM_SCALE_FACTORS

    given = [f / math.sqrt(head_dim) for _, f in sorted(SM_SCALE_FACTORS.items())]
    return st.one_of(st.none(), st.sampled_from(given))


def _capabilities(kernel) -> Capabilities:
    """A registered kernel's capabilities, a :class:`Capabilities` itself, or the contract's (None)."""
    if kernel is None:
        return Capabilities()
    if isinstance(kernel, Kernel):
        return kernel.capabilities
    if isinstance(kernel, Capabilities):
        return kernel
    raise InvalidInput(f"kernel={kernel!r} is neither a registered kernel nor a Capabilities")


def _supported_dims(caps: Capabilities, candidates: Sequence[int]) -> list[int]:
    dims = [d for d in candidates if caps.supports_head_dim(d)]
    if not dims:
        allowed = caps.head_dims or f"[{caps.min_head_dim}, {caps.max_head_dim}]"
        raise InvalidInput(f"head_dims={tuple(candidates)}: none of them is a head dim the kernel supports "
                           f"({allowed}; powers of two only: {not caps.non_power_of_two_head_dims})")
    return dims


def _with_every_tile_shape(kernel, caps: Capabilities, dims: list[int], dtype_names: Sequence[str],
                           device_type: str) -> list[int]:
    """``dims`` and, for each tile shape (BLOCK_M against BLOCK_N) the kernel runs on ``device_type`` for
    some head dim and none of ``dims`` gives, the smallest head dim that gives it (appended: drawn as
    often as another, shrunk away from). ``triton_jfa`` on CUDA: 64 x 32 tiles past D = 128 only."""
    from jfa_verify.cases.construct import CANDIDATE_HEAD_DIMS

    def shapes(d: int) -> set:
        return {tile_shape(tiles_for_shape(kernel, d, d, DTYPES[t], device_type).as_tuple()) for t in dtype_names}

    seen = set().union(*(shapes(d) for d in dims))
    out = list(dims)
    for d in CANDIDATE_HEAD_DIMS:
        if caps.supports_head_dim(d) and not shapes(d) <= seen:
            seen |= shapes(d)
            out.append(d)
    return out


def _with_every_dim_class(caps: Capabilities, dims: list[int]) -> list[int]:
    """``dims`` and, for each head-dim class (odd, not a power of two) the kernel supports and none of ``dims``
    falls in, the smallest supported head dim of that class (from the kernel's declared ``head_dims``, else the
    candidates the covering array draws from): ``triton_jfa_mxfp8`` declares 32, 64, 96 and 128, and the defaults
    kept only 32 and 64, so a campaign never drew a head dim that is not a power of two."""
    from jfa_verify.cases.construct import CANDIDATE_HEAD_DIMS
    from jfa_verify.cases.dimensions import head_dim_class

    pool = sorted(set(caps.head_dims or ()) | set(CANDIDATE_HEAD_DIMS))
    out = list(dims)
    for cls in ("odd", "non_pow2_even"):
        if cls not in {head_dim_class(d) for d in out}:
            out += [d for d in pool if head_dim_class(d) == cls and caps.supports_head_dim(d)][:1]
    return out


def head_dims(kernel=None, *, candidates: Sequence[int] = DEFAULT_HEAD_DIMS) -> st.SearchStrategy[int]:
    """A head dim from ``candidates`` that ``kernel`` supports: odd (17, 33), non-power-of-two (24, 40)
    and powers of two by default. Shrinks toward the first supported candidate.
    """
    return st.sampled_from(_supported_dims(_capabilities(kernel), candidates))


def value_policies(names: Optional[Sequence[str]] = None) -> st.SearchStrategy[str]:
    """A value distribution name (see :class:`~jfa_verify.cases.case.Case` ``values``): ``normal``,
    ``large_logits`` (softmax saturation), ``correlated`` (low rank plus offset), ``near_ties``,
    ``tiny``. Inputs are always finite (inf/NaN inputs are outside the contract). Shrinks toward
    ``normal``.
    """
    chosen = list(VALUE_DISTRIBUTIONS if names is None else names)
    bad = [n for n in chosen if n not in VALUE_DISTRIBUTIONS]
    if bad or not chosen:
        raise InvalidInput(f"values={chosen}: choose a non-empty subset of {VALUE_DISTRIBUTIONS}")
    return st.sampled_from(chosen)


def layouts(names: Optional[Sequence[str]] = None) -> st.SearchStrategy[str]:
    """A memory layout of q, k, v and dO, one of :data:`jfa_verify.cases.case.LAYOUTS` (their strides are
    described by the contract model's ``layout`` dimension, :mod:`jfa_verify.cases.dimensions`). Shrinks toward
    ``contiguous``.
    """
    chosen = list(LAYOUTS if names is None else names)
    bad = [n for n in chosen if n not in LAYOUTS]
    if bad or not chosen:
        raise InvalidInput(f"layouts={chosen}: choose a non-empty subset of {LAYOUTS}")
    return st.sampled_from(chosen)


_layouts = layouts  # ``cases`` takes a ``layouts`` argument that shadows the function


def offsets_configs(starts: Sequence[int] = (0, 1, 3, 17), layouts: Optional[Sequence[str]] = None
                    ) -> st.SearchStrategy[tuple[str, int, str]]:
    """``(offsets_dtype, offsets_start, offsets_layout)``: int32 or int64 offsets, starting at 0 or
    inside a larger buffer (rows before the start belong to no sequence), dense or as the two
    columns of one ``[B + 1, 2]`` tensor (strided views: outside the contract, which a kernel must
    reject or handle; see :class:`~jfa_verify.cases.case.Case`). Shrinks toward ``("int32", 0, "contiguous")``.
    """
    chosen = list(OFFSETS_LAYOUTS if layouts is None else layouts)
    bad = [n for n in chosen if n not in OFFSETS_LAYOUTS]
    if bad or not chosen:
        raise InvalidInput(f"offsets layouts={chosen}: choose a non-empty subset of {OFFSETS_LAYOUTS}")
    return st.tuples(st.sampled_from(["int32", "int64"]), st.sampled_from(sorted(starts)), st.sampled_from(chosen))


def windows(block_sizes: tuple[int, int] = (32, 16), *, max_len: int = 48, symmetric: bool = False
            ) -> st.SearchStrategy[tuple[int, int]]:
    """A sliding window ``(left, right)`` (see :class:`~jfa_verify.cases.case.Case` ``window``).

    Each side is drawn from 0 (the diagonal only), 1, the tile sizes +-1 (``block_sizes``: the
    kernel's ``(BLOCK_M, BLOCK_N)``), a span longer than any sequence (``max_len + 3``), a small
    int, or -1 (unbounded; never both sides); the two sides independently (asymmetric windows),
    or one ``w >= 0`` for both with ``symmetric`` (Meta's TLX JFA). Shrinks toward ``(0, 0)``.
    """
    edges = sorted({b + d for b in block_sizes for d in (-1, 1) if b + d >= 0})
    side = st.one_of(st.sampled_from([0, 1] + edges + [max_len + 3]), st.integers(0, max_len))
    if symmetric:
        return side.map(lambda w: (w, w))
    return st.tuples(st.one_of(side, st.just(-1)), st.one_of(side, st.just(-1))).map(
        lambda w: (0, -1) if w == (-1, -1) else w)


def block_sparsities(pairs: Sequence[tuple[int, int]], *, patterns: Sequence[str] = PATTERNS
                     ) -> st.SearchStrategy[Sparsity]:
    """A :class:`~jfa_verify.cases.sparsity.Sparsity` (a case's block selection) with one of ``pairs`` as its
    ``(block_m, block_n)`` (a kernel's ``Capabilities.block_sparse``) and a pattern of ``patterns``: every KV
    block, random top-k (ratio 0.5, 0.25 or 0.75), one block, a query block selecting nothing, the last (partial)
    KV block selected or not, the blocks at the sequence's edges. Shrinks toward the first pair, ``"all"`` and
    ratio 0.5.

    Raises:
        InvalidInput: no pair, or a pattern that is not one of :data:`~jfa_verify.cases.sparsity.PATTERNS`.
    """
    pairs, patterns = list(pairs), list(patterns)
    if not pairs or not patterns or set(patterns) - set(PATTERNS):
        raise InvalidInput(f"block_sparsities(pairs={pairs}, patterns={patterns}): give at least one (block_m, "
                           f"block_n) pair and patterns among {PATTERNS}")
    return st.builds(lambda pair, pattern, ratio: Sparsity(*pair, pattern=pattern, ratio=ratio),
                     st.sampled_from(pairs), st.sampled_from(patterns), st.sampled_from([0.5, 0.25, 0.75]))


def block_scalings(patterns: Sequence[str] = SCALE_PATTERNS) -> st.SearchStrategy[Scaling]:
    """A :class:`~jfa_verify.cases.scaling.Scaling` (an MXFP8 case's E8M0 block scales) of one of ``patterns``:
    unit scales, random ones, the E8M0 extremes, all-zero blocks, one +-448 outlier per block. Shrinks toward the
    first pattern.

    Raises:
        InvalidInput: no pattern, or one that is not one of :data:`~jfa_verify.cases.scaling.SCALE_PATTERNS`.
    """
    patterns = list(patterns)
    if not patterns or set(patterns) - set(SCALE_PATTERNS):
        raise InvalidInput(f"block_scalings(patterns={patterns}): give patterns among {SCALE_PATTERNS}")
    return st.builds(Scaling, st.sampled_from(patterns))


@st.composite
def cases(
    draw,
    kernel=None,
    *,
    device_type: str = "cpu",
    dtypes: Optional[Sequence[str]] = None,
    modes: Optional[Sequence[str]] = None,
    max_batch: int = 5,
    max_len: Optional[int] = None,
    head_dims: Sequence[int] = DEFAULT_HEAD_DIMS,
    causal: Optional[bool] = None,
    window: Optional[bool] = None,
    length_kinds: Optional[Sequence[str]] = None,
    values: Optional[Sequence[str]] = None,
    layouts: Optional[Sequence[str]] = None,
    offsets_layouts: Optional[Sequence[str]] = None,
    gqa: Optional[bool] = None,
    block_sparse: Optional[bool] = None,
    mxfp8: Optional[bool] = None,
) -> Case:
    """A whole :class:`Case` inside ``kernel``'s capabilities (default: ``triton_jfa``'s).

    Args:
        kernel: a registered kernel (its capabilities and tile sizes), a ``Capabilities``
            (tile boundaries then from :data:`jfa_verify.protocol.kernel.GENERIC_TILES`), or None for
            the whole contract.
        device_type: selects the kernel's tile sizes for boundary lengths.
        dtypes, modes: restrict to these names (default: all the kernel supports).
        max_batch, max_len: size limits (max_len None: :func:`reach_of` the kernel's tiles for the drawn
            shape on ``device_type``: 48, or ``2 * the largest tile + 1`` where 48 does not leave it).
        head_dims: candidate head dims (odd ones included by default), filtered by the capabilities; the
            default adds a head dim for each tile shape the kernel runs that they leave out.
        causal: force masking on or off (default: drawn; both alignments).
        window: force a sliding window on or off (default: drawn when the kernel declares a window
            mask, :func:`windows`; never for a kernel without one).
        length_kinds: restrict the batch kinds (see :func:`jagged_lengths`); one case in 20 has no
            sequence at all (B = 0), and one cross-attention case in 4 starts its queries at another
            row than its keys (``q_offsets_start``).
        values, layouts: restrict value distributions and memory layouts (default: all).
        offsets_layouts: restrict the offsets layouts (default: all, strided views included).
        gqa: allow GQA/MQA head ratios (default: when the kernel supports them).
        block_sparse: force a block selection (:func:`block_sparsities`) on or off (default: drawn, half the
            time, for a kernel declaring ``Capabilities(block_sparse=...)``; never for one without it, whose
            draws stay what they were).
        mxfp8: force MXFP8 block scales (:func:`block_scalings`) on or off (default: drawn, half the time, for a
            kernel declaring ``Capabilities(mxfp8=...)`` when the drawn dtype is float8_e4m3fn and both head dims
            are multiples of 32; never for other kernels, whose draws stay what they were).

    Draws self, cross (query lengths different from key lengths) and
    broadcast-Q (several L_q, including 0, 1 and tile boundaries) cases,
    int32/int64 offsets starting at 0 or later, distinct value head dims.

    Shrinks toward a one-sequence, self-attention, unmasked, MHA case with the
    first dtype, the smallest head dim, normal values and contiguous layout.
    """
    caps = _capabilities(kernel)
    dtype_names = [dtype_name(d) for d in caps.dtypes]
    if dtypes is not None:
        dtype_names = [d for d in dtypes if d in dtype_names]
    mode_names = [m for m in MODES if m in caps.modes and (modes is None or m in modes)]
    if not dtype_names or not mode_names:
        raise InvalidInput(f"dtypes={dtypes}, modes={modes}: nothing left inside the kernel's capabilities")
    dims = _supported_dims(caps, head_dims)
    if head_dims is DEFAULT_HEAD_DIMS:
        dims = _with_every_dim_class(caps, _with_every_tile_shape(kernel, caps, dims, dtype_names, device_type))
    dtype = draw(st.sampled_from(dtype_names))
    mode = draw(st.sampled_from(mode_names))
    head_dim = draw(st.sampled_from(dims))
    head_dim_v = head_dim
    if caps.distinct_value_head_dim and draw(st.booleans()):
        head_dim_v = draw(st.sampled_from(dims))
    blocks = tiles_for_shape(kernel, head_dim, head_dim_v, DTYPES[dtype], device_type).as_tuple()
    length_blocks = blocks
    if caps.block_sparse:
        # Lengths that reach past two selection blocks of the smallest declared pair, with its boundaries +-1, where
        # those blocks are larger than the tiles: with (64, 64) blocks and the CPU's 48 a selection never had a second
        # block, and a campaign missed a fork reading its neighbour's selection (a new user's trial).
        smallest = min(caps.block_sparse, key=lambda pair: (pair[0] * pair[1], pair))
        if max(smallest) > max(blocks):
            length_blocks = (*blocks, *smallest)
    max_len = reach_of(length_blocks, max_len)
    kv = draw(jagged_lengths(max_batch=max_batch, max_len=max_len, block_sizes=length_blocks, kinds=length_kinds))
    if draw(st.integers(0, 19)) == 19:  # rarely B = 0 (offsets of one entry); shrinks away from it
        kv = ()
    extra = {}
    if mode == "cross":
        extra["q_lengths"] = draw(cross_query_lengths(kv, max_len=max_len, block_sizes=blocks))
    elif mode == "broadcast_q":
        # several L_q: edge lengths, and BLOCK_M boundaries so one dense Q spans more than one tile
        lq = [sequence_lengths(max_len=max_len, block_sizes=blocks)]
        if max_len >= blocks[0] - 1:
            lq.append(tile_boundary_lengths(blocks[:1], max_len=max_len))
        extra["broadcast_q_len"] = draw(st.one_of(*lq))
    h_q, h_kv = draw(head_configs(gqa=caps.gqa if gqa is None else (gqa and caps.gqa)))
    is_causal = caps.causal and (draw(st.booleans()) if causal is None else causal)
    window_mask = Mask(causal=is_causal, windowed=True)
    can_window = caps.supports_mask(window_mask)
    if window and not can_window:
        raise InvalidInput(f"window=True: the kernel declares no {str(window_mask)!r} mask (masks={caps.masks})")
    alignment = draw(st.sampled_from(list(caps.causal_alignments))) if is_causal else "top_left"
    offsets_dtype, offsets_start, offsets_layout = draw(offsets_configs(layouts=offsets_layouts))
    value_policy = draw(value_policies(values))
    layout = draw(_layouts(layouts if caps.strided_inputs else ["contiguous"]))
    scale = draw(sm_scales(head_dim))
    # mostly instrumented (the scheduler invariants are checked), the production launch too
    instrument = draw(st.sampled_from([True, True, True, False]))
    seed = draw(st.integers(0, 2**32 - 1))
    # The window is drawn last, so a seed draws the same other fields as before windows existed.
    drawn_window = None
    if can_window and (draw(st.booleans()) if window is None else window):
        drawn_window = draw(windows(blocks, max_len=max_len, symmetric=caps.symmetric_window))
        if not is_causal:
            alignment = draw(st.sampled_from(list(caps.causal_alignments)))
    if mode == "cross" and draw(st.integers(0, 3)) == 3:  # q_offsets[0] != k_offsets[0]; shrinks to one start
        extra["q_offsets_start"] = draw(st.sampled_from([0, 1, 5, 17]))
    if block_sparse and not caps.block_sparse:
        raise InvalidInput(f"block_sparse=True: the kernel declares no block_sparse pairs ({caps.block_sparse})")
    # Drawn after everything else and only for a block-sparse kernel: other kernels' draws are unchanged.
    if caps.block_sparse and (draw(st.booleans()) if block_sparse is None else block_sparse):
        extra["block_sparsity"] = draw(block_sparsities(caps.block_sparse))
    if mxfp8 and not caps.mxfp8:
        raise InvalidInput("mxfp8=True: the kernel declares no MXFP8 path (Capabilities.mxfp8=None)")
    # Drawn last and only for an MXFP8 kernel: other kernels' draws are unchanged.
    scalable = dtype == "float8_e4m3fn" and head_dim % 32 == 0 and head_dim_v % 32 == 0
    if caps.mxfp8 and scalable and (draw(st.booleans()) if mxfp8 is None else mxfp8):
        extra["block_scaling"] = draw(block_scalings())
    return Case(
        kv_lengths=kv,
        mode=mode,
        num_heads_q=h_q,
        num_heads_kv=h_kv,
        head_dim=head_dim,
        head_dim_v=head_dim_v,
        dtype=dtype,
        causal=is_causal,
        causal_alignment=alignment,
        window=drawn_window,
        offsets_dtype=offsets_dtype,
        offsets_start=offsets_start,
        offsets_layout=offsets_layout,
        values=value_policy,
        layout=layout,
        sm_scale=scale,
        instrument=instrument,
        seed=seed,
        **extra,
    )


@st.composite
def packs(draw, kernel=None, *, size: int = 8, device_type: str = "cpu", max_batch: int = 5,
          max_len: Optional[int] = None, length_kinds: Optional[Sequence[str]] = None, **fields) -> Case:
    """Up to ``size`` cases that share every field but lengths and seed, as one packed :class:`Case`
    (:meth:`Case.pack`; a pack of one is that case).

    Args:
        kernel, device_type, max_batch, max_len, length_kinds: as :func:`cases`, for every part.
        size: the most cases a pack holds (>= 1).
        fields: the rest of :func:`cases`'s arguments (dtypes, modes, causal, ...), for the shared fields.

    The shared fields are one :func:`cases` draw; each part then draws its own lengths (:func:`jagged_lengths`
    and, for cross-attention, :func:`cross_query_lengths`, under the same tiles and ``max_len``; one part in 20
    has no sequence and adds nothing) and its own seed. Broadcast-Q cases are never packed (their sequences
    share one Q). Shrinks by dropping parts (toward the one case that fails), then as :func:`cases` does.

    Raises:
        InvalidInput: ``size`` < 1.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InvalidInput(f"size={size!r}: give the most cases a pack holds, an integer >= 1")
    shared = draw(cases(kernel, device_type=device_type, max_batch=max_batch, max_len=max_len,
                        length_kinds=length_kinds, **fields))
    if size == 1 or shared.mode == "broadcast_q":
        return shared
    blocks = tiles_for_shape(kernel, shared.head_dim, shared.head_dim_v, DTYPES[shared.dtype], device_type).as_tuple()
    reach = reach_of(blocks, max_len)

    @st.composite
    def part(draw_part) -> Case:
        kv = draw_part(jagged_lengths(max_batch=max_batch, max_len=reach, block_sizes=blocks, kinds=length_kinds))
        if draw_part(st.integers(0, 19)) == 19:
            kv = ()
        q = draw_part(cross_query_lengths(kv, max_len=reach, block_sizes=blocks)) if shared.mode == "cross" else None
        seed = draw_part(st.integers(0, 2**32 - 1))
        return dataclasses.replace(shared, kv_lengths=kv, q_lengths=q, seed=seed)

    return Case.pack(draw(st.lists(part(), min_size=1, max_size=size)))


@st.composite
def overflow_cases(draw, kernel=None, *, device_type: str = "cuda", min_elements: int = 2**31) -> Case:
    """GPU only: a case whose q/k/v/dO element offsets pass ``min_elements`` (2**31: int32 overflow).

    ``offsets_start`` puts the sequences so they straddle element offset
    ``min_elements`` (rows before the start belong to no sequence), with
    int64 offsets, MHA, bf16, 1 to 3 short sequences near the kernel's own
    tile sizes. Each of q, k, v and dO holds about 2**31 elements (4 GiB in
    bf16). Judged forward only, with the kernel's outputs and the references'
    (float64 O alone is 16 GiB), a case needs about 50 GiB of GPU memory and
    ~35 GiB of host memory while materializing; with the backward the float64
    gradients take 48 GiB more and the whole run passes an H200's 139 GiB.
    Never for the CPU interpreter. Run only from tests marked ``gpu``.

    Shrinks toward one sequence straddling the boundary.
    """
    caps = _capabilities(kernel)
    dims = _supported_dims(caps, (64, 128))
    head_dim = draw(st.sampled_from(dims))
    heads = draw(st.sampled_from([1, 2]))
    blocks = tiles_for_shape(kernel, head_dim, head_dim, None, device_type).as_tuple()
    kv = draw(st.lists(st.sampled_from([1, max(blocks) + 1, 2 * max(blocks) - 1]), min_size=1, max_size=3))
    first_row_past = math.ceil(min_elements / (heads * head_dim))
    # delta < total rows, so the last row of the batch lies past the boundary
    start = first_row_past - draw(st.integers(0, sum(kv) - 1))
    return Case(
        kv_lengths=tuple(kv), num_heads_q=heads, num_heads_kv=heads, head_dim=head_dim, dtype="bfloat16",
        causal=caps.causal and draw(st.booleans()), offsets_dtype="int64", offsets_start=max(0, start),
        seed=draw(st.integers(0, 2**32 - 1)), name="int32-overflow",
    )


def undrawable_reason(strategy) -> Optional[str]:
    """Why ``strategy`` (:func:`cases` or :func:`packs` for a kernel) can draw no case at all, or None when it draws
    one: the :class:`InvalidInput` its first draw raises (a kernel whose declared capabilities admit nothing the
    strategy draws, e.g. head dims it never picks). One draw, no database, no health checks.

    Hypothesis strategies build lazily, so such a kernel's campaign started its workers and then said only that no
    case finished (a new user's trial: ``run`` had advised ``fuzz`` for that kernel)."""
    from hypothesis import HealthCheck, Phase, find, settings

    try:
        find(strategy, lambda _: True, settings=settings(database=None, max_examples=1, phases=[Phase.generate],
                                                         suppress_health_check=list(HealthCheck), deadline=None))
    except InvalidInput as e:
        return str(e)
    except Exception:  # (nothing drawn for another reason, e.g. filtered out: the campaign says so as before)
        return None
    return None
