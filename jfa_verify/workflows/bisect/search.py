"""``jfa-verify bisect``: find the kernel commit that broke correctness, speed, or bit-for-bit results.

The kernel varies, the framework stays fixed: each tested commit's kernel is loaded from the
repository under test (``--plugin`` files inside it, or ``--module`` with the checkout on
``sys.path``), and judged by this installed jfa-verify. The search itself is ``git bisect run``
(the engine every kernel engineer knows) in a temporary ``git worktree``, so the user's checkout,
its index, its bisect state and its reproducer files are never touched; the worktree is removed
at the end. Each step is a subprocess (:mod:`jfa_verify.workflows.bisect.step`) whose verdict maps to git's
codes (good 0, bad 1, skip 125), with its reason logged.

Before git starts, the two endpoints are tested with the same step: the good commit must pass
(in ``--perf`` mode: timed against itself, its interval must lie within the threshold both ways,
the noise check), and the bad
commit must fail; otherwise nothing is bisected and the command exits 2 saying which endpoint
disagrees and why.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from jfa_verify.core.errors import InvalidInput, ToolError
from jfa_verify.run.corpus import replay_command
from jfa_verify.workflows.bisect.config import StepConfig, read_records, step_script
from jfa_verify.workflows.bisect.report import BisectReport, write_reports

__all__ = ["BisectRequest", "run_bisect"]


@dataclass(frozen=True)
class BisectRequest:
    """A bisect as the user asks for it (the command line's options; see ``docs/bisect.md``).

    What to test: exactly one of ``case_file`` (a reproducer file), ``suite`` (with ``filter``,
    ``max_cases``) or ``campaign`` (that many Hypothesis examples with ``seed``); ``perf`` times the
    named benchmark ``batch`` instead. ``threshold``: the slowdown called bad, as a fraction (0.05 =
    5%); ``atol``: drift tolerance (None: bit for bit). ``plugins``: files relative to the repository
    root. Times in seconds (``block_ms`` in milliseconds). ``out``: the folder for reports.
    """

    repo: str
    good: str
    bad: str
    kernel: Optional[str] = None
    plugins: tuple[str, ...] = ()
    module: Optional[str] = None
    module_root: str = "."
    case_file: Optional[str] = None
    suite: Optional[str] = None
    filter: str = ""
    max_cases: Optional[int] = None
    campaign: Optional[int] = None
    seed: int = 0
    perf: bool = False
    batch: Optional[str] = None
    threshold: Optional[float] = None
    confidence: float = 0.95
    rounds: int = 8
    max_rounds: int = 24
    block_ms: Optional[float] = None
    perf_backward: bool = False
    drift: bool = False
    atol: Optional[float] = None
    build: Optional[str] = None
    case_timeout: Optional[float] = None
    hang_is_bad: bool = False
    step_timeout: float = 1800.0
    device: Optional[str] = None
    backward: bool = True
    out: str = "jfa-bisect"
    keep: bool = False

    @property
    def mode(self) -> str:
        return "perf" if self.perf else "drift" if self.drift else "verdict"


# ----------------------------------------------------------------------------- git


def _git(cwd, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    if check and proc.returncode:
        raise ToolError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc


def _toplevel(repo: str) -> Path:
    if shutil.which("git") is None:
        raise InvalidInput("git is not on PATH: jfa-verify bisect drives git bisect; install git")
    if not Path(repo).is_dir():
        raise InvalidInput(f"--repo {repo}: no such folder; give the kernel repository's folder")
    proc = _git(repo, "rev-parse", "--show-toplevel", check=False)
    if proc.returncode:
        raise InvalidInput(f"--repo {repo}: not a git repository ({proc.stderr.strip().splitlines()[-1]}); "
                           f"give the folder of the kernel's git checkout")
    return Path(proc.stdout.strip())


def _commit(repo: Path, rev: str, option: str) -> str:
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if proc.returncode:
        raise InvalidInput(f"{option} {rev}: no such commit in {repo}; give a commit, tag or branch "
                           f"(see git log --oneline)")
    return proc.stdout.strip()


def _check_range(repo: Path, req: BisectRequest, good: str, bad: str) -> int:
    """The number of commits in ``good..bad``, after checking the range can be bisected."""
    if good == bad:
        raise InvalidInput(f"--good {req.good} and --bad {req.bad} are the same commit {good[:10]}")
    if _git(repo, "merge-base", "--is-ancestor", good, bad, check=False).returncode:
        swapped = not _git(repo, "merge-base", "--is-ancestor", bad, good, check=False).returncode
        hint = " (they look swapped: --good must be the older commit)" if swapped else ""
        raise InvalidInput(f"--good {req.good} ({good[:10]}) is not an ancestor of --bad {req.bad} ({bad[:10]}){hint}; "
                           f"git bisect needs the good commit in the bad commit's history")
    return int(_git(repo, "rev-list", "--count", f"{good}..{bad}").stdout)


def _relative(repo: Path, path: str, option: str) -> str:
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(repo.resolve())
        except ValueError:
            raise InvalidInput(f"{option} {path} is outside the repository {repo}; the kernel must come from the "
                               f"repository under test (give a path inside it)") from None
    if ".." in p.parts:
        raise InvalidInput(f"{option} {path}: give a path inside the repository, without '..'")
    return p.as_posix()


# ----------------------------------------------------------------------------- the request


def _target(req: BisectRequest) -> tuple[str, Optional[dict], str, Optional[str]]:
    """``(target, case dict, description, kernel named by the case file)``; rejects bad combinations."""
    chosen = [name for name, given in (("--case", req.case_file), ("--suite", req.suite),
                                       ("--campaign", req.campaign)) if given is not None]
    if req.perf and req.drift:
        raise InvalidInput("--perf and --drift are different bisects; give one")
    if not 0.5 <= req.confidence < 1:
        raise InvalidInput(f"--confidence {req.confidence}: give a probability in [0.5, 1), e.g. 0.95")
    if req.hang_is_bad and req.case_timeout is None:
        raise InvalidInput("--hang-is-bad needs --timeout SECONDS: the time past which a case counts as a hang")
    if req.hang_is_bad and req.perf:
        raise InvalidInput("--hang-is-bad judges cases, which --perf does not run; drop one of them")
    if req.atol is not None and not req.drift:
        raise InvalidInput(f"--atol {req.atol:g} is the --drift tolerance; add --drift or drop --atol")
    if not req.perf:
        for option, value in (("--threshold", req.threshold), ("--batch", req.batch), ("--block-ms", req.block_ms)):
            if value is not None:
                raise InvalidInput(f"{option} is for --perf (a performance bisect); add --perf or drop {option}")
    if req.perf:
        if chosen:
            raise InvalidInput(f"--perf times the named benchmark --batch; drop {' '.join(chosen)}")
        if req.rounds > req.max_rounds:  # (accepted before: it timed --rounds once and stopped, undecided or not)
            raise InvalidInput(f"--rounds {req.rounds} is more than --max-rounds {req.max_rounds}: the first batch of "
                               f"rounds would be the last; give --max-rounds at least {req.rounds}")
        from jfa_verify.checks.perf import workloads

        batch, names = req.batch or "movielens", sorted(workloads("cpu"))
        if batch not in names:
            raise InvalidInput(f"--batch {batch}: unknown benchmark batch; choose one of {names}")
        return "batch", None, f"benchmark batch {batch!r} (jfa_verify.checks.perf.workloads)", None
    if req.filter and req.suite is None:  # (a new user's --filter alone got the generic line below)
        raise InvalidInput(f"--filter {req.filter!r} picks cases of a suite: add --suite NAME (--suite default for "
                           f"`jfa-verify run`'s cases), or drop --filter")
    if len(chosen) != 1:
        got = f"; got {' '.join(chosen)}" if chosen else ""
        raise InvalidInput("say what to test with exactly one of --case FILE (a reproducer), --suite NAME "
                           "[--filter TEXT] or --campaign N [--seed S]" + got)
    if req.case_file is not None:
        from jfa_verify.run.corpus import read_case_file

        case, payload = read_case_file(req.case_file)  # read once; the file is never opened again
        return "case", case.to_dict(), f"reproducer {req.case_file} ({case.describe()})", payload.get("kernel")
    if req.suite is not None:
        from jfa_verify.checks.suites import SUITES

        if req.suite not in SUITES:
            raise InvalidInput(f"--suite {req.suite}: unknown; choose one of {sorted(SUITES)}")
        what = f"suite {req.suite!r}" + (f" cases matching {req.filter!r}" if req.filter else "")
        return "suite", None, what + (f" (first {req.max_cases})" if req.max_cases else ""), None
    if req.drift:
        raise InvalidInput("--drift compares outputs of fixed cases; give --case FILE or --suite NAME, not --campaign")
    return "campaign", None, f"a {req.campaign}-example campaign with seed {req.seed}", None


# ----------------------------------------------------------------------------- running


def _stream(cmd: list[str], cwd, log: Path, echo: Callable[[str], None]) -> int:
    """Run ``cmd``; every output line goes to ``log``, step verdict lines also to ``echo``."""
    with open(log, "a") as f:
        # its own process group, stopped whole when this one stops (Ctrl-C, SIGTERM): a step still running while
        # the worktree and the state folder were removed left both behind (a new user's Ctrl-C, 2026-12-05)
        proc = subprocess.Popen(cmd, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            for line in proc.stdout:
                f.write(line)
                if line.startswith("jfa-verify bisect:"):
                    echo(line.rstrip())
            return proc.wait()
        except BaseException:
            _stop_group(proc)
            raise


def _stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to ``proc``'s process group (a step ends its case as an interrupt), SIGKILL to whatever of it is left
    after ``grace_s``; ``proc`` reaped."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            proc.poll()
            os.killpg(proc.pid, 0)  # raises once no process of the group is left
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass  # the group is gone
    proc.wait()


def _endpoint(config: StepConfig, role: str, commit: str, echo) -> object:
    _git(config.worktree, "checkout", "--quiet", "--detach", commit)
    before = len(read_records(config.state))
    _stream(["sh", str(config.state_dir / "step.sh"), role], config.state, config.state_dir / "bisect.log", echo)
    records = read_records(config.state)
    if len(records) == before:
        raise ToolError(f"the {role} endpoint's step left no record; its output is in bisect.log in the --out folder")
    return records[-1]


def _endpoint_problem(req: BisectRequest, good_rec, bad_rec) -> Optional[str]:
    if good_rec.verdict == "skip":
        return f"--good {req.good} ({good_rec.commit[:10]}) cannot be tested: {good_rec.reason}"
    if good_rec.verdict != "good":
        return (f"--good {req.good} ({good_rec.commit[:10]}) already fails: {good_rec.reason}; give an older "
                f"good commit")
    if bad_rec is None:
        return None
    if bad_rec.verdict == "skip":
        return f"--bad {req.bad} ({bad_rec.commit[:10]}) cannot be tested: {bad_rec.reason}"
    if bad_rec.verdict != "bad":
        return (f"--bad {req.bad} ({bad_rec.commit[:10]}) passes ({bad_rec.reason}): nothing to bisect; check that "
                f"what is tested shows the regression at the bad commit")
    return None


def _outcome(worktree: Path) -> tuple[Optional[str], list[str]]:
    """``(refs/bisect/bad, candidates)`` after git bisect run: the candidates are the commits that may be
    the first bad one (the bad ref and the skipped commits between it and the last good ones)."""
    refs = _git(worktree, "for-each-ref", "--format=%(refname) %(objectname)", "refs/bisect").stdout.split("\n")
    pairs = [r.split() for r in refs if r.strip()]
    bad = next((sha for name, sha in pairs if name == "refs/bisect/bad"), None)
    goods = [sha for name, sha in pairs if name.startswith("refs/bisect/good-")]
    if bad is None:
        return None, []
    return bad, _git(worktree, "rev-list", bad, "--not", *goods).stdout.split()


def _framework() -> str:
    from jfa_verify import __version__

    return f"jfa-verify {__version__} at {Path(__file__).resolve().parent}"


def run_bisect(req: BisectRequest, *, echo: Callable[[str], None] = print) -> BisectReport:
    """Bisect ``req.good..req.bad`` and write the reports into ``req.out``; returns the report
    (``report.exit_code``: 0 found, 1 inconclusive, 2 endpoints that do not bracket a change).

    Raises:
        InvalidInput: a usage error found before anything runs (not a repository, unknown or
            unrelated revisions, a plugin path missing at an endpoint, incompatible options).
    """
    t0 = time.monotonic()
    repo = _toplevel(req.repo)
    good, bad = _commit(repo, req.good, "--good"), _commit(repo, req.bad, "--bad")
    in_range = _check_range(repo, req, good, bad)
    target, case, what, case_kernel = _target(req)
    kernel = req.kernel or case_kernel
    if not kernel:
        raise InvalidInput("give --kernel NAME: the name the repository's plugin or module registers")
    if not req.plugins and not req.module:
        raise InvalidInput("give --plugin RELPATH (a file in the repository that registers the kernel) or --module "
                           "NAME (a module in it that does): the kernel must come from the repository under test")
    plugins = tuple(_relative(repo, p, "--plugin") for p in req.plugins)
    for rel in plugins:
        for option, rev, sha in (("--good", req.good, good), ("--bad", req.bad, bad)):
            if _git(repo, "cat-file", "-e", f"{sha}:{rel}", check=False).returncode:
                raise InvalidInput(f"--plugin {rel}: not in the {option} commit {rev} ({sha[:10]}); give its path "
                                   f"relative to the repository root")
    if req.module and req.module_root not in ("", ".") and not req.build:
        # (checked as the plugins are: a missing one stopped the good step with "No module named ..." and never
        # named the folder; a new user's trial, 2026-12-07. A --build may make it: then it is not checked here)
        for option, rev, sha in (("--good", req.good, good), ("--bad", req.bad, bad)):
            if _git(repo, "cat-file", "-e", f"{sha}:{req.module_root.strip('/')}", check=False).returncode:
                raise InvalidInput(f"--module-root {req.module_root}: no such folder in the {option} commit {rev} "
                                   f"({sha[:10]}); give the folder, relative to the repository root, that holds "
                                   f"--module {req.module}")
    state = Path(tempfile.mkdtemp(prefix="jfa-bisect-"))
    worktrees = [state / "worktree"] + ([state / "good-worktree"] if req.perf else [])
    report = BisectReport(repo=str(repo), good=good, bad=bad, kernel=kernel, mode=req.mode, target=what,
                          status="usage", message="", commits_in_range=in_range, framework=_framework())
    try:
        for wt in worktrees:
            _git(repo, "worktree", "add", "--quiet", "--detach", str(wt), good)
        config = StepConfig(
            state=str(state), repo=str(repo), worktree=str(worktrees[0]), good_commit=good, kernel=kernel,
            mode=req.mode, target=target, plugins=plugins, module=req.module, module_root=req.module_root,
            good_worktree=str(worktrees[1]) if req.perf else None, case=case, suite=req.suite or "default",
            filter=req.filter, max_cases=req.max_cases, max_examples=req.campaign or 0, seed=req.seed,
            batch=req.batch or "movielens", threshold=0.05 if req.threshold is None else req.threshold,
            confidence=req.confidence, rounds=req.rounds, max_rounds=req.max_rounds,
            block_ms=50.0 if req.block_ms is None else req.block_ms, perf_backward=req.perf_backward, atol=req.atol,
            device=req.device, backward=req.backward, build=req.build, case_timeout=req.case_timeout,
            hang_is_bad=req.hang_is_bad,
            step_timeout=req.step_timeout, python=sys.executable)
        config.write()
        (state / "step.sh").write_text(step_script(config))
        echo(f"jfa-verify bisect: {in_range} commit(s) in {good[:10]}..{bad[:10]} of {repo}; {req.mode} of "
             f"kernel {kernel!r} on {what}")
        good_rec = _endpoint(config, "good", good, echo)
        problem = _endpoint_problem(req, good_rec, None)
        bad_rec = None if problem else _endpoint(config, "bad", bad, echo)
        problem = problem or _endpoint_problem(req, good_rec, bad_rec)
        if problem and not req.kernel and f"no kernel named {kernel!r}" in problem:
            # the name came from the case file: the repository's plugin may register the kernel under another
            problem += (f"; {kernel!r} is the --case file's kernel: give --kernel NAME, the name the repository's "
                        f"plugin or module registers, to bisect the case on it")
        if problem:
            report.message = problem
        elif in_range == 1:
            report.status, report.first_bad, report.candidates = "found", bad, [bad]
        else:
            wt = worktrees[0]
            _git(wt, "bisect", "start", bad, good)
            run = ["git", "-C", str(wt), "bisect", "run", "sh", str(state / "step.sh")]
            _stream(run, wt, state / "bisect.log", echo)
            first, candidates = _outcome(wt)
            aborted = [r for r in read_records(state) if r.verdict == "abort"]
            if aborted or first is None:
                report.message = (f"git bisect run stopped: {aborted[-1].reason}" if aborted
                                  else f"git bisect run left no result; see {Path(req.out) / 'bisect.log'}")
            elif len(candidates) == 1:
                report.status, report.first_bad, report.candidates = "found", first, candidates
            else:
                report.status, report.candidates = "inconclusive", candidates
                report.message = (f"untestable (skipped) commits hide the first bad commit: it is one of "
                                  f"{len(candidates)}; the table says why each was skipped")
        report.steps = read_records(state)
        if report.first_bad:
            report.first_bad_subject = _git(repo, "log", "-1", "--format=%s", report.first_bad).stdout.strip()
            _keep_reproducer(report, req, plugins)
    finally:
        out = Path(req.out)
        out.mkdir(parents=True, exist_ok=True)
        for name in ("steps.jsonl", "bisect.log"):
            if (state / name).is_file():
                shutil.copy(state / name, out / name)
        for wt in worktrees:
            _git(repo, "worktree", "remove", "--force", str(wt), check=False)
        if not req.keep:
            shutil.rmtree(state, ignore_errors=True)
        _git(repo, "worktree", "prune", check=False)  # forgets any worktree whose folder is gone
    report.seconds = time.monotonic() - t0
    write_reports(report, req.out)
    return report


def _keep_reproducer(report: BisectReport, req: BisectRequest, plugins: tuple[str, ...]) -> None:
    """Copy the first bad commit's reproducer next to the reports and say how to replay it there."""
    rec = report.first_bad_record
    src = rec.details.get("reproducer") if rec else None
    if not src or not Path(src).is_file():
        return
    Path(req.out).mkdir(parents=True, exist_ok=True)
    dest = Path(req.out) / f"first-bad-{report.first_bad[:10]}-{Path(src).name}"
    shutil.copy(src, dest)
    report.reproducer = str(dest)
    report.replay = replay_at_commit(report.repo, report.first_bad[:10], dest, report.kernel, plugins, req.device)
    report.replay += "" if plugins else f"  (with module {req.module} importable)"
    if req.mode == "drift":
        report.replay += "  (replay judges by float64; the drift is against the good commit's outputs)"


# A checkout's plugin path inside the printed command, before ``"$wt"/`` takes its place (safe for shlex.quote).
_CHECKOUT_MARK = "/jfa-verify-checkout-"


def replay_at_commit(repo: str, commit: str, reproducer: "str | Path", kernel: str, plugins: tuple[str, ...] = (),
                     device: Optional[str] = None) -> str:
    """The one-line shell command that replays ``reproducer`` with the kernel as it is at ``commit`` of ``repo``.

    It checks ``commit`` out in a worktree of its own, under a fresh temporary folder (``mktemp -d``), replays
    with the ``plugins`` (paths relative to the repository) of that checkout, and removes the worktree and its
    registration (``git worktree remove --force``, ``git worktree prune``) however the replay ends: a failure,
    Ctrl-C or SIGTERM included. Its exit status is the replay's (130 when stopped; 2 when the checkout fails). So it
    can be pasted any number of times: a fixed checkout path failed the second time (exit 128) and left a worktree
    registered in the user's repository (issue 43, 7).
    """
    import shlex

    command = replay_command(reproducer, kernel, [f"{_CHECKOUT_MARK}{i}" for i in range(len(plugins))])
    for i, rel in enumerate(plugins):
        command = command.replace(f"--plugin {_CHECKOUT_MARK}{i}", f'--plugin "$wt"/{shlex.quote(rel)}', 1)
    command += f" --device {device}" if device else ""
    # (the replay's own output names its --plugin files in the checkout, which is gone once it ends: a new user
    # pasted such a line and got "no such file"; the note says so where the line was printed)
    gone = ('echo "jfa-replay: $wt, the checkout the --plugin paths above are in, is removed now: paste this sh -c '
            'command again to replay at $commit" >&2; ') if plugins else ""
    script = ('repo=$1; commit=$2; wt=$(mktemp -d "${TMPDIR:-/tmp}/jfa-first-bad-XXXXXX") || exit 2; '
              'wt=$wt/checkout; done_() { git -C "$repo" worktree remove --force "$wt" >/dev/null 2>&1; '
              f'rm -rf "${{wt%/checkout}}"; git -C "$repo" worktree prune; {gone}}}; trap done_ EXIT; '
              'trap "exit 130" INT TERM HUP; '
              f'git -C "$repo" worktree add --quiet --detach "$wt" "$commit" || exit 2; {command}')
    return f"sh -c {shlex.quote(script)} jfa-replay {shlex.quote(str(repo))} {shlex.quote(commit)}"
