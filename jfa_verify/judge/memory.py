"""What a kernel does with memory it allocates: guard-band canaries and recycled-memory fills.

Inside :func:`tracked_allocations`, every tensor made by torch's Python factory functions
(``torch.empty``, ``empty_like``, ``empty_strided``, ``zeros``, ``zeros_like``, ``full``,
``full_like``, ``ones``, ``ones_like`` and the ``Tensor.new_*`` methods) is carved out of a
larger buffer: ``guard`` elements on each side are filled with a byte pattern and checked when
the block ends, so a kernel that writes one element past its output (or before it) is named
with the buffer and the offset. The bodies of *uninitialized* allocations (``empty*``) are
filled with ``fill``:

* ``"nan"``: NaN (integers: their maximum), what :func:`jfa_verify.run.runner.poisoned_allocations`
  gives every run: an unwritten row shows;
* ``"large"``: a large finite value (half the dtype's maximum), as recycled memory holds: a
  kernel that reads its output before writing it in a way NaN hides (``fmax``, ``where(x > y)``,
  comparisons that are false for NaN) shows here (FlashAttention PR 2333 was a NaN seen only
  with recycled memory);
* ``None``: whatever the allocator returns.

Tensors that C++ operators allocate internally (e.g. ``aten._flash_attention_forward``'s
outputs) are not seen: the checks cover kernels whose host code allocates in Python, such as
Triton and Gluon kernels.
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass, field
from typing import Iterator, Optional

import torch

__all__ = ["Allocation", "AllocationLog", "FILLS", "GUARD_BYTE", "tracked_allocations"]

FILLS = ("nan", "large", None)
GUARD_BYTE = 0xA5  # the canary pattern: a write of exactly these bytes everywhere is vanishingly unlikely
_THIS_FILE = __file__


@dataclass
class Allocation:
    """One tracked tensor: its guarded buffer, where it was allocated and what it was asked to be."""

    buffer: torch.Tensor  # flat: [guard | body span | guard]
    guard: int  # elements on each side
    span: int  # elements of the body (storage the view may touch)
    shape: tuple
    dtype: torch.dtype
    where: str  # file:line of the call that allocated it
    front: torch.Tensor = field(repr=False)  # the guards' bytes as written
    back: torch.Tensor = field(repr=False)

    def owns(self, t: torch.Tensor) -> bool:
        return (isinstance(t, torch.Tensor)
                and t.untyped_storage().data_ptr() == self.buffer.untyped_storage().data_ptr())

    def damage(self) -> list[tuple[str, int, int]]:
        """``[(side, first bad element offset, bad elements)]``: offsets count away from the body (the
        back guard's 0 is the element just past the end; the front guard's 0 the one just before)."""
        out = []
        item = self.buffer.element_size()
        raw = self.buffer.view(torch.uint8)
        for side, now, was in (("front", raw[: self.guard * item], self.front),
                               ("back", raw[(self.guard + self.span) * item:], self.back)):
            bad = (now != was).reshape(-1, item).any(1)
            if bool(bad.any()):
                idx = torch.nonzero(bad).reshape(-1)
                first = int(idx[-1]) if side == "front" else int(idx[0])
                offset = self.guard - 1 - first if side == "front" else first
                out.append((side, offset, int(bad.sum())))
        return out


@dataclass
class AllocationLog:
    """The allocations of one tracked block; :meth:`violations` names every guard a kernel wrote."""

    allocations: list[Allocation] = field(default_factory=list)

    def violations(self, named: Optional[dict] = None) -> list[str]:
        """One message per damaged guard, naming the buffer (``named``: ``{"o": tensor, ...}`` gives names
        to the outputs the kernel returned) and the offset of the first bad element."""
        out = []
        for a in self.allocations:
            for side, offset, count in a.damage():
                name = next((n for n, t in (named or {}).items() if a.owns(t)), None)
                what = f"output {name}" if name else "a buffer"
                position = (f"{offset + 1} element(s) past its end" if side == "back"
                            else f"{offset + 1} element(s) before its start")
                out.append(f"{what} {list(a.shape)} {str(a.dtype).replace('torch.', '')} allocated at {a.where} was "
                           f"written {position} ({count} element(s) of the {side} guard band changed)")
        return out


def _fill_value(fill: Optional[str], dtype: torch.dtype):
    if fill is None:
        return None
    if dtype.is_floating_point:
        if fill == "nan":
            return float("nan")
        return float(torch.finfo(dtype).max) / 2  # large and finite, as stale activations are
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).max if fill == "nan" else torch.iinfo(dtype).max // 2


def _span(size, stride) -> int:
    return 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(n > 0 for n in size) else 0


def _caller() -> str:
    for frame in reversed(traceback.extract_stack()[:-2]):
        if frame.filename != _THIS_FILE and "/torch/" not in frame.filename:
            return f"{frame.filename}:{frame.lineno}"
    return "?"


@contextlib.contextmanager
def tracked_allocations(*, fill: Optional[str] = "nan", guard: int = 4096) -> Iterator[AllocationLog]:
    """Track the tensors torch's Python factories make inside the block (see the module docstring).

    Args:
        fill: the body of uninitialized allocations: ``"nan"``, ``"large"`` or None (untouched).
        guard: elements of guard band on each side of every allocation (>= 1).

    Yields: an :class:`AllocationLog`; call ``log.violations(named_outputs)`` after the block (and after
    any backward pass that allocates inside it).

    Raises:
        ValueError: an unknown ``fill`` or ``guard < 1``.
    """
    if fill not in FILLS:
        raise ValueError(f"fill={fill!r} is not one of {FILLS}")
    if guard < 1:
        raise ValueError(f"guard={guard} must be >= 1")
    log = AllocationLog()
    real = {name: getattr(torch, name) for name in ("empty", "empty_like", "empty_strided", "zeros", "zeros_like",
                                                    "full", "full_like", "ones", "ones_like")}
    real_methods = {name: getattr(torch.Tensor, name) for name in ("new_empty", "new_zeros", "new_full", "new_ones")}

    def make(size, stride, dtype, device, body, requires_grad=False) -> torch.Tensor:
        dtype = dtype or torch.get_default_dtype()
        size = tuple(int(n) for n in size)
        stride = tuple(stride) if stride is not None else real["empty"](size, device="meta").stride()
        span = _span(size, stride)
        buf = real["empty"]((span + 2 * guard,), dtype=dtype, device=device)
        raw = buf.view(torch.uint8)
        raw.fill_(GUARD_BYTE)
        item = buf.element_size()
        value = _fill_value(fill, dtype) if body is None else body
        if value is not None and span:
            buf[guard: guard + span].fill_(value)
        log.allocations.append(Allocation(buf, guard, span, size, dtype, _caller(),
                                          raw[: guard * item].clone(), raw[(guard + span) * item:].clone()))
        # A tensor over buf's storage, not an autograd view of buf: a kernel writing into it in place with values
        # that require grad must see what it would see in a fresh tensor (as a view of a leaf, a write into an
        # empty slice left a later write raising "a leaf Variable that requires grad is being used in an in-place
        # operation": the README's example kernel failed the gate so).
        view = real["empty"]((0,), dtype=dtype, device=device).set_(buf.untyped_storage(), guard, size, stride)
        return view.requires_grad_(requires_grad) if requires_grad else view

    def parse(args, kwargs):
        size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else args
        return tuple(size), kwargs.get("dtype"), kwargs.get("device")

    def supported(kwargs) -> bool:
        return (not any(kwargs.get(k) for k in ("out", "pin_memory"))
                and kwargs.get("layout", torch.strided) == torch.strided)

    def factory(name, body_of):
        def wrapped(*args, **kwargs):
            if not supported(kwargs):
                return real[name](*args, **kwargs)
            if name.endswith("_like"):
                src = args[0]
                # the strides torch itself would give (preserve_format keeps a dense input's layout)
                stride = real["empty_like"](src, device="meta", memory_format=kwargs.get(
                    "memory_format", torch.preserve_format)).stride()
                body = body_of(args[1:], kwargs)
                return make(src.shape, stride, kwargs.get("dtype") or src.dtype, kwargs.get("device") or src.device,
                            body, kwargs.get("requires_grad", False))
            if name == "empty_strided":
                return make(args[0], tuple(args[1]), kwargs.get("dtype"), kwargs.get("device"), None,
                            kwargs.get("requires_grad", False))
            if name == "full":
                size, dtype, device = tuple(args[0]), kwargs.get("dtype"), kwargs.get("device")
                value = args[1] if len(args) > 1 else kwargs["fill_value"]
                if dtype is None:
                    dtype = torch.get_default_dtype() if isinstance(value, float) else torch.int64
                return make(size, None, dtype, device, value, kwargs.get("requires_grad", False))
            size, dtype, device = parse(args, kwargs)
            return make(size, None, dtype, device, body_of((), kwargs), kwargs.get("requires_grad", False))
        return wrapped

    def method(name, body_of):
        def wrapped(self, *args, **kwargs):
            if not supported(kwargs):
                return real_methods[name](self, *args, **kwargs)
            if name == "new_full":
                size, body = tuple(args[0]), body_of(args[1:], kwargs)
            else:
                size = tuple(args[0]) if isinstance(args[0], (tuple, list, torch.Size)) else tuple(args)
                body = body_of((), kwargs)
            return make(size, None, kwargs.get("dtype") or self.dtype, kwargs.get("device") or self.device, body,
                        kwargs.get("requires_grad", False))
        return wrapped

    uninit = lambda args, kw: None  # noqa: E731  (the log's fill)
    zero = lambda args, kw: 0  # noqa: E731
    one = lambda args, kw: 1  # noqa: E731
    given = lambda args, kw: args[0] if args else kw["fill_value"]  # noqa: E731
    bodies = {"empty": uninit, "empty_like": uninit, "empty_strided": uninit, "zeros": zero, "zeros_like": zero,
              "full": given, "full_like": given, "ones": one, "ones_like": one}
    method_bodies = {"new_empty": uninit, "new_zeros": zero, "new_full": given, "new_ones": one}
    try:
        for name, body_of in bodies.items():
            setattr(torch, name, factory(name, body_of))
        for name, body_of in method_bodies.items():
            setattr(torch.Tensor, name, method(name, body_of))
        yield log
    finally:
        for name, fn in real.items():
            setattr(torch, name, fn)
        for name, fn in real_methods.items():
            setattr(torch.Tensor, name, fn)

