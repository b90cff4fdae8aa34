"""The one error hierarchy of jfa-verify.

Every user-facing error derives from :class:`JFAError`. Messages echo the bad
value as ``name=value`` and say how to fix it.
"""


class JFAError(Exception):
    """Base class of every error raised on purpose by jfa-verify."""


class InvalidInput(JFAError, ValueError):
    """A tensor, offsets array or option breaks the JFA contract.

    Raised eagerly, before any kernel runs, with the offending value and the fix.
    """


class UnsupportedCase(JFAError, ValueError):
    """A valid input that the chosen kernel declares it does not support
    (for example a head dim outside its range)."""


class UnknownKernel(JFAError, KeyError):
    """A kernel name that is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class KernelUnavailable(JFAError, RuntimeError):
    """A registered kernel whose optional dependency or device is missing."""


class KernelProtocolError(JFAError, TypeError):
    """A kernel returned something other than the protocol's result (for example ``o`` alone
    where ``(o, lse)`` is due); the message says what came back and what the contract wants."""


class ToolError(JFAError, RuntimeError):
    """An external tool jfa-verify drives (git, for ``bisect``) failed; the message names the command and
    what the tool said."""


class DeviceOutOfMemory(JFAError, RuntimeError):
    """The device had no memory left for jfa-verify's own work beside the kernel (other processes hold it): an
    environment problem (exit 2), never a finding about the kernel; the message says what needed the memory and
    the fix."""


class KernelConfigError(JFAError, ValueError):
    """A kernel registered wrongly: its name is taken by another kernel, or its ``load()`` returned no
    implementation. A configuration error (exit 2), never a finding; ``kernel`` is the name."""

    def __init__(self, message: str, kernel: str = ""):
        super().__init__(message)
        self.kernel = kernel


class PluginError(JFAError, ImportError):
    """A plugin file or a kernel entry point could not be imported; the message names the file and line."""


def missing_dependency(e: ModuleNotFoundError) -> str:
    """What to do about a module jfa-verify itself could not import: one sentence naming it and the fix (the
    optional extra that brings it, e.g. ``pip install 'jfa-verify[plots]'`` for matplotlib, where it is one)."""
    top = (e.name or "").split(".")[0]
    extra = _extra_of(top)
    fix = ("jfa-verify's own files are incomplete: reinstall it" if top == "jfa_verify" else
           f"it comes with jfa-verify's optional extra {extra!r}: pip install 'jfa-verify[{extra}]' (or pip install "
           f"{top})" if extra else
           f"install it (pip install {top or 'the module'}; the package's name may differ from the module's); if "
           f"it is one of jfa-verify's own, install jfa-verify with its dependencies")
    return f"a dependency is missing: {e}; {fix}"


def _extra_of(module: str) -> "str | None":
    """The optional extra of the installed jfa-verify that requires the distribution named ``module``, if any."""
    import importlib.metadata as md
    import re

    try:
        requires = md.requires("jfa-verify") or []
    except md.PackageNotFoundError:
        return None
    for req in requires:
        found = re.match(r"\s*([A-Za-z0-9_.-]+).*;.*extra\s*==\s*[\"']([^\"']+)[\"']", req)
        if found and module and found.group(1).lower().replace("-", "_") == module.lower():
            return found.group(2)
    return None
