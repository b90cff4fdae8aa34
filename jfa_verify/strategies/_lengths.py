"""Length strategies: one sequence length, or a batch of them, aimed at the corners where jagged kernels break.

Every batch strategy returns a ``tuple[int, ...]`` of token counts (B = its
length). Shrinking always heads toward fewer, shorter sequences.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Union

from hypothesis import strategies as st

from jfa_verify.core.errors import InvalidInput

__all__ = [
    "LENGTH_KINDS",
    "sequence_lengths",
    "tile_boundary_lengths",
    "prime_lengths",
    "empty_batches",
    "sparse_batches",
    "one_token_batches",
    "skewed_lengths",
    "heavy_tailed_lengths",
    "movielens_batches",
    "jagged_lengths",
    "cross_query_lengths",
]


def _check_sizes(max_len: int, max_batch: int = 1, min_batch: int = 1) -> None:
    if max_len < 0:
        raise InvalidInput(f"max_len={max_len} must be >= 0")
    if not 0 <= min_batch <= max_batch or max_batch < 1:
        raise InvalidInput(f"need 0 <= min_batch <= max_batch and max_batch >= 1; got min_batch={min_batch}, "
                           f"max_batch={max_batch}")


def tile_boundary_lengths(
    block_sizes: Sequence[int], *, max_len: int, multiples: Sequence[int] = (1, 2, 3)
) -> st.SearchStrategy[int]:
    """A length at ``m * block - 1``, ``m * block`` or ``m * block + 1`` for each block size and multiple ``m``.

    Args:
        block_sizes: the kernel's own tile rows, e.g. ``kernel.tile_sizes(problem).as_tuple()``
            (never hard-coded).
        max_len: boundaries above it are dropped.
        multiples: the ``m`` values.

    Shrinks toward the smallest boundary.

    Raises:
        InvalidInput: no boundary fits under ``max_len``.
    """
    found = sorted({n for b in block_sizes for m in multiples for n in (m * b - 1, m * b, m * b + 1)
                    if 0 <= n <= max_len})
    if not found:
        raise InvalidInput(f"no tile boundary of block_sizes={tuple(block_sizes)} fits under max_len={max_len}; "
                           f"raise max_len to at least {min(block_sizes) + 1}")
    return st.sampled_from(found)


def prime_lengths(*, max_len: int, min_prime: int = 5) -> st.SearchStrategy[int]:
    """A prime length in ``[min_prime, max_len]`` (no tile size divides it). Shrinks toward ``min_prime``.

    Raises:
        InvalidInput: no prime in the range.
    """
    primes = [n for n in range(max(2, min_prime), max_len + 1) if all(n % p for p in range(2, math.isqrt(n) + 1))]
    if not primes:
        raise InvalidInput(f"no prime in [{min_prime}, {max_len}]; raise max_len")
    return st.sampled_from(primes)


def sequence_lengths(*, max_len: int, block_sizes: Sequence[int] = (32, 16)) -> st.SearchStrategy[int]:
    """One sequence length: any length, 0 or 1, a tile boundary (multiple of a block size) +-1, or a prime.

    Args:
        max_len: the largest length drawn.
        block_sizes: the kernel's tile rows (BLOCK_M, BLOCK_N).

    Shrinks toward 0.
    """
    _check_sizes(max_len)
    parts = [st.integers(0, max_len), st.sampled_from([0, 1])]
    if max_len >= min(block_sizes, default=max_len + 1) - 1:
        parts.append(tile_boundary_lengths(block_sizes, max_len=max_len))
    if max_len >= 5:
        parts.append(prime_lengths(max_len=max_len))
    return st.one_of(*parts)


def _batch_size(min_batch: int, max_batch: int) -> st.SearchStrategy[int]:
    return st.integers(max(1, min_batch), max_batch)


@st.composite
def _insert(draw, item: st.SearchStrategy[int], rest: st.SearchStrategy[int], min_batch: int, max_batch: int):
    # ``item`` at a drawn position among ``rest`` lengths; shrinks to ``(item,)``.
    others = draw(st.lists(rest, min_size=max(0, min_batch - 1), max_size=max_batch - 1))
    pos = draw(st.integers(0, len(others)))
    return tuple(others[:pos] + [draw(item)] + others[pos:])


def empty_batches(*, min_batch: int = 1, max_batch: int = 6) -> st.SearchStrategy[tuple[int, ...]]:
    """A batch of only empty sequences, ``(0,) * B``. Shrinks toward ``(0,)``."""
    _check_sizes(0, max_batch, min_batch)
    return _batch_size(min_batch, max_batch).map(lambda n: (0,) * n)


@st.composite
def sparse_batches(draw, *, min_batch: int = 2, max_batch: int = 6) -> tuple[int, ...]:
    """A batch whose total token count is smaller than its number of sequences (so most are empty).

    Draws B >= max(2, min_batch), then lengths whose sum is at most B - 1, in any
    order. Shrinks toward all-empty batches of B = 2.
    """
    _check_sizes(0, max_batch, min_batch)
    if max_batch < 2:
        raise InvalidInput(f"sparse_batches needs max_batch >= 2 (got {max_batch}): a total < B needs B >= 2")
    n = draw(st.integers(max(2, min_batch), max_batch))
    left, out = n - 1, []
    for _ in range(n):
        x = draw(st.integers(0, left))
        out.append(x)
        left -= x
    return tuple(draw(st.permutations(out)))


def one_token_batches(
    *, max_len: int = 64, block_sizes: Sequence[int] = (32, 16), min_batch: int = 1, max_batch: int = 6
) -> st.SearchStrategy[tuple[int, ...]]:
    """A batch with at least one 1-token sequence among any others. Shrinks toward ``(1,)``."""
    _check_sizes(max_len, max_batch, min_batch)
    return _insert(st.just(1), sequence_lengths(max_len=max_len, block_sizes=block_sizes), min_batch, max_batch)


def skewed_lengths(
    *, max_len: int = 64, min_batch: int = 2, max_batch: int = 6, tiny_max: int = 3
) -> st.SearchStrategy[tuple[int, ...]]:
    """One mega-sequence (``max_len // 2`` to ``max_len`` tokens) among tiny ones (0 to ``tiny_max``).

    The worst case for load balance and for kernels that size work from the
    maximum length. Shrinks toward ``(0, max_len // 2)``.
    """
    _check_sizes(max_len, max_batch, min_batch)
    mega = st.integers(max(1, max_len // 2), max(1, max_len))
    return _insert(mega, st.integers(0, tiny_max), max(2, min_batch), max(2, max_batch))


@st.composite
def heavy_tailed_lengths(
    draw,
    *,
    alpha: Union[float, st.SearchStrategy[float], None] = None,
    min_len: int = 1,
    max_len: int = 64,
    min_batch: int = 1,
    max_batch: int = 6,
) -> tuple[int, ...]:
    """Pareto-distributed lengths (the continuous form of a Zipf tail), clipped to ``max_len``.

    Each length is ``floor(min_len * (1 - u) ** (-1 / alpha))`` for a drawn
    ``u`` in [0, 1): a smaller tail index ``alpha`` gives heavier tails (real
    recommendation histories sit near 1). ``alpha`` is a float or a strategy
    (default: one of 0.8, 1.2, 2.0).

    Shrinks toward ``u = 0``: every length ``min_len``, one sequence.
    """
    _check_sizes(max_len, max_batch, min_batch)
    if alpha is None:
        alpha = st.sampled_from([1.2, 0.8, 2.0])
    a = draw(alpha) if isinstance(alpha, st.SearchStrategy) else float(alpha)
    if not a > 0:
        raise InvalidInput(f"alpha={a} must be > 0 (the Pareto tail index)")
    n = draw(_batch_size(min_batch, max_batch))
    grid = 2**16
    us = draw(st.lists(st.integers(0, grid - 1), min_size=n, max_size=n))
    return tuple(min(max_len, int(min_len * (1.0 - u / grid) ** (-1.0 / a))) for u in us)


def movielens_batches(
    *, max_len: int = 64, scale: Optional[float] = None, min_batch: int = 1, max_batch: int = 6
) -> st.SearchStrategy[tuple[int, ...]]:
    """User-history lengths sampled from MovieLens (:func:`jfa_verify.core.lengths.movielens_lengths`).

    Each length is ``ceil(n * scale)`` (at least 1), clipped to ``max_len``;
    ``scale`` defaults to mapping the median history (70.5) to ``max_len / 4``,
    so the real tail is kept up to the clip. Shrinks toward the shortest
    history and one sequence.
    """
    from jfa_verify.core.lengths import movielens_lengths

    _check_sizes(max_len, max_batch, min_batch)
    data = sorted(set(movielens_lengths()))
    s = scale if scale is not None else max_len / 4 / 70.5
    scaled = sorted({min(max_len, max(1, math.ceil(n * s))) for n in data})
    return st.lists(st.sampled_from(scaled), min_size=max(1, min_batch), max_size=max_batch).map(tuple)


LENGTH_KINDS = ("mixed", "empty", "sparse", "one_token", "boundary", "prime", "skewed", "heavy_tail", "movielens")


def jagged_lengths(
    *,
    max_batch: int = 6,
    max_len: int = 64,
    block_sizes: Sequence[int] = (32, 16),
    min_batch: int = 1,
    kinds: Optional[Sequence[str]] = None,
) -> st.SearchStrategy[tuple[int, ...]]:
    """A batch of lengths from one of the adversarial kinds in :data:`LENGTH_KINDS`.

    Kinds: ``mixed`` (edge and free lengths mixed, see :func:`sequence_lengths`),
    ``empty`` (:func:`empty_batches`), ``sparse`` (:func:`sparse_batches`),
    ``one_token``, ``boundary`` (all at tile boundaries +-1), ``prime``,
    ``skewed`` (one mega-sequence), ``heavy_tail`` (Pareto) and ``movielens``.

    Args:
        max_batch, min_batch, max_len: size limits.
        block_sizes: the kernel's own (BLOCK_M, BLOCK_N).
        kinds: restrict to these kinds (default: all that fit the limits).

    Shrinks toward the ``mixed`` kind's ``(0,)`` (or ``min_batch`` zeros).
    """
    _check_sizes(max_len, max_batch, min_batch)
    chosen = LENGTH_KINDS if kinds is None else tuple(kinds)
    bad = [k for k in chosen if k not in LENGTH_KINDS]
    if bad:
        raise InvalidInput(f"kinds={bad} unknown; choose from {LENGTH_KINDS}")
    size = dict(min_size=min_batch, max_size=max_batch)
    one = sequence_lengths(max_len=max_len, block_sizes=block_sizes)
    make = {
        "mixed": lambda: st.lists(one, **size).map(tuple),
        "empty": lambda: empty_batches(min_batch=min_batch, max_batch=max_batch),
        "sparse": lambda: sparse_batches(min_batch=min_batch, max_batch=max_batch),
        "one_token": lambda: one_token_batches(max_len=max_len, block_sizes=block_sizes, min_batch=min_batch,
                                               max_batch=max_batch),
        "boundary": lambda: st.lists(tile_boundary_lengths(block_sizes, max_len=max_len), min_size=max(1, min_batch),
                                     max_size=max_batch).map(tuple),
        "prime": lambda: st.lists(prime_lengths(max_len=max_len), min_size=max(1, min_batch),
                                  max_size=max_batch).map(tuple),
        "skewed": lambda: skewed_lengths(max_len=max_len, min_batch=min_batch, max_batch=max_batch),
        "heavy_tail": lambda: heavy_tailed_lengths(max_len=max_len, min_batch=min_batch, max_batch=max_batch),
        "movielens": lambda: movielens_batches(max_len=max_len, min_batch=min_batch, max_batch=max_batch),
    }
    fits = {
        "sparse": max_batch >= 2,
        "skewed": max_batch >= 2 and max_len >= 8,
        "boundary": max_len >= min(block_sizes) - 1,
        "prime": max_len >= 5,
    }
    parts = [make[k]() for k in chosen if fits.get(k, True)]
    if not parts:
        raise InvalidInput(f"none of kinds={chosen} fits max_batch={max_batch}, max_len={max_len}")
    return st.one_of(*parts)


@st.composite
def cross_query_lengths(
    draw, kv_lengths: Sequence[int], *, max_len: int = 64, block_sizes: Sequence[int] = (32, 16)
) -> tuple[int, ...]:
    """Query lengths for cross-attention, one per KV length, often different from it.

    Per sequence: the KV length itself, that length +-1, 0, 1, or any edge
    length (:func:`sequence_lengths`). With causal masking the two alignments
    then differ. Shrinks toward query length 0 for every sequence.
    """
    out = []
    one = sequence_lengths(max_len=max_len, block_sizes=block_sizes)
    for n in kv_lengths:
        choice = draw(st.sampled_from(["other", "same", "plus", "minus"]))
        if choice == "same":
            out.append(n)
        elif choice == "plus":
            out.append(min(max_len, n + 1))
        elif choice == "minus":
            out.append(max(0, n - 1))
        else:
            out.append(draw(one))
    return tuple(out)
