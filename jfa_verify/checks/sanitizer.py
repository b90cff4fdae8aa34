"""compute-sanitizer runs of a kernel alone, and which racecheck reports the tool can judge.

On the H200 (Triton 3.6.0, compute-sanitizer of CUDA 13) racecheck reports errors on a race-free Gluon
kernel whose partitions hand over one mbarrier, and none on the same kernel without it (evidence:
``docs/evidence/gpu-2026-12-01-c/``). Each such error is a read at the kernel function's ``def`` line
against writes at that line or at its ``warp_specialize(...)`` call: the code Triton emits around the
partitions (their state bytes and captured values), not a statement of the kernel. A kernel that
declares a control (:attr:`jfa_verify.protocol.kernel.Kernel.sanitizer_control`) has its racecheck errors of
exactly that form listed as *not judged* when the control shows errors of that form too. Every other
racecheck error, and every report of the other tools, is judged.

This module is the one home of that rule. It depends on the kernel, never on where its files are: each
access of an error is mapped to a site of the kernel's own source (:func:`kernel_sites`): the file the
tool names (a base name, or a path) is looked up among the source files of the kernel under test (the
modules its loaded implementation holds, :func:`implementation_files`) and the folders it declares, and
the line is matched against that file's ``def`` and ``warp_specialize(...)`` sites of the named function.
A copy of a kernel at any path, or a fork, gets the verdict of the original when its source is the same.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

# one access of a racecheck error: "Read access at _fwd_kernel+0xf0 in _kernels.py:255 [47 hazards]"
_ACCESS = re.compile(r"(Read|Write) access at (\w+)\+0x[0-9a-fA-F]+ in (\S+):(\d+)(?: \[\d+ hazards?\])?")


@dataclass(frozen=True)
class Access:
    """One side of a racecheck error: the access kind, the kernel function, the source file's name and line."""

    kind: str
    function: str
    file: str
    line: int


def sanitizer_errors(text: str) -> Optional[int]:
    """The error count of compute-sanitizer's last summary line in ``text``, or None when it printed none.

    memcheck, initcheck and synccheck end with ``ERROR SUMMARY: N errors``; racecheck with
    ``RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)`` (E counted; warnings are not errors).
    """
    found = re.findall(r"(?:ERROR SUMMARY: (\d+) error)|(?:RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?)",
                       text)
    if not found:
        return None
    plain, race = found[-1]
    return int(plain or race)


@dataclass
class ToolRun:
    """One compute-sanitizer run: ``errors`` from its summary (None: it printed none), exit code, text."""

    cmd: list[str]
    errors: Optional[int]
    returncode: int
    text: str


def run_tool(tool_path: str, tool: str, target: Sequence[str], timeout_s: float,
             error_exitcode: Optional[int] = 99) -> ToolRun:
    """``compute-sanitizer --tool TOOL ... python -m TARGET...``; with ``error_exitcode`` None the exit code is
    the program's own, whatever the tool found.

    Raises:
        subprocess.TimeoutExpired: past ``timeout_s`` seconds (the tools slow kernels by orders of magnitude).
    """
    exitcode = [] if error_exitcode is None else ["--error-exitcode", str(error_exitcode)]
    cmd = [tool_path, "--tool", tool, *exitcode, "--print-limit", "1000", sys.executable, "-m", *target]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    text = proc.stdout + proc.stderr
    return ToolRun(cmd, sanitizer_errors(text), proc.returncode, text)


def source_dirs(module_or_callable, extra: Sequence[str] = ()) -> list[Path]:
    """Folders where the sources the tool names (by file name alone) are looked up: the folder of a module
    name or of a callable's module, then ``extra`` files' folders."""
    dirs = []
    if isinstance(module_or_callable, str):
        try:
            spec = importlib.util.find_spec(module_or_callable)
        except (ImportError, ValueError):  # a parent package that does not import: no folder to search
            spec = None
        if spec is not None and spec.origin:
            dirs.append(Path(spec.origin).parent)
    elif module_or_callable is not None:
        try:
            dirs.append(Path(inspect.getfile(module_or_callable)).parent)
        except TypeError:
            pass
    dirs += [Path(p).parent for p in extra]
    return dirs


def race_errors(text: str) -> Optional[list[list[Access]]]:
    """The accesses of each racecheck error (``Error: Race reported between A`` and every ``and B`` line under
    it), in order; None when a line of an error block cannot be read (then nothing may be set aside)."""
    blocks: list[list[Access]] = []
    current: Optional[list[Access]] = None
    for line in text.split("\n"):
        body = line.lstrip("= ").rstrip()
        if body.startswith("Error: Race reported between "):
            match = _ACCESS.fullmatch(body[len("Error: Race reported between "):])
            if match is None:
                return None
            current = [_access(match)]
            blocks.append(current)
        elif current is not None and body.startswith("and "):
            match = _ACCESS.fullmatch(body[len("and "):])
            if match is None:
                return None
            current.append(_access(match))
        else:
            current = None
    return blocks


def _access(match: "re.Match[str]") -> Access:
    kind, function, name, line = match.group(1, 2, 3, 4)
    return Access(kind, function, name, int(line))


def implementation_files(impl) -> list[Path]:
    """The source files of a loaded kernel implementation, wherever they are: the files of the modules, classes
    and functions it is or holds (one level down: e.g. a kernels module an adapter was built on, a copy
    imported from any folder), a Triton ``JITFunction`` by the function it wraps. Unknown objects add none."""
    files: list[Path] = []
    objects = [impl, type(impl)]
    held = getattr(impl, "__dict__", None)
    if isinstance(held, dict) and not isinstance(impl, types.ModuleType):
        objects += list(held.values())
    for obj in objects:
        obj = getattr(obj, "fn", obj)  # a JITFunction wraps the Python function it compiles
        if isinstance(obj, (str, bytes, int, float, bool)) or obj is None:
            continue
        try:
            path = Path(inspect.getfile(obj)).resolve()
        except (TypeError, OSError):
            continue
        if path.suffix == ".py" and path.is_file() and path not in files:
            files.append(path)
    return files


def kernel_files(kernel) -> list[Path]:
    """:func:`implementation_files` of a registered :class:`~jfa_verify.protocol.kernel.Kernel` (loaded here
    when it is not yet); none when it does not load (its errors are then looked up by folder alone)."""
    try:
        impl = kernel.impl
    except Exception:  # noqa: BLE001 (a kernel that does not load here has no files to add; the run judged it)
        return []
    return implementation_files(impl)


def kernel_sites(name: str, dirs: Sequence[Path], files: Sequence[Path] = ()) -> list[Path]:
    """The kernel's source files the tool's ``name`` can be (it prints a base name; a path is taken as given
    only when it is one of the kernel's files or lies in one of ``dirs``): the implementation ``files`` of that
    base name when there are any, else the files of that name in ``dirs``. Empty: not the kernel's source
    (an unknown site is judged). More than one: each must show the same site (:func:`_scaffold_race`)."""
    files = [Path(f).resolve() for f in files]
    dirs = [Path(d).resolve() for d in dirs]
    path = Path(name)
    if path.name != name:  # a path: the kernel's own file, or nothing
        if not path.is_absolute() or not path.is_file():
            return []
        path = path.resolve()
        return [path] if path in files or path.parent in dirs else []
    own = sorted({f for f in files if f.name == name and f.is_file()})
    return own or sorted({d / name for d in dirs if (d / name).is_file()})


def scaffold_lines(path: Path, function: str) -> set[int]:
    """The lines of ``path`` where compute-sanitizer places the code Triton's warp specialization emits for
    ``function``: its ``def`` line and its ``warp_specialize(...)`` calls. Empty when ``function`` is not
    defined there exactly once, calls no ``warp_specialize``, or has a body on its ``def`` line."""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return set()
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function]
    if len(defs) != 1 or defs[0].body[0].lineno == defs[0].lineno:
        return set()
    calls = {n.lineno for n in ast.walk(defs[0]) if isinstance(n, ast.Call) and
             (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) == "warp_specialize"}
    return {defs[0].lineno} | calls if calls else set()


def _scaffold_race(block: Sequence[Access], dirs: Sequence[Path], files: Sequence[Path] = ()) -> bool:
    """Whether one racecheck error is the scaffold's hand-off: a read against writes, all in one function
    and file, every access at that function's scaffold lines (:func:`scaffold_lines`) in the kernel's source
    file the tool names (:func:`kernel_sites`; every candidate file must agree)."""
    first, others = block[0], block[1:]
    if first.kind != "Read" or not others or any(a.kind != "Write" for a in others):
        return False
    if len({(a.function, a.file) for a in block}) != 1:
        return False
    sources = kernel_sites(first.file, dirs, files)
    if not sources:
        return False
    for path in sources:
        lines = scaffold_lines(path, first.function)
        if not lines or any(a.line not in lines for a in block):
            return False
    return True


@dataclass
class RaceVerdict:
    """Racecheck's errors on a kernel: how many are judged, and those set aside as the scaffold's."""

    judged: int
    not_judged: list[list[Access]] = field(default_factory=list)
    control_scaffold: int = 0  # the control's errors of the scaffold's form (0: every error is judged)


def classify_races(kernel_run: ToolRun, kernel_dirs: Sequence[Path], control_run: Optional[ToolRun],
                   control_dirs: Sequence[Path], kernel_files: Sequence[Path] = ()) -> RaceVerdict:
    """Split ``kernel_run``'s racecheck errors: an error of the scaffold's form (:func:`_scaffold_race`, the
    kernel's sources found in ``kernel_files`` first, then ``kernel_dirs``) is not judged when the control's
    run shows errors of that form too. All others are judged, and all of them are when a block cannot be read
    or the blocks read are not as many as the summary counts (the print limit)."""
    total = kernel_run.errors or 0
    if control_run is None or not control_run.errors:
        return RaceVerdict(total)
    control_blocks = race_errors(control_run.text) or []
    control_scaffold = sum(_scaffold_race(b, control_dirs) for b in control_blocks)
    blocks = race_errors(kernel_run.text)
    if not control_scaffold or blocks is None or len(blocks) != total:
        return RaceVerdict(total)
    scaffold = [b for b in blocks if _scaffold_race(b, kernel_dirs, kernel_files)]
    return RaceVerdict(total - len(scaffold), scaffold, control_scaffold)


def describe(block: Sequence[Access]) -> str:
    """``Read fn at file:line vs Write file:line, ...``: one racecheck error, for a report."""
    first = block[0]
    return (f"{first.kind} {first.function} at {first.file}:{first.line} vs "
            + ", ".join(f"{a.kind} {a.file}:{a.line}" for a in block[1:]))
