"""Real jagged length distributions shipped with the package."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import numpy as np

__all__ = ["movielens_lengths", "sample_movielens_batch"]


@lru_cache(maxsize=1)
def movielens_lengths() -> tuple[int, ...]:
    """Ratings per user in MovieLens ml-latest-small (610 users, 20 to 2,698, median 70.5).

    Source and license: ``jfa_verify/data/NOTICE.md`` (GroupLens Research;
    Harper & Konstan 2015, doi:10.1145/2827872).
    """
    text = resources.files("jfa_verify").joinpath("data/movielens_small_user_history_lengths.txt").read_text()
    return tuple(int(line) for line in text.splitlines() if line.strip() and not line.startswith("#"))


def sample_movielens_batch(batch: int, seed: int, *, scale: float = 1.0, cap: int | None = None) -> tuple[int, ...]:
    """``batch`` user history lengths drawn with replacement (NumPy PCG64, ``seed``).

    ``scale`` shrinks every length (ceil, at least 1) to fit a slow device;
    ``cap`` clips the longest. Returns a tuple of ints.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    data = np.array(movielens_lengths())
    picked = rng.choice(data, size=batch, replace=True)
    out = [max(1, int(np.ceil(n * scale))) for n in picked]
    if cap is not None:
        out = [min(n, cap) for n in out]
    return tuple(out)
