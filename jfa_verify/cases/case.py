"""A frozen, JSON-serializable description of one test case, and its tensors.

A :class:`Case` names everything that decides the inputs (lengths, heads, head
dims, dtype, masking, offsets layout, value distribution, seed), is validated
when it is built, and materializes the same bits on any machine: values are
computed in float32 by a counter-based generator (:mod:`.counter_normals`) on
the target device itself, then rounded to the case dtype there. Case files written
before that generator existed (no ``generator`` field) replay with NumPy's PCG64
stream drawn on the host, as they were made.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from dataclasses import asdict, dataclass, field, fields
from typing import Optional

import numpy as np
import torch

from jfa_verify.cases.counter_normals import counter_normals
from jfa_verify.cases.scaling import Scaling
from jfa_verify.cases.sparsity import Sparsity
from jfa_verify.core.contract import CAUSAL_ALIGNMENTS, MODES, JaggedProblem, Mask, check_window, validate_inputs
from jfa_verify.core.dtypes import DTYPES, OFFSET_DTYPES, output_dtype
from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.mxfp8 import MX_BLOCK, BlockScales
from jfa_verify.core.selection import BlockSelection

__all__ = ["Case", "CaseTensors", "GENERATORS", "LAYOUTS", "OFFSETS_LAYOUTS", "VALUE_DISTRIBUTIONS"]

VALUE_DISTRIBUTIONS = ("normal", "large_logits", "correlated", "near_ties", "tiny")
LAYOUTS = ("contiguous", "strided", "mixed", "head_dim_strided", "padded_to_16", "misaligned_k", "misaligned_v",
           "token_padded")
# "strided": q_offsets and k_offsets are the two columns of one [B + 1, 2] tensor (views with
# stride 2), the natural way to hold both; outside the contract, so a kernel must reject them or
# compute the right result, never read them as if dense.
OFFSETS_LAYOUTS = ("contiguous", "strided")
# Tensor-layout names that the strategies drew for offsets by a copying slip (cd50883 until this list was
# fixed): laid out as "contiguous", and case files that recorded them still replay so.
_LEGACY_OFFSETS_LAYOUTS = ("mixed", "head_dim_strided")
# "counter": values computed on the target device by a counter-based hash (the default); "pcg64": NumPy's
# PCG64 stream on the host, what every case file without a ``generator`` field was made with.
GENERATORS = ("counter", "pcg64")
# Fields added after the first case-file format, with the value a case file that lacks them means: left
# out of ``to_dict`` (and so of ``case_id``) while they hold it, so old case files and ids stay valid.
# ``generator`` is the one whose file meaning ("pcg64") differs from the dataclass default ("counter").
_LATE_FIELDS = {"layout": "contiguous", "offsets_layout": "contiguous", "instrument": True, "window": None,
                "q_offsets_start": None, "generator": "pcg64", "parts": None, "block_sparsity": None,
                "block_scaling": None}
# Fields a packed case's parts may differ in (:meth:`Case.pack`); every other input field they share.
_PART_FIELDS = ("kv_lengths", "q_lengths", "seed")


@dataclass(frozen=True)
class CaseTensors:
    """Materialized inputs of a case (all on one device).

    ``q``: ``[T_q, H_q, D]`` (broadcast-Q: ``[L_q, H_q, D]``); ``k``: ``[T_k, H_kv, D]``;
    ``v``: ``[T_k, H_kv, D_v]``; ``q_offsets``: ``[B + 1]`` or None (broadcast-Q);
    ``k_offsets``: ``[B + 1]``; ``do``: the output gradient ``[rows, H_q, D_v]``; ``block_selection``: the
    block-sparse case's :class:`~jfa_verify.core.selection.BlockSelection` on the same device (None: dense);
    ``block_scales``: an MXFP8 case's :class:`~jfa_verify.core.mxfp8.BlockScales` on the same device (None: none).
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    q_offsets: Optional[torch.Tensor]
    k_offsets: torch.Tensor
    do: torch.Tensor
    block_selection: Optional[BlockSelection] = None
    block_scales: Optional[BlockScales] = None

    def call_args(self) -> tuple:
        """``(q, k, v, q_offsets, k_offsets)`` as the kernel receives them."""
        return (self.q, self.k, self.v, self.q_offsets, self.k_offsets)

    def contract_args(self) -> tuple:
        """As :meth:`call_args` with contiguous offsets (the contract's form, for validation and oracles)."""
        dense = lambda t: None if t is None else t.contiguous()  # noqa: E731
        return (self.q, self.k, self.v, dense(self.q_offsets), dense(self.k_offsets))


def _int_tuple(name: str, values) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise InvalidInput(f"{name}={values!r} is not a list of token counts (ints >= 0)")
    for i, n in enumerate(values):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise InvalidInput(f"{name}[{i}]={n!r} is not an integer token count")
    return tuple(int(n) for n in values)


def _head_major(t: torch.Tensor, device) -> torch.Tensor:
    # dense, so the runner's stride-keeping copy keeps these strides
    return t.transpose(0, 1).contiguous().to(device).transpose(0, 1)


def _nan_padded(t: torch.Tensor, device, heads: int = 0, cols: int = 0) -> torch.Tensor:
    # ``t`` as a slice of a NaN-filled buffer with ``heads`` more heads and ``cols`` more head-dim columns
    # (sliced on the device: moving a slice would make it contiguous)
    wide = torch.full((t.shape[0], t.shape[1] + heads, t.shape[2] + cols), float("nan"), dtype=t.dtype,
                      device=t.device)
    wide[:, : t.shape[1], : t.shape[2]] = t
    return wide.to(device)[:, : t.shape[1], : t.shape[2]]


def _lay_out(t: torch.Tensor, role: str, layout: str, device) -> torch.Tensor:
    """``t`` (``[rows, heads, dim]``, contiguous, on the CPU or on ``device``) stored on ``device`` in ``layout``
    for its ``role`` (``"q"``, ``"k"``, ``"v"``, ``"do"``); same values, other strides."""
    if layout == "contiguous":
        return t.to(device)
    if layout == "head_dim_strided":
        # every other element of a NaN-filled buffer: stride 2 along D (a kernel assuming 1 reads NaN)
        wide = torch.full((*t.shape[:2], 2 * t.shape[2]), float("nan"), dtype=t.dtype, device=t.device)
        wide[..., ::2] = t
        return wide.to(device)[..., ::2]
    if layout == "strided":
        return _nan_padded(t, device, cols=3) if role == "do" else _head_major(t, device)
    if layout in ("misaligned_k", "misaligned_v"):
        # that input alone a slice of a NaN-filled buffer with an odd head stride (D + 1 or D + 2 columns), the
        # others contiguous: a kernel whose alignment check leaves one tensor out takes its fast path and reads that
        # tensor with rounded strides ("mixed" and "strided" leave q and dO alone misaligned; blind planted bug,
        # 2026-12-06)
        if role != layout[-1]:
            return t.to(device)
        return _nan_padded(t, device, cols=1 if t.shape[2] % 2 == 0 else 2)
    if layout == "token_padded":
        # a slice of a NaN-filled buffer whose token rows are 8 elements longer than H * D: the token stride alone
        # not a multiple of 16 where D and the head stride may be (an alignment check that leaves the token stride
        # out reads rows with a rounded stride: a blind planted bug, 2026-12-07)
        rows, heads, dim = t.shape
        wide = torch.full((rows, heads * dim + 8), float("nan"), dtype=t.dtype, device=t.device)
        wide[:, : heads * dim] = t.reshape(rows, heads * dim)
        return wide.to(device)[:, : heads * dim].view(rows, heads, dim)
    if layout == "padded_to_16":
        # slices of buffers whose head dim is padded up to a multiple of 16 elements, as TMA-fed code pads
        # them (16-byte-aligned strides): token and head strides divisible by 16 whatever D and D_v are,
        # so a kernel specializing on stride divisibility must not infer the dims' divisibility from it
        return _nan_padded(t, device, cols=16 - t.shape[2] % 16)
    # "mixed": four different stride patterns, so no tensor can be read with another's strides
    if role == "q":
        return _nan_padded(t, device, cols=8)
    if role == "v":
        return _nan_padded(t, device, heads=1)
    return _head_major(t, device)


def _value_scale(values: str, role: str) -> Optional[float]:
    """The power of two a value distribution scales ``role``'s normals by, or None: ``"large_logits"`` q and k by 8
    (|score| ~ 8 * 8 / sqrt(D) * sqrt(D) = 64: softmax rows nearly one-hot), ``"tiny"`` q, k and v by 2**-10."""
    if values == "large_logits" and role in ("q", "k"):
        return 8.0
    if values == "tiny" and role != "do":
        return 2.0**-10
    return None


def _offsets(lengths: tuple[int, ...], start: int) -> list[int]:
    out = [start]
    for n in lengths:
        out.append(out[-1] + n)
    return out


@dataclass(frozen=True)
class Case:
    """One JFA test case.

    Fields:
        kv_lengths: key/value length of each sequence (B = len). Also the query
            lengths for ``mode="self"``.
        mode: ``"self"``, ``"cross"`` (needs ``q_lengths``) or ``"broadcast_q"``
            (needs ``broadcast_q_len``: one dense Q of that many rows).
        num_heads_q, num_heads_kv: heads (GQA when they differ).
        head_dim, head_dim_v: query/key and value head dims (``head_dim_v``
            None means equal to ``head_dim``).
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        causal, causal_alignment: masking (``"top_left"`` or ``"bottom_right"``); the alignment
            places the diagonal of the causal mask and of the window.
        window: sliding window ``(left, right)`` (ints, ``-1`` unbounded on that side; JSON: a
            two-item list) or None; key ``j`` visible to query ``i`` iff
            ``d - left <= j <= d + right`` around the aligned diagonal ``d`` (with ``causal``: the
            intersection). ``(-1, -1)`` is stored as None. See :mod:`jfa_verify.core.contract`.
        offsets_dtype: ``"int32"`` or ``"int64"``.
        offsets_start: ``offsets[0]``; rows before it belong to no sequence.
        q_offsets_start: ``q_offsets[0]`` of a cross-attention case when it differs from
            ``k_offsets[0]`` (None: ``offsets_start``); q/O/dO rows before it belong to no sequence.
        offsets_layout: ``"contiguous"`` or ``"strided"`` (both offsets as columns of one
            ``[B + 1, 2]`` tensor: outside the contract, which the kernel must reject or
            handle correctly).
        values: value distribution: ``"normal"`` (unit Gaussian), ``"large_logits"``
            (scaled so softmax saturates), ``"correlated"`` (low-rank plus a
            shared offset, like real activations), ``"near_ties"`` (keys of a
            sequence nearly equal, so scores tie to within a few ulps and the
            softmax is flat), ``"tiny"`` (q, k, v scaled by 2**-10, so values
            sit near the bottom of the dtype's normal range).
            Input policy: every generated input is finite. Inf/NaN inputs are
            outside the contract (their outputs are unspecified) and are never
            drawn; a query row with no visible key is the only source of a
            non-finite output (LSE = -inf).
        layout: one of :data:`LAYOUTS`. ``"strided"``: q, k, v
            stored head-major (``[H, T, D]`` memory viewed as ``[T, H, D]``, so the
            token stride is not ``H * D``) and dO a slice of a wider buffer whose
            extra columns are NaN (a kernel that ignores strides reads them).
            ``"mixed"``: every tensor strided differently, so a kernel that reads
            one tensor with another's strides reads the wrong rows: q a slice of a
            buffer 8 head-dim columns wider (NaN-filled), k head-major, v a slice
            of a buffer with one more (NaN) head, dO head-major. ``"head_dim_strided"``:
            every tensor with a head-dim stride of 2. ``"padded_to_16"``: slices of buffers
            whose head dim is padded to a multiple of 16. ``"misaligned_k"`` /
            ``"misaligned_v"``: that tensor alone a slice of a buffer with an odd head
            stride, the others contiguous. ``"token_padded"``: every tensor a slice of a
            buffer whose token rows are 8 elements longer (token stride ``H * D + 8``). Same values as
            ``"contiguous"``; only the memory layout differs.
        sm_scale: softmax scale; None for ``1/sqrt(head_dim)``.
        instrument: ask an instrumented kernel for its launch plan and tile
            visits (the scheduler invariants are checked); False runs the
            production (uninstrumented) launch, which is judged by the same
            oracles. No effect on a kernel without instrumentation.
        seed: seed of the value generator.
        generator: ``"counter"`` (default): every value a pure function of
            (seed, tensor, index), computed on the target device, so a large case
            is not drawn on the host and copied (see :mod:`jfa_verify.cases.counter_normals`);
            ``"pcg64"``: NumPy's PCG64 stream on the host, what case files
            written without this field replay with. Both give the same bits on
            every device.
        parts: None, or a packed case (:meth:`pack`): several cases that share every other field, their
            sequences concatenated into one batch, as ``((sequences, seed), ...)`` in batch order (JSON: a
            list of two-item lists; at least two parts, each of at least one sequence). Each part's values
            are those of the case standing alone (:meth:`split` gives them back), so a part cut out of the
            packed run is judged on the same numbers; ``seed`` is the first part's. Not for broadcast-Q,
            whose one dense Q all sequences share.
        block_sparsity: None (dense), or how a block-sparse case's selection is drawn
            (:class:`~jfa_verify.cases.sparsity.Sparsity`: block sizes, pattern, ratio; JSON: an object of those
            fields); :meth:`materialize` draws it from the lengths and seed into ``CaseTensors.block_selection``,
            the call's ``block_selection=``.
        block_scaling: None (no block scales), or how an MXFP8 case's E8M0 block scales are drawn
            (:class:`~jfa_verify.cases.scaling.Scaling`: a pattern; JSON: ``{"pattern": ...}``); needs
            ``dtype="float8_e4m3fn"`` and head dims that are multiples of 32; :meth:`materialize` draws the scales
            from the shape and seed into ``CaseTensors.block_scales``, the call's ``block_scales=``.
        name: a label for reports; not part of the inputs.

    Raises:
        InvalidInput: at construction, for any inconsistent or out-of-range field.
    """

    kv_lengths: tuple[int, ...]
    mode: str = "self"
    q_lengths: Optional[tuple[int, ...]] = None
    broadcast_q_len: Optional[int] = None
    num_heads_q: int = 2
    num_heads_kv: int = 2
    head_dim: int = 32
    head_dim_v: Optional[int] = None
    dtype: str = "bfloat16"
    causal: bool = False
    causal_alignment: str = "top_left"
    window: Optional[tuple[int, int]] = None
    offsets_dtype: str = "int32"
    offsets_start: int = 0
    offsets_layout: str = "contiguous"
    values: str = "normal"
    layout: str = "contiguous"
    sm_scale: Optional[float] = None
    seed: int = 0
    instrument: bool = True
    q_offsets_start: Optional[int] = None
    generator: str = "counter"
    parts: Optional[tuple[tuple[int, int], ...]] = None
    block_sparsity: Optional[Sparsity] = None
    block_scaling: Optional[Scaling] = None
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kv_lengths", _int_tuple("kv_lengths", self.kv_lengths))
        if self.q_lengths is not None:
            object.__setattr__(self, "q_lengths", _int_tuple("q_lengths", self.q_lengths))
        object.__setattr__(self, "window", check_window(self.window))
        object.__setattr__(self, "block_sparsity", Sparsity.of(self.block_sparsity))
        object.__setattr__(self, "block_scaling", Scaling.of(self.block_scaling))
        for name in ("broadcast_q_len", "num_heads_q", "num_heads_kv", "head_dim", "head_dim_v", "offsets_start",
                     "q_offsets_start", "seed"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
                raise InvalidInput(f"{name}={value!r} is not an integer")
        for name in ("causal", "instrument"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInput(f"{name}={getattr(self, name)!r} is not a bool; use true or false")
        choices = {"mode": MODES, "dtype": tuple(DTYPES), "causal_alignment": CAUSAL_ALIGNMENTS,
                   "offsets_dtype": tuple(OFFSET_DTYPES), "offsets_layout": OFFSETS_LAYOUTS,
                   "values": VALUE_DISTRIBUTIONS, "layout": LAYOUTS, "generator": GENERATORS, "name": None}
        for name, options in choices.items():
            if not isinstance(getattr(self, name), str):
                fix = f"; give one of {options}" if options else ""
                raise InvalidInput(f"{name}={getattr(self, name)!r} is not a string{fix}")
        if self.sm_scale is not None and (isinstance(self.sm_scale, bool) or not isinstance(self.sm_scale, numbers.Real)
                                          or not math.isfinite(self.sm_scale)):
            raise InvalidInput(f"sm_scale={self.sm_scale!r} is not a finite number (or null for 1/sqrt(head_dim))")
        if any(n < 0 for n in self.kv_lengths):
            raise InvalidInput(f"kv_lengths={self.kv_lengths} has a negative length; lengths are token counts >= 0")
        if self.mode not in MODES:
            raise InvalidInput(f"mode={self.mode!r} is not one of {MODES}")
        if self.mode == "cross":
            if self.q_lengths is None or len(self.q_lengths) != len(self.kv_lengths):
                raise InvalidInput(
                    f"mode='cross' needs q_lengths with one entry per sequence "
                    f"(len(kv_lengths)={len(self.kv_lengths)}), got q_lengths={self.q_lengths}"
                )
            if any(n < 0 for n in self.q_lengths):
                raise InvalidInput(f"q_lengths={self.q_lengths} has a negative length")
        elif self.q_lengths is not None:
            raise InvalidInput(f"q_lengths={self.q_lengths} is only for mode='cross' (mode={self.mode!r})")
        if self.mode == "broadcast_q":
            if self.broadcast_q_len is None or self.broadcast_q_len < 0:
                raise InvalidInput(f"mode='broadcast_q' needs broadcast_q_len >= 0, got {self.broadcast_q_len}")
        elif self.broadcast_q_len is not None:
            raise InvalidInput(f"broadcast_q_len={self.broadcast_q_len} is only for mode='broadcast_q'")
        for name in ("num_heads_q", "num_heads_kv", "head_dim"):
            if getattr(self, name) < 1:
                raise InvalidInput(f"{name}={getattr(self, name)} must be >= 1")
        if self.head_dim_v is not None and self.head_dim_v < 1:
            raise InvalidInput(f"head_dim_v={self.head_dim_v} must be >= 1 or None")
        if self.num_heads_q % self.num_heads_kv:
            raise InvalidInput(
                f"num_heads_q={self.num_heads_q} is not a multiple of num_heads_kv={self.num_heads_kv}"
            )
        if self.dtype not in DTYPES:
            raise InvalidInput(f"dtype={self.dtype!r} is not one of {tuple(DTYPES)}")
        if self.causal_alignment not in CAUSAL_ALIGNMENTS:
            raise InvalidInput(f"causal_alignment={self.causal_alignment!r} is not one of {CAUSAL_ALIGNMENTS}")
        if self.offsets_dtype not in OFFSET_DTYPES:
            raise InvalidInput(f"offsets_dtype={self.offsets_dtype!r} is not one of {tuple(OFFSET_DTYPES)}")
        if self.offsets_start < 0:
            raise InvalidInput(f"offsets_start={self.offsets_start} must be >= 0")
        if self.q_offsets_start is not None:
            if self.mode != "cross":
                raise InvalidInput(f"q_offsets_start={self.q_offsets_start} is only for mode='cross' "
                                   f"(mode={self.mode!r}); self-attention and broadcast-Q have one start")
            if self.q_offsets_start < 0:
                raise InvalidInput(f"q_offsets_start={self.q_offsets_start} must be >= 0 or null")
        if self.values not in VALUE_DISTRIBUTIONS:
            raise InvalidInput(f"values={self.values!r} is not one of {VALUE_DISTRIBUTIONS}")
        if self.generator not in GENERATORS:
            raise InvalidInput(f"generator={self.generator!r} is not one of {GENERATORS}")
        if self.layout not in LAYOUTS:
            raise InvalidInput(f"layout={self.layout!r} is not one of {LAYOUTS}")
        if self.offsets_layout not in OFFSETS_LAYOUTS + _LEGACY_OFFSETS_LAYOUTS:
            raise InvalidInput(f"offsets_layout={self.offsets_layout!r} is not one of {OFFSETS_LAYOUTS}")
        if self.seed < 0 or self.seed >= 2**63:
            raise InvalidInput(f"seed={self.seed} must be in [0, 2**63)")
        if self.parts is not None:
            object.__setattr__(self, "parts", self._checked_parts())
        if self.block_scaling is not None and (self.dtype != "float8_e4m3fn" or self.head_dim % MX_BLOCK
                                               or self.dv % MX_BLOCK):
            raise InvalidInput(f"block_scaling={self.block_scaling.pattern!r} needs dtype='float8_e4m3fn' and head "
                               f"dims that are multiples of {MX_BLOCK}, got dtype={self.dtype!r}, head_dim="
                               f"{self.head_dim}, head_dim_v={self.dv}; change them or set block_scaling to null")

    def _checked_parts(self) -> tuple[tuple[int, int], ...]:
        shape = "give a list of [sequences, seed] pairs, one per packed case, or null"
        if isinstance(self.parts, (str, bytes)) or not isinstance(self.parts, (list, tuple)):
            raise InvalidInput(f"parts={self.parts!r} is not a list; {shape}")
        parts = []
        for i, part in enumerate(self.parts):
            if (isinstance(part, (str, bytes)) or not isinstance(part, (list, tuple)) or len(part) != 2
                    or any(isinstance(n, bool) or not isinstance(n, numbers.Integral) for n in part)):
                raise InvalidInput(f"parts[{i}]={part!r} is not a [sequences, seed] pair of integers; {shape}")
            n, seed = int(part[0]), int(part[1])
            if n < 1:
                raise InvalidInput(f"parts[{i}]={part!r}: a part holds at least one sequence")
            if not 0 <= seed < 2**63:
                raise InvalidInput(f"parts[{i}]={part!r}: its seed must be in [0, 2**63)")
            parts.append((n, seed))
        if len(parts) < 2:
            raise InvalidInput(f"parts={self.parts!r}: a packed case has at least two parts (one part is the case "
                               f"itself: give its seed and no parts)")
        if self.mode == "broadcast_q":
            raise InvalidInput("parts: broadcast-Q cases are not packed (their sequences share one dense Q, which "
                               "cases of other seeds do not)")
        if sum(n for n, _ in parts) != self.batch:
            raise InvalidInput(f"parts={self.parts!r} hold {sum(n for n, _ in parts)} sequences, but the case has "
                               f"{self.batch} (len(kv_lengths)); the parts' sequence counts must add up to it")
        if parts[0][1] != self.seed:
            raise InvalidInput(f"parts[0] has seed {parts[0][1]} but seed={self.seed}; a packed case's seed is its "
                               f"first part's")
        return tuple(parts)

    # -- derived sizes -------------------------------------------------------------
    @property
    def batch(self) -> int:
        return len(self.kv_lengths)

    @property
    def query_lengths(self) -> tuple[int, ...]:
        """Query rows per sequence, whatever the mode."""
        if self.mode == "self":
            return self.kv_lengths
        if self.mode == "cross":
            return self.q_lengths
        return (self.broadcast_q_len,) * self.batch

    @property
    def q_start(self) -> int:
        """``q_offsets[0]``: the query (and O, dO) rows before the first sequence (0 under broadcast-Q)."""
        if self.mode == "broadcast_q":
            return 0
        return self.offsets_start if self.q_offsets_start is None else self.q_offsets_start

    @property
    def distinct_starts(self) -> bool:
        """``q_offsets[0] != k_offsets[0]`` (cross-attention only)."""
        return self.q_offsets_start is not None and self.q_offsets_start != self.offsets_start

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def problem(self, tensors: CaseTensors) -> JaggedProblem:
        """Validate this case's tensors once (contiguous offsets: :meth:`CaseTensors.contract_args`; the block
        selection of a block-sparse case)."""
        return validate_inputs(*tensors.contract_args(), **self.contract_kwargs(),
                               block_selection=tensors.block_selection, block_scales=tensors.block_scales)

    def selected_blocks(self) -> Optional[list[list[list[int]]]]:
        """The block selection :meth:`materialize` makes (per sequence, per query block, its KV blocks), or None
        for a dense case. A packed case's parts draw theirs as they would standing alone."""
        if self.block_sparsity is None:
            return None
        return [blocks for part in self.split()
                for blocks in self.block_sparsity.blocks(part.query_lengths, part.kv_lengths, part.seed)]

    def contract_kwargs(self) -> dict:
        """The call's keyword arguments: ``causal``, ``causal_alignment``, ``sm_scale`` and, for a windowed
        case only, ``window``."""
        extra = {} if self.window is None else {"window": self.window}
        return dict(causal=self.causal, causal_alignment=self.causal_alignment, sm_scale=self.sm_scale, **extra)

    @property
    def dv(self) -> int:
        return self.head_dim_v if self.head_dim_v is not None else self.head_dim

    def tokens(self) -> int:
        """Total query plus key rows: a size measure for scaling and reporting."""
        return sum(self.query_lengths) + sum(self.kv_lengths)

    # -- identity and serialization ------------------------------------------------
    def to_dict(self) -> dict:
        d = asdict(self)
        d["kv_lengths"] = list(self.kv_lengths)
        for name, default in _LATE_FIELDS.items():
            if d[name] == default:
                del d[name]
        if self.window is not None:
            d["window"] = list(self.window)
        if self.q_lengths is not None:
            d["q_lengths"] = list(self.q_lengths)
        if self.parts is not None:
            d["parts"] = [list(p) for p in self.parts]
        return d  # (asdict made block_sparsity a dict of its fields)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "Case":
        """Build a case from :meth:`to_dict` output (a packed case without ``seed`` takes its first part's).

        Raises:
            InvalidInput: unknown keys or invalid values.
        """
        if not isinstance(d, dict):
            raise InvalidInput(f"a case is a JSON object of fields, got a {type(d).__name__}: {str(d)[:80]}")
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise InvalidInput(f"unknown case fields {sorted(unknown)}; known: {sorted(known)}")
        if "kv_lengths" not in d:
            raise InvalidInput(f"a case needs kv_lengths (a list of key lengths); got only {sorted(d) or 'no fields'}")
        if "seed" not in d and isinstance(d.get("parts"), (list, tuple)) and d["parts"] \
                and isinstance(d["parts"][0], (list, tuple)) and len(d["parts"][0]) == 2:
            d = {**d, "seed": d["parts"][0][1]}  # a packed case's seed is its first part's: no need to say it twice
        return cls(**{**_LATE_FIELDS, **d})

    @classmethod
    def from_json(cls, text: str) -> "Case":
        """Build a case from JSON text.

        Raises:
            InvalidInput: not JSON, not an object, or invalid fields.
        """
        try:
            doc = json.loads(text)
        except (json.JSONDecodeError, TypeError) as e:
            raise InvalidInput(f"case JSON {str(text)[:80]!r} does not parse: {e}") from None
        return cls.from_dict(doc)

    def case_id(self) -> str:
        """A short stable hash of the inputs (the name is not part of it)."""
        d = self.to_dict()
        d.pop("name")
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]

    # -- packing -------------------------------------------------------------------
    @classmethod
    def pack(cls, cases) -> "Case":
        """One case holding the sequences of ``cases``, in order, each part with its own values: a packed launch.

        Args:
            cases: cases that differ only in ``kv_lengths``, ``q_lengths`` and ``seed`` (packed cases among them
                are taken apart first; cases without sequences add nothing).

        Returns: the packed case (``parts`` set), or the one case with sequences when only one has any (the first
        case when none has).

        Raises:
            InvalidInput: no case; two cases differ in another field (it is named); broadcast-Q cases.
        """
        cases = list(cases)
        if not cases:
            raise InvalidInput("Case.pack needs at least one case")
        flat = [part for case in cases for part in case.split()]
        filled = [part for part in flat if part.batch]
        if len(filled) <= 1:
            return filled[0] if filled else cases[0]
        first = filled[0]
        for i, part in enumerate(filled[1:], 1):
            for f in fields(cls):
                if f.name in _PART_FIELDS or f.name in ("parts", "name"):
                    continue
                if getattr(part, f.name) != getattr(first, f.name):
                    raise InvalidInput(f"part {i} has {f.name}={getattr(part, f.name)!r} where part 0 has "
                                       f"{getattr(first, f.name)!r}: only cases that differ in lengths and seed pack "
                                       f"into one launch")
        q_lengths = None if first.mode != "cross" else tuple(n for part in filled for n in part.q_lengths)
        return cls(**{**{f.name: getattr(first, f.name) for f in fields(cls)},
                      "kv_lengths": tuple(n for part in filled for n in part.kv_lengths), "q_lengths": q_lengths,
                      "parts": tuple((part.batch, part.seed) for part in filled), "name": ""})

    def split(self) -> list["Case"]:
        """The cases a packed case holds, each as it stands alone (``[self]`` for a case that is not packed)."""
        if self.parts is None:
            return [self]
        out, b = [], 0
        for n, seed in self.parts:
            q_lengths = None if self.q_lengths is None else self.q_lengths[b: b + n]
            out.append(type(self)(**{**{f.name: getattr(self, f.name) for f in fields(self)},
                                     "kv_lengths": self.kv_lengths[b: b + n], "q_lengths": q_lengths, "seed": seed,
                                     "parts": None, "name": ""}))
            b += n
        return out

    def part_rows(self) -> list[tuple[range, range]]:
        """Per part (one entry for a case that is not packed), its rows in the packed buffers: ``(q_rows, k_rows)``.
        ``q_rows`` index q, O, dO, dQ and LSE's columns; ``k_rows`` index k, v, dK and dV. The first part's start at
        row 0 (the rows before the first sequence are its own), the last part's end at the buffers' end.

        Raises:
            InvalidInput: a broadcast-Q case (its query rows are shared, not cut).
        """
        if self.mode == "broadcast_q":
            raise InvalidInput("a broadcast-Q case has no rows of its own per part (its sequences share one Q)")
        q_off, k_off = _offsets(self.query_lengths, self.q_start), _offsets(self.kv_lengths, self.offsets_start)
        out, b = [], 0
        for i, (n, _) in enumerate(self.parts or ((self.batch, self.seed),)):
            out.append((range(0 if i == 0 else q_off[b], q_off[b + n]), range(0 if i == 0 else k_off[b], k_off[b + n])))
            b += n
        return out

    @property
    def mask(self) -> Mask:
        """The case's mask (:class:`~jfa_verify.core.masks.Mask`: its kind and the alignment of its diagonal), the one
        place a case's mask fields become a :class:`Mask` (the contract model's ``mask`` dimension reads it)."""
        return Mask.of(self.causal, self.window, self.causal_alignment)

    def describe(self) -> str:
        """One-line human summary, e.g. ``self causal/top_left bfloat16 B=4 Tk=45 H=4/2 D=32``, then any
        softmax scale given, layout, value distribution, offsets start, dtype or layout other than the default
        (``sm_scale=0.051 offsets_start=3``)."""
        m = self.mask
        mask = "full" if m.none else str(m) if self.window is None else f"{m.kind}{list(self.window)}/{m.alignment}"
        q = ""
        if self.mode == "cross":
            q = f" Tq={sum(self.q_lengths)}"
        elif self.mode == "broadcast_q":
            q = f" Lq={self.broadcast_q_len}"
        dv = f"/{self.head_dim_v}" if self.head_dim_v not in (None, self.head_dim) else ""
        # what else departs from the defaults, so that a finding's header names what may explain it
        extra = "".join(f" {name}={value}" for name, value, default in (
            ("sm_scale", self.sm_scale if self.sm_scale is None else f"{self.sm_scale:.4g}", None),
            ("layout", self.layout, "contiguous"), ("values", self.values, "normal"),
            # rows before the first sequence change what a kernel's views look like (a known peer trigger)
            ("offsets_start", self.offsets_start, 0), ("q_offsets_start", self.q_offsets_start, None),
            ("offsets_dtype", self.offsets_dtype, "int32"), ("offsets_layout", self.offsets_layout, "contiguous"),
            ("generator", self.generator, "counter"), ("parts", None if self.parts is None else len(self.parts), None),
            ("sparse", None if self.block_sparsity is None else self.block_sparsity.describe(), None),
            ("mxfp8", None if self.block_scaling is None else self.block_scaling.pattern, None))
            if value != default)
        return (
            f"{self.mode} {mask} {self.dtype} B={self.batch} Tk={sum(self.kv_lengths)}{q} "
            f"H={self.num_heads_q}/{self.num_heads_kv} D={self.head_dim}{dv}{extra}"
        )

    # -- tensors -------------------------------------------------------------------
    def materialize(self, device: torch.device | str = "cpu") -> CaseTensors:
        """Deterministic tensors of this case on ``device`` (same bits on any machine).

        ``generator="counter"`` computes the values on ``device``; ``"pcg64"`` draws them on the host and
        copies them over (the cost of a large case: 2.4 s of the MovieLens batch's 2.7 s on an H200 host).
        """
        device = torch.device(device)
        dt, odt = self.torch_dtype, OFFSET_DTYPES[self.offsets_dtype]
        pad = self.offsets_start
        q_offsets = None if self.mode == "broadcast_q" else _offsets(self.query_lengths, self.q_start)
        values = self._values(device)
        k_off = _offsets(self.kv_lengths, pad)
        mx = None if self.block_scaling is None else self._scale_draws()

        def tensor(role: str) -> torch.Tensor:
            # dO of a forward-only (float8) case is shaped like O, which is bfloat16; rounding float32 to the
            # case dtype is round-to-nearest-even on every device
            t = values[role].to(output_dtype(dt) if role == "do" else dt)
            if mx is not None and role in mx:
                t = Scaling.apply(t, *mx[role][1:])  # zero blocks, outliers: exact in e4m3
            return _lay_out(t, role, self.layout, device)

        def offsets(o: list[int]) -> torch.Tensor:
            return torch.tensor(o, dtype=odt).to(device)

        if self.offsets_layout == "strided":
            bounds = torch.tensor([q_offsets or k_off, k_off], dtype=odt).T.contiguous().to(device)
            k_offsets, q_offsets_t = bounds[:, 1], (None if q_offsets is None else bounds[:, 0])
        else:
            k_offsets = offsets(k_off)
            if self.mode == "self":
                q_offsets_t = k_offsets
            else:
                q_offsets_t = None if q_offsets is None else offsets(q_offsets)
        blocks = self.selected_blocks()
        selection = None if blocks is None else self.block_sparsity.selection(blocks, device)
        scales = None if mx is None else BlockScales(
            *(torch.from_numpy(mx[role][0]).to(device) for role in ("q", "k", "v")))
        return CaseTensors(tensor("q"), tensor("k"), tensor("v"), q_offsets_t, k_offsets, tensor("do"), selection,
                           scales)

    def _scale_draws(self) -> dict:
        """An MXFP8 case's :meth:`Scaling.draw <jfa_verify.cases.scaling.Scaling.draw>` per input role (``q``,
        ``k``, ``v``): ``(scales, zero, outlier)`` host arrays of the rows :meth:`_values` makes. A packed case's
        are its parts' own, concatenated as :meth:`_values` concatenates their values."""
        if self.parts is not None:
            pieces = [part._scale_draws() for part in self.split()]
            skip = {"q": self.q_start, "k": self.offsets_start, "v": self.offsets_start}
            return {role: tuple(None if first is None else np.concatenate([first] + [p[role][i][skip[role]:]
                                                                                      for p in pieces[1:]])
                                for i, first in enumerate(pieces[0][role]))
                    for role in pieces[0]}
        shapes = self._shapes()
        return {role: self.block_scaling.draw(role, shapes[role], self.seed) for role in ("q", "k", "v")}

    def _shapes(self) -> dict[str, tuple[int, int, int]]:
        """The shape of each generated tensor: ``q``, ``k``, ``v`` and ``do`` (rows before the first sequence
        included)."""
        t_k = sum(self.kv_lengths) + self.offsets_start
        if self.mode == "broadcast_q":
            t_q, rows = self.broadcast_q_len, self.batch * self.broadcast_q_len
        else:
            t_q = rows = sum(self.query_lengths) + self.q_start
        return {"q": (t_q, self.num_heads_q, self.head_dim), "k": (t_k, self.num_heads_kv, self.head_dim),
                "v": (t_k, self.num_heads_kv, self.dv), "do": (rows, self.num_heads_q, self.dv)}

    def _values(self, device: torch.device) -> dict[str, torch.Tensor]:
        """Each tensor's values, dense (on the host for ``"pcg64"``, as drawn; on ``device`` in the case dtype for
        ``"counter"``). A packed case's are its parts' own, concatenated: rows before the first sequence come from
        the first part, and each later part's such rows are dropped."""
        if self.parts is not None:
            pieces = [part._values(device) for part in self.split()]
            skip = {"q": self.q_start, "do": self.q_start, "k": self.offsets_start, "v": self.offsets_start}
            return {role: torch.cat([pieces[0][role]] + [p[role][skip[role]:] for p in pieces[1:]])
                    for role in pieces[0]}
        shapes, dt = self._shapes(), self.torch_dtype
        if self.generator == "pcg64":
            rng = np.random.Generator(np.random.PCG64(self.seed))
            # one host stream, drawn in this order: q, k, v, then dO (plain normal)
            return {role: torch.from_numpy(np.ascontiguousarray(
                self._draw(rng, shape, role) if role != "do" else rng.standard_normal(shape, dtype=np.float32)))
                for role, shape in shapes.items()}
        return {role: self._counter_values(shape, role, output_dtype(dt) if role == "do" else dt, device)
                for role, shape in shapes.items()}

    def _counter_values(self, shape: tuple[int, ...], role: str, dtype: torch.dtype,
                        device: torch.device) -> torch.Tensor:
        # A plain or power-of-two-scaled normal is rounded to the dtype pass by pass (a 2**31-element case holds no
        # float32 copy on the device); the structured ones are built in float32 first. Same bits either way.
        if (self.values == "correlated" and role != "do") or (self.values == "near_ties" and role == "k"):
            return self._draw_counter(shape, role, device).to(dtype)
        return counter_normals(self.seed, role, shape, device, dtype=dtype, scale=_value_scale(self.values, role))

    def _draw_counter(self, shape: tuple[int, ...], role: str, device: torch.device) -> torch.Tensor:
        # The structured distributions of ``_draw``, built from independent counter streams with one
        # elementwise torch op at a time (no matmul: its summation order and TF32 differ across devices).
        def normals(stream: str, shp: tuple[int, ...]) -> torch.Tensor:
            return counter_normals(self.seed, stream, shp, device)

        x = normals(role, shape)
        if self.values == "correlated":
            tokens, heads, dim = shape
            rank = min(4, dim)
            basis = normals(f"{role}.basis", (rank, dim))
            coef = normals(f"{role}.coef", (tokens, heads, rank))
            offset = normals(f"{role}.offset", (1, 1, dim)) * 2.0
            low = coef[..., 0:1] * basis[0]
            for r in range(1, rank):
                low = low + coef[..., r: r + 1] * basis[r]
            return low * float(np.float32(1.0 / np.sqrt(rank))) + offset + x * 0.1
        return normals(f"{role}.shared", (1, shape[1], shape[2])) + x * 2.0**-12  # near_ties keys

    def _draw(self, rng: np.random.Generator, shape: tuple[int, ...], role: str) -> np.ndarray:
        x = rng.standard_normal(shape, dtype=np.float32)
        if self.values == "correlated":
            # Low-rank (rank 4) structure plus a shared offset per head dim, as real
            # activations have; such inputs broke gradients that Gaussian noise did not.
            tokens, heads, dim = shape
            rank = min(4, dim)
            basis = rng.standard_normal((rank, dim), dtype=np.float32)
            coef = rng.standard_normal((tokens, heads, rank), dtype=np.float32)
            offset = rng.standard_normal((1, 1, dim), dtype=np.float32) * np.float32(2.0)
            x = (coef @ basis) / np.float32(np.sqrt(rank)) + offset + np.float32(0.1) * x
        elif self.values == "near_ties" and role == "k":
            # One shared key per head plus noise of relative size 2**-12: scores of a row
            # tie to within bf16/fp16 rounding, so max-subtraction and sums decide the result.
            shared = rng.standard_normal((1, shape[1], shape[2]), dtype=np.float32)
            x = shared + np.float32(2.0**-12) * x
        elif _value_scale(self.values, role) is not None:
            x = x * np.float32(_value_scale(self.values, role))
        return x
