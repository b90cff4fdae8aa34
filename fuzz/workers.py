"""``jfa-verify fuzz --workers N``: N campaign workers on one shared Hypothesis database, one coordinator.

The coordinator (this process) puts the reproducer folder in order first
(:func:`~jfa_verify.fuzz.campaign.prepare_corpus`: case files left ``"running"`` by a killed
campaign are replayed in an isolated worker, shrink steps of a killed campaign removed,
duplicates merged), then starts N worker processes (spawned; on CUDA each is pinned to one GPU
with ``CUDA_VISIBLE_DEVICES``, round-robin over ``gpus``). Each runs
:func:`~jfa_verify.fuzz.campaign.run_campaign` on its share of the saved findings and of
``max_examples``, with seed :func:`worker_seed`, and sends an event per case and per finding,
which the coordinator shows live (:mod:`~jfa_verify.fuzz.progress`). Ctrl-C or SIGTERM asks
every worker to stop after its current case (a second Ctrl-C kills them); the report is written
either way. At the end the folder is put in order once more (two workers may have found one bug
at once) and the JSON report (``report``) and the PNG (``png``) are written.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import queue as queue_module
import signal
import time
import traceback
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Iterator, Optional, Sequence

from jfa_verify.run.settings import RunSettings

__all__ = ["FuzzConfig", "run_fuzz", "worker_seed"]

_GRACE_S = 3.0  # seconds a dead worker's last events may still be in flight


def _campaign_run_settings() -> RunSettings:
    return RunSettings(timeout_s=120.0, isolate=True)


def worker_seed(seed: int, worker: int) -> int:
    """The Hypothesis seed that worker ``worker`` (0-based) of a campaign seeded ``seed`` draws with: ``seed`` itself
    for worker 0 (one worker draws what ``--seed S`` says), for the others 63 bits of a SHA-256 of both. With
    ``seed + worker``, worker 1 of ``--seed 1`` drew what worker 0 of ``--seed 2`` drew: campaigns on two hosts with
    neighbouring seeds repeated each other's cases."""
    if worker == 0:
        return seed
    digest = hashlib.sha256(f"jfa-verify fuzz worker {seed} {worker}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(frozen=True)
class FuzzConfig:
    """A campaign's settings (picklable: each worker process gets a copy). ``run``: how each case runs and is judged,
    passed whole (its ``seed`` is worker 0's; worker ``w`` draws with :func:`worker_seed`; default: isolated, 120 s a
    case); the rest are :class:`~jfa_verify.fuzz.campaign.Campaign`'s arguments; ``max_examples`` is the total over all
    workers; ``strategy`` holds keyword arguments of :func:`jfa_verify.strategies.cases`."""

    kernel: str
    device_type: str
    corpus_dir: str
    run: RunSettings = field(default_factory=_campaign_run_settings)
    database: Optional[str] = None
    read_from: tuple[str, ...] = ()
    max_examples: Optional[int] = 100
    duration_s: Optional[float] = None
    shrink: bool = True
    shrink_seconds: float = 120.0
    round_examples: int = 100
    covering: bool = False  # worker 0 runs the covering array of the contract's pairs first
    strategy: dict = field(default_factory=dict)
    pack: int = 1  # the most cases one launch holds (jfa_verify.strategies.packs); 1: no packing
    precompile: bool = True  # build the covering array's kernel variants before the workers start (precompile_campaign)


def drawn_count(summaries: dict, progress) -> int:
    """The cases a campaign drew: its workers' own counts (a draw of a case judged before runs nothing, so it can
    exceed the drawn cases run), but never fewer than the drawn cases whose verdicts came as events: a worker
    stopped or killed before its last word has a summary that drew nothing (a new user's interrupted campaign said
    "2 cases run (0 drawn)")."""
    return max(sum(s.get("generated", 0) for s in summaries.values()), progress.phases["generate"])


def _interrupted_summary() -> dict:
    """The summary of a worker interrupted before its campaign had one: nothing drawn, nothing found."""
    return {"interrupted": True, "generated": 0, "failures": [], "fixed": [], "notes": []}


def _death(exitcode: Optional[int], worker: int, corpus_dir: str, since: float, in_itself: bool) -> dict:
    """The coordinator's record of a worker that ended without a last word, by its process's ``exitcode``; its
    ``"status"`` is the verdict the death gives (``"crash"``, ``"hang"``), absent where it gives none.

    A worker running cases in its own process (``in_itself``: ``--no-isolate``) dies with the kernel that ends it
    (``os._exit``, a signal): the case file it left ``"running"`` (written at or after ``since``) becomes a crash,
    as ``run --no-isolate`` makes it, whatever the exit status (a kernel's ``os._exit(3)`` read as the watchdog's
    hang, ``os._exit(5)`` as a worker that could not run: exit 2, the finding left "running"; a new user's trial).
    The watchdog of a case past ``--timeout`` marks its file a hang before it ends the worker with exit 3: no file
    is left running then, and the death is that hang."""
    from jfa_verify.core.exits import ExitCode

    death = {"event": "died", "why": f"exit status {exitcode}", "exitcode": exitcode}
    if in_itself and exitcode is not None:
        from jfa_verify.run.postmortem import death_in_words, record_death

        in_flight = record_death(None, corpus_dir, since, death_in_words(exitcode),
                                 who=f"campaign worker {worker}, running cases in itself (--no-isolate),")
        if in_flight is not None:
            death.update(status="crash", case_file=str(in_flight.case_file),
                         why=f"exit status {exitcode}: the kernel ended the worker's own process (--no-isolate) in "
                             f"case {in_flight.case_file.name}, now a crash finding ({in_flight.replay})")
            return death
    if exitcode == ExitCode.HANG:
        death.update(status="hang", why=f"exit status {exitcode}: a case ran past --timeout in the worker's own "
                                        "process (--no-isolate), whose watchdog marked its case file a hang and "
                                        "ended the worker")
    elif exitcode is not None and exitcode < 0:  # (a signal between cases: a crash all the same)
        death["status"] = "crash"
    return death


def _worker_main(config: FuzzConfig, worker: int, max_examples: Optional[int], replay: list, deadline: Optional[float],
                 gpu: Optional[str], events, stop, ctrl_c: bool = True, owner: Optional[int] = None,
                 env: Optional[dict] = None) -> None:
    """One campaign worker process: pin the GPU, load the kernel as the coordinator did, search, report.

    ``ctrl_c``: Ctrl-C interrupts it (False where the coordinator itself ignores SIGINT, as a background job does).
    ``owner``: the coordinator's pid (the worker is forked by the fork server, which is not the coordinator);
    ``env``: the coordinator's environment, taken whole (the fork server's is older)."""
    from jfa_verify.run.interrupts import exit_with_parent, hear_interrupts, terminate_as_interrupt

    exit_with_parent(owner)
    if env is not None:
        from jfa_verify.run.isolation import adopt_environment

        adopt_environment(env)
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu  # before anything touches CUDA in this process or its children

    def send(event: dict) -> None:
        events.put((worker, event))

    try:
        if ctrl_c:
            hear_interrupts()  # (started deaf to them: its imports are not a place to die of a Ctrl-C)
        with terminate_as_interrupt():
            from jfa_verify.core.device import select_device
            from jfa_verify.protocol.registry import get_kernel, load_plugins

            from .campaign import Campaign

            device = select_device(config.device_type)
            load_plugins(config.run.plugins)
            kernel = get_kernel(config.kernel)
            seed = worker_seed(config.run.seed, worker)
            send({"event": "start", "device": f"{device}{'' if gpu is None else ':' + gpu}", "seed": seed,
                  "pid": os.getpid()})
            strategy = campaign_strategy(config, kernel, device.type)
            summary = Campaign(
                kernel, config.run.replace(seed=seed), strategy=strategy, pack=config.pack,
                max_examples=max_examples, corpus_dir=config.corpus_dir, device=device, shrink=config.shrink,
                database=config.database, read_from=config.read_from, deadline=deadline, worker=worker,
                replay=replay, on_event=send, should_stop=stop.is_set, shrink_seconds=config.shrink_seconds,
                round_examples=config.round_examples, covering=config.covering and worker == 0).run()
        send({"event": "done", "summary": summary.to_dict()})
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM before the campaign had a summary (loading, setting up): an
        # interrupt with nothing done, not a dead worker (a new user's early Ctrl-C read "worker 0 died")
        send({"event": "done", "summary": _interrupted_summary()})
    except BaseException as e:  # the worker itself failed (not a kernel: those are verdicts)
        send({"event": "died", "why": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]})


def _shares(total: Optional[int], n: int) -> list[Optional[int]]:
    if total is None:
        return [None] * n
    return [total // n + (1 if w < total % n else 0) for w in range(n)]


def visible_device(index) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` entry of this process's GPU ``index`` (as torch numbers them): a worker
    pinned with it sees that same GPU, also when this process was itself started on a subset of the GPUs
    (``CUDA_VISIBLE_DEVICES=2,3``: index 0 is GPU 2). A UUID or MIG name is passed on as given."""
    index = str(index)
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if "CUDA_VISIBLE_DEVICES" in os.environ and index.isdigit() and int(index) < len(visible):
        return visible[int(index)]
    return index


def leftover_note(left: dict) -> str:
    """The note on one file a killed process left "running", replayed before the campaign (a
    :func:`~jfa_verify.fuzz.campaign.prepare_corpus` leftover)."""
    fate = ("" if left["status"] in ("pass", "unsupported") else
            " (kept as a finding)" if left.get("kept", True) else
            " (an example of a finding already kept: its file is folded into that finding's examples)")
    if left.get("split_from"):
        return (f"left 'running' by a killed process: {left['split_from']}: packed; its failure stands in "
                f"{left['path']}: {left['status']} on replay{fate}")
    return f"left 'running' by a killed process: {left['path']}: {left['status']} on replay{fate}"


def run_fuzz(config: FuzzConfig, *, workers: int = 1, gpus: Sequence[str] = (), console=None, live: bool = True,
             interval: float = 10.0, report: "str | Path | None" = None, png: "str | Path | None" = None) -> dict:
    """Run a campaign with ``workers`` processes; returns its report (also written to ``report``).

    Args:
        config: the campaign's settings.
        workers: worker processes (several per GPU for small cases).
        gpus: GPU indices the workers are pinned to, round-robin (CUDA only; empty: none pinned).
        console: a rich console for notes (leftovers replayed, a folder put in order after a kill, an interrupt)
            and live progress (None: silent).
        live: show live progress on ``console`` (False: its notes only, as ``--no-progress``).
        interval: seconds between progress lines when the console is not a terminal (a log).
        report, png: where to write the JSON report and the PNG of cases and findings over time.

    Raises:
        InvalidInput, PluginError: a bad kernel, plugin, device or database (before any worker starts), or another
            campaign running on ``config.corpus_dir`` (:func:`campaign_lock`).
    """
    from jfa_verify.core.device import select_device
    from jfa_verify.protocol.registry import get_kernel, load_plugins

    device = select_device(config.device_type)
    load_plugins(config.run.plugins)
    kernel = get_kernel(config.kernel)
    from jfa_verify.core.errors import InvalidInput
    from jfa_verify.strategies import undrawable_reason

    why = undrawable_reason(campaign_strategy(config, kernel, device.type))
    if why is not None:  # (found by the workers, it read "no case finished before the campaign ended")
        raise InvalidInput(f"the campaign can draw no case inside the capabilities of kernel {kernel.name!r} on "
                           f"{device.type}: {why}")
    corpus_dir = Path(config.corpus_dir)
    from .database import default_database, open_database

    # a bad spec or an absent server fails here, once, before the folder is made or held
    open_database(config.database or default_database(corpus_dir), config.read_from)
    corpus_dir.mkdir(parents=True, exist_ok=True)
    with campaign_lock(corpus_dir):
        return _run_fuzz(config, device, kernel, corpus_dir, workers=workers, gpus=gpus, console=console, live=live,
                         interval=interval, report=report, png=png)


def campaign_strategy(config: FuzzConfig, kernel, device_type: str):
    """What each worker of the campaign ``config`` draws for ``kernel``: :func:`~jfa_verify.strategies.cases`, or
    :func:`~jfa_verify.strategies.packs` of ``config.pack`` cases a launch."""
    from jfa_verify.strategies import cases, packs

    if config.pack == 1:
        return cases(kernel, device_type=device_type, **config.strategy)
    return packs(kernel, device_type=device_type, size=config.pack, **config.strategy)


def precompile_campaign(config: FuzzConfig, kernel, device):
    """Build the kernel variants of the contract's covering array for ``kernel`` on ``device`` (every pair of
    classes: the dtypes, head dims, masks and modes a campaign draws) once, in parallel processes, before the workers
    start: cold, each worker built each variant it met at its first launch, one after another (an H100's
    ``bench_verify`` built 354 variants in 30 s of 16 workers, 92% of their time). Returns the
    :class:`~jfa_verify.run.precompile.Precompiled` record (on the CPU interpreter, a measured no-op that draws
    nothing)."""
    from jfa_verify.cases.dimensions import Target
    from jfa_verify.cases.pairs import covering_array
    from jfa_verify.core.device import interpreting
    from jfa_verify.run.parallelism import choose_jobs
    from jfa_verify.run.precompile import precompile

    cases = [] if interpreting() else covering_array(Target(kernel, device.type), seed=config.run.seed)
    return precompile(kernel, cases, device, jobs=choose_jobs(None).count, backward=config.run.backward,
                      memory=config.run.memory, plugins=config.run.plugins)


LOCK_FILE = ".campaign.lock"


@contextlib.contextmanager
def campaign_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder`` for one campaign (an advisory ``flock`` on its :data:`LOCK_FILE`, released by the system
    when the process dies, even by ``kill -9``).

    A new user's second campaign on the same folder took the first one's in-flight ``"running"`` file for a
    killed campaign's leftover, replayed it and kept it as its own finding. Campaigns share examples through
    ``--database``/``--read-from``, never a reproducer folder.

    Raises:
        InvalidInput: another live process holds the folder (its pid named).
    """
    import fcntl

    from jfa_verify.core.errors import InvalidInput

    from .database import default_database

    path = folder / LOCK_FILE
    while True:
        handle = open(path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "a process"
            handle.close()
            raise InvalidInput(f"--reproducers {folder}: another campaign ({holder}) is running on this folder; "
                               f"wait for it, or give this one its own folder (add --read-from "
                               f"{default_database(folder)} to start from its examples)") from None
        try:  # the holder before removed the file on its way out: lock the one now at the path
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    try:
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        # The file goes with the campaign (a new user found it left after a clean finish); removed while still
        # locked, so a campaign waiting on this inode sees it gone and opens a new one (the loop above).
        with contextlib.suppress(OSError):
            path.unlink()
        handle.close()  # (closing releases the lock)



def new_findings(found: list) -> list:
    """The ids of the findings this campaign found (its search's or its covering array's, ``FOUND_HERE``), of its
    failures' dicts (``CampaignFailure.to_dict``); a saved finding replayed is not new (a ``--covering`` campaign in
    a fresh folder once reported ``new_findings 0`` beside four findings of its covering array)."""
    from .campaign import FOUND_HERE

    return sorted({f.get("id") or f["signature"]["id"] for f in found if f["source"] in FOUND_HERE})


def distinct_failures(rows: list, new: Sequence[str]) -> list[dict]:
    """The distinct failures among a campaign's listed findings (``rows``, :func:`~jfa_verify.fuzz.findings.
    list_findings`), grouped as ``jfa-verify findings`` groups them (:func:`~jfa_verify.fuzz.findings.
    failure_groups`), each ``{"id", "findings", "rows", "examples", "new"}``: its head row's id, the ids of all its
    rows (each a case file kept, none dropped) and their indices in ``rows``, their examples together, and whether it
    is new: every one of its findings is among ``new`` (:func:`new_findings`); one saved before makes the failure a
    known one. A campaign that counted each file as a NEW finding reported one planted bug as several (a new user's
    trial)."""
    from .findings import failure_groups

    new = set(new)
    return [{"id": rows[g[0]]["id"], "findings": [rows[i]["id"] for i in g], "rows": g,
             "examples": sum(rows[i]["examples"] for i in g), "new": all(rows[i]["id"] in new for i in g)}
            for g in failure_groups(rows)]


def _reported(config: FuzzConfig) -> dict:
    """The campaign's configuration as its report shows it: a Redis URL's password replaced by ``***``."""
    from jfa_verify.fuzz.database import redacted

    run = config.run
    shown = asdict(replace(config, run=None))
    shown["run"] = {**{f.name: getattr(run, f.name) for f in fields(run) if f.name != "budgets"},
                    "budgets": "packaged" if run.budgets is None else "given"}
    if shown.get("database"):
        shown["database"] = redacted(str(shown["database"]))
    shown["read_from"] = [redacted(str(r)) for r in shown.get("read_from") or ()]
    return shown

def _replay_relation_findings(corpus_dir: Path, kernel, device, config: FuzzConfig, say) -> list[dict]:
    """Check the relation of each call file ``kernel`` left in ``corpus_dir`` (a relation finding of ``run`` or the
    gate) again before the campaign draws, as its saved case findings are replayed: one that still breaks is a
    finding of this campaign (its status counts in the exit status), one that holds now is moved to the folder's
    now-passing subfolder. A new user's campaign listed such a file as ``[fail]`` without replaying it, and exited 0.
    Unreadable call files are left to the unreadable case files' line."""
    from jfa_verify.checks.calls import replay_call_files
    from jfa_verify.run.corpus import Corpus, replay_command

    corpus, out = Corpus(corpus_dir), []
    for r in replay_call_files(corpus.call_files(), kernel, device, config.run.plugins, config.run.timeout_s):
        if r.status == "unreadable":
            continue
        where = r.relation.case.name or r.relation.case.describe()
        row = {"path": str(r.path), "relation": r.relation.name, "case": where, "status": r.status}
        if r.status == "pass":
            row["now_passing"] = str(corpus.move_to_now_passing(r.path, r.recorded or "fail"))
            say(f"  saved relation finding replayed: relation {r.relation.name} on {where} holds now")
        else:
            row["finding"] = r.finding
            say(f"  saved relation finding replayed: [{r.status.upper()}] relation {r.relation.name} on {where}: "
                f"{r.finding.splitlines()[0][:240]}; replay: "
                f"{replay_command(r.path, kernel.name, config.run.plugins)}")
        out.append(row)
    return out


def _run_fuzz(config: FuzzConfig, device, kernel, corpus_dir: Path, *, workers: int, gpus: Sequence[str], console,
              live: bool, interval: float, report, png) -> dict:
    """:func:`run_fuzz` once its folder is held."""
    from jfa_verify.cases.coverage import unsupported_classes
    from jfa_verify.core.exits import ExitCode, exit_code_for
    from jfa_verify.run.corpus import environment
    from jfa_verify.run.interrupts import terminate_as_interrupt
    from jfa_verify.run.isolation import start_child, start_worker_server, worker_context
    from jfa_verify.run.loop import Verifier
    from jfa_verify.run.report import write_json

    from .campaign import STOP_GRACE_S, classifier, prepare_corpus, saved_findings
    from .database import default_database
    from .findings import list_findings, recover, unreadable_case_files
    from .progress import CampaignProgress, plot_timeline

    database = config.database or default_database(corpus_dir)
    config = replace(config, database=database)
    classes_of = classifier(kernel, device.type)
    started = time.time()
    say = (lambda text: console.print(text, highlight=False)) if console is not None else (lambda text: None)
    gpus = [visible_device(g) for g in gpus]
    gpu_env = {"CUDA_VISIBLE_DEVICES": gpus[0]} if gpus else {}
    interrupted = False
    try:
        with terminate_as_interrupt(), Verifier(kernel, device, corpus_dir, config.run,
                                                worker_env=gpu_env) as verifier:
            prep = prepare_corpus(corpus_dir, kernel, verifier, classes_of)
    except KeyboardInterrupt:  # while a killed campaign's files were replayed: each is kept as it was; no worker starts
        interrupted = True
        prep = {"leftovers": [], "shrink_steps_removed": 0, "duplicates_removed": 0, "new_findings": 0}
        say("interrupted while the folder was put in order (files left 'running' by a killed process are kept for "
            "the next campaign); the report is written")
    # (plain notes, with or without live progress: a new user's --no-progress campaign recovered findings silently)
    notes = [leftover_note(left) for left in prep["leftovers"]]
    if prep["shrink_steps_removed"] or prep["duplicates_removed"] or prep["new_findings"]:
        notes.append(f"folder put in order before the campaign (files earlier runs or campaigns left in it): "
                     f"{prep['new_findings']} "
                     f"finding(s) recovered, {prep['shrink_steps_removed']} shrink step(s) and "
                     f"{prep['duplicates_removed']} duplicate(s) removed")
    for note in notes:
        say(f"  note: {note}")
    for path, why in unreadable_case_files(corpus_dir):  # (left untouched: a finding may be lost in one)
        say(f"  error: {path} is not a readable case file ({why}); this campaign cannot replay it and leaves it as it "
            f"is: restore it, or remove it once you have read it")
    relation_replays = []
    if not interrupted:
        try:
            relation_replays = _replay_relation_findings(corpus_dir, kernel, device, config, say)
        except KeyboardInterrupt:
            interrupted = True
            say("interrupted while the saved relation findings were replayed (their files are kept as they were); "
                "the report is written")
    saved = saved_findings(corpus_dir, kernel.name)
    leftover_paths = {left["path"] for left in prep["leftovers"]}
    replay = [p for p in saved if str(p) not in leftover_paths]
    deadline = None if config.duration_s is None else started + config.duration_s
    precompiled = None
    if not interrupted and config.precompile:
        try:
            precompiled = precompile_campaign(config, kernel, device)
        except KeyboardInterrupt:  # (the builds end with it; no worker starts)
            interrupted = True
            say("interrupted while the kernel variants were built; the report is written")
        else:
            if not precompiled.skipped:  # (the interpreter's no-op is the report's to say, not a campaign line)
                say(f"  {precompiled.summary()}")

    # Workers fork from the case workers' fork server, which has imported torch and jfa-verify (a spawned worker
    # spent about 2.5 s importing them), started deaf to Ctrl-C as spawned workers were.
    ctx = worker_context()
    start_worker_server(ctx)
    events, stop = ctx.Queue(), ctx.Event()
    shares = _shares(config.max_examples, workers)
    procs = {}
    progress = CampaignProgress(workers, device_type=device.type, console=console if live else None,
                                interval=interval, capabilities=kernel.capabilities)
    summaries, deaths = {}, {}
    ctrl_c = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN  # (a background job's workers ignore it as it does)
    with progress, terminate_as_interrupt():
        try:
            for w in range(workers if not interrupted else 0):
                gpu = str(gpus[w % len(gpus)]) if gpus else None
                procs[w] = ctx.Process(target=_worker_main, name=f"jfa-verify-fuzz-worker-{w}",
                                       args=(config, w, shares[w], [str(p) for p in replay[w::workers]], deadline, gpu,
                                             events, stop, ctrl_c, os.getpid(), dict(os.environ)))
                start_child(ctx, procs[w])
        except KeyboardInterrupt:  # (the workers started hear of it through stop, as below)
            interrupted = True
            stop.set()
            say("interrupted: workers finish their current case, then the report is written")
        pending, dead_at = set(procs), {}
        while pending:
            try:
                try:
                    w, event = events.get(timeout=0.25)
                except queue_module.Empty:
                    w, event = None, None
                if event is not None:
                    progress.event(w, event)
                    if event["event"] == "done":
                        summaries[w] = event["summary"]
                        pending.discard(w)
                    elif event["event"] == "died":
                        deaths[w] = event
                        pending.discard(w)
                now = time.time()
                for w in list(pending):
                    if not procs[w].is_alive():
                        dead_at.setdefault(w, now)
                        if now - dead_at[w] > _GRACE_S:  # no last word: killed from outside, or crashed in-process
                            if interrupted and procs[w].exitcode in (-signal.SIGINT, -signal.SIGTERM):
                                # (the user's Ctrl-C or SIGTERM reached it too): interrupted, not dead
                                summaries[w] = _interrupted_summary()
                                progress.event(w, {"event": "done", "summary": summaries[w]})
                            else:
                                deaths[w] = _death(procs[w].exitcode, w, corpus_dir, started,
                                                   not config.run.isolate)
                                progress.event(w, deaths[w])
                            pending.discard(w)
                progress.tick()
            except KeyboardInterrupt:
                if interrupted:  # the second Ctrl-C: stop waiting
                    for p in procs.values():
                        p.kill()
                    break
                interrupted = True
                stop.set()
                say(f"interrupted: workers finish their current case (one still running {STOP_GRACE_S:g} s later is "
                    f"stopped without a verdict), then the report is written (Ctrl-C again to kill them)")
        for p in procs.values():
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
    # Two workers can find one bug at the same time: merge once more, now that they are done.
    final = recover(corpus_dir, kernel.name, classes_of)
    seconds = time.time() - started
    interrupted = interrupted or any(s.get("interrupted") for s in summaries.values())
    found = [f for s in summaries.values() for f in s["failures"]]
    statuses = [f["status"] for f in found] + [left["status"] for left in prep["leftovers"]]
    statuses += [r["status"] for r in relation_replays if r["status"] != "pass"]
    # --no-isolate: a kernel that crashes or hangs takes its campaign worker with it (_death gives the verdict)
    statuses += [d["status"] for d in deaths.values() if d.get("status")]
    drawn, expected = progress.coverage()
    rows = list_findings(corpus_dir, kernel.name)
    code = ExitCode.INTERRUPTED if interrupted else exit_code_for(statuses)
    if deaths and code == ExitCode.OK:
        code = ExitCode.USAGE  # a worker could not run: nothing meaningful was checked by it
    if code == ExitCode.OK and not progress.cases:  # no case got a verdict (each still running at the end was stopped):
        # nothing was checked, which a CI gate must not read as a pass (a new user's campaign on a kernel hanging
        # on every case exited 0, "no findings")
        code = ExitCode.USAGE
        notes.append("no case finished before the campaign ended, so nothing was checked (exit 2): see the cases "
                     "stopped without a verdict in these notes, give a longer --duration, or replay one to see it hang")
    # A case file that cannot be read may hold a finding this campaign could not replay: as `jfa-verify findings` and
    # the gate's replay check, that is not a pass; a finding's own status says more (a confirmed wrong output beside
    # a truncated file exited 2, which a CI step reads as a configuration error: a new user's trial).
    unreadable = [{"path": str(p), "why": why} for p, why in unreadable_case_files(corpus_dir)]
    if unreadable and code == ExitCode.OK:
        code = ExitCode.USAGE
    payload = {
        "format": "jfa-verify-campaign/1",
        "kernel": kernel.name, "device": str(device), "workers": workers, "gpus": [str(g) for g in gpus],
        "seed": config.run.seed, "seeds": [worker_seed(config.run.seed, w) for w in range(workers)],
        "config": _reported(config),
        "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
        "seconds": round(seconds, 3), "cases": progress.cases,
        "cases_per_minute": round(60 * progress.cases / max(seconds, 1e-9), 1),
        "drawn": drawn_count(summaries, progress),
        "covering": progress.phases["covering"],  # the covering array's cases run (--covering), not drawn
        "precompile": precompiled.to_dict() if precompiled is not None else None,
        # per worker, a digest of the ids of the cases it drew, in order: one seed draws the same whatever the
        # database holds (Campaign._search), and two campaigns with the same digests drew the same cases
        "draws": {str(w): s.get("draws", "") for w, s in sorted(summaries.items())},
        # packed launches (--pack): each holds several of the cases counted above; split: failed and split up
        "packs": {"launches": sum(s.get("packs", 0) for s in summaries.values()),
                  "split": sum(s.get("packs_failed", 0) for s in summaries.values())},
        "statuses": dict(progress.statuses), "shrink_statuses": dict(progress.shrink_statuses),
        "interrupted": interrupted, "exit_code": int(code),
        "new_findings": new_findings(found),  # (ids of finding files; one failure may have several: below)
        "failures": found,  # this campaign's own failing cases (each worker's), with verdict and case file
        "findings": rows,
        # the findings grouped by failure, as `jfa-verify findings` groups them: what the summary counts as NEW
        "distinct_failures": distinct_failures(rows, new_findings(found)),
        "fixed": sorted({p for s in summaries.values() for p in s["fixed"]}),
        "leftovers": [{"path": left["path"], "status": left["status"]} for left in prep["leftovers"]],
        "recovery": {k: v + final.get(k, 0) for k, v in prep.items() if k != "leftovers"},
        "coverage": {"counts": dict(progress.classes), "drawn": drawn, "expected": expected,
                     "never_drawn": [c for c in progress.expected if not progress.classes.get(c)],
                     "outside_capabilities": sorted(unsupported_classes(kernel.capabilities))},
        "per_worker": [{"worker": s.worker, "device": s.device, "seed": s.seed, "state": s.state, "cases": s.cases,
                        "cases_per_minute": round(s.rate(time.time()), 1), "failing": s.failing,
                        "findings": s.findings, "seconds": dict(s.seconds)} for s in progress.workers.values()],
        "worker_errors": {str(w): d for w, d in deaths.items()},
        "unreadable_case_files": unreadable,
        "relation_replays": relation_replays,  # the folder's saved relation findings, checked again first
        "notes": notes + sorted({n for s in summaries.values() for n in s["notes"]}),
        "breakdown_seconds": progress.breakdown(),
        "timeline": [list(p) for p in progress.timeline],
        "finding_times": [list(f) for f in progress.finding_times],
        "environment": environment(),
    }
    if report:
        write_json(report, payload)
    if png:
        try:
            plot_timeline(progress, png,
                          title=f"{kernel.name} on {device}, {workers} worker(s), seed {config.run.seed}")
        except ImportError:
            payload["notes"].append("no PNG: matplotlib is missing (pip install 'jfa-verify[plots]')")
    return payload
