"""The command line's argument types and shared options: each type checks its value while the arguments are parsed,
so a bad one exits 2 with one line naming it before any work."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from jfa_verify.core.exits import ExitCode
from jfa_verify.core.paths import DEFAULT_REPRODUCERS
from jfa_verify.core.watchdog import MAX_TIMEOUT_S

EXIT_OK, EXIT_FAIL, EXIT_USAGE = int(ExitCode.OK), int(ExitCode.FINDING), int(ExitCode.USAGE)


class UsageError(Exception):
    """A bad argument found after parsing (a file that must not exist, a folder that must): exit 2."""


def number(kind, *, minimum=None, strict: bool = False, what: str = "", maximum=None):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if kind is float and value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if minimum is not None and (value <= minimum if strict else value < minimum):
            raise argparse.ArgumentTypeError(f"{text} must be {'>' if strict else '>='} {minimum}{what}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{text} must be at most {maximum:g}{what}")
        return value
    return parse


positive_int = number(int, minimum=0, strict=True)
nonneg_int = number(int, minimum=0)
positive_float = number(float, minimum=0, strict=True)
# --timeout: seconds > 0, at most a week (RunSettings.timeout_s's bound)
timeout_seconds = number(float, minimum=0, strict=True, maximum=MAX_TIMEOUT_S, what=" seconds (a week at most)")
nonneg_float = number(float, minimum=0)
seed_int = number(int, minimum=0)


def existing_file(text: str) -> str:
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: a folder; give a file in it")
    if not Path(text).is_file():
        looks_like_id = len(text) == 12 and all(c in "0123456789abcdef" for c in text)
        raise argparse.ArgumentTypeError(f"{text}: no such file" + (
            "; a finding's id is not a file: `jfa-verify findings DIR` prints each finding's replay command"
            if looks_like_id else ""))
    return text


def name_part(text: str) -> str:
    """A non-empty part of a case name (``--filter``): an empty one matched every case without a word."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is empty; give part of a case name (leave --filter out for all)")
    return text


def _parent_problem(path: Path, instead: str) -> Optional[str]:
    """Why the folder ``path`` would go in does not hold it, with the fix, or None: the one check of :func:`new_file`
    and :func:`folder` (a new user's ``--reproducers afile/repro`` was told "parent folder '.../afile' does not exist",
    the same ``--report`` "is a file, not a folder"). A regular file where a folder must be is named, at whatever
    depth; else the missing folder. ``instead``: what to give instead, after the file's name."""
    parent = path.resolve().parent
    if parent.is_dir():
        return None
    above = parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if above.exists() and not above.is_dir():
        return f"{str(above)!r} is a file, not a folder; give {instead}"
    return f"folder {str(parent)!r} does not exist; create it first"


def new_file(text: str) -> str:
    """A file to write: its folder must exist and it must not be a folder."""
    if not text.strip():  # (Path("") is the current folder: "argument --report:  is a folder", a new user's trial)
        raise argparse.ArgumentTypeError(f"{text!r} is empty; give a file name")
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name")
    problem = _parent_problem(path, "a file in a folder")
    if problem:
        raise argparse.ArgumentTypeError(f"{text}: {problem}")
    folder = path.resolve().parent
    # The file is written beside itself first, then moved into place: try that now, not after the work (a new
    # user's --report /proc/r.json ended a whole run with a traceback).
    from jfa_verify.core.paths import folder_problem

    problem = folder_problem(folder)
    if problem:
        raise argparse.ArgumentTypeError(f"{text}: {problem}; give a file in a folder you can write to")
    return text


def png_file(text: str) -> str:
    """A PNG to write (as :func:`new_file`): matplotlib must be installed, checked before any work."""
    import importlib.util

    text = new_file(text)
    if importlib.util.find_spec("matplotlib") is None:
        raise argparse.ArgumentTypeError(f"{text}: writing a PNG needs matplotlib, which is not installed; "
                                         f"pip install 'jfa-verify[plots]' (or leave out --png)")
    return text


def folder(text: str) -> str:
    """A folder to write into (created if missing, under an existing parent); not a file; writable (tried now: a new
    user's ``--reproducers /proc/r`` ended a campaign with a traceback and exit 1, the code of a finding)."""
    from jfa_verify.core.paths import folder_problem

    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; give a folder")
    problem = None if path.exists() else _parent_problem(path, "a new folder inside an existing one")
    if problem:
        raise argparse.ArgumentTypeError(f"{text}: {problem}")
    problem = folder_problem(path)
    if problem:
        raise argparse.ArgumentTypeError(f"{text}: {problem}; give a folder you can write to")
    return text


def existing_folder(text: str) -> str:
    """A folder to read (``gate --replay``): it must exist (a missing one was named only after the whole gate ran)."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder; give the folder an earlier run or campaign wrote "
                                         f"its case files into")
    return text


def percent(text: str) -> float:
    """``5%`` or ``5`` (percent) -> 0.05."""
    value = number(float, minimum=0)(text[:-1] if text.endswith("%") else text)
    return value / 100.0


def lengths_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers (e.g. 7,3,19)") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: lengths must be integers >= 0")
    return values


class Once(argparse.Action):
    """An option a command uses once (``--kernel`` of a command that checks one kernel): given again with another
    value, it is refused naming both and ``fix``. argparse kept the last value silently: a new user's ``run --kernel A
    --kernel B`` checked B alone and said so only as "kernel B" (gate and matrix take several ``--kernel``)."""

    def __init__(self, *args, fix: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.fix = fix

    def __call__(self, parser, namespace, value, option_string=None):
        given = f"_{self.dest}_given"  # (the namespace's own default may equal a value given)
        if given in vars(namespace) and getattr(namespace, self.dest) != value:
            raise argparse.ArgumentError(self, f"given twice ({getattr(namespace, self.dest)} and {value}); "
                                               f"{self.fix}")
        setattr(namespace, given, True)
        setattr(namespace, self.dest, value)


# the fix a command that checks one kernel gives for a second --kernel
ONE_KERNEL = "this command checks one kernel: give one --kernel per run (`jfa-verify gate` checks several)"
# the fix a command that runs one suite gives for a second --suite (argparse kept the last one silently, as it did a
# second --kernel: helper-70, 2026-12-07)
ONE_SUITE = "this command runs one suite: give one --suite per run (`jfa-verify matrix` runs several)"


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse would print the usage too)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def kernel_options(p, kernel_default: Optional[str] = "triton_jfa", reproducers: bool = True) -> None:
    """``--kernel``, ``--device``, ``--plugin``, ``--no-progress`` (and ``--reproducers``), as every command that runs
    one kernel has them."""
    # (None when not given: a --plugin that registers kernels then needs --kernel; see Context.kernel_name)
    p.add_argument("--kernel", default=None, action=Once, fix=ONE_KERNEL,
                   help="registered kernel name (see `jfa-verify kernels`)"
                   + (f"; default {kernel_default}, unless a --plugin registers kernels" if kernel_default else ""))
    p.set_defaults(kernel_default=kernel_default)
    device_option(p)
    plugin_option(p)
    progress_option(p)
    if reproducers:
        p.add_argument("--reproducers", default=DEFAULT_REPRODUCERS, type=folder,
                       help="folder for failing-case files (default: %(default)s)")


def progress_option(p) -> None:
    """``--no-progress``, on every command that runs cases: a CI job copies its flags from step to step, and gate,
    replay and findings refused it ("unrecognized arguments", exit 2: a new user's trial). Only run and fuzz show
    live progress; elsewhere it is accepted and changes nothing."""
    p.add_argument("--no-progress", action="store_true",
                   help="no live progress (no bar on a terminal, no progress lines in a CI log); notes and verdicts "
                        "still print. Accepted by every command that runs cases: a no-op where it shows none")


def device_option(p, help: str = "default: cuda when available, else the CPU interpreter") -> None:
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help=help)


def plugin_option(p, help: str = "import a file that registers kernels (repeatable)") -> None:
    p.add_argument("--plugin", action="append", default=[], metavar="FILE.py", type=existing_file, help=help)
