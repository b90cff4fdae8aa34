"""Built-in suites of cases for ``jfa-verify run``.

The default suite mixes real jagged lengths (MovieLens user histories) with the
layouts [128, 4096, 512, 2048] and [7, 3, 19, 5, 11], over self-, cross- and
broadcast-Q attention, causal (both alignments) and not, and bf16/fp16/fp32.
On the CPU interpreter lengths are scaled down (the run says by how much).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .case import Case
from .dtypes import DIFFERENTIABLE
from .lengths import sample_movielens_batch
from .protocol import tiles_for_shape

__all__ = ["Suite", "default_suite", "SUITES", "get_suite"]

DTYPES = DIFFERENTIABLE


@dataclass(frozen=True)
class Suite:
    """A named list of cases and a note on how it was sized."""

    name: str
    cases: tuple[Case, ...]
    note: str


def _scaled(lengths: tuple[int, ...], scale: float) -> tuple[int, ...]:
    return tuple(max(1, round(n * scale)) if n else 0 for n in lengths)


def _cross_q_lengths(kv: tuple[int, ...]) -> tuple[int, ...]:
    # Query lengths that differ from the key lengths in both directions.
    return tuple(max(1, (n * 3) // 4) if i % 2 else n + 5 for i, n in enumerate(kv))


def default_suite(device_type: str, seed: int = 0, kernel=None) -> Suite:
    """The main job's suite for ``device_type`` (``"cuda"`` or ``"cpu"``).

    On CUDA: full-size lengths, H_q=8, H_kv=2, D=128. On CPU (Triton
    interpreter): lengths scaled by 1/16 (MovieLens by 1/8, batch of 6), H_q=4,
    H_kv=2, D=32, so the suite runs in minutes. ``kernel`` (a registered kernel)
    places one layout's lengths at its own tile boundaries +-1 (generic tiles
    for a kernel that declares none).
    """
    gpu = device_type == "cuda"
    scale = 1.0 if gpu else 1 / 16
    ml_scale = 1.0 if gpu else 1 / 8
    ml_batch = 16 if gpu else 6
    heads = dict(num_heads_q=8, num_heads_kv=2, head_dim=128) if gpu else dict(num_heads_q=4, num_heads_kv=2, head_dim=32)
    layouts = {
        "movielens-a": sample_movielens_batch(ml_batch, seed + 1, scale=ml_scale),
        "movielens-b": sample_movielens_batch(ml_batch, seed + 2, scale=ml_scale),
        "layout-128-4096-512-2048": _scaled((128, 4096, 512, 2048), scale),
        "layout-7-3-19-5-11": (7, 3, 19, 5, 11),
    }
    bm, bn = tiles_for_shape(kernel, heads["head_dim"], None, None, device_type).as_tuple()
    # An empty sequence first, then lengths at the tile boundaries +-1.
    layouts["tile-edges"] = (0,) + tuple(sorted({1, bn - 1, bn + 1, bm - 1, bm + 1, 2 * bn + 1} - {0}))
    variants = [
        dict(mode="self", causal=False),
        dict(mode="self", causal=True),
        dict(mode="cross", causal=True, causal_alignment="bottom_right"),
        dict(mode="broadcast_q", causal=False),
    ]
    cases = []
    n = 0
    for lname, kv in layouts.items():
        for dtype in DTYPES:
            for variant in variants:
                # Each layout x dtype gets two of the four variants, rotating, so every
                # variant meets every dtype and every layout across the suite.
                if (variants.index(variant) + DTYPES.index(dtype) + list(layouts).index(lname)) % 2:
                    continue
                extra = {}
                if variant["mode"] == "cross":
                    extra["q_lengths"] = _cross_q_lengths(kv)
                if variant["mode"] == "broadcast_q":
                    extra["broadcast_q_len"] = 64 if gpu else 24
                label = f"{lname}/{variant['mode']}{'-causal' if variant['causal'] else ''}/{dtype}"
                cases.append(Case(kv_lengths=kv, dtype=dtype, seed=seed * 1000 + n, name=label, **heads, **variant, **extra))
                n += 1
    # Odd shapes the rotation does not reach: a non-power-of-two head dim and MQA.
    cases.append(replace(cases[0], head_dim=40 if not gpu else 96, num_heads_kv=1, name=cases[0].name + "/mqa-odd-d", seed=seed * 1000 + n))
    note = "full-size lengths on the GPU" if gpu else (
        "CPU interpreter: fixed layouts scaled by 1/16, MovieLens lengths by 1/8 (batch of 6), H=4/2, D=32"
    )
    return Suite("default", tuple(cases), note)


SUITES = {"default": default_suite}


def get_suite(name: str, device_type: str, seed: int = 0, kernel=None) -> Suite:
    """Build the named suite.

    Raises:
        InvalidInput: unknown suite name.
    """
    from .errors import InvalidInput

    if name not in SUITES:
        raise InvalidInput(f"suite={name!r} is unknown; choose one of {sorted(SUITES)}")
    return SUITES[name](device_type, seed, kernel)
