"""The contract as dimensions of classes: what a suite or a campaign must vary, and what a case exercised.

Every dimension of the JFA contract (:mod:`jfa_verify.core.contract`) gets a few
classes, each a region of inputs where kernels are written differently or have
broken (the bug classes of ``/shared/DOMAIN.md``): the mode; the mask (causal,
window or both) with the alignment of its diagonal; the relation of each
sequence's query length to its key length; the sliding window's shape; the GQA group
(powers of two or not, MQA); the head dim and the value head dim's padding; the
dtype; the softmax scale; the offsets' dtype, start and memory layout; the q/k/v/dO
strides; the value distribution; empty and one-token sequences; lengths at the
kernel's own tiles; the batch and the number of tiles against the SMs; the
variant of the kernel judged (instrumented or production); for block-sparse
kernels, the block selection's pattern; and, for MXFP8 kernels, the block scales' pattern.

:func:`classify` names a case's classes per dimension, from the case alone and
a :class:`Target` (the kernel's tiles for the case's shape, the SM count of the
device). A case can be in several classes of one dimension (a batch with an
empty sequence and a one-token one). :mod:`jfa_verify.cases.pairs` builds the pairs of
classes from this table, and :mod:`jfa_verify.cases.construct` builds a case for a
choice of classes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

from jfa_verify.cases.case import LAYOUTS, VALUE_DISTRIBUTIONS, Case
from jfa_verify.cases.scaling import SCALE_PATTERNS
from jfa_verify.cases.sparsity import PATTERNS
from jfa_verify.core.contract import MODES, Mask
from jfa_verify.core.dtypes import DTYPES, dtype_name
from jfa_verify.protocol.kernel import Capabilities, Kernel, tiles_for_shape

__all__ = ["DIMENSIONS", "Dimension", "LENGTH_DIMENSIONS", "Target", "blocks_against_tiles", "classify", "dimension",
           "head_dim_class", "padded_width",
           "relation_of", "tile_count", "tile_shape", "window_of", "window_shape"]


@dataclass(frozen=True, eq=False)
class Target:
    """Where the model is evaluated: a kernel (its capabilities and tile sizes) on a device with ``num_sms``.

    ``kernel``: a registered :class:`~jfa_verify.protocol.kernel.Kernel`, a :class:`Capabilities` or None
    (the contract's, with generic tiles). ``num_sms``: persistent programs of a launch (None: the
    device's: :data:`jfa_verify.scheduling.planning.INTERPRETER_SMS` on the CPU, the GPU's SM count on CUDA,
    132 (an H200) when no GPU is visible).
    """

    kernel: object = None
    device_type: str = "cpu"
    num_sms: Optional[int] = None

    def __post_init__(self) -> None:
        if self.num_sms is None:
            object.__setattr__(self, "num_sms", _device_sms(self.device_type))

    @property
    def capabilities(self) -> Capabilities:
        if isinstance(self.kernel, Kernel):
            return self.kernel.capabilities
        return self.kernel if isinstance(self.kernel, Capabilities) else Capabilities()

    def tiles(self, head_dim: int, head_dim_v: int, dtype: Optional[str] = None) -> tuple[int, int]:
        """``(BLOCK_M, BLOCK_N)`` the kernel runs for this shape
        (:func:`~jfa_verify.protocol.kernel.tiles_for_shape`)."""
        return tiles_for_shape(self.kernel, head_dim, head_dim_v, DTYPES[dtype] if dtype else None,
                               self.device_type).as_tuple()

    def tiles_of(self, case: Case) -> tuple[int, int]:
        return self.tiles(case.head_dim, case.dv, case.dtype)

    @property
    def key(self) -> tuple:
        """What the model's answers depend on: the kernel's name and capabilities, the device, the SMs."""
        return (getattr(self.kernel, "name", None), self.capabilities, self.device_type, self.num_sms)


def _device_sms(device_type: str) -> int:
    from jfa_verify.scheduling.planning import INTERPRETER_SMS

    if device_type != "cuda":
        return INTERPRETER_SMS
    import torch

    if torch.cuda.is_available():
        from jfa_verify.scheduling.planning import default_num_sms

        return default_num_sms(torch.device("cuda"))
    return 132  # an H200, the GPU this project's budgets were calibrated on


# ----------------------------------------------------------------------------- classifiers


def relation_of(q_len: int, k_len: int) -> str:
    """``"equal"``, ``"shorter"`` (fewer queries than keys) or ``"longer"`` for one sequence."""
    return "equal" if q_len == k_len else ("shorter" if q_len < k_len else "longer")


def padded_width(d: int) -> int:
    """The power-of-two width a head dim ``d`` is padded to in a tile (``tl.arange`` needs one), at least 16."""
    return 1 << max(4, (d - 1).bit_length())


def tile_count(lengths, block: int) -> int:
    """Non-empty tiles of ``block`` rows over ``lengths`` (a sequence with no row has none to run)."""
    return sum(math.ceil(n / block) for n in lengths)


def _boundary(n: int, block: int) -> bool:
    return n >= block - 1 and (n + 1) % block in (0, 1, 2)


def _relation(case: Case, target: Target) -> set[str]:
    pairs = list(zip(case.query_lengths, case.kv_lengths))
    found = {relation_of(a, b) for a, b in pairs} - {"equal"}
    if not found:
        return {"equal"}
    if len(found) == 2:
        return {"mixed"}
    # A gap of a whole tile moves the aligned diagonal past a tile (the loops' bounds, not only their masks)
    tile = max(target.tiles_of(case))
    return {f"{relation_of(a, b)}_by_a_tile" if a > 0 and b > 0 and abs(a - b) >= tile else relation_of(a, b)
            for a, b in pairs if a != b}


def _heads(case: Case, target: Target) -> set[str]:
    if case.num_heads_q == case.num_heads_kv:
        return {"mha"}
    if case.num_heads_kv == 1:
        return {"mqa"}
    group = case.num_heads_q // case.num_heads_kv
    return {"gqa_pow2" if group & (group - 1) == 0 else "gqa_non_pow2"}


def head_dim_class(d: int) -> str:
    """The class of head dim ``d`` in the ``head_dim`` dimension: ``"pow2"``, ``"odd"`` or ``"non_pow2_even"``."""
    return "pow2" if d & (d - 1) == 0 else ("odd" if d % 2 else "non_pow2_even")


def _head_dim(case: Case, target: Target) -> set[str]:
    return {head_dim_class(case.head_dim)}


def _value_dim(case: Case, target: Target) -> set[str]:
    d, dv = case.head_dim, case.dv
    if d == dv:
        return {"same"}
    if padded_width(d) == padded_width(dv):
        return {"other_same_padding"}
    return {"narrower_other_padding" if dv < d else "wider_other_padding"}


def _sm_scale(case: Case, target: Target) -> set[str]:
    if case.sm_scale is None:
        return {"default"}
    return {"small" if case.sm_scale < 1.0 / math.sqrt(case.head_dim) else "large"}


def window_shape(window: Optional[tuple[int, int]], causal: bool) -> str:
    """The window dimension's class of a ``(left, right)`` window (None: ``"none"``), judged on the window
    the contract applies: causal caps its right side at the diagonal (:func:`jfa_verify.core.contract.key_range`),
    so a causal window is ``symmetric`` (left 0), ``wider_left`` or ``left_unbounded``."""
    if window is None:
        return "none"
    left, right = window[0], 0 if causal else window[1]
    if left < 0 or right < 0:
        return "left_unbounded" if left < 0 else "right_unbounded"
    return "symmetric" if left == right else ("wider_left" if left > right else "wider_right")


def window_of(shape: str, causal: bool, bn: int) -> Optional[tuple[int, int]]:
    """A window of ``shape`` (the window dimension's class) with its bounded sides just past a KV tile of ``bn``
    keys, a narrow side of one key; under causal the right side (capped at the diagonal) is given wide, so a
    kernel that forgets the cap shows it. ``window_shape(window_of(shape, causal, bn), causal)`` is ``shape``
    wherever a causal window can have it (not ``wider_right`` nor ``right_unbounded``)."""
    wide = bn + 1
    return {"none": None, "symmetric": (0, wide) if causal else (wide, wide), "wider_left": (wide, 1),
            "wider_right": (1, wide), "left_unbounded": (-1, wide), "right_unbounded": (wide, -1)}[shape]


def _edges(case: Case, target: Target) -> set[str]:
    q, k = case.query_lengths, case.kv_lengths
    out = set()
    if 0 in q:
        out.add("empty_q")
    if 0 in k:
        out.add("empty_k")
    if 1 in q or 1 in k:
        out.add("one_token")
    return out or {"none"}


def _tiles(case: Case, target: Target) -> set[str]:
    bm, bn = target.tiles_of(case)
    q, k = case.query_lengths, case.kv_lengths
    out = set()
    if any(_boundary(n, bm) for n in q):
        out.add("boundary_m")
    if any(_boundary(n, bn) for n in k):
        out.add("boundary_n")
    out.add("multi_tile" if any(n > bm for n in q) or any(n > bn for n in k) else "single_tile")
    return out


def tile_shape(tiles: tuple[int, int]) -> str:
    """The ``tile_shape`` class of ``(BLOCK_M, BLOCK_N)``: ``"square"``, ``"m_larger"`` or ``"n_larger"``."""
    bm, bn = tiles
    return "square" if bm == bn else ("m_larger" if bm > bn else "n_larger")


def _batch(case: Case, target: Target) -> set[str]:
    b = case.batch
    return {"empty" if b == 0 else "one" if b == 1 else ("few" if b <= target.num_sms else "over_sms")}


def _offsets_start(case: Case, target: Target) -> set[str]:
    if case.distinct_starts:
        return {"distinct"}
    return {"nonzero" if case.offsets_start else "zero"}


def _waves(case: Case, target: Target) -> set[str]:
    tiles = tile_count(case.query_lengths, target.tiles_of(case)[0])
    sms = target.num_sms
    return {"one_wave" if tiles <= sms else ("two_waves" if tiles < 3 * sms else "several_waves")}


def _variant(case: Case, target: Target) -> set[str]:
    return {"instrumented" if case.instrument and target.capabilities.instrumented else "production"}


# ----------------------------------------------------------------------------- capabilities


def _mode_support(cls: str, caps: Capabilities) -> Optional[str]:
    return None if cls in caps.modes else f"mode {cls} not in the kernel's modes {caps.modes}"


def _mask_support(cls: str, caps: Capabilities) -> Optional[str]:
    mask = Mask.parse(cls)
    if mask.none:
        return None
    if not caps.supports_mask(mask):
        return f"no {mask.kind} mask in the kernel's masks {caps.masks if caps.causal_alignments else ('none',)}"
    if mask.alignment not in caps.causal_alignments:
        return f"{mask.kind} aligned {mask.alignment}: not in the kernel's alignments {caps.causal_alignments}"
    return None


def _window_support(cls: str, caps: Capabilities) -> Optional[str]:
    if cls == "none":
        return None
    if not caps.window:
        return f"no sliding window in the kernel's masks {caps.masks}"
    if cls != "symmetric" and caps.symmetric_window:
        return "the kernel's windows are symmetric (left == right >= 0)"
    return None


def _heads_support(cls: str, caps: Capabilities) -> Optional[str]:
    return None if cls == "mha" or caps.gqa else "the kernel has no GQA/MQA"


def _dtype_support(cls: str, caps: Capabilities) -> Optional[str]:
    names = tuple(dtype_name(d) for d in caps.dtypes)
    return None if cls in names else f"dtype {cls} not in the kernel's dtypes {names}"


def _offsets_start_support(cls: str, caps: Capabilities) -> Optional[str]:
    return None if cls != "distinct" or "cross" in caps.modes else "distinct starts need cross-attention"


def _value_dim_support(cls: str, caps: Capabilities) -> Optional[str]:
    return None if cls == "same" or caps.distinct_value_head_dim else "the kernel needs D_v == D"


def _layout_support(cls: str, caps: Capabilities) -> Optional[str]:
    # every layout but "contiguous" gives the kernel non-contiguous q/k/v (case.py's layouts)
    return None if cls == "contiguous" or caps.strided_inputs else "the kernel takes contiguous q/k/v only"


def _variant_support(cls: str, caps: Capabilities) -> Optional[str]:
    return None if cls == "production" or caps.instrumented else "the kernel has no instrumented launch"


def _sparsity_support(cls: str, caps: Capabilities) -> Optional[str]:
    return None if cls == "dense" or caps.block_sparse else "the kernel has no block-sparse path (block_sparse=())"


def blocks_against_tiles(blocks: tuple[int, int], tiles: tuple[int, int]) -> set[str]:
    """The ``selection_blocks`` classes of a block selection of ``blocks`` ``(block_m, block_n)`` run by a kernel
    whose dense tiles are ``tiles`` ``(BLOCK_M, BLOCK_N)``: ``"multi_tile"`` where a block is larger than the tile
    on some side (a block spans several tiles: the kernel maps its tile numbers to block numbers), ``"sub_tile"``
    where it is smaller on some side (the kernel's tiles shrink to it), else ``"tiles"``."""
    out = set()
    if any(b > t for b, t in zip(blocks, tiles)):
        out.add("multi_tile")
    if any(b < t for b, t in zip(blocks, tiles)):
        out.add("sub_tile")
    return out or {"tiles"}


def _selection_blocks(case: Case, target: Target) -> set:
    if case.block_sparsity is None:
        return {"none"}
    return blocks_against_tiles(case.block_sparsity.block_sizes, target.tiles_of(case))


def _scaling_support(cls: str, caps: Capabilities) -> Optional[str]:
    return None if cls == "none" or caps.mxfp8 else "the kernel has no MXFP8 path (mxfp8=None)"


def _always(cls: str, caps: Capabilities) -> Optional[str]:
    return None


@dataclass(frozen=True)
class Dimension:
    """One dimension of the contract: its classes (name -> what it means) and how a case is classified.

    ``classify(case, target) -> set[str]``; ``support(cls, capabilities) -> reason or None`` says
    why a kernel cannot run a class at all (its pairs are then outside the kernel's support). How a case of
    each class is built: :data:`jfa_verify.cases.construct.BUILDERS`.
    ``lengths``: the class is decided by the sequence lengths (:mod:`jfa_verify.cases.construct` searches
    them jointly).
    """

    name: str
    description: str
    classes: dict
    classify: Callable[[Case, Target], set]
    support: Callable[[str, Capabilities], Optional[str]] = _always
    lengths: bool = False
    extra: dict = field(default_factory=dict)


# Layouts counted in another class of the layout dimension: k or v alone misaligned are tensors strided differently
# ("mixed"). As classes of their own they reshaped the covering array and doubled its CI mutant gates' time
# (2026-12-06); the default suite runs them as cases of their own after the array, the strategies draw them.
LAYOUT_CLASS = {"misaligned_k": "mixed", "misaligned_v": "mixed", "token_padded": "mixed"}

DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("mode", "how queries meet keys", {
        "self": "self-attention (q and k/v share offsets)",
        "cross": "cross-attention (separate query offsets)",
        "broadcast_q": "one dense Q attends to every sequence",
    }, lambda c, t: {c.mode}, _mode_support, lengths=True),
    # The contract's mask kinds, each with the alignment of its diagonal (a window has one without causal too).
    Dimension("mask", "causal mask and/or window, and where their diagonal lies", {
        str(m): "no mask" if m.none else f"{m.kind}, query i's diagonal at key "
        + ("i" if m.alignment == "top_left" else "i + L_k - L_q") for m in Mask.classes()
    }, lambda c, t: {str(c.mask)}, _mask_support),
    Dimension("relation", "each sequence's query length against its key length", {
        "equal": "L_q == L_k in every sequence",
        "shorter": "L_q < L_k in some sequence, never L_q > L_k, and not a tile apart (below)",
        "shorter_by_a_tile": "0 < L_q <= L_k - max(BLOCK_M, BLOCK_N) in some sequence, never L_q > L_k",
        "longer": "L_q > L_k in some sequence, never L_q < L_k, and not a tile apart (below)",
        "longer_by_a_tile": "0 < L_k <= L_q - max(BLOCK_M, BLOCK_N) in some sequence, never L_q < L_k",
        "mixed": "some sequence with L_q < L_k and another with L_q > L_k",
    }, _relation, lengths=True),
    # The window's shape as the contract applies it; its sizes against the tiles and the sequences (0, 1,
    # tile +-1, wider than the sequence) are the strategies' and the windows suite's (jfa_verify.cases.coverage).
    Dimension("window", "sliding window (left, right) around the aligned diagonal", {
        "none": "no window (the whole visible range)",
        "symmetric": "left == right (a causal window: left == 0, the diagonal alone)",
        "wider_left": "left > right, both bounded (a causal window with left > 0)",
        "wider_right": "right > left, both bounded",
        "left_unbounded": "left unbounded (-1), right bounded",
        "right_unbounded": "right unbounded (-1), left bounded",
    }, lambda c, t: {window_shape(c.window, c.causal)}, _window_support),
    Dimension("heads", "query heads per KV head", {
        "mha": "H_q == H_kv (> 1)",
        "gqa_pow2": "GQA, group of a power of two (H_kv > 1)",
        "gqa_non_pow2": "GQA, group not a power of two (e.g. 3)",
        "mqa": "one KV head for several query heads",
    }, _heads, _heads_support),
    Dimension("head_dim", "query/key head dim D", {
        "pow2": "a power of two",
        "non_pow2_even": "even, not a power of two (e.g. 24, 40)",
        "odd": "odd (e.g. 17, 33)",
    }, _head_dim),
    Dimension("value_dim", "value head dim D_v against D (padded to a power of two, at least 16)", {
        "same": "D_v == D",
        "other_same_padding": "D_v != D, both padded to the same width",
        "narrower_other_padding": "D_v < D, padded to a narrower width",
        "wider_other_padding": "D_v > D, padded to a wider width",
    }, _value_dim, _value_dim_support),
    Dimension("dtype", "input dtype", {n: n for n in DTYPES}, lambda c, t: {c.dtype}, _dtype_support),
    Dimension("sm_scale", "softmax scale", {
        "default": "not given (1/sqrt(D))",
        "small": "given, below 1/sqrt(D)",
        "large": "given, at or above 1/sqrt(D)",
    }, _sm_scale),
    Dimension("offsets_dtype", "offsets dtype", {"int32": "int32", "int64": "int64"}, lambda c, t: {c.offsets_dtype}),
    Dimension("offsets_start", "offsets[0]", {
        "zero": "offsets[0] == 0",
        "nonzero": "offsets[0] > 0 (a view into a larger buffer)",
        "distinct": "q_offsets[0] != k_offsets[0] (cross-attention on views into two buffers; the covering "
                    "array's rows start the queries later, the default suite's keys-later case the keys)",
    }, _offsets_start, _offsets_start_support),
    Dimension("offsets_layout", "offsets memory layout (strided views are outside the contract)", {
        "contiguous": "dense offsets",
        "strided": "columns of one [B + 1, 2] tensor: rejected or computed right",
    }, lambda c, t: {c.offsets_layout}),
    Dimension("layout", "q/k/v/dO strides", {
        "contiguous": "every tensor contiguous",
        "strided": "q, k, v head-major, dO a slice of a wider buffer",
        "mixed": "each tensor strided differently (slices with NaN gaps, head-major), or one of k and v alone "
                 "misaligned (misaligned_k, misaligned_v), or the token stride alone (token_padded): the default "
                 "suite's cases after the covering array",
        "head_dim_strided": "q, k, v, dO with a head-dim stride of 2 (every other element of a buffer)",
        "padded_to_16": "q, k, v, dO slices of buffers with the head dim padded to a multiple of 16: every stride "
                        "divisible by 16, D and D_v need not be",
    }, lambda c, t: {LAYOUT_CLASS.get(c.layout, c.layout)}, _layout_support),
    Dimension("values", "value distribution", {n: n for n in VALUE_DISTRIBUTIONS}, lambda c, t: {c.values}),
    Dimension("edges", "empty and one-token sequences", {
        "none": "every sequence has at least two queries and two keys",
        "empty_q": "a sequence with no query row",
        "empty_k": "a sequence with no key",
        "one_token": "a one-token query or key sequence",
    }, _edges, lengths=True),
    # Kernels pick their tiles by head dim and dtype (triton_jfa on CUDA: 64 x 64 up to D = 128, 64 x 32 past
    # it); a query-tile/key-tile mix-up (BLOCK_M where BLOCK_N belongs) computes right on square tiles only.
    # Decided by the shape, not the lengths: :func:`jfa_verify.cases.construct.build_case` picks head dims for it.
    Dimension("tile_shape", "the tiles the kernel runs for the case's shape and dtype", {
        "square": "BLOCK_M == BLOCK_N",
        "m_larger": "BLOCK_M > BLOCK_N",
        "n_larger": "BLOCK_M < BLOCK_N",
    }, lambda c, t: {tile_shape(t.tiles_of(c))}),
    Dimension("tiles", "lengths against the kernel's own tiles", {
        "single_tile": "every sequence within one BLOCK_M x BLOCK_N tile",
        "boundary_m": "a query length at a multiple of BLOCK_M, +-1",
        "boundary_n": "a key length at a multiple of BLOCK_N, +-1",
        "multi_tile": "a sequence spanning several tiles",
    }, _tiles, lengths=True),
    Dimension("batch", "sequences against the SMs", {
        "empty": "no sequence (B = 0: offsets of one entry; any rows belong to no sequence)",
        "one": "a single sequence",
        "few": "2 to num_sms sequences",
        "over_sms": "more sequences than SMs",
    }, _batch, lengths=True),
    Dimension("waves", "forward tiles against the SMs (persistent programs)", {
        "one_wave": "at most one tile per SM",
        "two_waves": "more tiles than SMs, fewer than three times as many",
        "several_waves": "at least three times more tiles than SMs",
    }, _waves, lengths=True),
    Dimension("variant", "the kernel launch judged", {
        "instrumented": "launch plan recorded, and tile visits where the kernel counts them "
                        "(scheduler invariants checked)",
        "production": "the uninstrumented launch users run",
    }, _variant, _variant_support),
    # Block-sparse selections (jfa_verify.cases.sparsity): drawn only for kernels declaring block_sparse pairs.
    Dimension("sparsity", "the block selection of a block-sparse call (kernels declaring block_sparse)", {
        "dense": "no block selection",
        "all": "every KV block selected (equal to dense)",
        "topk": "random top-k, half the KV blocks of each query block",
        "one": "one KV block per query block",
        "empty_block": "a query block per sequence selects nothing (its rows: O = 0, LSE = -inf)",
        "with_last": "top-k plus the last KV block, partial where block_n does not divide L_k",
        "without_last": "top-k without the last KV block",
        "edges": "the first and last KV block of each sequence, beside its neighbours in the packed buffer",
    }, lambda c, t: {"dense" if c.block_sparsity is None else c.block_sparsity.pattern}, _sparsity_support),
    Dimension("selection_blocks", "a block selection's blocks against the kernel's own (dense) tiles", {
        "none": "no block selection",
        "tiles": "blocks of the kernel's tile sizes: one tile per block",
        "multi_tile": "blocks larger than the tiles: each spans several query or KV tiles",
        "sub_tile": "blocks smaller than the tiles on some side: the kernel's tiles shrink to them",
    }, _selection_blocks, lambda cls, caps: _sparsity_support("dense" if cls == "none" else cls, caps)),
    # MXFP8 block scales (jfa_verify.cases.scaling): drawn only for kernels declaring mxfp8.
    Dimension("scaling", "the E8M0 block scales of an MXFP8 call (kernels declaring mxfp8)", {
        "none": "no block scales",
        "unit": "every scale 2^0 (E8M0 127)",
        "random": "random scales 2^-4 to 2^4",
        "extremes": "scales near the E8M0 ends (2^-109, 2^109), dequantized products finite",
        "zero_blocks": "a 32-element block of zeros whose scale is an E8M0 end (0 or 254)",
        "outlier": "one +-448 (e4m3's largest) value per 32-element block",
    }, lambda c, t: {"none" if c.block_scaling is None else c.block_scaling.pattern}, _scaling_support),
)
LENGTH_DIMENSIONS = tuple(d.name for d in DIMENSIONS if d.lengths)
_BY_NAME = {d.name: d for d in DIMENSIONS}

# One home for the class sets that cases are built from.
assert set(_BY_NAME["mode"].classes) == set(MODES)
assert set(_BY_NAME["layout"].classes) == set(LAYOUTS) - set(LAYOUT_CLASS)
assert set(_BY_NAME["sparsity"].classes) == {"dense", *PATTERNS}
assert set(_BY_NAME["scaling"].classes) == {"none", *SCALE_PATTERNS}


def dimension(name: str) -> Dimension:
    """The dimension called ``name``.

    Raises:
        KeyError: no such dimension (the message lists them).
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"dimension {name!r} is unknown; choose one of {sorted(_BY_NAME)}") from None


def classify(case: Case, target: Target) -> dict[str, frozenset]:
    """``{dimension name: classes of case}`` for every dimension (each set non-empty)."""
    return {d.name: frozenset(d.classify(case, target)) for d in DIMENSIONS}
