"""Input-class coverage: which corners of the input space a run exercised, with counts.

:func:`classify` names the classes one case belongs to, from the case alone
(lengths, heads, dims, flags) and the kernel's tile sizes; :class:`Coverage`
counts them over a run, so a campaign that never drew a class is visible.
Classes are defined on what the case *is*, not on the strategy that drew it
(a Pareto draw is not recognisable from its lengths; its skew is).
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Callable, Iterable, Optional, Union

from jfa_verify.cases.case import Case
from jfa_verify.core.masks import CAUSAL_ALIGNMENTS, Mask

__all__ = ["CLASSES", "CPU_EXPECTED", "WINDOW_CLASSES", "Coverage", "classify", "element_extent", "expected_classes",
           "unsupported_classes"]

CLASSES: dict[str, str] = {
    "self": "self-attention",
    "cross": "cross-attention (separate query offsets)",
    "broadcast_q": "broadcast-Q (one dense Q for every sequence)",
    "broadcast_q_multi_tile": "broadcast-Q with L_q spanning more than one BLOCK_M tile",
    "zero_length_q": "a sequence with no query rows",
    "zero_length_k": "a sequence with no keys",
    "all_empty": "every sequence has no keys",
    "total_lt_batch": "fewer key tokens in total than sequences",
    "one_token": "a 1-token query or key sequence",
    "single_sequence": "a batch of one sequence",
    "no_sequences": "a batch of no sequence (B = 0: offsets of one entry)",
    "tile_boundary": "a length at a multiple of BLOCK_M (queries) or BLOCK_N (keys) +-1",
    "multi_tile": "a sequence spanning more than one tile",
    "prime_length": "a prime length >= 5",
    "skew": "the longest sequence is >= 8x the median of the others (one mega-sequence)",
    "q_ne_k": "a sequence whose query length differs from its key length",
    "causal_top_left": "causal, top-left alignment",
    "causal_bottom_right": "causal, bottom-right alignment",
    "causal_misaligned": "causal with some query length != key length (alignment matters)",
    "window": "a sliding window (left, right)",
    "window_causal": "a sliding window with causal",
    "window_zero": "a window side of 0 (only the diagonal on that side)",
    "window_asymmetric": "a window with left != right",
    "window_unbounded_side": "a window side of -1 (unbounded)",
    "window_tile_edge": "a window side at BLOCK_M or BLOCK_N +-1",
    "window_wider_than_sequence": "a window side at least as long as the longest sequence",
    "window_empty_rows": "a query row the window leaves with no key (its keys are all out of reach)",
    "gqa": "grouped-query attention (1 < H_kv < H_q)",
    "mqa": "multi-query attention (H_kv = 1 < H_q)",
    "odd_head_dim": "an odd query/key or value head dim",
    "non_pow2_head_dim": "a head dim that is not a power of two",
    "distinct_value_head_dim": "value head dim != query/key head dim",
    "offsets_nonzero_start": "offsets[0] > 0 (a view into a larger buffer)",
    "distinct_offsets_start": "q_offsets[0] != k_offsets[0] (cross-attention)",
    "strided_offsets": "offsets as strided views (columns of one [B + 1, 2] tensor; outside the contract)",
    "int64_offsets": "int64 offsets",
    "strided": "non-contiguous q/k/v/dO",
    "head_dim_strided": "q/k/v/dO with a head-dim stride other than 1",
    "offset_overflow": "a tensor with more than 2**31 elements (int32 index overflow)",
    "large_logits": "large logits (saturated softmax)",
    "correlated": "low-rank, correlated activations",
    "near_ties": "near-tied scores",
    "tiny": "tiny values",
    "float32": "float32",
    "bfloat16": "bfloat16",
    "float16": "float16",
}

# Window classes: reached only for kernels that declare a window mask.
WINDOW_CLASSES = tuple(c for c in CLASSES if c.startswith("window"))
# Classes a CPU campaign is expected to reach; offset_overflow is GPU only; windows need a kernel with them.
CPU_EXPECTED = tuple(c for c in CLASSES if c != "offset_overflow" and c not in WINDOW_CLASSES)


def expected_classes(device_type: str = "cpu", capabilities=None) -> tuple[str, ...]:
    """The classes a run on ``device_type`` (``"cuda"`` or ``"cpu"``) is expected to reach: every class on
    CUDA, every class but the GPU-only ``offset_overflow`` elsewhere, less (with ``capabilities``, a kernel's
    :class:`~jfa_verify.protocol.kernel.Capabilities`) the classes no case of that kernel can reach
    (:func:`unsupported_classes`). Without ``capabilities`` a CPU run expects no window class either
    (:data:`CPU_EXPECTED`: not every kernel has windows)."""
    if capabilities is None:
        return tuple(CLASSES) if device_type == "cuda" else CPU_EXPECTED
    outside = unsupported_classes(capabilities)
    return tuple(c for c in CLASSES if c not in outside and (device_type == "cuda" or c != "offset_overflow"))


def unsupported_classes(caps) -> set[str]:
    """The classes no case inside ``caps`` (a kernel's :class:`~jfa_verify.protocol.kernel.Capabilities`) can reach,
    read off the contract model's support rules (:mod:`jfa_verify.cases.dimensions`, the rules its covering arrays
    follow): modes, masks and windows (and the two together), GQA/MQA, head dims, dtypes, strided inputs."""
    from jfa_verify.cases.construct import head_dims_for
    from jfa_verify.cases.dimensions import dimension

    def ok(dim: str, *classes: str) -> bool:
        return any(dimension(dim).support(c, caps) is None for c in classes)

    def dims(head_dim=None, value_dim=None) -> bool:
        return head_dims_for(head_dim, value_dim, caps) is not None

    unequal = ok("mode", "cross", "broadcast_q")  # some L_q != L_k
    masks = [m for m in map(Mask.parse, dimension("mask").classes) if ok("mask", str(m))]
    causal = any(m.causal for m in masks)
    windowed, causal_window = any(m.windowed for m in masks), any(m.causal and m.windowed for m in masks)
    other_dv = [c for c in dimension("value_dim").classes if c != "same"]
    reach = {
        "self": ok("mode", "self"), "cross": ok("mode", "cross"), "broadcast_q": ok("mode", "broadcast_q"),
        "broadcast_q_multi_tile": ok("mode", "broadcast_q"), "q_ne_k": unequal,
        "distinct_offsets_start": ok("offsets_start", "distinct") and ok("mode", "cross"),
        **{f"causal_{a}": any(m.causal and m.alignment == a for m in masks) for a in CAUSAL_ALIGNMENTS},
        "causal_misaligned": causal and unequal,
        "gqa": ok("heads", "gqa_pow2", "gqa_non_pow2"), "mqa": ok("heads", "mqa"),
        "odd_head_dim": dims("odd"),  # an odd D_v is a head dim the kernel takes too
        "non_pow2_head_dim": dims("odd") or dims("non_pow2_even"),
        "distinct_value_head_dim": ok("value_dim", *other_dv) and any(dims(None, v) for v in other_dv),
        "strided": ok("layout", "strided", "mixed", "padded_to_16"), "head_dim_strided": ok("layout", "head_dim_strided"),
        **{c: ok("dtype", c) for c in ("float32", "bfloat16", "float16")},
        **{c: windowed for c in WINDOW_CLASSES},
        "window_causal": causal_window,
    }
    reach["window_asymmetric"] = reach["window"] and ok("window", "wider_left", "wider_right")
    reach["window_unbounded_side"] = reach["window"] and ok("window", "left_unbounded", "right_unbounded")
    return {c for c, reachable in reach.items() if not reachable}


def _near_multiple(n: int, block: int) -> bool:
    return block > 1 and n >= block - 1 and (n + 1) % block in (0, 1, 2)


def _is_prime(n: int) -> bool:
    return n >= 5 and all(n % p for p in range(2, int(n**0.5) + 1))


def _window_classes(case: Case, block_m: int, block_n: int) -> set[str]:
    from jfa_verify.core.contract import key_range

    left, right = case.window
    out = {"window"}
    if case.causal:
        out.add("window_causal")
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
    out = {case.mode, case.dtype}
    if case.values != "normal":
        out.add(case.values)
    if case.layout != "contiguous":
        out.add("strided")
    if case.layout == "head_dim_strided":
        out.add("head_dim_strided")
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
    if case.causal:
        out.add(f"causal_{case.causal_alignment}")
        if any(a != b for a, b in zip(q, k)):
            out.add("causal_misaligned")
    if case.window is not None:
        out |= _window_classes(case, block_m, block_n)
    if case.num_heads_q != case.num_heads_kv:
        out.add("mqa" if case.num_heads_kv == 1 else "gqa")
    dims = {case.head_dim, case.dv}
    if any(d % 2 for d in dims):
        out.add("odd_head_dim")
    if any(d & (d - 1) for d in dims):
        out.add("non_pow2_head_dim")
    if case.dv != case.head_dim:
        out.add("distinct_value_head_dim")
    if case.offsets_start > 0 or case.q_start > 0:
        out.add("offsets_nonzero_start")
    if case.distinct_starts:
        out.add("distinct_offsets_start")
    if case.offsets_layout != "contiguous":
        out.add("strided_offsets")
    if case.offsets_dtype == "int64":
        out.add("int64_offsets")
    if element_extent(case) > 2**31:
        out.add("offset_overflow")
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
        before windows existed)."""
        expected = tuple(expected_classes(device_type, self.capabilities) if expected is None else expected)
        shown = set(expected) | set(self.counts)
        rows = {name: desc for name, desc in CLASSES.items() if name not in WINDOW_CLASSES or name in shown
                or any(c in shown for c in WINDOW_CLASSES)}
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
