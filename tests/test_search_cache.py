"""The length search's answers kept on disk (``jfa_verify/cases/search_cache.py``): the same answers, from the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jfa_verify.cases import search_cache
from jfa_verify.cases.search_cache import SearchCache

ROOT = Path(__file__).resolve().parents[1]
WANT = (("batch", "over_sms"), ("mode", "cross"), ("relation", "shorter"))

_ASK = """
import json, sys
from jfa_verify.cases import construct
if sys.argv[1] == "no-search":  # a search now would fail the answer: it must come from the file
    construct._search_lengths = lambda *a: (_ for _ in ()).throw(AssertionError("searched"))
want = (("batch", "over_sms"), ("mode", "cross"), ("relation", "shorter"))
print("ANSWER" + json.dumps(construct.lengths_for(want, 64, 64, 132, 3)))
"""


def _ask(folder, mode: str) -> list:
    env = {**os.environ, "JFA_VERIFY_CACHE": str(folder)}
    run = subprocess.run([sys.executable, "-c", _ASK, mode], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(next(x for x in run.stdout.splitlines() if x.startswith("ANSWER"))[len("ANSWER"):])


def test_a_second_process_reads_the_first_ones_answer_and_searches_nothing(tmp_path):
    first = _ask(tmp_path, "search")
    files = list(tmp_path.glob("lengths-*.json"))
    assert len(files) == 1 and search_cache.code_version() in files[0].name, files
    assert first is not None and first[0] == "cross" and len(first[2]) > 132, first  # over the 132 SMs
    assert _ask(tmp_path, "no-search") == first
    from jfa_verify.cases.construct import _search_lengths

    mode, q, k = _search_lengths(WANT, 64, 64, 132, 3)  # the answer is the search's own
    assert first == [mode, list(q), list(k)]


def test_an_answer_of_another_code_version_is_never_read(tmp_path, monkeypatch):
    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path))
    cache = SearchCache("lengths")
    assert cache.get("k", lambda: "made by this code") == "made by this code"
    cache.save()
    assert SearchCache("lengths").get("k", lambda: "computed") == "made by this code"
    monkeypatch.setattr(search_cache, "code_version", lambda: "other-code")
    assert SearchCache("lengths").get("k", lambda: "computed") == "computed"


def test_off_writes_nothing_and_an_unwritable_folder_costs_nothing_but_time(tmp_path, monkeypatch):
    monkeypatch.setenv("JFA_VERIFY_CACHE", "off")
    assert search_cache.cache_folder() is None
    cache = SearchCache("lengths")
    assert cache.get("k", lambda: 1) == 1
    cache.save()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("JFA_VERIFY_CACHE", str(blocker / "cache"))
    cache = SearchCache("lengths")
    assert cache.get("k", lambda: 2) == 2
    cache.save()  # (no exception, and nothing left beside the file)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_two_processes_saving_at_once_keep_both_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path))
    a, b = SearchCache("lengths"), SearchCache("lengths")
    a.get("a", lambda: 1)
    b.get("b", lambda: 2)  # (b loaded the file before a saved)
    a.save()
    b.save()
    (path,) = tmp_path.glob("lengths-*.json")
    assert json.loads(path.read_text()) == {"a": 1, "b": 2}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask  # readable by the other users of a shared folder


@pytest.mark.parametrize("damage", [5, None, ["self", [-5, 3], [-5, 3]], ["cross", [1], [2]]])
def test_a_damaged_entry_is_searched_again(tmp_path, damage):
    # a new user's file of nulls made the suite 31 cases instead of 190, silently; negative lengths failed every run;
    # lengths of the wrong classes would have built another suite
    first = _ask(tmp_path, "search")
    (path,) = tmp_path.glob("lengths-*.json")
    answers = json.loads(path.read_text())
    path.write_text(json.dumps({key: damage for key in answers}))
    assert _ask(tmp_path, "search") == first
