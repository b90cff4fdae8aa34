"""``jfa-verify bisect``: git bisect run in a temporary worktree names the commit that broke correctness, speed
or bits; an untestable commit is skipped with its reason, never blamed; the user's checkout and reproducer
files are never touched. The repositories are built by :mod:`tests.bisect_repo` (a plain-torch plugin kernel
with planted commits)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from jfa_verify.cases.case import Case
from jfa_verify.checks.drift import output_drift
from jfa_verify.checks.slowdown import judge_slowdown, median_interval
from jfa_verify.cli import main
from jfa_verify.run.corpus import FORMAT
from jfa_verify.run.settings import RunSettings
from jfa_verify.workflows.bisect.config import GIT_EXIT, STEP_EXIT, StepConfig, step_script
from tests.bisect_repo import KERNEL, PLUGIN, build_toy_repo

CASE = Case(kv_lengths=(5, 17, 9), num_heads_q=2, num_heads_kv=2, head_dim=32, dtype="float32", seed=3, name="toy")


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return build_toy_repo(tmp_path_factory.mktemp("bisect") / "repo")


def _reproducer(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "toy.json"
    path.write_text(json.dumps({"format": FORMAT, "case": CASE.to_dict(), "kernel": KERNEL, "status": "fail"}))
    return path


def _bisect(repo, good, bad, out, *extra):
    return main(["bisect", "--repo", str(repo), "--good", good, "--bad", bad, "--plugin", PLUGIN, "--device", "cpu",
                 "--out", str(out), *extra])


def _report(out: Path) -> dict:
    return json.loads((out / "bisect.json").read_text())


def _steps(report: dict) -> dict:
    """commit -> step record (each commit is tested once)."""
    return {s["commit"]: s for s in report["steps"]}


def _user_state(repo) -> tuple:
    return (repo.git("rev-parse", "HEAD"), repo.git("symbolic-ref", "HEAD"), repo.git("status", "--porcelain"),
            repo.git("worktree", "list", "--porcelain").count("worktree "), repo.git("for-each-ref", "refs/bisect"))


def _replay_at(repo, commit: str, case_file, tmp_path) -> int:
    """Replay ``case_file`` with the plugin as it is at ``commit`` (the report's replay recipe)."""
    from jfa_verify.protocol import registry

    checkout = tmp_path / f"at-{commit[:7]}"
    repo.git("worktree", "add", "--detach", str(checkout), commit)
    # A user's replay is a process of its own; here, forget another commit's copy (a name is registered once).
    registry._REGISTRY.pop(KERNEL, None)
    try:
        return main(["replay", str(case_file), "--kernel", KERNEL, "--plugin", str(checkout / PLUGIN),
                     "--device", "cpu"])
    finally:
        repo.git("worktree", "remove", "--force", str(checkout))


def test_bisect_names_the_correctness_bug_skips_the_broken_import_and_touches_nothing(toy, tmp_path, capsys):
    repro = _reproducer(toy.path / "jfa-reproducers")  # where the tool writes them: inside the user's checkout
    before, content = _user_state(toy), repro.read_bytes()
    out = tmp_path / "out"
    rc = _bisect(toy.path, toy.commits[0], "main", out, "--case", str(repro))
    text = capsys.readouterr().out
    report = _report(out)
    assert rc == 0, text
    c = toy.commits
    assert report["status"] == "found" and report["first_bad"] == c[7] and report["candidates"] == [c[7]]
    assert f"FIRST BAD COMMIT: {c[7]} Stop one key early" in text
    steps = _steps(report)
    assert steps[c[0]]["role"] == "good" and steps[c[0]]["verdict"] == "good"
    assert steps[c[9]]["role"] == "bad" and steps[c[9]]["verdict"] == "bad"
    # the commit whose plugin does not import was tested, skipped with its reason, and not blamed
    broken = steps[c[4]]
    assert broken["verdict"] == "skip"
    assert "ModuleNotFoundError" in broken["reason"] and "softmax_helpers" in broken["reason"]
    assert steps[c[6]]["verdict"] == "good" and steps[c[7]]["verdict"] == "bad"
    # the failing outputs and where: sequence, head, token
    outputs = {o["output"]: o for o in steps[c[7]]["details"]["outputs"]}
    assert {"o", "lse"} <= set(outputs)
    assert "sequence" in outputs["o"]["location"] and "token" in outputs["o"]["location"]
    assert "o: max abs error" in text and "at sequence" in text
    assert all(s["seconds"] > 0 for s in report["steps"])
    # the reproducer that shows it, next to the reports, replays as a failure at the first bad commit
    kept = Path(report["reproducer"])
    assert kept.parent == out and json.loads(kept.read_text())["case"] == CASE.to_dict()
    assert "--plugin" in report["replay"] and c[7][:10] in report["replay"]
    assert _replay_at(toy, c[7], kept, tmp_path) == 1
    markdown = (out / "bisect.md").read_text()
    assert f"**First bad commit: `{c[7]}`** Stop one key early" in markdown and "| # | commit |" in markdown
    assert "Move the softmax helper to a module | candidate | skip" in markdown
    # the user's checkout, branch, reproducer, worktrees and bisect state are as they were
    assert _user_state(toy) == before and repro.read_bytes() == content


def test_drift_bisect_finds_the_rounding_change_that_float64_passes(toy, tmp_path, capsys):
    repro = _reproducer(tmp_path / "cases")
    c, out = toy.commits, tmp_path / "drift"
    rc = _bisect(toy.path, c[0], c[3], out, "--case", str(repro), "--drift")
    report = _report(out)
    assert rc == 0, capsys.readouterr().out
    assert report["first_bad"] == c[2] and report["first_bad_subject"] == "Scale queries before the score matmul"
    moved = {m["name"]: m for m in _steps(report)[c[2]]["details"]["drift"]}
    assert "o" in moved and 0 < moved["o"]["max_abs"] < 1e-5 and moved["o"]["changed"] > 0
    assert "sequence" in moved["o"]["location"]
    # the moved result is still inside the float64 verdict's allowance at that commit
    assert _replay_at(toy, c[2], report["reproducer"], tmp_path) == 0
    # within a tolerance above the rounding change, nothing moved: the bad endpoint passes, nothing is bisected
    out2 = tmp_path / "drift-atol"
    rc = _bisect(toy.path, c[0], c[3], out2, "--case", str(repro), "--drift", "--atol", "1e-4")
    err = capsys.readouterr()
    assert rc == 2 and _report(out2)["status"] == "usage"
    assert "passes" in _report(out2)["message"] and "nothing to bisect" in err.out


def test_perf_bisect_names_the_planted_slowdown(toy, tmp_path, capsys):
    # The CPU of a shared CI machine is noisy (a fresh process can run this small kernel 2x slower for its
    # whole life), so the threshold is wide; the planted sleep makes the kernel about 25x slower.
    c, out = toy.commits, tmp_path / "perf"
    rc = _bisect(toy.path, c[5], c[7], out, "--kernel", KERNEL, "--perf", "--threshold", "300%", "--block-ms", "10",
                 "--rounds", "6")
    text = capsys.readouterr().out
    report = _report(out)
    assert rc == 0, text
    assert report["first_bad"] == c[6] and report["first_bad_subject"] == "Check offsets on the host"
    steps = _steps(report)
    assert "noise check (good against itself)" in steps[c[5]]["reason"]
    slow = steps[c[6]]["details"]
    assert slow["slowdown"]["low"] > 4.0 and len(slow["baseline_ms"]) == len(slow["candidate_ms"]) >= 6
    assert min(slow["candidate_ms"]) > 20.0  # the planted 20 ms sleep, timed by wall clock
    assert "median slowdown" in text and "interleaved rounds" in text


def test_a_kernel_crash_is_bad_and_a_hang_is_skipped(tmp_path, capsys):
    repo = build_toy_repo(tmp_path / "repo", steps=[
        ("Add jagged attention kernel", {}),
        ("Wait for the device", {"sleep": "time.sleep(60)"}),
        ("Read past the end", {"sleep": "__import__('os').abort()"}),
    ])
    repro = _reproducer(tmp_path / "cases")
    out = tmp_path / "out"
    rc = _bisect(repo.path, repo.commits[0], repo.commits[2], out, "--case", str(repro), "--timeout", "6")
    report = _report(out)
    assert rc == 1, capsys.readouterr().out  # inconclusive: the hang hides whether the crash came first
    steps = _steps(report)
    crash = steps[repo.commits[2]]
    assert crash["verdict"] == "bad" and "SIGABRT" in crash["reason"]
    assert "oracles alone run this case fine" in crash["reason"]
    assert steps[repo.commits[1]]["verdict"] == "skip" and "timeout" in steps[repo.commits[1]]["reason"]
    assert report["status"] == "inconclusive" and set(report["candidates"]) == set(repo.commits[1:])


def test_with_hang_is_bad_the_commit_that_starts_hanging_is_the_first_bad_one(tmp_path, capsys):
    """A regression that hangs is bisected to its commit: with ``--hang-is-bad`` a case past ``--timeout`` is bad,
    its case file (marked a hang) is the reproducer kept next to the report."""
    repo = build_toy_repo(tmp_path / "repo", steps=[
        ("Add jagged attention kernel", {}),
        ("Tidy the launch", {"version": "1.1"}),
        ("Wait for the device", {"sleep": "time.sleep(60)"}),
        ("Bump the version", {"version": "1.2"}),
    ])
    out = tmp_path / "out"
    rc = _bisect(repo.path, repo.commits[0], repo.commits[3], out, "--case", str(_reproducer(tmp_path / "cases")),
                 "--timeout", "6", "--hang-is-bad")
    report = _report(out)
    assert rc == 0, capsys.readouterr().out
    assert report["first_bad"] == repo.commits[2], report
    hung = _steps(report)[repo.commits[2]]
    assert hung["verdict"] == "bad" and "hang" in hung["reason"] and "--timeout 6 s" in hung["reason"], hung
    assert Path(report["reproducer"]).is_file() and Path(report["reproducer"]).parent == out


def test_replay_inside_git_bisect_run_keeps_its_file(tmp_path):
    """Regression (issue 14): ``git bisect run jfa-verify replay FILE`` deleted FILE when the case passed, every
    later step failed with "case file does not exist" (exit 2, read as bad), and git blamed the wrong commit."""
    repo = build_toy_repo(tmp_path / "repo")
    repro = _reproducer(repo.path / "jfa-reproducers")
    content = repro.read_bytes()
    c = repo.commits
    repo.git("bisect", "start", c[9], c[5])
    try:
        subprocess.run(["git", "-C", str(repo.path), "bisect", "run", sys.executable, "-m", "jfa_verify.cli", "replay",
                        str(repro), "--plugin", PLUGIN, "--device", "cpu"], capture_output=True, text=True,
                       timeout=300, check=True)
        first_bad = repo.git("rev-parse", "refs/bisect/bad")
    finally:
        repo.git("bisect", "reset")
    assert first_bad == c[7]
    assert repro.read_bytes() == content


@pytest.mark.parametrize("overrides, flags, message", [
    ({"--repo": "{tmp}"}, [], "not a git repository"),
    ({"--good": "no-such-rev"}, [], "--good no-such-rev: no such commit"),
    ({"--good": "{c9}", "--bad": "{c0}"}, [], "they look swapped"),
    ({"--bad": "{c0}"}, [], "are the same commit"),
    ({"--plugin": "kernels/missing.py"}, [], "--plugin kernels/missing.py: not in the --good commit"),
    ({"--plugin": "{tmp}/elsewhere.py"}, [], "is outside the repository"),
    # (a new user's trial, 2026-12-07: it stopped the good step with "No module named ..." instead)
    ({"--plugin": None, "--module": "jfa_kernel", "--module-root": "nodir"}, [],
     "--module-root nodir: no such folder in the --good commit"),
    ({"--atol": "1e-3"}, [], "--atol 0.001 is the --drift tolerance"),
    ({}, ["--perf"], "--perf times the named benchmark --batch; drop --case"),
    ({"--case": None, "--rounds": "10", "--max-rounds": "6"}, ["--perf"],
     "--rounds 10 is more than --max-rounds 6: the first batch of rounds would be the last"),
    ({"--threshold": "5%"}, [], "--threshold is for --perf"),
    ({}, ["--drift", "--perf"], "--perf and --drift are different bisects"),
    ({"--case": None}, [], "say what to test with exactly one of --case FILE"),
    # (a new user's --filter without --suite got the line above)
    ({"--case": None, "--filter": "tile-edges"}, [], "--filter 'tile-edges' picks cases of a suite: add --suite NAME"),
    ({}, ["--hang-is-bad"], "--hang-is-bad needs --timeout SECONDS"),
])
def test_usage_errors_exit_2_before_anything_runs(toy, tmp_path, capsys, overrides, flags, message):
    fields = {"tmp": str(tmp_path), "c0": toy.commits[0], "c9": toy.commits[9]}
    options = {"--repo": str(toy.path), "--good": toy.commits[0], "--bad": "main", "--plugin": PLUGIN,
               "--case": str(_reproducer(tmp_path / "cases"))}
    options.update({k: v if v is None else v.format(**fields) for k, v in overrides.items()})
    argv = ["bisect", "--device", "cpu", "--out", str(tmp_path / "out"), *flags]
    for key, value in options.items():
        argv += [] if value is None else [key, value]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and message in err, err
    assert not (tmp_path / "out" / "bisect.json").exists()  # nothing ran
    assert toy.git("worktree", "list", "--porcelain").count("worktree ") == 1


def test_step_wrapper_maps_verdicts_to_git_codes_and_a_dead_step_to_its_handler(tmp_path):
    """The step's Python never speaks git's codes itself (a Python that cannot start exits 1, which git would
    read as bad); the wrapper maps them, hands any other status to ``died``, and stops the bisect when that
    handler cannot answer either."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "$@" >> "$LOG"\n'
                    'case "$3" in run) exit "$RUN_RC" ;; died) exit "$DIED_RC" ;; esac\nexit 99\n')
    fake.chmod(0o755)
    config = StepConfig(state=str(tmp_path), repo="r", worktree="w", good_commit="g", kernel="k", python=str(fake),
                        step_timeout=60)
    (tmp_path / "step.sh").write_text(step_script(config))

    def step(run_rc, died_rc=0):
        log = tmp_path / f"log-{run_rc}-{died_rc}"
        env = {**os.environ, "LOG": str(log), "RUN_RC": str(run_rc), "DIED_RC": str(died_rc)}
        rc = subprocess.run(["sh", str(tmp_path / "step.sh"), "bad"], env=env, capture_output=True).returncode
        return rc, log.read_text()

    for verdict, code in STEP_EXIT.items():
        rc, log = step(code)
        assert rc == GIT_EXIT[verdict] and "died" not in log
    rc, log = step(134, died_rc=STEP_EXIT["bad"])  # killed by SIGABRT: the handler decides (here: the kernel)
    assert rc == 1 and "died" in log and "--status 134" in log and "--role bad" in log
    rc, _ = step(1, died_rc=STEP_EXIT["skip"])  # a Python that never started: not "bad"
    assert rc == 125
    rc, _ = step(1, died_rc=1)  # the handler cannot start either: stop the bisect, blame nothing
    assert rc == GIT_EXIT["abort"]


def test_slowdown_interval_is_the_sign_test_interval_and_judges_both_ways():
    low, med, high, coverage = median_interval([5, 1, 4, 2, 3, 6], 0.95)  # n=6: k=1, 1 - 2/64
    assert (low, med, high) == (1, 3.5, 6) and coverage == pytest.approx(1 - 2 / 64)
    low, med, high, coverage = median_interval(range(1, 10), 0.95)  # n=9: k=2, 1 - 2 * 10/512
    assert (low, med, high) == (2, 5, 8) and coverage == pytest.approx(1 - 20 / 512)
    assert median_interval([1, 2, 3, 4, 5], 0.95)[0] == float("-inf")  # too few rounds to say anything
    base = [1.0, 1.02, 0.99, 1.01, 1.0, 0.98, 1.0, 1.03]
    assert judge_slowdown(base, [b * 1.3 for b in base], 0.05).verdict == "bad"
    assert judge_slowdown(base, [b * 1.01 for b in base], 0.05).verdict == "good"
    noisy = [1.0, 1.1, 0.95, 1.12, 0.97, 1.08, 1.0, 1.06]
    judged = judge_slowdown(base, noisy, 0.05)
    assert judged.verdict == "undecided" and judged.low < 1.05 < judged.high
    base12 = base + base[:4]  # n=12: k=3, so two stray rounds on either side cannot move the interval past them
    strays = [b * 1.3 for b in base12[:-2]] + [base12[-2] * 0.1, base12[-1] * 0.5]
    assert judge_slowdown(base12, strays, 0.05).verdict == "bad"
    with pytest.raises(ValueError, match="paired"):
        judge_slowdown([1.0], [1.0, 2.0], 0.05)
    with pytest.raises(ValueError, match="positive"):
        judge_slowdown([1.0] * 6, [0.0] * 6, 0.05)


def test_output_drift_bit_for_bit_and_within_a_tolerance():
    a = torch.tensor([[1.0, 0.0, float("nan")], [2.0, float("-inf"), 3.0]])
    assert output_drift({"o": a}, {"o": a.clone()}) == []  # NaN and -inf where they were: nothing moved
    b = a.clone()
    b[0, 1] = -0.0  # same value, other bits
    b[1, 2] = torch.nextafter(torch.tensor(3.0), torch.tensor(4.0))
    (moved,) = output_drift({"o": a}, {"o": b})
    assert moved.changed == 2 and moved.index == (1, 2) and moved.max_abs == pytest.approx(2.0**-22)
    assert output_drift({"o": a}, {"o": b}, atol=1e-6) == []
    c = b.clone()
    c[1, 0] = float("inf")  # an infinity that appears moved, whatever the tolerance
    (moved,) = output_drift({"o": a}, {"o": c}, atol=1.0)
    assert moved.changed == 1 and moved.index == (1, 0) and moved.after == float("inf")
    notes = {m.name: m.note for m in output_drift({"o": a, "lse": a}, {"o": a[:1]})}
    assert "shape/dtype changed" in notes["o"] and notes["lse"] == "output missing in this commit"


def test_poisoned_allocations_do_not_import_inductor():
    """Regression: each bisect step (a fresh process) spent 2.7 s in torch.use_deterministic_algorithms, which
    imports torch._inductor to mirror the flag; the NaN-poisoned allocations need only the flag."""
    code = ("import sys, torch\nfrom jfa_verify.run.runner import poisoned_allocations\n"
            "with poisoned_allocations():\n"
            "    assert torch.are_deterministic_algorithms_enabled() and torch.isnan(torch.empty(3)).all()\n"
            "assert not torch.are_deterministic_algorithms_enabled() and torch.empty(0).numel() == 0\n"
            "assert 'torch._inductor' not in sys.modules, 'inductor imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_gpu_bisect_repository_plants_one_slowdown_and_stays_correct(tmp_path, monkeypatch):
    """``ci/gpu_bisect.py``'s repository (run on the H200): the planted commit launches the forward kernel LAUNCHES
    times, the good one once; both compute the right outputs, and the tile-visit check sees every tile rerun."""
    from jfa_verify.protocol import registry
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from jfa_verify.run.runner import run_case

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ci"))
    try:
        import gpu_bisect
    finally:
        sys.path.pop(0)
    commits = gpu_bisect.build_repo(tmp_path / "repo")
    repo = tmp_path / "repo"
    assert len(commits) == 6 and gpu_bisect.REPEATED.strip() in subprocess.run(
        ["git", "-C", str(repo), "show", commits[gpu_bisect.PLANTED]], capture_output=True, text=True).stdout
    case = Case(kv_lengths=(5, 19), num_heads_q=2, num_heads_kv=2, head_dim=16, dtype="float32", seed=1)
    for index, launches in ((0, 1), (gpu_bisect.PLANTED, gpu_bisect.LAUNCHES)):
        checkout = tmp_path / f"c{index}"
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(checkout), commits[index]],
                       capture_output=True, check=True)
        # each commit's copy registers the name afresh, as in a bisect step's own process (a second copy
        # under a taken name is refused)
        monkeypatch.delitem(registry._REGISTRY, "triton_jfa_bisect", raising=False)
        load_plugin(checkout / "kern.py")
        kernel = get_kernel("triton_jfa_bisect")
        kmod = kernel.impl.kernels
        assert Path(kmod.__file__).parent == checkout  # this commit's copy, not the installed kernels
        counted = _CountLaunches(kmod._fwd_kernel)
        kmod._fwd_kernel = counted
        result = run_case(case, kernel, "cpu", RunSettings(backward=False), instrument=False)
        assert result.status == "pass", result.explain()
        assert counted.launches == launches
        instrumented = run_case(case, kernel, "cpu", RunSettings(backward=False))
        assert (instrumented.status == "pass") == (launches == 1), instrumented.explain()
        if launches > 1:
            assert f"ran {launches} times: a valid tile did not run exactly once" in instrumented.explain()


class _CountLaunches:
    """Stands in for a Triton kernel: ``kernel[grid](...)`` counts, then launches."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def counted(*args, **kwargs):
            self.launches += 1
            return launch(*args, **kwargs)

        return counted


def test_a_campaign_with_a_fixed_seed_blames_the_bug_with_its_shrunk_case(toy, tmp_path, capsys):
    c, out = toy.commits, tmp_path / "campaign"
    rc = _bisect(toy.path, c[6], c[7], out, "--kernel", KERNEL, "--campaign", "6", "--seed", "1", "--forward-only")
    text = capsys.readouterr().out
    report = _report(out)
    assert rc == 0, text
    assert report["first_bad"] == c[7] and "campaign (seed 1, shrunk)" in _steps(report)[c[7]]["reason"]
    assert "at sequence" in text and Path(report["reproducer"]).is_file()


def test_build_runs_first_at_each_commit_and_a_failing_build_is_a_skip_with_its_reason(toy, tmp_path, capsys):
    """Also: the kernel imported as a module of the repository (``--module``) instead of a plugin file."""
    out = tmp_path / "out"
    build = 'test "$(git log -1 --format=%s)" != "Document the kernel" || { echo "cc: error: no rule"; exit 3; }'
    rc = main(["bisect", "--repo", str(toy.path), "--good", toy.commits[0], "--bad", toy.commits[1], "--module", "kern",
               "--kernel", KERNEL, "--case", str(_reproducer(tmp_path / "cases")), "--build", build, "--device", "cpu",
               "--out", str(out)])
    capsys.readouterr()
    report = _report(out)
    good, bad = report["steps"]
    assert rc == 2 and good["verdict"] == "good" and bad["verdict"] == "skip"
    assert bad["reason"].startswith("build failed (exit 3)") and "cc: error: no rule" in bad["reason"]
    assert "--bad" in report["message"] and "cannot be tested: build failed" in report["message"]


def test_bisect_help_says_what_it_does_and_its_exit_statuses(capsys):
    """Regression (issue 43, 12): `jfa-verify bisect --help` had no description, only the usage and options."""
    from jfa_verify.cli import main

    assert main(["bisect", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Find the first commit of a kernel's repository between --good and --bad" in text
    assert "Exit status: 0 one first bad commit named; 1 inconclusive" in text


def _paste(command: str, tmp_path, **env) -> subprocess.CompletedProcess:
    """Run a printed command as a user pastes it into a shell, with ``jfa-verify`` this interpreter's."""
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "jfa-verify").write_text(f'#!/bin/sh\nexec {sys.executable} -m jfa_verify.cli "$@"\n')
    (shim / "jfa-verify").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "TMPDIR": str(tmp_path), **env}
    return subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)


def test_the_printed_replay_command_can_be_pasted_twice_and_leaves_no_worktree(toy, tmp_path, capsys):
    """Regression (issue 43, 7): the first bad commit's replay command checked it out into one fixed path: pasted a
    second time it failed (``git worktree add``: exit 128), and it left a worktree registered in the user's
    repository. Each paste now checks out into a fresh folder and removes the worktree however the replay ends."""
    c, out = toy.commits, tmp_path / "out"
    before = _user_state(toy)
    assert _bisect(toy.path, c[6], c[7], out, "--case", str(_reproducer(tmp_path / "cases"))) == 0, capsys.readouterr()
    replay = _report(out)["replay"]
    for _ in range(2):  # the failure it shows, each time; nothing left behind
        pasted = _paste(replay, tmp_path)
        assert pasted.returncode == 1, pasted.stdout[-2000:] + pasted.stderr[-2000:]
        assert "recorded verdict" in pasted.stdout or "[FAIL]" in pasted.stdout
        assert _user_state(toy) == before and not list(tmp_path.glob("jfa-first-bad-*"))
        # its output names the plugin in the checkout, which is gone now: it says so (a new user pasted that line)
        assert "/checkout/" in pasted.stdout + pasted.stderr
        assert "is removed now: paste this sh -c command again to replay at " + c[7][:10] in pasted.stderr, \
            pasted.stderr[-2000:]
    # a replay that cannot run at all (no jfa-verify on the PATH: the shell's 127) still removes its worktree
    broken = _paste(replay, tmp_path, PATH="/usr/bin:/bin")
    assert broken.returncode == 127, broken.stderr
    assert _user_state(toy) == before and not list(tmp_path.glob("jfa-first-bad-*"))


def test_an_interrupt_stops_the_steps_whole_process_group_before_the_cleanup(tmp_path):
    """Regression (a new user's Ctrl-C, 2026-12-05): a bisect interrupted mid-step left its state folder and a
    prunable worktree behind: the step's processes were still running while the cleanup removed them. An interrupt
    now stops the step's whole process group (grandchildren included) before ``_stream`` gives it back."""
    from jfa_verify.workflows.bisect.search import _stream

    pidfile = tmp_path / "grandchild.pid"
    script = f"sleep 120 & echo $! > {pidfile}; echo 'jfa-verify bisect: started'; wait"

    def interrupt(line):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _stream(["sh", "-c", script], tmp_path, tmp_path / "log", interrupt)
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_case_file_of_another_kernel_name_is_told_to_give_kernel(toy, tmp_path, capsys):
    """Regression (a new user's trial, 2026-12-06): bisecting a reproducer written for a kernel registered under
    another name (``my_jfa_bug``; the repository's plugin registers the toy kernel) said only "no kernel named
    'my_jfa_bug'; registered: ... (load more with --plugin ...)", though the plugin was given: the fix is --kernel."""
    path = _reproducer(tmp_path / "cases")
    path.write_text(path.read_text().replace(f'"kernel": "{KERNEL}"', '"kernel": "my_jfa_bug"'))
    out = tmp_path / "out"
    from jfa_verify.core.exits import ExitCode

    assert _bisect(toy.path, toy.commits[0], "main", out, "--case", str(path)) == ExitCode.USAGE
    message = _report(out)["message"]
    assert "no kernel named 'my_jfa_bug'" in message and "give --kernel NAME" in message, message


def test_a_plugin_that_imports_an_installed_copy_of_the_repository_is_refused(tmp_path, monkeypatch):
    """A new user's bisect (2026-12-07): the kernel package was installed editable from the repository, its entry
    point imported it first, and the commit's plugin file (which puts its own ``src`` on ``sys.path``) got that copy:
    every commit was judged on the working tree's code, and a good commit was named bad. The step refuses it, naming
    the module and where it came from; a plugin that imports its own commit's code loads."""
    from jfa_verify.core.errors import PluginError
    from jfa_verify.workflows.bisect.step import load_kernel

    plugin = """
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent / "src"))
from shadowed_attn_pkg.attn import forward
from jfa_verify import Capabilities, register_kernel

@register_kernel("{name}", capabilities=Capabilities(backward=False))
def load():
    return forward
"""
    for folder in ("repo", "worktree"):
        pkg = tmp_path / folder / "src" / "shadowed_attn_pkg"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "attn.py").write_text(f"WHERE = {folder!r}\n"
                                     "def forward(*args, **kwargs):\n    raise NotImplementedError\n")
    (tmp_path / "worktree" / "plugin.py").write_text(plugin.format(name="shadowed_attn"))
    (tmp_path / "worktree" / "plugin2.py").write_text(plugin.format(name="own_attn"))
    config = StepConfig(state=str(tmp_path / "state"), repo=str(tmp_path / "repo"), worktree=str(tmp_path / "worktree"),
                        good_commit="0" * 40, kernel="shadowed_attn", plugins=("plugin.py",))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "repo" / "src"), *sys.path])  # the installed (editable) copy
    monkeypatch.delitem(sys.modules, "shadowed_attn_pkg", raising=False)
    monkeypatch.delitem(sys.modules, "shadowed_attn_pkg.attn", raising=False)
    import shadowed_attn_pkg.attn  # noqa: F401 - what the entry point's import left in sys.modules

    with pytest.raises(PluginError, match=r"'shadowed_attn_pkg(\.attn)?' was imported from .*repo.*shadows"):
        load_kernel(config, config.worktree)
    for name in ("shadowed_attn_pkg", "shadowed_attn_pkg.attn"):
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path / "repo" / "src")])
    own = StepConfig(**{**config.__dict__, "kernel": "own_attn", "plugins": ("plugin2.py",)})
    assert load_kernel(own, own.worktree).name == "own_attn"
    assert sys.modules["shadowed_attn_pkg.attn"].WHERE == "worktree"
