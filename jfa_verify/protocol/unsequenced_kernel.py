"""The Triton kernel of :mod:`jfa_verify.protocol.unsequenced`: rows before ``offsets[0]`` set to a value, for up to
three tensors in one launch. Imported on first use, so ``TRITON_INTERPRET`` is read after the device is chosen.

Slot ``i`` is a tensor seen as ``[rows, width]`` through its element strides (``SR`` between rows, ``SC`` between
columns) and the offsets whose first entry ends its rows of no sequence. Program ``p`` owns rows
``p * BLOCK_R ...`` of every slot; it reads one offset per slot and returns at once where its rows all lie at or
past ``offsets[0]`` (every program of a batch whose ``offsets[0]`` is 0), so the launch costs a few microseconds,
not a pass over the outputs.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _fill_slot(OFF, X, ROWS, WIDTH, SR, SC, VALUE, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    first = tl.minimum(tl.maximum(tl.load(OFF).to(tl.int64), 0), ROWS)
    r0 = tl.program_id(0).to(tl.int64) * BLOCK_R
    if r0 < first:
        rows = r0 + tl.arange(0, BLOCK_R).to(tl.int64)
        row_ok = rows < first
        for c0 in range(0, WIDTH, BLOCK_C):
            cols = c0 + tl.arange(0, BLOCK_C).to(tl.int64)
            ok = row_ok[:, None] & (cols < WIDTH)[None, :]
            fill = (tl.zeros([BLOCK_R, BLOCK_C], tl.float32) + VALUE).to(X.dtype.element_ty)
            tl.store(X + rows[:, None] * SR + cols[None, :] * SC, fill, mask=ok)


# Sizes and strides vary with every call and only bound masks and address memory: not specialized (each value class
# would build another variant).
@triton.jit(do_not_specialize=["ROWS0", "WIDTH0", "SR0", "SC0", "ROWS1", "WIDTH1", "SR1", "SC1",
                               "ROWS2", "WIDTH2", "SR2", "SC2"])
def _fill_before_first_kernel(OFF0, X0, ROWS0, WIDTH0, SR0, SC0, VALUE0,
                              OFF1, X1, ROWS1, WIDTH1, SR1, SC1, VALUE1,
                              OFF2, X2, ROWS2, WIDTH2, SR2, SC2, VALUE2,
                              SLOTS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    _fill_slot(OFF0, X0, ROWS0, WIDTH0, SR0, SC0, VALUE0, BLOCK_R, BLOCK_C)
    if SLOTS > 1:
        _fill_slot(OFF1, X1, ROWS1, WIDTH1, SR1, SC1, VALUE1, BLOCK_R, BLOCK_C)
    if SLOTS > 2:
        _fill_slot(OFF2, X2, ROWS2, WIDTH2, SR2, SC2, VALUE2, BLOCK_R, BLOCK_C)
