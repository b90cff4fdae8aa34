"""Two workers verifying one case at once in one reproducer folder (``fuzz --isolate --workers 2``: both draw the
same first case). Every interleaving of their guard and record/discard is forced here, deterministically: two
:class:`Corpus` objects stand for the two worker processes.

The rule: a case file is removed exactly when a pass is its verdict; a failing verdict of either worker is never
lost; when neither gives a verdict the file that stood there before is put back (none: none is left behind).
"""

import contextlib
import itertools
import json
import multiprocessing

import pytest

from jfa_verify.cases.case import Case
from jfa_verify.run.corpus import Corpus
from jfa_verify.run.runner import CaseResult

CASE = Case(kv_lengths=(3, 5))
KERNEL = "k"
OUTCOMES = ("pass", "fail", "discard")
# the orders of the two workers' steps: (worker, "start") before (worker, "end")
ORDERS = [order for order in itertools.permutations([("a", "start"), ("a", "end"), ("b", "start"), ("b", "end")])
          if order.index(("a", "start")) < order.index(("a", "end"))
          and order.index(("b", "start")) < order.index(("b", "end"))]


def _result(outcome: str) -> CaseResult:
    return CaseResult(CASE, KERNEL, "error" if outcome == "fail" else "pass", message="boom")


def _saved_finding(folder) -> str:
    """A finding's case file written by an earlier campaign (what a replay or a new draw of its case meets)."""
    corpus = Corpus(folder)
    path = corpus.write(CASE, KERNEL, "cpu", _result("fail"))
    corpus.update(path, finding={"id": "f1"}, found_by="search (worker 0)")
    return path.read_text()


def _apply(outcome: str, earlier):
    """The fate of a case file holding ``earlier`` (text or None) after one run: (file text or None, the
    text moved to now-passing or None); a verdict is represented by the string "verdict"."""
    if outcome == "fail":
        return "verdict", None
    if outcome == "pass":
        moved = earlier if earlier == "verdict" or earlier is not None and '"status": "error"' in earlier else None
        return None, moved
    return earlier, None


def _expected(order, outcomes, earlier):
    first = order[0][0]
    overlapping = order[1][1] == "start"
    if not overlapping:  # one after the other: the second meets what the first left
        second = "b" if first == "a" else "a"
        after, moved1 = _apply(outcomes[first], earlier)
        after_text = after if after != "verdict" else "verdict"
        final, moved2 = _apply(outcomes[second], after_text)
        return final, [m for m in (moved1, moved2) if m is not None]
    if "fail" in outcomes.values():
        return "verdict", []
    if "pass" in outcomes.values():
        final, moved = _apply("pass", earlier)
        return final, [moved] if moved is not None else []
    return earlier, []


@pytest.mark.parametrize("earlier_finding", [False, True], ids=["new-case", "saved-finding"])
@pytest.mark.parametrize("outcomes", list(itertools.product(OUTCOMES, repeat=2)), ids="-".join)
@pytest.mark.parametrize("order", ORDERS, ids=lambda o: "".join(w + s[0] for w, s in o))
def test_two_workers_on_one_case_leave_its_file_exactly_as_their_verdicts_say(tmp_path, order, outcomes,
                                                                              earlier_finding):
    outcomes = dict(zip("ab", outcomes))
    earlier = _saved_finding(tmp_path) if earlier_finding else None
    workers = {w: Corpus(tmp_path) for w in "ab"}
    guards, paths = {}, {}
    with contextlib.ExitStack() as stack:
        for worker, step in order:
            corpus = workers[worker]
            if step == "start":
                guards[worker] = corpus.guard(CASE, KERNEL, "cpu")
                paths[worker] = stack.enter_context(guards[worker])
                assert json.loads(paths[worker].read_text())["status"] == "running"
            elif outcomes[worker] == "discard":
                corpus.discard(paths[worker])
            else:
                corpus.record(paths[worker], _result(outcomes[worker]))
    path = Corpus(tmp_path).path_for(CASE, KERNEL)
    final, moved = _expected(order, outcomes, earlier)
    if final is None:
        assert not path.exists(), json.loads(path.read_text())  # no case file left behind
    elif final == "verdict":
        payload = json.loads(path.read_text())  # the finding is not lost
        assert payload["status"] == "error" and payload["verdict"]["status"] == "error"
        assert not {"holders", "earlier", "passed"} & set(payload)
        sequential = order[1][1] == "end"
        if earlier_finding and not (sequential and outcomes[order[0][0]] == "pass"):  # what marks it is kept
            assert payload["finding"] == {"id": "f1"}
    else:
        assert path.read_text() == final  # the saved finding is put back as it was
    now_passing = sorted(tmp_path.joinpath("now-passing").glob("*.json"))
    assert len(now_passing) == len(moved)
    if moved and moved[0] != "verdict":
        assert now_passing[0].read_text() == moved[0]
    others = {p.name for p in tmp_path.iterdir()} - {path.name, "now-passing"}
    assert not others, others  # no temporary file either


def test_the_race_a_second_workers_interrupt_put_back_the_first_workers_running_file(tmp_path):
    """The interleaving seen in ``fuzz --isolate --workers 2``: worker b starts the case worker a is running, a
    passes, then b is interrupted (Ctrl-C): b put back a's "running" file, which the next campaign replayed."""
    a, b = Corpus(tmp_path), Corpus(tmp_path)
    with a.guard(CASE, KERNEL, "cpu") as path, b.guard(CASE, KERNEL, "cpu"):
        a.record(path, _result("pass"))
        b.discard(path)
    assert list(tmp_path.iterdir()) == []


def test_a_pass_by_one_worker_never_removes_the_failing_verdict_of_the_other(tmp_path):
    a, b = Corpus(tmp_path), Corpus(tmp_path)
    with a.guard(CASE, KERNEL, "cpu") as path, b.guard(CASE, KERNEL, "cpu"):
        assert a.record(path, _result("fail")) == path
        assert b.record(path, _result("pass")) is None
    assert json.loads(path.read_text())["status"] == "error"


def _verify_in_another_process(folder, started, go, done):
    corpus = Corpus(folder)
    with corpus.guard(CASE, KERNEL, "cpu") as path:
        started.set()
        go.wait(60)
        corpus.record(path, _result("pass"))
    done.set()


def test_a_killed_workers_running_file_is_a_leftover_and_a_live_ones_is_not(tmp_path):
    """Another process's guard in flight is joined (its "running" file is not put back by a discard here); once it
    has passed and ended, nothing is left."""
    ctx = multiprocessing.get_context("spawn")
    started, go, done = ctx.Event(), ctx.Event(), ctx.Event()
    other = ctx.Process(target=_verify_in_another_process, args=(str(tmp_path), started, go, done))
    other.start()
    try:
        assert started.wait(120)
        here = Corpus(tmp_path)
        with here.guard(CASE, KERNEL, "cpu") as path:
            holders = json.loads(path.read_text())["holders"]
            assert [h[0] for h in holders] == [other.pid, multiprocessing.current_process().pid]
            assert json.loads(path.read_text())["earlier"] is None  # the other's file is not one to put back
            go.set()
            assert done.wait(120)
            here.discard(path)
    finally:
        go.set()
        other.join(60)
    assert list(tmp_path.iterdir()) == []


def test_a_pass_leaves_an_unreadable_file_of_the_same_name_as_it_was(tmp_path):
    """Regression (fresh-user trial, 2026-12-05): a campaign replaying its database met a truncated case file, said
    it would leave it as it is, then ran the case the file's name says, saw it pass and deleted the file (exit 0).
    A pass is no verdict on bytes nobody can read: they stay, byte for byte, and a failing verdict still lands."""
    corpus = Corpus(tmp_path)
    path = corpus.path_for(CASE, KERNEL)
    truncated = _saved_finding(tmp_path)[:200]
    path.write_text(truncated)
    with corpus.guard(CASE, KERNEL, "cpu") as guarded:
        assert corpus.record(guarded, _result("pass")) is None
    assert path.read_text() == truncated and not (tmp_path / "now-passing").exists()
    with corpus.guard(CASE, KERNEL, "cpu") as guarded:
        corpus.record(guarded, _result("fail"))
    assert json.loads(path.read_text())["status"] == "error"
