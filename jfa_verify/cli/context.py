"""What the commands share, built once from the parsed arguments: the device, the plugins, the kernel(s), the suite,
the case filter and the run's :class:`~jfa_verify.run.settings.RunSettings`. Nothing heavy happens when it is built:
the device is chosen (torch imported, Triton's interpreter turned on for the CPU) the first time a command asks for
it, the plugins are imported when a kernel is first asked for, the settings are made on first use, so a command that
needs none of them (``findings``, ``schedule``) never loads them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional, Sequence


def load_kernel(name: str, plugins: Sequence[str] = ()):
    """Import the ``--plugin`` files, then the registered kernel ``name`` (errors name the file, line or names)."""
    from jfa_verify.protocol.registry import get_kernel, load_plugins

    load_plugins(plugins)
    return get_kernel(name)


def _names(value) -> tuple[str, ...]:
    """An option given once (a string) or repeatable (a list) as a tuple, each value once in its first place (a
    gate given one --kernel twice checked it twice, its Markdown row summing both: a new user's trial); an absent one
    as ()."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(dict.fromkeys(value))


@dataclass(frozen=True)
class Context:
    """One command's shared settings. ``device`` is chosen on first use and kept (``select_device`` once a command);
    :meth:`kernel` and :meth:`kernels` load the plugins first."""

    command: str
    device_choice: Optional[str] = None  # --device: "cuda", "cpu" or None (the GPU when there is one)
    plugins: tuple[str, ...] = ()  # --plugin files
    kernel_names: tuple[str, ...] = ()  # --kernel (once, or repeated for gate and matrix)
    kernel_default: Optional[str] = None  # the kernel of a command given no --kernel (see kernel_name)
    suites: tuple[str, ...] = ()  # --suite (once, or repeated for matrix)
    filter: Optional[str] = None  # --filter: part of a case name
    max_cases: Optional[int] = None
    seed: Optional[int] = None
    reproducers: Optional[str] = None  # the folder for failing-case files
    # what goes into :attr:`settings`
    timeout_s: Optional[float] = None  # --timeout
    isolate: bool = False  # --isolate / --no-isolate (a command without the option runs its cases in-process)
    backward: bool = True  # not --forward-only
    accept: tuple[str, ...] = ()  # --accept
    memory: Optional[str] = None  # --memory

    @classmethod
    def from_args(cls, args) -> "Context":
        """The context of parsed arguments: options a command does not have stay at their defaults."""
        def get(name, default=None):
            return getattr(args, name, default)

        return cls(command=args.command, device_choice=get("device"), plugins=_names(get("plugin")),
                   kernel_names=_names(get("kernel")), kernel_default=get("kernel_default"),
                   suites=_names(get("suite")), filter=get("filter"),
                   max_cases=get("max_cases"), seed=get("seed"), reproducers=get("reproducers"),
                   timeout_s=get("timeout"), isolate=bool(get("isolate", False)),
                   backward=not get("forward_only", False), accept=_names(get("accept")), memory=get("memory"))

    @cached_property
    def settings(self):
        """The run's :class:`~jfa_verify.run.settings.RunSettings`, made once from the arguments (the one place a
        command's options become settings): ``--timeout``, ``--isolate``, ``--forward-only``, ``--plugin``,
        ``--accept``, ``--memory`` and ``--seed`` (0 when the command draws its own). ``jobs`` is 1: a command that
        runs cases at once chooses the count (:func:`~jfa_verify.run.parallelism.choose_jobs`) and derives
        ``ctx.settings.replace(jobs=...)``.

        Raises:
            InvalidInput: a value :class:`~jfa_verify.run.settings.RunSettings` refuses (a usage error, exit 2).
        """
        from jfa_verify.run.settings import RunSettings

        return RunSettings(backward=self.backward, timeout_s=self.timeout_s, isolate=self.isolate,
                           plugins=self.plugins, accept=self.accept, memory=self.memory,
                           seed=self.seed if self.seed is not None else 0)

    @property
    def kernel_name(self) -> Optional[str]:
        """The first ``--kernel``; without one, the command's default kernel (:meth:`unnamed_kernel`)."""
        return self.kernel_names[0] if self.kernel_names else self.unnamed_kernel(self.kernel_default)

    @property
    def suite(self) -> Optional[str]:
        return self.suites[0] if self.suites else None

    @cached_property
    def device(self):
        """The device the command runs on. Chosen first in every command that runs a kernel: on the CPU it turns on
        Triton's interpreter, which must precede any import of triton."""
        from jfa_verify.core.device import select_device

        return select_device(self.device_choice)

    def kernel(self, name: Optional[str] = None):
        """The kernel ``name`` (default: ``--kernel``), the plugins imported first."""
        return load_kernel(name or self.kernel_name, self.plugins)

    def kernels(self, default: Sequence[str] = ()) -> list:
        """Every ``--kernel`` named, in order (``default`` when none was: :meth:`unnamed_kernel`), the plugins imported
        first."""
        from jfa_verify.protocol.registry import get_kernel, load_plugins

        load_plugins(self.plugins)
        return [get_kernel(name) for name in self.kernel_names or [self.unnamed_kernel(d) for d in default]]

    def unnamed_kernel(self, default: Optional[str]) -> Optional[str]:
        """``default`` (a command's kernel when no ``--kernel`` is given), unless the ``--plugin`` files register
        kernels: a CI line that loads the user's plugin and forgets ``--kernel`` checked the built-in kernel instead,
        and passed (a new user's trial, 2026-12-07).

        Raises:
            UsageError: the plugins register kernels and none was named (the message lists them)."""
        if default is None or not self.plugins:
            return default
        from jfa_verify.cli.arguments import UsageError
        from jfa_verify.protocol.registry import kernels_of_plugins, unnamed_kernel_message

        self.device  # noqa: B018 - chosen before any plugin is imported (its Triton kernels follow the device)
        mine = kernels_of_plugins(self.plugins)
        if mine:
            raise UsageError(unnamed_kernel_message(mine, default))
        return default
