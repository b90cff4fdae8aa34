"""Reproducer files: one self-contained JSON per failing case, written before the case runs.

A case file is written *before* the kernel runs (status ``"running"``), so a
crash, hang or kill of the process leaves it behind; a pass removes it, a
failure rewrites it with the verdict. Replaying a file reproduces the case bit
for bit (see :meth:`jfa_verify.cases.case.Case.materialize`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import sys
import threading
import uuid
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from jfa_verify.cases.case import Case
from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.exits import ExitCode, declare_exit
from jfa_verify.core.paths import DEFAULT_REPRODUCERS
from jfa_verify.core.watchdog import watchdog
from jfa_verify.run.interrupts import process_alive, process_start

__all__ = ["Corpus", "RERUN_KEYS", "read_case_file", "environment", "normalize_status", "replay_command",
           "replay_timeout", "campaign_folder", "mark_hang", "kept_only_if_written", "reproducer_folders",
           "TIMEOUT_EXIT_CODE", "failing_status"]

FORMAT = "jfa-verify-case/1"
TIMEOUT_EXIT_CODE = int(ExitCode.HANG)  # the process exit status after a watchdog timeout
RUNNING = "running"  # the status of a case file whose case has not finished (or whose process died)
NOW_PASSING = "now-passing"  # the subfolder keeping earlier findings' files whose cases now pass (Corpus.record)
# Keys that belong to a case file, not to one run of its case: kept when the case runs again.
FILE_KEYS = ("finding", "found_by", "shrunk_from")
# Keys of a case file whose case was rerun in one process and compared run with run (the gate's determinism and
# stress checks: jfa_verify.checks.determinism, jfa_verify.checks.stress): {"reruns": N, ...}; such a file has a
# name of its own (Corpus.path_for) and `replay` reruns it that many times.
RERUN_KEYS = ("determinism", "stress")


def normalize_status(status: str) -> str:
    """A case file's status in today's words: ``"timeout"`` (older files) is ``"hang"``."""
    return "hang" if status == "timeout" else status


# The limit of a replayed hang whose file does not say how long its run waited (a watchdog's file has no verdict).
HANG_REPLAY_S = 120.0


def replay_timeout(payload: dict, timeout_s: Optional[float] = None) -> Optional[float]:
    """Seconds a replay of a case file (its ``payload``) may run before it is a hang: ``timeout_s`` when given;
    else, for a recorded hang, as long as its run waited (its verdict's kernel seconds, or the limit a watchdog
    recorded, ``timeout_s``: a bisect step's hang replayed with 120 s where it had waited 5; else
    :data:`HANG_REPLAY_S`), since a hung kernel replayed without a limit holds the replay for as long as it
    hangs; for a ``"running"`` file (its process died or was killed mid-case: most often a crash or a hang)
    :data:`HANG_REPLAY_S`; else None (no limit). The recorded wait is the run's limit plus the watchdog's slack
    (under 0.1 s), so it is cut to tenths of a second: a limit of 5 s replays with 5 s (not 5.00423), one of
    2.4 s with 2.4 s."""
    status = normalize_status(payload.get("status", ""))
    if timeout_s or status not in ("hang", RUNNING):
        return timeout_s
    if status == RUNNING:
        return HANG_REPLAY_S
    waited = ((payload.get("verdict") or {}).get("seconds") or {}).get("kernel") or payload.get("timeout_s")
    try:
        waited = float(waited) if waited else math.nan  # (a file's "inf" or "nan" string: no limit it kept)
    except (TypeError, ValueError):
        waited = math.nan
    return max(0.1, math.floor(waited * 10) / 10) if math.isfinite(waited) else HANG_REPLAY_S


def environment() -> dict:
    """Versions and device of this process, recorded with every case file and report (a copy of what was
    computed once per process: it is written with every case file)."""
    # TRITON_INTERPRET is read now: select_device may set it after the first call.
    return {**_environment(), "triton_interpret": os.environ.get("TRITON_INTERPRET", "0")}


@functools.lru_cache(maxsize=1)
def _environment() -> dict:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:  # pragma: no cover - triton is a dependency
        triton_version = None
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "platform": platform.platform(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def mark_hang(path: Path, explanation: str, timeout_s: Optional[float] = None) -> dict:
    """Rewrite the ``"running"`` case file ``path`` as a ``"hang"`` with ``explanation`` (the watchdog's last act
    before its process ends: a hung kernel cannot be interrupted from Python) and the limit it ran past,
    ``timeout_s`` (a replay waits as long: :func:`replay_timeout`), and return its payload.

    Raises:
        OSError, ValueError: the file cannot be read or is no JSON (the caller ends the process all the same).
    """
    with _folder_lock(path.parent):
        payload = json.loads(path.read_text())
        for key in _HOLD_KEYS:
            payload.pop(key, None)
        payload.update(status="hang", explanation=explanation, **({"timeout_s": timeout_s} if timeout_s else {}))
        _write_atomic(path, payload)
    return payload


def _end_hung_case(path: Path, timeout_s: float) -> Callable[[], None]:
    """The watchdog's action for the case in ``path``: mark it a hang, say which case and how to replay it, and end
    the process (exit :data:`TIMEOUT_EXIT_CODE`)."""
    def fire() -> None:
        payload = {}
        try:
            payload = mark_hang(path, f"no result after {timeout_s} s; process ended", timeout_s)
        finally:
            # in-process there is no table or report after this: say which case it was and how to replay it
            try:

                replay = replay_command(path, payload.get("kernel"), payload.get("plugins", ()))
            except Exception:  # the process is ending: the message must not depend on the file being readable
                replay = f"jfa-verify replay {path}"
            print(f"[HANG] no result after {timeout_s:g} s (--timeout) on the case in {path}; this process ends "
                  f"(exit {TIMEOUT_EXIT_CODE}). Replay: {replay}. Run cases in worker processes "
                  "(--isolate) so that a hang is one case's finding and the run goes on.", file=sys.stderr, flush=True)
            os._exit(declare_exit(TIMEOUT_EXIT_CODE))

    return fire


def _write_atomic(path: Path, payload: dict) -> None:
    from jfa_verify.core.json_text import dumps

    _write_text_atomic(path, dumps(payload, indent=2, sort_keys=True))


def _write_text_atomic(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file of this process and thread alone: two workers writing one case file
    through one shared ``.tmp`` name moved each other's text into place, or lost their own (issue: a case file left
    behind by ``fuzz --isolate --workers 2``)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder`` while a case file in it is read and rewritten (an advisory ``flock`` on the folder itself,
    across processes and threads: each call opens its own descriptor; none where the system has no ``flock``)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: one process per folder
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (closing releases the lock)


# The keys of a "running" file that say who is running its case (guard ... record/discard, see Corpus.guard):
# "holders": [[pid, token, start], ...] of the guards in flight (_holder); "earlier": the file's text before the first
# of them (None: there was none); "passed": one of them passed already.
_HOLD_KEYS = ("holders", "earlier", "passed")
_LIVE_TOKENS: set = set()  # this process's guards in flight


def _holder(token: str) -> list:
    """This process's entry among a running file's holders: ``[pid, token, start]``."""
    return [os.getpid(), token, process_start(os.getpid())]


def _alive(holder) -> bool:
    """A guard in flight: this process's (its token still live), or another process that is still running (a killed
    process's guard, whose "running" file a later campaign replays as a leftover, is not)."""
    try:
        pid, token = int(holder[0]), str(holder[1])
        start = holder[2] if len(holder) > 2 else None
    except (TypeError, ValueError, IndexError):
        return False
    if pid == os.getpid():
        return token in _LIVE_TOKENS
    return process_alive(pid, start)


def _payload_of(text: Optional[str]) -> Optional[dict]:
    """The JSON object ``text`` holds, or None (no text, not JSON, not an object)."""
    try:
        payload = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def _read_payload(path: Path) -> Optional[dict]:
    try:
        return _payload_of(path.read_text())
    except OSError:
        return None


def failing_status(text: Optional[str]) -> Optional[str]:
    """The failing status of a case or call file's text, or None (no text, not such a file, or not failing)."""
    try:
        status = normalize_status(json.loads(text or "").get("status", ""))
    except (ValueError, AttributeError):
        return None
    return status if status in ("fail", "error", "crash", "hang") else None


@contextlib.contextmanager
def kept_only_if_written(folder: "str | Path | None") -> Iterator[None]:
    """The default reproducer folder (:data:`DEFAULT_REPRODUCERS`), when it did not exist before the block and is
    empty after it, is removed: a run writes each case's file before the case runs (:meth:`Corpus.guard`) and removes
    it when the case passes, so a run whose every case passed left an empty ``jfa-reproducers/`` in the current
    folder, unasked. Only an empty folder is removed (``os.rmdir``): a case file, of this run or of another process,
    keeps it. A folder named by ``--reproducers`` was asked for and is kept, empty: ``jfa-verify findings FOLDER``
    after a passing run then says "no findings" (a new user's CI step failed, exit 2, exactly when every case
    passed). ``None`` (no folder): nothing."""
    existed = folder is None or Path(folder) != Path(DEFAULT_REPRODUCERS) or Path(folder).exists()
    try:
        yield
    finally:
        if not existed:
            try:
                os.rmdir(folder)
            except OSError:  # not empty (a finding was kept), or never made
                pass


class Corpus:
    """A folder of case files (``<case_id>-<kernel>.json``).

    Several processes (a campaign's workers) and threads may verify cases in one folder, and two of them may verify
    the same case at once (both draw it): every read and rewrite of a case file is done under a lock on the folder,
    and a ``"running"`` file names the guards running its case (:meth:`guard`), so that the last of them to finish
    decides its fate: a failing verdict written by any of them stays (no finding is lost); otherwise a pass by any of
    them removes the file (a case file is removed exactly when a pass is its verdict), and when none gave a verdict
    the file that stood there before the first of them is put back (none: no file is left behind)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        # path -> [(pid, token) of each of this object's guards in flight on it]
        self._held: dict[Path, list] = {}
        self.now_passing: list[Path] = []  # earlier findings that passed and were moved (:meth:`record`)

    def now_passing_folder(self) -> Path:
        """Where :meth:`record` keeps the files of earlier findings whose cases now pass (``<root>/now-passing``):
        out of the findings (neither ``findings`` nor a campaign's replay reads it), never deleted."""
        return self.root / NOW_PASSING

    def path_for(self, case: Case, kernel: str, memory: Optional[str] = None, reruns: Optional[str] = None) -> Path:
        """The case file of ``case`` on ``kernel``; a run under a memory mode (the gate's canary and
        recycled-memory checks) has its own, and so have reruns (``reruns``: a key of :data:`RERUN_KEYS`, the gate's
        determinism and stress checks), so that no check's finding overwrites another's."""
        if reruns is not None:
            return self.root / f"{case.case_id()}-{kernel}-{reruns}.json"
        return self.root / (f"{case.case_id()}-{kernel}.json" if memory is None
                            else f"{case.case_id()}-{kernel}-memory-{memory}.json")

    @contextlib.contextmanager
    def guard(self, case: Case, kernel: str, device: str, timeout_s: Optional[float] = None,
              plugins: tuple[str, ...] = (), annotations: Optional[dict] = None) -> Iterator[Path]:
        """Write the case file first; the caller calls :meth:`record` (or :meth:`discard`) or the file stays as
        ``running``.

        With ``timeout_s``, a watchdog marks the file ``"hang"`` and ends the process with
        :data:`TIMEOUT_EXIT_CODE` if the block is still running after that many seconds: a hung
        kernel cannot be interrupted from Python, and the finding must not be lost. (An isolated
        :class:`~jfa_verify.run.loop.Verifier` passes no ``timeout_s``: its parent process keeps the time.)
        ``annotations``: extra keys stored in the file (a campaign's shrink round, so that a killed
        campaign's shrink steps can be told apart from findings; ``memory`` or a key of :data:`RERUN_KEYS` also
        chooses the file's name, :meth:`path_for`).

        The ``"running"`` file records this guard among its ``holders`` (with the process's id) and, in
        ``earlier``, the text the file had before the first guard still in flight: a saved finding replayed, or a
        killed process's ``"running"`` file (its holders are gone) being replayed. A second worker running the same
        case joins the first one's holders and shares its ``earlier`` (it never takes the first one's
        ``"running"`` file for a file to put back).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.path_for(case, kernel, (annotations or {}).get("memory"),
                             next((k for k in RERUN_KEYS if k in (annotations or {})), None))
        me = _holder(uuid.uuid4().hex)
        with _folder_lock(self.root):
            kept, holders, passed = {}, [], False
            try:
                earlier = path.read_text()  # put back as it was by a discard (None: there was none)
            except OSError:
                earlier = None
            old = _payload_of(earlier)
            if old is not None:  # the case ran before (a finding replayed): its file keeps what marks it
                kept = {k: old[k] for k in FILE_KEYS if k in old}
                live = [h for h in old.get("holders") or () if _alive(h)]
                if old.get("status") == RUNNING and live:  # running now, by another worker: join it
                    holders, earlier, passed = live, old.get("earlier"), bool(old.get("passed"))
            _LIVE_TOKENS.add(me[1])
            self._held.setdefault(path, []).append(me)
            _write_atomic(path, {**kept, **(annotations or {}), "format": FORMAT, "case": case.to_dict(),
                                 "kernel": kernel, "device": device, "plugins": list(plugins), "status": RUNNING,
                                 # as given (a replay from the run's folder), and absolute (from any other folder)
                                 "plugin_paths": [str(Path(p).resolve()) for p in plugins],
                                 "environment": environment(),
                                 "holders": holders + [me], "earlier": earlier, "passed": passed})
        try:
            with watchdog(timeout_s, _end_hung_case(path, timeout_s)):
                yield path
        finally:
            # (neither recorded nor discarded: an exception of the caller's; the file stays "running", and this
            # guard is no longer live, so a later guard takes the file for a leftover to put back)
            held = self._held.get(path) or []
            if me in held:
                held.remove(me)
                if not held:
                    self._held.pop(path, None)
            _LIVE_TOKENS.discard(me[1])

    def _release(self, path: Path) -> tuple[Optional[dict], list]:
        """Under the folder lock: the current payload of ``path`` (None: gone) and the live holders other than
        this object's latest guard on it, which is released."""
        held = self._held.get(path) or []
        me = held.pop() if held else None
        if me is not None:
            _LIVE_TOKENS.discard(me[1])
        if not held:
            self._held.pop(path, None)
        payload = _read_payload(path)
        if payload is None:
            return None, []
        others = [h for h in payload.get("holders") or () if list(h) != me and _alive(h)]
        return payload, others

    def _passed(self, path: Path, earlier: Optional[str]) -> None:
        """The last guard out of a case that passed: remove its file, or move an earlier verdict to
        :meth:`now_passing_folder` (a new user's passing rerun silently deleted the reproducers of the cases it fixed:
        issue 43, 12)."""
        status = failing_status(earlier)
        if status is None and earlier is not None and "status" not in (_payload_of(earlier) or {}):
            # a file no reader understands (truncated, say) stood there: every reader said it would be left as it
            # is, and a pass of the case its name says is no verdict on what it held (a new user's campaign
            # deleted such a file, then exited 0)
            _write_text_atomic(path, earlier)
            return
        if status is None:
            path.unlink(missing_ok=True)
            return
        kept = self.now_passing_folder() / path.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        _write_text_atomic(kept, earlier)  # the earlier verdict, as it was (the file now says "running")
        path.unlink(missing_ok=True)
        self._kept_as_now_passing(path, status, kept)

    def _kept_as_now_passing(self, path: Path, status: str, kept: Path) -> None:
        self.now_passing.append(kept)
        print(f"jfa-verify: {path.name} (recorded {status}) now passes: its reproducer is kept as {kept}, out of "
              f"the findings; delete it once you no longer need it", file=sys.stderr, flush=True)

    def move_to_now_passing(self, path: Path, status: str) -> Path:
        """Move the finding file ``path`` (recorded ``status``: a call file whose relation holds again) to
        :meth:`now_passing_folder`, with the line on stderr that :meth:`record` writes for a case file; returns where
        it is now."""
        kept = self.now_passing_folder() / Path(path).name
        kept.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, kept)
        self._kept_as_now_passing(Path(path), status, kept)
        return kept

    def record(self, path: Path, result) -> Optional[Path]:
        """Keep ``path`` with the verdict when ``result`` failed; otherwise delete it, unless it held an earlier
        verdict (a finding replayed or run again): that file is moved to :meth:`now_passing_folder`, with a line on
        stderr saying where (a new user's passing rerun silently deleted the reproducers of the cases it fixed:
        issue 43, 12). A ``"running"`` leftover that passes had no verdict and is removed.

        Another worker running the same case at once: a failing verdict is written at once (and stays, whatever
        the other worker's verdict); a pass while the other is still running leaves the file to it (its verdict or,
        when it gets none, this pass decides); a pass after the other wrote a failing verdict leaves that verdict."""
        with _folder_lock(self.root):
            payload, others = self._release(path)
            if not result.failed:
                if payload is None or payload.get("status") != RUNNING:
                    return None  # removed by another worker's pass, or holding another worker's failing verdict
                if others:
                    payload.update(holders=others, passed=True)
                    _write_atomic(path, payload)
                    return None
                self._passed(path, payload.get("earlier"))
                return None
            payload = payload or {}
            for key in _HOLD_KEYS:
                payload.pop(key, None)
            payload.update(status=result.status, verdict=result.to_dict(), explanation=result.explain())
            if "case" not in payload:  # (gone: removed by hand, or by a worker that judged the case before)
                payload.update(format=FORMAT, case=result.case.to_dict())
            _write_atomic(path, payload)
            return path

    def write(self, case: Case, kernel: str, device: str, result, plugins: tuple[str, ...] = ()) -> Optional[Path]:
        """Write the file of a case judged before (its verdict ``result``); as :meth:`record`, a pass writes none."""
        with self.guard(case, kernel, device, None, plugins) as path:
            return self.record(path, result)

    def discard(self, path: Path) -> None:
        """Undo :meth:`guard` for a case that got no verdict (Ctrl-C, SIGTERM, a kernel that cannot load): a file
        that stood there before (a saved finding, or a killed run's ``"running"`` file, being replayed) is put back
        as it was; a file the guard made is removed. Another worker running the same case at once decides instead
        (the last one out); one that already passed or failed it has given the verdict.

        A new user's Ctrl-C while a campaign replayed its saved findings deleted the finding's file, hangs
        included: a finding must outlive any interrupt."""
        with _folder_lock(self.root):
            payload, others = self._release(path)
            if payload is None or payload.get("status") != RUNNING:
                return  # gone (another worker's pass), or another worker's verdict
            if others:
                payload["holders"] = others
                _write_atomic(path, payload)
            elif payload.get("passed"):
                self._passed(path, payload.get("earlier"))
            elif payload.get("earlier") is None:
                path.unlink(missing_ok=True)
            else:
                _write_text_atomic(path, payload["earlier"])

    def update(self, path: Path, *, drop: Iterable[str] = (), **fields) -> None:
        """Add or replace top-level keys of a case file, removing those in ``drop`` (atomically, under the
        folder's lock)."""
        with _folder_lock(path.parent):
            payload = json.loads(path.read_text())
            for key in drop:
                payload.pop(key, None)
            payload.update(fields)
            _write_atomic(path, payload)

    def mark_orphans(self, since: float, verdict: Callable[[Case, dict], dict]) -> list[tuple[Path, dict]]:
        """Rewrite each ``"running"`` file of this folder written at or after ``since`` (a :func:`time.time`) whose
        guards are all gone (their processes dead) with ``verdict(case, payload)``'s keys, under the folder's lock,
        oldest first; returns ``[(path, new payload)]``.

        A file a live process still holds (another run or campaign worker on the same folder) is left alone: its
        case is still running. ``since`` keeps an earlier run's leftovers out (they are replayed, not re-judged)."""
        done = []
        with _folder_lock(self.root):
            left = []
            for path in self.files():
                try:
                    mtime = path.stat().st_mtime
                    if mtime < since - 1.0:  # (mtime granularity) another run's leftover
                        continue
                    case, payload = read_case_file(path)
                except Exception:  # (named by `findings`; nothing of this run's)
                    continue
                if payload.get("status") != RUNNING or any(_alive(h) for h in payload.get("holders") or ()):
                    continue
                left.append((mtime, path, case, payload))
            for _, path, case, payload in sorted(left, key=lambda t: t[0]):
                payload.update(verdict(case, payload))
                _write_atomic(path, payload)
                done.append((path, payload))
        return done

    def files(self) -> list[Path]:
        """The case files (call files, :data:`CALL_FILE_SUFFIX`, are not: :meth:`call_files`)."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.glob("*.json") if not p.name.endswith(CALL_FILE_SUFFIX))

    def readable(self, kernel: Optional[str] = None) -> list[tuple[Path, Case, dict]]:
        """``(path, case, payload)`` of each case file here that reads as one (of ``kernel`` when given).

        A file that does not read (half-written by a killed writer, or not a case file) is passed over: listings
        name those separately (:func:`jfa_verify.fuzz.findings.unreadable_case_files`), since a finding may be lost
        in one."""
        out = []
        for path in self.files():
            try:
                case, payload = read_case_file(path)
            except (InvalidInput, OSError, ValueError):
                continue
            if kernel is None or payload.get("kernel") == kernel:
                out.append((path, case, payload))
        return out

    def call_files(self) -> list[Path]:
        """The call files of relation checks and call sequences (:mod:`jfa_verify.checks.calls`) kept here."""
        return sorted(self.root.glob(f"*{CALL_FILE_SUFFIX}")) if self.root.is_dir() else []


def campaign_folder(root: "str | Path") -> Path:
    """The folder a gate's or a matrix's campaign keeps its corpus in, inside their reproducers ``root``: apart from
    the suite's case files, which a campaign would otherwise replay first as its own findings."""
    return Path(root) / "campaign"


def reproducer_folders(root: "str | Path") -> list[Path]:
    """``root`` and its :func:`campaign_folder` when there is one: where a listing or a replay of what a run, fuzz,
    gate or matrix wrote into ``root`` looks."""
    return [Path(root)] + ([campaign_folder(root)] if campaign_folder(root).is_dir() else [])


# a relation check's or call sequence's file (jfa_verify.checks.calls), beside case files
CALL_FILE_SUFFIX = ".calls.json"


def read_case_file(path: str | Path) -> tuple[Case, dict]:
    """Load a case file; returns the case and the whole payload.

    The payload's ``status`` is given in today's words (:func:`normalize_status`: an old
    ``"timeout"`` reads as ``"hang"``).

    Raises:
        InvalidInput: the file is missing, not JSON, or not a jfa-verify case file.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"case file {str(path)!r} does not exist")
    try:
        payload = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InvalidInput(f"case file {str(path)!r} is not valid JSON: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInput(f"case file {str(path)!r} cannot be read: {e}") from None
    family = FORMAT.rsplit("/", 1)[0] + "/"
    if isinstance(payload, dict) and str(payload.get("format", "")).startswith(family) and payload["format"] != FORMAT:
        raise InvalidInput(f"case file {str(path)!r} has format {payload['format']!r}, a version this jfa-verify does "
                           f"not read (it reads {FORMAT!r}): replay it with the jfa-verify that wrote it, or a newer "
                           f"one")
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or "case" not in payload:
        raise InvalidInput(f"{str(path)!r} is not a jfa-verify case file (expected a JSON object with "
                           f"format {FORMAT!r} and a case)")
    if "status" in payload:
        payload["status"] = normalize_status(payload["status"])
    try:
        return Case.from_dict(payload["case"]), payload
    except InvalidInput as e:
        raise InvalidInput(f"case file {str(path)!r}: {e}") from None


def replay_command(target: "str | Path | Case", kernel: Optional[str], plugins: Iterable[str] = (),
                   memory: Optional[str] = None, timeout_s: Optional[float] = None) -> str:
    """The one form of the command that replays a case, as every command prints it.

    Args:
        target: a case or call file (a path), or a :class:`Case`, given inline (``--case '<json>'``).
        kernel: the registry name to replay it on; None (a case file that names no kernel) leaves
            ``--kernel`` out, and ``replay`` takes the file's kernel or its default.
        plugins: the ``--plugin`` files that register the kernel, in order; none given: the plugin file that
            registered ``kernel`` (:func:`jfa_verify.protocol.registry.plugin_of`), if any.
        memory: the memory mode the case failed under (``"nan"``/``"large"``, the gate's canary and
            recycled-memory runs); a case file records it too, an inline case needs ``--memory``.
        timeout_s: ``--timeout``: the replay runs in a case worker with this limit (an inline case that crashed or
            hung: in-process, it would take the replaying process down or hold it; a case file records its status).

    Paths are absolute, so that the command works pasted in any folder.
    """
    import shlex

    from jfa_verify.protocol.registry import plugin_of

    if not plugins and kernel and plugin_of(kernel):
        plugins = (plugin_of(kernel),)
    where = f"--case '{target.to_json()}'" if isinstance(target, Case) else shlex.quote(os.path.abspath(target))
    return (f"jfa-verify replay {where}" + (f" --kernel {kernel}" if kernel else "")
            + "".join(f" --plugin {shlex.quote(os.path.abspath(p))}" for p in plugins)
            + (f" --memory {memory}" if memory else "") + (f" --timeout {timeout_s:g}" if timeout_s else ""))
