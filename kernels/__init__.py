"""Kernels under test, their registry and adapters."""

from .registry import Capabilities, Kernel, get_kernel, kernel_names, load_plugin, register_kernel

__all__ = ["Capabilities", "Kernel", "get_kernel", "kernel_names", "load_plugin", "register_kernel"]
