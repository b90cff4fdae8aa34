"""Racecheck verdicts depend on the kernel, not on where its files are (issue 42, item 1).

The real H200 reports of gluon_jfa (``tests/data/sanitizer``) are judged against gluon_jfa's shipped
``_kernels.py`` and against byte-identical copies of it elsewhere (found by folder, by the kernel's loaded
implementation, or named by the tool as a path): the same verdict, 0 judged. A hazard planted at another site
of the kernel (an mbarrier release, a stage's reuse) is judged for both, and a fork whose lines moved is judged
on its own source.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

from jfa_verify.checks import sanitizer

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "sanitizer"  # (copied from docs/evidence/gpu-2026-12-01-c)
SHIPPED = ROOT / "kernels" / "gluon_jfa" / "_kernels.py"
KERNEL_LOG = (DATA / "gluon_jfa-racecheck-h200.log").read_text()
CONTROL = sanitizer.ToolRun([], 1, 0, (DATA / "gluon_jfa-racecheck-control-h200.log").read_text())
CONTROL_DIRS = sanitizer.source_dirs("jfa_verify.kernels.gluon_jfa.sanitizer_control")


def _line(text: str, source: Path = SHIPPED) -> int:
    """The first line of ``source`` holding ``text``."""
    return next(i for i, line in enumerate(source.read_text().splitlines(), 1) if text in line)


def _verdict(log: str, dirs=(), files=()):
    blocks = sanitizer.race_errors(log)
    run = sanitizer.ToolRun([], len(blocks), 99, log)
    return sanitizer.classify_races(run, [Path(d) for d in dirs], CONTROL, CONTROL_DIRS, [Path(f) for f in files])


def _plant(log: str, block: str) -> str:
    """``log`` with one more error block (and its summary counting it)."""
    head, _, tail = log.rpartition("========= RACECHECK SUMMARY")
    n = len(sanitizer.race_errors(log)) + 1
    tail = re.sub(r"\d+ hazards displayed \(\d+ errors", f"{n} hazards displayed ({n} errors", tail)
    return head + block + "========= RACECHECK SUMMARY" + tail


def _copy(tmp_path, name="_kernels.py", folder="elsewhere") -> Path:
    path = tmp_path / folder / name
    path.parent.mkdir(parents=True)
    shutil.copyfile(SHIPPED, path)
    return path


def _judged(verdict) -> tuple[int, int]:
    return verdict.judged, len(verdict.not_judged)


def test_gluon_jfa_and_a_copy_at_another_path_get_the_same_verdict(tmp_path):
    copy = _copy(tmp_path)
    assert _judged(_verdict(KERNEL_LOG, dirs=[SHIPPED.parent])) == (0, 12)
    # the copy alone, found by its folder or by the kernel's implementation files
    assert _judged(_verdict(KERNEL_LOG, dirs=[copy.parent])) == (0, 12)
    assert _judged(_verdict(KERNEL_LOG, files=[copy])) == (0, 12)
    # regression (issue 42): both folders hold a _kernels.py; a base name in two folders was judged as unknown
    assert _judged(_verdict(KERNEL_LOG, dirs=[copy.parent, SHIPPED.parent])) == (0, 12)
    # the implementation's own file is preferred to a folder's file of the same name
    assert _judged(_verdict(KERNEL_LOG, dirs=[tmp_path / "nothing"], files=[copy])) == (0, 12)


def test_a_copy_named_by_the_tool_as_a_path_or_under_another_name_gets_the_same_verdict(tmp_path):
    copy = _copy(tmp_path)
    by_path = KERNEL_LOG.replace(" in _kernels.py:", f" in {copy}:")
    assert by_path.count(str(copy)) == KERNEL_LOG.count(" in _kernels.py:") == 30
    assert _judged(_verdict(by_path, files=[copy])) == (0, 12)
    assert _judged(_verdict(by_path, dirs=[copy.parent])) == (0, 12)
    # a path that is not the kernel's: judged
    assert _judged(_verdict(by_path, dirs=[SHIPPED.parent])) == (12, 0)
    renamed = _copy(tmp_path, "my_fork.py", "fork")
    assert _judged(_verdict(KERNEL_LOG.replace("_kernels.py:", "my_fork.py:"), files=[renamed])) == (0, 12)


def test_an_unknown_source_or_a_fork_whose_lines_moved_is_judged_on_its_own_source(tmp_path):
    assert _judged(_verdict(KERNEL_LOG, dirs=[tmp_path])) == (12, 0)  # no such file: every error judged
    fork = tmp_path / "fork" / "_kernels.py"
    fork.parent.mkdir()
    fork.write_text("# a fork: one line more\n" + SHIPPED.read_text())
    assert _judged(_verdict(KERNEL_LOG, files=[fork])) == (12, 0)
    moved = re.sub(r"_kernels\.py:(\d+)", lambda m: f"_kernels.py:{int(m.group(1)) + 1}", KERNEL_LOG)
    assert _judged(_verdict(moved, files=[fork])) == (0, 12)
    # two candidate files that disagree on the site: judged
    assert _judged(_verdict(KERNEL_LOG, dirs=[fork.parent, SHIPPED.parent])) == (12, 0)


@pytest.mark.parametrize("site", ["release", "stage_reuse", "def_vs_release"])
def test_a_hazard_at_another_site_of_the_kernel_fails_for_gluon_jfa_and_its_copy(tmp_path, site):
    copy = _copy(tmp_path)
    release = _line("mbarrier.arrive(k_empty.index(s0)")  # the consumer hands a K stage back to the load warp
    reuse = _line("tma.async_copy_global_to_shared(k_desc")  # the load warp refills that stage
    wgmma = _line("qk = warpgroup_mma(q_smem, k_smem.index(s0)")  # the MMA reading it
    fwd_def, fwd_ws = sorted(sanitizer.scaffold_lines(SHIPPED, "_fwd_kernel"))
    read, writes = {"release": (wgmma, [reuse]), "stage_reuse": (reuse, [reuse, fwd_ws]),
                    "def_vs_release": (fwd_def, [fwd_def, release])}[site]
    block = (f"========= Error: Race reported between Read access at _fwd_kernel+0x3a0 in _kernels.py:{read}\n"
             + "".join(f"=========     and Write access at _fwd_kernel+0x{0x4000 + i:x} in _kernels.py:{w} "
                       f"[3 hazards]\n" for i, w in enumerate(writes)) + "========= \n")
    planted = _plant(KERNEL_LOG, block)
    assert sanitizer.sanitizer_errors(planted) == 13
    for where in ({"dirs": [SHIPPED.parent]}, {"files": [copy]}, {"dirs": [copy.parent, SHIPPED.parent]}):
        assert _judged(_verdict(planted, **where)) == (1, 12), where


def test_the_kernels_files_are_found_from_its_loaded_implementation(tmp_path):
    # a plugin's gluon_jfa built on a copy of _kernels.py imported from a folder the framework is never told of
    pytest.importorskip("triton")
    from jfa_verify.kernels import gluon_jfa
    from jfa_verify.protocol.kernel import Kernel

    copy = _copy(tmp_path)
    spec = importlib.util.spec_from_file_location("_jfa_test_gluon_copy_kernels", copy)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        kernel = Kernel("gluon_copy", "", lambda: gluon_jfa.build(kernels_module=module), gluon_jfa.CAPABILITIES,
                        sanitizer_control="jfa_verify.kernels.gluon_jfa.sanitizer_control")
        files = sanitizer.kernel_files(kernel)
    finally:
        del sys.modules[spec.name]
    assert copy.resolve() in files and SHIPPED.resolve() not in files, files
    assert _judged(_verdict(KERNEL_LOG, dirs=sanitizer.source_dirs(kernel.loader), files=files)) == (0, 12)
    # a kernel that does not load adds no files (its errors are then looked up by folder alone)
    assert sanitizer.kernel_files(Kernel("broken", "", lambda: None, gluon_jfa.CAPABILITIES)) == []


def test_the_copy_plugin_registers_gluon_jfa_on_a_copy_in_another_folder(tmp_path, monkeypatch):
    # the plugin the GPU command runs (its docstring): its kernel's source is the copy, its control gluon_jfa's
    pytest.importorskip("triton")
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    monkeypatch.setenv("JFA_GLUON_COPY_DIR", str(tmp_path / "copy"))
    load_plugin(str(ROOT / "tests" / "gluon_copy_plugin.py"))
    kernel = get_kernel("gluon_jfa_copy")
    assert kernel.sanitizer_control == get_kernel("gluon_jfa").sanitizer_control
    files = sanitizer.kernel_files(kernel)
    copy = (tmp_path / "copy" / "_kernels.py").resolve()
    assert copy in files and copy.read_bytes() == SHIPPED.read_bytes()
    assert _judged(_verdict(KERNEL_LOG, dirs=sanitizer.source_dirs(kernel.loader), files=files)) == (0, 12)
