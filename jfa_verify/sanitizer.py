"""compute-sanitizer runs of a kernel alone, and which racecheck reports the tool can judge.

Racecheck needs a control on compiler-generated synchronization it does not model. On the H200
(Triton 3.6.0, compute-sanitizer of CUDA 13), racecheck reports hazards on a race-free Gluon kernel
that hands one mbarrier from a worker partition to the default partition, and no hazard on the same
kernel without the mbarrier (evidence: ``docs/evidence/gluon-racecheck-2026-12-01/``). Every such
hazard is between two accesses the source attributes to a function's ``def`` line or to its
``warp_specialize(`` call: code the compiler emits around the kernel's body (the partitions'
state bytes and captured values), not a statement of the kernel. A kernel that declares a control
(:attr:`jfa_verify.protocol.Kernel.sanitizer_control`) has its racecheck hazards at such sites
listed as *not judged* when the tool reports hazards at such sites on the control too; every other
hazard, and every report of the other tools, is judged as usual.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

# the source lines compute-sanitizer gives for code the compiler emits around a kernel's statements
SCAFFOLD_LINE = re.compile(r"^\s*(?:async\s+)?def\s|warp_specialize\(")
_RACE = re.compile(r"Error: Race reported between \w+ access at \S+ in (\S+?):(\d+)\s*\n=+\s+"
                   r"and \w+ access at \S+ in (\S+?):(\d+)")

Site = tuple[str, int]  # (file name as the tool prints it, line)


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


def race_errors(text: str) -> list[tuple[Site, Site]]:
    """The two source sites of each racecheck error (``Error: Race reported between ...``) in ``text``."""
    return [((a, int(la)), (b, int(lb))) for a, la, b, lb in _RACE.findall(text)]


@dataclass
class ToolRun:
    """One compute-sanitizer run: ``errors`` from its summary (None: it printed none), exit code, text."""

    cmd: list[str]
    errors: Optional[int]
    returncode: int
    text: str


def run_tool(tool_path: str, tool: str, target: Sequence[str], timeout_s: float) -> ToolRun:
    """``compute-sanitizer --tool TOOL ... python -m TARGET...``.

    Raises:
        subprocess.TimeoutExpired: past ``timeout_s`` seconds (the tools slow kernels by orders of magnitude).
    """
    cmd = [tool_path, "--tool", tool, "--error-exitcode", "99", "--print-limit", "1000", sys.executable, "-m",
           *target]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    text = proc.stdout + proc.stderr
    return ToolRun(cmd, sanitizer_errors(text), proc.returncode, text)


def source_dirs(module_or_callable, extra: Sequence[str] = ()) -> list[Path]:
    """Folders where the sources the tool names (by file name alone) are looked up: the folder of a module
    name or of a callable's module, then ``extra`` files' folders."""
    dirs = []
    if isinstance(module_or_callable, str):
        spec = importlib.util.find_spec(module_or_callable)
        if spec is not None and spec.origin:
            dirs.append(Path(spec.origin).parent)
    elif module_or_callable is not None:
        try:
            dirs.append(Path(inspect.getfile(module_or_callable)).parent)
        except TypeError:
            pass
    dirs += [Path(p).parent for p in extra]
    return dirs


def is_scaffold_site(site: Site, dirs: Sequence[Path]) -> bool:
    """Whether the tool's ``file:line`` is a ``def`` line or a ``warp_specialize(`` call in a source file found
    in ``dirs``; False when no such file is found (an unknown site is judged)."""
    name, line = site
    for d in dirs:
        path = Path(d) / name
        if path.is_file():
            lines = path.read_text(errors="replace").splitlines()
            return 0 < line <= len(lines) and bool(SCAFFOLD_LINE.search(lines[line - 1]))
    return False


@dataclass
class RaceVerdict:
    """Racecheck's errors on a kernel split into those judged and those not judged (at scaffold sites)."""

    judged: int
    not_judged: list[tuple[Site, Site]] = field(default_factory=list)
    control_scaffold: int = 0  # the control's errors at scaffold sites (0: every error is judged)


def classify_races(kernel_run: ToolRun, kernel_dirs: Sequence[Path], control_run: Optional[ToolRun],
                   control_dirs: Sequence[Path]) -> RaceVerdict:
    """Split ``kernel_run``'s racecheck errors: those with both sites at scaffold lines are not judged when the
    control's run shows errors with both sites at scaffold lines too; all others (including errors past the
    tool's print limit, which have no sites) are judged."""
    total = kernel_run.errors or 0
    if control_run is None or not control_run.errors:
        return RaceVerdict(total)
    control_scaffold = [p for p in race_errors(control_run.text)
                        if all(is_scaffold_site(s, control_dirs) for s in p)]
    if not control_scaffold:
        return RaceVerdict(total)
    scaffold = [p for p in race_errors(kernel_run.text) if all(is_scaffold_site(s, kernel_dirs) for s in p)]
    return RaceVerdict(total - len(scaffold), scaffold, len(control_scaffold))
