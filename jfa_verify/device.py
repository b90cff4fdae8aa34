"""Device choice: the GPU when there is one, otherwise CPU through Triton's interpreter.

Nothing here runs at import time; callers decide when to probe.
"""

from __future__ import annotations

import os
from typing import Optional

import torch

from .errors import InvalidInput

_chosen: Optional[torch.device] = None


def select_device(name: Optional[str] = None) -> torch.device:
    """Pick the device for this process and set up Triton to match.

    ``name`` is ``"cuda"``, ``"cpu"`` or None (the GPU when available). On CPU
    this sets ``TRITON_INTERPRET=1`` so Triton kernels loaded afterwards run in
    the interpreter; it must happen before a Triton kernel module is imported.

    Raises:
        InvalidInput: ``name`` is unknown, or ``"cuda"`` without a CUDA device.
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
    _chosen = device
    if device.type == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    return device


def current_device() -> torch.device:
    """The device chosen by :func:`select_device` (selecting the default on first call)."""
    return _chosen if _chosen is not None else select_device(None)


def interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def ensure_interpreter_matches_device() -> None:
    """Before importing a Triton kernel module: interpret on CPU-only processes."""
    current_device()
