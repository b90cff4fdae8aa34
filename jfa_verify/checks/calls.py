"""Call files: the reproducer of a finding that takes several calls (a relation, a sequence of related calls).

A case file (:mod:`jfa_verify.run.corpus`) replays one call; a bug that needs the
call before it (host state kept between calls) or a comparison of two calls
(a permutation of the batch) does not show in one. A call file holds the
relation's name and its calls in order, as case objects::

    {"format": "jfa-verify-calls/1", "relation": "sequence", "kernel": "triton_jfa",
     "calls": [{case}, {case}, ...], "status": "fail", "finding": "call 2 of 3 failed ..."}

``jfa-verify replay FILE`` runs the calls again, in order, on one kernel
object in a fresh process (:func:`replay`), so a finding that depends on the
earlier calls replays as the sequence that shows it. Files are written before
the calls run (status ``running``), like case files, so a crash leaves them.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from jfa_verify.cases.case import Case
from jfa_verify.checks.relations import RELATIONS, Relation
from jfa_verify.core.errors import InvalidInput
from jfa_verify.run.isolation import CaseWorker, WorkerSpec
from jfa_verify.run.runner import _traceback_tail

__all__ = ["FORMAT", "CallReplay", "RelationWorker", "check_relations", "is_call_file", "read_call_file",
           "relation_status", "relation_worker_spec", "replay", "replay_call_files", "write_call_file"]

FORMAT = "jfa-verify-calls/1"


def write_call_file(path: "str | Path", relation: Relation, *, kernel: str, device: str, status: str = "running",
                    finding: str = "", plugins: tuple = ()) -> Path:
    """Write (atomically) the call file of ``relation``; returns the path."""
    from jfa_verify.core.json_text import dumps
    from jfa_verify.run.corpus import environment

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "relation": relation.name, "kernel": kernel, "device": device,
               "plugins": list(plugins), "calls": [c.to_dict() for c in relation.cases()], "status": status,
               # as given, and absolute (a replay command printed from another folder: a new user's trial)
               "plugin_paths": [str(Path(p).resolve()) for p in plugins],
               "finding": finding, "environment": environment()}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dumps(payload, indent=2, sort_keys=True))
    os.replace(tmp, path)
    return path


def is_call_file(path: "str | Path") -> bool:
    """The file is a call file (not a case file); False for anything unreadable."""
    try:
        return json.loads(Path(path).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def read_call_file(path: "str | Path") -> tuple[Relation, dict]:
    """The :class:`Relation` of a call file and its whole payload.

    Raises:
        InvalidInput: missing file, not JSON, not a call file, an unknown relation or a bad case.
    """
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InvalidInput(f"call file {str(path)!r} cannot be read as JSON: {e}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or not payload.get("calls"):
        raise InvalidInput(f"{str(path)!r} is not a call file (a JSON object with format {FORMAT!r} and calls)")
    if payload.get("relation") not in RELATIONS:
        raise InvalidInput(f"call file {str(path)!r}: relation={payload.get('relation')!r} is not one of {RELATIONS}")
    try:
        cases = [Case.from_dict(c) for c in payload["calls"]]
    except InvalidInput as e:
        raise InvalidInput(f"call file {str(path)!r}: {e}") from None
    return Relation(payload["relation"], cases[0], tuple(cases[1:])), payload


def replay(path: "str | Path", kernel, device) -> Optional[str]:
    """Check the call file's relation again on ``kernel`` (one kernel object for every call); the finding
    or None when it holds now."""
    relation, _ = read_call_file(path)
    return relation.check(kernel, device)


@dataclass
class CallReplay:
    """One call file replayed by :func:`replay_call_files`. ``status``: ``"pass"`` (the relation holds now),
    ``"fail"``, ``"error"`` (not judged: jfa-verify's own failure), ``"crash"``, ``"hang"``, or ``"unreadable"``
    (``finding`` says why; ``relation`` is None). ``recorded``: the status the file was written with."""

    path: Path
    relation: Optional[Relation]
    status: str
    finding: Optional[str]
    recorded: Optional[str] = None


def replay_call_files(files: Sequence["str | Path"], kernel, device, plugins: Sequence[str] = (),
                      timeout_s: Optional[float] = None) -> list[CallReplay]:
    """Check the relation of each call file in ``files`` recorded for ``kernel`` (or for no kernel) again, in a
    :class:`RelationWorker` (a crash or a hang is its verdict; the worker's child starts at the first check, so a
    folder without such files costs nothing); files of other kernels are left out. The one replay of call files
    that the gate's replay check and a campaign's start share (a campaign listed a saved relation finding as
    ``[fail]`` without replaying it, and exited 0)."""
    out = []
    with RelationWorker(relation_worker_spec(kernel, device, plugins)) as worker:
        for path in map(Path, files):
            try:
                relation, payload = read_call_file(path)
            except InvalidInput as e:
                out.append(CallReplay(path, None, "unreadable", str(e)))
                continue
            if payload.get("kernel") not in (None, kernel.name):
                continue
            status, finding = worker.check(relation, timeout_s)
            out.append(CallReplay(path, relation, "pass" if finding is None else status, finding,
                                  payload.get("status")))
    return out


def check_relations(relations: Sequence[Relation], kernel, device, corpus: "str | None", *,
                    plugins: Sequence[str] = (), on_checked: Optional[Callable[[Optional[str]], None]] = None,
                    isolate: bool = False, timeout_s: Optional[float] = None,
                    worker: Optional["RelationWorker"] = None) -> list[str]:
    """Check each relation, its call file written first under ``corpus`` (None: no files) and kept
    only when the relation breaks; returns one finding line (with the replay command) per broken one.
    ``on_checked``: called after each relation with its finding line, or None where it held (a caller stopped
    midway keeps what was checked).

    ``isolate``: run the checks in a worker process (:class:`RelationWorker`), as the cases are: a kernel that
    crashes there (a segfault, an abort, a sticky CUDA error) is a finding line starting ``[CRASH]``, one still
    running after ``timeout_s`` (None: no limit) a line starting ``[HANG]``, and the next relation gets a fresh
    worker; in this process, the crash would take the whole run with it (issue 43, 15). The kernel must then
    come from a plugin file or an installed entry point (:class:`~jfa_verify.run.isolation.CaseWorker`).
    ``worker``: with ``isolate``, a :class:`RelationWorker` the caller started early (its ``start_early``: the child
    loads the kernel and the device while the cases run), used instead of a new one; closed here either way.
    """
    from jfa_verify.run.corpus import CALL_FILE_SUFFIX, replay_command

    out = []
    if not isolate and worker is not None:
        worker.close()
        worker = None
    elif isolate and worker is None:
        worker = RelationWorker(relation_worker_spec(kernel, device, plugins))
    try:
        for relation in relations:
            path = earlier = None
            if corpus is not None:
                name = f"{relation.case.case_id()}-{relation.name}-{kernel.name}{CALL_FILE_SUFFIX}"
                earlier = _earlier_finding(Path(corpus) / name)
                path = write_call_file(Path(corpus) / name, relation, kernel=kernel.name, device=str(device),
                                       plugins=tuple(plugins))
            if worker is None:
                status, finding = "fail", relation.check(kernel, device)
            else:
                status, finding = worker.check(relation, timeout_s)
            if finding is None:
                if path is not None:
                    _keep_now_passing(path, earlier)
                if on_checked is not None:
                    on_checked(None)
                continue
            where = relation.case.name or relation.case.describe()
            line = f"[{status.upper()}] relation {relation.name} on {where}: {finding}"
            if path is not None:
                write_call_file(path, relation, kernel=kernel.name, device=str(device), status=status,
                                finding=finding, plugins=tuple(plugins))
                line += f"\n  replay: {replay_command(path, kernel.name, plugins)}"
            out.append(line)
            if on_checked is not None:
                on_checked(line)
    finally:
        if worker is not None:
            worker.close()
    return out


def _earlier_finding(path: Path) -> Optional[str]:
    """The text of ``path`` when it records a broken relation (an earlier run's finding), else None."""
    from jfa_verify.run.corpus import failing_status

    try:
        text = path.read_text()
    except OSError:
        return None
    return text if failing_status(text) else None


def _keep_now_passing(path: Path, earlier: Optional[str]) -> None:
    """A relation that holds: remove its call file, or, where it held an earlier finding, keep that finding in the
    folder's ``now-passing/`` subfolder with a line saying so, as case files are kept (a new user's rerun with the
    kernel fixed deleted a broken relation's call file silently)."""
    from jfa_verify.run.corpus import NOW_PASSING

    if earlier is not None:
        kept = path.parent / NOW_PASSING / path.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(earlier)
        print(f"jfa-verify: {path.name} (a broken relation recorded) now holds: its call file is kept as {kept}, out "
              f"of the findings; delete it once you no longer need it", file=sys.stderr, flush=True)
    path.unlink(missing_ok=True)


def relation_status(line: str) -> str:
    """The verdict of a finding line of :func:`check_relations`: ``"crash"``, ``"hang"``, ``"error"`` or ``"fail"``."""
    for status in ("crash", "hang", "error"):
        if line.startswith(f"[{status.upper()}] relation "):
            return status
    return "fail"


def relation_worker_spec(kernel, device, plugins) -> WorkerSpec:
    """The :class:`~jfa_verify.run.isolation.WorkerSpec` of a :class:`RelationWorker` checking ``kernel`` (registered
    by ``plugins``, the ``--plugin`` files) on ``device``."""
    from jfa_verify.run.settings import RunSettings

    return WorkerSpec(kernel.name, str(device).split(":")[0], RunSettings(plugins=plugins))


def _answer_relations(conn, spec, kernel, device) -> None:
    """A :class:`RelationWorker`'s child loop: one relation's finding (or None) per relation received."""
    while True:
        relation = conn.recv()
        if relation is None:
            return
        try:
            conn.send(("answer", relation.check(kernel, device)))
        except Exception as e:  # jfa-verify's own failure, not the kernel's: said so, with where
            conn.send(("not-judged", f"not judged: {type(e).__name__}: {e}\n{_traceback_tail(e)}"))


class RelationWorker(CaseWorker):
    """Runs relation checks in a child process, as :class:`~jfa_verify.run.isolation.CaseWorker` runs cases:
    :meth:`check` returns ``(status, finding)``, a death of the child a ``"crash"``."""

    _answer = staticmethod(_answer_relations)

    def check(self, relation: Relation, timeout_s: Optional[float] = None) -> tuple[str, Optional[str]]:
        """``("fail", finding or None)``, ``("error", "not judged: ...")`` for jfa-verify's own failure,
        ``("crash", why)`` when the child died, ``("hang", why)`` past ``timeout_s``."""
        kind, answer, _ = self._call(relation, timeout_s)
        if kind != "answer":
            return kind, f"the kernel's process died in the check: {answer}" if kind == "crash" else answer
        what, finding = answer
        return ("fail" if what == "answer" else "error"), finding
