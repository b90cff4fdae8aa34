"""How a ``jfa-verify run`` ends, and what it leaves: a kernel that kills the run's own process (``--no-isolate``), a
stop that lands once the run has finished, earlier reproducers of cases that now pass, and a reproducer folder with
an unreadable file (issue 43: 9, 10, 12). Each runs the command line as a user does, in a process of its own."""

import json
import os
import signal
import subprocess
import sys

import pytest

from jfa_verify.cases.case import Case
from jfa_verify.cli import main
from jfa_verify.core.exits import ExitCode
from jfa_verify.run.corpus import FORMAT, NOW_PASSING, Corpus, read_case_file
from jfa_verify.run.runner import CaseResult
from tests.helpers import interruptible

# Six cases of the CPU default suite (self/bf16, broadcast/bf16, self/fp16, cross-causal/fp16, self-causal/fp32,
# broadcast/fp32), as tests/test_isolation.py takes them.
FILTER = "layout-7-3-19-5-11"

def _plugin(make, name, dies="False", how="os.abort()", raises="False"):
    """A ``misbehaving_plugin`` kernel (the float64 reference, rounded) that ends its own process with ``how``
    where ``dies`` holds (and raises where ``raises`` holds)."""
    path = make(name, crash=dies, wrong=raises)
    path.write_text(path.read_text().replace("os.abort()", how))
    return path


def _run_args(plugin, kernel, repro, report, *extra):
    return [sys.executable, "-m", "jfa_verify.cli", "run", "--device", "cpu", "--plugin", str(plugin), "--kernel",
            kernel, "--filter", FILTER, "--reproducers", str(repro), "--report", str(report), "--no-progress", *extra]


@pytest.mark.parametrize("how, death", [("os.kill(os.getpid(), __import__('signal').SIGSEGV)", "SIGSEGV (signal 11)"),
                                        ("os._exit(7)", "exited with status 7"),
                                        # a status a command gives itself (a new user's trial, 2026-12-05: exit 0)
                                        ("os._exit(0)", "exited with status 0 before jfa-verify had finished")])
def test_a_kernel_that_kills_the_no_isolate_run_exits_4_and_the_report_names_the_case(tmp_path, how, death,
                                                                                       misbehaving_plugin):
    """Regression (issue 43, 9): with --no-isolate, a segfault in the kernel ended the run with the raw signal's
    status (139, or 11) and left the report a placeholder saying nothing. The case file written before the case
    ran is now a crash, the report says what happened and in which case, `findings` lists it, and the exit is 4."""
    plugin = _plugin(misbehaving_plugin, "dies_on_fp16", dies="dtype == torch.float16", how=how)
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    proc = subprocess.run(_run_args(plugin, "dies_on_fp16", repro, report, "--no-isolate"), capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == ExitCode.CRASH, proc.stdout[-2000:] + proc.stderr[-2000:]
    (path,) = repro.glob("*.json")
    case, payload = read_case_file(path)
    assert case.dtype == "float16" and payload["status"] == "crash" and death in payload["verdict"]["message"]
    assert "[CRASH] jfa-verify run: the run's process" in proc.stderr and str(path) in proc.stderr
    written = json.loads(report.read_text())
    assert written["finished"] is False and written["interrupted"] is False
    assert written["exit_code"] == ExitCode.CRASH  # (null before: a new user's trial)
    assert written["crash"]["case_file"] == str(path) and death in written["crash"]["how"]
    # (the two bf16 cases passed before it: their verdicts are kept, from the run's journal)
    assert written["summary"]["crash"] == 1 and [c["status"] for c in written["cases"]] == ["pass", "pass", "crash"]
    assert written["crash"]["replay"].startswith("jfa-verify replay ") and str(plugin) in written["crash"]["replay"]
    listed = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "findings", str(repro), "--json"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert listed.returncode == ExitCode.CRASH
    assert [r["status"] for r in json.loads(listed.stdout)] == ["crash"]


@pytest.mark.parametrize("command", [["stress", "--reruns", "2"],
                                     ["gate", "--checks", "stress", "--stress-reruns", "2"]])
def test_a_kernel_that_exits_0_mid_stress_is_a_crash_not_a_pass(tmp_path, misbehaving_plugin, command):
    """Regression (a new user's trial, 2026-12-05): stress reruns its cases in its own process, and a kernel calling
    ``os._exit(0)`` made ``stress`` and ``gate --checks stress`` exit 0, a pass to CI, with no verdict and the case
    files left "running". The watching process now tells a command's own exit from the kernel's: exit 4, the case
    files are crashes that `findings` lists."""
    plugin = _plugin(misbehaving_plugin, "exits_zero", dies="True", how="os._exit(0)")
    repro = tmp_path / "repro"
    proc = subprocess.run([sys.executable, "-m", "jfa_verify.cli", *command, "--device", "cpu", "--plugin", str(plugin),
                           "--kernel", "exits_zero", "--reproducers", str(repro)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == ExitCode.CRASH, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "[CRASH] jfa-verify" in proc.stderr and "exited with status 0" in proc.stderr
    files = sorted(repro.glob("*.json"))
    assert files and all(read_case_file(p)[1]["status"] == "crash" for p in files)
    listed = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "findings", str(repro), "--json"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert listed.returncode == ExitCode.CRASH and {r["status"] for r in json.loads(listed.stdout)} == {"crash"}


def test_the_no_isolate_crash_message_prints_a_replay_command_that_works_pasted(tmp_path, misbehaving_plugin):
    """Regression: after a --no-isolate run died (exit 4), its message said `jfa-verify replay repro/<id>-K.json`:
    pasted, that failed ("no kernel named ... add --plugin", exit 2). The command printed names the kernel's
    --plugin and an absolute path, as every printed replay does, and pasted in another folder it replays the crash."""
    import shlex

    plugin = _plugin(misbehaving_plugin, "dies_at_once", dies="True")
    (tmp_path / "elsewhere").mkdir()
    proc = subprocess.run(_run_args(plugin, "dies_at_once", "repcrash", "r.json", "--no-isolate", "--max-cases", "1"),
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == ExitCode.CRASH, proc.stdout[-2000:] + proc.stderr[-2000:]
    (path,) = (tmp_path / "repcrash").glob("*.json")
    printed = proc.stderr.split("`jfa-verify findings` lists it and `", 1)[1].split("`", 1)[0]
    assert printed == json.loads((tmp_path / "r.json").read_text())["crash"]["replay"]
    words = shlex.split(printed)
    assert words[:3] == ["jfa-verify", "replay", str(path)] and words[words.index("--plugin") + 1] == str(plugin)
    pasted = subprocess.run([sys.executable, "-m", "jfa_verify.cli", *words[1:], "--device", "cpu"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path / "elsewhere")
    assert pasted.returncode == ExitCode.CRASH, pasted.stdout[-2000:] + pasted.stderr[-2000:]


def test_a_stop_just_after_the_run_finished_leaves_its_exit_status_and_report_agreeing(tmp_path, misbehaving_plugin):
    """Regression (issue 43, 10): a Ctrl-C landing just after the run wrote its report (finished, all passed) ended
    it with 130. Once the report is on disk the run has finished: the stop changes nothing, and the exit status is
    the report's. (``JFA_VERIFY_TEST_AFTER_REPORT`` holds the run in exactly that moment.)"""
    plugin = misbehaving_plugin("plain_ok")
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    proc = subprocess.Popen(_run_args(plugin, "plain_ok", repro, report, "--max-cases", "1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, preexec_fn=interruptible,
                            env={**os.environ, "JFA_VERIFY_TEST_AFTER_REPORT": "3"})
    try:
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "test hook: report" in line:
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert any("test hook: report" in line for line in seen), "".join(seen) + out[-2000:]
    written = json.loads(report.read_text())
    assert written["finished"] is True and written["interrupted"] is False and written["summary"]["pass"] == 1
    assert proc.returncode == ExitCode.OK, out[-2000:] + err[-2000:]
    assert "1 passed" in out and "interrupted" not in err


def _saved(folder, case, kernel="triton_jfa", status="fail"):
    return Corpus(folder).write(case, kernel, "cpu", CaseResult(case, kernel, status, message="planted"))


def test_a_passing_rerun_keeps_the_earlier_reproducer_and_says_where(tmp_path, capsys):
    """Regression (issue 43, 12): a rerun where a saved finding's case now passes deleted its reproducer without a
    word. It is moved to the folder's now-passing/ subfolder (out of the findings), and the run says so."""
    case = Case(kv_lengths=(3, 5), num_heads_q=2, num_heads_kv=2, head_dim=16, dtype="float32", seed=1)
    repro = tmp_path / "repro"
    path = _saved(repro, case)
    recorded = path.read_text()
    corpus = Corpus(repro)
    with corpus.guard(case, "triton_jfa", "cpu") as guarded:
        assert corpus.record(guarded, CaseResult(case, "triton_jfa", "pass")) is None
    kept = repro / NOW_PASSING / path.name
    assert not path.exists() and kept.read_text() == recorded and corpus.now_passing == [kept]
    err = capsys.readouterr().err
    assert path.name in err and str(kept) in err and "now passes" in err
    # out of the findings: the folder lists nothing (exit 0), and a case that never failed leaves no file
    assert main(["findings", str(repro), "--json"]) == 0 and json.loads(capsys.readouterr().out) == []
    other = Case(kv_lengths=(4,), head_dim=16, dtype="float32")
    with corpus.guard(other, "triton_jfa", "cpu") as fresh:
        corpus.record(fresh, CaseResult(other, "triton_jfa", "pass"))
    assert not fresh.exists() and sorted(p.name for p in (repro / NOW_PASSING).iterdir()) == [path.name]


def test_findings_lists_what_it_reads_and_names_the_file_it_cannot(tmp_path, capsys):
    """Regression (issue 43, 12): on a folder holding an unreadable case file, `findings` printed "no findings" and
    then an error. It lists every readable finding, names the unreadable file with the reason, never says "no
    findings", and exits as documented (its --help): 2 beside no finding (a finding may be lost in the file), the
    finding's own status beside one (a new user's CI step read a confirmed wrong output beside a truncated file as a
    configuration error, 2)."""
    folder = tmp_path / "repro"
    folder.mkdir()
    broken = folder / "0123456789ab-triton_jfa.json"
    broken.write_text(json.dumps({"format": FORMAT})[:-3])
    assert main(["findings", str(folder)]) == ExitCode.USAGE
    out, err = capsys.readouterr()
    assert "no findings" not in out and f"no readable findings in {folder}; 1 case file could not be read" in out
    assert str(broken) in err and "not valid JSON" in err
    fail = _saved(folder, Case(kv_lengths=(5,), head_dim=16, dtype="float32"), status="fail")
    assert main(["findings", str(folder)]) == ExitCode.FINDING
    out, err = capsys.readouterr()
    assert str(fail) in out and str(broken) in err
    crash = _saved(folder, Case(kv_lengths=(3,), head_dim=16, dtype="float32"), status="crash")
    assert main(["findings", str(folder)]) == ExitCode.CRASH
    out, err = capsys.readouterr()
    assert "crash" in out and str(crash) in out and "no readable findings" not in out and str(broken) in err


def test_a_death_marks_only_the_cases_no_live_process_still_runs(tmp_path):
    """Regression: ``record_death`` (the waiting process of a ``--no-isolate`` run that died) made a crash of every
    ``"running"`` file of the folder, so a case another live run was verifying in the same folder became a crash of
    this run's death; it also wrote through one shared ``.tmp`` name, outside the folder's lock. Only the files whose
    guards are all dead are the death's."""
    import time

    from jfa_verify.run.postmortem import record_death

    repro, since = tmp_path / "repro", time.time()
    dead_case, live_case = Case(kv_lengths=(3,), head_dim=16), Case(kv_lengths=(5, 2), head_dim=16)
    script = ("import os, sys; from jfa_verify.cases.case import Case; from jfa_verify.run.corpus import Corpus\n"
              "g = Corpus(sys.argv[1]).guard(Case(kv_lengths=(3,), head_dim=16), 'k', 'cpu'); g.__enter__()\n"
              "os._exit(0)  # dies holding its case, as a segfaulting kernel's run does\n")
    subprocess.run([sys.executable, "-c", script, str(repro)], check=True, timeout=120)
    corpus = Corpus(repro)
    with corpus.guard(live_case, "k", "cpu") as live:  # a run of this process, still verifying its case
        in_flight = record_death(tmp_path / "r.json", repro, since, "died of SIGSEGV (signal 11)")
        dead = corpus.path_for(dead_case, "k")
        assert in_flight.case_file == dead and read_case_file(dead)[1]["status"] == "crash"
        assert read_case_file(live)[1]["status"] == "running"
        written = json.loads((tmp_path / "r.json").read_text())
        assert [c["status"] for c in written["cases"]] == ["crash"] and written["crash"]["case_file"] == str(dead)
        corpus.discard(live)
    assert sorted(p.name for p in repro.iterdir()) == [dead.name]  # no temporary file left behind


def test_a_hang_that_ends_the_no_isolate_run_is_in_its_report(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial, 2026-12-06): with --no-isolate, a case past --timeout ended the run's process
    (exit 3, its case file marked a hang), but the report kept its placeholder: ``"cases": []``, ``"exit_code":
    null``. It now holds the hung case, where it is and how to replay it, and the exit status."""
    plugin = _plugin(misbehaving_plugin, "hangs_on_fp16", dies="dtype == torch.float16",
                     how="__import__('time').sleep(3600)")
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    proc = subprocess.run(_run_args(plugin, "hangs_on_fp16", repro, report, "--no-isolate", "--timeout", "8"),
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == ExitCode.HANG, proc.stdout[-2000:] + proc.stderr[-2000:]
    (path,) = repro.glob("*.json")
    case, payload = read_case_file(path)
    assert case.dtype == "float16" and payload["status"] == "hang" and "[HANG]" in proc.stderr
    written = json.loads(report.read_text())
    assert written["exit_code"] == ExitCode.HANG and written["finished"] is False
    assert [c["status"] for c in written["cases"]] == ["pass", "pass", "hang"] and written["summary"]["hang"] == 1
    assert written["hang"]["case_file"] == str(path) and "no result after 8" in written["hang"]["how"]
    assert written["hang"]["replay"].startswith("jfa-verify replay ") and str(plugin) in written["hang"]["replay"]


@pytest.mark.parametrize("how, status, extra", [("os.abort()", "crash", ()),
                                                ("__import__('time').sleep(3600)", "hang", ("--timeout", "8"))])
def test_a_no_isolate_run_that_dies_keeps_the_failures_before_it_in_its_report(tmp_path, misbehaving_plugin, how,
                                                                               status, extra):
    """Regression (a new user's trial, 2026-12-06): a --no-isolate run writes its report last, so one ended by a
    crash or a hang reported only the case it died in: "fail 0" beside the case files of the cases that had failed
    before it. The report now holds their verdicts, read back from those files, and the [CRASH] line counts them."""
    plugin = _plugin(misbehaving_plugin, "raises_then_dies", dies="dtype == torch.float16", how=how,
                     raises="dtype == torch.bfloat16")
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    proc = subprocess.run(_run_args(plugin, "raises_then_dies", repro, report, "--no-isolate", *extra),
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == (ExitCode.CRASH if status == "crash" else ExitCode.HANG), proc.stderr[-2000:]
    written = json.loads(report.read_text())
    statuses = [c["status"] for c in written["cases"]]
    # the suite's order: self/bf16 and broadcast/bf16 raise, then self/fp16 ends the process
    assert statuses == ["error", "error", status], statuses
    assert written["summary"]["error"] == 2 and written["summary"][status] == 1
    errors = {c["reproducer"] for c in written["cases"][:2]}
    assert errors == {str(p) for p in repro.glob("*.json") if read_case_file(p)[1]["status"] == "error"}
    if status == "crash":
        assert "2 case(s) had failed before it" in proc.stderr, proc.stderr[-2000:]


def test_a_no_isolate_run_that_dies_keeps_every_verdict_before_it_passes_included(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): a --no-isolate run ended by its kernel's os._exit(0) in its last case wrote
    a report whose cases were that case alone ("pass 0", "cases_planned" null): the verdicts of the cases that had
    passed ended with the process. The run appends each verdict to a journal beside its report, which the waiting
    process reads back (and removes)."""
    from jfa_verify.run.report import journal_path

    plugin = _plugin(misbehaving_plugin, "dies_last", dies="dtype == torch.float32 and broadcast", how="os._exit(0)",
                     raises="dtype == torch.bfloat16 and broadcast")
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    proc = subprocess.run(_run_args(plugin, "dies_last", repro, report, "--no-isolate", "--jobs", "1"),
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == ExitCode.CRASH, proc.stdout[-2000:] + proc.stderr[-2000:]
    written = json.loads(report.read_text())
    # the suite's order: self/bf16, broadcast/bf16 (raises), self/fp16, cross-causal/fp16, self-causal/fp32, then
    # broadcast/fp32 ends the process
    assert [c["status"] for c in written["cases"]] == ["pass", "error", "pass", "pass", "pass", "crash"], written
    assert written["summary"]["pass"] == 4 and written["cases_planned"] == 6 and written["exit_code"] == 4
    assert "1 case(s) had failed before it" in proc.stderr, proc.stderr[-2000:]
    assert not journal_path(report).exists()
