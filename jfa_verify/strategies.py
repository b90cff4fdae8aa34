"""Hypothesis strategies for jagged attention cases.

Each strategy is a small factory returning a ``SearchStrategy``. They adapt to
a kernel's declared :class:`~kernels.registry.Capabilities` (dtypes, head dims,
modes, tile sizes), so no case outside what the kernel supports is drawn.

Shrinking: lengths shrink toward 0 and batches toward one sequence; head dims
toward the smallest supported; boolean switches toward False; dtypes toward
the first listed.
"""

from __future__ import annotations

from typing import Optional, Sequence

from hypothesis import strategies as st

from .case import Case

__all__ = ["sequence_lengths", "jagged_lengths", "head_configs", "cases"]

_DTYPE_NAMES = {"torch.float32": "float32", "torch.bfloat16": "bfloat16", "torch.float16": "float16"}


def sequence_lengths(*, max_len: int, block_sizes: Sequence[int] = (32, 16)) -> st.SearchStrategy[int]:
    """One sequence length: 0, 1, a tile boundary (multiple of a block size) +-1, or any length.

    Args:
        max_len: the largest length drawn (lengths are clipped to it).
        block_sizes: the kernel's tile rows (BLOCK_M, BLOCK_N); boundaries are
            taken from these, never hard-coded.

    Shrinks toward 0.
    """
    boundaries = sorted(
        {n for b in block_sizes for m in (1, 2, 3) for n in (m * b - 1, m * b, m * b + 1) if 0 <= n <= max_len}
    )
    parts = [st.integers(0, max_len), st.sampled_from([0, 1])]
    if boundaries:
        parts.append(st.sampled_from(boundaries))
    return st.one_of(*parts)


@st.composite
def _skewed(draw, max_batch: int, max_len: int) -> tuple[int, ...]:
    # One mega-sequence among tiny ones: the worst case for load balance and for
    # kernels that size work from the maximum length.
    tiny = draw(st.lists(st.integers(0, 3), min_size=1, max_size=max_batch - 1))
    mega = draw(st.integers(max(1, max_len // 2), max_len))
    pos = draw(st.integers(0, len(tiny)))
    return tuple(tiny[:pos] + [mega] + tiny[pos:])


def jagged_lengths(
    *, max_batch: int = 6, max_len: int = 64, block_sizes: Sequence[int] = (32, 16), min_batch: int = 1
) -> st.SearchStrategy[tuple[int, ...]]:
    """A batch of lengths: edge lengths mixed freely, or one mega-sequence among tiny ones.

    Draws empty sequences, 1-token sequences, tile boundaries +-1, all-empty
    batches and totals smaller than the batch size. Shrinks toward one
    sequence of length 0.
    """
    mixed = st.lists(
        sequence_lengths(max_len=max_len, block_sizes=block_sizes), min_size=min_batch, max_size=max_batch
    ).map(tuple)
    if max_batch < 2:
        return mixed
    return st.one_of(mixed, _skewed(max_batch, max_len))


@st.composite
def head_configs(draw, *, gqa: bool = True, max_heads: int = 4) -> tuple[int, int]:
    """``(num_heads_q, num_heads_kv)``: MHA, GQA or MQA ratios. Shrinks toward (1, 1)."""
    h_kv = draw(st.integers(1, 2))
    group = draw(st.sampled_from([1, 2, max(1, max_heads // h_kv)] if gqa else [1]))
    return h_kv * group, h_kv


def _capabilities(kernel):
    if kernel is None:
        from kernels.triton_jfa import CAPABILITIES

        return CAPABILITIES
    return getattr(kernel, "capabilities", kernel)


@st.composite
def cases(
    draw,
    kernel=None,
    *,
    device_type: str = "cpu",
    dtypes: Optional[Sequence[str]] = None,
    modes: Optional[Sequence[str]] = None,
    max_batch: int = 5,
    max_len: int = 48,
    head_dims: Sequence[int] = (16, 24, 32, 40, 64),
    causal: Optional[bool] = None,
) -> Case:
    """A whole :class:`Case` inside ``kernel``'s capabilities (default: ``triton_jfa``'s).

    Args:
        kernel: a registered kernel or a ``Capabilities``; None for ``triton_jfa``.
        device_type: selects the kernel's tile sizes for boundary lengths.
        dtypes, modes: restrict to these names (default: all the kernel supports).
        max_batch, max_len: size limits.
        head_dims: candidate head dims, filtered by the capabilities.
        causal: force masking on or off (default: drawn).

    Shrinks toward a small self-attention, non-causal case with the first dtype.
    """
    caps = _capabilities(kernel)
    dtype_names = [_DTYPE_NAMES[str(d)] for d in caps.dtypes]
    if dtypes is not None:
        dtype_names = [d for d in dtypes if d in dtype_names]
    mode_names = [m for m in ("self", "cross", "broadcast_q") if m in caps.modes and (modes is None or m in modes)]
    dims = [
        d for d in head_dims
        if caps.min_head_dim <= d <= caps.max_head_dim and (caps.non_power_of_two_head_dims or d & (d - 1) == 0)
    ]
    dtype = draw(st.sampled_from(dtype_names))
    mode = draw(st.sampled_from(mode_names))
    head_dim = draw(st.sampled_from(dims))
    head_dim_v = head_dim
    if caps.distinct_value_head_dim and draw(st.booleans()):
        head_dim_v = draw(st.sampled_from(dims))
    blocks = caps.block_sizes(head_dim, None, device_type)
    kv = draw(jagged_lengths(max_batch=max_batch, max_len=max_len, block_sizes=blocks))
    extra = {}
    if mode == "cross":
        extra["q_lengths"] = draw(
            st.lists(sequence_lengths(max_len=max_len, block_sizes=blocks), min_size=len(kv), max_size=len(kv)).map(tuple)
        )
    elif mode == "broadcast_q":
        extra["broadcast_q_len"] = draw(sequence_lengths(max_len=max_len, block_sizes=blocks))
    h_q, h_kv = draw(head_configs(gqa=caps.gqa))
    is_causal = caps.causal and (draw(st.booleans()) if causal is None else causal)
    alignment = draw(st.sampled_from(["top_left", "bottom_right"])) if is_causal else "top_left"
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
        offsets_dtype=draw(st.sampled_from(["int32", "int64"])),
        offsets_start=draw(st.sampled_from([0, 0, 3])),
        seed=draw(st.integers(0, 2**32 - 1)),
        **extra,
    )
