"""Built-in suites of cases for ``jfa-verify run``.

The default suite is, first, a covering array of the contract's dimensions
(:func:`jfa_verify.cases.pairs.covering_array`: every pair of classes the kernel
supports, at small sizes, ordered so that each case adds the most new pairs per
unit of work), then real jagged lengths (MovieLens user histories), the
layouts [128, 4096, 512, 2048] and [7, 3, 19, 5, 11] and lengths at the kernel's
own tiles, over self-, cross- and broadcast-Q attention, causal (both
alignments) and not, and bf16/fp16/fp32; then relation checks no single case
makes (:mod:`jfa_verify.checks.relations`). On the CPU interpreter the real lengths are
scaled down (the run says by how much).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Optional

from jfa_verify.cases.case import Case
from jfa_verify.cases.construct import CANDIDATE_HEAD_DIMS, OFFSETS_START, Q_OFFSETS_START
from jfa_verify.cases.dimensions import Target, padded_width
from jfa_verify.cases.pairs import covering_array
from jfa_verify.cases.scaling import Scaling
from jfa_verify.checks.relations import Relation
from jfa_verify.core.dtypes import DIFFERENTIABLE, dtype_name
from jfa_verify.core.lengths import sample_movielens_batch
from jfa_verify.protocol.kernel import tiles_for_shape

__all__ = ["Suite", "default_suite", "jagged_grid_suite", "SUITES", "get_suite", "relation_checks", "suite_inputs"]

DTYPES = DIFFERENTIABLE


@dataclass(frozen=True)
class Suite:
    """A named list of cases and a note on how it was sized."""

    name: str
    cases: tuple[Case, ...]
    note: str
    relations: tuple[Relation, ...] = ()
    makes_relations: bool = False  # the suite has relation checks, those outside a kernel's capabilities left out

    def matching(self, text: Optional[str]) -> list[Case]:
        """The cases whose name holds ``text`` (``--filter``: part of a name, e.g. ``pairs/07/`` or ``bfloat16``);
        every case when ``text`` is None or empty. The one rule for every command that takes ``--filter``."""
        return [c for c in self.cases if not text or text in c.name]

    def note_for(self, picked) -> str:
        """:attr:`note` for a run of ``picked``, some of :attr:`cases`: the note tells of the whole suite, so a run
        of part of it says how much of the covering array it holds (a new user's filtered matrix printed "63
        covering-array cases ... run first" above 6 cases, none of them rows)."""
        from jfa_verify.cases.pairs import ROW_PREFIX

        picked = list(picked)
        if len(picked) == len(self.cases):
            return self.note
        rows = sum(c.name.startswith(ROW_PREFIX) for c in picked)
        return (f"{self.note} (in the whole suite; {rows} of the {len(picked)} case(s) picked here are covering-array "
                f"rows)")


def _scaled(lengths: tuple[int, ...], scale: float) -> tuple[int, ...]:
    return tuple(max(1, round(n * scale)) if n else 0 for n in lengths)


def _cross_q_lengths(kv: tuple[int, ...]) -> tuple[int, ...]:
    # Query lengths that differ from the key lengths in both directions.
    return tuple(max(1, (n * 3) // 4) if i % 2 else n + 5 for i, n in enumerate(kv))


def _layout_dtypes(kernel) -> tuple[tuple[str, ...], Optional[Scaling]]:
    """The dtypes the fixed layouts run in, and the block scaling of their cases: bfloat16, float16 and float32;
    for a kernel that takes none of them (a forward-only float8 kernel) its own dtypes instead, with random E8M0
    block scales when it takes MXFP8 calls, so that its production layouts (MovieLens, tile edges, the empty and
    one-token sequences) are not all unsupported (a new user's trial: 31 of 31 were, for ``triton_jfa_mxfp8``)."""
    if kernel is None:
        return DTYPES, None
    caps = kernel.capabilities
    own = tuple(dtype_name(d) for d in caps.dtypes)
    if not own or set(own) & set(DTYPES):
        return DTYPES, None
    return own, (Scaling("random") if caps.mxfp8 else None)


def _layout_head_dim(kernel, preferred: int) -> int:
    """``preferred`` (the fixed layouts' head dim), or the head dim up to 256 nearest it that ``kernel`` declares when
    it does not take ``preferred`` (the smaller of two as near): a fork declaring ``head_dims=(64, 128)`` had every
    fixed layout unsupported on the CPU, where they run at D=32 (a new user's trial)."""
    caps = getattr(kernel, "capabilities", None)
    if caps is None or caps.supports_head_dim(preferred):
        return preferred
    candidates = caps.head_dims or range(caps.min_head_dim, caps.max_head_dim + 1)
    # (up to the widest head dim the contract model draws, 256: a kernel of D=1024 alone gets no fixed layout)
    supported = [d for d in candidates if d <= max(CANDIDATE_HEAD_DIMS) and caps.supports_head_dim(d)]
    return min(supported, key=lambda d: (abs(d - preferred), d)) if supported else preferred


def default_suite(device_type: str, seed: int = 0, kernel=None) -> Suite:
    """The main job's suite for ``device_type`` (``"cuda"`` or ``"cpu"``).

    On CUDA: full-size lengths, H_q=8, H_kv=2, D=128. On CPU (Triton
    interpreter): lengths scaled by 1/16 (MovieLens by 1/8, batch of 6), H_q=4,
    H_kv=2, D=32, so the suite runs in minutes (D: the nearest head dim the kernel takes, where it does not take
    that one), plus four production shapes at a CPU's cost: D=64 and D=128 on short sequences, and 1,100 keys
    against 5 queries (then 1,100 queries against 3 keys) in cross-attention. ``kernel`` (a registered kernel)
    places one layout's lengths at its own tile boundaries +-1 (generic tiles
    for a kernel that declares none).
    """
    gpu = device_type == "cuda"
    scale = 1.0 if gpu else 1 / 16
    ml_scale = 1.0 if gpu else 1 / 8
    ml_batch = 16 if gpu else 6
    heads = (dict(num_heads_q=8, num_heads_kv=2, head_dim=_layout_head_dim(kernel, 128)) if gpu else
             dict(num_heads_q=4, num_heads_kv=2, head_dim=_layout_head_dim(kernel, 32)))
    layouts = {
        "movielens-a": sample_movielens_batch(ml_batch, seed + 1, scale=ml_scale),
        "movielens-b": sample_movielens_batch(ml_batch, seed + 2, scale=ml_scale),
        "layout-128-4096-512-2048": _scaled((128, 4096, 512, 2048), scale),
        "layout-7-3-19-5-11": (7, 3, 19, 5, 11),
    }
    bm, bn = tiles_for_shape(kernel, heads["head_dim"], None, None, device_type).as_tuple()
    # An empty sequence first, then lengths at the first two tile boundaries of each block size +-1 (2 * bn - 1 was
    # missing: a new user's trial, 2026-12-07, against the README's "tile boundaries +-1").
    layouts["tile-edges"] = (0,) + tuple(sorted({1, *(k * b + d for b in (bm, bn) for k in (1, 2) for d in (-1, 1))}
                                                - {0}))
    variants = [
        dict(mode="self", causal=False),
        dict(mode="self", causal=True),
        dict(mode="cross", causal=True, causal_alignment="bottom_right"),
        dict(mode="broadcast_q", causal=False),
    ]
    dtypes, scaling = _layout_dtypes(kernel)
    cases = []
    n = 0
    for lname, kv in layouts.items():
        for dtype in dtypes:
            for variant in variants:
                # Each layout x dtype gets two of the four variants, rotating, so every
                # variant meets every dtype and every layout across the suite (one dtype: all four).
                if len(dtypes) > 1 and (variants.index(variant) + dtypes.index(dtype) + list(layouts).index(lname)) % 2:
                    continue
                extra = {} if scaling is None else {"block_scaling": scaling}
                if variant["mode"] == "cross":
                    extra["q_lengths"] = _cross_q_lengths(kv)
                if variant["mode"] == "broadcast_q":
                    extra["broadcast_q_len"] = 64 if gpu else 24
                label = f"{lname}/{variant['mode']}{'-causal' if variant['causal'] else ''}/{dtype}"
                cases.append(Case(kv_lengths=kv, dtype=dtype, seed=seed * 1000 + n, name=label,
                                  **heads, **variant, **extra))
                n += 1
    # Odd shapes the rotation does not reach: a non-power-of-two head dim and MQA.
    # (MXFP8: a head dim of whole 32-element scale blocks, 96, the odd one its kernels take)
    odd_d = 96 if gpu or scaling is not None else 40
    cases.append(replace(cases[0], head_dim=odd_d, num_heads_kv=1, name=cases[0].name + "/mqa-odd-d",
                         seed=seed * 1000 + n))
    # The aligned diagonal at offsets near the tiles' sizes: cross-attention, causal bottom-right, every sequence
    # three query tiles long (L_q = 2 * BLOCK_M + 1) against L_k = L_q +- s for s of 1, 2 and the tile sizes +-1, so
    # the diagonal enters KV tiles at rows next to a query tile's ends in some sequence (a tile's causal row range
    # off by one, in the forward or the backward, shows in one sequence; a blind planted bug, 2026-12-06, showed
    # only at L_k - L_q = 1 mod BLOCK_N)
    l_q = 2 * bm + 1
    offsets = sorted({1, 2, bn - 1, bn + 1, bm - 1, bm + 1} - {0})
    diagonal_k = tuple(l_q + s for s in offsets) + tuple(l_q - s for s in offsets if l_q - s > 0)
    n += 1
    cases.append(Case(kv_lengths=diagonal_k, q_lengths=(l_q,) * len(diagonal_k), mode="cross", causal=True,
                      causal_alignment="bottom_right", dtype=dtypes[0], seed=seed * 1000 + n,
                      name=f"diagonal-offsets/cross-causal/{dtypes[0]}", **heads,
                      **({} if scaling is None else {"block_scaling": scaling})))
    # One input alone misaligned, k then v (an odd head stride, the others contiguous): an alignment fast path whose
    # check leaves one tensor out reads it with rounded strides (a blind planted bug, 2026-12-06); then the token
    # stride alone (its check left out: blind planted bug, 2026-12-07)
    for layout in ("misaligned_k", "misaligned_v", "token_padded"):
        n += 1
        cases.append(Case(kv_lengths=layouts["tile-edges"], dtype=dtypes[0], seed=seed * 1000 + n, layout=layout,
                          name=f"{layout}/self/{dtypes[0]}", **heads,
                          **({} if scaling is None else {"block_scaling": scaling})))
    # Two offsets starts with the keys' later (the covering array's distinct-starts rows start the queries later):
    # the rows before each start are left to different outputs, O and dQ against dK and dV (a blind planted bug,
    # dK/dV cleared up to q_offsets[0], survived the whole suite: 2026-12-07)
    n += 1
    cases.append(Case(kv_lengths=layouts["tile-edges"], q_lengths=_cross_q_lengths(layouts["tile-edges"]),
                      mode="cross", causal=True, offsets_start=Q_OFFSETS_START, q_offsets_start=OFFSETS_START,
                      dtype=dtypes[0], seed=seed * 1000 + n, name=f"keys-later/cross-causal/{dtypes[0]}", **heads,
                      **({} if scaling is None else {"block_scaling": scaling})))
    if not gpu:
        # Production shapes the CPU's scaling leaves out, at a CPU's cost: the head dims kernels specialize on (64,
        # 128) and more than a thousand keys (then queries) against a few of the other side (a new user's kernel
        # with a bug past 300 keys, another with one at D >= 64, passed this suite: 2026-12-07)
        extra = {} if scaling is None else {"block_scaling": scaling}
        for d, causal in ((64, True), (128, False)):
            if kernel is not None and not kernel.capabilities.supports_head_dim(d):
                continue
            n += 1
            # (named LAYOUT/MODE[-causal]/DTYPE as every other case: "production-d64/self" and "long-keys/cross" ran
            # causal, and `--filter cross-causal` left them out: helper-73's trial)
            mask = "-causal" if causal else ""
            cases.append(Case(kv_lengths=(37, 150, 5), num_heads_q=2, num_heads_kv=1, head_dim=d, causal=causal,
                              dtype=dtypes[0], seed=seed * 1000 + n, name=f"production-d{d}/self{mask}/{dtypes[0]}",
                              **extra))
        for side, kv, q in (("keys", (1100, 9), (5, 2)), ("queries", (3, 9), (1100, 2))):
            n += 1
            mask = "-causal" if side == "keys" else ""
            cases.append(Case(kv_lengths=kv, q_lengths=q, mode="cross", causal=side == "keys",
                              causal_alignment="bottom_right", num_heads_q=2, num_heads_kv=1,
                              head_dim=heads["head_dim"], dtype=dtypes[0], seed=seed * 1000 + n,
                              name=f"long-{side}/cross{mask}/{dtypes[0]}", **extra))
    target = Target(kernel, device_type)
    pairs = covering_array(target, seed=seed)
    note = ("full-size lengths on the GPU" if gpu else
            f"CPU interpreter: fixed layouts scaled by 1/16, MovieLens lengths by 1/8 (batch of 6), H=4/2, "
            f"D={heads['head_dim']}; production shapes: D=64 and D=128 on short sequences, 1,100 keys or queries "
            f"against a few")
    note += (f"; {len(pairs)} covering-array cases (every pair of contract classes, {target.num_sms} SMs) "
             f"run first")
    return Suite("default", tuple(pairs) + tuple(cases), note, relation_checks(target, seed), makes_relations=True)


def relation_checks(target: Target, seed: int = 0) -> tuple[Relation, ...]:
    """The default suite's relation checks: permutation and batch invariance on a cross-attention batch
    (causal bottom-right, GQA of 3, mixed strides, int64 offsets not at 0, an empty sequence) and on a
    broadcast-Q one, and a sequence of related calls (same shapes with other lengths, then the same
    maxima with other offsets) on one kernel object; a GPU target adds a batch of several times more
    tiles than SMs to each. A batch whose head grouping the kernel cannot run (GQA or MQA on an MHA-only
    kernel) takes the first grouping it supports (:func:`_supported_heads`), so that such a kernel gets relation
    checks too; the first batch, outside the kernel's capabilities otherwise (a self-attention-only kernel, one
    without a mask or layout of it), keeps what of it the kernel runs (:func:`_within_capabilities`): a kernel
    gets the permutation, batch-invariance and sequence checks whatever it supports (a self-only kernel with a
    stale plan cache passed the whole gate when it got none); the other batches are left out."""
    from jfa_verify.cases.construct import build_case

    base = dict(edges="empty_k", layout="mixed", offsets_dtype="int64", offsets_start="nonzero", dtype="float32")
    specs = [
        dict(base, mode="cross", mask="causal/bottom_right", relation="mixed", heads="gqa_non_pow2", batch="few"),
        dict(mode="broadcast_q", mask="causal/top_left", heads="mqa", value_dim="narrower_other_padding",
             dtype="bfloat16", batch="few", tiles="multi_tile"),
    ]
    if target.device_type == "cuda":
        specs.append(dict(mode="self", batch="over_sms", waves="several_waves", dtype="bfloat16", heads="gqa_pow2"))
    out = []
    for i, spec in enumerate(specs):
        drawn = []
        for s in range(seed + i, seed + i + RESEED_STEP * RESEEDS, RESEED_STEP):
            case = (build_case(spec, target, seed=s, name=f"relations/{i}/{spec['mode']}")
                    or build_case(_supported_heads(spec, target), target, seed=s))
            if case is None and i == 0:  # the first batch in what the kernel runs (a self-attention-only kernel)
                case = build_case(_within_capabilities(spec, target), target, seed=s)
            drawn.append(case)
            if case is None or _neighbours_attend(case):
                break
        else:  # (no draw had two attending neighbours: the first one)
            case = drawn[0]
        if case is None:  # nothing of it inside this kernel's capabilities
            continue
        case = replace(case, name=case.name or f"relations/{i}/{case.mode}")
        out += [Relation("permutation", case), Relation("batch_invariance", case)]
    first = next((r.case for r in out if r.case.mode != "broadcast_q"), None)
    if first is not None:
        out.append(Relation("sequence", first, tuple(related_calls(first, target.capabilities))))
    return tuple(out)


# Seeds tried for a relation batch whose neighbours attend (:func:`_neighbours_attend`): seed, seed + RESEED_STEP, ...
RESEEDS, RESEED_STEP = 64, 1000


def _neighbours_attend(case: Case) -> bool:
    """Whether two sequences of ``case`` next to each other both have queries and keys: a kernel that reads a
    neighbour's rows (or writes into them) changes what the batch-invariance and permutation checks compare only
    then. The relation batches' classes (an empty key sequence, mixed length relations, few sequences) drew
    batches like kv (15, 0, 0) with queries (2, 63, 0), whose one attending sequence has no neighbour to leak from:
    a kernel that read the next sequence's first key held every relation (a new user's trial)."""
    live = [bool(q and k) for q, k in zip(case.query_lengths, case.kv_lengths)]
    return any(a and b for a, b in zip(live, live[1:]))


def _supported_heads(spec: dict, target: Target) -> dict:
    """``spec`` (``{dimension: class}``) without its ``heads`` class when ``target``'s kernel cannot run it
    (:attr:`~jfa_verify.cases.dimensions.Dimension.support`: no GQA/MQA): :func:`~jfa_verify.cases.construct.build_case`
    then takes the first head grouping the kernel supports (MHA)."""
    from jfa_verify.cases.dimensions import dimension

    heads = spec.get("heads")
    if heads is None or dimension("heads").support(heads, target.capabilities) is None:
        return spec
    return {name: cls for name, cls in spec.items() if name != "heads"}


def _within_capabilities(spec: dict, target: Target) -> dict:
    """``spec`` less every class ``target``'s kernel cannot run
    (:attr:`~jfa_verify.cases.dimensions.Dimension.support`); without its mode, also without the relation of query
    to key lengths (cross-attention's): build_case takes the first class the kernel supports for each dimension
    left out."""
    from jfa_verify.cases.dimensions import dimension

    kept = {name: cls for name, cls in spec.items()
            if dimension(name).support(cls, target.capabilities) is None}
    if "mode" not in kept:
        kept.pop("relation", None)
    return kept


def related_calls(case: Case, capabilities=None) -> list[Case]:
    """Calls after ``case`` that a host-side cache keyed on part of the inputs would mistake for an
    earlier one: the same token counts with the lengths moved between sequences; the same longest
    sequence with the other sequences' boundaries moved (other offsets, same maxima); and, when
    ``capabilities`` (a :class:`~jfa_verify.protocol.kernel.Capabilities`) allow another head dim of
    another padded width, ``case``'s very lengths and offsets with that head dim (a plan keyed on
    the lengths alone)."""
    k, q = list(case.kv_lengths), list(case.query_lengths)
    moved = _moved(k)  # same total, other offsets; query lengths follow in self-attention
    extra = {"q_lengths": tuple(_moved(q))} if case.mode == "cross" else {}
    same_shapes = replace(case, kv_lengths=tuple(moved), seed=case.seed + 1, name=f"{case.name}/same-shapes", **extra)
    longest = max(range(len(k)), key=lambda b: k[b])
    k2 = [n if b == longest else max(0, n - 1) for b, n in enumerate(k)]
    k2[(longest + 1) % len(k)] += sum(k) - sum(k2)  # same total tokens, same maximum, other boundaries
    k2 = [min(n, k[longest]) for n in k2]
    extra2 = {"q_lengths": tuple(q)} if case.mode == "cross" else {}
    same_max = replace(case, kv_lengths=tuple(k2), seed=case.seed + 2, name=f"{case.name}/same-maxima", **extra2)
    calls = [same_shapes, same_max]
    if capabilities is not None:
        width = padded_width(max(case.head_dim, case.dv))
        other = next((d for d in (2 * case.head_dim, case.head_dim // 2, case.head_dim + 16)
                      if d >= 1 and capabilities.supports_head_dim(d) and padded_width(d) != width), None)
        if other is not None:
            calls.append(replace(case, head_dim=other, head_dim_v=other, seed=case.seed + 3,
                                 name=f"{case.name}/same-lengths-other-head-dim"))
    return calls


def _moved(lengths: list[int]) -> list[int]:
    """``lengths`` reversed, the same number of tokens at other boundaries; where reversed they fall in the same
    sequences (one sequence holds every token, or the lengths read the same backwards: a call a stale plan gets
    right), one token of the longest sequence moved to the next one instead."""
    moved = lengths[::-1]
    if len(lengths) > 1 and sum(lengths) and _boundaries(moved) == _boundaries(lengths):
        longest = max(range(len(lengths)), key=lengths.__getitem__)
        moved = list(lengths)
        moved[longest] -= 1
        moved[(longest + 1) % len(lengths)] += 1
    return moved


def _boundaries(lengths: list[int]) -> set[int]:
    return set(itertools.accumulate(lengths, initial=0))


def windows_suite(device_type: str, seed: int = 0, kernel=None) -> Suite:
    """Sliding windows at their edges: symmetric (Meta's TLX JFA's ``|i - j| <= w``), FlashAttention's
    bottom-right ``(left, right)`` with and without causal, the diagonal only (0, 0), one side unbounded,
    tile +-1 and wider than every sequence, on a jagged layout with an empty and a 1-token sequence,
    in bf16 and fp16 (what the peers take) and fp32. Sizes as :func:`default_suite`."""
    gpu = device_type == "cuda"
    heads = (dict(num_heads_q=8, num_heads_kv=2, head_dim=128) if gpu else
             dict(num_heads_q=4, num_heads_kv=2, head_dim=32))
    bm, bn = tiles_for_shape(kernel, heads["head_dim"], None, None, device_type).as_tuple()
    kv = _scaled((128, 4096, 0, 1, 512, 2048), 1.0 if gpu else 1 / 16)
    q = _cross_q_lengths(kv)
    longest = max(kv + q)
    variants = [
        ("self/window-sym-3", dict(window=(3, 3))),
        ("self/window-diagonal", dict(window=(0, 0))),
        ("self/window-sym-tile-edge", dict(window=(bn + 1, bn + 1))),
        ("cross/window-bottom-right", dict(mode="cross", q_lengths=q, window=(bn - 1, bm + 1),
                                           causal_alignment="bottom_right")),
        ("cross/causal-window-bottom-right", dict(mode="cross", q_lengths=q, window=(7, -1), causal=True,
                                                  causal_alignment="bottom_right")),
        ("self/causal-window", dict(window=(bm - 1, 0), causal=True)),
        ("self/window-left-unbounded", dict(window=(-1, 2))),
        ("self/window-wider-than-sequences", dict(window=(longest + 1, longest + 1))),
    ]
    cases = []
    for n, (label, variant) in enumerate(variants):
        dtype = ("bfloat16", "float16", "float32")[n % 3]
        cases.append(Case(kv_lengths=kv, dtype=dtype, seed=seed * 1000 + 500 + n, name=f"{label}/{dtype}",
                          **heads, **variant))
    note = "sliding windows, full-size lengths" if gpu else "sliding windows; CPU interpreter: lengths scaled by 1/16"
    return Suite("windows", tuple(cases), note)


def mha_suite(device_type: str, seed: int = 0, kernel=None) -> Suite:
    """Every other case of :func:`default_suite` with as many KV heads as query heads (MHA): the default
    suite is GQA throughout, which kernels without GQA (nested-tensor SDPA) declare unsupported."""
    base = default_suite(device_type, seed, kernel)
    cases = tuple(replace(c, num_heads_kv=c.num_heads_q, name=f"{c.name}/mha", seed=c.seed + 100_000)
                  for c in base.cases[::2])
    return Suite("mha", cases, base.note + "; MHA (H_kv = H_q)")


def jagged_grid_suite(device_type: str, seed: int = 0, kernel=None) -> Suite:
    """The jagged-length grid that ``ci/gpu_gluon_check.py`` checked ``gluon_jfa`` on, as cases any kernel runs
    (judged by the framework's one tolerance rule): lengths at the kernel's query tile ±1 and twice it ±1 with an
    empty and a half-tile sequence (``boundary``), a mixed batch, a batch mostly of empty sequences, twenty
    one-token sequences, cross-attention with empty and one-token sequences on either side (L_q ≠ L_k), broadcast-Q
    over jagged keys (with an empty and a one-token key sequence), one long sequence, MovieLens user histories,
    offsets not starting at 0; no mask, causal top-left and bottom-right; MHA, GQA and MQA; bfloat16 and float16 at
    D = 128 and 64.

    On the GPU: the check's full sizes (D = 128 and 64; the long sequence 32 query tiles + 1, 4,097 for 128-row
    tiles). On the CPU (Triton's interpreter): the fixed lengths scaled by 1/8 (the boundary and one-token ones are
    not scaled: they sit at the kernel's own tiles), the long sequence 257, MovieLens batches of 6 and 12 scaled by
    1/8, D = 32 and 16, so each case takes a few seconds. The check's explicit schedules (1-5 programs, every head
    in one CTA) were ``gluon_jfa``'s own call options, not cases: here every kernel runs its own scheduler.
    """
    gpu = device_type == "cuda"
    scale = 1.0 if gpu else 1 / 8
    big, small = (128, 64) if gpu else (32, 16)  # the check's head dims, or the interpreter's
    sized = lambda lengths: _scaled(tuple(lengths), scale)  # noqa: E731

    def boundary(d):
        bm, _ = tiles_for_shape(kernel, d, None, None, device_type).as_tuple()
        return (1, bm - 1, bm, bm + 1, 2 * bm - 1, 2 * bm, 2 * bm + 1, 0, max(1, bm // 2))

    mixed = sized((17, 300, 64, 1000, 129))
    empties = sized((0, 5, 0, 0, 300, 0))
    one_token = (1,) * 20 + (2, 3)
    cross_q, cross_k = sized((64, 1, 200, 0, 129, 300, 7)), sized((300, 129, 17, 50, 0, 128, 1))
    bq_k, bq_len = sized((0, 1, 100, 300, 129, 1000)), max(1, round(200 * scale))
    long = (32 * tiles_for_shape(kernel, big, None, None, device_type).block_m + 1,) if gpu else (257,)
    movielens = sample_movielens_batch(24 if gpu else 6, seed + 11, scale=scale)
    movielens_many = sample_movielens_batch(200 if gpu else 12, seed + 12, scale=scale)
    masks = {"none": dict(causal=False), "top_left": dict(causal=True),
             "bottom_right": dict(causal=True, causal_alignment="bottom_right")}
    rows = []  # (name, dtype, head dim, mask, heads (H_q, H_kv), key lengths, extra Case fields)

    def add(dtype, d, mask, heads, kv, tag, **extra):
        mode = extra.get("mode", "self")
        label = {"self": "self", "cross": "cross", "broadcast_q": f"bq{extra.get('broadcast_q_len', '')}"}[mode]
        name = f"{'bf16' if dtype == 'bfloat16' else 'fp16'}-d{d}-{label}-{mask}" + (f"-{tag}" if tag else "")
        rows.append((name, dtype, d, mask, heads, tuple(kv), extra))

    bf, fp = "bfloat16", "float16"
    cross = dict(mode="cross", q_lengths=cross_q)
    bq = dict(mode="broadcast_q", broadcast_q_len=bq_len)
    for mask in masks:
        add(bf, big, mask, (4, 4), boundary(big), "boundary")
    add(bf, big, "none", (4, 4), mixed, "mixed")
    add(bf, big, "top_left", (8, 2), mixed, "gqa8/2")
    add(bf, big, "none", (8, 1), mixed, "mqa8/1")
    for mask in masks:
        add(bf, big, mask, (4, 4), cross_k, "", **cross)
    for mask in masks:
        add(bf, big, mask, (4, 2), bq_k, "", **bq)
    add(bf, big, "top_left", (4, 4), empties, "empties")
    add(bf, big, "none", (4, 4), one_token, "one_token")
    add(bf, big, "top_left", (2, 2), long, "long")
    add(bf, big, "top_left", (4, 4), movielens, "movielens")
    add(bf, big, "none", (4, 2), movielens, "movielens")
    add(bf, big, "top_left", (4, 4), mixed, "offset0", offsets_start=37)
    add(bf, big, "top_left", (4, 4), movielens_many, "movielens-many")
    add(bf, big, "top_left", (4, 2), mixed, "mixed-gqa4/2")
    add(bf, small, "none", (4, 4), boundary(small), "boundary")
    add(bf, small, "bottom_right", (4, 4), boundary(small), "boundary")
    add(bf, small, "bottom_right", (8, 2), cross_k, "gqa8/2", **cross)
    add(bf, small, "none", (8, 1), bq_k, "mqa8/1", **dict(bq, broadcast_q_len=max(1, round(64 * scale))))
    add(bf, small, "none", (2, 2), long, "long")
    add(bf, small, "none", (2, 1), long + sized((300, 1)), "long-mqa")
    add(bf, small, "bottom_right", (4, 4), movielens, "movielens")
    add(fp, big, "top_left", (4, 4), mixed, "mixed")
    add(fp, big, "bottom_right", (8, 2), cross_k, "gqa8/2", **cross)
    add(fp, big, "top_left", (4, 4), bq_k, "", **bq)
    add(fp, big, "none", (4, 1), bq_k, "mqa4/1", **bq)
    add(fp, big, "none", (4, 4), boundary(big), "boundary")
    add(fp, small, "top_left", (4, 4), boundary(small), "boundary")
    add(fp, small, "none", (4, 4), cross_k, "", **cross)
    add(fp, small, "bottom_right", (4, 2), bq_k, "gqa4/2", **bq)
    add(fp, small, "none", (4, 4), empties, "empties")
    cases = tuple(Case(kv_lengths=kv, dtype=dtype, head_dim=d, num_heads_q=hq, num_heads_kv=hkv,
                       seed=seed * 1000 + 700 + n, name=f"jagged-grid/{name}", **masks[mask], **extra)
                  for n, (name, dtype, d, mask, (hq, hkv), kv, extra) in enumerate(rows))
    note = ("the jagged-length grid at full size" if gpu else
            "the jagged-length grid; CPU interpreter: fixed lengths scaled by 1/8, MovieLens batches of 6 and 12, "
            "D=32/16")
    return Suite("jagged-grid", cases, note)


SUITES = {"default": default_suite, "windows": windows_suite, "mha": mha_suite, "jagged-grid": jagged_grid_suite}


def suite_inputs(kernel, device_type: str) -> tuple:
    """What the default suite's cases depend on besides the seed: the kernel's capabilities, the SMs of the
    device and the tiles the kernel runs for every head-dim pair the suite's construction may try
    (:data:`jfa_verify.cases.construct.CANDIDATE_HEAD_DIMS`) in every dtype. Kernels with equal inputs get the same
    suite (``jfa-verify mutants`` builds it once for the catalogue's kernel and hands it to every planted-bug
    copy whose bug leaves these alone). ``kernel``: a registered kernel; ``device_type``: ``"cpu"`` or
    ``"cuda"``."""
    from jfa_verify.cases.construct import CANDIDATE_HEAD_DIMS
    from jfa_verify.core.dtypes import DTYPES as ALL_DTYPES

    target = Target(kernel, device_type)
    tiles = tuple(target.tiles(d, dv, dtype) for d in CANDIDATE_HEAD_DIMS for dv in CANDIDATE_HEAD_DIMS
                  for dtype in ALL_DTYPES)
    return target.capabilities, target.num_sms, tiles


def get_suite(name: str, device_type: str, seed: int = 0, kernel=None) -> Suite:
    """Build the named suite.

    Raises:
        InvalidInput: unknown suite name; ``seed`` outside ``[0, MAX_SUITE_SEED]``.
    """
    from jfa_verify.core.errors import InvalidInput

    if name not in SUITES:
        raise InvalidInput(f"suite={name!r} is unknown; choose one of {sorted(SUITES)}")
    if not 0 <= seed <= MAX_SUITE_SEED:
        # (a case's seed came out of range instead, and its message named that seed: 1000x the one typed)
        raise InvalidInput(f"--seed {seed} is out of range: a suite's seed must be in [0, {MAX_SUITE_SEED}] "
                           f"(its cases take seeds seed * 1000 + n, which must stay below 2**63)")
    return SUITES[name](device_type, seed, kernel)


# The largest suite seed: the suites give their cases seeds up to ``seed * 1000 + 999`` (the MHA copies 100,000
# more), and a case's is below 2**63.
MAX_SUITE_SEED = (2**63 - 200_000) // 1000
