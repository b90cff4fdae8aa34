"""Crash and hang isolation in the one run loop: a kernel that aborts or hangs loses its worker, not the run."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from jfa_verify.cases.case import Case
from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.exits import ExitCode, exit_code_for
from jfa_verify.protocol.registry import load_plugin
from jfa_verify.run.corpus import read_case_file
from jfa_verify.run.isolation import CaseWorker, WorkerSpec, sticky_device_error
from jfa_verify.run.settings import RunSettings
from tests.helpers import interruptible, signal_when

# Six cases of the CPU default suite: self/bf16, broadcast/bf16, self/fp16, cross-causal/fp16, self-causal/fp32,
# broadcast/fp32. The plugin hangs on the non-causal float16 one and aborts on the float32 broadcast-Q one.
FILTER = "layout-7-3-19-5-11"
CRASH = "dtype == torch.float32 and broadcast"
HANG = "dtype == torch.float16 and not causal"


def _cli(*args, timeout=300, **kw):
    return subprocess.run([sys.executable, "-m", "jfa_verify.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, **kw)


def _start_run(plugin, kernel, repro, report):
    """``jfa-verify run`` on the six FILTER cases, in the background, without a timeout, one case at a time (with a
    worker per core, the cases after the hanging third one ran beside it, and what was done at the signal depended on
    the machine's speed)."""
    return subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "run", "--device", "cpu", "--plugin", str(plugin),
                             "--kernel", kernel, "--filter", FILTER, "--jobs", "1", "--reproducers", str(repro),
                             "--report", str(report), "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=interruptible)


def test_exit_code_precedence_crash_over_hang_over_failure():
    assert exit_code_for(["pass", "fail", "hang", "crash"]) == ExitCode.CRASH
    assert exit_code_for(["fail", "hang", "pass"]) == ExitCode.HANG
    assert exit_code_for(["timeout"]) == ExitCode.HANG  # the old name of a hang
    assert exit_code_for(["error", "pass"]) == exit_code_for(["fail"]) == ExitCode.FINDING
    assert exit_code_for(["pass", "unsupported"]) == ExitCode.OK


def test_run_with_a_kernel_that_hangs_on_one_case_and_aborts_on_another(tmp_path, misbehaving_plugin):
    plugin = misbehaving_plugin("hangs_and_aborts", crash=CRASH, hang=HANG)
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    t0 = time.monotonic()
    proc = _cli("run", "--device", "cpu", "--plugin", plugin, "--kernel", "hangs_and_aborts", "--filter", FILTER,
                "--timeout", "3", "--reproducers", repro, "--report", report, "--no-progress")
    assert proc.returncode == ExitCode.CRASH, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert time.monotonic() - t0 < 120
    out = proc.stdout
    assert "CRASH" in out and "HANG" in out and "4 passed, 0 failed, 0 errors, 1 crashed, 1 hung" in out
    payload = json.loads(report.read_text())
    assert payload["summary"] == {"pass": 4, "fail": 0, "error": 0, "crash": 1, "hang": 1, "unsupported": 0}
    assert payload["interrupted"] is False and payload["exit_code"] == ExitCode.CRASH
    by_status = {c["status"]: c for c in payload["cases"]}
    assert "SIGABRT" in by_status["crash"]["message"] and "3 s" in by_status["hang"]["message"]
    files = {read_case_file(p)[1]["status"]: p for p in repro.glob("*.json")}
    assert set(files) == {"crash", "hang"}  # one reproducer per finding, none left "running"
    case, _ = read_case_file(files["crash"])
    assert case.mode == "broadcast_q" and case.dtype == "float32"
    # Replaying the crash runs it in a case worker: the replay command survives it and says so.
    replay = _cli("replay", files["crash"], "--device", "cpu", "--plugin", plugin)
    assert replay.returncode == ExitCode.CRASH and "recorded verdict: crash; replayed: crash (same)" in replay.stdout


def test_ctrl_c_ends_run_with_table_and_report_and_no_running_file(tmp_path, misbehaving_plugin):
    plugin = misbehaving_plugin("hangs_long", hang=HANG)  # no --timeout: the third case never ends
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    proc = _start_run(plugin, "hangs_long", repro, report)
    def running_float16(path) -> bool:
        try:
            case, payload = read_case_file(path)
        except InvalidInput:  # removed (a case that passed) between the listing and the read
            return False
        return payload["status"] == "running" and case.dtype == "float16"

    out, err = signal_when(proc, lambda: repro.is_dir() and any(map(running_float16, repro.glob("*.json"))),
                           signal.SIGINT, settle_s=0)
    assert proc.returncode == ExitCode.INTERRUPTED, out[-2000:] + err[-2000:]
    assert "Traceback" not in err and "interrupted after 2 of 6 cases" in err
    payload = json.loads(report.read_text())
    assert payload["interrupted"] is True and payload["summary"]["pass"] == 2 and payload["cases_planned"] == 6
    assert "2 passed" in out
    assert not list(repro.glob("*.json"))  # the interrupted case has no verdict, so no file
    # ... but it is named, with how long it had run and a command that replays it (a new user's Ctrl-C on a hanging
    # case left no word of which case it was)
    (stopped,) = payload["in_flight_at_interrupt"]
    assert stopped["replay"].startswith("jfa-verify replay --case '") and "--timeout" in stopped["replay"]
    assert f"interrupted while running {stopped['case']} (" in err and stopped["replay"] in err


def test_a_second_ctrl_c_while_the_interrupted_run_reports_does_not_cost_the_report(tmp_path, misbehaving_plugin,
                                                                                   monkeypatch):
    # a new user pressed Ctrl-C twice (0.3 s apart) during the cases: exit 130, "jfa-verify run: interrupted", and the
    # start-of-run placeholder left as the report (the pair coverage computed after the first stop takes seconds)
    plugin = misbehaving_plugin("hangs_twice", hang=HANG)
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    monkeypatch.setenv("JFA_VERIFY_CACHE", "off")  # (the pair coverage's universe is computed: seconds to hit)
    proc = _start_run(plugin, "hangs_twice", repro, report)
    try:
        deadline = time.monotonic() + 120
        while not (repro.is_dir() and len(list(repro.glob("*.json"))) and "running" in "".join(
                p.read_text() for p in repro.glob("*.json") if p.is_file())):
            assert time.monotonic() < deadline and proc.poll() is None, "the hanging case never started"
            time.sleep(0.2)
        time.sleep(1)  # (the hanging case runs)
        for _ in range(16):  # a stop, then more until it has ended: some land while it writes its report
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGINT)
            time.sleep(0.25)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    # (a stop that lands once the report is written, as the interpreter shuts down with the default handler back,
    # ends the process by the signal: a shell says 130 for both)
    assert proc.returncode in (ExitCode.INTERRUPTED, -signal.SIGINT), out[-2000:] + err[-2000:]
    payload = json.loads(report.read_text())
    assert payload["interrupted"] is True and payload["summary"]["pass"] == 2 and payload["cases_planned"] == 6, payload
    assert "Traceback" not in err and "interrupted after 2 of 6 cases (report written)" in err


def test_sigterm_ends_run_like_ctrl_c(tmp_path, misbehaving_plugin):
    plugin = misbehaving_plugin("hangs_term", hang="True")
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    report.write_text('{"stale": "an earlier run"}')
    proc = _start_run(plugin, "hangs_term", repro, report)
    out, err = signal_when(proc, lambda: repro.is_dir() and list(repro.glob("*.json")), signal.SIGTERM)
    assert proc.returncode == ExitCode.INTERRUPTED, out[-2000:] + err[-2000:]
    assert "interrupted before the first case finished" in err and not list(repro.glob("*.json"))
    # regression (new-user trial): the line said the report told of it, yet no report was written
    payload = json.loads(report.read_text())
    assert "stale" not in payload and payload["interrupted"] is True and payload["finished"] is False
    assert payload["cases_planned"] == 6 and payload["cases"] == [] and "pairs" in payload
    assert payload["relation_checks"]["not_run_because"] == "interrupted"
    assert len(payload["in_flight_at_interrupt"]) == 1 and "interrupted while running" in err


def test_case_worker_restarts_after_a_crash_and_reports_sticky_cuda_errors_as_crashes(misbehaving_plugin):
    plugin = misbehaving_plugin("sticky", wrong="B == 2", crash="B == 3")
    text = plugin.read_text().replace('raise RuntimeError("planted failure")',
                                      'raise RuntimeError("CUDA error: an illegal memory access was encountered")')
    plugin.write_text(text)
    load_plugin(plugin)
    ok, sticky, abort = (Case(kv_lengths=(3,) * n, dtype="float32", head_dim=16) for n in (1, 2, 3))
    with CaseWorker(WorkerSpec("sticky", "cpu", RunSettings(plugins=[plugin], backward=False))) as worker:
        assert worker.run(ok, 60).status == "pass"
        first = worker.pid
        r = worker.run(sticky, 60)
        assert r.status == "crash" and r.message.startswith("illegal address") and worker.pid is None
        r = worker.run(abort, 60)
        assert r.status == "crash" and "SIGABRT" in r.message
        assert worker.run(ok, 60).status == "pass" and worker.pid not in (None, first) and worker.restarts == 2
    assert sticky_device_error("RuntimeError: CUDA error: misaligned address")
    assert not sticky_device_error("RuntimeError: shapes do not match")


def test_a_failure_outside_the_kernel_call_is_a_verdict_with_its_traceback_not_a_dead_worker(misbehaving_plugin):
    """Regression (H200, 2026-12-02): the padded-SDPA reference ran out of memory inside a case worker, the worker
    died with status 1 and the verdict read "crash: worker process exited with status 1" (the kernel blamed, the
    traceback on stderr only); a sticky device error then surfaced in the next case's materializing."""
    plugin = misbehaving_plugin("outside")
    plugin.write_text(plugin.read_text() + """
import jfa_verify.run.runner as _runner

_sdpa = _runner.padded_sdpa_attention


def _references(problem, *args, **kw):  # the verifier's own reference fails on batches of 2 and 3
    if problem.batch == 2:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 94.00 MiB")
    if problem.batch == 3:
        raise RuntimeError("CUDA error: misaligned address")
    return _sdpa(problem, *args, **kw)


_runner.padded_sdpa_attention = _references
""")
    ok, oom, sticky = (Case(kv_lengths=(3,) * n, dtype="float32", head_dim=16) for n in (1, 2, 3))
    with CaseWorker(WorkerSpec("outside", "cpu", RunSettings(plugins=[plugin], backward=False))) as worker:
        assert worker.run(ok, 60).status == "pass"
        first = worker.pid
        r = worker.run(oom, 60)
        assert r.status == "error" and worker.pid == first  # judged as not judged; the worker lives on
        assert r.message.startswith("not judged: the references (float64 and padded SDPA) failed [out of device "
                                    "memory") and "OutOfMemoryError: CUDA out of memory" in r.message
        assert "_references" in r.message  # where it was raised
        r = worker.run(sticky, 60)
        assert r.status == "crash" and "misaligned address" in r.message and worker.pid is None
        assert worker.run(ok, 60).status == "pass"


def test_in_process_failures_outside_the_kernel_call_are_not_judged_verdicts(monkeypatch, misbehaving_plugin):
    from jfa_verify import run_case
    from jfa_verify.protocol.registry import get_kernel

    plugin = misbehaving_plugin("oom_here", wrong="B == 2")
    plugin.write_text(plugin.read_text().replace('raise RuntimeError("planted failure")',
                                                 'raise torch.OutOfMemoryError("CUDA out of memory. '
                                                 'Tried to allocate 2 GiB")'))
    load_plugin(plugin)
    kernel = get_kernel("oom_here")
    case = Case(kv_lengths=(3,), dtype="float32", head_dim=16)

    def no_memory(self, device):
        raise RuntimeError("CUDA driver error: out of memory")

    with monkeypatch.context() as m:
        m.setattr(Case, "materialize", no_memory)
        r = run_case(case, kernel, "cpu", RunSettings(backward=False))
    assert r.status == "error" and r.message.startswith("not judged: materializing the case's tensors failed [out of")
    assert r.unjudged
    # not blamed on the kernel in its verdict's text (a new user's trial read "kernel raised: not judged: ...")
    assert "\n  not judged: materializing" in r.explain() and "kernel raised" not in r.explain()
    assert run_case(case, kernel, "cpu", RunSettings(backward=False)).status == "pass"
    # the kernel's own out-of-memory error stays the kernel's error, with the same hint
    own = run_case(Case(kv_lengths=(3, 3), dtype="float32", head_dim=16), kernel, "cpu", RunSettings(backward=False))
    assert own.status == "error" and own.message.startswith("OutOfMemoryError: CUDA out of memory. Tried to allocate")
    assert "[out of device memory: other processes on the card" in own.message and not own.unjudged


_PREPARING = """
import torch

from jfa_verify import Capabilities, register_kernel
from jfa_verify.cases.case import Case
from jfa_verify.core.errors import InvalidInput, UnsupportedCase
from jfa_verify.protocol.kernel import TileSizes


def _tiles(problem):  # the kernel's own tile_sizes: it refuses a batch of 2 and breaks on a batch of 3
    if problem.batch == 2:
        raise UnsupportedCase("no batches of 2")
    if problem.batch == 3:
        raise ValueError("no tiles for 3")
    return TileSizes(32, 16)


_problem = Case.problem


def _validate(self, tensors):  # the verifier itself breaking (4), or finding the case invalid (5), in the worker
    if len(self.kv_lengths) == 4:
        raise RuntimeError("verifier bug")
    if len(self.kv_lengths) == 5:
        raise InvalidInput("a case outside the contract")
    return _problem(self, tensors)


Case.problem = _validate


@register_kernel("preparing", capabilities=Capabilities(backward=False), tile_sizes=_tiles)
def load():
    def forward(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        raise AssertionError("never reached")
    return forward
"""


def test_failures_before_the_kernel_call_give_the_same_verdicts_isolated_and_in_process(tmp_path, monkeypatch):
    """Review: the kernel's tile_sizes refusing a case (UnsupportedCase) was a failing "error" in a worker and an
    exception in-process; anything else raised before the kernel call ended the worker."""
    from jfa_verify import run_case
    from jfa_verify.core.errors import InvalidInput
    from jfa_verify.protocol.registry import get_kernel

    plugin = tmp_path / "preparing.py"
    plugin.write_text(_PREPARING)
    two, three, four, five = (Case(kv_lengths=(3,) * n, dtype="float32", head_dim=16) for n in (2, 3, 4, 5))
    with CaseWorker(WorkerSpec("preparing", "cpu", RunSettings(plugins=[plugin], backward=False))) as worker:
        isolated = [worker.run(c, 60) for c in (two, three)]
        pid = worker.pid
        r = worker.run(four, 60, worker.spec.settings.replace(memory="nan"))
        assert r.status == "error" and r.message.startswith("not judged: the case worker failed: RuntimeError: "
                                                            "verifier bug") and r.memory == "nan"
        with pytest.raises(InvalidInput, match="a case outside the contract"):
            worker.run(five, 60)
        assert worker.pid == pid  # one worker throughout
    monkeypatch.setattr(Case, "problem", Case.problem)  # the plugin patches it: restored after the test
    load_plugin(plugin)
    in_process = [run_case(c, get_kernel("preparing"), "cpu", RunSettings(backward=False)) for c in (two, three)]
    for a, b in zip(isolated, in_process):
        assert (a.status, a.message.splitlines()[0]) == (b.status, b.message.splitlines()[0])
    assert in_process[0].status == "unsupported" and "no batches of 2" in in_process[0].message
    assert in_process[1].status == "error" and in_process[1].message.startswith(
        "ValueError: no tiles for 3 (in the kernel's tile_sizes)")


def test_isolated_kernel_must_be_loadable_by_the_worker():
    from jfa_verify import Capabilities
    from jfa_verify.core.errors import PluginError
    from jfa_verify.protocol.registry import register_kernel

    @register_kernel("only_in_this_process", capabilities=Capabilities())
    def load():
        return lambda *a, **k: None

    with CaseWorker(WorkerSpec("only_in_this_process", "cpu")) as worker:
        with pytest.raises(PluginError, match="only_in_this_process.*--plugin file or an installed entry point"):
            worker.run(Case(kv_lengths=(1,)), 60)


def test_old_timeout_status_reads_as_hang(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": "jfa-verify-case/1", "case": {"kv_lengths": [3]}, "kernel": "k",
                                "status": "timeout"}))
    assert read_case_file(path)[1]["status"] == "hang"


def test_verifier_jobs_keep_the_order_and_each_verdict(tmp_path, misbehaving_plugin):
    # three workers, one case of which crashes its worker: every other case still gets its verdict, in order
    from jfa_verify.core.errors import InvalidInput
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from jfa_verify.run.loop import Verifier

    plugin = misbehaving_plugin("crashes-on-3", crash="B == 3")
    load_plugin(plugin)
    kernel = get_kernel("crashes-on-3")
    cases = [Case(kv_lengths=tuple(range(5, 5 + b)), head_dim=16, dtype="float32") for b in (1, 2, 3, 4, 5, 2)]
    with Verifier(kernel, "cpu", tmp_path / "repro",
                  RunSettings(backward=False, plugins=[str(plugin)], isolate=True, jobs=3)) as verifier:
        seen = []
        results = verifier.verify_all(cases, on_result=seen.append)
    assert [r.case.kv_lengths for r in results] == [c.kv_lengths for c in cases]
    assert [r.status for r in results] == ["pass", "pass", "crash", "pass", "pass", "pass"]
    assert len(seen) == len(cases)
    assert [json.loads(p.read_text())["status"] for p in (tmp_path / "repro").glob("*.json")] == ["crash"]
    with pytest.raises(InvalidInput, match="jobs=2"):
        Verifier(kernel, "cpu", tmp_path / "r2", RunSettings(jobs=2))


@pytest.mark.parametrize("how", ["plain", "in_lock_code"])
def test_verifier_jobs_interrupted_mid_case_leave_no_running_file(tmp_path, misbehaving_plugin, how):
    # Ctrl-C (here: raised by on_result) while another worker is inside a hanging case: verify_all kills
    # that worker under its thread, whose case has no verdict, so its file goes (it stayed "running").
    # "in_lock_code", regression (H200, 2026-12-03): `timeout`'s SIGTERM to `jfa-verify run --jobs 6` landed inside
    # the lock code of the main thread's wait on futures and surfaced as "RuntimeError: release unlocked lock"
    # raised while handling the KeyboardInterrupt: a traceback, no interrupted report, and exit 1 (a finding's
    # code) for a stop. It must come out as the stop it is.
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.loop import Verifier

    name = f"hangs-on-2-{how}"
    plugin = misbehaving_plugin(name, hang="B == 2")
    load_plugin(plugin)
    cases = [Case(kv_lengths=tuple(range(5, 5 + b)), head_dim=16, dtype="float32") for b in (2, 1, 3)]

    def interrupt(result):
        time.sleep(1)  # the hanging case is well inside its worker
        if how == "plain":
            raise KeyboardInterrupt
        try:
            raise KeyboardInterrupt("signal SIGTERM")
        except KeyboardInterrupt:
            raise RuntimeError("release unlocked lock")

    with Verifier(get_kernel(name), "cpu", tmp_path / "repro",
                  RunSettings(backward=False, plugins=[str(plugin)], isolate=True, jobs=2)) as verifier:
        with pytest.raises(KeyboardInterrupt, match=None if how == "plain" else "SIGTERM"):
            verifier.verify_all(cases, on_result=interrupt)
    assert not list((tmp_path / "repro").glob("*.json"))


def test_interrupt_behind_finds_the_stop_an_exception_was_raised_in():
    from jfa_verify.run.interrupts import interrupt_behind

    assert interrupt_behind(RuntimeError("a framework error")) is None
    assert interrupt_behind(KeyboardInterrupt()) is not None


def test_replay_of_a_recorded_hang_ends_with_the_limit_its_run_had(tmp_path, misbehaving_plugin, capsys):
    # regression: the replay command printed for a hang (no --timeout in it) waited as long as the kernel
    # hung (here 600 s) instead of calling it a hang again; and it printed the wait to the microsecond
    # ("a limit of 5.00423 s") where the run's limit was 5 s
    from jfa_verify.cli import main
    from jfa_verify.run.corpus import Corpus
    from jfa_verify.run.isolation import crash_result

    plugin = misbehaving_plugin("always-hangs", hang="True")
    case = Case(kv_lengths=(5, 6), head_dim=16, dtype="float32")
    verdict = crash_result(case, "always-hangs", "hang", "no verdict after 2 s (--timeout)", (str(plugin),), 2.00423)
    path = Corpus(tmp_path / "repro").write(case, "always-hangs", "cpu", verdict, (str(plugin),))
    t0 = time.monotonic()
    assert main(["replay", str(path), "--device", "cpu", "--plugin", str(plugin)]) == ExitCode.HANG
    assert time.monotonic() - t0 < 60
    out = capsys.readouterr().out
    assert "a limit of 2 s" in out and "recorded verdict: hang; replayed: hang (same)" in out
    from jfa_verify.run.corpus import replay_timeout

    # a fractional limit is kept (regression: rounding to whole seconds replayed --timeout 2.4 with 2 s)
    assert [replay_timeout({"status": "hang", "verdict": {"seconds": {"kernel": w}}}) for w in (2.4031, 0.3002)] == [
        2.4, 0.3]


def test_a_hang_marked_by_a_watchdog_replays_with_the_limit_it_ran_past(tmp_path):
    """Regression (a new user's trial, 2026-12-06): a case the in-process watchdog ended (a bisect step's, or a
    --no-isolate run's) was marked a hang with no verdict seconds, so its replay waited the default 120 s where
    the run had waited 5. The file records the limit, and the replay takes it."""
    from jfa_verify.run.corpus import HANG_REPLAY_S, Corpus, mark_hang, replay_timeout

    case = Case(kv_lengths=(5, 6), head_dim=16, dtype="float32")
    corpus = Corpus(tmp_path / "repro")
    with corpus.guard(case, "triton_jfa", "cpu") as path:
        assert replay_timeout(json.loads(path.read_text())) == HANG_REPLAY_S  # running: no limit known
        payload = mark_hang(path, "no result after 5 s; process ended", 5.0)
    assert payload["status"] == "hang" and payload["timeout_s"] == 5.0
    assert replay_timeout(json.loads(path.read_text())) == 5.0


def test_a_plugin_that_fails_to_load_in_the_case_worker_leaves_no_running_case_file(tmp_path):
    """Regression: the worker's load failure ended the run with exit 2 (right) but left the first case's
    write-ahead file "running", which later runs take for a possible crash of the kernel."""
    import subprocess
    import sys

    plugin = tmp_path / "worker_only_failure.py"
    plugin.write_text(
        "import multiprocessing\n"
        "from jfa_verify import Capabilities, register_kernel\n"
        "if multiprocessing.current_process().name != 'MainProcess':\n"
        "    raise ImportError('this plugin imports in the main process only')\n"
        "@register_kernel('loads_in_main_only', capabilities=Capabilities())\n"
        "def load():\n"
        "    return lambda *a, **k: None\n")
    repro = tmp_path / "repro"
    proc = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "run", "--device", "cpu", "--plugin", str(plugin),
                           "--kernel", "loads_in_main_only", "--max-cases", "2", "--reproducers", str(repro),
                           "--no-progress"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout[-1000:] + proc.stderr[-1000:]
    assert "cannot load kernel 'loads_in_main_only'" in proc.stderr and "main process only" in proc.stderr
    assert not list(repro.rglob("*.json")), [p.read_text()[:200] for p in repro.rglob("*.json")]


def test_a_case_worker_returns_a_large_cached_peak_to_the_driver(monkeypatch):
    # regression (H200, 2026-12-02): idle case workers of two gates held a past case's peak (4-14 GiB each) and a
    # large case of either gate ran out of memory; a worker now keeps at most KEEP_CACHED_BYTES between cases
    import torch

    from jfa_verify.run import isolation

    emptied = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    for reserved, released in ((isolation.KEEP_CACHED_BYTES + 1, True), (isolation.KEEP_CACHED_BYTES, False)):
        monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None, n=reserved: n)
        assert isolation.release_cached_memory(torch.device("cuda", 0)) is released
    assert isolation.release_cached_memory(torch.device("cpu")) is False and emptied == [True]


def test_replay_of_a_running_file_runs_in_a_case_worker_with_a_limit(tmp_path, misbehaving_plugin, monkeypatch,
                                                                     capsys):
    """Regression (a new user's trial): the replay command ``findings`` prints for a ``"running"`` file (its process
    died mid-case: most often a crash or a hang) ran the case in the replaying process: it hung for good, or
    aborted with exit 134 and no word. It now runs in a case worker, with a limit."""
    import jfa_verify.run.corpus as corpus_mod
    from jfa_verify.cli import main
    from jfa_verify.run.corpus import Corpus

    case = Case(kv_lengths=(5, 6), head_dim=16, dtype="float32")
    for name, misbehaviour, want in (("aborts", dict(crash="True"), ExitCode.CRASH),
                                     ("hangs", dict(hang="True"), ExitCode.HANG)):
        plugin = misbehaving_plugin(name, **misbehaviour)
        left = Corpus(tmp_path / name).guard(case, name, "cpu", plugins=(str(plugin),))
        path = left.__enter__()  # never left: the file stays "running", as after a kill -9
        assert json.loads(path.read_text())["status"] == "running"
        monkeypatch.setattr(corpus_mod, "HANG_REPLAY_S", 3.0)
        t0 = time.monotonic()
        assert main(["replay", str(path), "--device", "cpu", "--plugin", str(plugin)]) == want
        assert time.monotonic() - t0 < 60
        assert "ended mid-case" in capsys.readouterr().out


def test_a_case_worker_whose_parent_is_gone_ends_quietly(tmp_path):
    """Regression (a new user's trial): after kill -9 of a campaign, its orphaned case worker finished its case,
    wrote the verdict into the dead parent's pipe and printed a BrokenPipeError (or ConnectionResetError)
    traceback on the terminal. It ends at once, quietly."""
    plugin = tmp_path / "slow.py"
    plugin.write_text(textwrap.dedent("""
        import time
        from jfa_verify import Capabilities, register_kernel
        from jfa_verify.oracles import reference_attention
        from jfa_verify.core.contract import validate_inputs

        @register_kernel("slow_once", capabilities=Capabilities(backward=False))
        def load():
            def forward(q, k, v, q_offsets, k_offsets, **kwargs):
                time.sleep(1.0)  # the parent is gone before the verdict is sent
                ref = reference_attention(validate_inputs(q, k, v, q_offsets, k_offsets, **kwargs), q, k, v)
                return ref["o"].to(q.dtype), ref["lse"].float()
            return forward
    """))
    script = textwrap.dedent(f"""
        from jfa_verify import Case, RunSettings
        from jfa_verify.run.isolation import CaseWorker, WorkerSpec

        if __name__ == "__main__":
            worker = CaseWorker(WorkerSpec("slow_once", "cpu", RunSettings(plugins=[{str(plugin)!r}], backward=False)))
            case = Case(kv_lengths=(3,), dtype="float32", head_dim=16)
            assert worker.run(case, 60).status == "pass"
            child = worker._proc
            worker._conn.send((case, None))
            worker._conn.close()  # what the parent's death does to the pipe
            child.join(30)
            print("exit", child.exitcode)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "exit 0" and "Traceback" not in proc.stderr, proc.stdout + proc.stderr[-3000:]


def _run_one_case_and_its_relation(tmp_path, monkeypatch, plugin, kernel_name):
    """``run_suite`` (isolated, CPU) on a suite of one case of two sequences and its batch-invariance check."""
    import contextlib

    import jfa_verify.checks.suites as suites
    from jfa_verify.checks.relations import Relation
    from jfa_verify.core.device import select_device
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.workflows.suite_run import RunRequest, run_suite

    case = Case(kv_lengths=(3, 5), head_dim=16, dtype="float32", name="two-sequences")
    suite = suites.Suite("tiny", (case,), "one case and its batch-invariance check",
                         (Relation("batch_invariance", case),))
    monkeypatch.setattr(suites, "get_suite", lambda *a, **k: suite)

    class Quiet:
        def planned(self, kernel, suite, cases, jobs):
            pass

        @contextlib.contextmanager
        def verifying(self, kernel, total):
            yield lambda result: None

        def verified(self, kernel, results, coverage, pairs):
            pass

    request = RunRequest(kernel=kernel_name, suite="tiny", report=str(tmp_path / "r.json"),
                         reproducers=str(tmp_path / "repro"), settings=RunSettings(plugins=[plugin], isolate=True))
    return run_suite(request, select_device("cpu"), lambda: (load_plugin(plugin), get_kernel(kernel_name))[1], Quiet())


def test_the_relation_checks_worker_starts_with_the_case_workers(tmp_path, misbehaving_plugin, monkeypatch):
    """Regression (H100, 2026-12-06): the relation checks' worker was started after the cases, so the checks waited
    for its start-up and its first backward (most of the 5 s relation phase of a warm main job). It now starts with
    the case workers and loads while they run."""
    from jfa_verify.checks.calls import RelationWorker
    from jfa_verify.run.loop import Verifier

    events = []

    def spy(cls, name, record):
        real = getattr(cls, name)

        def wrapper(self, *args, **kwargs):
            events.append(record(self))
            return real(self, *args, **kwargs)
        monkeypatch.setattr(cls, name, wrapper)

    spy(RelationWorker, "start_early", lambda w: "relation worker started")
    spy(Verifier, "verify_all", lambda v: "cases")
    spy(RelationWorker, "check", lambda w: f"check, its child {'already there' if w.pid else 'not started'}")
    plugin = misbehaving_plugin("aborts_alone", crash="B == 0")  # (never: a batch has a sequence)
    outcome = _run_one_case_and_its_relation(tmp_path, monkeypatch, plugin, "aborts_alone")
    assert [r.status for r in outcome.results] == ["pass"] and outcome.findings == []
    assert events == ["relation worker started", "cases", "check, its child already there"]


def test_a_crash_in_the_relation_checks_is_a_finding_exit_4_not_the_end_of_the_run(tmp_path, misbehaving_plugin,
                                                                                    monkeypatch):
    """Regression (issue 43, 15): a kernel that crashed in the relation checks (a planted bug reading keys through
    the wrong offsets) killed ``jfa-verify run`` itself with SIGSEGV after every case was judged: the checks ran in
    the main process, and the report was left ``finished: false``. Here the kernel aborts on a batch of one
    sequence, which only the batch-invariance check calls."""
    from jfa_verify.workflows.suite_run import exit_code

    plugin = misbehaving_plugin("aborts_alone", crash="B == 1")
    outcome = _run_one_case_and_its_relation(tmp_path, monkeypatch, plugin, "aborts_alone")
    assert [r.status for r in outcome.results] == ["pass"]
    (line,) = outcome.findings
    assert line.startswith("[CRASH] relation batch_invariance on two-sequences: the kernel's process died in the "
                           "check: worker process killed by SIGABRT"), line
    assert exit_code(outcome) == ExitCode.CRASH == 4
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["finished"] is True and report["relations"] == [line], report
    (call_file,) = (tmp_path / "repro").glob("*.calls.json")
    assert json.loads(call_file.read_text())["status"] == "crash"


def test_a_process_from_the_worker_fork_server_takes_the_callers_environment_of_now(monkeypatch):
    # Mutant processes come from the fork server that case workers use (a spawn cost about 2.5 s of imports a
    # mutant, 2026-12-04); the server keeps the environment it started with, so the caller's is handed over whole.
    from concurrent.futures import ProcessPoolExecutor

    from jfa_verify.run.isolation import adopt_environment, start_worker_server, worker_context

    ctx = worker_context()
    start_worker_server(ctx)
    monkeypatch.setenv("JFA_VERIFY_TEST_LATE_VARIABLE", "set after the fork server started")
    import os

    with ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=adopt_environment,
                             initargs=(dict(os.environ),)) as pool:
        seen = pool.submit(os.getenv, "JFA_VERIFY_TEST_LATE_VARIABLE").result(timeout=120)
    assert seen == "set after the fork server started"


_SERVER_FROM_A_THREAD = '''
import os, signal, threading, time
from multiprocessing import forkserver
from jfa_verify.run.isolation import start_worker_server, worker_context


def main():
    ctx = worker_context()
    assert ctx.get_start_method() == "forkserver"
    starter = threading.Thread(target=start_worker_server, args=(ctx,))  # as run --jobs N starts it: from a thread
    starter.start()
    starter.join()
    pid = forkserver._forkserver._forkserver_pid
    deadline = time.monotonic() + 120
    while "libtorch" not in open(f"/proc/{pid}/maps").read():  # the server is inside its import of torch
        assert time.monotonic() < deadline
        time.sleep(0.01)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (this process is not the one under test)
    os.killpg(os.getpgrp(), signal.SIGINT)  # a Ctrl-C reaches the terminal's whole process group
    child = ctx.Process(target=os.getpid)  # the server still forks workers
    child.start()
    child.join(120)
    print("child exit", child.exitcode)


if __name__ == "__main__":  # (the fork server imports the main module)
    main()
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; the fork server is Linux's")
def test_a_ctrl_c_while_a_fork_server_started_from_a_thread_imports_torch_is_ignored(tmp_path):
    """Regression (a new user's trial): ``run --jobs N`` starts its case workers, and with the first one the fork
    server, from its threads, where the server cannot be started deaf to Ctrl-C; a Ctrl-C while it imported torch
    printed a KeyboardInterrupt traceback from inside torch and killed it. It now ignores the signal from its
    first import on (jfa_verify.run.deaf), and forks workers after it."""
    script = tmp_path / "server_from_a_thread.py"
    script.write_text(_SERVER_FROM_A_THREAD)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          start_new_session=True, cwd=tmp_path)
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0 and "child exit 0" in proc.stdout, proc.stdout + proc.stderr[-3000:]


def test_a_kill_while_the_worker_launches_its_child_ends_the_case_not_after_its_timeout(misbehaving_plugin,
                                                                                       monkeypatch):
    # regression: a campaign's end (or a Ctrl-C) 2 s into its first case came while the fork server still started
    # the case's child; kill() found no child yet and did nothing, and the hanging case ran its whole --timeout
    from jfa_verify.run import isolation

    plugin = misbehaving_plugin("hangs_late_kill", hang="True")
    load_plugin(plugin)
    worker = CaseWorker(WorkerSpec("hangs_late_kill", "cpu", RunSettings(plugins=[plugin], backward=False)))
    launch = isolation.start_child

    def killed_while_launching(ctx, proc):  # the other thread's kill(), between the launch and the child being known
        worker.kill()
        launch(ctx, proc)

    monkeypatch.setattr(isolation, "start_child", killed_while_launching)
    with worker:
        t0 = time.perf_counter()
        result = worker.run(Case(kv_lengths=(3,), dtype="float32", head_dim=16), 60)
        assert time.perf_counter() - t0 < 30, "the killed worker's case ran on"
        assert result.status == "crash" and "killed" in result.message and worker.pid is None
    monkeypatch.setattr(isolation, "start_child", launch)
    with CaseWorker(WorkerSpec("hangs_late_kill", "cpu", RunSettings(plugins=[plugin], backward=False))) as fresh:
        assert fresh.run(Case(kv_lengths=(3,), dtype="float32", head_dim=16), 3).status == "hang"  # (it does hang)


def test_a_worker_started_early_loads_its_kernel_before_its_first_case_arrives(tmp_path, misbehaving_plugin):
    # issue 39: each worker's first case on an H100 took 3-4 s more than the rest (imports, the kernel, the device's
    # context); `run` now starts its workers while it precompiles, and each loads the kernel before a case comes
    plugin = misbehaving_plugin("loads_slowly")
    marker = tmp_path / "loaded"
    text = plugin.read_text().replace('    """A correct forward in plain torch',
                                      f'    time.sleep(2)\n    open({str(marker)!r}, "w").write(str(os.getpid()))\n'
                                      f'    """A correct forward in plain torch', 1)
    plugin.write_text(text)
    load_plugin(plugin)
    worker = CaseWorker(WorkerSpec("loads_slowly", "cpu", RunSettings(plugins=[plugin], backward=False)))
    with worker:
        t0 = time.perf_counter()
        worker.start_early()
        assert time.perf_counter() - t0 < 2 and worker.pid is not None  # launched, not waited for
        deadline = time.time() + 120
        while not marker.exists() and time.time() < deadline:  # loaded with no case sent: the warm-up did it
            time.sleep(0.1)
        assert marker.exists()
        first = worker.pid
        worker.start_early()  # (a child is there: nothing)
        assert worker.pid == first
        assert worker.run(Case(kv_lengths=(3, 5), dtype="float32", head_dim=16), 60).status == "pass"
        assert worker.pid == first and worker.restarts == 0 and marker.read_text() == str(first)
        assert worker.startup_s >= 0.5  # counted from the launch (imports), not from the first case


def test_a_ctrl_c_while_a_fork_server_child_starts_is_heard_not_lost():
    # a new user's Ctrl-C 2.5 s into `fuzz` was lost: its workers started inside children_start_deaf, whose SIG_IGN
    # covered the wait for the fork server's imports, and the campaign ran to its end, exit 0
    from jfa_verify.run.isolation import start_child, worker_context

    ctx = worker_context()
    if ctx.get_start_method() != "forkserver":
        pytest.skip("no fork server on this platform")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    class SlowStart:
        started = False

        def start(self):  # the signal arrives while this process waits for the child
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
            self.started = True

    proc = SlowStart()
    try:
        with pytest.raises(KeyboardInterrupt):
            start_child(ctx, proc)
    finally:
        signal.signal(signal.SIGINT, previous)
    # ... once the start is over: cut in two, the campaign's process object knew no child, and joining it raised
    # "can only join a started process" (exit 70)
    assert proc.started


def test_a_worker_reports_the_peak_device_memory_of_each_case(jfa_device):
    """Each isolated case says the most device memory it held (CUDA): what the default worker count
    (``GPU_GIB_PER_JOB``, 8 GiB a worker) must leave room for, which no run measured before."""
    small = Case(kv_lengths=(64, 33), head_dim=16, dtype="float32", name="two-sequences")
    large = Case(kv_lengths=(4096,), head_dim=64, dtype="float32", name="one-sequence")  # (CUDA only)
    cases = [small] if jfa_device.type != "cuda" else [large, small]
    with CaseWorker(WorkerSpec("triton_jfa", jfa_device.type)) as worker:
        results = [worker.run(case) for case in cases]
    assert [r.status for r in results] == ["pass"] * len(cases), results[0].message
    assert results[0].to_dict()["peak_device_mib"] == results[0].peak_device_mib
    if jfa_device.type != "cuda":
        assert results[0].peak_device_mib is None
        return
    big, little = (r.peak_device_mib for r in results)
    assert big >= 3 * 4096 * 2 * 64 * 4 / 2 ** 20  # q, k and v at least
    assert little < big / 2  # counted per case: the small case after the large one is not charged for it
