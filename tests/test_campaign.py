"""Campaigns: failures shrink into case files that replay to the same verdict; saved failures come back first."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jfa_verify.corpus import TIMEOUT_EXIT_CODE, read_case_file
from jfa_verify.fuzz import run_campaign
from jfa_verify import run_case
from jfa_verify.strategies import cases
from jfa_verify.registry import get_kernel, load_plugin

ROOT = Path(__file__).resolve().parents[1]
MUTANT_PLUGIN = ROOT / "tests" / "quality" / "mutant_plugin.py"
FWD = dict(dtypes=["float32"], causal=False, max_batch=4, max_len=40)


@pytest.fixture(scope="module")
def mutant():
    load_plugin(MUTANT_PLUGIN)
    return get_kernel("mutant-kv_bound_minus_one")


def test_campaign_on_mutant_writes_a_case_file_that_replays(mutant, jfa_device, tmp_path):
    summary = run_campaign(mutant, strategy=cases(mutant, device_type=jfa_device.type, **FWD), max_examples=20,
                           corpus_dir=tmp_path, device=jfa_device, seed=1, backward=False)
    assert summary.failed and summary.statuses["fail"] >= 1 and summary.cases_run == summary.coverage.total
    (failure,) = summary.failures
    assert failure.source == "search" and failure.path.is_file()
    assert list(tmp_path.glob("*.json")) == [failure.path]  # shrink steps' files removed, the minimal one kept
    assert (tmp_path / ".hypothesis" / mutant.name).is_dir()

    case, payload = read_case_file(failure.path)
    assert payload["status"] == "fail" and payload["kernel"] == mutant.name and case == failure.case
    replay = run_case(case, mutant, jfa_device, backward=False)
    assert replay.status == payload["status"]
    assert sorted(c.name for c in replay.failing) == sorted(n for n, o in payload["verdict"]["outputs"].items()
                                                            if not o["passed"])
    text = summary.format()
    assert "search failure [fail]" in text and str(failure.path) in text and "coverage over" in text

    again = run_campaign(mutant, strategy=cases(mutant, device_type=jfa_device.type, **FWD), max_examples=5,
                         corpus_dir=tmp_path, device=jfa_device, seed=2, backward=False)
    assert [(f.source, f.path) for f in again.failures] == [("corpus", failure.path)]


def test_campaign_on_real_kernel_finds_nothing(jfa_kernel, jfa_device, tmp_path):
    summary = run_campaign(jfa_kernel, strategy=cases(jfa_kernel, device_type=jfa_device.type, max_batch=3,
                                                      max_len=40), max_examples=8, corpus_dir=tmp_path,
                           device=jfa_device, seed=0)
    assert not summary.failed, summary.format()
    assert summary.cases_run >= 5 and not list(tmp_path.glob("*.json")) and "no failures" in summary.format()
    assert set(summary.to_dict()) >= {"cases_run", "statuses", "failures", "coverage"}


def test_saved_failure_that_now_passes_is_reported_fixed(jfa_kernel, jfa_device, tmp_path):
    from jfa_verify.corpus import Corpus
    from jfa_verify import Case

    case = Case(kv_lengths=(3,), dtype="float32", head_dim=16)
    with Corpus(tmp_path).guard(case, jfa_kernel.name, str(jfa_device)) as path:
        pass  # left as "running": what a crash leaves behind
    summary = run_campaign(jfa_kernel, strategy=cases(jfa_kernel, max_batch=1, max_len=3, dtypes=["float32"]),
                           max_examples=1, corpus_dir=tmp_path, device=jfa_device, backward=False)
    assert summary.fixed == [path] and not path.exists() and not summary.failed


def test_watchdog_marks_a_hung_case_and_exits(tmp_path, sleepy_plugin):
    plugin = sleepy_plugin
    script = textwrap.dedent(f"""
        from jfa_verify.registry import load_plugin
        from jfa_verify.fuzz import run_campaign
        from jfa_verify.strategies import cases
        load_plugin({str(plugin)!r})
        run_campaign("sleepy", strategy=cases(max_batch=1, max_len=2), max_examples=1,
                     corpus_dir={str(tmp_path / "corpus")!r}, device="cpu", timeout_s=0.5)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == TIMEOUT_EXIT_CODE, proc.stderr[-2000:]
    (path,) = (tmp_path / "corpus").glob("*.json")
    payload = json.loads(path.read_text())
    assert payload["status"] == "timeout" and payload["kernel"] == "sleepy"
    read_case_file(path)  # still a valid, replayable case file


def test_a_case_left_running_is_a_crash_finding_and_never_ends_the_next_campaign(jfa_kernel, jfa_device, tmp_path):
    """A process that died running a case left its file ``running``: the next campaign marks it ``crash``
    before replaying it once; a file already marked ``crash`` is reported as a finding, not run again."""
    from jfa_verify.corpus import Corpus
    from jfa_verify import Case

    case = Case(kv_lengths=(3,), dtype="float32", head_dim=16)
    with Corpus(tmp_path).guard(case, jfa_kernel.name, str(jfa_device)) as path:
        pass
    payload = json.loads(path.read_text())
    payload["status"] = "crash"
    path.write_text(json.dumps(payload))
    summary = run_campaign(jfa_kernel, strategy=cases(jfa_kernel, max_batch=1, max_len=3, dtypes=["float32"]),
                           max_examples=1, corpus_dir=tmp_path, device=jfa_device, backward=False)
    assert [(f.source, f.status, f.path) for f in summary.failures] == [("crash", "crash", path)]
    assert summary.cases_run >= 1 and "pairs of classes" in summary.format()
