"""Input-class coverage: which corners of the input space a run exercised, with counts.

:func:`classify` names the classes one case belongs to, from the case alone
(lengths, heads, dims, flags) and the kernel's tile sizes; a class that is a view over
the contract model's dimension classes (:attr:`CoverageClass.view`: the mode, the dtype,
the GQA group, ...) is read off those dimensions' classifiers, not decided twice; :class:`Coverage`
counts them over a run, so a campaign that never drew a class is visible.
Classes are defined on what the case *is*, not on the strategy that drew it
(a Pareto draw is not recognisable from its lengths; its skew is).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Union

from jfa_verify.cases.case import LAYOUTS, Case
from jfa_verify.cases.dimensions import LAYOUT_CLASS, Target, blocks_against_tiles, dimension
from jfa_verify.cases.scaling import SCALE_PATTERNS
from jfa_verify.cases.sparsity import PATTERNS
from jfa_verify.core.masks import Mask

__all__ = ["CLASSES", "COVERAGE", "CPU_EXPECTED", "FP8_CLASSES", "SPARSE_CLASSES", "WINDOW_CLASSES", "Coverage",
           "CoverageClass",
           "classify", "element_extent", "expected_classes", "unsupported_classes", "views_of"]


@dataclass(frozen=True)
class CoverageClass:
    """One coverage class: what it means, and the contract model's classes it is a view of.

    ``of``: ``((dimension, classes), ...)`` of :mod:`jfa_verify.cases.dimensions`: a case of this class is in one
    of ``classes`` of each dimension named, so a kernel reaches it exactly when it reaches one of them in each
    (:func:`jfa_verify.cases.construct.reachable`); ``()``: any kernel does. ``view``: a case is in this class
    exactly when it is in one of ``classes`` of every dimension named, so :func:`classify` reads it off the
    dimensions' own classifiers; otherwise a finer rule of :func:`classify` decides (a window side at the tile edge,
    a prime length, an odd value head dim).
    """

    description: str
    of: tuple = ()
    view: bool = False


def _masks(which: Callable[[Mask], bool]) -> tuple[str, tuple[str, ...]]:
    return "mask", tuple(str(m) for m in Mask.classes() if not m.none and which(m))


_WINDOWED = _masks(lambda m: m.windowed)
_UNEQUAL = ("cross", "broadcast_q")  # the modes with query lengths of their own
_STRIDED = tuple(c for c in LAYOUTS if c != "contiguous" and c not in LAYOUT_CLASS)  # (the dimension's classes)
_OTHER_DV = ("other_same_padding", "narrower_other_padding", "wider_other_padding")

COVERAGE: dict[str, CoverageClass] = {
    "self": CoverageClass("self-attention", of=(("mode", ("self",)),), view=True),
    "cross": CoverageClass("cross-attention (separate query offsets)", of=(("mode", ("cross",)),), view=True),
    "broadcast_q": CoverageClass("broadcast-Q (one dense Q for every sequence)", of=(("mode", ("broadcast_q",)),),
                                 view=True),
    "broadcast_q_multi_tile": CoverageClass(
        "broadcast-Q with L_q spanning more than one BLOCK_M tile", of=(("mode", ("broadcast_q",)),)),
    "zero_length_q": CoverageClass("a sequence with no query rows"),
    "zero_length_k": CoverageClass("a sequence with no keys"),
    "all_empty": CoverageClass("every sequence has no keys"),
    "total_lt_batch": CoverageClass("fewer key tokens in total than sequences"),
    "one_token": CoverageClass("a 1-token query or key sequence"),
    "single_sequence": CoverageClass("a batch of one sequence"),
    "no_sequences": CoverageClass("a batch of no sequence (B = 0: offsets of one entry)"),
    "tile_boundary": CoverageClass("a length at a multiple of BLOCK_M (queries) or BLOCK_N (keys) +-1"),
    "multi_tile": CoverageClass("a sequence spanning more than one tile"),
    "prime_length": CoverageClass("a prime length >= 5"),
    "skew": CoverageClass("the longest sequence is >= 8x the median of the others (one mega-sequence)"),
    "q_ne_k": CoverageClass("a sequence whose query length differs from its key length", of=(("mode", _UNEQUAL),)),
    "causal_top_left": CoverageClass(
        "causal, top-left alignment", of=(_masks(lambda m: m.causal and m.alignment == "top_left"),), view=True),
    "causal_bottom_right": CoverageClass(
        "causal, bottom-right alignment", of=(_masks(lambda m: m.causal and m.alignment == "bottom_right"),),
        view=True),
    "causal_misaligned": CoverageClass(
        "causal with some query length != key length (alignment matters)",
        of=(_masks(lambda m: m.causal), ("mode", _UNEQUAL))),
    "window": CoverageClass("a sliding window (left, right)", of=(_WINDOWED,), view=True),
    "window_causal": CoverageClass("a sliding window with causal", of=(_masks(lambda m: m.causal and m.windowed),),
                                   view=True),
    "window_zero": CoverageClass("a window side of 0 (only the diagonal on that side)", of=(_WINDOWED,)),
    "window_asymmetric": CoverageClass(
        "a window with left != right", of=(_WINDOWED, ("window", ("wider_left", "wider_right")))),
    "window_unbounded_side": CoverageClass(
        "a window side of -1 (unbounded)", of=(_WINDOWED, ("window", ("left_unbounded", "right_unbounded")))),
    "window_tile_edge": CoverageClass("a window side at BLOCK_M or BLOCK_N +-1", of=(_WINDOWED,)),
    "window_wider_than_sequence": CoverageClass(
        "a window side at least as long as the longest sequence", of=(_WINDOWED,)),
    "window_empty_rows": CoverageClass(
        "a query row the window leaves with no key (its keys are all out of reach)", of=(_WINDOWED,)),
    "gqa": CoverageClass("grouped-query attention (1 < H_kv < H_q)", of=(("heads", ("gqa_pow2", "gqa_non_pow2")),),
                         view=True),
    "mqa": CoverageClass("multi-query attention (H_kv = 1 < H_q)", of=(("heads", ("mqa",)),), view=True),
    "odd_head_dim": CoverageClass("an odd query/key or value head dim", of=(("head_dim", ("odd",)),)),
    "non_pow2_head_dim": CoverageClass(
        "a head dim that is not a power of two", of=(("head_dim", ("odd", "non_pow2_even")),)),
    "distinct_value_head_dim": CoverageClass(
        "value head dim != query/key head dim", of=(("value_dim", _OTHER_DV),), view=True),
    "offsets_nonzero_start": CoverageClass("offsets[0] > 0 (a view into a larger buffer)"),
    "distinct_offsets_start": CoverageClass(
        "q_offsets[0] != k_offsets[0] (cross-attention)", of=(("offsets_start", ("distinct",)), ("mode", ("cross",))),
        view=True),
    "strided_offsets": CoverageClass(
        "offsets as strided views (columns of one [B + 1, 2] tensor; outside the contract)",
        of=(("offsets_layout", ("strided",)),), view=True),
    "int64_offsets": CoverageClass("int64 offsets", of=(("offsets_dtype", ("int64",)),), view=True),
    "strided": CoverageClass(
        "non-contiguous q/k/v/dO", of=(("layout", _STRIDED),), view=True),
    "head_dim_strided": CoverageClass(
        "q/k/v/dO with a head-dim stride other than 1", of=(("layout", ("head_dim_strided",)),), view=True),
    "offset_overflow": CoverageClass("a tensor with more than 2**31 elements (int32 index overflow)"),
    "large_logits": CoverageClass("large logits (saturated softmax)", of=(("values", ("large_logits",)),), view=True),
    "correlated": CoverageClass("low-rank, correlated activations", of=(("values", ("correlated",)),), view=True),
    "near_ties": CoverageClass("near-tied scores", of=(("values", ("near_ties",)),), view=True),
    "tiny": CoverageClass("tiny values", of=(("values", ("tiny",)),), view=True),
    "float32": CoverageClass("float32", of=(("dtype", ("float32",)),), view=True),
    "bfloat16": CoverageClass("bfloat16", of=(("dtype", ("bfloat16",)),), view=True),
    "float16": CoverageClass("float16", of=(("dtype", ("float16",)),), view=True),
    # block-sparse selections, views over the sparsity dimension's patterns; the boundary class is finer
    **{f"sparse_{p}": CoverageClass(f"block-sparse: {dimension('sparsity').classes[p]}", of=(("sparsity", (p,)),),
                                    view=True) for p in PATTERNS},
    "sparse_beside_neighbours": CoverageClass(
        "block-sparse: a selection on a sequence whose neighbours in the packed buffer have keys",
        of=(("sparsity", PATTERNS),)),
    "sparse_multi_tile_blocks": CoverageClass(
        "block-sparse: selection blocks larger than the kernel's tiles (each spans several)",
        of=(("selection_blocks", ("multi_tile",)),)),
    "sparse_sub_tile_blocks": CoverageClass(
        "block-sparse: selection blocks smaller than the kernel's tiles (its tiles shrink to them)",
        of=(("selection_blocks", ("sub_tile",)),)),
    # float8 inputs, and the E8M0 block-scale patterns of MXFP8 calls (views over the scaling dimension)
    "float8_e4m3fn": CoverageClass("float8 e4m3 inputs (forward only)", of=(("dtype", ("float8_e4m3fn",)),),
                                   view=True),
    **{f"mxfp8_{p}": CoverageClass(f"MXFP8 block scales: {dimension('scaling').classes[p]}",
                                   of=(("scaling", (p,)),), view=True) for p in SCALE_PATTERNS},
}
CLASSES: dict[str, str] = {name: c.description for name, c in COVERAGE.items()}
# The views name dimensions decided by the case alone (mode, mask, heads, dims, dtype, offsets, layout, values): any
# target classifies them alike (the SM count given: no device is asked for its own).
_ANY_TARGET = Target(None, num_sms=1)

# Window classes: reached only for kernels that declare a window mask.
WINDOW_CLASSES = tuple(c for c in CLASSES if c.startswith("window"))
# Block-sparse classes: reached only for kernels that declare block_sparse pairs.
SPARSE_CLASSES = tuple(c for c in CLASSES if c.startswith("sparse_"))
# Float8 classes (plain and MXFP8): reached only for kernels that declare float8 inputs (and block scales).
FP8_CLASSES = tuple(c for c in CLASSES if c == "float8_e4m3fn" or c.startswith("mxfp8_"))
# Classes a CPU campaign is expected to reach; offset_overflow is GPU only; windows, block selections and float8
# inputs need a kernel with them.
CPU_EXPECTED = tuple(c for c in CLASSES
                     if c != "offset_overflow" and c not in WINDOW_CLASSES + SPARSE_CLASSES + FP8_CLASSES)
# Classes a table shows only when a case had one of the group or the run expects one (a run without them reads as
# it did before they existed).
_OPTIONAL_GROUPS = (WINDOW_CLASSES, SPARSE_CLASSES, FP8_CLASSES)


def expected_classes(device_type: str = "cpu", capabilities=None) -> tuple[str, ...]:
    """The classes a run on ``device_type`` (``"cuda"`` or ``"cpu"``) is expected to reach: every class on
    CUDA, every class but the GPU-only ``offset_overflow`` elsewhere, less (with ``capabilities``, a kernel's
    :class:`~jfa_verify.protocol.kernel.Capabilities`) the classes no case of that kernel can reach
    (:func:`unsupported_classes`). Without ``capabilities`` a CPU run expects no window class either
    (:data:`CPU_EXPECTED`: not every kernel has windows), and on either device no block-sparse or float8 class (nor
    does a kernel declaring no ``block_sparse`` pair, no float8 dtype or no ``mxfp8``)."""
    if capabilities is None:
        return tuple(c for c in CLASSES if c not in SPARSE_CLASSES + FP8_CLASSES) if device_type == "cuda" \
            else CPU_EXPECTED
    outside = unsupported_classes(capabilities)
    return tuple(c for c in CLASSES if c not in outside and (device_type == "cuda" or c != "offset_overflow"))


def unsupported_classes(caps) -> set[str]:
    """The classes no case inside ``caps`` (a kernel's :class:`~jfa_verify.protocol.kernel.Capabilities`) can reach,
    read off the contract model (:mod:`jfa_verify.cases.dimensions`, whose support rules its covering arrays
    follow): a class is out when, for some dimension it is a view of (:attr:`CoverageClass.of`), the kernel
    reaches none of the classes named."""
    from jfa_verify.cases.construct import reachable
    from jfa_verify.cases.dimensions import Target

    target = Target(caps)
    return {name for name, c in COVERAGE.items()
            if not all(any(reachable(d, cls, target) for cls in classes) for d, classes in c.of)}


def _near_multiple(n: int, block: int) -> bool:
    return block > 1 and n >= block - 1 and (n + 1) % block in (0, 1, 2)


def _is_prime(n: int) -> bool:
    return n >= 5 and all(n % p for p in range(2, int(n**0.5) + 1))


def _window_classes(case: Case, block_m: int, block_n: int) -> set[str]:
    from jfa_verify.core.contract import key_range

    left, right = case.window
    out = set()
    sides = (left, right)
    if 0 in sides:
        out.add("window_zero")
    if left != right:
        out.add("window_asymmetric")
    if -1 in sides:
        out.add("window_unbounded_side")
    if any(w >= 0 and any(abs(w - b) == 1 for b in (block_m, block_n)) for w in sides):
        out.add("window_tile_edge")
    longest = max((*case.query_lengths, *case.kv_lengths), default=0)
    if any(w >= max(1, longest) for w in sides):
        out.add("window_wider_than_sequence")
    for lq, lk in zip(case.query_lengths, case.kv_lengths):
        # rows that see nothing sit at either end of a sequence (key_range's ends are monotone)
        if lq and lk and any(lo == hi for lo, hi in (key_range(i, lq, lk, case.causal, case.causal_alignment,
                                                              case.window) for i in (0, lq - 1))):
            out.add("window_empty_rows")
            break
    return out


def views_of(dimension_name: str) -> dict[str, str]:
    """The coverage classes that view the dimension ``dimension_name`` (name -> description)."""
    return {n: c.description for n, c in COVERAGE.items() if any(d == dimension_name for d, _ in c.of)}


def _views(case: Case) -> set[str]:
    """The classes of :data:`COVERAGE` that are views (:attr:`CoverageClass.view`) holding for ``case``, read off the
    classifiers of the dimensions they name (which need no tiles: the case alone decides them)."""
    found: dict[str, set] = {}

    def classes_of(name: str) -> set:
        if name not in found:
            found[name] = dimension(name).classify(case, _ANY_TARGET)
        return found[name]

    return {name for name, c in COVERAGE.items() if c.view and all(classes_of(d) & set(cs) for d, cs in c.of)}


def element_extent(case: Case) -> int:
    """The largest element count of q, k, v or dO (rows before ``offsets_start`` included)."""
    pad = case.offsets_start
    if case.mode == "broadcast_q":
        q_rows, do_rows = case.broadcast_q_len, case.batch * case.broadcast_q_len
    else:
        q_rows = do_rows = case.q_start + sum(case.query_lengths)
    k_rows = pad + sum(case.kv_lengths)
    return max(
        q_rows * case.num_heads_q * case.head_dim,
        k_rows * case.num_heads_kv * max(case.head_dim, case.dv),
        do_rows * case.num_heads_q * case.dv,
    )


def classify(case: Case, block_sizes: tuple[int, int] = (32, 16)) -> set[str]:
    """The input classes (keys of :data:`CLASSES`) that ``case`` belongs to.

    Args:
        case: the case.
        block_sizes: the kernel's ``(BLOCK_M, BLOCK_N)`` for this case, e.g.
            ``tiles_for_shape(kernel, case.head_dim, case.dv, case.torch_dtype, device_type).as_tuple()``.
    """
    block_m, block_n = block_sizes
    q, k = case.query_lengths, case.kv_lengths
    out = _views(case)
    if any(n == 0 for n in q):
        out.add("zero_length_q")
    if any(n == 0 for n in k):
        out.add("zero_length_k")
    if k and all(n == 0 for n in k):
        out.add("all_empty")
    if sum(k) < case.batch:
        out.add("total_lt_batch")
    if 1 in q or 1 in k:
        out.add("one_token")
    if case.batch == 1:
        out.add("single_sequence")
    if case.batch == 0:
        out.add("no_sequences")
    if any(_near_multiple(n, block_m) for n in q) or any(_near_multiple(n, block_n) for n in k):
        out.add("tile_boundary")
    if any(n > block_m for n in q) or any(n > block_n for n in k):
        out.add("multi_tile")
    if any(_is_prime(n) for n in (*q, *k)):
        out.add("prime_length")
    if case.batch >= 2:
        ordered = sorted(k)
        if ordered[-1] >= 8 * max(1.0, statistics.median(ordered[:-1])):
            out.add("skew")
    if case.mode == "broadcast_q" and case.broadcast_q_len > block_m:
        out.add("broadcast_q_multi_tile")
    if any(a != b for a, b in zip(q, k)):
        out.add("q_ne_k")
    if case.causal and any(a != b for a, b in zip(q, k)):
        out.add("causal_misaligned")
    if case.window is not None:
        out |= _window_classes(case, block_m, block_n)
    dims = {case.head_dim, case.dv}
    if any(d % 2 for d in dims):
        out.add("odd_head_dim")
    if any(d & (d - 1) for d in dims):
        out.add("non_pow2_head_dim")
    if case.offsets_start > 0 or case.q_start > 0:
        out.add("offsets_nonzero_start")
    if element_extent(case) > 2**31:
        out.add("offset_overflow")
    if case.block_sparsity is not None and any(
            q[b] and k[b] and any(0 <= n < case.batch and k[n] for n in (b - 1, b + 1)) for b in range(case.batch)):
        out.add("sparse_beside_neighbours")  # its selected blocks sit next to another sequence's keys
    if case.block_sparsity is not None:  # (read at the kernel's tiles, which a view's stand-in target has not)
        out |= {f"sparse_{r}_blocks" for r in blocks_against_tiles(case.block_sparsity.block_sizes, block_sizes)
                if r != "tiles"}
    return out


BlockSizes = Union[tuple[int, int], Callable[[Case], tuple[int, int]]]


class Coverage:
    """Counts of input classes over the cases of a run.

    Args:
        block_sizes: ``(BLOCK_M, BLOCK_N)``, or a function of the case returning
            them (tiles often depend on the head dim); see :meth:`for_kernel`.

    ``counts[name]`` is the number of cases in class ``name``; ``total`` the
    number of cases added.
    """

    def __init__(self, block_sizes: BlockSizes = (32, 16), capabilities=None):
        self._blocks = block_sizes
        self.capabilities = capabilities  # the kernel's: classes outside them are not expected
        self.counts: Counter = Counter()
        self.total = 0

    @classmethod
    def for_kernel(cls, kernel, device_type: str = "cpu") -> "Coverage":
        """Coverage using ``kernel``'s own tile sizes for each case's shape (generic tiles for a kernel
        that declares none) and its capabilities (classes outside them are not expected of its runs)."""
        from jfa_verify.protocol.kernel import tiles_for_shape

        return cls(lambda case: tiles_for_shape(kernel, case.head_dim, case.dv, case.torch_dtype,
                                                device_type).as_tuple(), getattr(kernel, "capabilities", None))

    def add(self, case: Case) -> set[str]:
        """Count ``case``; returns its classes."""
        blocks = self._blocks(case) if callable(self._blocks) else self._blocks
        classes = classify(case, blocks)
        self.counts.update(classes)
        self.total += 1
        return classes

    def update(self, cases: Iterable[Case]) -> "Coverage":
        for c in cases:
            self.add(c)
        return self

    def missing(self, expected: Optional[Iterable[str]] = None) -> list[str]:
        """Classes in ``expected`` (default: those a CPU run of the kernel can reach, :func:`expected_classes`)
        never drawn."""
        expected = expected_classes("cpu", self.capabilities) if expected is None else expected
        return [c for c in expected if not self.counts.get(c)]

    def to_dict(self) -> dict:
        return {"total": self.total, "counts": dict(sorted(self.counts.items()))}

    def format(self, expected: Optional[Iterable[str]] = None, device_type: str = "cpu") -> str:
        """A plain-text table: class, count, share of cases, description; then the classes never drawn.

        ``expected``: the classes the run should reach (default: :func:`expected_classes` of
        ``device_type``). A class the table shows at 0 that is not expected is listed apart ("not expected
        on cpu: ..."), so "never drawn" names every other class at 0. The window classes are listed only
        when some case had a window or ``expected`` names one (a run without windows reads as it did
        before windows existed), and the block-sparse and float8 classes alike."""
        expected = tuple(expected_classes(device_type, self.capabilities) if expected is None else expected)
        shown = set(expected) | set(self.counts)
        rows = {name: desc for name, desc in CLASSES.items()
                if all(name not in group or name in shown or any(c in shown for c in group)
                       for group in _OPTIONAL_GROUPS)}
        width = max(len(c) for c in rows)
        lines = [f"coverage over {self.total} case(s)", f"  {'class':{width}s} {'count':>6s} {'share':>6s}"]
        for name, desc in rows.items():
            n = self.counts.get(name, 0)
            share = f"{100 * n / self.total:5.1f}%" if self.total else "    -"
            lines.append(f"  {name:{width}s} {n:6d} {share:>6s}  {desc}")
        gone = self.missing(expected)
        lines.append(f"  never drawn: {', '.join(gone) if gone else 'none'}")
        unexpected = [c for c in rows if c not in expected and not self.counts.get(c)]
        outside = unsupported_classes(self.capabilities) if self.capabilities is not None else set()
        if [c for c in unexpected if c in outside]:
            lines.append(f"  outside the kernel's capabilities: {', '.join(c for c in unexpected if c in outside)}")
        if [c for c in unexpected if c not in outside]:
            lines.append(f"  not expected on {device_type}: {', '.join(c for c in unexpected if c not in outside)}")
        return "\n".join(lines)
