"""Campaigns: failures shrink into case files that replay to the same verdict; saved failures come back first."""

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jfa_verify import run_case
from jfa_verify.fuzz import run_campaign
from jfa_verify.protocol.registry import get_kernel, load_plugin
from jfa_verify.run.corpus import TIMEOUT_EXIT_CODE, read_case_file
from jfa_verify.run.settings import RunSettings
from jfa_verify.strategies import cases

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
    # The search goes on after a finding; each finding is one signature, kept as one (shrunk) file.
    ids = [f.signature["id"] for f in summary.failures]
    assert len(ids) == len(set(ids)) and all(f.source == "search" for f in summary.failures)
    assert sorted(tmp_path.glob("*.json")) == sorted(f.path for f in summary.failures)  # shrink steps removed
    assert (tmp_path / ".hypothesis").is_dir()
    failure = min(summary.failures, key=lambda f: f.case.tokens())
    assert failure.case.batch <= 2 and failure.case.num_heads_q == 1  # shrunk

    case, payload = read_case_file(failure.path)
    assert payload["status"] == "fail" and payload["kernel"] == mutant.name and case == failure.case
    replay = run_case(case, mutant, jfa_device, RunSettings(backward=False))
    assert replay.status == payload["status"]
    assert sorted(c.name for c in replay.failing) == sorted(n for n, o in payload["verdict"]["outputs"].items()
                                                            if not o["passed"])
    text = summary.format()
    assert f"search finding {failure.id} [fail]" in text and str(failure.path) in text  # (the file's id)
    assert "coverage over" in text

    again = run_campaign(mutant, strategy=cases(mutant, device_type=jfa_device.type, **FWD), max_examples=5,
                         corpus_dir=tmp_path, device=jfa_device, seed=2, backward=False)
    replayed = [(f.source, f.path) for f in again.failures if f.source == "corpus"]
    assert sorted(replayed) == sorted(("corpus", f.path) for f in summary.failures)


def test_campaign_on_real_kernel_finds_nothing(jfa_kernel, jfa_device, tmp_path):
    summary = run_campaign(jfa_kernel, strategy=cases(jfa_kernel, device_type=jfa_device.type, max_batch=3,
                                                      max_len=40), max_examples=8, corpus_dir=tmp_path,
                           device=jfa_device, seed=0)
    assert not summary.failed, summary.format()
    assert summary.cases_run >= 5 and not list(tmp_path.glob("*.json")) and "no failures" in summary.format()
    assert set(summary.to_dict()) >= {"cases_run", "statuses", "failures", "coverage"}


def test_a_campaign_leaves_no_hypothesis_folder_in_the_current_folder(jfa_kernel, tmp_path, monkeypatch):
    """Regression (new-user trial): `fuzz` and `gate` made ./.hypothesis/constants/ (Hypothesis's cache of local
    modules' constants) in the current folder. While a campaign runs, Hypothesis's storage is the campaign's own
    database folder (REPRODUCERS/.hypothesis), and the one before is restored after."""
    from hypothesis.configuration import storage_directory

    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY")  # (the tests' own choice; a user's is kept, unset here)
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    before = storage_directory("constants").path
    seen = []

    def noted(case):  # where Hypothesis would write, asked while it draws
        seen.append(storage_directory("constants").path)
        return case

    corpus = tmp_path / "repro"
    summary = run_campaign(jfa_kernel, strategy=cases(jfa_kernel, device_type="cpu", max_batch=1, max_len=3,
                                                      dtypes=["float32"]).map(noted),
                           max_examples=2, corpus_dir=str(corpus), device="cpu", seed=0)
    assert summary.cases_run >= 1 and seen
    assert set(seen) == {corpus / ".hypothesis" / "constants"}, seen
    assert storage_directory("constants").path == before and not list(here.iterdir())


def test_saved_failure_that_now_passes_is_reported_fixed(jfa_kernel, jfa_device, tmp_path):
    from jfa_verify import Case
    from jfa_verify.run.corpus import Corpus
    from jfa_verify.run.runner import CaseResult

    case = Case(kv_lengths=(3,), dtype="float32", head_dim=16)
    path = Corpus(tmp_path).write(case, jfa_kernel.name, str(jfa_device), CaseResult(case, jfa_kernel.name, "fail"))
    summary = run_campaign(jfa_kernel, strategy=cases(jfa_kernel, max_batch=1, max_len=3, dtypes=["float32"]),
                           max_examples=1, corpus_dir=tmp_path, device=jfa_device, backward=False)
    assert summary.fixed == [path] and not path.exists() and not summary.failed


def test_leftover_running_file_is_replayed_and_never_reported_fixed(jfa_kernel, jfa_device, tmp_path):
    """Regression: a "running" file left by a killed campaign was replayed as a saved failure and, passing,
    reported as "fixed". It is replayed (it may be the crash that killed the process); a pass removes it
    with a note, never as a fix."""
    from jfa_verify import Case
    from jfa_verify.run.corpus import Corpus

    case = Case(kv_lengths=(3,), dtype="float32", head_dim=16)
    with Corpus(tmp_path).guard(case, jfa_kernel.name, str(jfa_device)) as path:
        pass  # left as "running": what a kill -9 leaves behind
    summary = run_campaign(jfa_kernel, strategy=cases(jfa_kernel, max_batch=1, max_len=3, dtypes=["float32"]),
                           max_examples=1, corpus_dir=tmp_path, device=jfa_device, backward=False)
    assert summary.fixed == [] and not path.exists() and not summary.failed
    assert any(str(path) in n and "not a finding" in n for n in summary.notes), summary.notes


def test_watchdog_marks_a_hung_case_and_exits(tmp_path, sleepy_plugin):
    plugin = sleepy_plugin
    script = textwrap.dedent(f"""
        from jfa_verify.protocol.registry import load_plugin
        from jfa_verify.fuzz import run_campaign
        from jfa_verify.strategies import cases
        load_plugin({str(plugin)!r})
        run_campaign("sleepy", strategy=cases(max_batch=1, max_len=2), max_examples=1,
                     corpus_dir={str(tmp_path / "corpus")!r}, device="cpu", timeout_s=0.5)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == TIMEOUT_EXIT_CODE, proc.stderr[-2000:]
    (path,) = (tmp_path / "corpus").glob("*.json")
    payload = json.loads(path.read_text())
    assert payload["status"] == "hang" and payload["kernel"] == "sleepy"
    read_case_file(path)  # still a valid, replayable case file


def test_a_shrink_cut_short_by_the_campaigns_end_is_kept_as_unshrunk(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): a failure whose shrinking was stopped by the campaign's end (its examples,
    --duration, Ctrl-C) was kept as a shrunk finding, so its incidental classes were required of every later
    failure of the same bug: one bug, eight findings. It is now kept with ``"shrunk": false`` and a note, and
    matched on its failing outputs alone."""
    plugin = misbehaving_plugin("wrong_on_two", wrong="B >= 2")
    load_plugin(str(plugin))
    kernel = get_kernel("wrong_on_two")
    shrink_steps = []

    def on_event(event):
        if event.get("event") == "case" and event.get("phase") == "shrink":
            shrink_steps.append(event)

    summary = run_campaign(kernel, strategy=cases(kernel, device_type="cpu", max_batch=4, max_len=12,
                                                  dtypes=["float32"]),
                           max_examples=50, corpus_dir=str(tmp_path / "r"), device="cpu", seed=3,
                           on_event=on_event, should_stop=lambda: len(shrink_steps) >= 2)
    (failure,) = summary.failures
    assert failure.signature.get("shrunk") is False
    assert read_case_file(failure.path)[1]["finding"]["shrunk"] is False
    assert any("stopped by the campaign's end" in n for n in summary.notes), summary.notes


def test_a_round_ended_by_a_hypothesis_error_does_not_retire_the_worker(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): a round that Hypothesis ended with an error (a FlakyFailure) drew fewer
    cases than its budget, which the campaign took for an exhausted search space: the worker stopped for good
    (2 cases in 30 s beside another worker's 287). It now goes on with the next round."""
    plugin = misbehaving_plugin("correct_here")
    load_plugin(str(plugin))
    kernel = get_kernel("correct_here")
    draws = []

    def once_broken(case):
        draws.append(case)
        if len(draws) == 3:  # the first round ends in an error of Hypothesis's run, not of the kernel
            raise RuntimeError("a strategy error standing in for Hypothesis's FlakyFailure")
        return case

    strategy = cases(kernel, device_type="cpu", max_batch=2, max_len=8, dtypes=["float32"]).map(once_broken)
    summary = run_campaign(kernel, strategy=strategy, max_examples=12, corpus_dir=str(tmp_path / "r"),
                           device="cpu", seed=5)
    assert any(n.startswith("round 0: Hypothesis ended with") for n in summary.notes), summary.notes
    assert summary.rounds >= 2 and summary.generated >= 10, (summary.rounds, summary.generated)


def test_an_interrupt_while_a_saved_finding_is_replayed_keeps_its_case_file(jfa_kernel, jfa_device, tmp_path,
                                                                            monkeypatch):
    """Regression (a new user's trial): Ctrl-C or SIGTERM while a campaign replayed its saved findings (they replay
    first) deleted the finding's case file, a hang's too: the interrupted case had no verdict, and its file was
    removed as if the campaign had made it. The file is put back as it was."""
    from jfa_verify import Case
    from jfa_verify.fuzz.findings import mark_finding, signature
    from jfa_verify.run.corpus import Corpus
    from jfa_verify.run.runner import CaseResult

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # what Ctrl-C (or SIGTERM, under terminate_as_interrupt) raises mid-case

    monkeypatch.setattr("jfa_verify.run.loop.run_case", interrupted)
    corpus = Corpus(tmp_path)
    for status, lengths in (("fail", (3,)), ("hang", (5,))):
        case = Case(kv_lengths=lengths, dtype="float32", head_dim=16)
        result = CaseResult(case, jfa_kernel.name, status, message="no verdict after 1 s (--timeout)")
        path = corpus.write(case, jfa_kernel.name, str(jfa_device), result)
        mark_finding(corpus, path, signature(result.to_dict(), {"self"}), found_by="search (worker 0)")
    saved = {p: p.read_text() for p in tmp_path.glob("*.json")}
    summary = run_campaign(jfa_kernel, max_examples=1, corpus_dir=tmp_path, device=jfa_device, backward=False)
    assert summary.interrupted
    assert {p: p.read_text() for p in tmp_path.glob("*.json")} == saved  # both findings, byte for byte


def test_a_findings_examples_are_distinct_cases_and_a_rerun_of_the_same_cases_adds_none(tmp_path,
                                                                                       misbehaving_plugin):
    """Regression (a new user's trial): every round the shared database handed back the finding's own shrunk case,
    which was logged as one more example of it (three identical lines in ``.findings/<id>.jsonl``, the listing's
    count 3 against the campaign's 2), and every rerun logged it again. Examples are distinct cases, never the
    finding's own."""
    from jfa_verify import Case
    from jfa_verify.fuzz.findings import list_findings

    plugin = misbehaving_plugin("wrong_on_two_or_more", wrong="B >= 2")
    load_plugin(str(plugin))
    kernel = get_kernel("wrong_on_two_or_more")
    strategy = cases(kernel, device_type="cpu", max_batch=4, max_len=12, dtypes=["float32"])
    # (rounds of 12: with rounds of 6, each round's draws shrink to the finding's own case, and no example is met
    # to log, since the database's replays no longer take the draws: issue 43, 8)
    first = run_campaign(kernel, strategy=strategy, max_examples=24, round_examples=12, corpus_dir=tmp_path,
                         device="cpu", seed=3, backward=False)
    (failure,) = first.failures
    log = tmp_path / ".findings" / f"{failure.signature['id']}.jsonl"

    def logged():
        return [Case.from_dict(json.loads(line)["case"]).case_id() for line in log.read_text().splitlines()]

    ids = logged()
    assert len(ids) == len(set(ids)) and failure.case.case_id() not in ids, ids
    (row,) = list_findings(tmp_path)
    assert row["examples"] == 1 + failure.examples == 1 + len(ids), (row["examples"], failure.examples, ids)
    # A rerun replays the saved finding and the database's examples (the same cases): none of them is logged again.
    again = run_campaign(kernel, strategy=strategy, max_examples=24, round_examples=12, corpus_dir=tmp_path,
                         device="cpu", seed=3, backward=False)
    rerun = logged()
    assert rerun[:len(ids)] == ids and len(rerun) == len(set(rerun)) and failure.case.case_id() not in rerun, rerun
    assert list_findings(tmp_path)[0]["examples"] == row["examples"] + sum(again.known_examples.values())


def test_a_leftover_folded_into_a_known_finding_is_not_said_to_be_kept(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): a "running" file left by a kill that failed on replay was noted "(kept as a
    finding)" while recovery had folded it into a finding already kept (its file gone, an example line instead)."""
    from jfa_verify import Case, Verifier
    from jfa_verify.fuzz.campaign import classifier, prepare_corpus
    from jfa_verify.fuzz.findings import list_findings
    from jfa_verify.run.corpus import Corpus

    # (a name of its own: a kernel name is registered once per process, and the next test registers its own)
    plugin = misbehaving_plugin("wrong_when_batched_folded", wrong="B >= 2")
    load_plugin(str(plugin))
    kernel = get_kernel("wrong_when_batched_folded")
    corpus = Corpus(tmp_path)
    known, left_running = (Case(kv_lengths=lengths, dtype="float32", head_dim=16) for lengths in ((2, 3), (2, 3, 1)))
    with Verifier(kernel, "cpu", corpus, RunSettings(backward=False)) as verifier:
        assert verifier.verify(known).status == "error"
        assert prepare_corpus(tmp_path, kernel, verifier, classifier(kernel, "cpu"))["new_findings"] == 1
        with corpus.guard(left_running, kernel.name, "cpu"):
            pass  # in flight at a kill -9
        (left,) = prepare_corpus(tmp_path, kernel, verifier, classifier(kernel, "cpu"))["leftovers"]
    assert left["status"] == "error" and left["kept"] == Path(left["path"]).exists()
    rows = list_findings(tmp_path)
    assert len(rows) == 1 and left["kept"] is False, (rows, left)
    from jfa_verify.fuzz.workers import leftover_note

    note = leftover_note(left)
    assert "kept as a finding" not in note and "folded into that finding's examples" in note, note


def test_recovery_after_a_kill_mid_shrink_keeps_one_unshrunk_finding_of_the_bug(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): kill -9 while a failure was shrinking left the round's steps and its
    in-flight step ("running"); the next campaign replayed that step without its round's marks, so recovery kept
    it beside the round's last step: two findings of one bug. The replay keeps the marks, the round collapses to
    one finding, marked unshrunk (matched on its failing outputs alone)."""
    from jfa_verify import Case, Verifier
    from jfa_verify.fuzz.campaign import classifier, prepare_corpus
    from jfa_verify.fuzz.findings import list_findings
    from jfa_verify.run.corpus import Corpus

    plugin = misbehaving_plugin("wrong_when_batched", wrong="B >= 2")
    load_plugin(str(plugin))
    kernel = get_kernel("wrong_when_batched")
    corpus = Corpus(tmp_path)
    steps = [Case(kv_lengths=lengths, dtype="float32", head_dim=16) for lengths in ((5, 6, 7), (2, 3), (1, 1))]
    with Verifier(kernel, "cpu", corpus, RunSettings(backward=False)) as verifier:
        for step, case in enumerate(steps[:2]):  # the drawn failure and a smaller shrink step, both failing
            assert verifier.verify(case, {"shrink_round": "r1-w0", "shrink_step": step}).status == "error"
        with corpus.guard(steps[2], kernel.name, "cpu", annotations={"shrink_round": "r1-w0", "shrink_step": 2}):
            pass  # the step in flight at the kill: left "running"
        done = prepare_corpus(tmp_path, kernel, verifier, classifier(kernel, "cpu"))
    assert done["new_findings"] == 1 and [left["status"] for left in done["leftovers"]] == ["error"], done
    (row,) = list_findings(tmp_path)
    payload = read_case_file(row["path"])[1]
    assert payload["finding"]["shrunk"] is False and read_case_file(row["path"])[0] == steps[2]


def test_a_finding_left_unshrunk_by_a_kill_is_shrunk_by_the_next_campaign(tmp_path, misbehaving_plugin):
    """Regression: kill -9 mid-shrink left a finding marked ``"shrunk": false`` (recovery's last step of the round),
    which matches on its key alone, so every later failure of the bug was folded in as one more example of it and
    it was never shrunk again: its incidental classes stayed in the listing for good. The next campaign replays it,
    then shrinks the first drawn failure of its kind, and the smaller case takes its place (the old case is logged
    as an example, its file removed only after the new one is the finding)."""
    from jfa_verify import Case
    from jfa_verify.fuzz.findings import list_findings, size_key

    plugin = misbehaving_plugin("wrong_when_batched_reshrunk", wrong="B >= 2")
    load_plugin(str(plugin))
    kernel = get_kernel("wrong_when_batched_reshrunk")
    strategy = cases(kernel, device_type="cpu", max_batch=4, max_len=12, dtypes=["float32"])
    corpus = tmp_path / "r"

    class Killed(BaseException):  # (past the campaign's handlers, as a kill -9: no end-of-round bookkeeping)
        pass

    shrink_steps = []

    def kill_mid_shrink(event):
        if event.get("event") == "case" and event.get("phase") == "shrink":
            shrink_steps.append(event)
            if len(shrink_steps) == 2:
                raise Killed

    with pytest.raises(Killed):
        run_campaign(kernel, strategy=strategy, max_examples=50, corpus_dir=str(corpus), device="cpu", seed=3,
                     backward=False, on_event=kill_mid_shrink)
    left = {c.case_id(): (c, d) for c, d in map(read_case_file, corpus.glob("*.json"))}
    assert left and all("finding" not in d and d.get("shrink_round") for _, d in left.values()), left  # killed round

    summary = run_campaign(kernel, strategy=strategy, max_examples=5, corpus_dir=str(corpus), device="cpu", seed=4,
                           backward=False)
    (row,) = list_findings(corpus)
    case, payload = read_case_file(row["path"])
    assert payload["finding"].get("shrunk", True) is True and "shrink_round" not in payload, payload["finding"]
    unshrunk = left[payload["shrunk_from"]][0]  # the round's last step, which recovery kept unshrunk
    assert (unshrunk.batch, unshrunk.num_heads_q) != (2, 1), unshrunk.describe()  # cut short before it was minimal
    assert case.batch == 2 and case.num_heads_q == 1 and size_key(case) < size_key(unshrunk), case.describe()
    assert not any(corpus.glob(f"{payload['shrunk_from']}-*.json"))  # its file gone, once the new one is the finding
    (failure,) = summary.failures
    assert failure.path == Path(row["path"]) and failure.source == "corpus"
    assert any(f"finding {payload['shrunk_from']} was unshrunk" in n and "shrunk again to" in n
               for n in summary.notes), summary.notes
    log = corpus / ".findings" / f"{payload['finding']['id']}.jsonl"
    logged = [Case.from_dict(json.loads(line)["case"]) for line in log.read_text().splitlines()]
    assert any(c.case_id() == payload["shrunk_from"] for c in logged)  # the unshrunk case, kept as an example
    # Replayed by the next campaign (its file rewritten with the new verdict), it stays the finding, and says so.
    run_campaign(kernel, strategy=strategy, max_examples=1, corpus_dir=str(corpus), device="cpu", seed=5,
                 backward=False)
    (again,) = list_findings(corpus)
    assert again["id"] == row["id"] and read_case_file(again["path"])[1]["shrunk_from"] == payload["shrunk_from"]


def test_an_unshrunk_finding_that_no_longer_fails_is_reported_fixed_not_dropped(jfa_kernel, jfa_device, tmp_path):
    """The replay before a shrink again: an unshrunk finding whose case now passes is reported fixed, its file kept
    in the now-passing folder, as any saved finding's (never shrunk to nothing or removed unsaid)."""
    from jfa_verify import Case
    from jfa_verify.fuzz.findings import mark_finding, signature
    from jfa_verify.run.corpus import NOW_PASSING, Corpus
    from jfa_verify.run.runner import CaseResult

    corpus = Corpus(tmp_path)
    case = Case(kv_lengths=(3, 2), dtype="float32", head_dim=16)
    result = CaseResult(case, jfa_kernel.name, "error", message="RuntimeError: planted failure")
    path = corpus.write(case, jfa_kernel.name, str(jfa_device), result)
    mark_finding(corpus, path, {**signature(result.to_dict(), {"self"}), "shrunk": False}, found_by="recovered")
    summary = run_campaign(jfa_kernel, strategy=cases(jfa_kernel, max_batch=1, max_len=3, dtypes=["float32"]),
                           max_examples=1, corpus_dir=tmp_path, device=jfa_device, backward=False)
    assert summary.fixed == [path] and not summary.failed
    assert not path.exists() and (tmp_path / NOW_PASSING / path.name).exists()
    assert not any("shrunk again" in n or "stays unshrunk" in n for n in summary.notes), summary.notes


def test_a_campaign_leaves_the_gates_rerun_and_memory_findings_to_the_gate(jfa_kernel, jfa_device, tmp_path):
    """Regression: a campaign replayed every finding of its folder once, without a memory mode, so a determinism
    finding of the gate (bits that differ between reruns) or a canary finding (a write past the end, seen only
    under guard bands) passed, and was reported fixed on every campaign. It replays only what one run can judge."""
    from jfa_verify import Case
    from jfa_verify.fuzz.campaign import saved_findings
    from jfa_verify.fuzz.findings import mark_finding, signature
    from jfa_verify.run.corpus import Corpus
    from jfa_verify.run.runner import CaseResult

    corpus = Corpus(tmp_path)
    paths = {}
    for name, extra in (("plain", {}), ("determinism", {"determinism": {"reruns": 3}}), ("memory", {"memory": "nan"})):
        case = Case(kv_lengths=(3 + len(paths),), dtype="float32", head_dim=16)
        result = CaseResult(case, jfa_kernel.name, "fail", message=f"a {name} finding")
        path = corpus.write(case, jfa_kernel.name, str(jfa_device), result)
        mark_finding(corpus, path, signature(result.to_dict(), {"self", name}), found_by="gate", **extra)
        paths[name] = path
    assert saved_findings(tmp_path, jfa_kernel.name) == [paths["plain"]]
    summary = run_campaign(jfa_kernel, max_examples=1, corpus_dir=tmp_path, device=jfa_device, backward=False)
    assert paths["determinism"] not in summary.fixed and paths["memory"] not in summary.fixed
    assert paths["determinism"].exists() and paths["memory"].exists()


_GRADIENT_BUG = '''
import torch
from jfa_verify import Capabilities, register_kernel


class _Scaled(torch.autograd.Function):
    """The identity forward; its gradient scaled: a planted backward bug."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor, None


def attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
    scale = q.shape[-1] ** -0.5 if sm_scale is None else sm_scale
    qo, ko, group = q_offsets.tolist(), k_offsets.tolist(), q.shape[1] // k.shape[1]
    q = _Scaled.apply(q, 1.5)  # dq is always wrong; dk only on a batch of two or more sequences
    k = _Scaled.apply(k, 1.5 if len(ko) > 2 else 1.0)
    o = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), device=q.device)
    for b in range(len(ko) - 1):
        rows, keys = slice(qo[b], qo[b + 1]), slice(ko[b], ko[b + 1])
        kb, vb = (t[keys].repeat_interleave(group, 1).float() for t in (k, v))
        s = torch.einsum("ihd,jhd->hij", q[rows].float(), kb) * scale
        i, j = torch.arange(s.shape[1], device=q.device)[:, None], torch.arange(s.shape[2], device=q.device)
        shift = 0 if causal_alignment == "top_left" else s.shape[2] - s.shape[1]
        visible = (j <= i + shift) if causal else torch.ones_like(j <= i)
        p = torch.softmax(s.masked_fill(~visible, -1e30), -1) * visible
        o[rows] = torch.einsum("hij,jhd->ihd", p, vb).to(q.dtype)
        lse[:, rows] = torch.logsumexp(s.masked_fill(~visible, float("-inf")), -1)
    return o, lse


@register_kernel("gradient_bug", capabilities=Capabilities(modes=("self",)))
def load():
    return attention
'''


def test_one_bug_failing_dq_on_some_inputs_and_dq_dk_on_others_is_one_finding(tmp_path):
    """Regression (a new user's trial): a finding was keyed by the set of its failing outputs, so one backward bug
    wrong in dq on a batch of one and in dq and dk on larger batches became two findings ({dq} and {dk, dq}), and
    its shrinking stopped at the first smaller case failing one output fewer. The key holds the first failing output
    in the order o, lse, dq, dk, dv: one finding, shrunk to the smallest case."""
    from jfa_verify import Case
    from jfa_verify.fuzz.findings import key_of, list_findings

    plugin = tmp_path / "gradient_bug.py"
    plugin.write_text(_GRADIENT_BUG)
    load_plugin(str(plugin))
    kernel = get_kernel("gradient_bug")
    strategy = cases(kernel, device_type="cpu", max_batch=4, max_len=12, dtypes=["float32"])
    summary = run_campaign(kernel, strategy=strategy, max_examples=30, round_examples=15,
                           corpus_dir=tmp_path / "r", device="cpu", seed=3)
    # (the property, whatever Hypothesis draws: both kinds of failure were met, and they are one finding)
    (finding,) = summary.failures
    assert finding.signature["outputs"] == ["dq"], finding.signature
    one, two = (run_case(Case(kv_lengths=lengths, dtype="float32", head_dim=16), kernel, "cpu", RunSettings())
                for lengths in ((3,), (3, 4)))
    assert {c.name for c in one.failing} == {"dq"} and {c.name for c in two.failing} == {"dq", "dk"}
    assert key_of(one.to_dict()) == key_of(two.to_dict())
    assert finding.case.batch == 1, finding.case.describe()  # shrinking followed {dq, dk} down to {dq}
    assert len(list_findings(tmp_path / "r")) == 1


def test_a_findings_kind_is_how_its_lead_output_fails():
    """Regression (a new user's trial): a finding listed ``non_finite`` beside output ``o`` where O failed by value
    and only LSE was non-finite; the kind now says how the lead output (the one listed) fails."""
    from jfa_verify.fuzz.findings import error_kind, key_of

    def verdict(**outputs):
        return {"status": "fail", "kernel": "k", "outputs": {
            name: {"passed": False, "problem": "nan" if bad == "nan" else None} for name, bad in outputs.items()}}

    o_by_value_lse_nan = verdict(o="value", lse="nan", dq="value")
    assert error_kind(o_by_value_lse_nan) == "numeric"
    assert key_of(o_by_value_lse_nan) == ("k", "fail", "numeric", ("o",))
    assert error_kind(verdict(lse="nan", dq="value")) == "non_finite"
    assert error_kind(verdict(o="nan", lse="value")) == "non_finite"


def test_a_failure_shown_only_per_sequence_is_keyed_by_the_output_it_fails():
    """Regression (a new user's trial): an MXFP8 bug seen only when a sequence is judged on its own rows was a finding
    of no output ("numeric -"), apart from the same bug's findings on cases where the whole output failed."""
    from jfa_verify.fuzz.findings import key_of
    from jfa_verify.judge.findings import part_finding, sequence_finding
    from jfa_verify.judge.packing import FailingOutput

    passing = {"o": {"passed": True}, "lse": {"passed": True}}
    alone = {"status": "fail", "kernel": "k", "outputs": passing,
             "findings": [sequence_finding(1, [FailingOutput("o", 0.3, 0.01, 0.001, False)]).to_dict()]}
    whole = {"status": "fail", "kernel": "k", "outputs": {"o": {"passed": False}, "lse": {"passed": True}}}
    assert key_of(alone) == key_of(whole) == ("k", "fail", "numeric", ("o",))
    packed = dict(alone, findings=[part_finding(0, ["dv", "lse"]).to_dict()])
    assert key_of(packed)[3] == ("lse",)
    assert key_of(dict(alone, findings=[]))[3] == ()  # nothing failing anywhere: no lead output


def test_a_runs_failing_cases_of_one_bug_are_listed_as_one_finding_with_its_examples(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): ``findings`` after a ``run`` listed one planted bug as 88 rows, one per failing
    case. A run's failures are grouped as a campaign groups examples: the smallest case is the row, the others its
    examples, their files named in ``cases``."""
    from jfa_verify import Case, Verifier
    from jfa_verify.fuzz.findings import list_findings

    plugin = misbehaving_plugin("wrong_when_batched_listed", wrong="B >= 2")
    load_plugin(str(plugin))
    kernel = get_kernel("wrong_when_batched_listed")
    failing = [(4, 4, 4), (2, 3), (2, 3, 1)]
    # (and cases of the same failure without the smallest case's input classes, here its strided layout: a run's
    # cases are not shrunk, so a new user's run still listed one bug as 35 rows)
    others = [Case(kv_lengths=(40, 3), dtype="float32", head_dim=16, causal=True, offsets_start=2),
              Case(kv_lengths=(2, 17, 9), dtype="float32", head_dim=16, num_heads_q=4, num_heads_kv=2,
                   offsets_start=1)]
    with Verifier(kernel, "cpu", tmp_path, RunSettings(backward=False)) as verifier:
        for case in (*(Case(kv_lengths=n, dtype="float32", head_dim=16, layout="strided") for n in (*failing, (5,))),
                     *others):
            verifier.verify(case)
    (row,) = list_findings(tmp_path)
    assert row["examples"] == 5 and row["status"] == "error", row
    assert row["case"] == Case(kv_lengths=(2, 3), dtype="float32", head_dim=16, layout="strided").describe()
    assert len(row["cases"]) == 4 and all(Path(p).is_file() for p in row["cases"]) and row["path"] not in row["cases"]


def test_a_case_still_running_when_the_duration_ends_is_stopped_not_waited_for(tmp_path, misbehaving_plugin,
                                                                             monkeypatch):
    """Regression (a new user's trial): `fuzz --duration 10` on a kernel that hangs ran 130 s, its first case
    waiting out the whole --timeout (120 s) past the campaign's end; a stop sent to the campaign waited as long. A case
    still running STOP_GRACE_S after the end is stopped without a verdict, named with its replay command."""
    from jfa_verify.fuzz import campaign as campaign_module

    monkeypatch.setattr(campaign_module, "STOP_GRACE_S", 1.0)
    plugin = misbehaving_plugin("hangs_always", hang="True")
    load_plugin(plugin)

    def running() -> bool:  # (a loaded machine started the worker after a 3-second duration had ended: no case ran)
        for path in tmp_path.glob("*.json"):
            try:
                if '"running"' in path.read_text():
                    return True
            except OSError:  # (replaced meanwhile)
                pass
        return False

    t0 = time.monotonic()
    summary = run_campaign("hangs_always", strategy=cases(max_batch=1, max_len=4, dtypes=["float32"]),
                           max_examples=None, duration_s=3, corpus_dir=tmp_path, device="cpu", timeout_s=120,
                           backward=False, isolate=True, plugins=[str(plugin)], should_stop=running)
    assert time.monotonic() - t0 < 60  # not the 120 s timeout
    assert not summary.interrupted and summary.cases_run == 0 and not summary.failed  # no verdict, no finding
    (note,) = [n for n in summary.notes if "stopped without a verdict" in n]
    assert "jfa-verify replay --case '" in note and "--kernel hangs_always" in note
    assert not list(tmp_path.glob("*.json"))  # no "running" file left to read as a crash


def test_a_finding_whose_file_another_worker_removed_is_kept_not_a_dead_worker(tmp_path, misbehaving_plugin,
                                                                                monkeypatch):
    """Regression (a new user's trial, 2026-12-07): two workers drew one case (one file name); the other one took it
    as an example of its finding and removed the file just before this one marked it as a new finding, and the worker
    died of ``FileNotFoundError`` in ``Corpus.update`` (half the campaign's workers lost). The file is written again
    from the verdict and marked; the campaign goes on."""
    import jfa_verify.fuzz.campaign as campaign_module

    plugin = misbehaving_plugin("wrong_on_two_or_more", wrong="B >= 2")
    load_plugin(str(plugin))
    kernel = get_kernel("wrong_on_two_or_more")
    real, removed = campaign_module.mark_finding, []

    def the_other_worker_removes_it_first(corpus, path, sig, **extra):
        if not removed:
            path.unlink()
            removed.append(path)
        return real(corpus, path, sig, **extra)

    monkeypatch.setattr(campaign_module, "mark_finding", the_other_worker_removes_it_first)
    strategy = cases(kernel, device_type="cpu", max_batch=4, max_len=12, dtypes=["float32"])
    summary = run_campaign(kernel, strategy=strategy, max_examples=12, corpus_dir=tmp_path, device="cpu", seed=3,
                           backward=False)
    assert removed and summary.failures, summary
    for failure in summary.failures:
        _, payload = read_case_file(failure.path)
        assert payload["finding"]["id"] == failure.signature["id"] and payload["status"] == failure.status, payload


def test_shrinking_again_does_not_slide_an_unshrunk_finding_onto_another_bug(tmp_path, misbehaving_plugin):
    """Regression (a new user's trial): an unshrunk finding is shrunk again from the first drawn failure of its kind
    (status, error kind, lead output), and the smaller case took its place. On a kernel with two bugs of one symptom
    the drawn failure was the other bug's: the finding's bug was left an example line of it, no finding of its own.
    Here a cross-attention bug's unshrunk finding meets a campaign that draws self-attention only, whose failures
    are a GQA bug's: both findings stay."""
    from jfa_verify import Case, Verifier
    from jfa_verify.fuzz.campaign import classifier
    from jfa_verify.fuzz.findings import list_findings, mark_finding, signature
    from jfa_verify.run.corpus import Corpus

    plugin = misbehaving_plugin("two_bugs_one_symptom", wrong="(q_offsets is not None and not torch.equal(q_offsets, "
                                "k_offsets)) or 1 < k.shape[1] < q.shape[1]")
    load_plugin(str(plugin))
    kernel = get_kernel("two_bugs_one_symptom")
    corpus_dir = tmp_path / "r"
    cross = Case(kv_lengths=(5, 7, 3), q_lengths=(4, 9, 3), mode="cross", dtype="float32", head_dim=16,
                 num_heads_q=2, num_heads_kv=2)
    with Verifier(kernel, "cpu", Corpus(corpus_dir), RunSettings(backward=False)) as verifier:
        result = verifier.verify(cross)
    assert result.status == "error", result.message
    sig = {**signature(result.to_dict(), classifier(kernel, "cpu")(cross)), "shrunk": False}
    mark_finding(Corpus(corpus_dir), Path(result.reproducer), sig)
    old = Path(result.reproducer).name.split("-", 1)[0]

    strategy = cases(kernel, device_type="cpu", modes=["self"], max_batch=3, max_len=12, dtypes=["float32"])
    summary = run_campaign(kernel, strategy=strategy, max_examples=40, corpus_dir=str(corpus_dir), device="cpu",
                           seed=2, backward=False)
    rows = {row["id"]: read_case_file(row["path"])[0] for row in list_findings(corpus_dir)}
    assert old in rows and rows[old] == cross, (old, sorted(rows))  # the cross bug's finding, still its own
    gqa = [c for c in rows.values() if c.mode == "self" and 1 < c.num_heads_kv < c.num_heads_q]
    assert gqa, {k: c.describe() for k, c in rows.items()}  # the GQA bug's, beside it
    assert any(f"finding {old} was unshrunk" in n and "both are kept" in n for n in summary.notes), summary.notes
    new = [f for f in summary.failures if f.path is not None and f.path.name.split("-", 1)[0] in rows
           and f.path.name.split("-", 1)[0] != old]
    assert new and all(f.source == "search" for f in new), [(f.path, f.source) for f in summary.failures]  # NEW here


_THREE_BUGS = '''
from jfa_verify import Capabilities, register_kernel
from jfa_verify.core.contract import validate_inputs
from jfa_verify.oracles import reference_attention


@register_kernel("three_bugs_shared_db", capabilities=Capabilities(backward=False))
def load():
    def forward(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale)
        if len(k_offsets) > 3:
            raise RuntimeError("planted bug: a batch of three or more sequences")
        if causal:
            raise ValueError("planted bug: a causal mask")
        if q.shape[1] >= 2:
            raise KeyError("planted bug: two or more query heads")
        ref = reference_attention(problem, q, k, v)
        return ref["o"].to(q.dtype), ref["lse"].float()
    return forward
'''


def _shared_database_left_unshrunk(tmp_path):
    """``(kernel, strategy, database)`` after campaign A (reproducers in ``tmp_path / "a"``, no time to shrink) left
    each of the three bugs' failures unshrunk in the shared database folder."""
    plugin = tmp_path / "three_bugs_shared_db.py"
    plugin.write_text(_THREE_BUGS)
    load_plugin(str(plugin))
    kernel = get_kernel("three_bugs_shared_db")
    strategy = cases(kernel, device_type="cpu", max_batch=4, max_len=12, dtypes=["float32"])
    database = str(tmp_path / "shared-db")
    a = run_campaign(kernel, strategy=strategy, max_examples=60, corpus_dir=tmp_path / "a", database=database,
                     device="cpu", seed=1, backward=False, shrink_seconds=0)
    assert {f.signature["error_kind"] for f in a.failures} == {"RuntimeError", "ValueError", "KeyError"}
    assert all(f.signature.get("shrunk") is False for f in a.failures)  # what A left in the database: unshrunk
    return kernel, strategy, database


def test_failures_another_campaign_saved_in_a_shared_database_are_shrunk_not_new_findings_each(tmp_path):
    """Regression (a new user's trial): campaigns A and B shared one database folder, each with its own reproducer
    folder. B replayed A's saved failures (some cut short by A's --shrink-seconds, so never shrunk) and filed each
    as found, unshrunk and marked shrunk: Hypothesis does not shrink a saved example that fails as saved, and each
    such case's incidental classes were required of every later failure of its bug (three bugs, seven findings). B
    now shrinks them as its own draws: one shrunk finding a bug."""
    from jfa_verify.fuzz.findings import list_findings

    kernel, strategy, database = _shared_database_left_unshrunk(tmp_path)

    b = run_campaign(kernel, strategy=strategy, max_examples=20, corpus_dir=tmp_path / "b", database=database,
                     device="cpu", seed=2, backward=False)
    rows = list_findings(tmp_path / "b")
    found = {row["id"]: read_case_file(row["path"]) for row in rows}
    kinds = sorted(payload["finding"]["error_kind"] for _, payload in found.values())
    assert kinds == ["KeyError", "RuntimeError", "ValueError"], {k: c.describe() for k, (c, _) in found.items()}
    assert all(payload["finding"].get("shrunk", True) for _, payload in found.values())
    by_kind = {payload["finding"]["error_kind"]: case for case, payload in found.values()}
    assert by_kind["RuntimeError"].batch == 3 and by_kind["RuntimeError"].num_heads_q == 1
    assert by_kind["ValueError"].causal and by_kind["ValueError"].batch <= 1 and by_kind["ValueError"].num_heads_q == 1
    assert by_kind["KeyError"].num_heads_q == 2 and by_kind["KeyError"].batch <= 1 and not by_kind["KeyError"].causal
    # the summary says so: three findings, new in B's folder, each shrunk
    assert sorted(f.id for f in b.failures if f.source == "search") == sorted(found)
    assert all(f.signature.get("shrunk", True) for f in b.failures)


def test_a_set_aside_failure_the_shrinking_replay_cannot_serve_is_filed_as_before(tmp_path, monkeypatch):
    """The set-aside failure of the test above is filed by the replay that shrinks it; where that replay gets nothing
    from the database view (a Hypothesis that reads its secondary examples under another key, say), the failure B
    replayed from the database is still filed in B's folder, as before the view existed, not lost (it was, when the
    set-aside case's file was removed up front: B's one-draw campaign then filed nothing)."""
    from jfa_verify.fuzz import database as db_module
    from jfa_verify.fuzz.findings import list_findings

    kernel, strategy, database = _shared_database_left_unshrunk(tmp_path)
    monkeypatch.setattr(db_module.SavedAsSecondary, "fetch", lambda self, key: iter(()))
    summary = run_campaign(kernel, strategy=strategy, max_examples=1, corpus_dir=tmp_path / "b", database=database,
                           device="cpu", seed=2, backward=False)  # (one draw: the saved failures are what B files)
    kinds = {read_case_file(row["path"])[1]["finding"]["error_kind"] for row in list_findings(tmp_path / "b")}
    assert summary.generated == 1 and kinds and kinds <= {"KeyError", "RuntimeError", "ValueError"}, kinds


def test_findings_folds_a_killed_campaigns_leftover_into_the_finding_of_its_signature(tmp_path, misbehaving_plugin):
    """Regression (helper-73's trial): a campaign killed with -9 mid-run left, beside a finding, a failing case file
    of the very same signature that was no finding yet; `jfa-verify findings` listed it as a second row, one bug read
    as two findings (the next campaign's recovery then removed it as a duplicate). The listing counts such a file as
    an example of the finding it matches, as the recovery does, and names its file in the row's ``cases``."""
    from jfa_verify import Case, Verifier
    from jfa_verify.fuzz.campaign import classifier
    from jfa_verify.fuzz.findings import list_findings, mark_finding, signature
    from jfa_verify.run.corpus import Corpus

    load_plugin(str(misbehaving_plugin("leftover_of_a_finding", wrong="B > 1")))
    kernel = get_kernel("leftover_of_a_finding")
    corpus_dir = tmp_path / "r"
    paths = []
    for seed in (1, 2):  # one bug, two cases of the same classes: one signature
        case = Case(kv_lengths=(5, 7), dtype="float32", head_dim=16, num_heads_q=2, num_heads_kv=2, seed=seed)
        with Verifier(kernel, "cpu", Corpus(corpus_dir), RunSettings(backward=False)) as verifier:
            result = verifier.verify(case)
        assert result.status == "error", result.message
        paths.append(Path(result.reproducer))
        if seed == 1:  # the campaign's finding; the second file is the leftover a kill left unmarked
            mark_finding(Corpus(corpus_dir), paths[0], signature(result.to_dict(), classifier(kernel, "cpu")(case)))
    rows = list_findings(corpus_dir)
    assert len(rows) == 1, [(r["id"], r["signature"], r["path"]) for r in rows]
    assert rows[0]["path"] == str(paths[0]) and rows[0]["cases"] == [str(paths[1])], rows[0]
    assert rows[0]["examples"] == 2, rows[0]
