"""The JFA contract: what a jagged attention kernel computes, written once.

A kernel under test is a callable with this signature::

    jagged_attention(q, k, v, q_offsets, k_offsets, *, causal=False,
                     causal_alignment="top_left", sm_scale=None[, window=None]
                     [, block_selection=None][, block_scales=None]) -> (o, lse)

(``window`` is passed only for a windowed call, ``block_selection`` only for a
block-sparse one and ``block_scales`` only for an MXFP8 one, so a kernel without them keeps the
shorter signature.)

differentiable with respect to ``q``, ``k`` and ``v`` through torch autograd
(the backward gives dq, dk, dv). Shapes (T_q, T_k: packed token counts;
B: sequences; H_q, H_kv: heads; D: query/key head dim; D_v: value head dim):

* ``q``: ``[T_q, H_q, D]`` packed queries, or ``[L_q, H_q, D]`` for
  **broadcast-Q** (``q_offsets=None``): one dense Q shared by every sequence.
* ``k``: ``[T_k, H_kv, D]``, ``v``: ``[T_k, H_kv, D_v]``; ``H_q % H_kv == 0``
  and query head ``h`` reads KV head ``h // (H_q // H_kv)`` (GQA; MQA when
  ``H_kv == 1``).
* ``q_offsets``, ``k_offsets``: ``[B + 1]`` int32 or int64, non-decreasing,
  contiguous, on the device of ``q`` (``cu_seqlens``; production kernels such as
  FlashAttention's varlen and Meta's TLX JFA read them as a dense array, so a
  strided view such as ``bounds[:, 0]`` is rejected with the fix
  ``offsets.contiguous()``). Sequence ``b`` is rows ``offsets[b]:offsets[b + 1]``.
  ``offsets[0]`` may be above 0 (a view into a larger buffer: rows before it
  belong to no sequence); ``offsets[-1]`` must equal the token count.
* ``o``: ``[T_q, H_q, D_v]`` in the input dtype (broadcast-Q:
  ``[B * L_q, H_q, D_v]``, sequence ``b``'s rows at ``b * L_q``); for float8
  e4m3 inputs (``torch.float8_e4m3fn``, forward only, values used as they are,
  no scale factors) ``o`` is bfloat16, as fp8 attention kernels emit.
* ``lse``: ``[H_q, T_q]`` (broadcast-Q: ``[H_q, B * L_q]``), float32, natural
  log of the sum of ``exp(score)`` over the visible keys.

Semantics, per sequence ``b`` with ``L_q`` queries and ``L_k`` keys:
``score[i, j] = sm_scale * <q_i, k_j>`` (``sm_scale`` defaults to
``1 / sqrt(D)``). The *aligned diagonal* of query ``i`` is key ``d_i = i + shift``
with ``shift = 0`` (``causal_alignment="top_left"``) or ``L_k - L_q``
(``"bottom_right"``), per sequence. Key ``j`` is visible to query ``i`` iff

* ``causal=True``: ``j <= d_i``;
* ``window=(left, right)`` (sliding window, ints, ``-1`` = unbounded on that side):
  ``d_i - left <= j <= d_i + right``; FlashAttention's ``window_size=(left, right)``
  is this window with bottom-right alignment, Meta's TLX JFA's symmetric
  ``window_size=w`` (``|i - j| <= w``) is ``window=(w, w)`` with top-left alignment;
* both: the intersection, ``d_i - left <= j <= d_i`` (a causal window; ``right``
  is then irrelevant, as in FlashAttention, which sets it to 0 under causal);
* neither: every key of the sequence.

With a ``block_selection`` (:class:`~jfa_verify.core.selection.BlockSelection`: per query
block of ``block_m`` rows, the KV blocks of ``block_n`` keys it visits), key ``j`` is visible
to query ``i`` iff the mask above allows it *and* KV block ``j // block_n`` is selected for
query block ``i // block_m`` of the sequence (the same for every head).

With ``block_scales`` (:class:`~jfa_verify.core.mxfp8.BlockScales`, MXFP8: float8 e4m3 ``q``, ``k``, ``v``
and uint8 E8M0 exponents, one per 32 elements of the head dim), every input element stands for its
dequantized value ``x[t, h, d] * 2^(s[t, h, d // 32] - 127)``
(:func:`~jfa_verify.core.mxfp8.dequantize`); the rule below holds for those values.

``o_i = sum_j softmax_j(score[i, :]) v_j`` over visible keys (:func:`key_range`
is the one home of the mask's rule in the framework, :func:`visible_masks` and
:meth:`JaggedProblem.key_spans` of the whole rule with a selection). A query row with
no visible key (``L_k == 0``, causal bottom-right with ``L_k < L_q``, a window
that lies past either end of the keys, or no selected block that the mask reaches) has
``o_i = 0`` and ``lse_i = -inf``, never NaN; its gradients are zero. Rows of
``o`` that belong to no sequence are 0 with ``lse = -inf``. Broadcast-Q's
``dq`` is the sum over the batch of each sequence's dQ.

Reference: the forward is FlashAttention's (Dao et al., 2022, arXiv:2205.14135)
applied per ``offsets`` span; the empty-row convention is this project's.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from jfa_verify.core.dtypes import DTYPES, output_dtype
from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.index_tensors import check_dense, check_index_tensor, first_fall
from jfa_verify.core.masks import CAUSAL_ALIGNMENTS, MASKS, Mask
from jfa_verify.core.mxfp8 import BlockScales, check_scale_tensors, check_scale_values
from jfa_verify.core.selection import BlockSelection, SelectedBlocks, check_selection_tensors, select_blocks

__all__ = [
    "BlockScales",
    "BlockSelection",
    "SelectedBlocks",
    "CAUSAL_ALIGNMENTS",
    "MASKS",
    "MODES",
    "Mask",
    "CallShape",
    "JaggedProblem",
    "causal_shift",
    "check_offsets_dense",
    "check_window",
    "key_range",
    "mask_kind",
    "keys_seen",
    "rows_seeing",
    "output_violations",
    "validate_call",
    "validate_inputs",
    "visible_mask",
    "visible_masks",
]

MODES = ("self", "cross", "broadcast_q")
SUPPORTED_DTYPES = tuple(DTYPES.values())


@dataclass(frozen=True)
class JaggedProblem:
    """Host-side description of one validated call, shared by kernels and oracles.

    All lengths are token counts (ints). ``q_starts[b]`` is the first row of
    sequence ``b`` in ``q`` (0 for every ``b`` under broadcast-Q);
    ``out_starts[b]`` the first row of its output in ``o``/``lse``.
    """

    mode: str  # "self" | "cross" | "broadcast_q"
    q_lengths: tuple[int, ...]
    k_lengths: tuple[int, ...]
    q_starts: tuple[int, ...]
    out_starts: tuple[int, ...]
    k_starts: tuple[int, ...]
    total_q_rows: int  # rows of o / columns of lse
    num_heads_q: int
    num_heads_kv: int
    head_dim: int
    head_dim_v: int
    causal: bool
    causal_alignment: str
    sm_scale: float
    dtype: torch.dtype
    device: torch.device
    inputs_contiguous: bool = True  # q, k and v are all contiguous (TMA-fed kernels need it)
    window: Optional[tuple[int, int]] = None  # (left, right), -1 unbounded; None: no window
    # the block-sparse selection's host view (validated; its ``source`` holds the caller's tensors); None: dense
    block_selection: Optional[SelectedBlocks] = None
    # an MXFP8 call's E8M0 block scales (the caller's tensors, validated); None: no block scales
    block_scales: Optional[BlockScales] = None

    @classmethod
    def of_shape(cls, head_dim: int, head_dim_v: Optional[int], dtype: Optional[torch.dtype],
                 device: "torch.device | str", *, mode: str = "self", num_heads_q: int = 1,
                 num_heads_kv: int = 1, causal: bool = False, causal_alignment: str = "top_left") -> "JaggedProblem":
        """A problem with no sequences: what a kernel's ``tile_sizes`` needs before lengths are drawn.

        ``dtype`` None means bfloat16 (tile sizes rarely depend on it); ``head_dim_v`` None means ``head_dim``.
        """
        return cls(mode, (), (), (), (), (), 0, num_heads_q, num_heads_kv, head_dim,
                   head_dim if head_dim_v is None else head_dim_v, causal, causal_alignment,
                   1.0 / math.sqrt(head_dim), torch.bfloat16 if dtype is None else dtype, torch.device(device))

    @property
    def batch(self) -> int:
        return len(self.k_lengths)

    @property
    def mask(self) -> str:
        """The call's mask, one of :data:`MASKS`."""
        return mask_kind(self.causal, self.window)

    @property
    def aligned(self) -> bool:
        """The diagonal's alignment changes what is visible: a causal or windowed mask and some
        sequence with ``L_q != L_k`` (else top-left and bottom-right are the same mask)."""
        return self.mask != "none" and any(a != b for a, b in zip(self.q_lengths, self.k_lengths))

    @property
    def max_seqlen_q(self) -> int:
        return max(self.q_lengths, default=0)

    @property
    def max_seqlen_k(self) -> int:
        return max(self.k_lengths, default=0)

    @property
    def group_size(self) -> int:
        """Query heads per KV head (1 for MHA, H_q for MQA)."""
        return self.num_heads_q // self.num_heads_kv

    def out_offsets(self) -> list[int]:
        """Boundaries of each sequence's rows in ``o`` (``[B + 1]`` ints)."""
        ends = [s + n for s, n in zip(self.out_starts, self.q_lengths)]
        return [self.out_starts[0] if self.out_starts else 0] + ends

    @property
    def total_k_rows(self) -> int:
        """Rows of ``k``/``v`` (``k_offsets[-1]``; 0 for an empty batch, whose rows no kernel reads)."""
        return self.k_starts[-1] + self.k_lengths[-1] if self.batch else 0

    def call_shape(self) -> "CallShape":
        """This problem as the :class:`CallShape` a kernel launches from (its true maxima as the hints)."""
        return CallShape(self.mode, self.batch, self.total_q_rows, self.total_k_rows, self.num_heads_q,
                         self.num_heads_kv, self.head_dim, self.head_dim_v, self.causal, self.causal_alignment,
                         self.sm_scale, self.dtype, self.device, self.inputs_contiguous, self.window,
                         self.max_seqlen_q, self.max_seqlen_k,
                         None if self.block_selection is None else self.block_selection.source,
                         self.block_scales)

    def key_range(self, i: int, b: int) -> tuple[int, int]:
        """Keys ``[lo, hi)`` of sequence ``b`` that its query row ``i`` sees (see :func:`key_range`)."""
        return key_range(i, self.q_lengths[b], self.k_lengths[b], self.causal, self.causal_alignment,
                         self.window)

    def key_spans(self, i: int, b: int) -> tuple[tuple[int, int], ...]:
        """Every key of sequence ``b`` its query row ``i`` sees, as increasing disjoint ``[lo, hi)`` spans: the
        mask's :meth:`key_range`, cut to the KV blocks selected for the row's query block when the call has a
        ``block_selection`` (empty: the row sees no key)."""
        lo, hi = self.key_range(i, b)
        sel = self.block_selection
        if sel is None:
            return ((lo, hi),) if lo < hi else ()
        spans = []
        for j in sel.selected(b, i // sel.block_m):
            a, z = max(lo, j * sel.block_n), min(hi, (j + 1) * sel.block_n)
            if a < z:
                if spans and spans[-1][1] == a:
                    a = spans.pop()[0]
                spans.append((a, z))
        return tuple(spans)


# ----------------------------------------------------------------------------- visibility: the one rule


def causal_shift(q_len: int, k_len: int, alignment: str) -> int:
    """Offset of the aligned diagonal: query ``i``'s diagonal key is ``i + shift`` (causal: it sees
    ``j <= i + shift``; a window is centred there too).

    ``0`` for ``"top_left"``; ``k_len - q_len`` for ``"bottom_right"`` (per sequence, never
    from the padded maximum lengths).
    """
    return 0 if alignment == "top_left" else k_len - q_len


def mask_kind(causal: bool, window: Optional[tuple[int, int]]) -> str:
    """The kind of a call's mask, one of :data:`MASKS` (:class:`~jfa_verify.core.masks.Mask`'s string form)."""
    return Mask.of(causal, window).kind


def check_window(window, name: str = "window") -> Optional[tuple[int, int]]:
    """``window`` as ``(left, right)`` ints, or None for no window; ``(-1, -1)`` (unbounded on both
    sides, FlashAttention's default) is no window and gives None.

    Raises:
        InvalidInput: not None or a pair of ints >= -1 (the message names the value and the fix).
    """
    if window is None:
        return None
    if isinstance(window, (numbers.Integral, np.integer)) and not isinstance(window, bool):
        raise InvalidInput(f"{name}={window!r} is one number; pass (left, right), e.g. ({window}, {window}) for a "
                           f"symmetric window |i - j| <= {window}, or None for no window")
    if isinstance(window, (str, bytes)) or not hasattr(window, "__len__") or len(window) != 2:
        raise InvalidInput(f"{name}={window!r} is not a pair (left, right) of ints (-1 = unbounded) or None")
    out = []
    for side, value in zip(("left", "right"), window):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
            raise InvalidInput(f"{name}={tuple(window)!r}: {side}={value!r} is not an int; pass keys visible on that "
                               f"side of the diagonal (int >= 0) or -1 for unbounded")
        if value < -1:
            raise InvalidInput(f"{name}={tuple(window)!r}: {side}={int(value)} is below -1; pass an int >= 0, or -1 "
                               f"for unbounded")
        out.append(int(value))
    return None if out == [-1, -1] else (out[0], out[1])


def _diagonal_bounds(i, q_len: int, k_len: int, causal: bool, alignment: str, window):
    """The visibility rule, unclamped: ``(lo, hi)`` with key ``j`` visible iff ``lo <= j < hi``;
    None for an unbounded side. ``i``: an int or an int tensor of rows (then tensors come back)."""
    d = i + causal_shift(q_len, k_len, alignment)
    lo = d - window[0] if window is not None and window[0] >= 0 else None
    right = window[1] if window is not None and window[1] >= 0 else None
    if causal:
        right = 0  # causal caps the window's right side at the diagonal
    return lo, (d + right + 1 if right is not None else None)


def key_range(i: int, q_len: int, k_len: int, causal: bool, alignment: str,
              window: Optional[tuple[int, int]] = None) -> tuple[int, int]:
    """The keys ``[lo, hi)`` (ints, ``0 <= lo <= hi <= k_len``) query row ``i`` of a sequence may see.

    ``window``: ``(left, right)`` as :func:`check_window` returns it (None: no window); see the
    module docstring for the rule. A row that sees no key gets ``lo == hi`` (0 before the keys,
    ``k_len`` past them). The visible keys of a row are always one contiguous range, and both
    ends are non-decreasing in ``i``: a tile of rows ``[i0, i1]`` sees the union
    ``[key_range(i0)[0], key_range(i1)[1])``.
    """
    lo, hi = _diagonal_bounds(i, q_len, k_len, causal, alignment, window)
    lo = 0 if lo is None else max(0, min(k_len, lo))
    hi = k_len if hi is None else max(0, min(k_len, hi))
    return lo, max(lo, hi)


def keys_seen(first_row: int, last_row: int, q_len: int, k_len: int, causal: bool, alignment: str,
              window: Optional[tuple[int, int]] = None) -> int:
    """Keys a tile of query rows ``[first_row, last_row]`` loops over: ``hi(last) - lo(first)``, at least 0.

    The union of the rows' :func:`key_range` (both ends are non-decreasing in the row, and rows
    that see nothing sit only before or after the rows that see something): a forward tile's cost.
    """
    return max(0, key_range(last_row, q_len, k_len, causal, alignment, window)[1]
               - key_range(first_row, q_len, k_len, causal, alignment, window)[0])


def rows_seeing(first_key: int, end_key: int, q_len: int, k_len: int, causal: bool, alignment: str,
                window: Optional[tuple[int, int]] = None) -> int:
    """Query rows whose :func:`key_range` meets keys ``[first_key, end_key)``: a dK/dV tile's cost.

    Closed form, O(1): two binary searches per tile made ``workloads_backward`` 7-41 ms of Python on the
    benchmark batches (``docs/gluon.md``), paid by every backward's plan. Row ``i``'s unclamped bounds are
    row 0's plus ``i``, and with ``left, right >= 0`` its range is never inverted, so for a key span inside
    ``[0, k_len)`` clamping changes nothing: row ``i`` meets it iff ``hi(i) > first_key`` and
    ``lo(i) < end_key``, one contiguous run of rows. Rows that see no key have ``lo == hi`` at 0 or ``k_len``
    and fail one of the two. Spans reaching past the keys are cut to ``[0, k_len)`` first.
    """
    first_key, end_key = max(first_key, 0), min(end_key, k_len)
    if q_len <= 0 or first_key >= end_key:
        return 0
    lo0, hi0 = _diagonal_bounds(0, q_len, k_len, causal, alignment, window)
    start = 0 if hi0 is None else max(0, first_key - hi0 + 1)  # first row with hi0 + i > first_key
    stop = q_len if lo0 is None else min(q_len, end_key - lo0)  # first row with lo0 + i >= end_key
    return max(0, stop - start)


def visible_mask(q_len: int, k_len: int, causal: bool, alignment: str, device,
                 window: Optional[tuple[int, int]] = None, selection: Optional[SelectedBlocks] = None,
                 sequence: int = 0) -> torch.Tensor:
    """Bool ``[q_len, k_len]``: True where query ``i`` may see key ``j`` (:func:`key_range` as a mask, cut to the
    blocks ``selection`` selects for sequence ``sequence`` when given: :func:`visible_masks`)."""
    lengths = torch.tensor([[q_len], [k_len]], device=device)
    return visible_masks(lengths[0], lengths[1], q_len, k_len, causal, alignment, window, selection,
                         None if selection is None else [sequence])[0]


def visible_masks(q_lens: torch.Tensor, k_lens: torch.Tensor, rows: int, cols: int, causal: bool, alignment: str,
                  window: Optional[tuple[int, int]] = None, selection: Optional[SelectedBlocks] = None,
                  sequences=None) -> torch.Tensor:
    """Bool ``[n, rows, cols]``: :func:`visible_mask` of ``n`` sequences at once, padded with False.

    ``q_lens``, ``k_lens``: int tensors ``[n]`` of each sequence's lengths (at most ``rows`` and ``cols``), on
    the device the masks are made on. Entry ``[s, i, j]`` is True iff ``i < q_lens[s]``, ``j < k_lens[s]`` and
    query ``i`` of sequence ``s`` may see key ``j``; the same rule as :func:`visible_mask`, one launch per term
    instead of per sequence.

    ``selection``: a call's :class:`~jfa_verify.core.selection.SelectedBlocks` (None: dense); then ``sequences``
    (``n`` ints) are the call's sequence numbers of the ``n`` rows, and a key is visible only where its KV block is
    selected for the row's query block too (:meth:`~jfa_verify.core.selection.SelectedBlocks.block_masks`).

    Raises:
        InvalidInput: ``selection`` given without one sequence number per mask.
    """
    dev = q_lens.device
    i = torch.arange(rows, device=dev)[None, :, None]
    j = torch.arange(cols, device=dev)[None, None, :]
    q_len, k_len = q_lens[:, None, None], k_lens[:, None, None]
    mask = (i < q_len) & (j < k_len)
    lo, hi = _diagonal_bounds(i, q_len, k_len, causal, alignment, window)
    if lo is not None:
        mask &= j >= lo
    if hi is not None:
        mask &= j < hi
    if selection is not None:
        if sequences is None or len(sequences) != q_lens.shape[0]:
            raise InvalidInput(f"visible_masks: a selection needs the sequence number of each of the "
                               f"{q_lens.shape[0]} masks, got sequences={sequences!r}")
        mask &= selection.block_masks(list(sequences), rows, cols, dev)
    return mask


# ----------------------------------------------------------------------------- inputs


def _check_tensor(name: str, t, rank: int, shape_doc: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise InvalidInput(f"{name} must be a torch.Tensor of shape {shape_doc}, got {type(t).__name__}")
    if t.dim() != rank:
        raise InvalidInput(
            f"{name} must have rank {rank} ({shape_doc}), got shape {tuple(t.shape)}; "
            f"pack sequences along dim 0 instead of padding"
        )


def check_offsets_dense(name: str, offsets: Optional[torch.Tensor]) -> None:
    """Raise :class:`InvalidInput` unless ``offsets`` (or None) is dense; no device synchronization.

    A kernel adapter handed a problem validated elsewhere calls this on the very tensors it will
    read: a strided view read as a dense array gives silent garbage.
    """
    check_dense(name, offsets)


def _check_offsets_tensor(name: str, offsets, device: torch.device) -> None:
    """Type, rank, dtype, device and density of an offsets tensor: no value read (no synchronization)."""
    check_index_tensor(name, offsets, device, "B + 1 >= 1 entries", min_entries=1)


def _check_offset_values(name: str, offsets: torch.Tensor, tokens: int) -> list[int]:
    """The values rules (reads the tensor to the host: one synchronization); vectorized, so a
    10,000-sequence batch costs microseconds, not a Python loop."""
    array = offsets.cpu().numpy()
    values = array.tolist()
    if values[0] < 0:
        raise InvalidInput(f"{name}[0]={values[0]} is negative; offsets are row indices starting at 0 or above")
    first_fall(name, array, "offsets are cumulative lengths (cu_seqlens), build them with a cumsum of the lengths")
    if values[-1] != tokens:
        raise InvalidInput(
            f"{name}[-1]={values[-1]} does not equal the token count {tokens} of the packed tensor; "
            f"the last offset must be the number of rows"
        )
    return values


def _check_scalar_options(causal, causal_alignment, sm_scale, head_dim: int) -> float:
    if not isinstance(causal, (bool, np.bool_)):
        raise InvalidInput(f"causal={causal!r} is not a bool; pass True or False")
    if causal_alignment not in CAUSAL_ALIGNMENTS:
        raise InvalidInput(f"causal_alignment={causal_alignment!r} is not one of {CAUSAL_ALIGNMENTS}")
    if sm_scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, numbers.Real):
        raise InvalidInput(f"sm_scale={sm_scale!r} is not a number; pass a float or None for 1/sqrt(D)")
    sm_scale = float(sm_scale)
    if not math.isfinite(sm_scale):
        raise InvalidInput(f"sm_scale={sm_scale} is not finite; pass None for 1/sqrt(D)")
    return sm_scale


def _check_hint(name: str, hint, actual: int) -> None:
    """A ``max_seqlen`` hint (its type checked by :func:`validate_call`) against the true maximum."""
    if hint is not None and hint < actual:
        raise InvalidInput(f"{name}={hint} is below the longest sequence ({actual}); pass the true maximum or None")


@dataclass(frozen=True)
class CallShape:
    """What a call's tensors and options say without reading the offsets' values: everything a kernel needs
    to size and launch its work, no device synchronization (:func:`validate_call`).

    ``mode`` is ``"self"`` when ``q_offsets`` is the very ``k_offsets`` tensor over as many rows, else
    ``"cross"`` (or ``"broadcast_q"``); ``total_q_rows``/``total_k_rows`` are the rows of ``o`` and ``k``;
    ``max_seqlen_q``/``max_seqlen_k`` the caller's hints (None: not given); ``block_selection`` the caller's
    :class:`~jfa_verify.core.selection.BlockSelection` (its ``block_sizes`` known, its values unread), None when dense;
    ``block_scales`` an MXFP8 call's :class:`~jfa_verify.core.mxfp8.BlockScales` (None: no block scales).
    """

    mode: str
    batch: int
    total_q_rows: int
    total_k_rows: int
    num_heads_q: int
    num_heads_kv: int
    head_dim: int
    head_dim_v: int
    causal: bool
    causal_alignment: str
    sm_scale: float
    dtype: torch.dtype
    device: torch.device
    inputs_contiguous: bool = True
    window: Optional[tuple[int, int]] = None
    max_seqlen_q: Optional[int] = None
    max_seqlen_k: Optional[int] = None
    block_selection: Optional[BlockSelection] = None  # the caller's selection (values unread); None: dense
    block_scales: Optional[BlockScales] = None  # an MXFP8 call's E8M0 scales (values unread); None: none

    @property
    def mask(self) -> str:
        """The call's mask, one of :data:`MASKS`."""
        return mask_kind(self.causal, self.window)

    @property
    def aligned(self) -> bool:
        """Whether the alignment may change what is visible; without lengths, any masked call but self-attention."""
        return self.mask != "none" and self.mode != "self"

    @property
    def group_size(self) -> int:
        return self.num_heads_q // self.num_heads_kv


def _check_hint_type(name: str, hint) -> None:
    if hint is None:
        return
    if isinstance(hint, bool) or not isinstance(hint, numbers.Integral):
        raise InvalidInput(f"{name}={hint!r} is not an int; pass the longest sequence's length or None")
    if hint < 0:
        raise InvalidInput(f"{name}={hint} is negative; pass the longest sequence's length or None")


def validate_call(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_offsets: Optional[torch.Tensor],
    k_offsets: torch.Tensor,
    *,
    causal: bool = False,
    causal_alignment: str = "top_left",
    sm_scale: Optional[float] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    window: Optional[tuple[int, int]] = None,
    block_selection: Optional[BlockSelection] = None,
    block_scales: Optional[BlockScales] = None,
) -> CallShape:
    """Every rule of the contract that needs no offsets value: types, ranks, dtypes, devices, heads, head
    dims, options, and the offsets tensors' type, rank, dtype, device and density. Reads nothing from the
    device (a kernel's no-synchronization call path validates with this and trusts the values, as
    FlashAttention's varlen API trusts ``cu_seqlens``).

    Returns: a :class:`CallShape`.

    Raises:
        InvalidInput: as :func:`validate_inputs`, except the rules on offsets, block-selection and block-scale
            values (a 255 scale is found by :func:`validate_inputs`).
    """
    broadcast = q_offsets is None
    _check_tensor("q", q, 3, "[L_q, H_q, D] (broadcast-Q)" if broadcast else "[T_q, H_q, D]")
    _check_tensor("k", k, 3, "[T_k, H_kv, D]")
    _check_tensor("v", v, 3, "[T_k, H_kv, D_v]")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in SUPPORTED_DTYPES:
            raise InvalidInput(f"{name}.dtype={t.dtype} is not one of {', '.join(DTYPES)}; "
                               f"cast with {name}.to(torch.bfloat16)")
    if not (q.dtype == k.dtype == v.dtype):
        raise InvalidInput(f"q, k, v dtypes differ (q={q.dtype}, k={k.dtype}, v={v.dtype}); cast them to one dtype")
    if not (q.device == k.device == v.device):
        raise InvalidInput(f"q, k, v devices differ (q={q.device}, k={k.device}, v={v.device}); "
                           f"move them to one device")
    if k.shape[0] != v.shape[0]:
        raise InvalidInput(f"k has {k.shape[0]} tokens but v has {v.shape[0]}; K and V share k_offsets")
    if k.shape[1] != v.shape[1]:
        raise InvalidInput(f"k has H_kv={k.shape[1]} heads but v has {v.shape[1]}; K and V must have the same heads")
    if q.shape[2] != k.shape[2]:
        raise InvalidInput(f"head-dim mismatch: q has D={q.shape[2]} but k has D={k.shape[2]}; "
                           f"Q and K must share the head dim")
    h_q, h_kv = q.shape[1], k.shape[1]
    if h_kv == 0 or h_q % h_kv != 0:
        raise InvalidInput(f"H_q={h_q} is not a multiple of H_kv={h_kv}; GQA needs H_q = group_size * H_kv")
    if min(q.shape[2], v.shape[2]) < 1:
        raise InvalidInput(f"head dims must be >= 1, got D={q.shape[2]}, D_v={v.shape[2]}")
    sm_scale = _check_scalar_options(causal, causal_alignment, sm_scale, q.shape[2])
    window = check_window(window)
    _check_offsets_tensor("k_offsets", k_offsets, k.device)
    batch = k_offsets.numel() - 1
    if broadcast:
        mode, total_q_rows = "broadcast_q", batch * q.shape[0]
    else:
        if q_offsets is not k_offsets:
            _check_offsets_tensor("q_offsets", q_offsets, q.device)
        if q_offsets.numel() != k_offsets.numel():
            raise InvalidInput(
                f"q_offsets has {q_offsets.numel()} entries but k_offsets has {k_offsets.numel()}; "
                f"both must be [B + 1] for the same batch"
            )
        total_q_rows = q.shape[0]
        mode = "self" if q_offsets is k_offsets and q.shape[0] == k.shape[0] else "cross"
    _check_hint_type("max_seqlen_q", max_seqlen_q)
    _check_hint_type("max_seqlen_k", max_seqlen_k)
    if block_selection is not None:
        check_selection_tensors(block_selection, q.device)
    if block_scales is not None:
        check_scale_tensors(block_scales, q, k, v)
    return CallShape(
        mode=mode, batch=batch, total_q_rows=total_q_rows, total_k_rows=k.shape[0], num_heads_q=h_q,
        num_heads_kv=h_kv, head_dim=q.shape[2], head_dim_v=v.shape[2], causal=bool(causal),
        causal_alignment=causal_alignment, sm_scale=sm_scale, dtype=q.dtype, device=q.device,
        inputs_contiguous=q.is_contiguous() and k.is_contiguous() and v.is_contiguous(), window=window,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, block_selection=block_selection,
        block_scales=block_scales,
    )


def validate_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_offsets: Optional[torch.Tensor],
    k_offsets: torch.Tensor,
    *,
    causal: bool = False,
    causal_alignment: str = "top_left",
    sm_scale: Optional[float] = None,
    max_seqlen_q: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    window: Optional[tuple[int, int]] = None,
    block_selection: Optional[BlockSelection] = None,
    block_scales: Optional[BlockScales] = None,
) -> JaggedProblem:
    """Check one call against the JFA contract and describe it on the host.

    Args: as in the module docstring. ``max_seqlen_q``/``max_seqlen_k`` are
    optional hints; when given they must be at least the true maxima.
    ``window``: ``(left, right)`` sliding window, ``-1`` unbounded on that side (see
    :func:`check_window`; ``(-1, -1)`` is no window); its diagonal follows ``causal_alignment``.
    ``block_selection``: a :class:`~jfa_verify.core.selection.BlockSelection` (None: dense attention); its
    tensors are read to the host once and its view put on :attr:`JaggedProblem.block_selection`.
    ``block_scales``: an MXFP8 call's :class:`~jfa_verify.core.mxfp8.BlockScales` (None: none): uint8 E8M0
    exponents ``[rows, H, D / 32]`` for ``q``, ``k`` and ``v``, which must then be float8_e4m3fn; each tensor's
    maximum is read once (no 255, NaN) and the scales put on :attr:`JaggedProblem.block_scales`.

    Returns: a :class:`JaggedProblem` (this reads each offsets tensor to the host
    once: one device synchronization per tensor). Validate a call once and hand
    the problem on: the runner passes it to the kernel adapter and the oracles.

    Raises:
        InvalidInput: wrong type, rank, dtype or device; non-contiguous or
            non-monotonic offsets; ``offsets[-1]`` not the token count; ``H_q``
            not a multiple of ``H_kv``; query/key head-dim mismatch; K/V length
            or head mismatch; ``causal`` not a bool; unknown ``causal_alignment``;
            ``sm_scale`` not a finite number; a ``max_seqlen`` hint below the
            real maximum; a ``window`` that is not a pair of ints >= -1; a ``block_selection`` that
            is not a :class:`BlockSelection`, whose tensors are not 1-D dense int32/int64 on ``q``'s device,
            whose offsets are not ``NQB + 1`` non-decreasing row pointers from 0 to ``len(indices)``, or whose
            indices leave their sequence's KV blocks or are not strictly increasing per query block
            (:func:`~jfa_verify.core.selection.select_blocks`); ``block_scales`` that are not a
            :class:`BlockScales`, with inputs that are not float8_e4m3fn, a head dim that is not a multiple of 32,
            a scale tensor that is not uint8 ``[rows, H, D / 32]`` on the inputs' device, or a scale of 255
            (:func:`~jfa_verify.core.mxfp8.check_scale_tensors`, :func:`~jfa_verify.core.mxfp8.check_scale_values`).
    """
    shape = validate_call(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                          sm_scale=sm_scale, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, window=window,
                          block_selection=block_selection, block_scales=block_scales)
    k_off = _check_offset_values("k_offsets", k_offsets, k.shape[0])
    batch = shape.batch
    k_lengths = tuple(np.diff(k_off).tolist())
    if shape.mode == "broadcast_q":
        mode = "broadcast_q"
        l_q = q.shape[0]
        q_lengths = (l_q,) * batch
        q_starts = (0,) * batch
        out_starts = tuple(b * l_q for b in range(batch))
    else:
        q_off = k_off if q_offsets is k_offsets else _check_offset_values("q_offsets", q_offsets, q.shape[0])
        q_lengths = tuple(np.diff(q_off).tolist())
        q_starts = tuple(q_off[:-1])
        out_starts = q_starts
        mode = "self" if q_off == k_off and q.shape[0] == k.shape[0] else "cross"

    problem = JaggedProblem(
        mode=mode,
        q_lengths=q_lengths,
        k_lengths=k_lengths,
        q_starts=q_starts,
        out_starts=out_starts,
        k_starts=tuple(k_off[:-1]),
        total_q_rows=shape.total_q_rows,
        num_heads_q=shape.num_heads_q,
        num_heads_kv=shape.num_heads_kv,
        head_dim=shape.head_dim,
        head_dim_v=shape.head_dim_v,
        causal=shape.causal,
        causal_alignment=causal_alignment,
        sm_scale=shape.sm_scale,
        dtype=q.dtype,
        device=q.device,
        inputs_contiguous=shape.inputs_contiguous,
        window=shape.window,
        block_selection=None if block_selection is None else select_blocks(block_selection, q_lengths, k_lengths,
                                                                           q.device),
        block_scales=block_scales,
    )
    if block_scales is not None:
        check_scale_values(block_scales)
    _check_hint("max_seqlen_q", max_seqlen_q, problem.max_seqlen_q)
    _check_hint("max_seqlen_k", max_seqlen_k, problem.max_seqlen_k)
    return problem


# ----------------------------------------------------------------------------- outputs


def output_violations(problem: JaggedProblem, o, lse) -> list[str]:
    """Every way ``o`` and ``lse`` break the output contract of ``problem``: type, shape, dtype, device.

    ``lse`` None is allowed (a kernel that declares it returns no LSE). Returns messages naming
    the output, the bad value and the expected one; empty when the outputs conform.
    """
    rows, heads = problem.total_q_rows, problem.num_heads_q
    wants = [("o", o, (rows, heads, problem.head_dim_v), output_dtype(problem.dtype))]
    if lse is not None:
        wants.append(("lse", lse, (heads, rows), torch.float32))
    out = []
    for name, t, shape, dtype in wants:
        if not isinstance(t, torch.Tensor):
            out.append(f"{name} is a {type(t).__name__}, expected a torch.Tensor")
            continue
        if tuple(t.shape) != shape:
            out.append(f"{name}.shape={tuple(t.shape)}, expected {shape}")
        if t.dtype != dtype:
            out.append(f"{name}.dtype={t.dtype}, expected {dtype}")
        if t.device != problem.device:
            out.append(f"{name}.device={t.device}, expected {problem.device} (the inputs' device)")
    return out
