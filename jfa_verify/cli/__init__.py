"""``jfa-verify``: the command line (argument parsing and printing; the work is done by the library).

Subcommands: ``run`` (the main job: verify a kernel on the built-in suite),
``fuzz`` (a Hypothesis campaign with shrinking and a persistent corpus; worker processes on a shared
database), ``findings`` (the deduplicated findings of a reproducer folder),
``calibrate`` (error distributions and a proposed budget table), ``report``
and ``refloor`` (calibration records), ``mutants`` (a planted-bug catalogue's
kill table), ``replay`` (re-run one case file or inline case), ``kernels``
(the registry), ``schedule`` (per-SM load of the tile schedulers), ``matrix`` (kernels x cases), ``stress``
(long cases rerun under timing perturbation),
``bisect`` (the kernel commit that broke correctness, speed or bits, through ``git bisect run``).

Every argument is checked before any work: a bad one exits 2 with one line
naming it (:class:`~jfa_verify.core.exits.ExitCode` lists every exit status).

Layout: one module per command (``run.py``, ``fuzz.py``, ...: ``HELP``, ``DESCRIPTION``, ``add_arguments(parser)``,
``main(args, ctx) -> int``), listed in ``COMMANDS``; ``arguments`` (the argument types), ``context`` (what the
commands share: device, plugins, kernels, suite, filter), ``output`` (console, progress lines, tables). This module
builds the parser from ``COMMANDS`` and turns errors into one line and an exit status.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from jfa_verify.cli.arguments import EXIT_USAGE, Parser, UsageError
from jfa_verify.core.errors import JFAError
from jfa_verify.core.exits import ExitCode

# in the order `jfa-verify --help` lists them
COMMANDS = ("run", "fuzz", "findings", "calibrate", "report", "refloor", "replay", "kernels", "schedule", "gate",
            "stress", "matrix", "mutants", "bisect")

# What `jfa-verify --help` opens with: the tool for its user (this module's docstring is for its maintainers).
DESCRIPTION = (
    "Differential testing of jagged FlashAttention kernels (attention on packed variable-length sequences): "
    "each case runs through the kernel under test, forward and backward, and is judged against a float64 "
    "reference within an allowance calibrated on same-dtype SDPA; a failure is localized to (sequence, head, "
    "token, tile) and saved as a reproducer with the command that replays it. `run` verifies a kernel on the "
    "built-in suite, `gate` is the CI gate, `fuzz` searches with Hypothesis and `findings` lists what was found, "
    "`replay` re-runs one reproducer, `matrix` compares kernels, `mutants` checks the checks on planted bugs, "
    "`stress` reruns long cases under timing perturbation, `calibrate`, `report` and `refloor` fit and plot "
    "the error budgets, `schedule` shows tile schedules' load per SM, `bisect` finds the commit that broke a "
    "kernel, and `kernels` lists the kernels and where they run. "
    f"Exit status: {ExitCode.OK:d} passed, {ExitCode.FINDING:d} a finding, {ExitCode.USAGE:d} usage or configuration, "
    f"{ExitCode.HANG:d} a hang, {ExitCode.CRASH:d} a crash, {ExitCode.INTERNAL:d} an internal error of jfa-verify "
    f"itself (a bug in the tool, no verdict on the kernel), {ExitCode.INTERRUPTED:d} interrupted.")


def _version() -> str:
    """The installed distribution's version (package metadata), else the package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jfa-verify")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from jfa_verify import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = Parser(prog="jfa-verify", description=DESCRIPTION)
    parser.commands = {}  # name -> the command's parser (_parse refuses an unknown argument in its words)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"jfa_verify.cli.{name}")
        command = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", None))
        module.add_arguments(command)
        command.set_defaults(command_main=module.main)
        parser.commands[name] = command
    return parser


def _parse(parser: "Parser", argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """``parser.parse_args(argv)``, but an argument no parser knows is refused by its command's parser, with the
    closest option named: argparse reports it from the top level (``jfa-verify: error: unrecognized arguments:
    --kernal triton_jfa (see jfa-verify --help)``, a new user's misspelled flag), whose help lists no option of
    the command. Raises ``SystemExit(2)`` as ``parse_args`` does."""
    import difflib

    args, extra = parser.parse_known_args(argv)
    if extra:
        command = parser.commands.get(getattr(args, "command", None), parser)
        known = [s for action in command._actions for s in action.option_strings if s.startswith("--")]
        hints = []
        for token in extra:
            name = token.split("=", 1)[0]
            # (compared without the shared "--", which alone made --bogus "close" to --jobs: a new user's trial)
            close = difflib.get_close_matches(name[2:], [k[2:] for k in known], n=1) if name.startswith("--") else []
            close = [f"--{c}" for c in close]
            hints += [f"{name}: did you mean {close[0]}?"] if close else []
        command.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else ""))
    return args


_OUTPUT_FILES = ("report", "png", "json", "junit", "markdown")


def _outputs_apart(args) -> None:
    """Refuse an output file named like the ``--reproducers`` folder, or two outputs on one file (a new user's
    ``--reproducers r --report r --png r``: a traceback after the whole campaign, or a PNG silently not written).

    Raises:
        UsageError: naming the clashing options.
    """
    named = {f"--{a}": getattr(args, a) for a in _OUTPUT_FILES if isinstance(getattr(args, a, None), str)}
    seen: dict = {}
    folder = getattr(args, "reproducers", None)
    # the files the command reads: an output written over one destroys it (a new user's --report pk.py replaced
    # the plugin under test with the JSON report)
    inputs = {Path(p).resolve(): f"the --plugin file {p}" for p in getattr(args, "plugin", None) or ()}
    if isinstance(getattr(args, "file", None), str):
        inputs[Path(args.file).resolve()] = f"the file {args.file} this command reads"
    for option, value in named.items():
        where = Path(value).resolve()
        if folder and where == Path(folder).resolve():
            raise UsageError(f"{option} {value} is the --reproducers folder; give the file another name")
        if where in inputs:
            raise UsageError(f"{option} {value} is {inputs[where]}: writing there would replace it; give the "
                             f"output another name")
        if where in seen:
            raise UsageError(f"{seen[where]} and {option} are both {value}; give each its own file")
        seen[where] = option


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``jfa-verify`` console script; returns the exit status (:class:`ExitCode`).

    Ctrl-C or SIGTERM at any point, from the first import on (torch's loading takes seconds), ends it with one line
    and exit 130, never a traceback or a death by the signal: ``import jfa_verify`` loads nothing heavy, and everything
    after is in here. An exception nothing else handled is a bug in jfa-verify itself, not a verdict on the kernel
    (a kernel's exceptions are its cases' verdicts): it prints ``jfa-verify: internal error``, the traceback and where
    to report it, and exits 70 (:attr:`ExitCode.INTERNAL`), so that CI tells it from a finding (1)."""
    from jfa_verify.core.exits import declare_exit, take_watch

    watched = take_watch() if argv is None else False
    return declare_exit(_guarded_main(argv, watched))


def _guarded_main(argv: Optional[Sequence[str]], watched: bool) -> int:
    from jfa_verify.run.interrupts import terminate_as_interrupt, verdict_scope

    try:
        # Once a run's final report is written, a stop changes neither it nor the exit status (issue 43, 10); the
        # console script (argv None) keeps it so until the process exits, a caller gets its handlers back.
        with verdict_scope(restore=argv is not None), terminate_as_interrupt():
            return _main(argv, watched)
    except KeyboardInterrupt:  # (before a command runs: while torch and the rest load, or arguments are checked)
        print("\njfa-verify: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as e:  # a traceback exited 1, a finding's code: CI could not tell a tool bug from a kernel bug
        import traceback

        from jfa_verify.core.exits import REPORT_INTERNAL_ERRORS

        print(f"jfa-verify: internal error (a bug in jfa-verify, not a finding about the kernel): "
              f"{type(e).__name__}: {e}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        print(f"jfa-verify: internal error: exit {ExitCode.INTERNAL:d}; {REPORT_INTERNAL_ERRORS}", file=sys.stderr)
        return int(ExitCode.INTERNAL)


def _main(argv: Optional[Sequence[str]], watched: bool) -> int:
    for token in (sys.argv[1:] if argv is None else argv):
        if token == "--":
            break
        # argparse drops a lone "--" from an option's value, so `--lengths=--` parsed as no value at all
        # and the command ran on its defaults
        name, eq, value = token.partition("=")
        if eq and name.startswith("--") and value == "--":
            print(f"jfa-verify: error: argument {name}: '--' is not a value (it marks the end of the options); "
                  f"give {name}=VALUE", file=sys.stderr)
            return EXIT_USAGE
    from jfa_verify.run.worker_server import start_early

    start_early(sys.argv[1:] if argv is None else argv)  # before the parser imports torch: the two import at once
    try:
        args = _parse(build_parser(), argv)
    except SystemExit as e:  # a bad argument (exit 2, one line already printed) or --help (0)
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    except ModuleNotFoundError as e:  # the parser imports numpy (its choices come from the suites): a --no-deps
        from jfa_verify.core.errors import (
            missing_dependency,  # install without it gave every command, --version too, a traceback
        )

        print(f"jfa-verify: error: {missing_dependency(e)}", file=sys.stderr)
        return EXIT_USAGE
    from jfa_verify.cli.closed_reader import output_outlives_reader
    from jfa_verify.cli.context import Context
    from jfa_verify.core.device import device_scope
    from jfa_verify.run.interrupts import terminate_as_interrupt

    with output_outlives_reader():  # `| head` ends neither the command nor its exit status
        try:
            _outputs_apart(args)
            from jfa_verify.cli.supervise import needs_watching, watched_run

            if needs_watching(args, argv, watched):  # a command running a kernel in its own process: a kernel's
                return watched_run(args)  # crash or os._exit still ends in exit 4 (issue 43, 9)
            # SIGTERM (a CI job's timeout, `kill`) ends any command as Ctrl-C does: exit 130 with what it has
            with device_scope(), terminate_as_interrupt():  # and a caller's own device choice survives the command
                return args.command_main(args, Context.from_args(args))
        except (JFAError, UsageError) as e:
            print(f"jfa-verify {args.command}: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        except ModuleNotFoundError as e:  # one of jfa-verify's own dependencies (a kernel's import errors are
            # verdicts of its cases): a configuration error, not a finding (a traceback exited 1 on an H200
            # installed with --no-deps, 2026-12-03)
            from jfa_verify.core.errors import missing_dependency

            print(f"jfa-verify {args.command}: error: {missing_dependency(e)}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            print(f"\njfa-verify {args.command}: interrupted", file=sys.stderr)
            return int(ExitCode.INTERRUPTED)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
