"""Campaigns at scale: workers on one database, crashes and hangs as findings, kill -9 and Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from jfa_verify.cli import main
from jfa_verify.core.exits import ExitCode
from jfa_verify.fuzz import run_campaign
from jfa_verify.fuzz.findings import list_findings
from jfa_verify.fuzz.workers import worker_seed
from jfa_verify.protocol.registry import get_kernel, load_plugin
from jfa_verify.run.corpus import read_case_file
from jfa_verify.strategies import cases
from tests.helpers import interruptible

SMALL = dict(max_batch=3, max_len=24, dtypes=["float32"])


def _fuzz(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "jfa_verify.cli", "fuzz", "--device", "cpu", "--no-progress",
                           *map(str, args)], capture_output=True, text=True, timeout=timeout)


def _files(folder):
    return [(p, *read_case_file(p)) for p in sorted(Path(folder).glob("*.json"))]


def test_two_workers_share_a_database_and_a_failure_found_by_one_is_replayed_by_another(tmp_path,
                                                                                        misbehaving_plugin):
    """Campaign 1 (two worker processes) finds a failure; a one-case campaign on the same database replays it,
    and so does one reading it through (--read-from); on an empty database one case finds nothing."""
    plugin = misbehaving_plugin("wrong_when_long", wrong="max(lengths, default=0) >= 9")
    db = tmp_path / "db"
    first = _fuzz("--plugin", plugin, "--kernel", "wrong_when_long", "--workers", "2", "--max-examples", "24",
                  "--seed", "3", "--database", db, "--reproducers", tmp_path / "r1", "--report", tmp_path / "1.json")
    assert first.returncode == ExitCode.FINDING, first.stdout[-3000:] + first.stderr[-3000:]
    report = json.loads((tmp_path / "1.json").read_text())
    assert report["workers"] == 2 and [w["state"] for w in report["per_worker"]] == ["done", "done"]
    assert report["drawn"] == 24 and report["new_findings"]
    # worker 1 draws with a seed of its own, not 4 (worker 0's of `--seed 4`)
    assert report["seeds"] == [3, worker_seed(3, 1)] and worker_seed(3, 1) != 4

    load_plugin(plugin)
    kernel = get_kernel("wrong_when_long")
    for name, database, read_from in (("shared", db, ()), ("read-through", tmp_path / "fresh", (str(db),))):
        replayed = run_campaign(kernel, max_examples=1, corpus_dir=tmp_path / name, database=str(database),
                                read_from=read_from, device="cpu", seed=99, backward=False)
        assert replayed.failed and replayed.failures[0].status == "error", (name, replayed.format(coverage=False))
    control = run_campaign(kernel, max_examples=1, corpus_dir=tmp_path / "control", database=str(tmp_path / "empty"),
                           device="cpu", seed=99, backward=False)
    assert not control.failed  # the first drawn case is the simplest one, which passes: the replay came from the db


def test_crashing_and_hanging_kernels_each_leave_one_finding_and_the_campaign_completes(tmp_path,
                                                                                       misbehaving_plugin):
    # a hang's every shrink step waits out its timeout: a short shrink budget keeps the test's time down
    for name, rule, timeout, shrink, status, code in (
            ("aborts", dict(crash="0 in lengths"), "20", "20", "crash", ExitCode.CRASH),
            ("hangs", dict(hang="B >= 2"), "3", "6", "hang", ExitCode.HANG)):
        plugin = misbehaving_plugin(name, **rule)
        text = plugin.read_text().replace("Capabilities(backward=False)",
                                          "Capabilities(backward=False, dtypes=(torch.float32,))")
        plugin.write_text(text)
        repro, report = tmp_path / name, tmp_path / f"{name}.json"
        proc = _fuzz("--plugin", plugin, "--kernel", name, "--max-examples", "20", "--seed", "1", "--timeout", timeout,
                     "--shrink-seconds", shrink, "--reproducers", repro, "--report", report)
        assert proc.returncode == code, proc.stdout[-3000:] + proc.stderr[-3000:]
        payload = json.loads(report.read_text())
        assert payload["drawn"] == 20, payload  # the campaign went on after the finding
        assert [f["status"] for f in payload["findings"]] == [status], payload["findings"]
        assert payload["statuses"][status] >= 1 and payload["statuses"]["pass"] >= 1
        assert [d["status"] for _, _, d in _files(repro)] == [status]  # one file, no shrink steps, none running


def _wait_for(predicate, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert proc.poll() is None, "the campaign ended before the test could stop it"
        assert time.monotonic() < deadline, "timed out waiting for the campaign"
        time.sleep(0.1)


def test_a_covering_campaign_says_how_many_of_its_cases_came_from_the_covering_array(tmp_path, misbehaving_plugin):
    # regression (a new user's trial): an interrupted --covering campaign said "12 cases run ... 0 drawn" beside
    # "29/35 input classes drawn": its cases were the covering array's, which the summary did not name
    plugin = misbehaving_plugin("fine")
    run = _fuzz("--plugin", plugin, "--kernel", "fine", "--workers", "1", "--max-examples", "3", "--covering",
                "--seed", "1", "--reproducers", tmp_path / "r", "--report", tmp_path / "r.json")
    assert run.returncode == ExitCode.OK, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["covering"] > 0 and report["drawn"] == 3
    assert report["cases"] >= report["covering"] + report["drawn"]
    assert f"3 drawn, {report['covering']} of the covering array, and saved" in " ".join(run.stdout.split())


def test_workers_of_campaigns_with_neighbouring_seeds_never_draw_with_one_seed():
    # regression (2026-12-06): worker w drew with seed + w, so `--seed 1` and `--seed 2` (two hosts, say) repeated
    # each other's draws in all but one worker
    seeds = [worker_seed(s, w) for s in range(64) for w in range(16)]
    assert len(set(seeds)) == len(seeds)
    assert [worker_seed(s, 0) for s in range(64)] == list(range(64))  # one worker draws what --seed S says
    # and `fuzz --help` says so (a new user's trial read "worker w: seed + w" there after the change)
    help_text = " ".join(_fuzz("--help").stdout.split())
    assert "seed + w" not in help_text and "seed of worker 0 (worker w > 0: a seed hashed from both" in help_text


def test_kill_9_of_a_whole_campaign_loses_no_finding_and_leaves_no_duplicates(tmp_path, misbehaving_plugin):
    plugin = misbehaving_plugin("aborts_often", crash="0 in lengths", wrong="B >= 3")
    repro = tmp_path / "repro"
    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "fuzz", "--device", "cpu", "--no-progress",
                             "--plugin", str(plugin), "--kernel", "aborts_often", "--workers", "2", "--duration", "120",
                             "--timeout", "20", "--reproducers", str(repro)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def findings_marked():
            return sum("finding" in d for _, _, d in _files(repro)) if repro.is_dir() else 0

        _wait_for(lambda: findings_marked() >= 1, proc)
        time.sleep(1.0)  # mid-search: shrink steps and a "running" file are likely on disk
        before = {d["finding"]["id"] for _, _, d in _files(repro) if "finding" in d}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    again = _fuzz("--plugin", plugin, "--kernel", "aborts_often", "--max-examples", "3", "--timeout", "20",
                  "--reproducers", repro, "--report", tmp_path / "again.json")
    assert again.returncode in (ExitCode.CRASH, ExitCode.FINDING), again.stdout[-3000:] + again.stderr[-3000:]
    files = _files(repro)
    ids = [d.get("finding", {}).get("id") for _, _, d in files]
    assert None not in ids and len(ids) == len(set(ids)), [(p.name, d["status"]) for p, _, d in files]
    assert before <= set(ids)  # every finding made before the kill is still there
    assert all(d["status"] in ("crash", "error") for _, _, d in files)  # no "running" file, no pass


def test_ctrl_c_ends_a_campaign_with_its_summary_and_report(tmp_path, misbehaving_plugin):
    plugin = misbehaving_plugin("correct")
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "fuzz", "--device", "cpu", "--plugin", str(plugin),
                             "--kernel", "correct", "--workers", "2", "--duration", "300", "--progress-interval", "0.3",
                             "--reproducers", str(repro), "--report", str(report), "--png", str(tmp_path / "t.png")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        _wait_for(lambda: any("cases" in line and " w0:0 " not in line and "cases 0 " not in line for line in lines),
                  proc)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    reader.join(10)
    out, err = "".join(lines), proc.stderr.read()
    assert proc.returncode == ExitCode.INTERRUPTED, out[-3000:] + err[-3000:]
    assert "Traceback" not in err and "campaign on correct" in out and "interrupted" in out
    payload = json.loads(report.read_text())
    assert payload["interrupted"] is True and payload["cases"] >= 1 and (tmp_path / "t.png").stat().st_size > 1000
    assert not list(repro.glob("*.json"))  # no "running" file left behind


def test_findings_listing(tmp_path, misbehaving_plugin, capsys):
    """Regression (a new user's trial): the listing's id of a finding was its signature's, its case file's name (and
    so its replay command) another id: one finding, two ids. A finding's id is its file's everywhere (the listing,
    the campaign's lines and report); the signature's is the listing's ``signature``."""
    from jfa_verify.cli import main

    plugin = misbehaving_plugin("listed", wrong="B >= 2")
    load_plugin(plugin)
    summary = run_campaign(get_kernel("listed"), strategy=cases(get_kernel("listed"), **SMALL), max_examples=15,
                           corpus_dir=tmp_path, device="cpu", seed=2, backward=False)
    assert summary.failed
    rows = list_findings(tmp_path)
    assert sorted(r["signature"] for r in rows) == sorted(f.signature["id"] for f in summary.failures)
    assert sorted(r["id"] for r in rows) == sorted(f.id for f in summary.failures)
    for r in rows:
        assert Path(r["path"]).name.startswith(f"{r['id']}-listed") and f"/{r['id']}-" in r["replay"], r
    assert all(f"finding {f.id} [" in summary.format(coverage=False) for f in summary.failures)
    assert all(d["id"] == f.id for d, f in zip(summary.to_dict()["failures"], summary.failures))
    examples = {f.id: 1 + f.examples for f in summary.failures}
    assert all(r["examples"] == examples[r["id"]] and r["error_kind"] == "RuntimeError" for r in rows)
    assert main(["findings", "--reproducers", str(tmp_path), "--json"]) == 1  # it lists findings (errors)
    assert json.loads(capsys.readouterr().out) == rows


def test_workers_pinned_to_a_gpu_see_the_gpu_of_that_index_under_cuda_visible_devices(monkeypatch):
    # regression: a campaign started with CUDA_VISIBLE_DEVICES=2,3 pinned its worker for GPU 0 with
    # CUDA_VISIBLE_DEVICES=0, i.e. on physical GPU 0, which the campaign was not given
    from jfa_verify.fuzz.workers import visible_device

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert [visible_device(i) for i in (0, "1")] == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert [visible_device(i) for i in (0, "1")] == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1a2b,GPU-3c4d")
    assert visible_device("1") == "GPU-3c4d" and visible_device("MIG-5e6f") == "MIG-5e6f"


def test_kill_9_of_the_campaign_process_alone_ends_its_workers(tmp_path, sleepy_plugin):
    """Regression (a new user's trial): ``kill -9`` of ``jfa-verify fuzz`` itself (not its process group, as an
    OOM killer or a CI timeout may do) left its campaign workers and their case workers running for good (one at
    95% of a core in a hanging kernel), writing into the reproducer folder. Workers now end with their parent."""
    repro = tmp_path / "repro"
    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "fuzz", "--device", "cpu", "--no-progress",
                             "--plugin", str(sleepy_plugin), "--kernel", "sleepy", "--workers", "2",
                             "--max-examples", "5", "--timeout", "120", "--reproducers", str(repro)],
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # a case in flight in the case worker (the sleepy kernel hangs in it): all three processes are up
        _wait_for(lambda: repro.is_dir() and any(d["status"] == "running" for _, _, d in _files(repro)), proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)  # anything left of the campaign's process group?
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("campaign workers still running 20 s after the campaign process was killed")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_second_campaign_on_a_folder_in_use_is_refused(tmp_path, capsys):
    """Regression (a new user's trial): a second campaign on the reproducer folder of a running one replayed the
    first one's in-flight "running" file as a killed campaign's leftover and kept it as its own finding. The folder
    is held for the campaign; the second is a usage error naming the holder."""
    from jfa_verify.cli import main
    from jfa_verify.fuzz.workers import campaign_lock

    repro = tmp_path / "repro"
    repro.mkdir()
    with campaign_lock(repro):  # stands in for the running campaign
        assert main(["fuzz", "--device", "cpu", "--max-examples", "1", "--no-progress", "--reproducers",
                     str(repro)]) == 2
        err = capsys.readouterr().err
        assert f"another campaign (pid {os.getpid()}) is running on this folder" in err, err
    assert main(["fuzz", "--device", "cpu", "--max-examples", "1", "--no-progress", "--reproducers", str(repro),
                 "--no-isolate"]) == 0  # free again once it ends
    assert not (repro / ".campaign.lock").exists()  # and no lock file is left behind (a new user's trial)


def test_ctrl_c_while_workers_load_is_an_interrupt_not_a_dead_worker(tmp_path):
    """Regression (a new user's trial): Ctrl-C in a campaign's first seconds (it reaches the terminal's whole process
    group) found its worker still loading and was reported "worker 0 died: KeyboardInterrupt", with worker_errors in
    the report. It is an interrupt: summary, report, exit 130, no worker error."""
    plugin, marks = tmp_path / "slow_to_load.py", tmp_path / "marks"
    marks.mkdir()
    plugin.write_text(textwrap.dedent(f"""
        import os, pathlib, time
        from jfa_verify import Capabilities, register_kernel

        pathlib.Path({str(marks)!r}, str(os.getpid())).touch()  # loading, in this process
        time.sleep(2)

        def attention(*args, **kwargs):
            raise AssertionError("never run: the campaign is interrupted while its worker loads the plugin")

        @register_kernel("slow_to_load", capabilities=Capabilities(backward=False))
        def load():  # (the coordinator loads the kernel before its banner: a load that raises is a usage error)
            return attention
    """))
    report = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "fuzz", "--device", "cpu", "--no-progress",
                             "--plugin", str(plugin), "--kernel", "slow_to_load", "--max-examples", "5",
                             "--reproducers", str(tmp_path / "repro"), "--report", str(report)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=interruptible)
    try:  # the coordinator loads the plugin first, then its worker does: Ctrl-C then, to the whole group
        _wait_for(lambda: len(list(marks.iterdir())) >= 2, proc)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == ExitCode.INTERRUPTED, out[-3000:] + err[-3000:]
    payload = json.loads(report.read_text())
    assert payload["interrupted"] and payload["worker_errors"] == {}, payload["worker_errors"]
    assert "died" not in out and "Traceback" not in err, out[-3000:] + err[-3000:]


def test_a_listed_replay_command_names_the_plugin_the_finding_ran_not_a_namesake_here(tmp_path, monkeypatch):
    """Regression (a new user's trial): ``findings`` run from a folder holding a fixed copy of the plugin under the
    same name printed a replay command with that copy, so pasting it replayed another kernel. The recorded absolute
    path wins; the short name only where it is the same file from here; the name as given when the file is gone."""
    from jfa_verify.fuzz.findings import _plugins_from_here

    work, fix = tmp_path / "work", tmp_path / "fix"
    work.mkdir()
    fix.mkdir()
    (work / "bug.py").write_text("# the kernel the finding ran\n")
    (fix / "bug.py").write_text("# a fixed copy\n")
    payload = {"plugins": ["bug.py"], "plugin_paths": [str(work / "bug.py")]}
    monkeypatch.chdir(fix)
    assert _plugins_from_here(payload) == [str(work / "bug.py")]
    monkeypatch.chdir(work)
    assert _plugins_from_here(payload) == ["bug.py"]
    (work / "bug.py").unlink()
    assert _plugins_from_here(payload) == ["bug.py"]


def test_a_campaign_whose_every_case_hangs_past_its_end_checked_nothing_and_exits_2(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): `fuzz --duration 15` on a kernel hanging on every case ended 5 s after its
    end (each case still running then is stopped without a verdict) and exited 0 with "no findings": a CI gate read
    it as a pass. No case got a verdict, so nothing was checked: exit 2, said in a note."""
    plugin = misbehaving_plugin("hangs_on_all", hang="True")
    t0 = time.monotonic()
    proc = _fuzz("--plugin", plugin, "--kernel", "hangs_on_all", "--workers", "1", "--duration", "8", "--seed", "1",
                 "--timeout", "120", "--reproducers", tmp_path / "r", "--report", tmp_path / "r.json")
    assert time.monotonic() - t0 < 100  # not the 120 s timeout
    assert proc.returncode == ExitCode.USAGE, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["cases"] == 0 and report["exit_code"] == ExitCode.USAGE and report["findings"] == []
    assert any("stopped without a verdict" in n and "jfa-verify replay --case" in n for n in report["notes"])
    assert any("nothing was checked (exit 2)" in n for n in report["notes"])


def test_a_no_isolate_campaign_ended_by_a_hang_exits_3_with_the_hang_as_its_finding(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial, 2026-12-06): with --no-isolate, a case past --timeout ends its worker through
    the in-process watchdog (exit 3, the case file marked a hang); the campaign read that as a worker that could not
    run and exited 2 ("worker 0 died: exit status 3"). It is a hang: exit 3, the hang listed as the finding."""
    plugin = misbehaving_plugin("hangs_in_process", hang="B >= 2")
    text = plugin.read_text().replace("Capabilities(backward=False)",
                                      "Capabilities(backward=False, dtypes=(torch.float32,))")
    plugin.write_text(text)
    repro, report = tmp_path / "r", tmp_path / "r.json"
    proc = _fuzz("--plugin", plugin, "--kernel", "hangs_in_process", "--workers", "1", "--no-isolate",
                 "--max-examples", "20", "--seed", "1", "--timeout", "4", "--reproducers", repro, "--report", report)
    assert proc.returncode == ExitCode.HANG, proc.stdout[-3000:] + proc.stderr[-3000:]
    payload = json.loads(report.read_text())
    assert payload["exit_code"] == ExitCode.HANG
    assert [f["status"] for f in payload["findings"]] == ["hang"], payload["findings"]
    (death,) = payload["worker_errors"].values()
    assert death["exitcode"] == ExitCode.HANG and "ran past --timeout" in death["why"]


@pytest.mark.parametrize("status", [3, 5])
def test_a_no_isolate_campaign_worker_ended_by_its_kernel_is_a_crash_finding(tmp_path, misbehaving_plugin, status):
    """Regression (a new user's trial, 2026-12-07): with --no-isolate, a kernel calling ``os._exit(3)`` read as the
    watchdog's hang (exit 3) and ``os._exit(5)`` as a worker that could not run (exit 2); either way the case file
    stayed "running" and ``findings`` on the folder exited 2. The case in flight is a crash, as ``run --no-isolate``
    makes it: exit 4, the file a crash finding."""
    plugin = misbehaving_plugin("exits_in_process", crash="B >= 2")
    plugin.write_text(plugin.read_text().replace("os.abort()", f"os._exit({status})").replace(
        "Capabilities(backward=False)", "Capabilities(backward=False, dtypes=(torch.float32,))"))
    repro, report = tmp_path / "r", tmp_path / "r.json"
    proc = _fuzz("--plugin", plugin, "--kernel", "exits_in_process", "--workers", "1", "--no-isolate",
                 "--max-examples", "20", "--seed", "1", "--reproducers", repro, "--report", report)
    assert proc.returncode == ExitCode.CRASH, proc.stdout[-3000:] + proc.stderr[-3000:]
    payload = json.loads(report.read_text())
    (death,) = payload["worker_errors"].values()
    assert death["exitcode"] == status and death["status"] == "crash", death
    assert "ran past --timeout" not in death["why"] and "now a crash finding" in death["why"], death
    files = [json.loads(f.read_text()) for f in repro.glob("*.json")]
    assert [f["status"] for f in files] == ["crash"], [f.get("status") for f in files]
    assert f"exited with status {status}" in files[0]["verdict"]["message"], files[0]["verdict"]
    assert main(["findings", str(repro)]) == ExitCode.CRASH


def test_a_saved_relation_finding_is_replayed_first_and_counts_in_the_exit_status(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): a campaign on a folder holding a relation finding (a call file `run` had
    written) listed it as ``[fail]`` without replaying it and exited 0, fixed kernel or not. It is replayed before
    the draws, as saved case findings are: still broken, exit 1; holding again, moved to now-passing."""
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.checks.calls import write_call_file
    from jfa_verify.checks.suites import relation_checks
    from tests.helpers import reads_its_neighbour

    fixed = tmp_path / "fixed" / "neighbourly.py"
    fixed.parent.mkdir()
    fixed.write_text(misbehaving_plugin("neighbourly").read_text().replace(
        "Capabilities(backward=False)", "Capabilities(backward=False, modes=('self', 'cross'))"))
    buggy = reads_its_neighbour(misbehaving_plugin("neighbourly"))  # (the same file name: written after the copy)
    load_plugin(buggy)
    relation = next(r for r in relation_checks(Target(get_kernel("neighbourly"), "cpu"))
                    if r.name == "batch_invariance")
    folder = tmp_path / "found"
    saved = write_call_file(folder / f"{relation.case.case_id()}-batch_invariance-neighbourly.calls.json", relation,
                            kernel="neighbourly", device="cpu", status="fail", finding="recorded by run",
                            plugins=(str(buggy),))
    for plugin, code, status in ((buggy, ExitCode.FINDING, "fail"), (fixed, ExitCode.OK, "pass")):
        report = tmp_path / f"{status}.json"
        run = _fuzz("--plugin", plugin, "--kernel", "neighbourly", "--max-examples", "2", "--seed", "1", "--workers",
                    "1", "--reproducers", folder, "--report", report)
        assert run.returncode == code, run.stdout[-3000:] + run.stderr[-3000:]
        (row,) = json.loads(report.read_text())["relation_replays"]
        assert row["relation"] == "batch_invariance" and row["status"] == status, row
        if status == "fail":
            assert "run alone differs" in row["finding"] and saved.is_file()
            assert "[FAIL] relation batch_invariance" in run.stdout
        else:
            assert not saved.exists() and (folder / "now-passing" / saved.name).is_file()


def test_a_worker_stopped_before_its_last_word_still_counts_the_cases_it_drew():
    # regression (a new user's trial): a campaign interrupted on a hanging kernel said "2 cases run (0 drawn)": the
    # worker's summary, lost with it, was the only count of its draws; the verdicts' events count them too
    from jfa_verify.fuzz.progress import CampaignProgress
    from jfa_verify.fuzz.workers import _interrupted_summary, drawn_count

    progress = CampaignProgress(1, device_type="cpu")
    for phase in ("generate", "shrink", "generate"):
        progress.event(0, {"event": "case", "status": "hang", "phase": phase, "classes": [], "seconds": 1.0})
    assert drawn_count({0: _interrupted_summary()}, progress) == 2
    assert drawn_count({0: {"generated": 5}}, progress) == 5  # (draws of cases judged before run nothing)
