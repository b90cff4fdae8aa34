"""Pairs of classes across the contract's dimensions: which exist, which a set of cases exercised, and a
covering array (every feasible pair in a few cases) built with ``allpairspy``.

A *pair* is ``((dimension, class), (dimension, class))`` over two different
dimensions of :data:`jfa_verify.cases.dimensions.DIMENSIONS`. For a :class:`Target`
(kernel and device) the pairs fall into:

* **supported**: both classes inside the kernel's capabilities and some case
  has both (:func:`jfa_verify.cases.construct.build_case` finds one);
* **infeasible**: no valid case has both (self-attention with L_q != L_k; one
  sequence with a mix of shorter and longer queries; ...);
* **outside the kernel**: a class the kernel cannot run (its capabilities);
* **moot**: strided offsets with anything but the mode and the offsets' own
  dimensions: the contract rejects such offsets, so only how they are read matters.

:func:`covering_array` returns cases exercising every supported pair;
:class:`PairCoverage` counts the pairs a run exercised and names the missing ones.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import combinations, product
from pathlib import Path
from typing import Iterable, Optional

from jfa_verify.cases.case import Case
from jfa_verify.cases.construct import (
    CANDIDATE_HEAD_DIMS,
    HEADS,
    build_case,
    case_cost,
    head_dims_for,
    length_cost,
    lengths_for,
    save_lengths_cache,
)
from jfa_verify.cases.dimensions import DIMENSIONS, LENGTH_DIMENSIONS, Target, classify, tile_shape
from jfa_verify.cases.search_cache import SearchCache, sources_digest
from jfa_verify.core.dtypes import dtype_name

__all__ = ["PairCoverage", "ROW_PREFIX", "Universe", "VISIBILITY_DIMENSIONS", "computes_scores", "covering_array",
           "exercised", "pairs_of", "universe", "visibility_combinations"]

Pair = tuple  # ((dim, cls), (dim, cls)), dims in DIMENSIONS order
_ORDER = {d.name: i for i, d in enumerate(DIMENSIONS)}
# Strided offsets are outside the contract: the kernel rejects them or reads them right, and only
# these dimensions change how offsets are read.
_OFFSETS_PEERS = ("mode", "offsets_dtype", "offsets_start", "batch")
# A block selection changes which keys a row sees and which tiles run: it meets the dimensions of the mask, the
# lengths and tiles, the schedule, the heads (one selection for every head) and the sequences' starts (its indices
# are local to a sequence). The element values, scale, head dims, offsets' dtype and memory layouts meet it only
# through the dense code each already pairs with (pairing them too cost the CPU covering array a quarter more).
_SPARSITY_PEERS = ("mode", "mask", "relation", "window", "heads", "dtype", "offsets_start", "edges", "tile_shape",
                   "tiles", "batch", "waves", "variant")


# MXFP8 block scales (the scaling dimension) meet what indexes them or what they scale: the mode (broadcast-Q's one Q
# and its scales), the mask, the heads (K/V scales per KV head), the head dims (how many blocks), the offsets' start
# and the layout (scales are read by row, head and block, beside strided data), the values, the edges, the tiles and
# the batch.
_SCALING_PEERS = ("mode", "mask", "heads", "head_dim", "value_dim", "offsets_start", "layout", "values", "edges",
                  "tiles", "batch")

# A selection's blocks against the tiles (the selection_blocks dimension) meet what maps tiles to blocks: the pattern,
# the lengths and tiles (a partial block, a block of several tiles), the mask and window (the visible range cut at
# block edges), the mode and the batch.
_SELECTION_BLOCKS_PEERS = ("sparsity", "mode", "mask", "relation", "window", "edges", "tiles", "batch", "waves")

_DENSE = ("sparsity", "dense")
_NO_BLOCKS = ("selection_blocks", "none")
_UNSCALED = ("scaling", "none")
# The optional dimensions: present only for a kernel whose capabilities take them (the test on its Capabilities).
_OPTIONAL = {"sparsity": lambda caps: bool(caps.block_sparse), "selection_blocks": lambda caps: bool(caps.block_sparse),
             "scaling": lambda caps: caps.mxfp8 is not None}


def _has(name: str, caps) -> bool:
    """Dimension ``name`` is part of the model for a kernel of capabilities ``caps``."""
    return name not in _OPTIONAL or _OPTIONAL[name](caps)


def _pair(a: tuple, b: tuple) -> Pair:
    return (a, b) if _ORDER[a[0]] < _ORDER[b[0]] else (b, a)


def _moot(p: Pair) -> bool:
    (d1, c1), (d2, c2) = p
    if ("offsets_layout", "strided") in p:
        other = d2 if d1 == "offsets_layout" else d1
        return other not in _OFFSETS_PEERS
    if "selection_blocks" in (d1, d2):
        other = d2 if d1 == "selection_blocks" else d1
        return other not in _SELECTION_BLOCKS_PEERS
    if "sparsity" in (d1, d2):
        other = d2 if d1 == "sparsity" else d1
        return other not in _SPARSITY_PEERS
    if "scaling" in (d1, d2):
        other = d2 if d1 == "scaling" else d1
        return other not in _SCALING_PEERS
    return False


# What a batch with no computed score (no sequence with both queries and keys) still exercises:
# launching, empty tiles (of the kernel's tile shape), writing O = 0 and LSE = -inf. Its values, scale,
# heads and head dims decide nothing, so it counts for no pair of theirs. (Its block selection, empty, is still
# one the kernel must take.)
_WITHOUT_SCORES = {"mode", "mask", "relation", "window", "edges", "tiles", "tile_shape", "batch", "waves", "dtype",
                   "offsets_dtype", "offsets_start", "offsets_layout", "layout", "variant", "sparsity",
                   "selection_blocks", "scaling"}


def computes_scores(case: Case) -> bool:
    """Some sequence of ``case`` has both query rows and keys (so a score is computed)."""
    return any(a > 0 and b > 0 for a, b in zip(case.query_lengths, case.kv_lengths))


def exercised(case: Case, target: Target) -> dict:
    """``classify(case, target)`` less the dimensions a case without any computed score does not exercise."""
    classes = classify(case, target)
    if computes_scores(case):
        return classes
    return {d: cs for d, cs in classes.items() if d in _WITHOUT_SCORES}


def pairs_of(classes: dict) -> set:
    """Every pair of one case's classes (:func:`exercised` output), moot pairs left out, and none of the
    ``dense`` sparsity class nor the ``none`` selection_blocks class (no block selection: the other dimensions' pairs
    are the dense model's own), nor of the ``none`` scaling class (no block scales) alike."""
    items = [(d, c) for d in classes for c in sorted(classes[d]) if (d, c) not in (_DENSE, _NO_BLOCKS, _UNSCALED)]
    out = set()
    for a, b in combinations(items, 2):
        if a[0] != b[0]:
            p = _pair(a, b)
            if not _moot(p):
                out.add(p)
    return out


@dataclass
class Universe:
    """The pairs of a :class:`Target`: ``supported`` (feasible inside the capabilities), ``infeasible``
    (no valid case), ``unsupported`` (``{class: reason}`` for classes outside the kernel), ``not_on_device``
    (``{class: reason}`` for classes inside the kernel that it never runs on the target's device: tile shapes,
    which the interpreter and a GPU pick differently)."""

    target: Target
    classes: dict  # dim -> supported classes, in the dimension's order
    supported: set
    infeasible: set
    unsupported: dict = field(default_factory=dict)
    not_on_device: dict = field(default_factory=dict)

    def describe(self) -> str:
        outside = ", ".join(f"{d}={c}" for d, c in sorted(self.unsupported)) or "none"
        elsewhere = ", ".join(f"{d}={c}" for d, c in sorted(self.not_on_device)) or "none"
        return (f"{len(self.supported)} pairs of classes the kernel supports, {len(self.infeasible)} infeasible "
                f"by the contract; classes outside the kernel: {outside}; not run on "
                f"{self.target.device_type}: {elsewhere}")


def _feasible(pair: Pair, target: Target) -> bool:
    """Some valid case inside the kernel exercises both classes of ``pair``."""
    case = build_case(dict(pair), target)
    return case is not None and pair in pairs_of(exercised(case, target))


_UNIVERSES: dict = {}


def universe(target: Target) -> Universe:
    """Classify every pair of classes for ``target`` (a few seconds, once per process and target key, and kept on
    disk between processes beside the covering arrays: :data:`_COVERING`)."""
    if target.key not in _UNIVERSES:
        stored = _COVERING.get("universe:" + _covering_key(target), lambda: _universe_stored(_universe(target)),
                               valid=_universe_intact)
        _COVERING.save()  # (now: a campaign worker ends without running exit handlers)
        _UNIVERSES[target.key] = _universe_read(stored, target)
    return _UNIVERSES[target.key]


def _universe_stored(uni: Universe) -> dict:
    body = {"classes": uni.classes, "supported": sorted(_flat(p) for p in uni.supported),
            "infeasible": sorted(_flat(p) for p in uni.infeasible),
            "unsupported": sorted([d, c, why] for (d, c), why in uni.unsupported.items()),
            "not_on_device": sorted([d, c, why] for (d, c), why in uni.not_on_device.items())}
    return {**body, "sha256": _digest(body)}


def _flat(pair: Pair) -> list:
    (d1, c1), (d2, c2) = pair
    return [d1, c1, d2, c2]


def _universe_intact(stored) -> bool:
    """Whether ``stored`` is a universe as :func:`_universe_stored` wrote it (its digest matches its body, every pair
    is four strings, every class list strings): else it is classified again."""
    try:
        body = {k: v for k, v in stored.items() if k != "sha256"}
        if _digest(body) != stored["sha256"] or set(body) != {"classes", "supported", "infeasible", "unsupported",
                                                               "not_on_device"}:
            return False
        rows = body["supported"] + body["infeasible"] + body["unsupported"] + body["not_on_device"]
        classes = [c for cs in body["classes"].values() for c in cs]
    except Exception:  # (not a dict, a missing key, an unhashable part)
        return False
    return (all(isinstance(r, list) and len(r) in (3, 4) and all(isinstance(x, str) for x in r) for r in rows)
            and all(isinstance(c, str) for c in classes))


def _universe_read(stored: dict, target: Target) -> Universe:
    def pairs(rows):
        return {((d1, c1), (d2, c2)) for d1, c1, d2, c2 in rows}

    return Universe(target, {d: list(cs) for d, cs in stored["classes"].items()}, pairs(stored["supported"]),
                    pairs(stored["infeasible"]), {(d, c): why for d, c, why in stored["unsupported"]},
                    {(d, c): why for d, c, why in stored["not_on_device"]})


def _universe(target: Target) -> Universe:
    caps = target.capabilities
    classes, unsupported, not_on_device = {}, {}, {}
    # A kernel without block selections has no pair of the sparsity dimension, nor a class of it outside its
    # capabilities: its pairs, rows and reports are what they were before the dimension existed.
    # The same for a kernel without MXFP8 and the scaling dimension.
    dims = [d for d in DIMENSIONS if _has(d.name, caps)]
    for d in dims:
        ok = []
        for c in d.classes:
            reason = d.support(c, caps)
            if reason is None and d.name in ("head_dim", "value_dim"):
                if head_dims_for(c if d.name == "head_dim" else None, c if d.name == "value_dim" else None,
                                 caps) is None:
                    reason = "no head dim of this class inside the kernel's head dims"
            if reason is None and d.name == "tile_shape" and not any(
                    head_dims_for(None, None, caps, lambda hd, hv: tile_shape(target.tiles(hd, hv, dt)) == c)
                    for dt in classes["dtype"]):
                not_on_device[(d.name, c)] = (f"the kernel runs no {c} tiles on {target.device_type} for any head dim "
                                              "and dtype tried")
                continue
            if reason is None:
                ok.append(c)
            else:
                unsupported[(d.name, c)] = reason
        classes[d.name] = ok
    classes.setdefault("sparsity", ["dense"])
    classes.setdefault("selection_blocks", ["none"])
    classes.setdefault("scaling", ["none"])
    supported, infeasible = set(), set()
    for d1, d2 in combinations(dims, 2):
        for c1 in classes[d1.name]:
            for c2 in classes[d2.name]:
                p = ((d1.name, c1), (d2.name, c2))
                if _moot(p) or _DENSE in p or _NO_BLOCKS in p or _UNSCALED in p:
                    continue
                (supported if _feasible(p, target) else infeasible).add(p)
    return Universe(target, classes, supported, infeasible, unsupported, not_on_device)


# ----------------------------------------------------------------------------- the covering array


def _row_filter(names: list, target: Target, uni: Universe, max_cost: float):
    length_dims = set(LENGTH_DIMENSIONS)

    def ok(values: list) -> bool:
        assign = dict(zip(names, values))
        new = (names[len(values) - 1], values[-1])
        for d, c in assign.items():
            if d != new[0] and _pair((d, c), new) in uni.infeasible:
                return False
        if new[0] in length_dims or new[0] == "heads":
            want = tuple((n, assign[n]) for n in LENGTH_DIMENSIONS if n in assign)
            if len(want) > 2:
                cost = _length_cost(want, target)
                if cost is None or cost * HEADS[assign.get("heads", "mha")][0] > max_cost:
                    return False
        return True

    return ok


def _length_cost(want: tuple, target: Target) -> Optional[int]:
    # tiles do not depend on the lengths; a small head dim's tiles stand in for the search
    bm, bn = target.tiles(32, 32)
    found = lengths_for(want, bm, bn, target.num_sms, 0)
    return None if found is None else length_cost(found[1], found[2], bm, bn)


# Dimensions the greedy generator does not take: their pairs are few (strided offsets), or its rows would cover
# every pair of their classes with every class of the others, moot ones included (a selection's blocks against the
# tiles: 58 more rows); the rows grown around missing pairs cover them.
_LEFT_TO_GREEDY_ROWS = ("offsets_layout", "selection_blocks")

ROW_PREFIX = "pairs/"  # the name of every covering-array row starts so


def _row_name(i: int, case: Case) -> str:
    mask = f"-causal-{case.causal_alignment}" if case.causal else ""
    return f"{ROW_PREFIX}{i:02d}/{case.mode}{mask}/{case.dtype}"


def covering_array(target: Target, *, seed: int = 0, max_cost: Optional[float] = None) -> list[Case]:
    """Cases that together exercise every supported pair of :func:`universe` ``(target)``.

    The rows come from ``allpairspy.AllPairs`` (a greedy pairwise generator) over every dimension
    but the offsets layout, filtered by pair feasibility, by a joint search of the length
    dimensions and by a cost cap (``max_cost`` in :func:`~jfa_verify.cases.construct.case_cost` units;
    default 250 on the CPU interpreter, about 5 s a case; 20,000 on a GPU), so that a pair is never
    covered by an expensive row when a cheap one covers it too; the pairs it leaves (its filter ends
    it early) get rows grown greedily around them, the best of a few each time (as in AETG: Cohen et
    al., "The AETG System", IEEE TSE 23(7), 1997); a row is added for each combination of
    :func:`visibility_combinations` no row is in; strided offsets get rows of their own (mode,
    offsets dtype and start). The result is ordered cheap and dense first. Deterministic for a
    ``target`` and ``seed``, and kept on disk between processes (:data:`_COVERING`: building one is seconds of
    every ``run``, ``gate`` and ``fuzz --covering``).
    """
    if max_cost is None:
        max_cost = 20000 if target.device_type == "cuda" else 250

    def build() -> dict:
        return _stored(_search_covering_array(target, seed, max_cost))

    stored = _COVERING.get(_covering_key(target, seed, max_cost, _allpairspy_version()), build, valid=_intact)
    _COVERING.save()  # (now: a campaign worker ends without running exit handlers)
    return _read_stored(stored)


def _search_covering_array(target: Target, seed: int, max_cost: float) -> list[Case]:
    from allpairspy import AllPairs

    uni = universe(target)
    # length dimensions first (their joint search prunes early), then the heads (they scale the cost)
    names = [n for n in LENGTH_DIMENSIONS] + ["heads"]
    names += [d.name for d in DIMENSIONS if d.name not in names and d.name not in _LEFT_TO_GREEDY_ROWS
              and _has(d.name, target.capabilities)]
    params = OrderedDict((n, list(uni.classes[n])) for n in names)
    if not all(params.values()):  # the kernel takes no class of a dimension (say head dims 1024 only): no row can
        return []  # be built (allpairspy raised ValueError, and `run` died with its traceback)
    cases: list[Case] = []
    covered: set = set()

    def add(assign: dict) -> None:
        gains = [(g, c) for c in _built((assign,), target, seed + len(cases))
                 if (g := pairs_of(exercised(c, target)) - covered)]
        if gains:
            gained, case = _most_within_cost(gains, target, max_cost)
            covered.update(gained)
            cases.append(_named(case, len(cases)))

    for row in AllPairs(params, filter_func=_row_filter(names, target, uni, max_cost)):
        add(dict(zip(names, row)))
    # What the greedy generator left (its filter ends it early): each time, rows grown greedily around a few
    # missing pairs spread over what is missing, the one that covers most of it kept, until every pair is
    # covered or no case covers it.
    unbuildable: set = set()
    while missing := sorted(uni.supported - covered - unbuildable):
        candidates = []
        for p in missing[::max(1, len(missing) // _FALLBACK_SEEDS)][:_FALLBACK_SEEDS]:
            found = [(g, c) for c in _built((_greedy_row(dict(p), names, uni, set(missing)), dict(p)), target,
                                            seed + len(cases))
                     if p in (g := pairs_of(exercised(c, target)) - covered)]
            candidates += found
            if not found:
                unbuildable.add(p)
        if candidates:
            gained, case = _most_within_cost(candidates, target, max_cost)
            covered.update(gained)
            cases.append(_named(case, len(cases)))
    # Every combination the visibility rule takes as one (its loop bounds read all three at once)
    for combo in visibility_combinations(target):
        if not any(all(c in classify(case, target)[d] for d, c in combo) for case in cases):
            case = next(iter(_built((dict(combo),), target, seed + len(cases))), None)
            if case is not None:
                covered.update(pairs_of(exercised(case, target)))
                cases.append(_named(case, len(cases)))
    if "strided" in uni.classes["offsets_layout"]:
        strided = [p for p in uni.supported if ("offsets_layout", "strided") in p]
        for p in sorted(strided):
            if p not in covered:
                add({**dict(p), "offsets_layout": "strided"})
    save_lengths_cache()  # (now, not only at exit: a campaign worker ends without running exit handlers)
    return _cheap_first(cases, target)


# Whole covering arrays by target, seed and cost cap. Their code is the case model's and the kernel protocol's (the
# file is named by a digest of both); what the kernel adds is its capabilities and its tile sizes, both in the key.
def _covering_version() -> str:
    root = Path(__file__).resolve().parents[1]
    return sources_digest([root / p for p in ("cases", "core", "protocol", "scheduling")], recursive=False)


_COVERING = SearchCache("covering", version=_covering_version, keep=32)  # (each fuzz --covering seed adds ~80 kB)


def _covering_key(target: Target, *more) -> str:
    """What a covering array (or a :func:`universe`) depends on beyond the code: the kernel's name and capabilities,
    the device and its SMs, the tiles the kernel runs for every head-dim pair a case may have (its ``tile_sizes`` is
    the kernel's own code), ``more`` (a covering array's seed, cost cap and :func:`_allpairspy_version`) and numpy's
    version; hashed. (The universe draws no rows: its key must not import allpairspy, which a campaign without
    ``--covering`` does not need: the GPU tests stage's gate without it, 2026-12-06.)"""
    import numpy

    caps = target.capabilities
    dims = [d for d in CANDIDATE_HEAD_DIMS if caps.supports_head_dim(d)]
    tiles = [(dtype, d, dv, target.tiles(d, dv, dtype)) for dtype in (None, *(dtype_name(t) for t in caps.dtypes))
             for d in dims for dv in dims]
    parts = (target.key, tiles, *more, numpy.__version__)
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _allpairspy_version() -> Optional[str]:
    """The version of the library that draws a covering array's rows (part of its cache key)."""
    import allpairspy

    return getattr(allpairspy, "__version__", None)


def _stored(cases: list[Case]) -> dict:
    rows = [c.to_dict() for c in cases]
    return {"cases": rows, "sha256": _digest(rows)}


def _digest(rows: list) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def _intact(stored) -> bool:
    """Whether ``stored`` is a covering array as :func:`_stored` wrote it: its digest matches its rows, each row is
    a valid case named as rows are, each index once (a damaged file is searched again, never run; the digest is no
    signature: the folder is trusted, as Triton's cache is)."""
    try:
        rows = stored["cases"]
        if _digest(rows) != stored["sha256"]:
            return False
        cases = [Case.from_dict(r) for r in rows]
    except Exception:  # (anything a damaged file holds: not a dict, missing keys, fields the contract refuses)
        return False
    try:  # every row named as the search names it, each index from 0 up once (a lost or repeated row shows)
        indices = [int(c.name[len(ROW_PREFIX):].split("/")[0]) for c in cases]
    except (TypeError, ValueError):  # (a row with no name, or not a row's name)
        return False
    return (sorted(indices) == list(range(len(cases)))
            and all(c.name == _row_name(i, c) for i, c in zip(indices, cases)))


def _read_stored(stored: dict) -> list[Case]:
    return [Case.from_dict(r) for r in stored["cases"]]


# The dimensions the contract's visibility rule (jfa_verify.core.contract.key_range) combines: the mask with its
# alignment, the window's shape and the query/key length relation. Kernels derive their loop bounds from all
# three together, so their bugs need all three: the covering array holds every feasible combination.
VISIBILITY_DIMENSIONS = ("mask", "window", "relation")


def visibility_combinations(target: Target) -> list[tuple]:
    """Every ``((dim, class), ...)`` over :data:`VISIBILITY_DIMENSIONS` that some case inside ``target``'s kernel
    has (the classes of each inside its capabilities; a combination is kept when the case built for it is in
    all three classes). Computed once per target key."""
    if target.key not in _COMBINATIONS:
        uni = universe(target)
        out = []
        for combo in product(*([(d, c) for c in uni.classes[d]] for d in VISIBILITY_DIMENSIONS)):
            case = build_case(dict(combo), target)
            if case is not None and all(c in classify(case, target)[d] for d, c in combo):
                out.append(combo)
        _COMBINATIONS[target.key] = out
    return _COMBINATIONS[target.key]


_COMBINATIONS: dict = {}
_FALLBACK_SEEDS = 12  # missing pairs a row is grown around, per row added after the greedy generator


def _built(assigns, target: Target, seed: int) -> list[Case]:
    """The cases :func:`build_case` gives for each of ``assigns``, at ``seed`` and at 0 (a length search that
    fails at one seed may not at another)."""
    return [c for a in assigns for s in (seed, 0) if (c := build_case(a, target, seed=s)) is not None]


def _most_within_cost(gains: list, target: Target, max_cost: float) -> tuple:
    """Of ``(pairs gained, case)`` options: the most pairs among the cases within the cost cap, else the
    cheapest case."""
    fits = [(g, c) for g, c in gains if case_cost(c, target) <= max_cost]
    if fits:
        return max(fits, key=lambda gc: len(gc[0]))
    return min(gains, key=lambda gc: case_cost(gc[1], target))


def _cheap_first(cases: list[Case], target: Target) -> list[Case]:
    """``cases`` reordered greedily by new pairs per unit of work (so a run that stops at its first
    failure, as a CI gate does, exercises the most pairs soonest), renamed in that order. Cases that
    compute some score come first: a batch with none (B = 0, or every sequence empty on one side) is
    nearly free and covers many pairs, but a run cut short (``--max-cases``) should do real work. Dense cases come
    before block-sparse ones: a block selection runs the kernel's sparse path, which shares little code with the
    dense one, so a bug of the dense path (most of a kernel) is met sooner (with the sparse rows first, as their
    many new pairs put them, the regression gate's mutants ran 2.8x longer before their first failure)."""
    left, out, seen = list(cases), [], set()
    pairs = [pairs_of(exercised(c, target)) for c in cases]  # (computed once: the loop is quadratic)
    costs = [case_cost(c, target) for c in cases]
    index = {id(c): i for i, c in enumerate(cases)}
    while left:
        best = max(left, key=lambda c: (computes_scores(c), c.block_sparsity is None,
                                        len(pairs[index[id(c)]] - seen) / (1 + costs[index[id(c)]]), -left.index(c)))
        left.remove(best)
        seen |= pairs[index[id(best)]]
        out.append(_named(best, len(out)))
    return out


def _greedy_row(assign: dict, names: list, uni: Universe, missing: set) -> dict:
    """``assign`` completed dimension by dimension with the class that meets the most ``missing`` pairs
    and no infeasible one."""
    row = dict(assign)
    for n in names:
        if n in row:
            continue
        best, score = None, -1
        for c in uni.classes[n]:
            ps = {_pair((d, x), (n, c)) for d, x in row.items()}
            if ps & uni.infeasible:
                continue
            if len(ps & missing) > score:
                best, score = c, len(ps & missing)
        if best is not None:
            row[n] = best
    return row


def _named(case: Case, i: int) -> Case:
    import dataclasses

    return dataclasses.replace(case, name=_row_name(i, case))


# ----------------------------------------------------------------------------- coverage of a run


class PairCoverage:
    """The classes and pairs of classes that a run's cases exercised, against :func:`universe`.

    Args:
        target: the kernel and device the cases ran on.
    """

    def __init__(self, target: Target):
        self.target = target
        self.universe = universe(target)
        # the classes reported: the sparsity dimension only for a kernel with block selections (a dense kernel's
        # report is what it was before that dimension existed)
        self.classes = {d: cs for d, cs in self.universe.classes.items()
                        if _has(d, target.capabilities)}
        self.class_counts: dict = {}
        self.pairs: set = set()
        self.total = 0
        self.without_scores = 0  # cases that compute no score: they count in _WITHOUT_SCORES's dimensions only

    def add(self, case: Case) -> dict:
        """Count ``case``; returns its classes per dimension."""
        classes = exercised(case, self.target)
        for d, cs in classes.items():
            for c in (cs if d in self.classes else ()):
                self.class_counts[(d, c)] = self.class_counts.get((d, c), 0) + 1
        self.pairs |= pairs_of(classes)
        self.total += 1
        self.without_scores += not computes_scores(case)
        return classes

    def update(self, cases: Iterable[Case]) -> "PairCoverage":
        for c in cases:
            self.add(c)
        return self

    def novelty(self, case: Case) -> int:
        """How many supported pairs ``case`` would add (0 when it adds none)."""
        return len((pairs_of(exercised(case, self.target)) & self.universe.supported) - self.pairs)

    @property
    def missing_pairs(self) -> list:
        return sorted(self.universe.supported - self.pairs)

    @property
    def missing_classes(self) -> list:
        return [(d, c) for d, cs in self.classes.items() for c in cs if not self.class_counts.get((d, c))]

    def summary(self) -> str:
        """One line: classes and pairs covered out of those the kernel supports."""
        n_classes = sum(len(cs) for cs in self.classes.values())
        got = len(self.universe.supported & self.pairs)
        return (f"contract coverage over {self.total} case(s): classes {n_classes - len(self.missing_classes)}/"
                f"{n_classes}, pairs of classes {got}/{len(self.universe.supported)} "
                f"({100 * got / max(1, len(self.universe.supported)):.1f}%) of those the kernel supports "
                f"({len(self.universe.infeasible)} infeasible by the contract)")

    def format(self, limit: int = 20) -> str:
        """The summary, the classes never exercised, and up to ``limit`` missing pairs."""
        lines = [self.summary()]
        per_dim = []
        for d in (d for d in DIMENSIONS if d.name in self.classes):
            seen = [f"{c} {self.class_counts.get((d.name, c), 0)}" for c in self.classes[d.name]]
            per_dim.append(f"  {d.name:15s} " + ", ".join(seen))
        lines.extend(per_dim)
        # why a dimension's counts need not add up to the number of cases
        unexercised = [d for d in self.classes if d not in _WITHOUT_SCORES]
        lines.append("  (a case counts once in each class of a dimension it exercises, so edges and tiles can count "
                     "one case several times" + (f"; {self.without_scores} case(s) computing no score count in no "
                                                 f"class of {', '.join(unexercised)}" if self.without_scores else "")
                     + ")")
        gone = self.missing_classes
        lines.append("  classes never exercised: " + (", ".join(f"{d}={c}" for d, c in gone) if gone else "none"))
        miss = self.missing_pairs
        shown = ", ".join(f"{a[0]}={a[1]} x {b[0]}={b[1]}" for a, b in miss[:limit])
        more = f" (+{len(miss) - limit} more)" if len(miss) > limit else ""
        lines.append(f"  pairs never exercised: {shown + more if miss else 'none'}")
        outside, elsewhere = sorted(self.universe.unsupported), sorted(self.universe.not_on_device)
        if outside:
            lines.append("  outside the kernel: " + ", ".join(f"{d}={c}" for d, c in outside))
        if elsewhere:
            lines.append(f"  not run on {self.universe.target.device_type} (the kernel's tiles there are other "
                         "shapes for every head dim and dtype tried): " + ", ".join(f"{d}={c}" for d, c in elsewhere))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "cases": self.total,
            "cases_without_scores": self.without_scores,
            "classes": {f"{d}={c}": n for (d, c), n in sorted(self.class_counts.items())},
            "pairs_supported": len(self.universe.supported),
            "pairs_covered": len(self.universe.supported & self.pairs),
            "pairs_infeasible": len(self.universe.infeasible),
            "missing_pairs": [f"{a[0]}={a[1]} x {b[0]}={b[1]}" for a, b in self.missing_pairs],
            "outside_kernel": {f"{d}={c}": r for (d, c), r in sorted(self.universe.unsupported.items())},
            "not_run_on_device": {f"{d}={c}": r for (d, c), r in sorted(self.universe.not_on_device.items())},
        }
