"""The command line: run writes a report and exits by verdict; replay reproduces a case file."""

import json
import re
from pathlib import Path

import pytest

from jfa_verify.cases.case import Case
from jfa_verify.cli import main

MUTANT_PLUGIN = str(Path(__file__).parent / "quality" / "mutant_plugin.py")


def test_run_passes_and_writes_report(tmp_path, capsys):
    report = tmp_path / "report.json"
    rc = main(["run", "--device", "cpu", "--filter", "layout-7-3-19-5-11/self", "--report", str(report),
               "--reproducers", str(tmp_path / "repro"), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    data = json.loads(report.read_text())
    assert data["summary"]["pass"] == len(data["cases"]) >= 2
    assert data["exit_code"] == rc  # the status the run exited with, in its report (fuzz's and gate's have it too)
    first = data["cases"][0]
    assert set(first["outputs"]) == {"o", "lse", "dq", "dk", "dv"}
    assert all(0 <= o["headroom"] < 1 for o in first["outputs"].values())
    # the report keeps the allowance's raw terms, so a later budget table can re-judge it
    from jfa_verify.judge.budgets import default_table

    dq = first["outputs"]["dq"]
    b = default_table().budget(first["case"]["dtype"], "dq")
    f1, f2, f3 = dq["floors"]
    rebuilt = b.allowance(dq["sdpa_error"], (f1, f2, f3))
    assert rebuilt == pytest.approx(dq["allowance"], rel=1e-12)
    assert "CPU (Triton kernels interpreted)" in out and "scaled" in out
    assert not list((tmp_path / "repro").glob("*.json"))  # passes leave no reproducer


def test_broken_kernel_fails_run_with_localized_message_and_replays(tmp_path, capsys):
    repro = tmp_path / "repro"
    rc = main(["run", "--device", "cpu", "--plugin", MUTANT_PLUGIN, "--kernel", "mutant-kv_bound_minus_one",
               "--filter", "tile-edges/self/float32", "--report", str(tmp_path / "r.json"), "--reproducers", str(repro),
               "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1
    # Lengths (0, 1, 15, 17, 31, 33) with BLOCK_N=16: sequences 3 (17) and 5 (33) lose their last key,
    # and sequence 1 (one token) loses its only key, so its LSE becomes -inf.
    assert "[FAIL] tile-edges/self/float32" in out
    assert re.search(r"  o: max abs error .* > allowance", out)
    assert re.search(r"o: .*\n\s+worst at sequence (1|3|5), head \d, token \d+, M-tile \d", out)
    assert re.search(r"lse: \d+ element\(s\) infinite .*\n\s+worst at sequence 1, head 0, token 0, M-tile 0", out)
    files = list(repro.glob("*.json"))
    assert len(files) == 1
    payload = json.loads(files[0].read_text())
    assert payload["status"] == "fail" and payload["kernel"] == "mutant-kv_bound_minus_one"
    assert f"jfa-verify replay {files[0]}" in out

    assert f"--kernel mutant-kv_bound_minus_one --plugin {MUTANT_PLUGIN}" in out  # the replay command works as printed
    rc = main(["replay", str(files[0]), "--device", "cpu", "--plugin", MUTANT_PLUGIN])
    out = capsys.readouterr().out
    assert rc == 1 and "replayed: fail (same)" in out
    # the same case on the real kernel passes, and replay never deletes the file it was given
    rc = main(["replay", str(files[0]), "--device", "cpu", "--kernel", "triton_jfa"])
    assert rc == 0 and files[0].is_file() and json.loads(files[0].read_text()) == payload
    # ... and says it replayed another kernel than the recorded one (a new user's "pass (DIFFERENT)" read as a fix)
    assert ("recorded on kernel 'mutant-kv_bound_minus_one'; it replays on 'triton_jfa' (--kernel)"
            in capsys.readouterr().out)


@pytest.mark.parametrize("name, body, said, isolate", [
    ("returns_none", "return None", "returned None, not an implementation", "--isolate"),
    ("returns_42", "return 42", "returned 42, not an implementation", "--no-isolate"),
    # (a new user's trial: a load() raising ImportError failed every case as the kernel's error, exit 1)
    ("raises_on_load", "raise ImportError('needs my_cuda_ext')", "raised ImportError: needs my_cuda_ext", "--isolate"),
    # (a new user's trial, 2026-12-05: either exit in load() ended run, gate and fuzz silently with exit 0)
    ("exits_in_load", "import sys; sys.exit(0)", "called sys.exit(0); a loader returns the implementation",
     "--isolate"),
    ("os_exits_in_load", "import os; os._exit(0)", "called os._exit(0); a loader returns the implementation",
     "--no-isolate"),
    # (a new user's trial: a function of another signature failed every case with one TypeError, exit 1, ~100 times)
    ("wrong_signature", "return lambda q, k, v, cu_seqlens, *, causal=False: (q, None)",
     "cannot take the contract's call fn(q, k, v, q_offsets, k_offsets, *, causal, causal_alignment, sm_scale)",
     "--isolate"),
])
def test_a_load_returning_no_implementation_is_a_usage_error_not_a_finding(tmp_path, capsys, name, body, said, isolate):
    """Regression: a kernel whose load() returned None failed every case as a kernel error (exit 1, findings).
    Regression (a new user's trial): a load() that raised was found at the first case, after the run's banner was
    printed and its (empty) report written, and after a campaign had started its workers. The kernel is loaded
    before anything is printed or written: one line on stderr, exit 2."""
    plugin = tmp_path / f"{name}.py"
    plugin.write_text("from jfa_verify import Capabilities, register_kernel\n\n\n"
                      f"@register_kernel({name!r}, capabilities=Capabilities())\ndef load():\n    {body}\n")
    repro, report = tmp_path / "repro", tmp_path / "r.json"
    rc = main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", name, "--max-cases", "1", isolate,
               "--reproducers", str(repro), "--report", str(report), "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert f"kernel {name!r}: its load() ({plugin}:" in err and said in err and len(err.splitlines()) == 1, err
    assert "Traceback" not in err and not list(repro.glob("*.json"))  # no finding recorded
    assert out == "" and not report.exists()  # no banner, no report
    # a campaign stops at once with the same error (nothing to shrink), exit 2, not "no findings", exit 0
    rc = main(["fuzz", "--device", "cpu", "--plugin", str(plugin), "--kernel", name, "--max-examples", "2", isolate,
               "--seed", "1", "--reproducers", str(repro), "--no-progress", "--report", str(report)])
    out, err = capsys.readouterr()
    assert rc == 2 and said in err and len(err.splitlines()) == 1, err
    assert out == "" and not report.exists() and not list(repro.glob("*.json"))


def test_a_quiet_run_prints_the_summary_and_the_failures_only(tmp_path, capsys):
    """Regression (issue 43, 13): a default run printed about 344 lines, mostly coverage tables; there was no
    quiet mode. --quiet prints the table of failing cases, each failure's explanation and the final line."""
    common = ["run", "--device", "cpu", "--plugin", MUTANT_PLUGIN, "--kernel", "mutant-kv_bound_minus_one",
              "--filter", "tile-edges/self", "--reproducers", str(tmp_path / "repro"), "--no-progress"]
    assert main([*common, "--report", str(tmp_path / "loud.json")]) == 1
    loud = capsys.readouterr().out
    assert main([*common, "--report", str(tmp_path / "quiet.json"), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "contract coverage" in loud and "jfa-verify run: kernel" in loud
    assert "contract coverage" not in out and "pairs of classes" not in out and "jfa-verify run: kernel" not in out
    failing = re.findall(r"\[FAIL\] (tile-edges/self/\S+)", loud)
    assert failing and re.findall(r"\[FAIL\] (tile-edges/self/\S+)", out) == failing  # every explanation
    title = "mutant-kv_bound_minus_one on CPU (Triton kernels interpreted): failing cases"
    assert out.lstrip().startswith(title), out[:300]
    assert re.match(rf"\d+ passed, {len(failing)} failed, .*; report: ", out.rstrip().splitlines()[-1]), out[-500:]
    assert len(out.splitlines()) < len(loud.splitlines()) / 2


def test_a_run_says_why_cases_were_skipped(tmp_path, capsys):
    """Regression (a new user's trial): why a case was unsupported was only in the JSON report."""
    plugin = tmp_path / "one_sequence.py"
    plugin.write_text("from jfa_verify import Capabilities, UnsupportedCase, register_kernel\n"
                      "from jfa_verify.oracles import reference_attention\n"
                      "from jfa_verify.core.contract import validate_inputs\n\n\n"
                      "@register_kernel('one_sequence_only', capabilities=Capabilities(backward=False))\n"
                      "def load():\n"
                      "    def forward(q, k, v, q_offsets, k_offsets, **kw):\n"
                      "        if len(k_offsets) > 2:\n"
                      "            raise UnsupportedCase('takes one sequence per call')\n"
                      "        problem = validate_inputs(q, k, v, q_offsets, k_offsets, **kw)\n"
                      "        ref = reference_attention(problem, q, k, v)\n"
                      "        return ref['o'].to(q.dtype), ref['lse'].float()\n"
                      "    return forward\n")
    rc = main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "one_sequence_only", "--max-cases", "6",
               "--no-isolate", "--no-progress", "--reproducers", str(tmp_path / "r"), "--report",
               str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    skipped = json.loads((tmp_path / "r.json").read_text())["summary"]["unsupported"]
    assert rc == 0 and skipped > 0, out[-2000:]
    said = [line for line in out.splitlines() if line.startswith(f"skipped {skipped} case(s) the kernel declared ")]
    assert len(said) == 1 and said[0].endswith("UnsupportedCase: takes one sequence per call"), out


def test_the_terminal_progress_bar_counts_passed_and_failed():
    """Regression (issue 43, 13): the terminal's bar showed no counts (the progress lines of a log did)."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from jfa_verify.cli.output import counting_progress

    file = io.StringIO()
    console = Console(file=file, force_terminal=True, width=150, color_system=None)
    bar, add = counting_progress(console, "verifying k", 4)
    with bar:
        for status in ("pass", "fail", "pass", "crash"):
            add(SimpleNamespace(status=status, failed=status != "pass"))
        bar.refresh()
    assert "4/4" in file.getvalue() and "2 passed, 2 failed" in file.getvalue(), file.getvalue()[-400:]


def test_progress_lines_of_a_log_beat_while_no_verdict_comes():
    """Regression: with stdout not a terminal (a CI log), a case running for minutes printed nothing at all."""
    import io
    import time
    from types import SimpleNamespace

    from rich.console import Console

    from jfa_verify.cli.output import ProgressLines

    file = io.StringIO()
    console = Console(file=file, force_terminal=False, width=150)
    with ProgressLines(console, "verifying k", 3, interval=0.0, heartbeat=0.3,
                       waiting=" (a case past --timeout 600 s is a hang)") as lines:
        lines.add(SimpleNamespace(status="pass"))
        time.sleep(1.2)  # no verdict: the heartbeat speaks
        beats = file.getvalue().count("no verdict for 0.3 s, still running")
        lines.add(SimpleNamespace(status="fail"))
    text = file.getvalue()
    assert beats >= 2 and "verifying k: 1/3 cases (1 pass); no verdict for 0.3 s" in text, text
    assert "(a case past --timeout 600 s is a hang)" in text and "2/3 cases (1 fail, 1 pass)" in text, text
    time.sleep(0.7)  # the heartbeat stops with the block
    assert file.getvalue() == text


@pytest.mark.parametrize("n, said", [
    (1, "campaign on k (cpu, 1 worker, seed 7): 1 case run in 2.0 s (30/min; 1 drawn, and saved findings replayed "
        "and shrink steps run besides; a draw of a case judged before runs nothing; 1 packed launch, 0 split to "
        "find the failing case), fail 1"),
    (2, "campaign on k (cpu, 2 workers, seed 7): 2 cases run in 2.0 s (30/min; 2 drawn, and saved findings replayed "
        "and shrink steps run besides; a draw of a case judged before runs nothing; 2 packed launches, 0 split to "
        "find the failing case), fail 2"),
])
def test_a_campaigns_summary_counts_in_the_singular_for_one(n, said):
    """Regression: a one-worker campaign of one case printed "1 worker(s)" and "1 cases run"."""
    from jfa_verify.cli.output import print_campaign

    printed: list[str] = []
    console = type("Console", (), {"print": lambda self, text, **kwargs: printed.append(text)})()
    finding = {"id": "f1", "status": "fail", "error_kind": "numeric", "outputs": ["out"], "case": "c",
               "examples": n, "path": "repro/f1.json", "kernel": "k"}
    print_campaign({"kernel": "k", "device": "cpu", "workers": n, "seed": 7, "cases": n, "seconds": 2.0,
                    "cases_per_minute": 30.0, "drawn": n, "packs": {"launches": n, "split": 0},
                    "statuses": {"fail": n}, "interrupted": False, "new_findings": [], "findings": [finding],
                    "config": {"run": {"plugins": []}}, "fixed": [], "worker_errors": {}, "notes": [],
                    "coverage": {"drawn": 1, "expected": 2, "never_drawn": ["x"], "outside_capabilities": []}},
                   console)
    assert printed[0] == said, printed[0]
    assert printed[1].startswith(f"  finding f1 [fail] numeric out: c, {n} example{'' if n == 1 else 's'}\n"), \
        printed[1]


def test_a_campaigns_findings_of_one_failure_are_one_new_finding_with_the_others_listed(tmp_path):
    """Regression (a new user's trial): a campaign tagged each finding file NEW, so one bug shrunk to two cases of
    other input classes (one token, a tile's edge) read as two new bugs, while `findings` sets them side by side as
    one failure. The summary gives one NEW line per failure (its examples counted together), lists each further file
    with its replay command, and counts failures and files apart."""
    from jfa_verify.cli.output import print_campaign

    def row(fid, classes, outputs=("lse",), examples=1):
        return {"id": fid, "kernel": "k", "status": "fail", "error_kind": "numeric", "outputs": list(outputs),
                "classes": classes, "examples": examples, "case": f"case-{fid}", "path": str(tmp_path / f"{fid}.json"),
                "found_by": "search (worker 0)"}

    rows = [row("aaa", ["self", "one_token"], examples=2), row("bbb", ["self", "tile_boundary"]),
            row("ccc", ["self"], outputs=("o",))]
    printed: list[str] = []
    console = type("Console", (), {"print": lambda self, text, **kwargs: printed.append(text)})()
    print_campaign({"kernel": "k", "device": "cpu", "workers": 1, "seed": 7, "cases": 9, "seconds": 2.0,
                    "cases_per_minute": 30.0, "drawn": 9, "statuses": {"fail": 4, "pass": 5}, "interrupted": False,
                    "new_findings": ["aaa", "bbb", "ccc"], "findings": rows, "config": {"run": {"plugins": []}},
                    "fixed": [], "worker_errors": {}, "notes": [],
                    "coverage": {"drawn": 1, "expected": 2, "never_drawn": ["x"], "outside_capabilities": []}},
                   console)
    out = "\n".join(printed)
    new = [line for line in out.splitlines() if "NEW finding" in line]
    assert len(new) == 2 and new[0].startswith("  NEW finding aaa [fail] numeric lse: case-aaa, 3 examples, 1 more "
                                               "finding file of the same failure"), out
    assert new[1].startswith("  NEW finding ccc [fail] numeric o: case-ccc, 1 example"), out
    (same,) = [line for line in out.splitlines() if "same failure:" in line]
    assert "finding bbb: case-bbb, 1 example; replay: jfa-verify replay " in same and "bbb.json" in same, out
    assert "  2 distinct failures (2 new) in 3 finding files" in out, out


_LSE_IN_BASE_2 = '''
import math

from jfa_verify import Capabilities, register_kernel
from jfa_verify.core.contract import validate_inputs
from jfa_verify.oracles import reference_attention


@register_kernel("lse_in_base_2", capabilities=Capabilities(backward=False))
def load():
    """The float64 reference, rounded, with its LSE given in base 2: a planted bug every case shows."""
    def forward(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
        problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                                  sm_scale=sm_scale)
        ref = reference_attention(problem, q, k, v)
        return ref["o"].to(q.dtype), (ref["lse"] / math.log(2.0)).float()
    return forward
'''


def test_fuzz_reports_one_planted_bug_as_one_new_finding_and_keeps_every_file(tmp_path, capsys):
    """Regression (a new user's trial): `fuzz` on a kernel whose LSE was in base 2 reported two NEW findings, and a
    covering campaign 49, one per finding file (each kept case had other input classes), while `findings` set them
    side by side as one failure. One NEW line now, every file still kept, listed and replayable, exit 1."""
    plugin = tmp_path / "lse_in_base_2.py"
    plugin.write_text(_LSE_IN_BASE_2)
    folder, report = tmp_path / "r", tmp_path / "campaign.json"
    rc = main(["fuzz", "--device", "cpu", "--plugin", str(plugin), "--kernel", "lse_in_base_2", "--covering",
               "--max-examples", "1", "--seed", "1", "--workers", "1", "--reproducers", str(folder), "--report",
               str(report), "--no-progress", "--no-precompile"])
    out = capsys.readouterr().out
    assert rc == 1, out
    got = json.loads(report.read_text())
    files = sorted(str(p) for p in folder.glob("*.json"))
    assert len(files) >= 2, out  # (the covering array's cases of the bug, kept as found: several files)
    assert sorted(r["path"] for r in got["findings"]) == files  # every file kept and listed
    assert len([line for line in out.splitlines() if "NEW finding" in line]) == 1, out
    assert sum("same failure: new finding" in line for line in out.splitlines()) == len(files) - 1, out
    (failure,) = got["distinct_failures"]
    assert failure["new"] and sorted(failure["findings"]) == sorted(got["new_findings"]), failure
    assert failure["examples"] == sum(r["examples"] for r in got["findings"])
    assert f"1 distinct failure (1 new) in {len(files)} finding files" in out, out
    assert main(["findings", str(folder)]) == 1  # the same failure there: one group, its rows told apart
    assert "told apart by" in capsys.readouterr().out


def test_help_opens_with_a_description_for_users_and_version_comes_from_the_metadata(capsys, monkeypatch):
    """Regression: ``--help`` opened with the module's docstring for maintainers; there was no ``--version``."""
    from importlib import metadata

    import jfa_verify

    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "argument parsing" not in text and "Differential testing of jagged FlashAttention kernels" in text
    assert all(f"`{name}`" in text for name in ("run", "gate", "fuzz", "findings", "replay", "kernels", "bisect"))
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"jfa-verify {metadata.version('jfa-verify')}"

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"jfa-verify {jfa_verify.__version__}"


def test_every_option_of_every_command_says_what_it_does(capsys):
    """Regression (new-user trial): ``run --help`` said nothing of --suite (nor its names), --seed or
    --no-progress, nor what its exit statuses mean; other commands had bare options too."""
    import argparse

    from jfa_verify.checks.suites import SUITES
    from jfa_verify.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    bare = {name: [a.option_strings[0] for a in p._actions if a.option_strings and not a.help]
            for name, p in commands.items()}
    assert not {n: b for n, b in bare.items() if b}, bare
    # the commands a CI job or a campaign runs say what their exit statuses mean
    assert all("exit status" in (commands[n].description or "").lower()
               for n in ("run", "fuzz", "matrix", "replay", "findings", "gate", "mutants", "kernels")), "exit statuses"
    # and those a Ctrl-C stops with 130 say so (gate, replay and matrix did not: a new user's trial, 2026-12-06)
    assert all("130 interrupted" in " ".join((commands[n].description or "").split())
               for n in ("run", "fuzz", "matrix", "replay", "gate", "mutants", "stress", "bisect")), "exit 130"
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in SUITES) and "Exit status" in text
    assert all(f"{code} " in text for code in ("0", "1", "2", "3", "4", "130"))


def test_every_command_that_runs_cases_accepts_no_progress_with_one_help_text(tmp_path, capsys):
    """Regression (a new user's trial): ``--no-progress`` was accepted by run and fuzz but refused by gate, replay and
    findings ("unrecognized arguments", exit 2), so a CI job copying its flags from step to step failed. Every
    command that runs cases takes it now (a no-op where there is no progress), with one help text."""
    import argparse

    from jfa_verify.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    helps = {}
    for name in ("run", "fuzz", "gate", "replay", "findings", "matrix", "mutants", "stress", "calibrate", "bisect"):
        (action,) = [a for a in commands[name]._actions if "--no-progress" in a.option_strings]
        helps[name] = action.help
    assert len(set(helps.values())) == 1, helps
    # and a step that had it still runs: findings on an empty folder lists nothing, exit 0
    (tmp_path / "repro").mkdir()
    assert main(["findings", str(tmp_path / "repro"), "--no-progress"]) == 0
    assert "no findings" in capsys.readouterr().out


def test_run_to_a_log_prints_progress_lines_and_unbroken_replay_commands(tmp_path, capsys, misbehaving_plugin):
    """New-user trial: ``run`` piped to a log printed nothing for minutes (the live bar needs a terminal), and
    replay commands longer than the log's 160 columns were broken across lines (a pasted one fails)."""
    plugin = misbehaving_plugin("raises_on_two", wrong="B == 5")
    repro = tmp_path / ("a-folder-with-a-long-name-" * 6) / "repro"
    repro.parent.mkdir()
    assert main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "raises_on_two", "--filter",
                 "layout-7-3-19-5-11", "--max-cases", "2", "--no-isolate", "--reproducers", str(repro),
                 "--report", str(tmp_path / "r.json")]) == 1
    out = capsys.readouterr().out
    assert "verifying raises_on_two: 2/2 cases (" in out and "by --filter/--max-cases" in out
    # the suite's note tells of the whole suite: a filtered run says how much of it it has (a new user read "145
    # covering-array cases run first" over a run of 2)
    assert "(in the whole suite; 0 of the 2 case(s) picked here are covering-array rows)" in " ".join(out.split())
    # (a new user read "0/0 relation checks held" as checks that ran)
    assert "relation checks not run (--filter)" in out and "relation checks held" not in out
    assert json.loads((tmp_path / "r.json").read_text())["relation_checks"] == {
        "run": 0, "broken": 0, "not_run_because": "--filter", "checks": []}
    replays = [line for line in out.splitlines() if "jfa-verify replay" in line]
    assert replays and all(len(line) > 160 and str(plugin) in line for line in replays), replays
    # the suite note (over 160 characters) on one line: it was folded at "4 / SMs) run first"
    assert any(line.startswith("  CPU interpreter:") and line.endswith("picked here are covering-array rows)")
               for line in out.splitlines())


def test_a_misspelled_option_is_refused_by_its_command_naming_the_closest_option(capsys):
    """Regression (a new user's trial): ``run --kernal X`` was refused from the top level, "jfa-verify: error:
    unrecognized arguments ... (see jfa-verify --help)", whose help lists no option of ``run``."""
    assert main(["run", "--kernal", "triton_jfa"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jfa-verify run: error: unrecognized arguments: --kernal triton_jfa"), err
    assert "did you mean --kernel?" in err and "see jfa-verify run --help" in err, err
    assert main(["findings", "a", "b"]) == 2  # a stray positional: no option to suggest
    err = capsys.readouterr().err
    assert err.startswith("jfa-verify findings: error: unrecognized arguments: b") and "did you mean" not in err, err
    # nothing like it: no suggestion (the shared "--" alone made --bogus "close" to --jobs: a trial, 2026-12-06)
    assert main(["run", "--bogus"]) == 2 and "did you mean" not in capsys.readouterr().err
    assert main(["run", "--report", ""]) == 2  # (named: "argument --report:  is a folder" named nothing)
    assert "argument --report: '' is empty; give a file name" in capsys.readouterr().err


def test_unknown_kernel_is_a_clear_error(capsys):
    rc = main(["run", "--device", "cpu", "--kernel", "flash_typo"])
    err = capsys.readouterr().err
    assert rc == 2 and "no kernel named 'flash_typo'" in err and "triton_jfa" in err


def test_replay_rejects_non_case_file(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    rc = main(["replay", str(bad), "--device", "cpu"])
    assert rc == 2 and "not a jfa-verify case file" in capsys.readouterr().err


def test_replay_names_a_case_file_of_another_format_version(tmp_path, capsys):
    """Regression (a new user's trial, 2026-12-05): a case file of format jfa-verify-case/99 was "not a jfa-verify
    case file"; it is one, of a version this jfa-verify does not read."""
    from jfa_verify.run.corpus import FORMAT

    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": "jfa-verify-case/99", "case": {"kv_lengths": [3]}}))
    rc = main(["replay", str(newer), "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and "'jfa-verify-case/99', a version this jfa-verify does not read" in err and FORMAT in err


def test_kernels_lists_registry(capsys):
    assert main(["kernels"]) == 0
    assert "triton_jfa" in capsys.readouterr().out


def test_kernels_says_which_run_on_the_device_and_why_not(capsys):
    """Regression: on a CPU-only machine ``kernels`` called GPU-only kernels "available"."""
    assert main(["kernels", "--device", "cpu"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert " runs on cpu " in lines["triton_jfa"] and "[" not in lines["triton_jfa"]
    for name in ("gluon_jfa", "torch_fa2_varlen"):
        assert " not on cpu " in lines[name] and "[device=cpu not in ('cuda',)" in lines[name], lines[name]
    assert "[forward only on cpu]" in lines["flex_document_mask"]  # its capabilities: no backward on the CPU


def test_kernels_lists_a_kernel_whose_load_fails_as_not_running_with_the_reason(tmp_path, capsys):
    """Regression (issue 43, 6): ``kernels`` said "runs on cpu" for kernels whose load() raised or returned None."""
    plugin = tmp_path / "unloadable.py"
    plugin.write_text("from jfa_verify import Capabilities, register_kernel\n\n\n"
                      "@register_kernel('load_raises', capabilities=Capabilities())\n"
                      "def load():\n    raise ImportError('needs my_cuda_ext')\n\n\n"
                      "@register_kernel('load_returns_none', capabilities=Capabilities())\n"
                      "def load_none():\n    return None\n")
    assert main(["kernels", "--device", "cpu", "--plugin", str(plugin)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert " not running " in lines["load_raises"] and "runs on" not in lines["load_raises"], lines["load_raises"]
    assert lines["load_raises"].endswith("[load() raised ImportError: needs my_cuda_ext]"), lines["load_raises"]
    assert " not running " in lines["load_returns_none"], lines["load_returns_none"]
    assert lines["load_returns_none"].endswith("[load() returned no implementation]"), lines["load_returns_none"]
    assert " runs on cpu " in lines["triton_jfa"]
    # a kernel given neither a description nor a docstring is said to have none, not listed blank (a new user's trial)
    assert "(no description: registered by unloadable.py:load) [load() raised" in lines["load_raises"], lines


def test_schedule_table_and_png(tmp_path, capsys):
    png = tmp_path / "load.png"
    assert main(["schedule", "--batch", "64", "--num-sms", "8", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "zigzag" in out and "dynamic" in out and png.stat().st_size > 1000


def test_schedule_refuses_options_its_lengths_would_ignore_and_report_names_a_run_report(tmp_path, capsys):
    """Regression (a new user's trial): `schedule --lengths 5,3 --batch 7` printed 2 sequences and exit 0, ignoring
    --batch; `report run.json` said "run.json:1: not JSON" of a JSON run report."""
    assert main(["schedule", "--lengths", "5,3", "--batch", "7"]) == 2
    assert "--lengths gives the batch itself; --batch would be ignored" in capsys.readouterr().err
    assert main(["schedule", "--lengths", "5,3", "--distribution", "pareto"]) == 2
    assert main(["schedule", "--lengths", "5,3", "--num-sms", "2"]) == 0 and "2 sequences" in capsys.readouterr().out
    run_report = tmp_path / "run.json"
    run_report.write_text(json.dumps({"format": "jfa-verify-run/1", "cases": []}, indent=2))
    assert main(["report", str(run_report), "--out-dir", str(tmp_path / "plots")]) == 2
    err = capsys.readouterr().err
    assert "is one JSON document (jfa-verify-run/1" in err and "not calibration records" in err
    assert "not JSON" not in err


def test_fuzz_finds_and_shrinks_planted_bug_then_replays_from_corpus(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    rc = main(["fuzz", "--device", "cpu", "--plugin", MUTANT_PLUGIN, "--kernel", "mutant-kv_tail_dropped",
               "--max-examples", "40", "--seed", "5", "--reproducers", str(corpus), "--forward-only", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1, out
    files = sorted(corpus.glob("*.json"))
    payloads = [json.loads(f.read_text()) for f in files]
    # Only shrunk findings are kept, one file per signature (the shrink steps' files are removed).
    assert files and all(p["status"] == "fail" and "finding" in p for p in payloads), out
    assert len({p["finding"]["id"] for p in payloads}) == len(files)
    assert all(len(p["case"]["kv_lengths"]) <= 2 for p in payloads)
    rc = main(["replay", str(files[0]), "--device", "cpu", "--plugin", MUTANT_PLUGIN])
    assert rc == 1 and "replayed: fail (same)" in capsys.readouterr().out


def test_fuzz_where_every_case_is_outside_the_kernel_is_nothing_checked_not_a_pass(tmp_path, capsys):
    # A new user's CI job fuzzing gluon_jfa (CUDA sm_90 only) on a CPU runner exited 0 with "no findings"; a later
    # trial's --duration 3600 would have spent the hour drawing cases first: it is refused before any case now
    rc = main(["fuzz", "--device", "cpu", "--kernel", "gluon_jfa", "--max-examples", "2", "--seed", "1",
               "--reproducers", str(tmp_path / "r"), "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 2, captured.out
    assert "does not run on cpu" in captured.err and "gluon_jfa" in captured.err
    assert "jfa-verify kernels" in captured.err and not (tmp_path / "r").exists()


def test_run_of_a_kernel_the_device_cannot_run_is_refused_before_any_work(tmp_path, capsys):
    # A new user's `run --kernel gluon_jfa` on a CPU built the suite and dispatched 84 cases, each unsupported, and
    # printed ~160 lines before exiting 2 (fuzz refused the same in one line)
    report = tmp_path / "r.json"
    rc = main(["run", "--device", "cpu", "--kernel", "gluon_jfa", "--no-progress",
               "--report", str(report), "--reproducers", str(tmp_path / "repro")])
    out, err = capsys.readouterr()
    assert rc == 2, out
    assert ("kernel 'gluon_jfa' does not run on cpu" in err
            and "`jfa-verify kernels` lists where each kernel runs" in err)
    assert "contract coverage" not in out and not (tmp_path / "repro").exists()
    # nothing ran: no report, so none that reads "still running" (the placeholder's interrupted: null) either
    assert not report.exists()


@pytest.mark.parametrize("how", ["--kernel nope", "--filter zzz", "a plugin that fails to import"])
def test_a_usage_error_leaves_an_earlier_report_untouched(tmp_path, capsys, how):
    """Regression (issue 43, 3): ``run --kernel nope`` in a folder holding a finished report replaced it with an empty
    error report; nothing ran, so the earlier report stays (exit 2, one line saying why)."""
    report = tmp_path / "r.json"
    before = json.dumps({"summary": {"pass": 176}, "finished": True, "interrupted": False})
    report.write_text(before)
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text("import no_such_module_jfa\n")
    extra = {"--kernel nope": ["--kernel", "nope"], "--filter zzz": ["--filter", "zzz"],
             "a plugin that fails to import": ["--plugin", str(plugin)]}[how]
    rc = main(["run", "--device", "cpu", "--report", str(report), "--reproducers", str(tmp_path / "repro"),
               "--no-progress", *extra])
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert report.read_text() == before
    assert {p.name for p in tmp_path.iterdir()} == {"r.json", "broken_plugin.py"}  # no temporary file left behind


def test_run_counts_coverage_over_the_cases_the_kernel_ran_only(tmp_path, capsys, monkeypatch):
    # A new user saw 0 of 84 cases run (gluon_jfa on the CPU) reported as "pairs of classes 1286/1286 (100.0%)";
    # here a kernel that runs on the CPU but takes no case of the suite (head dim 1024 only)
    from jfa_verify.protocol import registry

    # registered for this test only: tests that walk every registered kernel share this process under xdist
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    plugin = tmp_path / "narrow.py"
    plugin.write_text(
        "from jfa_verify import Capabilities, register_kernel\n\n"
        "def _never(*args, **kwargs):\n"
        "    raise AssertionError('no case is inside its capabilities')\n\n"
        "register_kernel('narrow_d1024', capabilities=Capabilities(head_dims=(1024,)),\n"
        "                description='head dim 1024 only')(lambda: _never)\n")
    report = tmp_path / "r.json"
    rc = main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "narrow_d1024", "--max-cases", "3",
               "--no-progress", "--report", str(report), "--reproducers", str(tmp_path / "repro")])
    out, err = capsys.readouterr()
    assert rc == 2, out
    assert "contract coverage over 0 case(s)" in out and "(100.0%)" not in out
    assert "is inside the capabilities of kernel 'narrow_d1024'" in err, err
    assert json.loads(report.read_text())["coverage"]["total"] == 0
    assert json.loads(report.read_text())["exit_code"] == 2  # one rule for the exit status and the report


@pytest.mark.parametrize("stopped_in", ["checks.suites.get_suite", "cli.context.load_kernel"])
def test_a_run_interrupted_before_its_first_case_leaves_no_earlier_report_behind(tmp_path, monkeypatch, capsys,
                                                                                 stopped_in):
    # A new user's Ctrl-C 8 s into `run` (the covering array being built) exited 130 and left the previous run's
    # report in place, which a CI step would read as this run's; later (review) the same while the kernel and its
    # plugins loaded, seconds with Triton
    import importlib

    module, name = stopped_in.rsplit(".", 1)
    module, _, owner_name = module.partition(":")  # ("module:Class.method": a method of a class of the module)
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"summary": {"pass": 176}, "finished": True, "interrupted": False}))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    owner = importlib.import_module(f"jfa_verify.{module}")
    monkeypatch.setattr(getattr(owner, owner_name) if owner_name else owner, name, interrupted)
    rc = main(["run", "--device", "cpu", "--report", str(report), "--reproducers", str(tmp_path / "repro"),
               "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 130, err
    assert f"interrupted before any case ran (the kernel loading or the suite being built); the report ({report}) " \
           f"says so" in err
    payload = json.loads(report.read_text())
    assert payload["finished"] is False and payload["cases"] == [] and payload["summary"] != {"pass": 176}
    assert payload["interrupted"] is True and payload["cases_planned"] is None  # (a reader need not guess why)
    assert payload["exit_code"] == 130
    assert payload["kernel"] == "triton_jfa"


@pytest.mark.parametrize("stopped_in, spent", [("checks.suites.get_suite", ["suite"]),
                                               ("cli.context.load_kernel", ["suite"]),
                                               ("workflows.suite_run.precompile_cases", ["suite", "precompile"]),
                                               # (a new user's stop 2 s in, as the workers started: a placeholder
                                               # report and no time: line)
                                               ("run.loop:Verifier.start_early", ["suite"])])
def test_a_run_interrupted_before_its_first_case_says_where_its_time_went(tmp_path, monkeypatch, capsys, stopped_in,
                                                                          spent):
    # regression (issue 39's phases): a Ctrl-C while the suite was built, or during the precompile step, printed no
    # "time:" line and wrote no phases_seconds, where a later stop did: the seconds spent before it went unsaid
    import importlib

    module, name = stopped_in.rsplit(".", 1)
    module, _, owner_name = module.partition(":")  # ("module:Class.method": a method of a class of the module)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    owner = importlib.import_module(f"jfa_verify.{module}")
    monkeypatch.setattr(getattr(owner, owner_name) if owner_name else owner, name, interrupted)
    report = tmp_path / "r.json"
    rc = main(["run", "--device", "cpu", "--max-cases", "1", "--report", str(report), "--reproducers",
               str(tmp_path / "repro"), "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 130, err
    phases = json.loads(report.read_text())["phases_seconds"]
    assert list(phases) == spent and all(v >= 0 for v in phases.values()), phases
    (line,) = [x for x in out.splitlines() if x.startswith("time: ")]
    assert line == "time: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()) \
        + f" ({sum(phases.values()):.1f} s)", line


def test_run_in_a_fresh_process_on_the_cpu_runs_in_process_calls_under_the_interpreter(tmp_path):
    # regression (new-user trial of 7a2b4a0): the report placeholder, written before the device was chosen, imported
    # triton before TRITON_INTERPRET was set, so every call in the main process (--no-isolate cases, the relation
    # checks) ran compiled for a GPU and failed: "Cannot call @triton.jit'd outside of the scope of a kernel".
    # In-process tests cannot see it (pytest imported triton long before); a fresh process can.
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "run", "--device", "cpu", "--no-isolate",
                           "--max-cases", "2", "--no-progress", "--report", str(tmp_path / "r.json"),
                           "--reproducers", str(tmp_path / "repro")], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["pass"] == 2


def test_a_stop_during_the_relation_checks_keeps_every_cases_verdict(tmp_path, monkeypatch, capsys):
    # regression (review): the relation checks ran after the cases outside any handler, and the report was written
    # only after them: a Ctrl-C or SIGTERM there exited 130 with the placeholder report, every verdict lost
    import dataclasses

    from jfa_verify.checks import calls, suites

    real = suites.get_suite

    def small(*args, **kwargs):
        suite = real(*args, **kwargs)
        return dataclasses.replace(suite, cases=suite.cases[:2], relations=suite.relations[:2])

    seen = []

    def stopped(relations, *args, on_checked, **kwargs):
        seen.append(json.loads(report.read_text()))  # what a kill at this moment would leave
        on_checked("[FAIL] relation permutation on x: broke")  # the first relation broke, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(suites, "get_suite", small)
    monkeypatch.setattr(calls, "check_relations", stopped)
    report = tmp_path / "r.json"
    rc = main(["run", "--device", "cpu", "--plugin", str(Path(__file__).parent / "quality" / "memory_plugin.py"),
               "--kernel", "exact-ref", "--no-isolate", "--no-progress", "--report", str(report),
               "--reproducers", str(tmp_path / "repro")])
    err = capsys.readouterr().err
    assert rc == 130, err
    assert "interrupted after 2 of 2 cases (report written)" in err
    payload = json.loads(report.read_text())
    assert payload["interrupted"] is True and payload["finished"] is False and len(payload["cases"]) == 2
    # the relation that broke before the stop is kept (its call file too, by check_relations), the other not run
    # (which checks ran, on which batch: a new user could not tell "3/3" from "5/5")
    assert payload["relation_checks"] == {"run": 1, "broken": 1, "not_run_because": "interrupted", "checks": [
        {"relation": "permutation", "batch": "relations/0/cross", "held": False}]}, payload["relation_checks"]
    assert payload["relations"] == ["[FAIL] relation permutation on x: broke"]
    (before,) = seen
    assert len(before["cases"]) == 2 and before["finished"] is False and before["interrupted"] is None
    assert before["relation_checks"]["not_run_because"] == "the run ended before they finished"


def test_run_records_a_hung_kernel_and_exits(tmp_path, sleepy_plugin):
    import subprocess
    import sys

    plugin = sleepy_plugin
    repro = tmp_path / "repro"
    proc = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "run", "--device", "cpu", "--plugin", str(plugin),
                           "--kernel", "sleepy", "--max-cases", "1", "--timeout", "1", "--reproducers", str(repro),
                           "--no-progress", "--report", str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    (path,) = repro.glob("*.json")
    payload = json.loads(path.read_text())
    assert payload["status"] == "hang" and payload["kernel"] == "sleepy"
    assert path.name.startswith(Case.from_dict(payload["case"]).case_id())  # the whole case survives, for replay


def test_an_in_process_hang_says_which_case_and_how_to_replay_it(tmp_path, sleepy_plugin):
    """Regression (new-user trial): with cases in this process, the hang watchdog ended it with exit 3 and not
    a word: no table follows, so the watchdog itself names the case file and the replay command."""
    import subprocess
    import sys

    repro = tmp_path / "repro"
    proc = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "run", "--device", "cpu", "--plugin",
                           str(sleepy_plugin), "--kernel", "sleepy", "--max-cases", "1", "--timeout", "1",
                           "--no-isolate", "--reproducers", str(repro), "--no-progress"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    (path,) = repro.glob("*.json")
    assert "[HANG] no result after 1 s" in proc.stderr and f"jfa-verify replay {path}" in proc.stderr


def test_matrix_records_a_hang_as_a_finding_and_writes_its_outputs(tmp_path, misbehaving_plugin):
    """Regression (new-user trial): ``matrix --timeout`` ran cases in-process by default, so a hang ended it with
    exit 3, no table and no --json. Cases now run in worker processes by default, as for ``run``."""
    import subprocess
    import sys

    plugin = misbehaving_plugin("hangs_on_many", hang="B > 2")
    proc = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "matrix", "--device", "cpu", "--plugin", str(plugin),
                           "--kernel", "hangs_on_many", "--filter", "tile-edges", "--max-cases", "1", "--forward-only",
                           "--timeout", "5", "--reproducers", str(tmp_path / "repro"),
                           "--json", str(tmp_path / "m.json")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    matrix = json.loads((tmp_path / "m.json").read_text())
    assert [c["status"] for c in matrix["cells"]] == ["hang"]
    assert [f["status"] for f in matrix["findings"]] == ["hang"] and "## Findings (1)" in proc.stdout


def test_run_where_every_case_is_unsupported_is_not_a_pass(tmp_path, capsys):
    """A kernel that runs nowhere here (CUDA only, on the CPU) checks nothing: exit 2, not 0. A float8-only
    kernel is checked: the suite's covering array is built inside each kernel's capabilities."""
    from jfa_verify.protocol.kernel import Capabilities, Kernel
    from jfa_verify.protocol.registry import add_kernel, get_kernel

    base = get_kernel("triton_jfa")
    add_kernel(Kernel("cuda-only", "runs on CUDA only", lambda: base.impl, Capabilities(device_types=("cuda",)),
                      base.tile_sizes_fn))
    rc = main(["run", "--device", "cpu", "--kernel", "cuda-only", "--max-cases", "2", "--no-progress", "--no-isolate",
               "--report", str(tmp_path / "r.json"), "--reproducers", str(tmp_path / "repro")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "kernel 'cuda-only' does not run on cpu" in err  # refused before the suite is built
    rc = main(["run", "--device", "cpu", "--kernel", "triton_jfa_fp8", "--max-cases", "2", "--no-progress",
               "--report", str(tmp_path / "r8.json"), "--reproducers", str(tmp_path / "repro")])
    assert rc == 0 and "dtype           float8_e4m3fn 2" in capsys.readouterr().out


def test_findings_carry_their_id_and_replay_command_take_the_folder_positionally_and_exit_1(tmp_path, capsys,
                                                                                          misbehaving_plugin):
    """Regression: ``findings`` printed no replay command, its JSON said ``"id": null`` for a ``run`` failure,
    it took the folder only as ``--reproducers`` and exited 0 while listing findings."""
    plugin = misbehaving_plugin("always_raises", wrong="True")
    repro = tmp_path / "repro"
    assert main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "always_raises", "--max-cases", "1",
                 "--no-isolate", "--reproducers", str(repro), "--report", str(tmp_path / "r.json"),
                 "--no-progress"]) == 1
    capsys.readouterr()
    assert main(["findings", str(repro), "--json"]) == 1  # a listing of findings exits as the run that found them
    (row,) = json.loads(capsys.readouterr().out)
    assert re.fullmatch(r"[0-9a-f]{12}", row["id"]) and row["status"] == "error"
    # one id (a new user met two: the listing's was the signature's): the file's name, the run report's case_id
    (case,) = json.loads((tmp_path / "r.json").read_text())["cases"]
    assert Path(row["path"]).name == f"{row['id']}-always_raises.json" and case["case_id"] == row["id"], row
    assert re.fullmatch(r"[0-9a-f]{12}", row["signature"])
    assert row["replay"] == f"jfa-verify replay {row['path']} --kernel always_raises --plugin {plugin}"
    assert main(["findings", "--reproducers", str(repro)]) == 1
    out = capsys.readouterr().out
    assert f"{row['id']} replay: {row['replay']}" in out  # one plain line: pasted as it is, it replays
    assert main(["findings", str(repro), "--json"]) == 1 and json.loads(capsys.readouterr().out) == [row]  # stable
    assert main(["findings", str(repro), "--reproducers", str(tmp_path)]) == 2
    assert "two folders given" in capsys.readouterr().err
    assert main(["findings", str(tmp_path / "empty")]) == 2  # no such folder
    (tmp_path / "empty").mkdir()
    assert main(["findings", str(tmp_path / "empty")]) == 0
    assert main(["findings", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "jfa_verify/core/exits.py" in text and "0 no finding listed; 1 a wrong output or kernel error" in text


def test_findings_replay_commands_work_from_another_folder(tmp_path, capsys, misbehaving_plugin, monkeypatch):
    """Regression: a run given ``--plugin`` as a relative path recorded it as given, and ``findings`` run from
    another folder printed replay commands whose ``--plugin`` did not exist there (exit 2, "no such file")."""
    import shlex

    plugin = misbehaving_plugin("raises_here", wrong="True")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--device", "cpu", "--plugin", plugin.name, "--kernel", "raises_here", "--max-cases", "1",
                 "--no-isolate", "--reproducers", "repro", "--report", "r.json", "--no-progress"]) == 1
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    capsys.readouterr()
    assert main(["findings", "../repro", "--json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    command = shlex.split(row["replay"])
    assert command[0] == "jfa-verify" and main(command[1:] + ["--device", "cpu"]) == 1, capsys.readouterr().err


def test_findings_of_an_empty_folder_is_one_line_and_no_empty_table(tmp_path, capsys):
    # (a new user's trial: an empty table's frame, then "no findings")
    assert main(["findings", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"no findings in {tmp_path}\n"


def test_findings_of_a_clean_plugin_kernel_is_no_finding_with_its_plugin(tmp_path, capsys, misbehaving_plugin):
    """Regression (a new user's trial, 2026-12-07): `findings FOLDER --kernel K` for a plugin kernel with no findings
    exited 2 ("no kernel of that name is registered") and findings took no --plugin: a clean kernel read as a usage
    error in CI."""
    plugin = misbehaving_plugin("clean_plugin_kernel")
    assert main(["findings", str(tmp_path), "--kernel", "clean_plugin_kernel"]) == 2
    assert "give the file with --plugin FILE.py" in capsys.readouterr().err
    assert main(["findings", str(tmp_path), "--kernel", "clean_plugin_kernel", "--plugin", str(plugin)]) == 0
    assert "no findings" in capsys.readouterr().out


def test_findings_that_read_the_same_say_what_tells_them_apart(tmp_path, capsys, monkeypatch):
    """Regression (a new user's trial, 2026-12-07): one campaign's two findings of one wrong alignment showed as two
    identical rows ("fail, numeric, o"); what separated them (one_token against tile_boundary) was in --json only."""
    import jfa_verify.fuzz.findings as findings

    def row(fid, classes, outputs=("o",)):
        return {"id": fid, "kernel": "k", "status": "fail", "error_kind": "numeric", "outputs": list(outputs),
                "classes": classes, "examples": 1, "case": f"case-{fid}", "replay": f"jfa-verify replay {fid}",
                "found_by": "fuzz", "path": str(tmp_path / fid)}

    rows = [row("aaa", ["cross", "float32", "one_token"]), row("bbb", ["cross", "float32", "tile_boundary"]),
            row("ccc", ["self", "float32"], outputs=("lse",))]
    monkeypatch.setattr(findings, "list_findings", lambda root, kernel=None: rows)
    assert main(["findings", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "told apart by" in out and "one_token" in out and "tile_boundary" in out, out
    line = next(x for x in out.splitlines() if "ccc" in x and "replay" not in x)
    assert line.rstrip(" │|").endswith("-"), line  # a row like no other: nothing to tell it apart from


def test_findings_of_a_missing_folder_is_a_usage_error(tmp_path, capsys):
    assert main(["findings", "--reproducers", str(tmp_path / "typo")]) == 2
    err = capsys.readouterr().err
    assert "is not a folder" in err and "typo" in err and "Traceback" not in err


def test_findings_names_a_case_file_it_cannot_read_and_does_not_pass(tmp_path, capsys):
    # A new user truncated a reproducer: `findings` said "no findings" and exited 0 (replay of it exits 2)
    folder = tmp_path / "repro"
    folder.mkdir()
    broken = folder / "0123456789ab-triton_jfa.json"
    broken.write_text('{"case": {"kv_lengths": [3, 5], "head_dim"')
    rc = main(["findings", str(folder)])
    err = capsys.readouterr().err
    assert rc == 2 and str(broken) in err and "not a readable case file" in err


def test_a_command_leaves_the_callers_device_and_interpreter_setting_alone(monkeypatch, tmp_path):
    """Regression (H200, GPU tests): ``main(["mutants", "--device", "cpu", ...])`` inside a CUDA test
    process left ``TRITON_INTERPRET=1`` behind, and every mutant kernel imported later in that process
    was decorated for the interpreter ("Cannot call @triton.jit'd outside of the scope of a kernel")."""
    import os

    import torch

    import jfa_verify.core.device as device

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(device, "_chosen", torch.device("meta"))  # stands in for the caller's CUDA choice
    assert main(["run", "--device", "cpu", "--max-cases", "1", "--no-progress", "--no-isolate",
                 "--report", str(tmp_path / "r.json"), "--reproducers", str(tmp_path / "repro")]) == 0
    assert "TRITON_INTERPRET" not in os.environ
    assert device.selected_device() == torch.device("meta")


def test_a_finding_whose_file_names_no_kernel_replays_without_kernel_none(tmp_path, capsys, misbehaving_plugin):
    """Regression: ``findings`` printed ``--kernel None`` for a case file without a kernel (a hand-written or
    older file), a command that fails as "kernel 'None' is not registered"; replay takes the file's default."""
    plugin = misbehaving_plugin("raises_always", wrong="True")
    repro = tmp_path / "repro"
    assert main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "raises_always", "--max-cases", "1",
                 "--no-isolate", "--reproducers", str(repro), "--report", str(tmp_path / "r.json"),
                 "--no-progress"]) == 1
    (path,) = [p for p in repro.rglob("*.json") if "kernel" in json.loads(p.read_text())]
    payload = json.loads(path.read_text())
    del payload["kernel"]
    path.write_text(json.dumps(payload))
    capsys.readouterr()
    assert main(["findings", str(repro), "--json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert "--kernel" not in row["replay"] and "None" not in row["replay"], row["replay"]
    assert row["replay"].startswith(f"jfa-verify replay {path}")


def _one_recorded_failure(tmp_path, plugin, kernel: str):
    """The case file of ``kernel``'s first failing case (one case run, in process)."""
    repro = tmp_path / "repro"
    assert main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", kernel, "--max-cases", "1",
                 "--no-isolate", "--reproducers", str(repro), "--report", str(tmp_path / "r.json"),
                 "--no-progress"]) == 1
    (path,) = repro.glob("*.json")
    return path


def test_a_finding_that_does_not_recur_says_what_to_rule_out(tmp_path, capsys, misbehaving_plugin):
    """Regression (noticed in a trial): a recorded failure that passed on replay printed "pass (DIFFERENT)" and
    nothing else; the replay now names what differs from the recording and what to rule out."""
    import torch

    path = _one_recorded_failure(tmp_path, misbehaving_plugin("raises_always", wrong="True"), "raises_always")
    payload = json.loads(path.read_text())
    # as if recorded on a GPU with another torch, by a kernel that has been fixed since (triton_jfa passes it)
    payload.update(kernel="triton_jfa", device="cuda:0", plugins=[], plugin_paths=[],
                   environment={**payload["environment"], "torch": "2.11.0+cu130"})
    path.write_text(json.dumps(payload))
    capsys.readouterr()
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "replayed: pass (DIFFERENT)" in out and "hint: the recorded finding did not recur" in out, out
    assert f"device cuda:0 -> cpu; torch 2.11.0+cu130 -> {torch.__version__}" in out
    assert "jfa-verify bisect" in out and "--memory nan" in out


def test_a_replay_on_another_kernel_says_so_on_its_verdict_line_without_recurrence_hints(tmp_path, capsys,
                                                                                          misbehaving_plugin):
    """Regression (a new user's trial): ``replay FILE --kernel triton_jfa`` on another kernel's case file printed
    "recorded verdict: fail; replayed: pass (DIFFERENT)" and hints to bisect, rule out state and nondeterminism, all
    of which presume the recorded kernel. The verdict line now names both kernels; the exit status is still the
    replay's."""
    plugin = misbehaving_plugin("raises_elsewhere", wrong="True")
    path = _one_recorded_failure(tmp_path, plugin, "raises_elsewhere")
    capsys.readouterr()
    assert main(["replay", str(path), "--device", "cpu", "--kernel", "triton_jfa"]) == 0
    out = capsys.readouterr().out
    assert ("recorded for kernel 'raises_elsewhere': error; replayed on 'triton_jfa': pass (a different kernel: "
            "this says nothing of whether the finding recurs on 'raises_elsewhere'; replay without" in out), out
    assert "DIFFERENT" not in out and "did not recur" not in out and "jfa-verify bisect" not in out, out
    assert main(["replay", str(path), "--device", "cpu", "--plugin", str(plugin)]) == 1  # its own kernel: as before
    assert "recorded verdict: error; replayed: error (same)" in capsys.readouterr().out


def test_sigterm_before_the_first_case_exits_130_not_143(tmp_path):
    """Regression: SIGTERM while a command was still loading its kernel (before the run's own handler was
    installed) killed it with Python's default (exit 143, no message) instead of the documented 130."""
    import signal
    import subprocess
    import sys

    from tests.helpers import signal_when

    marker = tmp_path / "loading"
    plugin = tmp_path / "slow_plugin.py"
    plugin.write_text(f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('1')\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "run", "--device", "cpu", "--plugin", str(plugin),
                             "--kernel", "x", "--reproducers", str(tmp_path / "r"), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = signal_when(proc, marker.exists, signal.SIGTERM, settle_s=0.2)
    assert proc.returncode == 130, (proc.returncode, out[-1000:], err[-2000:])
    assert "interrupted" in err and "Traceback" not in err


def test_replay_without_the_plugin_names_the_plugin_the_case_file_recorded(tmp_path, capsys, misbehaving_plugin):
    """Regression (new-user trial): ``replay FILE`` without ``--plugin`` said only "no kernel named ...",
    although the file records the plugin that registered the kernel."""
    plugin = misbehaving_plugin("raises_for_replay", wrong="True")
    repro = tmp_path / "repro"
    assert main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "raises_for_replay", "--max-cases",
                 "1", "--no-isolate", "--reproducers", str(repro), "--no-progress"]) == 1
    (path,) = repro.glob("*.json")
    from jfa_verify.protocol import registry

    registry._REGISTRY.pop("raises_for_replay", None)  # as a fresh process would be
    capsys.readouterr()
    assert main(["replay", str(path), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "no kernel named 'raises_for_replay'" in err and f"--plugin {plugin}" in err, err


def test_a_folder_or_a_finding_id_given_as_a_file_says_what_to_give(tmp_path, capsys):
    """Regression (new-user trial): ``--plugin DIR`` said "no such file", and ``replay ID`` (the id that
    ``findings`` prints) said only that the case file did not exist."""
    assert main(["run", "--device", "cpu", "--plugin", str(tmp_path), "--max-cases", "1"]) == 2
    assert "a folder; give a file in it" in capsys.readouterr().err
    assert main(["replay", "3d52e5fd07a5", "--device", "cpu"]) == 2
    assert "jfa-verify findings DIR" in capsys.readouterr().err


def test_findings_lists_a_broken_relation_check_from_its_call_file(tmp_path, capsys):
    # a new user's trial: `findings` called the call file that `run` wrote for a broken relation check "not a
    # readable case file ... a finding may be lost in it", exit 2
    from jfa_verify.checks.calls import write_call_file
    from jfa_verify.checks.relations import Relation

    relation = Relation("permutation", Case(kv_lengths=(3, 5), head_dim=16, name="relations/0/self"), ())
    path = write_call_file(tmp_path / "abc-permutation-triton_jfa.calls.json", relation, kernel="triton_jfa",
                           device="cpu", status="fail", finding="rows moved")
    assert main(["findings", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "not a readable" not in captured.err and "relation permutation" in captured.out
    assert f"replay: jfa-verify replay {path} --kernel triton_jfa" in captured.out
    assert main(["findings", str(tmp_path), "--kernel", "triton_jfa_tf32"]) == 0  # registered, no findings here
    assert main(["findings", str(tmp_path), "--kernel", "tritn_jfa"]) == 2  # (a typo read as "no findings", 0)
    assert "kernels with findings there: triton_jfa" in capsys.readouterr().err
    path.write_text("{")  # a truncated call file is named, as a truncated case file is
    assert main(["findings", str(tmp_path)]) == 2 and "a finding may be lost" in capsys.readouterr().err
    # in --json too, as a row (it was on stderr only: a new user's trial, 2026-12-06)
    assert main(["findings", str(tmp_path), "--json"]) == 2
    (row,) = json.loads(capsys.readouterr().out)
    assert row["status"] == "unreadable" and row["path"] == str(path) and "JSON" in row["error_kind"], row


def test_relation_findings_of_a_plugin_kernel_have_own_ids_and_replay_from_any_folder(tmp_path, capsys, monkeypatch,
                                                                                       misbehaving_plugin):
    """Regression (a new user's trial, 2026-12-06): a call file kept its ``--plugin`` files only as given (relative),
    so `findings` run from another folder printed a replay command naming a plugin there that did not exist, and
    `replay` of it without --plugin did not say which plugin the file was recorded with (a case file does); the three
    relations of one case listed under one id."""
    from jfa_verify.checks.calls import write_call_file
    from jfa_verify.checks.relations import Relation

    plugin = misbehaving_plugin("calls_kernel")
    here, elsewhere = plugin.parent, tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(here)
    case = Case(kv_lengths=(3, 5), head_dim=16, name="relations/0/self")
    for name in ("permutation", "batch_invariance"):
        write_call_file(tmp_path / "r" / f"{case.case_id()}-{name}-calls_kernel.calls.json", Relation(name, case, ()),
                        kernel="calls_kernel", device="cpu", status="fail", finding="rows moved",
                        plugins=(plugin.name,))
    monkeypatch.chdir(elsewhere)
    assert main(["findings", str(tmp_path / "r"), "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert len({r["id"] for r in rows}) == 2, rows
    assert all(f"--plugin {plugin}" in r["replay"] for r in rows), [r["replay"] for r in rows]
    assert main(["replay", rows[0]["path"], "--device", "cpu"]) == 2
    assert f"this call file was recorded with --plugin {plugin}: add that" in capsys.readouterr().err
    # (a new user's trial, 2026-12-07: the file named had been deleted since, and adding it failed "no such file")
    plugin.rename(plugin.with_suffix(".moved"))
    assert main(["replay", rows[0]["path"], "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"{plugin} no longer exist(s): give --plugin with the file that registers kernel 'calls_kernel'" in err, err


def test_outputs_that_cannot_be_written_are_refused_before_any_work(tmp_path, capsys):
    """Regression (a new user's trial): ``--reproducers /proc/r`` ended a campaign with a traceback and exit 1 (the
    code of a finding); ``--database`` under a file or in /proc ran and saved nothing; ``--read-from`` a missing
    folder was read as empty; ``--report``/``--png`` named like the reproducer folder gave a traceback after the
    campaign or no PNG; a kernel that does not run on the device spent the whole ``--duration`` first. Each is now
    a usage error (exit 2) naming the value, before any case runs."""
    import time

    afile = tmp_path / "afile"
    afile.write_text("")
    repro = str(tmp_path / "r")
    cases = [(["--reproducers", "/proc/r"], "cannot create a file in '/proc': the system refused it"),
             (["--database", str(afile / "sub")], "is a file, so no folder can be made under it"),
             (["--database", "/proc/nope"], "cannot create a file in '/proc': the system refused it"),
             (["--read-from", str(tmp_path / "missing")], "no such folder"),
             (["--reproducers", repro, "--report", repro], "--report"),
             (["--reproducers", repro, "--png", repro], "is the --reproducers folder"),
             (["--report", str(tmp_path / "a.json"), "--png", str(tmp_path / "a.json")], "give each its own file"),
             (["--kernel", "gluon_jfa", "--duration", "600"], "does not run on cpu"),
             (["--report", str(afile / "x.json")], "is a file, not a folder")]
    for extra, words in cases:
        t0 = time.monotonic()
        fresh = str(tmp_path / "never-made")  # a bad database must not leave the reproducer folder behind either
        assert main(["fuzz", "--device", "cpu", "--max-examples", "1", "--no-progress", "--reproducers", fresh,
                     *extra]) == 2, extra
        out, err = capsys.readouterr()
        assert words in err and "Traceback" not in err, (extra, err)
        assert "jfa-verify fuzz: kernel" not in out and not Path(fresh).exists(), (extra, out)  # before any work
        assert time.monotonic() - t0 < 30, extra
    assert not any(p.name.startswith(".jfa-write-check") for p in tmp_path.iterdir())  # the checks leave nothing


def test_fuzz_of_a_kernel_that_declines_every_case_is_nothing_checked_not_a_pass(tmp_path, capsys):
    """The device check up front cannot know a kernel that runs here but declines every case it is given (raises
    UnsupportedCase): that campaign still ends as "nothing checked", exit 2, never as a pass."""
    plugin = tmp_path / "declines.py"
    plugin.write_text(
        "from jfa_verify import Capabilities, UnsupportedCase, register_kernel\n\n"
        "@register_kernel('declines_all', capabilities=Capabilities(backward=False))\n"
        "def load():\n"
        "    def forward(*args, **kwargs):\n"
        "        raise UnsupportedCase('this build takes no case')\n"
        "    return forward\n")
    rc = main(["fuzz", "--device", "cpu", "--plugin", str(plugin), "--kernel", "declines_all", "--max-examples", "3",
               "--seed", "1", "--reproducers", str(tmp_path / "r"), "--no-progress", "--no-isolate"])
    err = capsys.readouterr().err
    assert rc == 2 and "nothing checked" in err and "declines_all" in err, err


def test_a_reader_that_leaves_early_neither_changes_the_exit_status_nor_loses_the_report(tmp_path):
    # regression (new-user trial): `jfa-verify run ... | head -2` exited 1, the code of a finding, with every case
    # passed: rich's console answers the broken pipe with SystemExit(1), before the report is completed
    import json
    import subprocess
    import sys

    report = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "run", "--device", "cpu", "--max-cases", "1",
                             "--no-progress", "--report", str(report), "--reproducers", str(tmp_path / "repro")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the first line
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    data = json.loads(report.read_text())
    assert data["finished"] is True and data["summary"]["pass"] == 1, data["summary"]


def test_the_standard_output_keeps_working_after_its_reader_left():
    import os

    from jfa_verify.cli.closed_reader import _ReaderMayLeave

    read, write = os.pipe()
    stream = os.fdopen(write, "w")
    os.close(read)
    out = _ReaderMayLeave(stream)
    assert out.write("x" * 100) == 100  # buffered: the pipe is not written yet
    out.flush()  # EPIPE here: from now on the text goes to os.devnull
    assert out.reader_gone
    assert out.write("more") == 4
    out.flush()
    stream.close()  # its buffer is flushed onto os.devnull, not the closed pipe


def test_a_campaign_stage_of_no_examples_is_a_usage_error_not_a_survivor(capsys):
    # regression (new-user trial): `mutants --stage campaign --max-examples 0` ran nothing and reported SURVIVED, rc 1
    from jfa_verify import cli

    rc = cli.main(["mutants", "--stage", "campaign", "--max-examples", "0", "--only", "kv_bound_minus_one"])
    assert rc == 2
    assert "--max-examples 0 with --stage campaign checks nothing" in capsys.readouterr().err


def test_an_error_line_meeting_a_closed_pipe_keeps_the_usage_exit_status():
    # regression (second new-user trial): `jfa-verify findings nodir 2>&1 | true` exited 1, not 2: the error
    # line went to a closed stderr and the BrokenPipeError replaced the usage error
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "jfa_verify.cli", "run", "--device", "cpu", "--kernel", "nope"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    proc.stderr.close()
    assert proc.wait(timeout=300) == 2


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_database_is_a_usage_error_not_the_default_folder(tmp_path, capsys, empty):
    # regression (new-user trial): `--database "$DB"` with DB unset ran on REPRODUCERS/.hypothesis without a word
    from jfa_verify import cli

    rc = cli.main(["fuzz", "--device", "cpu", "--max-examples", "1", "--no-progress",
                   "--reproducers", str(tmp_path / "r"), "--database", empty])
    assert rc == 2
    err = capsys.readouterr().err
    assert f"--database {empty!r} is empty" in err and str(tmp_path / "r" / ".hypothesis") in err
    assert not (tmp_path / "r" / ".hypothesis").exists()  # nothing ran


def test_findings_listing_only_cases_left_running_does_not_exit_0(tmp_path, capsys):
    # regression (new-user trial): a folder holding only a case left "running" (its process killed or taken down
    # mid-case) was listed with exit 0, which a CI step reads as "nothing found"
    import json

    from jfa_verify import Case
    from jfa_verify.run.corpus import Corpus, read_case_file

    folder = tmp_path / "repro"
    corpus = Corpus(folder)
    with corpus.guard(Case(kv_lengths=(3, 5)), "triton_jfa", "cpu") as path:
        pass  # no record: the file stays as a killed run leaves it
    assert read_case_file(path)[1]["status"] == "running"
    rc = main(["findings", str(folder), "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and [r["status"] for r in json.loads(out)] == ["running"]
    assert "1 case left running" in err and "not judged" in err
    # beside a real finding, the finding's status decides
    failed = json.loads(path.read_text())
    failed.update(status="crash", case=Case(kv_lengths=(4,)).to_dict())
    (folder / f"{Case(kv_lengths=(4,)).case_id()}-triton_jfa.json").write_text(json.dumps(failed))
    assert main(["findings", str(folder), "--json"]) == 4


def test_fuzz_without_live_progress_still_says_what_it_recovered(tmp_path, capsys):
    # regression (new-user trial): with --no-progress the notes on a killed campaign's leftovers and recovered
    # findings were dropped (they went to the live display only); they print as plain lines, and the report has them
    from jfa_verify.run.corpus import Corpus

    folder = tmp_path / "repro"
    with Corpus(folder).guard(Case(kv_lengths=(3,), dtype="float32", head_dim=16), "triton_jfa", "cpu") as path:
        pass  # left "running", as a kill -9 leaves it
    rc = main(["fuzz", "--device", "cpu", "--max-examples", "1", "--no-progress", "--no-isolate", "--seed", "0",
               "--reproducers", str(folder), "--report", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    note = f"left 'running' by a killed process: {path}: pass on replay"
    assert out.count(note) == 2, out  # when it happens, and in the summary
    assert note in json.loads((tmp_path / "r.json").read_text())["notes"]


def test_fuzz_names_a_case_file_it_cannot_read_leaves_it_and_does_not_pass(tmp_path, capsys, misbehaving_plugin):
    # regression (new-user trial): fuzz passed over a truncated case file in its folder without a word (and exited
    # 0), where `jfa-verify findings` exits 2 on it: a finding may be lost in it. It is named, with the fix, left as
    # it is, listed in the report, and the exit status is `findings`' (2 beside no finding)
    folder = tmp_path / "repro"
    folder.mkdir()
    broken = folder / f"{Case(kv_lengths=(3,)).case_id()}-triton_jfa.json"
    broken.write_text('{"format": "jfa-verify-case/1", "case": {"kv_len')  # cut short by a killed writer
    rc = main(["fuzz", "--device", "cpu", "--max-examples", "1", "--no-progress", "--no-isolate", "--seed", "0",
               "--reproducers", str(folder), "--report", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert rc == 2 == main(["findings", str(folder)]), out + err
    assert f"jfa-verify fuzz: error: {broken} is not a readable case file" in err and "restore it, or remove it" in err
    assert f"error: {broken} is not a readable case file" in out  # said before the campaign runs, too
    report = json.loads((tmp_path / "r.json").read_text())
    assert [b["path"] for b in report["unreadable_case_files"]] == [str(broken)] and report["exit_code"] == 2
    assert broken.read_text().endswith('"kv_len')  # untouched
    # beside a finding, the finding's status (a new user's CI step read a confirmed failure as a usage error, 2)
    from jfa_verify.core.exits import ExitCode

    plugin = misbehaving_plugin("always_wrong", wrong="True")
    rc = main(["fuzz", "--device", "cpu", "--plugin", str(plugin), "--kernel", "always_wrong", "--max-examples", "1",
               "--no-progress", "--no-isolate", "--seed", "0", "--shrink-seconds", "1", "--reproducers", str(folder),
               "--report", str(tmp_path / "r2.json")])
    out, err = capsys.readouterr()
    report = json.loads((tmp_path / "r2.json").read_text())
    assert rc == ExitCode.FINDING == report["exit_code"] and report["unreadable_case_files"], out + err
    assert f"jfa-verify fuzz: error: {broken} is not a readable case file" in err


def test_an_unreadable_case_files_reason_is_said_whole(tmp_path):
    # regression (new-user trial): the reason was cut at 200 characters, so an unknown field's message ended
    # mid-word inside the list of known fields
    from jfa_verify.fuzz.findings import unreadable_case_files

    folder = tmp_path / "repro"
    folder.mkdir()
    doc = {"format": "jfa-verify-case/1", "kernel": "triton_jfa", "status": "fail",
           "case": {**Case(kv_lengths=(3,)).to_dict(), "bogus_field": 1}}
    (folder / f"{Case(kv_lengths=(3,)).case_id()}-triton_jfa.json").write_text(json.dumps(doc))
    [(_, why)] = unreadable_case_files(folder)
    assert "unknown case fields ['bogus_field']" in why and why.endswith("'window']"), why


def test_ctrl_c_before_a_command_runs_is_one_line_and_exit_130(monkeypatch, capsys):
    # regression (new-user trial): Ctrl-C in a command's first second (torch loading) printed a raw traceback from the
    # console script, exit -2 and no word: `import jfa_verify.cli` loaded torch through the package before main ran.
    # It loads nothing heavy now, and main turns an interrupt anywhere before the command into one line and 130
    import subprocess
    import sys

    from jfa_verify import cli

    probe = ("import sys, jfa_verify.cli; "
             "print(sorted(m for m in ('torch', 'triton', 'hypothesis') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr

    def interrupted():
        raise KeyboardInterrupt  # as a Ctrl-C while build_parser's imports load torch

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["fuzz", "--device", "cpu"]) == 130
    assert capsys.readouterr().err.strip() == "jfa-verify: interrupted"


def test_sigterm_before_a_command_runs_is_one_line_and_exit_130():
    # regression (new-user trial): SIGTERM in a campaign's first seconds (a CI job's timeout while torch loads) killed
    # it by the signal, exit -15, no word and no report; it ends as Ctrl-C does now. (In a subprocess: on the old code
    # the signal kills the process that receives it.)
    import subprocess
    import sys

    probe = ("import os, signal, sys, time\n"
             "from jfa_verify import cli\n"
             "def loading():\n"
             "    os.kill(os.getpid(), signal.SIGTERM)  # as a CI timeout while build_parser's imports load torch\n"
             "    time.sleep(10)\n"
             "cli.build_parser = loading\n"
             "sys.exit(cli.main(['fuzz', '--device', 'cpu']))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130 and proc.stderr.strip() == "jfa-verify: interrupted", (proc.returncode, proc.stderr)


def test_a_missing_dependency_the_parser_needs_is_named_for_every_command(tmp_path):
    # regression (new-user trial): with numpy absent (`pip install --no-deps` beside a CPU torch wheel) every command,
    # --version too, died with a traceback and exit 1 while the argument parser was built
    import subprocess
    import sys

    probe = "import sys; sys.modules['numpy'] = None\nfrom jfa_verify.cli import main\nsys.exit(main(['--version']))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "a dependency is missing" in proc.stderr and "pip install numpy" in proc.stderr


def test_a_mutant_named_twice_runs_once(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["mutants", "--device", "cpu", "--only", "offsets_at_b", "offsets_at_b", "--max-examples", "0",
                 "--json", str(out)]) == 0
    assert [r["name"] for r in json.loads(out.read_text())] == ["offsets_at_b"]
    assert "1/1 mutants killed" in capsys.readouterr().out


def test_a_missing_dependency_of_jfa_verify_is_a_usage_error_not_a_finding(tmp_path, capsys, monkeypatch):
    # regression (H200, 2026-12-03): with allpairspy absent (an install with --no-deps) `jfa-verify run` died with a
    # ModuleNotFoundError traceback and exit 1, a finding's code, though nothing had been checked
    import sys

    from jfa_verify.cli import main

    monkeypatch.setitem(sys.modules, "allpairspy", None)  # `import allpairspy` now raises ModuleNotFoundError
    code = main(["run", "--kernel", "triton_jfa", "--max-cases", "2", "--no-progress",
                 "--reproducers", str(tmp_path / "r"), "--report", str(tmp_path / "report.json")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "a dependency is missing" in err and "pip install allpairspy" in err


def test_a_missing_module_of_an_optional_extra_names_the_extra():
    """Regression (a new user's trial, 2026-12-07): `jfa-verify report` without matplotlib said to "install
    jfa-verify with its dependencies", which the user had done: matplotlib is the optional extra ``plots``. The
    message names the extra to install (read from the installed package's metadata); a module of no extra keeps the
    general advice."""
    from jfa_verify.core.errors import missing_dependency

    e = ModuleNotFoundError("No module named 'matplotlib.figure'", name="matplotlib.figure")
    assert "optional extra 'plots': pip install 'jfa-verify[plots]'" in missing_dependency(e)
    e = ModuleNotFoundError("No module named 'redis'", name="redis")
    assert "pip install 'jfa-verify[redis]'" in missing_dependency(e)
    e = ModuleNotFoundError("No module named 'allpairspy'", name="allpairspy")
    assert "pip install allpairspy" in missing_dependency(e) and "extra" not in missing_dependency(e)


def test_a_crash_inside_the_tool_exits_70_not_a_findings_1(tmp_path, monkeypatch, capsys):
    """Regression (new-user trial): an exception inside jfa-verify itself (a traceback ending ``KeyError: ...``)
    exited 1, a kernel finding's code, so CI could not tell a tool bug from a kernel bug. It is an internal error:
    the message says so, with the traceback and where to report it, and the exit is its own code (70)."""
    from jfa_verify.cli import kernels
    from jfa_verify.core.exits import REPORT_INTERNAL_ERRORS, ExitCode

    def broken(args, ctx):
        raise KeyError("tile_m")

    monkeypatch.setattr(kernels, "main", broken)
    assert main(["kernels", "--device", "cpu"]) == ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert err.startswith("jfa-verify: internal error") and "Traceback" in err and "KeyError: 'tile_m'" in err
    assert REPORT_INTERNAL_ERRORS in err
    assert int(ExitCode.INTERNAL) not in (ExitCode.OK, ExitCode.FINDING, ExitCode.USAGE, ExitCode.HANG,
                                          ExitCode.CRASH, ExitCode.INTERRUPTED)


def test_a_run_where_every_case_passes_leaves_no_reproducer_folder(tmp_path, monkeypatch, capsys, misbehaving_plugin):
    """Regression (new-user trial): `run` made an empty ./jfa-reproducers/ when every case passed (each case's file
    is written before it runs and removed when it passes). The folder is made only to keep a file, and each command
    names its default output paths in --help."""
    plugin = misbehaving_plugin("passes_quietly")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "passes_quietly", "--max-cases", "1",
                 "--no-progress", "--quiet", "--report", str(tmp_path / "r.json")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([plugin.name, "r.json"]), list(tmp_path.iterdir())
    # ... and `findings` after it (its default folder absent) finds nothing, 0: `run && findings` in CI exited 2, a
    # usage error, exactly when everything passed (a new user's trial)
    capsys.readouterr()
    assert main(["findings"]) == 0 and "no findings" in capsys.readouterr().out
    # a folder named by --reproducers was asked for: kept, empty, so `findings FOLDER` reads it (a typo's is still 2)
    assert main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "passes_quietly", "--max-cases", "1",
                 "--no-progress", "--quiet", "--report", str(tmp_path / "r.json"), "--reproducers", "asked"]) == 0
    assert (tmp_path / "asked").is_dir() and not list((tmp_path / "asked").iterdir())
    assert main(["findings", "asked"]) == 0 and main(["findings", "askd"]) == 2
    capsys.readouterr()
    for command, defaults in (("run", ("jfa-report.json", "jfa-reproducers")),
                              ("gate", ("jfa-gate.json", "jfa-gate.junit.xml", "jfa-gate.md", "jfa-reproducers")),
                              ("fuzz", ("jfa-reproducers",))):
        assert main([command, "--help"]) == 0
        text = "".join(capsys.readouterr().out.split())  # (argparse wraps at hyphens)
        assert all(f"default:{name}" in text for name in defaults), (command, defaults)


def test_a_run_with_no_case_inside_the_kernel_names_the_option_that_narrowed_it(tmp_path, capsys,
                                                                                misbehaving_plugin):
    """Regression (a new user's trial): `run --filter broadcast_q` on a kernel without broadcast-Q, and `--suite
    windows` on one without windows, were told to "try jfa-verify fuzz", which does not help; the message now names
    the option that left no case."""
    plugin = misbehaving_plugin("no_case_here")
    plugin.write_text(plugin.read_text().replace("Capabilities(backward=False)",
                                                 "Capabilities(backward=False, modes=('self', 'cross'))"))
    base = ["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "no_case_here", "--no-progress", "--quiet",
            "--report", str(tmp_path / "r.json"), "--reproducers", str(tmp_path / "repro")]
    assert main(base + ["--filter", "broadcast"]) == 2
    err = capsys.readouterr().err
    assert "no case of suite 'default' is inside the capabilities" in err and "change --filter" in err
    assert "fuzz" not in err
    assert main(base + ["--suite", "windows"]) == 2
    assert "run the default suite (--suite default)" in capsys.readouterr().err


def test_a_kernel_no_case_can_be_drawn_for_is_refused_by_fuzz_and_run_does_not_send_it_there(tmp_path, capsys,
                                                                                                misbehaving_plugin):
    """Regression (a new user's trial, 2026-12-07): a kernel declaring only head_dims=(512,) got "try jfa-verify fuzz"
    from `run`; `fuzz` then started its workers, drew nothing and led with "no case finished before the campaign
    ended" (exit 2), the cause (no head dim it draws is the kernel's) buried in a round's note. `fuzz` refuses it
    before any worker starts, naming the cause; `run` says a campaign cannot draw one either."""
    plugin = misbehaving_plugin("only_d512")
    plugin.write_text(plugin.read_text().replace("Capabilities(backward=False)",
                                                 "Capabilities(backward=False, head_dims=(512,))"))
    common = ["--device", "cpu", "--plugin", str(plugin), "--kernel", "only_d512", "--no-progress"]
    assert main(["run", *common, "--quiet", "--report", str(tmp_path / "r.json"),
                 "--reproducers", str(tmp_path / "repro")]) == 2
    err = capsys.readouterr().err
    assert "nor can a campaign draw one" in err and "none of them is a head dim the kernel supports" in err, err
    assert "try jfa-verify fuzz" not in err
    assert main(["fuzz", *common, "--max-examples", "3", "--workers", "1",
                 "--reproducers", str(tmp_path / "campaign")]) == 2
    err = capsys.readouterr().err
    assert "the campaign can draw no case inside the capabilities of kernel 'only_d512' on cpu" in err, err
    assert "none of them is a head dim the kernel supports" in err and not (tmp_path / "campaign").exists()


def test_a_run_with_no_relation_check_says_none_ran_and_why_not_0_of_0_held(tmp_path, capsys, misbehaving_plugin):
    """Regression (new-user trials): on a kernel with gqa=False, `run --max-cases 3` ended with "0/0 relation checks
    held" while its report said they were not run because of --max-cases: the CPU relation batches need GQA, MQA or
    broadcast-Q, so an MHA-only kernel never got any. Their head grouping now falls back to one the kernel runs, and
    a self-attention-only kernel gets the first batch in self-attention
    (test_a_self_attention_only_kernel_with_a_stale_plan_cache_fails_a_relation_check). A suite without relation
    checks says so, not that none is inside the kernel's capabilities."""
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.checks.suites import relation_checks
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    def plugin(name, capabilities):
        path = misbehaving_plugin(name)
        path.write_text(path.read_text().replace("Capabilities(backward=False)", capabilities))
        return path

    mha = plugin("mha_only", "Capabilities(backward=False, gqa=False, modes=('self', 'cross'))")
    load_plugin(mha)
    relations = relation_checks(Target(get_kernel("mha_only"), "cpu"))
    assert relations and {r.case.num_heads_q == r.case.num_heads_kv for r in relations} == {True}
    for name, path, suite, why in (("mha_only", mha, "default", "--max-cases"),
                                   ("mha_only", mha, "mha", "suite 'mha' makes no relation checks; the default "
                                                            "suite does")):
        report = tmp_path / f"{name}-{suite}.json"
        assert main(["run", "--device", "cpu", "--plugin", str(path), "--kernel", name, "--max-cases", "3", "--quiet",
                     "--suite", suite, "--no-progress", "--report", str(report), "--reproducers",
                     str(tmp_path / "repro")]) == 0
        out = capsys.readouterr().out
        assert f"relation checks not run ({why})" in out and "relation checks held" not in out, out[-600:]
        assert json.loads(report.read_text())["relation_checks"]["not_run_because"] == why


_STALE_PLAN = """
_PLANS = {}


def _planned(q, k, q_offsets, k_offsets):
    # a host plan cached on the shapes alone: a later batch of the same shapes gets the first one's boundaries
    return _PLANS.setdefault((tuple(q.shape), tuple(k.shape)), (q_offsets, k_offsets))
"""


def test_a_self_attention_only_kernel_with_a_stale_plan_cache_fails_a_relation_check(misbehaving_plugin):
    """Regression (new-user trial): the relation batches were cross-attention and broadcast-Q only on the CPU, so a
    self-attention-only kernel got no relation check, and one whose host plan was cached on the tensors' shapes (a
    later batch with other boundaries computed with the first batch's) passed `run` and the whole gate. The first
    batch now keeps what of it the kernel runs: self-attention, causal, an empty sequence, GQA, mixed strides. Its
    lengths (0, 7) also showed that the sequence check's "same shapes" call, the lengths reversed, can split the
    tokens exactly where the first call did ((7, 0): every token in one sequence again): it moves a token then."""
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.checks.suites import relation_checks
    from jfa_verify.protocol.registry import get_kernel, load_plugin

    def plugin(name, stale):
        path = misbehaving_plugin(name)
        text = path.read_text().replace("Capabilities(backward=False)", "Capabilities(backward=False, modes=('self',))")
        if stale:
            text = text.replace("\n\n@register_kernel", _STALE_PLAN + "\n\n@register_kernel").replace(
                "        problem = validate_inputs(q, k, v, q_offsets, k_offsets,",
                "        q_offsets, k_offsets = _planned(q, k, q_offsets, k_offsets)\n"
                "        problem = validate_inputs(q, k, v, q_offsets, k_offsets,")
        path.write_text(text)
        load_plugin(path)
        return get_kernel(name)

    for name, stale in (("self_only_fresh", False), ("self_only_stale", True)):
        kernel = plugin(name, stale)
        relations = relation_checks(Target(kernel, "cpu"))
        assert {r.name for r in relations} == {"permutation", "batch_invariance", "sequence"}
        first = relations[0].case
        assert first.mode == "self" and first.causal and 0 in first.kv_lengths
        assert first.num_heads_q > first.num_heads_kv
        findings = {r.name: r.check(kernel, "cpu") for r in relations}
        if stale:
            assert findings["sequence"] is not None, findings
        else:
            assert findings == {r.name: None for r in relations}, findings


def test_a_kernel_whose_rows_read_the_next_sequences_first_key_fails_a_relation_check(misbehaving_plugin):
    """Regression (new-user trial): the relation batches drew lengths like kv (15, 0, 0) with queries (2, 63, 0)
    at the default seed: one sequence with both queries and keys, no neighbour for it to read, so a kernel that
    added the next sequence's first value row to each sequence's output held all three relations. Every relation
    batch now has two neighbouring sequences that attend."""
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.checks.suites import relation_checks
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from tests.helpers import reads_its_neighbour

    load_plugin(reads_its_neighbour(misbehaving_plugin("reads_its_neighbour")))
    kernel = get_kernel("reads_its_neighbour")
    correct = misbehaving_plugin("keeps_to_itself")
    correct.write_text(correct.read_text().replace("Capabilities(backward=False)",
                                                   "Capabilities(backward=False, modes=('self', 'cross'))"))
    load_plugin(correct)
    for seed in range(3):
        for r in relation_checks(Target(kernel, "cpu"), seed):
            live = [bool(q and k) for q, k in zip(r.case.query_lengths, r.case.kv_lengths)]
            assert any(a and b for a, b in zip(live, live[1:])), (seed, r.case.describe())
            # (seed 0's batch has a sequence of 31 queries and 1 key, bottom-right: rows that see no key, whose zeros
            # the float64 reference signs differently alone and in the batch; a zero is a zero)
            assert r.check(get_kernel("keeps_to_itself"), "cpu") is None, (seed, r.name, r.case.describe())
    findings = {r.name: r.check(kernel, "cpu") for r in relation_checks(Target(kernel, "cpu"))}
    assert findings["batch_invariance"] is not None and findings["permutation"] is not None, findings


def test_run_and_gate_have_a_default_timeout_so_a_hanging_kernel_cannot_hold_them_forever(capsys):
    """Regression (new-user trial): `run` and `gate` had no default --timeout and their --help said nothing of it, so
    `run --kernel bug_hang --max-cases 1` sat forever (fuzz had 120 s). Both default to one per-case limit, said in
    --help, that reaches the run's settings (isolated workers are killed past it; --no-isolate's watchdog marks the
    case a hang and exits 3); --timeout still changes it."""
    from jfa_verify.cli import build_parser
    from jfa_verify.cli.context import Context
    from jfa_verify.run.settings import DEFAULT_CASE_TIMEOUT_S

    parser = build_parser()
    for command in (["run"], ["run", "--no-isolate"], ["gate"]):
        assert Context.from_args(parser.parse_args(command)).settings.timeout_s == DEFAULT_CASE_TIMEOUT_S
        assert main([command[0], "--help"]) == 0
        assert f"default: {DEFAULT_CASE_TIMEOUT_S:g}" in " ".join(capsys.readouterr().out.split())
    assert Context.from_args(parser.parse_args(["run", "--timeout", "7"])).settings.timeout_s == 7


def test_an_inline_case_without_a_generator_field_says_which_values_it_gets(capsys):
    from jfa_verify.cli import main

    plain = '{"kv_lengths": [5], "num_heads_q": 1, "num_heads_kv": 1, "head_dim": 16}'
    assert main(["replay", "--device", "cpu", "--case", plain]) == 0
    assert 'no "generator" field' in capsys.readouterr().out
    counter = plain[:-1] + ', "generator": "counter"}'
    assert main(["replay", "--device", "cpu", "--case", counter]) == 0
    assert "generator" not in capsys.readouterr().out


PLAIN_PLUGIN = '''
import torch
from jfa_verify import Capabilities, register_kernel, validate_inputs
from jfa_verify.oracles import reference_attention


def attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
    problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                              sm_scale=sm_scale)
    ref = reference_attention(problem, q.detach(), k.detach(), v.detach())
    EXIT_HERE
    return ref["o"].to(q.dtype), ref["lse"].float()


register_kernel("trial-plain", capabilities=Capabilities(backward=False))(lambda: attention)
'''


def test_trial_outputs_and_exits_of_plugins_and_kernels(tmp_path, capsys):
    """Regressions (a new user's trial, 2026-12-05): ``--report pk.py`` replaced the plugin under test with the
    report; ``sys.exit(0)`` in a plugin's import, or in a kernel run in-process, was a silent green run (exit 0, no
    output); ``--report`` on a symbolic link replaced the link with a file and never wrote its target."""
    import os

    plugin = tmp_path / "pk.py"
    plugin.write_text(PLAIN_PLUGIN.replace("EXIT_HERE", "pass"))
    source = plugin.read_text()
    common = ["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "trial-plain", "--max-cases", "1",
              "--no-progress", "--reproducers", str(tmp_path / "r")]
    assert main([*common, "--report", str(plugin)]) == 2
    assert "is the --plugin file" in capsys.readouterr().err and plugin.read_text() == source

    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("{}")
    os.symlink(target, link)
    assert main([*common, "--no-isolate", "--report", str(link)]) == 0, capsys.readouterr()
    assert link.is_symlink() and json.loads(target.read_text())["finished"] is True

    exits = tmp_path / "exits_on_import.py"
    exits.write_text("import sys\nsys.exit(0)\n")
    assert main(["run", "--device", "cpu", "--plugin", str(exits), "--kernel", "trial-plain", "--max-cases", "1"]) == 2
    assert "called sys.exit(0) while being imported" in capsys.readouterr().err
    exits = tmp_path / "os_exits_on_import.py"  # (this process survives it: the exit is refused, not taken)
    exits.write_text("import os\nos._exit(0)\n")
    assert main(["gate", "--device", "cpu", "--plugin", str(exits), "--kernel", "trial-plain"]) == 2
    assert "called os._exit(0) while being imported" in capsys.readouterr().err

    exits = tmp_path / "exits_in_its_call.py"
    exits.write_text(PLAIN_PLUGIN.replace("EXIT_HERE", "import sys; sys.exit(0)").replace("trial-plain", "trial-exit"))
    assert main(["run", "--device", "cpu", "--plugin", str(exits), "--kernel", "trial-exit", "--max-cases", "1",
                 "--no-progress", "--reproducers", str(tmp_path / "r2"), "--no-isolate"]) == 1
    assert "the kernel called sys.exit(0) during its call" in capsys.readouterr().out


def test_findings_passes_over_a_run_report_beside_the_case_files(tmp_path, capsys):
    """Regression (a new user's trial): ``run --reproducers out --report out/report.json`` then ``findings out``
    exited 2, calling the report a case file in which a finding may be lost."""
    from fuzz.findings import unreadable_case_files
    from jfa_verify.run.report import write_json

    out = tmp_path / "out"
    out.mkdir()
    write_json(out / "report.json", {"kernel": "k", "summary": {}, "cases": [], "environment": {}, "finished": True})
    (out / "broken.json").write_text("{not json")
    assert [p.name for p, _ in unreadable_case_files(out)] == ["broken.json"]
    (out / "broken.json").unlink()
    assert main(["findings", str(out)]) == 0, capsys.readouterr()


def test_run_says_when_the_backward_went_unchecked(tmp_path, capsys):
    """Regression (a new user's trial): a forward-only kernel's run printed "3 passed" and nothing else said that
    dQ, dK, dV were never checked (only the JSON report did)."""
    plugin = tmp_path / "fwd_only.py"
    plugin.write_text(PLAIN_PLUGIN.replace("EXIT_HERE", "pass").replace("trial-plain", "trial-forward-only"))
    assert main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "trial-forward-only",
                 "--max-cases", "2", "--no-progress", "--reproducers", str(tmp_path / "r"), "--report",
                 str(tmp_path / "r.json")]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("judged forward only")]
    assert len(lines) == 1 and lines[0].startswith("judged forward only (O, LSE; dQ, dK, dV not checked) in 2 case(s)")


def _run_one_case_and_relations(tmp_path, monkeypatch, capsys, plugin, kernel) -> tuple[int, str, list]:
    """``jfa-verify run`` of ``kernel`` from ``plugin`` on the default suite's first case and its relation checks:
    ``(exit status, the output on one line, the report's relation checks)``."""
    import dataclasses

    from jfa_verify.checks import suites

    real = suites.get_suite
    monkeypatch.setattr(suites, "get_suite", lambda *a, **k: dataclasses.replace(real(*a, **k),
                                                                                cases=real(*a, **k).cases[:1]))
    report = tmp_path / "r.json"
    rc = main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", kernel, "--no-isolate",
               "--no-progress", "--report", str(report), "--reproducers", str(tmp_path / "repro")])
    out = " ".join(capsys.readouterr().out.split())
    return rc, out, json.loads(report.read_text())["relation_checks"]["checks"] if report.exists() else []


def test_a_run_names_the_relation_checks_it_ran(tmp_path, monkeypatch, capsys, misbehaving_plugin):
    # regression (a new user's trial): "3/3 relation checks held" for one kernel and "5/5" for another, with no word of
    # which checks ran on which batch, on screen or in the report
    plugin = misbehaving_plugin("names_its_checks")
    rc, out, checks = _run_one_case_and_relations(tmp_path, monkeypatch, capsys, plugin, "names_its_checks")
    assert rc == 0, out[-2000:]
    names = list(dict.fromkeys(c["relation"] for c in checks))
    assert names == ["permutation", "batch_invariance", "sequence"] and all(c["held"] for c in checks), checks
    assert {c["batch"] for c in checks} >= {"relations/0/cross", "relations/1/broadcast_q"}
    assert f"{len(checks)}/{len(checks)} relation checks held (permutation, batch_invariance, sequence)" in out, out


def test_a_run_names_the_relation_check_that_broke(tmp_path, monkeypatch, capsys, misbehaving_plugin):
    """A new user's run (helper-67) printed "2/3 relation checks held (permutation, batch_invariance, sequence)":
    every relation run, none named as the one that broke. The summary now names the broken ones, as the report
    records them."""
    plugin = misbehaving_plugin("stale_for_summary")
    plugin.write_text(plugin.read_text().replace("\n\n@register_kernel", _STALE_PLAN + "\n\n@register_kernel").replace(
        "        problem = validate_inputs(q, k, v, q_offsets, k_offsets,",
        "        q_offsets, k_offsets = _planned(q, k, q_offsets, k_offsets)\n"
        "        problem = validate_inputs(q, k, v, q_offsets, k_offsets,"))
    rc, out, checks = _run_one_case_and_relations(tmp_path, monkeypatch, capsys, plugin, "stale_for_summary")
    assert rc == 1, out[-2000:]
    broken = list(dict.fromkeys(c["relation"] for c in checks if not c["held"]))
    assert broken and f"; broken: {', '.join(broken)}" in out, (broken, out[-800:])
    # (helper-73's trial: "2/3 relation checks held (permutation, batch_invariance, sequence); broken: sequence" named
    # the broken check among those that held; the parentheses name the ones that held)
    held = list(dict.fromkeys(c["relation"] for c in checks if c["held"]))
    assert f"relation checks held ({', '.join(held)}); broken: {', '.join(broken)}" in out, (held, broken, out[-800:])
