"""Registry of kernels under test.

Kernels register with :func:`register_kernel` on a zero-argument *loader* that
returns the contract callable (see :mod:`jfa_verify.contract`). Loaders run on
first use only, so importing the registry never imports Triton, probes a GPU
or fails because an optional dependency is missing.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch

from jfa_verify.errors import KernelUnavailable, UnknownKernel, UnsupportedCase

__all__ = ["Capabilities", "Kernel", "register_kernel", "get_kernel", "kernel_names", "load_plugin"]


def _no_blocks(head_dim: int, dtype: torch.dtype, device_type: str) -> tuple[int, int]:
    return (1, 1)


@dataclass(frozen=True)
class Capabilities:
    """What a kernel declares it supports; strategies and runners draw inside it.

    ``instrumented``: the kernel records per-tile visits (see field comment).
    ``block_sizes(head_dim, dtype, device_type) -> (BLOCK_M, BLOCK_N)`` gives
    the kernel's own tiles so tile-boundary lengths are never hard-coded.
    """

    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16, torch.float16)
    min_head_dim: int = 16
    max_head_dim: int = 256
    non_power_of_two_head_dims: bool = True
    distinct_value_head_dim: bool = True
    modes: tuple[str, ...] = ("self", "cross", "broadcast_q")
    causal: bool = True
    gqa: bool = True
    backward: bool = True
    device_types: tuple[str, ...] = ("cuda", "cpu")
    # The callable has ``.run(..., instrument=dict)`` recording tile visits and schedules
    # (see kernels.triton_jfa._autograd); runners then check the scheduler invariants.
    instrumented: bool = False
    # float32 inputs are multiplied with TF32 operands (10-bit mantissa): judged by the
    # budget table's "float32-tf32" row instead of "float32".
    tf32: bool = False
    block_sizes: Callable[[int, torch.dtype, str], tuple[int, int]] = _no_blocks

    def unsupported_reason(self, problem) -> Optional[str]:
        """Why ``problem`` (a JaggedProblem) is outside these capabilities, or None."""
        if problem.dtype not in self.dtypes:
            return f"dtype={problem.dtype} not in {self.dtypes}"
        for name, d in (("head_dim", problem.head_dim), ("head_dim_v", problem.head_dim_v)):
            if not self.min_head_dim <= d <= self.max_head_dim:
                return f"{name}={d} outside [{self.min_head_dim}, {self.max_head_dim}]"
            if not self.non_power_of_two_head_dims and d & (d - 1):
                return f"{name}={d} is not a power of two"
        if problem.head_dim != problem.head_dim_v and not self.distinct_value_head_dim:
            return f"head_dim_v={problem.head_dim_v} differs from head_dim={problem.head_dim}"
        if problem.mode not in self.modes:
            return f"mode={problem.mode!r} not in {self.modes}"
        if problem.causal and not self.causal:
            return "causal=True not supported"
        if problem.group_size != 1 and not self.gqa:
            return f"GQA group size {problem.group_size} not supported"
        if problem.device.type not in self.device_types:
            return f"device={problem.device} not in {self.device_types}"
        return None


@dataclass
class Kernel:
    """A registered kernel: its name, capabilities and lazily loaded callable."""

    name: str
    description: str
    loader: Callable[[], Callable]
    capabilities: Capabilities
    requires: tuple[str, ...] = ()
    _fn: Optional[Callable] = field(default=None, repr=False)

    def missing_requirements(self) -> list[str]:
        return [m for m in self.requires if importlib.util.find_spec(m) is None]

    @property
    def fn(self) -> Callable:
        """The contract callable; loads it (and its dependencies) on first use.

        Raises:
            KernelUnavailable: an optional dependency is not installed.
        """
        if self._fn is None:
            missing = self.missing_requirements()
            if missing:
                raise KernelUnavailable(
                    f"kernel {self.name!r} needs {', '.join(missing)}; install it with pip install {' '.join(missing)}"
                )
            self._fn = self.loader()
        return self._fn

    def check_supported(self, problem) -> None:
        """Raise :class:`UnsupportedCase` when ``problem`` is outside the capabilities."""
        reason = self.capabilities.unsupported_reason(problem)
        if reason is not None:
            raise UnsupportedCase(f"kernel {self.name!r} does not support this case: {reason}")

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


_REGISTRY: dict[str, Kernel] = {}


def register_kernel(
    name: str,
    *,
    capabilities: Capabilities,
    description: str = "",
    requires: tuple[str, ...] = (),
) -> Callable[[Callable[[], Callable]], Callable[[], Callable]]:
    """Decorator: register a zero-argument loader that returns the kernel callable.

    Re-registering a name replaces the entry (plugins may shadow built-ins).
    """

    def decorate(loader: Callable[[], Callable]) -> Callable[[], Callable]:
        _REGISTRY[name] = Kernel(name, description or (loader.__doc__ or "").strip(), loader, capabilities, requires)
        return loader

    return decorate


def _discover() -> None:
    # Built-in kernels live in sibling packages whose __init__ only registers.
    import kernels.triton_jfa  # noqa: F401


def get_kernel(name: str) -> Kernel:
    """Return the registered kernel ``name``.

    Raises:
        UnknownKernel: no such name; the message lists the registered ones.
    """
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownKernel(
            f"no kernel named {name!r}; registered: {', '.join(sorted(_REGISTRY))} "
            f"(load more with --plugin FILE.py)"
        ) from None


def kernel_names() -> list[str]:
    """Names of every registered kernel, sorted."""
    _discover()
    return sorted(_REGISTRY)


def load_plugin(path: str | Path) -> None:
    """Import a Python file that registers kernels (for out-of-tree or planted-bug kernels).

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"plugin file {str(path)!r} does not exist")
    mod_name = f"_jfa_plugin_{path.stem}_{abs(hash(str(path))) % 10**8}"
    if mod_name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
