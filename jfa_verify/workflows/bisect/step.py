"""One ``jfa-verify bisect`` step: test the commit checked out in the bisect worktree, record a verdict.

Run by the generated ``step.sh`` (:func:`jfa_verify.workflows.bisect.config.step_script`), never by hand::

    python -m jfa_verify.workflows.bisect.step run STATE [--role good|bad|candidate]
    python -m jfa_verify.workflows.bisect.step died STATE --status N [--role ...]   # the run process did not finish
    python -m jfa_verify.workflows.bisect.step serve STATE WORKTREE                # perf: a timing server
    python -m jfa_verify.workflows.bisect.step control STATE CASE_FILE             # the oracles alone on one case

Verdicts (each logged with its reason in ``STATE/steps.jsonl``):

* **good**: every case checked passes (``verdict``), no output moved (``drift``), no slowdown
  beyond the threshold (``perf``);
* **bad**: a correctness failure (an output outside its allowance, the output contract, a scheduler
  invariant), the kernel raising (an illegal address surfaces as a CUDA error from the kernel's
  own call), or the kernel crashing its process while the oracles alone run the same case fine;
  in ``drift`` mode an output that moved; in ``perf`` mode a slowdown beyond the threshold;
* **skip** (git cannot test it): ``--build`` failed; the kernel's module does not import or does
  not register the kernel; every case is outside its capabilities; a timeout (with ``--hang-is-bad``,
  a case past ``--timeout`` is **bad** instead: the regression is the hang); a crash of the
  environment (the process died before the kernel ran, or the oracles alone crash too); in
  ``perf`` mode any failure to time (the kernel raising or crashing), and a slowdown whose
  interval still straddles the threshold after the most rounds allowed.

The kernel comes from the worktree (its ``--plugin`` files, or ``--module`` with the worktree on
``sys.path``); the framework is this installed package, fixed for the whole bisect.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

from jfa_verify.workflows.bisect.config import ROLES, STEP_EXIT, StepConfig, StepRecord

__all__ = ["load_kernel", "main"]

PHASES = ("build", "load", "run")


# ----------------------------------------------------------------------------- step folder and record


def _git(worktree: str, *args: str) -> str:
    return subprocess.run(["git", "-C", worktree, *args], capture_output=True, text=True, check=True).stdout.strip()


def _head(config: StepConfig) -> tuple[str, str]:
    return _git(config.worktree, "rev-parse", "HEAD"), _git(config.worktree, "log", "-1", "--format=%s")


def _process_start() -> float:
    """When this process started (``time.time()`` scale), interpreter start and imports included
    (Linux ``/proc``; elsewhere: now)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


def _new_step(config: StepConfig, commit: str) -> Path:
    """``STATE/steps/<n>-<commit>``; ``STATE/current`` names it (for ``died``)."""
    root = config.state_dir / "steps"
    root.mkdir(exist_ok=True)
    step = root / f"{len(list(root.iterdir())):03d}-{commit[:12]}"
    step.mkdir()
    (step / "started").write_text(repr(_process_start()))
    (config.state_dir / "current").write_text(str(step))
    return step


def _mark(step: Path, phase: str) -> None:
    (step / "phase").write_text(phase)


def _record(config: StepConfig, record: StepRecord) -> None:
    with open(config.state_dir / "steps.jsonl", "a") as f:
        f.write(json.dumps(record.to_dict(), default=str) + "\n")
    print(record.line(), file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the kernel from the worktree


def load_kernel(config: StepConfig, worktree: str):
    """Import the kernel of the commit checked out in ``worktree`` and load its implementation.

    Plugin files are loaded from ``worktree`` (their module names hash the path, so two worktrees'
    copies never collide); ``--module`` is imported with ``worktree/module_root`` first on
    ``sys.path`` and must resolve inside the worktree (an installed copy elsewhere would test the
    wrong code). The implementation is loaded here, so a commit whose kernel does not import is
    told apart from a kernel that fails on a case.

    Raises:
        PluginError, UnknownKernel, KernelUnavailable, ImportError, or whatever the kernel's import raises.
    """
    import importlib

    from jfa_verify.core.errors import PluginError
    from jfa_verify.protocol.registry import discover, get_kernel, load_plugins

    root = Path(worktree).resolve()
    if config.module:
        sys.path.insert(0, str(root / config.module_root))
        module = importlib.import_module(config.module)
        where = Path(getattr(module, "__file__", "") or "").resolve()
        if root not in where.parents:
            raise PluginError(f"module {config.module!r} was imported from {where}, not from the worktree {root}; "
                              f"an installed copy shadows it (uninstall it, or give --module-root)")
    discover()
    load_plugins(root / rel for rel in config.plugins)
    kernel = get_kernel(config.kernel)
    kernel.impl  # noqa: B018 - load now: an import failure is a skip, not a failing case
    shadowing = _imported_from_repository(Path(config.repo).resolve(), root)
    if shadowing:
        name, where = shadowing[0]
        raise PluginError(f"module {name!r} was imported from {where}, the repository's own folder, not from the "
                          f"worktree {root} of the commit under test: an installed copy of the kernel's package "
                          f"(pip install -e, an entry point) shadows that commit's code, and every commit would be "
                          f"judged on it. Uninstall it (pip uninstall ...) for the bisect, or give --module with "
                          f"--module-root, which import from each commit's worktree")
    return kernel


def _imported_from_repository(repo: Path, worktree: Path) -> list[tuple[str, Path]]:
    """``(module name, file)`` of each imported module whose file lies in ``repo`` (the user's checkout) but not in
    ``worktree``: the commit's plugin imported an installed copy of the repository's code (a plugin that puts its
    folder on ``sys.path`` still gets the copy an entry point imported first: a new user's bisect, 2026-12-07, named
    a good commit bad). jfa-verify's own modules are the fixed framework, wherever it is installed; installed packages
    (a virtual environment inside the repository's folder, its site-packages) are not the repository's code."""
    environments = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}
    found = []
    for name, module in list(sys.modules.items()):
        if name == "__main__" or name == "jfa_verify" or name.startswith("jfa_verify."):
            continue
        file = getattr(module, "__file__", None)
        if not file:
            continue
        where = Path(file).resolve()
        if (repo in where.parents and worktree not in where.parents and not environments & set(where.parents)
                and not {"site-packages", "dist-packages"} & set(where.parts)):
            found.append((name, where))
    return sorted(found)


# ----------------------------------------------------------------------------- run


def _build(config: StepConfig, step: Path) -> Optional[str]:
    """Run ``--build`` in the worktree; the reason to skip, or None when it succeeded."""
    log = step / "build.log"
    try:
        with open(log, "w") as out:
            proc = subprocess.run(config.build, shell=True, cwd=config.worktree, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=config.step_timeout)
    except subprocess.TimeoutExpired:
        return f"build timed out after {config.step_timeout:g} s ({config.build!r})"
    if proc.returncode:
        tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:]
        return f"build failed (exit {proc.returncode}): {config.build!r}" + (f": {tail[0][:200]}" if tail else "")
    return None


def _failure(verdict: dict, explanation: str) -> tuple[str, dict]:
    """A one-line reason and the details (every failing output with its location) of a failed case, from its
    :meth:`~jfa_verify.run.runner.CaseResult.to_dict` (as the run loop also saves it in the reproducer file)."""
    from jfa_verify.judge.findings import findings_from_dict

    name = verdict["case"].get("name") or verdict["case_id"]
    contract = [f.message for f in findings_from_dict(verdict, "contract")]
    schedule = [f.message for f in findings_from_dict(verdict, "schedule")]
    outputs = []
    for out, o in verdict["outputs"].items():
        if o["passed"]:
            continue
        what = o["problem"] or f"max abs error {o['kernel_error']:.3g} > allowance {o['allowance']:.3g}"
        outputs.append({"output": out, "what": what, "location": o["location"], "kernel_value": o["kernel_value"],
                        "reference_value": o["reference_value"]})
    if verdict["status"] == "error":
        reason = f"{name}: kernel raised {verdict['message'].splitlines()[0][:300]}"
    elif outputs:
        first = outputs[0]
        where = f" at {first['location']}" if first["location"] else ""
        reason = f"{name}: {first['output']}: {first['what']}{where}"
    elif contract:
        reason = f"{name}: output contract: {contract[0]}"
    else:
        reason = f"{name}: scheduler invariant: {(schedule or ['?'])[0]}"
    details = {"case": name, "status": verdict["status"], "outputs": outputs,
               "contract_violations": contract, "schedule_violations": schedule[:5],
               "message": verdict["message"] if verdict["status"] == "error" else "",
               "reproducer": verdict["reproducer"], "explanation": explanation}
    return reason, details


def _cases(config: StepConfig, kernel, device):
    from jfa_verify.cases.case import Case
    from jfa_verify.checks.suites import get_suite

    if config.target == "case":
        return [Case.from_dict(config.case)]
    suite = get_suite(config.suite, device.type, config.seed, kernel=kernel)
    cases = suite.matching(config.filter)
    return cases[: config.max_cases] if config.max_cases else cases


def _plugin_paths(config: StepConfig) -> tuple[str, ...]:
    return tuple(str(Path(config.worktree) / p) for p in config.plugins)


def _settings(config: StepConfig):
    """The step's run settings: in this process, the worktree's plugins, ``--timeout`` per case, its seed."""
    from jfa_verify.run.settings import RunSettings

    return RunSettings(backward=config.backward, timeout_s=config.case_timeout, plugins=_plugin_paths(config),
                       seed=config.seed)


def _verdict_step(config: StepConfig, step: Path, kernel, device) -> tuple[str, str, dict]:
    """The float64 verdict on the target: bad on any failing case."""
    if config.target == "campaign":
        from jfa_verify.fuzz.campaign import Campaign

        summary = Campaign(kernel, _settings(config), max_examples=config.max_examples, corpus_dir=step / "repro",
                           device=device).run()
        if summary.failures:
            f = summary.failures[0]  # its case file holds the verdict (a hang's or a crash's does not)
            saved = json.loads(f.path.read_text()) if f.path else {}
            if "verdict" not in saved:
                return "bad", f"campaign (seed {config.seed}): {f.status}: {f.explanation[:300]}", {
                    "reproducer": str(f.path) if f.path else None}
            reason, details = _failure({**saved["verdict"], "reproducer": str(f.path)}, f.explanation)
            return "bad", f"campaign (seed {config.seed}, shrunk): {reason}", details
        return "good", f"campaign (seed {config.seed}): {summary.cases_run} case(s), no failure", {}
    from jfa_verify.run.loop import Verifier

    cases = _cases(config, kernel, device)
    if not cases:
        return "skip", f"no case of suite {config.suite!r} matches --filter {config.filter!r} at this commit", {}
    verifier = Verifier(kernel, device, step / "repro", _settings(config))
    results = verifier.verify_all(cases)
    failed = [r for r in results if r.failed]
    if failed:
        reason, details = _failure(failed[0].to_dict(), failed[0].explain())
        details["failed_cases"] = len(failed)
        return "bad", reason + (f" (+{len(failed) - 1} more failing case(s))" if len(failed) > 1 else ""), details
    checked = [r for r in results if r.status != "unsupported"]
    if not checked:
        return "skip", f"unsupported at this commit: {results[0].message}", {}
    skipped = len(results) - len(checked)
    outside = f", {skipped} outside the kernel's capabilities" if skipped else ""
    return "good", f"{len(checked)} case(s) pass{outside}", {}


def _set_status(path: Path, status: str, explanation: str) -> None:
    """Rewrite a case file's verdict (``drift``: replaying it shows the float64 verdict, which may pass)."""
    payload = json.loads(path.read_text())
    payload.update(status=status, explanation=explanation)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True))


def _drift_step(config: StepConfig, step: Path, kernel, device, role: str) -> tuple[str, str, dict]:
    """Outputs against the good commit's (saved by the good endpoint's step, which also checks that the
    kernel repeats itself bit for bit, or within ``atol``, on the same inputs)."""
    import torch

    from jfa_verify.checks.drift import output_drift
    from jfa_verify.core.errors import UnsupportedCase
    from jfa_verify.judge.localize import locate
    from jfa_verify.run.corpus import Corpus
    from jfa_verify.run.runner import call_kernel

    def outputs(case, tensors, problem) -> dict:
        """The kernel's outputs, run as the float64 verdict runs it (fresh leaf copies, poisoned memory)."""
        kernel.check_supported(problem)
        backward = config.backward and kernel.capabilities.backward_reason(problem) is None
        got = call_kernel(kernel, problem, tensors, case, backward=backward).outputs
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return got

    baseline = config.state_dir / "baseline"
    baseline.mkdir(exist_ok=True)
    corpus = Corpus(step / "repro")
    checked = 0
    for case in _cases(config, kernel, device):
        tensors = case.materialize(device)
        problem = case.problem(tensors)
        saved = baseline / f"{case.case_id()}.pt"
        with corpus.guard(case, kernel.name, str(device), config.case_timeout, _plugin_paths(config)) as path:
            try:
                got = outputs(case, tensors, problem)
            except UnsupportedCase as e:
                path.unlink()
                if role == "good":
                    return "skip", f"unsupported at the good commit: {e}", {}
                continue
            except Exception as e:  # the kernel under test may fail in any way: its result moved
                reason = f"{case.name or case.case_id()}: kernel raised {type(e).__name__}: {str(e)[:300]}"
                _set_status(path, "error", reason)
                return "bad", reason, {"case": case.name, "describe": case.describe(), "reproducer": str(path)}
            if role == "good":
                again = outputs(case, tensors, problem)
                moved = output_drift(got, again, atol=config.atol)
                if moved:
                    worst = max(m.max_abs for m in moved)
                    return "skip", (f"the kernel at the good commit is not deterministic on "
                                    f"{case.name or case.case_id()} ({moved[0].describe()}); give --atol above "
                                    f"{worst:.3g}"), {}
                torch.save({k: v.detach().cpu() for k, v in got.items()}, saved)
            elif not saved.is_file():
                path.unlink()
                name = case.name or case.case_id()
                return "skip", f"case {name} was not run at the good commit (the suite differs there)", {}
            else:
                moved = output_drift(torch.load(saved), got, atol=config.atol)
                if moved:
                    tiles = kernel.tile_sizes(problem)
                    drifts = []
                    for m in moved:
                        d = m.to_dict()
                        d["location"] = locate(problem, m.name, m.index, tiles).describe() if m.index else None
                        drifts.append(d)
                    first = drifts[0]
                    tol = "bit for bit" if config.atol is None else f"beyond atol {config.atol:g}"
                    reason = (f"{case.name or case.case_id()}: {moved[0].describe()} ({tol})"
                              + (f" at {first['location']}" if first["location"] else ""))
                    _set_status(path, "drift", reason)
                    return "bad", reason, {"case": case.name, "describe": case.describe(), "drift": drifts,
                                           "reproducer": str(path)}
            path.unlink()
            checked += 1
    if not checked:
        return "skip", "every case is outside the kernel's capabilities at this commit", {}
    tol = "bit for bit" if config.atol is None else f"within atol {config.atol:g}"
    what = "saved as the baseline" if role == "good" else f"same as the good commit, {tol}"
    return "good", f"{checked} case(s): outputs {what}", {}


def _run(config: StepConfig, step: Path, role: str) -> tuple[str, str, dict]:
    if config.build:
        _mark(step, "build")
        why = _build(config, step)
        if why:
            return "skip", why, {}
    _mark(step, "load")
    from jfa_verify.core.device import select_device

    device = select_device(config.device)
    if config.mode == "perf":
        from jfa_verify.workflows.bisect.perf import perf_step

        return perf_step(config, step, device, role)
    try:
        kernel = load_kernel(config, config.worktree)
    except Exception as e:  # a kernel module may fail to import in any way
        return "skip", f"kernel does not load at this commit: {type(e).__name__}: {str(e)[:300]}", {}
    _mark(step, "run")
    if config.mode == "drift":
        return _drift_step(config, step, kernel, device, role)
    return _verdict_step(config, step, kernel, device)


def cmd_run(state: str, role: str) -> int:
    """The step: never raises; exits with :data:`STEP_EXIT` (the wrapper maps it to git's codes)."""
    t0 = _process_start()
    config = StepConfig.read(state)
    commit, subject = _head(config)  # a failure here exits 1: the wrapper hands it to died
    step = _new_step(config, commit)
    try:
        verdict, reason, details = _run(config, step, role)
    except KeyboardInterrupt:
        verdict, reason, details = "abort", "interrupted", {}
    except Exception as e:  # the framework's own failure here is the environment's, not the commit's
        (step / "traceback.txt").write_text(traceback.format_exc())
        verdict, reason, details = "skip", f"environment: the step raised {type(e).__name__}: {str(e)[:300]}", {}
    _record(config, StepRecord(commit, subject, role, verdict, reason, time.time() - t0, details))
    (step / "done").touch()
    return STEP_EXIT[verdict]


# ----------------------------------------------------------------------------- died


def _status_words(status: int) -> str:
    """``status`` as a shell reports it (128 + N for signal N) or as subprocess does (-N), in words."""
    number = -status if status < 0 else status - 128 if status > 128 else None
    if number is not None:
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            pass
    return f"exit status {status}"


def _running_case(step: Path) -> Optional[Path]:
    """The case file a crash or a watchdog left behind (written before its case ran)."""
    from jfa_verify.run.corpus import RUNNING, normalize_status

    for path in sorted(step.rglob("*.json")):
        try:
            if normalize_status(json.loads(path.read_text()).get("status", "")) in (RUNNING, "hang"):
                return path
        except (OSError, ValueError):
            continue
    return None


def _case_name(path: Path) -> str:
    return json.loads(path.read_text())["case"].get("name") or path.stem


def _attribute(config: StepConfig, step: Optional[Path], status: int) -> tuple[str, str, dict]:
    from jfa_verify.run.corpus import TIMEOUT_EXIT_CODE

    phase = (step / "phase").read_text() if step and (step / "phase").is_file() else None
    how = _status_words(status)
    if status in (124, 137) or status == TIMEOUT_EXIT_CODE:
        case = _running_case(step) if step else None
        if status == TIMEOUT_EXIT_CODE and config.hang_is_bad and case is not None:
            name = _case_name(case)
            return "bad", f"{name}: hang: the case ran past --timeout {config.case_timeout:g} s (--hang-is-bad)", {
                "case": name, "reproducer": str(case), "hang": config.case_timeout}
        limit = (f"case ran past --timeout {config.case_timeout:g} s" if status == TIMEOUT_EXIT_CODE
                 else f"step ran past {config.step_timeout:g} s")
        return "skip", f"timeout: {limit}" + (f" ({case.name})" if case else ""), {
            "reproducer": str(case) if case else None}
    if phase != "run":
        doing = {"build": "building", "load": "loading the kernel", None: "starting"}[phase]
        return "skip", f"environment: the step process died while {doing} ({how})", {}
    if config.mode == "perf":
        return "skip", f"the step process died while timing ({how})", {}
    case = _running_case(step)
    if case is None:
        return "skip", f"environment: the step process died outside any case ({how})", {}
    try:
        control = subprocess.run([sys.executable, "-m", "jfa_verify.workflows.bisect.step",
                                  "control", config.state, str(case)],
                                 cwd=config.state, capture_output=True, text=True, timeout=config.step_timeout)
        fine, words = control.returncode == 0, _status_words(control.returncode)
    except subprocess.TimeoutExpired:
        fine, words = False, "timed out"
    name = _case_name(case)
    if fine:
        return "bad", (f"{name}: the kernel crashed the process ({how}); the float64 and SDPA oracles alone run "
                       f"this case fine"), {"case": name, "reproducer": str(case), "crash": how}
    return "skip", f"environment: {name} crashed the process ({how}) and the oracles alone fail too ({words})", {}


def cmd_died(state: str, role: str, status: int) -> int:
    config = StepConfig.read(state)
    commit, subject = _head(config)
    current = config.state_dir / "current"
    step = Path(current.read_text()) if current.is_file() else None
    if step is None or not step.name.endswith(commit[:12]) or (step / "done").exists():
        step = None  # the run process died before making its step folder
    started = float((step / "started").read_text()) if step else time.time()
    try:
        verdict, reason, details = _attribute(config, step, status)
    except Exception as e:  # never leave git without an answer
        verdict, reason, details = "skip", f"environment: the crash handler raised {type(e).__name__}: {e}", {}
    _record(config, StepRecord(commit, subject, role, verdict, reason, time.time() - started, details))
    return STEP_EXIT[verdict]


# ----------------------------------------------------------------------------- control


def cmd_control(state: str, case_file: str) -> int:
    """The float64 and padded-SDPA oracles alone on a case file's case: exit 0 when they finish."""
    config = StepConfig.read(state)
    from jfa_verify.core.device import select_device
    from jfa_verify.oracles import padded_sdpa_attention, reference_attention
    from jfa_verify.run.corpus import read_case_file

    device = select_device(config.device)
    case, _ = read_case_file(case_file)
    tensors = case.materialize(device)
    problem = case.problem(tensors)
    do = tensors.do if config.backward else None
    reference_attention(problem, tensors.q, tensors.k, tensors.v, do=do)
    padded_sdpa_attention(problem, tensors.q, tensors.k, tensors.v, do=do)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jfa_verify.workflows.bisect.step",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "died"):
        p = sub.add_parser(name)
        p.add_argument("state")
        p.add_argument("--role", choices=ROLES, default="candidate")
        if name == "died":
            p.add_argument("--status", type=int, required=True)
    srv = sub.add_parser("serve")
    srv.add_argument("state")
    srv.add_argument("worktree")
    ctl = sub.add_parser("control")
    ctl.add_argument("state")
    ctl.add_argument("case_file")
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        return STEP_EXIT["abort"]
    if args.command == "run":
        return cmd_run(args.state, args.role)
    if args.command == "died":
        return cmd_died(args.state, args.role, args.status)
    if args.command == "serve":
        from jfa_verify.workflows.bisect.perf import serve

        return serve(args.state, args.worktree, load_kernel)
    return cmd_control(args.state, args.case_file)


if __name__ == "__main__":
    sys.exit(main())
