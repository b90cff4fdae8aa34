"""The registry of kernels under test: registration, entry-point discovery, plugin files.

A kernel module registers with :func:`register_kernel` on a zero-argument
*loader* that returns the implementation (see :mod:`jfa_verify.protocol.kernel`).
Loaders run on first use only, so registering never imports Triton, probes a
GPU or fails because an optional dependency is missing.

Kernel modules are found in two ways, one mechanism (a module whose import
registers kernels):

* **entry points** of the group ``jfa_verify.kernels`` (:data:`ENTRY_POINT_GROUP`):
  a kernel package registers itself by being installed; the project's own
  ``triton_jfa`` is found this way too. This module imports no kernel by name.
* **plugin files**: :func:`load_plugin` (``--plugin FILE.py``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from jfa_verify.core.contract import JaggedProblem
from jfa_verify.core.errors import InvalidInput, KernelConfigError, PluginError, UnknownKernel
from jfa_verify.core.exits import exit_call, exits_refused
from jfa_verify.protocol.kernel import Capabilities, Kernel, TileSizes

__all__ = ["ENTRY_POINT_GROUP", "add_kernel", "broken_entry_points", "get_kernel", "kernel_names", "load_plugin",
           "load_plugins", "register_kernel"]

ENTRY_POINT_GROUP = "jfa_verify.kernels"

_REGISTRY: dict[str, Kernel] = {}
_BROKEN: dict[str, str] = {}  # entry point name -> why it could not be imported
_EMPTY_PLUGINS: list[str] = []  # plugin files whose import registered no kernel
# Kernel name -> why it is ambiguous: two entry points register it (which one loads first depends on
# the installation, so neither may be run under that name).
_CONFLICTS: dict[str, str] = {}
_discovered = False


def _source(loader) -> tuple[Optional[str], str, Optional[int]]:
    """Where ``loader`` was defined: ``(file, qualified name, first line)``, each None or ``repr`` when unknown.

    A module imported twice (under two names, or reloaded) defines its loaders again with the same source."""
    try:
        file: Optional[str] = str(Path(inspect.getsourcefile(loader) or inspect.getfile(loader)).resolve())
    except TypeError:  # a builtin, a partial or a callable object: no file of its own
        file = None
    code = getattr(loader, "__code__", None)
    name = getattr(loader, "__qualname__", None) or repr(loader)
    return file, name, code.co_firstlineno if code is not None else None


def _describe_source(loader) -> str:
    file, name, line = _source(loader)
    return f"{file}:{line} ({name})" if file and line else f"{file} ({name})" if file else name


def add_kernel(kernel: Kernel) -> Kernel:
    """Register a prebuilt :class:`Kernel`.

    A name is registered once: the same loader registered again (its module imported twice) replaces
    its earlier self; any other loader under a taken name is refused, since a plugin that silently
    replaced a built-in would have every later verdict judge code the user did not name.

    Raises:
        InvalidInput: ``kernel`` is not a :class:`Kernel`.
        KernelConfigError: ``kernel.name`` is registered by another loader; the message names both sources.
    """
    if not isinstance(kernel, Kernel):
        raise InvalidInput(f"add_kernel needs a jfa_verify.Kernel, got {type(kernel).__name__}")
    old = _REGISTRY.get(kernel.name)
    if old is not None and _source(old.loader) != _source(kernel.loader):
        raise KernelConfigError(
            f"kernel name {kernel.name!r} is already registered by {_describe_source(old.loader)}; "
            f"{_describe_source(kernel.loader)} registers it again. A kernel cannot replace another: register "
            f"yours under another name (e.g. {kernel.name + '_mine'!r}) and pass that name to --kernel",
            kernel.name)
    _REGISTRY[kernel.name] = kernel
    return kernel


def register_kernel(
    name: str,
    *,
    capabilities: Optional[Capabilities] = None,
    tile_sizes: Optional[Callable[[JaggedProblem], Optional[TileSizes]]] = None,
    description: str = "",
    requires: tuple[str, ...] = (),
    sanitizer_control: Optional[str] = None,
) -> Callable[[Callable[[], Callable]], Callable[[], Callable]]:
    """Decorator: register a zero-argument loader that returns the kernel's implementation.

    Args:
        name: registry name (non-empty, no spaces).
        capabilities: a :class:`Capabilities` (required; a keyword with a default only so that leaving it out is
            a clear error).
        tile_sizes: ``tile_sizes(problem) -> TileSizes`` (pure Python: it never loads the kernel),
            the tiles the kernel runs for a problem; None when it has no fixed tiles.
        description: one line for ``jfa-verify kernels`` (default: the loader's docstring's first line, else
            where the loader is defined).
        requires: importable module names the loader needs (reported, not imported, when missing).
        sanitizer_control: a module that ``python -m`` runs to launch the smallest race-free kernel built
            by the same compiler lowering as this one (exit 0 when its results are right). The gate runs it
            under racecheck first; when racecheck reports errors there of the form Triton's warp
            specialization draws (a read at the kernel's ``def`` line against writes there or at its
            ``warp_specialize`` call), this kernel's errors of exactly that form are listed as not judged
            instead of as findings (:mod:`jfa_verify.checks.sanitizer`).

    Raises:
        InvalidInput: a bad name, or ``capabilities`` missing or not a :class:`Capabilities`.
        KernelConfigError: (from the decorator) ``name`` is taken by another kernel (:func:`add_kernel`).
    """
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise InvalidInput(f"kernel name={name!r} must be a non-empty string without spaces")
    if capabilities is None:  # (a required keyword left out was a raw TypeError, with no hint of the fix)
        raise InvalidInput(f"register_kernel({name!r}) needs capabilities=: what the kernel supports, e.g. "
                           f"register_kernel({name!r}, capabilities=jfa_verify.Capabilities(backward=False, "
                           f"dtypes=(torch.bfloat16,)))")
    if not isinstance(capabilities, Capabilities):
        raise InvalidInput(f"capabilities={capabilities!r} for kernel {name!r} is not a jfa_verify.Capabilities")

    def decorate(loader: Callable[[], Callable]) -> Callable[[], Callable]:
        # (a plugin with neither was listed by `jfa-verify kernels` with a blank description)
        doc = description or ((loader.__doc__ or "").strip().splitlines() or [""])[0] or \
            f"(no description: registered by {_defined_at(loader)})"
        add_kernel(Kernel(name, doc, loader, capabilities, tile_sizes, tuple(requires),
                          sanitizer_control=sanitizer_control))
        return loader

    return decorate


def _defined_at(fn: Callable) -> str:
    """``file.py:name`` of a function (a plugin's module name is a generated one, its file is what a user knows)."""
    code = getattr(fn, "__code__", None)
    return f"{Path(code.co_filename).name}:{fn.__qualname__}" if code else repr(fn)


def _where(e: BaseException, path: Optional[Path] = None) -> str:
    """``file:line`` of the failure inside ``path`` (or the innermost frame), for error messages."""
    if isinstance(e, SyntaxError) and e.filename:
        return f"{e.filename}:{e.lineno}"
    frames = traceback.extract_tb(e.__traceback__)
    inside = [f for f in frames if path is None or Path(f.filename).resolve() == path]
    frame = (inside or frames or [None])[-1]
    return f"{frame.filename}:{frame.lineno}" if frame is not None else str(path)


def discover() -> None:
    """Import every kernel module installed under the entry-point group (once per process).

    One that fails to import is recorded (:func:`broken_entry_points`) instead of stopping the tool.
    """
    global _discovered
    if _discovered:
        return
    _discovered = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as e:  # a third-party kernel package may be broken in any way
            _BROKEN[ep.name] = f"entry point {ep.name} = {ep.value}: {type(e).__name__}: {e} ({_where(e)})"
            if isinstance(e, KernelConfigError) and e.kernel:
                _CONFLICTS[e.kernel] = f"entry point {ep.name} = {ep.value}: {e}"


def broken_entry_points() -> dict[str, str]:
    """``{entry point name: why it could not be imported}`` after :func:`discover`."""
    discover()
    return dict(_BROKEN)


def get_kernel(name: str) -> Kernel:
    """Return the registered kernel ``name``.

    Raises:
        UnknownKernel: no such name; the message lists the registered ones (and broken entry points).
        KernelConfigError: two installed entry points register ``name`` (the message names both).
    """
    discover()
    if name in _CONFLICTS:
        raise KernelConfigError(_CONFLICTS[name], name)
    try:
        return _REGISTRY[name]
    except KeyError:
        broken = "".join(f"; broken: {msg}" for msg in _BROKEN.values())
        empty = "".join(f"; plugin {p} registered no kernel (decorate its loader with "
                        f"@jfa_verify.register_kernel({name!r}, capabilities=...))" for p in _EMPTY_PLUGINS)
        raise UnknownKernel(
            f"no kernel named {name!r}; registered: {', '.join(sorted(_REGISTRY))} "
            f"(load more with --plugin FILE.py or install a package with a {ENTRY_POINT_GROUP!r} entry point)"
            f"{empty}{broken}"
        ) from None


def kernel_names() -> list[str]:
    """Names of every registered kernel, sorted."""
    discover()
    return sorted(_REGISTRY)


def load_plugin(path: "str | Path") -> None:
    """Import a Python file that registers kernels (out-of-tree or planted-bug kernels). Idempotent per path.

    The file's folder is appended to ``sys.path`` first, so the plugin can import modules beside it (its kernel
    package, a helper) as a script run from that folder could (a new user's ``from base import attention`` was a
    ``ModuleNotFoundError``); appended, not put first, so it never shadows an installed package.

    Raises:
        PluginError: the file does not exist, is not a file, or raises while importing (syntax or
            import error, a kernel name another kernel has, anything): the message names the file and line.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise PluginError(f"plugin file {str(path)!r} does not exist or is not a file; give a .py file "
                          f"that registers kernels with jfa_verify.register_kernel")
    mod_name = f"_jfa_plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    if mod_name in sys.modules:
        return
    discover()  # built-ins first, so a plugin taking a built-in's name is the one refused
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"plugin file {str(path)!r} cannot be imported as Python; give a .py file")
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    sys.modules[mod_name] = module
    registered = len(_REGISTRY)
    try:
        with exits_refused():
            spec.loader.exec_module(module)
    except BaseException as e:
        del sys.modules[mod_name]
        if isinstance(e, KeyboardInterrupt):
            raise
        if isinstance(e, SystemExit):  # (a silent exit 0 here was a green run that checked nothing)
            raise PluginError(f"plugin {path} called {exit_call(e)} while being imported: a plugin file "
                              "registers its kernels and returns; guard script code with "
                              "`if __name__ == \"__main__\":`") from None
        raise PluginError(f"plugin {_where(e, path)}: {type(e).__name__}: {e}") from None
    if len(_REGISTRY) == registered:  # (a plugin may only patch things; named when a kernel is not found)
        _EMPTY_PLUGINS.append(str(path))
    for name in list(_REGISTRY)[registered:]:
        _PLUGIN_OF[name] = str(path)


def load_plugins(paths: "Iterable[str | Path]") -> None:
    """Import each plugin file of ``paths`` in order (:func:`load_plugin`; a file imported before returns at once).

    Every command and worker process loads its ``--plugin`` files through this one call, after choosing its device:
    a plugin's Triton kernels are decorated for the device that is current when it is imported.

    Raises:
        PluginError: the first file that cannot be imported (see :func:`load_plugin`).
    """
    for path in paths:
        load_plugin(path)


_PLUGIN_OF: dict = {}  # kernel name -> the plugin file that registered it


def plugin_of(name: str) -> Optional[str]:
    """The absolute path of the plugin file (:func:`load_plugin`) that registered kernel ``name``; None for a kernel
    of an installed package or registered in code."""
    return _PLUGIN_OF.get(name)


def kernels_of_plugins(paths: "Iterable[str | Path]") -> list[str]:
    """Names of the kernels that the plugin files ``paths`` registered (sorted; the files imported first by
    :func:`load_plugins`).

    Where this is not empty and the user named no kernel, a command must not fall back to a built-in one: a CI line
    that loads the user's plugin and forgets to name the kernel would check the built-in kernel and pass (a new
    user's trial, 2026-12-07). The CLI's ``--plugin`` and the pytest plugin's ``--jfa-plugin`` both ask here.

    Raises:
        PluginError: a file that cannot be imported (see :func:`load_plugin`).
    """
    paths = list(paths)
    load_plugins(paths)
    files = {str(Path(p).resolve()) for p in paths}
    return [name for name in kernel_names() if plugin_of(name) in files]


def unnamed_kernel_message(mine: Sequence[str], default: str, plugin_flag: str = "--plugin",
                           kernel_flag: str = "--kernel") -> str:
    """The refusal where plugin files registered the kernels ``mine`` (:func:`kernels_of_plugins`) and no kernel was
    named: the CLI's and the pytest plugin's, each with its own flags."""
    return (f"{plugin_flag} registers {', '.join(mine)}, and no {kernel_flag} was given: name the kernel to check "
            f"({kernel_flag} {mine[0]}); without {kernel_flag} the built-in {default} is checked, which you can also "
            f"name")
