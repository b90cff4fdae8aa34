"""The checked-in corpus as regression tests: every case file in tests/corpus/ must pass on --jfa-kernel.

Each file is a reproducer a campaign wrote (against a planted-bug kernel, recorded
under ``found_by``), re-targeted at ``triton_jfa``; file names say the symptom.
Add one with ``jfa-verify replay FILE`` checks, then copy it here. A reproducer found on a
planted bug of the packaged catalogue must also still fail on that bug (else it lost its power).
"""

from pathlib import Path

import pytest

from jfa_verify import run_case
from jfa_verify.run.corpus import read_case_file
from jfa_verify.run.settings import RunSettings

CORPUS = Path(__file__).with_name("corpus")
FILES = sorted(CORPUS.glob("*.json"))


def test_corpus_is_not_empty():
    assert len(FILES) >= 2


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_corpus_case_passes(path, jfa_kernel, jfa_device):
    case, payload = read_case_file(path)
    assert payload["kernel"] == "triton_jfa" and "found_by" in payload
    result = run_case(case, jfa_kernel, jfa_device)
    assert not result.failed, result.explain()


def test_jfa_corpus_fixture_keeps_failures_only(jfa_corpus, jfa_kernel, jfa_device):
    case, _ = read_case_file(FILES[0])
    with jfa_corpus.guard(case, jfa_kernel.name, str(jfa_device)) as path:
        assert path.is_file()  # written before the kernel runs
        kept = jfa_corpus.record(path, run_case(case, jfa_kernel, jfa_device, RunSettings(backward=False)))
    assert kept is None and not path.exists()


def test_replay_commands_work_pasted_in_any_folder_and_name_the_plugin_of_the_kernel(tmp_path, monkeypatch,
                                                                                     misbehaving_plugin):
    # a new user's trial: a replay command printed with relative paths failed pasted in another folder, and one
    # printed for a relation check's failing call named no --plugin ("no kernel named 'gqa_bug'")
    import shlex

    from jfa_verify.cases.case import Case
    from jfa_verify.protocol.registry import load_plugin
    from jfa_verify.run.corpus import replay_command

    plugin = misbehaving_plugin("replays_anywhere")
    load_plugin(plugin)
    monkeypatch.chdir(plugin.parent)
    words = shlex.split(replay_command("repro/a b.json", "replays_anywhere"))
    assert words[:3] == ["jfa-verify", "replay", str(tmp_path / "repro" / "a b.json")]
    assert words[words.index("--plugin") + 1] == str(plugin)  # the file that registered the kernel
    assert "--plugin" not in replay_command("x.json", "triton_jfa")  # a built-in needs none
    inline = shlex.split(replay_command(Case(kv_lengths=(3,)), "triton_jfa", timeout_s=2.4))
    assert inline[2] == "--case" and inline[-2:] == ["--timeout", "2.4"]
    from jfa_verify.run.corpus import HANG_REPLAY_S
    from jfa_verify.run.runner import CaseResult

    # an inline crash replayed in-process took the replaying tool down (abort, exit 134, no message)
    crashed = CaseResult(Case(kv_lengths=(3,)), "triton_jfa", "crash")
    assert crashed.replay_command().endswith(f"--timeout {HANG_REPLAY_S:g}")
    hung = CaseResult(Case(kv_lengths=(3,)), "triton_jfa", "hang", seconds={"kernel": 5.0042})
    assert hung.replay_command().endswith("--timeout 5") and "--timeout" not in CaseResult(
        Case(kv_lengths=(3,)), "triton_jfa", "fail").replay_command()


def planted_bug(payload: dict):
    """The packaged catalogue's mutant that ``found_by`` names (``"mutant"``, or ``on mutant-NAME`` in its
    explanation), or None when a reproducer was not found on a planted bug."""
    import re

    found_by = payload.get("found_by") or {}
    name = found_by.get("mutant")
    if name is None:
        match = re.search(r" on mutant-(\w+)", found_by.get("explanation", ""))
        name = match and match.group(1)
    return name


def assert_fails_on_its_planted_bug(path: Path, device) -> None:
    """Replay reproducer ``path`` on the planted bug named in its ``found_by``: it must still fail there, on an
    output (not by a raise), or it no longer reproduces anything (tile sizes changed, say)."""
    from jfa_verify.fuzz.mutation import load_catalogue

    case, payload = read_case_file(path)
    name = planted_bug(payload)
    assert name, f"{path.name}: found_by names no planted bug"
    result = run_case(case, load_catalogue("triton_jfa").kernel_of(name), device)
    assert result.status == "fail", f"{path.name} no longer fails on mutant {name!r}: {result.explain()}"


MUTANT_FILES = [p for p in FILES if planted_bug(read_case_file(p)[1])]


@pytest.mark.parametrize("path", MUTANT_FILES, ids=[p.stem for p in MUTANT_FILES])
def test_corpus_case_still_fails_on_the_planted_bug_that_found_it(path, jfa_device):
    # issue 40 (8): reproducers were only replayed on the correct kernel, so one could lose its power silently
    assert_fails_on_its_planted_bug(path, jfa_device)


def test_a_reproducer_that_no_longer_fails_its_planted_bug_fails_the_replay(tmp_path, jfa_device):
    import json

    from jfa_verify.cases.case import Case
    from jfa_verify.protocol.kernel import tiles_for_shape
    from jfa_verify.protocol.registry import get_kernel

    path = next(p for p in MUTANT_FILES if planted_bug(read_case_file(p)[1]) == "kv_tail_dropped")
    payload = json.loads(path.read_text())
    # whole KV tiles only: the dropped partial last tile is not there to drop
    block_n = tiles_for_shape(get_kernel("triton_jfa"), 16, 16, None, jfa_device.type).block_n
    payload["case"] = Case(kv_lengths=(block_n,), head_dim=16, dtype="float32").to_dict()
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps(payload))
    with pytest.raises(AssertionError, match="no longer fails on mutant 'kv_tail_dropped'"):
        assert_fails_on_its_planted_bug(stale, jfa_device)


def test_reports_case_files_and_call_files_are_json_every_reader_takes(tmp_path):
    """Regression (a new user's trial, 2026-12-06): reports and case files held bare ``Infinity``/``-Infinity``
    (an infinite headroom, the -inf LSE reference of a row that sees no key), which RFC 8259 does not allow:
    JavaScript's JSON.parse and strict parsers refused the whole file. They are written as "inf", "-inf", "nan"."""
    import json
    import math

    from jfa_verify.cases.case import Case
    from jfa_verify.checks.calls import write_call_file
    from jfa_verify.checks.relations import Relation
    from jfa_verify.run.corpus import Corpus
    from jfa_verify.run.isolation import crash_result
    from jfa_verify.run.report import write_json

    def strict(path):
        return json.loads(Path(path).read_text(), parse_constant=lambda c: pytest.fail(f"bare {c} in {path}"))

    write_json(tmp_path / "r.json", {"headroom": math.inf, "cases": [{"reference_value": -math.inf, "e": math.nan}]})
    assert strict(tmp_path / "r.json") == {"headroom": "inf", "cases": [{"reference_value": "-inf", "e": "nan"}]}
    case = Case(kv_lengths=(3, 5), head_dim=16)
    verdict = crash_result(case, "triton_jfa", "hang", "no result", (), math.inf)
    path = Corpus(tmp_path / "repro").write(case, "triton_jfa", "cpu", verdict, ())
    assert strict(path)["verdict"]["seconds"]["kernel"] == "inf"
    assert read_case_file(path)[0] == case  # and it still reads as its case
    calls = write_call_file(tmp_path / "repro" / "x.calls.json", Relation("permutation", case, ()), kernel="k",
                            device="cpu", status="fail", finding="rows moved")
    strict(calls)


def test_an_inline_case_without_kernel_says_which_kernel_it_replays_on(capsys):
    """Regression (a new user's trial): ``replay --case '<json>'`` with ``--plugin`` and no ``--kernel`` ran
    triton_jfa without a word (an inline case names no kernel); it now says so. A case file names its own."""
    from jfa_verify.cli import main

    inline = '{"kv_lengths": [3, 4], "dtype": "float32", "head_dim": 16, "generator": "counter"}'
    assert main(["replay", "--device", "cpu", "--case", inline]) == 0
    out = capsys.readouterr().out
    assert "note: an inline case names no kernel and no --kernel was given: it replays on 'triton_jfa'" in out, out
    assert main(["replay", "--device", "cpu", "--case", inline, "--kernel", "triton_jfa"]) == 0
    assert "names no kernel" not in capsys.readouterr().out
