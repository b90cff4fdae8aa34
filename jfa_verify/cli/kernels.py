"""``jfa-verify kernels``: the registry, and where each kernel runs."""

from __future__ import annotations

from jfa_verify.cli.arguments import EXIT_OK, device_option, plugin_option

HELP = ("list registered kernels and whether each runs on this machine's device "
        "(why not, if not)")
DESCRIPTION = ("List the registered kernels (built in, installed packages' entry points, "
               "--plugin files) and whether each runs on the device, with the reason when not, from its "
               "declared capabilities and its load() (a kernel whose load() raises or returns no implementation "
               "is listed as not running, with the reason); entry points that failed to import are named. "
               "Exit status: 0; 2 a "
               "bad argument (a device torch does not see, a plugin that cannot be loaded).")


def add_arguments(parser) -> None:
    device_option(parser, help="the device to ask about (default: cuda when available, else the CPU interpreter)")
    plugin_option(parser)


def main(args, ctx) -> int:
    """One line per registered kernel: whether it can run on the device (its capabilities say, then its load():
    each kernel the capabilities allow is loaded), and why not; then the entry points that failed to import."""
    from jfa_verify.core.errors import KernelConfigError, KernelUnavailable
    from jfa_verify.protocol.registry import broken_entry_points, get_kernel, kernel_names, load_plugins

    device = ctx.device
    load_plugins(ctx.plugins)
    print(f"registered kernels, and whether each runs on this machine's {device.type} (--device to choose)")
    for name in kernel_names():
        try:
            k = get_kernel(name)
        except KernelConfigError as e:  # two packages register the name: listed, so the listing shows why
            print(f"{name:32s} {'ambiguous':12s} {e}")
            continue
        why = k.device_reason(device)
        unloadable = None if why else _load_failure(k, KernelConfigError, KernelUnavailable)
        caps = k.capabilities
        forward_only = not (why or unloadable) and caps.backward and device.type not in caps.backward_device_types
        state = f"not on {device.type}" if why else "not running" if unloadable else f"runs on {device.type}"
        note = why or unloadable or (f"forward only on {device.type}" if forward_only else "")
        print(f"{name:32s} {state:12s} {k.description}" + (f" [{note}]" if note else ""))
    for name, why in broken_entry_points().items():
        print(f"{name:32s} {'broken':12s} {why}")
    return EXIT_OK


def _load_failure(kernel, *errors) -> "str | None":
    """Why ``kernel``'s load() gives no implementation (issue 43, 6: such kernels were listed as running), in one
    line; None when it loads."""
    try:
        kernel.impl
    except errors as e:
        cause = e.__cause__
        if cause is None and "not an implementation" in str(e):
            return "load() returned no implementation"
        line = (f"load() raised {type(cause).__name__}: {cause}" if cause is not None else str(e)).strip()
        return line.splitlines()[0] if line else type(e).__name__
    return None
