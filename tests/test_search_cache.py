"""The length search's answers and whole covering arrays kept on disk (``jfa_verify/cases/search_cache.py``): the same
answers, from the file."""

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
    monkeypatch.setattr(search_cache, "code_version", lambda *packages: "other-code")
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


# ----------------------------------------------------------------------------- whole covering arrays


@pytest.fixture
def covering(tmp_path, monkeypatch):
    """``(build, searches)``: ``build()`` is a covering array of the contract's own target on the CPU read through a
    fresh cache in ``tmp_path`` (as a new process reads it), ``searches`` counts the searches it made."""
    from jfa_verify.cases import pairs
    from jfa_verify.cases.dimensions import Target

    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path))
    real, searches = pairs._search_covering_array, []

    def counted(*args):
        searches.append(args)
        return real(*args)

    monkeypatch.setattr(pairs, "_search_covering_array", counted)

    def build(target=None, seed=0):
        monkeypatch.setattr(pairs, "_COVERING", SearchCache("covering", version=pairs._COVERING._version))
        return pairs.covering_array(target or Target(None, "cpu"), seed=seed)

    return build, searches


def test_a_covering_array_comes_back_from_the_file_unsearched_and_the_same(covering, tmp_path, monkeypatch):
    from jfa_verify.cases import pairs
    from jfa_verify.cases.dimensions import Target

    build, searches = covering
    first = build()
    assert len(searches) == 1 and len(first) > 20 and first[0].name.startswith(pairs.ROW_PREFIX)
    assert [p.name for p in tmp_path.glob("covering-*.json")], list(tmp_path.iterdir())
    assert build() == first and len(searches) == 1  # read, not searched: every field of every case the same
    monkeypatch.setenv("JFA_VERIFY_CACHE", "off")
    assert pairs.covering_array(Target(None, "cpu")) == first  # the search's own answer
    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path))
    build(seed=1)  # another seed, another key
    build(Target(None, "cpu", num_sms=7))  # other SMs
    assert len(searches) == 3


def test_a_kernel_whose_tiles_changed_gets_its_covering_array_searched_again(covering, monkeypatch):
    # a kernel's tile_sizes is its own code, outside the digest that names the file: its answers are in the key
    from jfa_verify.cases import dimensions
    from jfa_verify.protocol.kernel import TileSizes

    build, searches = covering
    build()
    real = dimensions.tiles_for_shape

    def tiles(kernel, head_dim, head_dim_v=None, dtype=None, device_type="cpu"):
        return TileSizes(32, 64) if head_dim == 96 else real(kernel, head_dim, head_dim_v, dtype, device_type)

    monkeypatch.setattr(dimensions, "tiles_for_shape", tiles)
    build()
    assert len(searches) == 2


@pytest.mark.parametrize("damage", ["digest", "row", "not-a-dict", "row 00 lost", "a row twice", "nested", "a pipe"])
def test_a_damaged_covering_array_is_searched_again_and_rewritten(covering, tmp_path, damage):
    # (a new user's file of arrays nested 200,000 deep ended every run in a RecursionError; a pipe there held it)
    build, searches = covering
    first = build()
    (path,) = tmp_path.glob("covering-*.json")
    stored = json.loads(path.read_text())
    for key, entry in [(k, e) for k, e in stored.items() if not k.startswith("universe:")]:
        if damage == "digest":  # a row changed: its digest no longer matches
            entry["cases"][0]["head_dim"] += 1
        elif damage == "row":  # a row the contract refuses, under a digest that matches it
            entry["cases"][0]["kv_lengths"] = [-3]
        elif damage == "row 00 lost":  # (a suite silently smaller, under a digest made again)
            entry["cases"] = [r for r in entry["cases"] if not r["name"].startswith("pairs/00/")]
        elif damage == "a row twice":
            entry["cases"][1] = entry["cases"][0]
        else:
            stored[key] = [1, 2]
        if damage in ("row", "row 00 lost", "a row twice"):
            entry["sha256"] = _digest(entry["cases"])
    if damage == "nested":
        path.write_text("[" * 200000 + "]" * 200000)
    elif damage == "a pipe":
        path.unlink()
        os.mkfifo(path)
    else:
        path.write_text(json.dumps(stored))
    assert build() == first and len(searches) == 2
    assert build() == first and len(searches) == 2  # the rewritten entry is read


def _digest(rows):
    from jfa_verify.cases.pairs import _digest

    return _digest(rows)


@pytest.mark.parametrize("damage", [None, "digest", "a pair", "not-a-dict"])
def test_a_universe_comes_back_from_the_file_the_same_and_a_damaged_one_is_classified_again(tmp_path, monkeypatch,
                                                                                             damage):
    # the pair coverage of every run needs the universe (2.5 s on this CPU after a cached covering array)
    from jfa_verify.cases import pairs
    from jfa_verify.cases.dimensions import Target

    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path))
    real, made = pairs._universe, []
    monkeypatch.setattr(pairs, "_universe", lambda target: made.append(target) or real(target))

    def fresh():  # (as a new process: nothing in memory)
        monkeypatch.setattr(pairs, "_UNIVERSES", {})
        monkeypatch.setattr(pairs, "_COVERING", SearchCache("covering", version=pairs._COVERING._version))
        return pairs.universe(Target(None, "cpu"))

    first = fresh()
    (path,) = tmp_path.glob("covering-*.json")
    stored = json.loads(path.read_text())
    (key,) = [k for k in stored if k.startswith("universe:")]
    if damage == "digest":
        stored[key]["supported"] = stored[key]["supported"][1:]
    elif damage == "a pair":
        stored[key]["supported"][0] = [1, 2, 3, 4]
        stored[key]["sha256"] = _digest({k: v for k, v in stored[key].items() if k != "sha256"})
    elif damage == "not-a-dict":
        stored[key] = "universe"
    path.write_text(json.dumps(stored))
    again = fresh()
    assert len(made) == (1 if damage is None else 2)
    assert (again.classes, again.supported, again.infeasible, again.unsupported, again.not_on_device) == \
        (first.classes, first.supported, first.infeasible, first.unsupported, first.not_on_device)
    assert list(again.classes) == list(first.classes) and len(first.supported) > 100


def test_a_cache_of_its_own_version_keeps_its_newest_answers_and_lookup_put_read_and_replace(tmp_path, monkeypatch):
    # (the precompile step's traces: ~1 MB an answer, of a version of their own)
    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path))
    cache = SearchCache("traces", version=lambda: "v1", keep=2)
    assert cache.lookup("a") is None and cache.lookup("a", "none") == "none"
    for key in ("a", "b", "c"):
        cache.put(key, key.upper())
    cache.save()
    assert [p.name for p in tmp_path.iterdir()] == ["traces-v1.json"]
    assert json.loads((tmp_path / "traces-v1.json").read_text()) == {"b": "B", "c": "C"}  # the oldest dropped
    again = SearchCache("traces", version=lambda: "v1", keep=2)
    assert again.lookup("b") == "B" and again.lookup("a") is None
    again.put("b", "B2")  # replaced, and now the newest: "c" goes first
    again.put("d", "D")
    again.save()
    assert json.loads((tmp_path / "traces-v1.json").read_text()) == {"b": "B2", "d": "D"}
    assert SearchCache("traces", version=lambda: "v2").lookup("b") is None


def test_a_saved_cache_is_not_held_until_the_exit(tmp_path, monkeypatch):
    # (each precompile step reads the trace file, up to ~16 MB, into a cache of its own: a gate runs one per kernel)
    import gc
    import weakref

    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path))
    cache = SearchCache("traces", version=lambda: "v1")
    cache.put("a", 1)
    held = weakref.ref(cache)
    cache.save()
    del cache
    gc.collect()
    assert held() is None
    assert SearchCache("traces", version=lambda: "v1").lookup("a") == 1


def test_the_universe_needs_no_allpairspy_though_its_cache_key_sits_beside_the_covering_arrays(tmp_path, monkeypatch):
    """Regression (H100 tests stage, 2026-12-06): the universe's cache key imported allpairspy for its version, so a
    campaign without --covering (which draws no covering array) failed where allpairspy is missing, as the gate's
    missing-dependency test found on a GPU; only a covering array's key names that version."""
    from jfa_verify.cases import pairs
    from jfa_verify.cases.dimensions import Target

    monkeypatch.setenv("JFA_VERIFY_CACHE", str(tmp_path))
    monkeypatch.setattr(pairs, "_UNIVERSES", {})
    monkeypatch.setattr(pairs, "_COVERING", SearchCache("covering", version=pairs._COVERING._version))
    monkeypatch.setitem(sys.modules, "allpairspy", None)  # `import allpairspy` raises ModuleNotFoundError
    assert len(pairs.universe(Target(None, "cpu")).supported) > 100
    with pytest.raises(ModuleNotFoundError):
        pairs.covering_array(Target(None, "cpu"))
