"""Device choice: the GPU when there is one, otherwise CPU through Triton's interpreter.

Nothing here runs at import time; callers decide when to probe.
"""

from __future__ import annotations

import functools
import os
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, TypeVar

import torch

from jfa_verify.core.errors import InvalidInput

_chosen: Optional[torch.device] = None


def as_device(device: "torch.device | str", *, argument: str = "device") -> torch.device:
    """``device`` (a :class:`torch.device` or its name) as a :class:`torch.device` of a type jfa-verify runs on.

    Raises:
        InvalidInput: not a device torch knows (``"gpu"``), one of another type than CPU or CUDA, or CUDA where torch
            sees none; the message names the value and the fix (issue 43, 11: torch's own error named neither).
    """
    fix = "give 'cuda' (or 'cuda:N') for a GPU, or 'cpu' for Triton's interpreter"
    if isinstance(device, torch.device):
        parsed = device
    elif isinstance(device, str):
        try:
            parsed = torch.device(device)
        except (RuntimeError, ValueError):
            raise InvalidInput(f"{argument}={device!r} is not a device; {fix}") from None
    else:
        raise InvalidInput(f"{argument}={device!r} is a {type(device).__name__}, not a device; {fix}")
    if parsed.type not in ("cpu", "cuda"):
        raise InvalidInput(f"{argument}={device!r} is a {parsed.type} device: jfa-verify runs on CPU and CUDA; {fix}")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        # (a new user's run_case(..., "cuda") on a machine without one returned an "error" verdict, read as a finding)
        raise InvalidInput(f"{argument}={device!r} but torch sees no CUDA device here; give 'cpu' for Triton's "
                           f"interpreter")
    return parsed


def select_device(name: Optional[str] = None) -> torch.device:
    """Pick the device for this process and set up Triton to match.

    ``name`` is ``"cuda"``, ``"cpu"`` or None (the GPU when available). On CPU
    this sets ``TRITON_INTERPRET=1`` so Triton kernels loaded afterwards run in
    the interpreter; it must happen before a Triton kernel module is imported.
    It also lets loop bounds loaded from memory work in the interpreter with
    NumPy >= 2.3, and patches ``triton.language`` once per launch instead of at every device-function call
    (:func:`jfa_verify.core.interpreter.prepare_interpreter`), for every kernel.

    Raises:
        InvalidInput: ``name`` is unknown, ``"cuda"`` without a CUDA device, or ``"cuda"`` in a process that
            imported Triton for the interpreter (see :func:`_pin_triton_compiled`).
    """
    global _chosen
    if name is None:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif name in ("cuda", "cpu"):
        if name == "cuda" and not torch.cuda.is_available():
            raise InvalidInput("device='cuda' but torch sees no CUDA device; use --device cpu (Triton interpreter)")
        device = torch.device(name)
    else:
        raise InvalidInput(f"device={name!r} is not 'cuda' or 'cpu'")
    if device.type == "cuda":
        # Cleared before the pin's first import of Triton: a fork server started while a CPU command ran hands its
        # children TRITON_INTERPRET=1, and a CUDA worker importing Triton under it was refused (H100, 2026-12-07).
        interpret = os.environ.pop("TRITON_INTERPRET", None)
        try:
            _pin_triton_compiled()  # before recording the choice: a refused CUDA leaves none
        except InvalidInput:
            if interpret is not None:
                os.environ["TRITON_INTERPRET"] = interpret
            raise
    _chosen = device
    if device.type == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
        from jfa_verify.core.interpreter import prepare_interpreter

        prepare_interpreter()
    else:  # a kernel module imported from now on must compile, even if a CPU choice before left the variable set
        os.environ.pop("TRITON_INTERPRET", None)
    return device


def _pin_triton_compiled() -> None:
    """Import Triton's language now, compiled, for a process that runs CUDA kernels.

    ``@triton.jit`` decides at a module's first import whether its functions are interpreted, and Triton's own
    library (``tl.sum``, ``tl.cdiv``, ...) is imported once per process. A process that selected CUDA and later
    runs one command on the CPU (a CPU test in a GPU pytest worker, inside :func:`device_scope`) must not be the
    first to import Triton there: its library would stay interpreted and every CUDA kernel afterwards fail (seen
    on the H200: Gluon's import asserting ``isinstance(fn, JITFunction)`` in a worker whose first test ran on
    the CPU).

    Raises:
        InvalidInput: Triton was already imported with ``TRITON_INTERPRET=1`` in this process.
    """
    import triton.language.standard as standard
    from triton.runtime.jit import JITFunction

    if not isinstance(standard.cdiv, JITFunction):
        raise InvalidInput("device='cuda' but Triton was first imported in this process with TRITON_INTERPRET=1, "
                           "so its library runs only in the interpreter; select the device before anything imports "
                           "Triton, or start a fresh process without TRITON_INTERPRET")


def choose_for_compiling(device_type: str = "cuda") -> torch.device:
    """Record ``device_type`` as this process's device, unchecked, with Triton's compiler on (not the interpreter):
    a process that only builds kernels for a target (:class:`~jfa_verify.core.target_driver.TargetOnlyDriver`, no GPU
    needed) then imports kernel modules compiled, and ``"cpu"`` host code runs up to each launch on CPU tensors."""
    global _chosen
    _chosen = torch.device(device_type)
    os.environ.pop("TRITON_INTERPRET", None)
    return _chosen


def selected_device() -> Optional[torch.device]:
    """The device chosen by :func:`select_device`, or None if none was chosen in this process."""
    return _chosen


def current_device() -> torch.device:
    """The device chosen by :func:`select_device` (selecting the default on first call)."""
    return _chosen if _chosen is not None else select_device(None)


@contextmanager
def device_scope() -> Iterator[None]:
    """Undo, on leaving, what :func:`select_device` changed inside: the chosen device and ``TRITON_INTERPRET``.

    :func:`jfa_verify.cli.main` runs each command in one, so a program (or a test suite on a GPU) that
    calls ``main(["run", "--device", "cpu", ...])`` is not left interpreting every Triton kernel it
    loads afterwards: ``@triton.jit`` reads ``TRITON_INTERPRET`` when a module is imported, and a
    kernel decorated for the interpreter cannot take CUDA tensors. Kernel modules imported inside the
    scope keep the mode they were imported in.
    """
    global _chosen
    saved, interpret = _chosen, os.environ.get("TRITON_INTERPRET")
    try:
        yield
    finally:
        _chosen = saved
        if interpret is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = interpret


_F = TypeVar("_F", bound=Callable)


def keeps_device_choice(fn: _F) -> _F:
    """Run ``fn`` inside :func:`device_scope`: for library functions that take a ``device`` and select it.

    Without it ``run_mutant(..., device="cpu")`` called in a GPU process (a test on the H200) left
    ``TRITON_INTERPRET=1`` behind, and kernel modules imported afterwards in that process were decorated for
    the interpreter ("Cannot call @triton.jit'd outside of the scope of a kernel" on CUDA tensors).
    """
    @functools.wraps(fn)
    def scoped(*args, **kwargs):
        with device_scope():
            return fn(*args, **kwargs)

    return scoped  # type: ignore[return-value]


def interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter: ``TRITON_INTERPRET`` read the way Triton
    reads it (``1``, ``true``, ``on``, ``yes`` in any case; ``false`` means compiled kernels)."""
    from triton import knobs

    return bool(knobs.runtime.interpret)


def device_label(device: "torch.device | str") -> str:
    """How a run names its device to a person: ``str(device)`` (``"cuda"``, ``"cuda:1"``), or, in a process whose
    Triton kernels run in the CPU interpreter, ``"CPU (Triton kernels interpreted)"``: a plain-torch kernel runs
    there as it is (a new user's plain-torch plugin was said to run "on Triton interpreter on CPU")."""
    return "CPU (Triton kernels interpreted)" if interpreting() else str(device)


def ensure_interpreter_matches_device() -> None:
    """Before importing a Triton kernel module: interpret on CPU-only processes."""
    current_device()
