"""Building a case that belongs to chosen classes of the contract's dimensions (:mod:`jfa_verify.cases.dimensions`).

:func:`build_case` takes ``{dimension: class}`` (any subset of the dimensions;
the others take their first supported class) and returns a :class:`Case` whose
:func:`~jfa_verify.cases.dimensions.classify` contains every chosen class, or None
when no such case exists. The classifier is the judge: every candidate is
classified before it is returned, so construction and coverage cannot drift apart.

Lengths decide six dimensions at once (mode, relation, edges, tiles, batch,
waves); they are searched jointly: a deterministic random search over lengths
at the kernel's own tile boundaries and small edge lengths, repaired to reach a
number of tiles, keeping the cheapest of the first matches. Sizes stay small
(the CPU interpreter runs them) except where a class needs more tiles than SMs.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Mapping, Optional

from jfa_verify.cases.case import Case
from jfa_verify.cases.dimensions import (
    DIMENSIONS,
    LENGTH_DIMENSIONS,
    Dimension,
    Target,
    classify,
    dimension,
    tile_count,
    tile_shape,
    window_of,
    window_shape,
)
from jfa_verify.cases.scaling import Scaling
from jfa_verify.cases.search_cache import SearchCache
from jfa_verify.cases.sparsity import Sparsity
from jfa_verify.core.dtypes import dtype_name
from jfa_verify.core.masks import Mask

__all__ = ["BUILDERS", "CANDIDATE_HEAD_DIMS", "DimensionRecord", "HEADS", "SM_SCALE_FACTORS", "Within", "build_case",
           "case_cost", "head_dims_for", "length_cost", "lengths_for", "reachable", "save_lengths_cache",
           "selection_blocks_for"]

# (H_q, H_kv) per heads class: H_kv = 2 where it can be, so a KV head index mix-up shows.
HEADS = {"mha": (2, 2), "gqa_pow2": (4, 2), "gqa_non_pow2": (6, 2), "mqa": (3, 1)}
# A given softmax scale as a multiple of the default 1/sqrt(D).
SM_SCALE_FACTORS = {"small": 0.25, "large": 3.0}
OFFSETS_START = 3  # odd, so no sequence starts at an aligned row
Q_OFFSETS_START = 8  # the "distinct" class: queries start after keys, so rows [3, 8) differ in role
# Smallest (cheapest) first in effect: the wide ones, last, are taken only for what needs them (tiles of
# another shape, which kernels pick past D = 128).
_D_CANDIDATES = {"pow2": (32, 16, 64, 128, 256), "non_pow2_even": (24, 40, 48, 96, 192), "odd": (33, 17, 65, 129)}
_DV_CANDIDATES = (16, 17, 24, 32, 33, 40, 48, 64, 80, 96, 128, 192, 256)
# Every head dim a built case may have (D or D_v), ascending.
CANDIDATE_HEAD_DIMS = tuple(sorted({d for ds in _D_CANDIDATES.values() for d in ds} | set(_DV_CANDIDATES)))
_ATTEMPTS = 400


def head_dims_for(head_dim_class: Optional[str], value_dim_class: Optional[str], caps,
                  accept: Optional[Callable[[int, int], bool]] = None) -> Optional[tuple[int, int]]:
    """``(D, D_v)`` of the given classes (None: any) inside ``caps`` for which ``accept(D, D_v)`` holds (None:
    any), smallest first, or None."""
    d_classes = [head_dim_class] if head_dim_class else list(_D_CANDIDATES)
    for dc in d_classes:
        for d in _D_CANDIDATES[dc]:
            if not caps.supports_head_dim(d):
                continue
            for dv in (d,) + _DV_CANDIDATES:
                if not caps.supports_head_dim(dv) or (dv != d and not caps.distinct_value_head_dim):
                    continue
                probe = Case(kv_lengths=(1,), head_dim=d, head_dim_v=dv)
                if value_dim_class is not None and value_dim_class not in dimension("value_dim").classify(probe, None):
                    continue
                if accept is None or accept(d, dv):
                    return d, dv
    return None


# ----------------------------------------------------------------------------- lengths


def _palette(bm: int, bn: int) -> list[int]:
    edges = {0, 1, 2, 3, 5, 7, 9, bn - 1, bn, bn + 1, bm - 1, bm, bm + 1, 2 * bn + 1, 2 * bm - 1, 2 * bm + 3}
    return sorted(n for n in edges if n >= 0)


def length_cost(q: tuple[int, ...], k: tuple[int, ...], bm: int, bn: int) -> int:
    """Work of a batch per head, in units of about one (query tile x key tile) step: forward and backward
    both walk about (query tiles x key tiles) per sequence, plus a per-sequence cost. On the CPU
    interpreter one unit per head takes about 20 ms."""
    return sum((1 + math.ceil(a / bm)) * (1 + math.ceil(b / bn)) for a, b in zip(q, k))


def case_cost(case: Case, target: Target) -> int:
    """:func:`length_cost` of ``case`` times its query heads; a block-sparse case's key tiles counted at the share
    of its (query block, KV block) pairs its selection keeps (the kernel walks only those; a covering array of
    a block-sparse kernel priced them as dense and went a quarter over its budget)."""
    bm, bn = target.tiles_of(case)
    q, k = case.query_lengths, case.kv_lengths
    if case.block_sparsity is None:
        return length_cost(q, k, bm, bn) * case.num_heads_q
    # (blocks smaller than the tiles shrink them in triton_jfa: twice the tiles on the interpreter's 16-row blocks)
    bm, bn = min(bm, case.block_sparsity.block_m), min(bn, case.block_sparsity.block_n)
    drawn = case.block_sparsity.blocks(q, k, case.seed)
    cost = 0.0
    for a, b, rows in zip(q, k, drawn):
        nk = -(-b // case.block_sparsity.block_n)
        kept = sum(len(r) for r in rows) / (len(rows) * nk) if rows and nk else 0.0
        cost += (1 + math.ceil(a / bm)) * (1 + math.ceil(b / bn) * kept)
    return math.ceil(cost) * case.num_heads_q


def _draw(want: Mapping[str, str], bm: int, bn: int, sms: int, rng: random.Random):
    """One candidate ``(mode, q_lengths, k_lengths)`` aimed at ``want`` (verified by the caller)."""
    mode = want.get("mode") or rng.choice(("self", "cross", "broadcast_q"))
    batch = want.get("batch") or rng.choice(("one", "few", "over_sms"))
    if batch == "empty":
        return mode, (), ()
    b = {"one": 1, "few": rng.randint(2, max(2, min(sms, 5))), "over_sms": sms + rng.randint(1, 3)}[batch]
    pal = _palette(bm, bn)
    edges = want.get("edges")
    if edges == "none":
        pal = [n for n in pal if n >= 2]
    tiles = want.get("tiles")
    if tiles == "single_tile":
        pal_q, pal_k = [n for n in pal if n <= bm], [n for n in pal if n <= bn]
    else:
        pal_q = pal_k = pal
    relation = want.get("relation")
    if mode == "self":
        relation = "equal"
    k = [rng.choice(pal_k) for _ in range(b)]
    if mode == "broadcast_q":
        lq = rng.choice(pal_q)
        q = [lq] * b
    else:
        q = []
        base, by_a_tile = (relation or "").removesuffix("_by_a_tile"), (relation or "").endswith("_by_a_tile")
        tile, pal_q_tuple = max(bm, bn), tuple(pal_q)
        for i, n in enumerate(k):
            rel = base if base in ("equal", "shorter", "longer") else rng.choice(("equal", "shorter", "longer"))
            if relation == "mixed" and i < 2:
                rel = ("shorter", "longer")[i]
            gap = tile if by_a_tile and i == 0 else 1  # one sequence a tile apart is enough; the rest stay cheap
            if gap > 1 and n == 0:
                n = k[i] = rng.choice([m for m in pal_k if m > 0])
            q.append(rng.choice(_partners(rel, n, gap, pal_q_tuple)))
        if mode == "self":
            q = list(k)
    # the edge and tile features, placed in a random sequence
    i = rng.randrange(b)
    if edges == "empty_q":
        q = [0] * b if mode == "broadcast_q" else q[:i] + [0] + q[i + 1:]
        if mode == "self":
            k[i] = 0
    elif edges == "empty_k":
        k[i] = 0
        if mode == "self":
            q[i] = 0
    elif edges == "one_token":
        if rng.random() < 0.5 or mode == "broadcast_q":
            k[i] = 1
        else:
            q[i] = 1
        if mode == "self":
            q[i] = k[i]
    j = rng.randrange(b)
    if tiles == "boundary_m":
        v = rng.choice([bm - 1, bm, bm + 1, 2 * bm - 1, 2 * bm + 1])
        q = [v] * b if mode == "broadcast_q" else q[:j] + [v] + q[j + 1:]
        if mode == "self":
            k[j] = v
    elif tiles == "boundary_n":
        k[j] = rng.choice([bn - 1, bn, bn + 1, 2 * bn - 1, 2 * bn + 1])
        if mode == "self":
            q[j] = k[j]
    elif tiles == "multi_tile":
        v = rng.choice([2 * bm + 3, 3 * bn + 5])
        if mode == "broadcast_q" and rng.random() < 0.5:
            q = [v] * b
        else:
            k[j] = v
            if mode == "self":
                q[j] = v
    _reach_waves(want.get("waves"), mode, q, k, bm, sms, rng)
    return mode, tuple(q), tuple(k)


@lru_cache(maxsize=4096)
def _partners(rel: str, n: int, gap: int, pal_q: tuple) -> tuple:
    """The query lengths of ``pal_q`` that stand in relation ``rel`` to key length ``n`` (at least ``gap`` apart),
    or ``(n,)`` when none does (a draw asks this once per sequence: hundreds of times for a batch over the SMs)."""
    if rel == "shorter":
        return tuple(m for m in pal_q if n - m >= gap and (gap == 1 or m > 0)) or (n,)
    if rel == "longer":
        return tuple(m for m in pal_q if m - n >= gap) or (n,)
    return (n,)


def _reach_waves(waves: Optional[str], mode: str, q: list, k: list, bm: int, sms: int, rng: random.Random) -> None:
    """Grow query lengths (whole tiles, keeping each length's residue) until the forward tile count is
    in the ``waves`` class's range; a non-empty key length grows by as much (each sequence keeps its
    query/key relation), an empty one stays empty."""
    if waves not in ("two_waves", "several_waves"):
        return
    lo = sms + 1 if waves == "two_waves" else 3 * sms
    have = tile_count(q, bm)
    if have >= lo:
        return
    if mode == "broadcast_q":
        if q[0] == 0:
            return
        per_seq = math.ceil(lo / len(q))
        grow = max(0, per_seq - math.ceil(q[0] / bm))
        q[:] = [q[0] + grow * bm] * len(q)
        return
    live = [i for i, n in enumerate(q) if n > 0] or ([rng.randrange(len(q))] if q else [])
    need = lo - have
    for n, i in enumerate(live):
        add = need // len(live) + (1 if n < need % len(live) else 0)
        if q[i] == 0:
            q[i] = 1
            add -= 1
        q[i] += max(0, add) * bm
        if mode == "self":
            k[i] = q[i]
        elif k[i] > 0:
            k[i] += max(0, add) * bm


@dataclass(frozen=True)
class _Lengths:
    """What the length dimensions read of a case: its mode and lengths (building a :class:`Case`, which
    validates every field, was most of the search's time)."""

    mode: str
    query_lengths: tuple
    kv_lengths: tuple

    @property
    def batch(self) -> int:
        return len(self.kv_lengths)


def _length_case(mode: str, q: tuple, k: tuple) -> _Lengths:
    if mode == "self":
        return _Lengths(mode, k, k)
    if mode == "cross":
        return _Lengths(mode, q, k)
    return _Lengths(mode, (q[0] if q else 0,) * len(k), k)  # B = 0: no query row


_LENGTHS = SearchCache("lengths")


@lru_cache(maxsize=None)
def lengths_for(want: tuple, bm: int, bn: int, sms: int, seed: int = 0) -> Optional[tuple[str, tuple, tuple]]:
    """``(mode, q_lengths, k_lengths)`` whose classes include every ``(dimension, class)`` of ``want``
    (length dimensions only), the cheapest of the first few found, or None when the search finds none.

    Deterministic for a given ``seed``; memoized in the process (the pair generator asks often) and on disk between
    processes (:mod:`~jfa_verify.cases.search_cache`: most of a GPU suite's covering array was this search).
    """
    def search():
        found = _search_lengths(want, bm, bn, sms, seed)
        return _NONE_FOUND if found is None else found

    # (every answer, from the file or not, is checked as the search checks a draw: a damaged file changes no suite)
    answer = _checked(_LENGTHS.get(repr((want, bm, bn, sms, seed)), search), want, bm, bn, sms)
    return _search_lengths(want, bm, bn, sms, seed) if answer is _DAMAGED else answer


_NONE_FOUND = "none found"  # the cache's word for a search that found nothing (a null entry is damage, not this)
_DAMAGED = object()


def _checked(found, want: tuple, bm: int, bn: int, sms: int):
    """A cached answer of :func:`lengths_for` as the search returns it (None where it found none), or ``_DAMAGED``
    when it is not an answer to ``want`` (lengths that are not counts, or lengths not in the wanted classes)."""
    if found == _NONE_FOUND:
        return None
    try:
        mode, q, k = found
        q, k = tuple(q), tuple(k)
    except (TypeError, ValueError):
        return _DAMAGED
    lengths = q + k
    if mode not in ("self", "cross", "broadcast_q") or not all(type(n) is int and n >= 0 for n in lengths):
        return _DAMAGED
    return (mode, q, k) if _meets(dict(want), mode, q, k, _TilesAt(bm, bn, sms)) else _DAMAGED


def _meets(wanted: dict, mode: str, q: tuple, k: tuple, tiles) -> bool:
    """Whether a drawn ``(mode, q, k)`` is in every class of ``wanted`` (an empty batch only where it is wanted)."""
    if not k and wanted.get("batch") != "empty":
        return False
    case = _length_case(mode, q, k)
    return all(cls in dimension(name).classify(case, tiles) for name, cls in wanted.items())


def save_lengths_cache() -> None:
    """Write :func:`lengths_for`'s new answers to its disk cache now (:meth:`SearchCache.save`)."""
    _LENGTHS.save()


def _search_lengths(want: tuple, bm: int, bn: int, sms: int, seed: int) -> Optional[tuple[str, tuple, tuple]]:
    wanted = dict(want)
    if wanted.get("mode") == "self" and wanted.get("relation", "equal") != "equal":
        return None  # a self case's query lengths are its key lengths: every draw would be refused (a third of them)
    rng = random.Random(_stable_seed(want, bm, bn, sms, seed))
    tiles = _TilesAt(bm, bn, sms)
    found = []
    for _ in range(_ATTEMPTS):
        mode, q, k = _draw(wanted, bm, bn, sms, rng)
        if _meets(wanted, mode, q, k, tiles):
            found.append((not _live(q, k), length_cost(q, k, bm, bn), mode, q, k))
            if len(found) >= 12:
                break
    if not found:
        return None
    *_, mode, q, k = min(found)  # a batch that computes some score first, then the cheapest
    return mode, q, k


def _live(q, k) -> bool:
    return any(a > 0 and b > 0 for a, b in zip(q, k))


def _stable_seed(*parts) -> int:
    # hash() of a str changes from process to process; a suite must not
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little")


class _TilesAt(Target):
    """A :class:`Target` with fixed tiles (length search happens before the head dims are known)."""

    def __init__(self, bm: int, bn: int, sms: int):
        super().__init__(None, "cpu", sms)
        object.__setattr__(self, "_bm_bn", (bm, bn))

    def tiles_of(self, case: Case) -> tuple[int, int]:
        return self._bm_bn


# ----------------------------------------------------------------------------- one class at a time
# How a case of each class of the contract model is built: the Case fields that put a case in the class on its
# own (None: no such case inside the target's capabilities); :func:`build_case` chooses them together (the mask
# with the window's shape, the length dimensions searched jointly, head dims against the tiles asked).


@dataclass(frozen=True)
class Within:
    """What :func:`build_case` chose jointly before the dimension records fill in a case's fields: the mode and
    lengths (searched together), the head dims (with the tiles asked), the key tile and whether the mask is causal."""

    mode: str
    q: tuple
    k: tuple
    d: int
    dv: int
    bn: int
    causal: bool
    bm: int = 0
    selection_blocks: str = "none"  # the regime of a block selection's blocks (chosen with the sparsity pattern)


Build = Callable[[str, Target, Optional[Within]], Optional[dict]]


@dataclass(frozen=True)
class DimensionRecord:
    """One contract dimension's record: the dimension (its classes with their descriptions, its classifier and
    support rule: :attr:`dimension`) and how a case of each class is built (:attr:`build`). The coverage classes are
    views over these records (:data:`jfa_verify.cases.coverage.COVERAGE`, :func:`jfa_verify.cases.coverage.views_of`).

    ``record(cls, target)`` gives the fields of a :class:`Case` in class ``cls`` (a small case of its own, None when
    none exists inside ``target``); ``record(cls, target, within)`` the fields of that class for the case
    :func:`build_case` is making (lengths, head dims and the mask chosen jointly: :class:`Within`).
    """

    dimension: Dimension
    build: Build

    @property
    def name(self) -> str:
        return self.dimension.name

    @property
    def classes(self) -> dict:
        return self.dimension.classes

    def __call__(self, cls: Optional[str], target: Target, within: Optional[Within] = None) -> Optional[dict]:
        return self.build(cls, target, within)

    @property
    def description(self) -> str:
        return self.dimension.description


def _query_fields(mode: str, q: tuple) -> dict:
    return {"q_lengths": q} if mode == "cross" else ({"broadcast_q_len": q[0] if q else 0}
                                                     if mode == "broadcast_q" else {})


def _field(name: str) -> Build:
    return lambda cls, target, within=None: {name: cls}


def _lengths_build(dim: str) -> Build:
    def build(cls: Optional[str], target: Target, within: Optional[Within] = None) -> Optional[dict]:
        if within is not None:  # searched jointly with the other length dimensions
            return {"mode": within.mode, "kv_lengths": within.k, **_query_fields(within.mode, within.q)}
        found = lengths_for(((dim, cls),), *target.tiles(32, 32), target.num_sms)
        if found is None:
            return None
        mode, q, k = found
        return {"mode": mode, "kv_lengths": k, **_query_fields(mode, q)}
    return build


def _mask_build(cls: str, target: Target, within: Optional[Within] = None) -> dict:
    mask = Mask.parse(cls)  # (in a whole case the window's record, after this one, sets the window's shape)
    return {"causal": mask.causal, "causal_alignment": mask.alignment or "top_left",
            "window": window_of("symmetric", mask.causal, 1) if mask.windowed else None}


def _window_build(cls: str, target: Target, within: Optional[Within] = None) -> dict:
    if within is not None:
        return {"window": window_of(cls, within.causal, within.bn)}
    return {"window": window_of(cls, False, target.tiles(32, 32)[1])}


def _heads_build(cls: str, target: Target, within: Optional[Within] = None) -> dict:
    return dict(zip(("num_heads_q", "num_heads_kv"), HEADS[cls]))


def _head_dims_build(dim: str) -> Build:
    def build(cls: Optional[str], target: Target, within: Optional[Within] = None) -> Optional[dict]:
        if within is not None:  # chosen jointly with the value dim and the tiles asked
            return {"head_dim": within.d, "head_dim_v": within.dv}
        dims = head_dims_for(*((cls, None) if dim == "head_dim" else (None, cls)), target.capabilities)
        return None if dims is None else dict(zip(("head_dim", "head_dim_v"), dims))
    return build


def _sm_scale_build(cls: str, target: Target, within: Optional[Within] = None) -> dict:
    d = 32 if within is None else within.d
    scale = None if cls == "default" else SM_SCALE_FACTORS[cls] / math.sqrt(d)
    return {"sm_scale": scale} if within is not None else {"head_dim": d, "sm_scale": scale}


def _offsets_start_build(cls: str, target: Target, within: Optional[Within] = None) -> dict:
    if cls == "distinct" and within is None:
        return {"mode": "cross", "kv_lengths": (2,), "q_lengths": (2,), "q_offsets_start": Q_OFFSETS_START}
    if cls == "distinct":  # (build_case searched cross-attention lengths for it)
        return {"offsets_start": 0, "q_offsets_start": Q_OFFSETS_START}
    return {"offsets_start": OFFSETS_START if cls == "nonzero" else 0}


def _tile_shape_build(cls: Optional[str], target: Target, within: Optional[Within] = None) -> Optional[dict]:
    if within is not None:
        return {}  # the head dims were chosen to give the tiles asked
    for dtype in (dtype_name(d) for d in target.capabilities.dtypes):
        dims = head_dims_for(None, None, target.capabilities,
                             lambda d, dv: tile_shape(target.tiles(d, dv, dtype)) == cls)
        if dims is not None:
            return {"head_dim": dims[0], "head_dim_v": dims[1], "dtype": dtype}
    return None


def _variant_build(cls: str, target: Target, within: Optional[Within] = None) -> dict:
    return {"instrument": cls == "instrumented"}


def selection_blocks_for(pairs, tiles: tuple[int, int], regime: str) -> Optional[tuple[int, int]]:
    """The declared ``(block_m, block_n)`` of ``pairs`` (a kernel's ``Capabilities.block_sparse``) in ``regime``, a
    ``selection_blocks`` class, against the kernel's dense ``tiles``, or None when none is:

    * ``"tiles"``: the tiles themselves;
    * ``"multi_tile"``: the smallest blocks no smaller than the tiles, larger on both sides where some are (so that
      both the query-block and the KV-block mapping of tiles to blocks are exercised);
    * ``"sub_tile"``: the largest blocks no larger than the tiles (the fewest extra tiles once they shrink).
    """
    bm, bn = tiles
    if regime == "tiles":
        return tiles if tuple(tiles) in pairs else None
    if regime == "multi_tile":
        larger = [p for p in pairs if p[0] >= bm and p[1] >= bn and tuple(p) != tuple(tiles)]
        return min(larger, key=lambda p: (not (p[0] > bm and p[1] > bn), p[0] * p[1]), default=None)
    if regime == "sub_tile":
        smaller = [p for p in pairs if p[0] <= bm and p[1] <= bn and tuple(p) != tuple(tiles)]
        return max(smaller, key=lambda p: p[0] * p[1], default=None)
    return None


# The regimes a block selection's blocks are taken in when only the pattern is asked, in order of preference (the
# cheapest case first: blocks smaller than the tiles shrink them, and the interpreter runs twice the tiles).
_SELECTION_REGIMES = ("tiles", "multi_tile", "sub_tile")


def _sparsity_build(cls: str, target: Target, within: Optional[Within] = None) -> Optional[dict]:
    if cls == "dense":
        return {"block_sparsity": None}
    pairs = target.capabilities.block_sparse
    if not pairs:
        return None
    tiles = (within.bm, within.bn) if within is not None else target.tiles(32, 32)
    regimes = (within.selection_blocks,) if within is not None else _SELECTION_REGIMES
    pair = next((p for r in regimes if (p := selection_blocks_for(pairs, tiles, r)) is not None), None)
    return None if pair is None else {"block_sparsity": Sparsity(*pair, pattern=cls)}


def _selection_blocks_build(cls: str, target: Target, within: Optional[Within] = None) -> Optional[dict]:
    if within is not None:
        return {}  # the sparsity record builds the selection, with blocks of this regime (build_case chose both)
    if cls == "none":
        return {"block_sparsity": None}
    pair = selection_blocks_for(target.capabilities.block_sparse, target.tiles(32, 32), cls)
    return None if pair is None else {"block_sparsity": Sparsity(*pair, pattern="topk")}


def _scaling_build(cls: str, target: Target, within: Optional[Within] = None) -> Optional[dict]:
    if cls == "none":
        return {"block_scaling": None}
    if not target.capabilities.mxfp8:
        return None
    fields = {"block_scaling": Scaling(cls)}
    if within is None:  # a small case of its own: MXFP8 needs float8 inputs and head dims of whole blocks
        fields.update(dtype="float8_e4m3fn", head_dim=32, head_dim_v=32)
    return fields


_BUILDS: dict[str, Build] = {
    "mask": _mask_build, "window": _window_build, "heads": _heads_build, "head_dim": _head_dims_build("head_dim"),
    "value_dim": _head_dims_build("value_dim"), "sm_scale": _sm_scale_build, "offsets_start": _offsets_start_build,
    "tile_shape": _tile_shape_build, "variant": _variant_build, "sparsity": _sparsity_build,
    "selection_blocks": _selection_blocks_build, "scaling": _scaling_build}
# One record per dimension of the contract model, in its order (a case's fields are filled in this order).
BUILDERS: dict[str, DimensionRecord] = {
    d.name: DimensionRecord(d, _BUILDS.get(d.name) or (_lengths_build(d.name) if d.lengths else _field(d.name)))
    for d in DIMENSIONS}


def reachable(name: str, cls: str, target: Target) -> bool:
    """Some case inside ``target``'s capabilities is in class ``cls`` of dimension ``name``: the kernel supports
    the class (:attr:`Dimension.support <jfa_verify.cases.dimensions.Dimension>`) and a case of it builds."""
    return dimension(name).support(cls, target.capabilities) is None and BUILDERS[name](cls, target) is not None


# ----------------------------------------------------------------------------- whole cases


def _first_supported(name: str, caps) -> Optional[str]:
    dim = dimension(name)
    return next((c for c in dim.classes if dim.support(c, caps) is None), None)


# The mask (causal, window, their alignment) and the window's shape only go together in some ways.
_MASK_DIMENSIONS = ("mask", "window")


def _mask_classes(asked: tuple, caps) -> Optional[tuple[str, str]]:
    """``(mask, window)`` classes: those ``asked`` (None: not asked) and, for the other, the first supported
    class that goes with the one asked, or None when none does. They go together when the window's class
    is ``"none"`` exactly for a mask without a window, and the window keeps its shape under causal (which
    caps the right side: no ``wider_right`` nor ``right_unbounded`` causal window)."""
    options = [[a] if a is not None else [c for c in dimension(n).classes if dimension(n).support(c, caps) is None]
               for n, a in zip(_MASK_DIMENSIONS, asked)]
    for mask in options[0]:
        m = Mask.parse(mask)
        for shape in options[1]:
            if m.windowed == (shape != "none") and window_shape(window_of(shape, m.causal, 1), m.causal) == shape:
                return mask, shape
    return None


# The block selection's pattern and its blocks' regime against the tiles go together: dense exactly without blocks.
_SPARSE_DIMENSIONS = ("sparsity", "selection_blocks")


def _sparse_classes(pattern: Optional[str], regime: Optional[str], caps, tiles: tuple[int, int]
                    ) -> Optional[tuple[str, str]]:
    """``(sparsity, selection_blocks)`` classes: those asked (None: not asked) and, for the other, the first that
    goes with the one asked (dense without blocks; a pattern with the first regime whose blocks the kernel declares,
    :data:`_SELECTION_REGIMES`), or None when none does."""
    if pattern in (None, "dense") and regime in (None, "none"):
        return "dense", "none"
    if pattern == "dense" or regime == "none":
        return None
    pattern = pattern or next(c for c in dimension("sparsity").classes if c != "dense")
    regimes = (regime,) if regime else _SELECTION_REGIMES
    found = next((r for r in regimes if selection_blocks_for(caps.block_sparse, tiles, r) is not None), None)
    return None if found is None else (pattern, found)


def build_case(classes: Mapping[str, str], target: Target, *, seed: int = 0, name: str = "") -> Optional[Case]:
    """A case in every class of ``classes`` (``{dimension: class}``; a missing dimension takes its first
    supported class, the mask and the window's shape the first that go with what was asked), inside
    ``target``'s kernel capabilities, or None when none exists. What goes together is chosen jointly (the lengths of
    the six length dimensions, the head dims with the tiles asked, the mask with the window's shape: :class:`Within`);
    the case's fields then come from each dimension's record (:data:`BUILDERS`), in the model's order.

    Raises:
        KeyError: an unknown dimension or class name.
    """
    caps = target.capabilities
    chosen = {}
    for dim in DIMENSIONS:
        cls = classes.get(dim.name)
        if cls is not None and cls not in dim.classes:
            raise KeyError(f"class {cls!r} is not one of dimension {dim.name!r}'s {sorted(dim.classes)}")
        if cls is None and (dim.lengths or dim.name in _MASK_DIMENSIONS + _SPARSE_DIMENSIONS
                            or dim.name == "tile_shape"):
            continue  # left to the length search, chosen together below, or whatever the head dims give
        if cls is None:
            cls = _first_supported(dim.name, caps)
        if cls is None or dim.support(cls, caps) is not None:
            return None
        chosen[dim.name] = cls
    masks = _mask_classes(tuple(chosen.get(n) for n in _MASK_DIMENSIONS), caps)
    if masks is None:
        return None
    chosen.update(zip(_MASK_DIMENSIONS, masks))
    causal = Mask.parse(chosen["mask"]).causal
    modes = [classes["mode"]] if "mode" in classes else [m for m in dimension("mode").classes
                                                          if dimension("mode").support(m, caps) is None]
    if chosen["offsets_start"] == "distinct":  # two starts need two offsets tensors
        modes = [m for m in modes if m == "cross"]
    tiles_asked = chosen.get("tile_shape")
    dims = head_dims_for(chosen["head_dim"], chosen["value_dim"], caps, None if tiles_asked is None else (
        lambda d, dv: tile_shape(target.tiles(d, dv, chosen["dtype"])) == tiles_asked))
    if dims is None:
        return None
    d, dv = dims
    bm, bn = target.tiles(d, dv, chosen["dtype"])
    sparse = _sparse_classes(*(chosen.get(n) for n in _SPARSE_DIMENSIONS), caps, (bm, bn))
    if sparse is None:
        return None
    chosen.update(zip(_SPARSE_DIMENSIONS, sparse))
    found = []
    for mode in modes:  # a mode the kernel runs (the search would otherwise draw any); the cheapest
        want = tuple((n, chosen.get(n, mode if n == "mode" else None)) for n in LENGTH_DIMENSIONS)
        lengths = lengths_for(tuple(w for w in want if w[1] is not None), bm, bn, target.num_sms, seed)
        if lengths is not None:
            found.append((not _live(lengths[1], lengths[2]), length_cost(lengths[1], lengths[2], bm, bn), lengths))
    if not found:
        return None
    mode, q, k = min(found)[-1]
    within = Within(mode, q, k, d, dv, bn, causal, bm, chosen["selection_blocks"])
    fields: dict = {}
    for record in BUILDERS.values():
        fields.update(record(chosen.get(record.name), target, within))
    # (a dense, unscaled case's seed is what it was before the sparsity and scaling dimensions existed, and a sparse
    # case's with blocks of the tiles what it was before the selection_blocks dimension)
    seeded = tuple(sorted(item for item in chosen.items() if item not in (
        ("sparsity", "dense"), ("scaling", "none"), ("selection_blocks", "none"), ("selection_blocks", "tiles"))))
    case = Case(**fields, seed=_stable_seed(seeded, seed) % 2**32, name=name)
    got = classify(case, target)
    missing = [f"{n}={c}" for n, c in chosen.items() if c not in got[n]]
    if missing:  # construction and classifier must agree; a disagreement is a bug here, not in the kernel
        raise RuntimeError(f"construct built a case outside {missing}: {case}")
    return case
