"""Findings: failing cases deduplicated by signature (one finding, many examples).

A finding's **signature** is what a kernel engineer would call "the same bug": the
verdict's status, its error kind (the signal of a crash, the exception type of an
error, contract / invariant / non-finite / numeric for a failure), its **lead
output** (the first failing output in the fixed order o, lse, dq, dk, dv:
:func:`lead_output`), and the input classes (:func:`jfa_verify.cases.coverage.classify`)
of the *shrunk* case, which name the features the failure needs. Its first four
parts are the **key** (:func:`key_of`): known before shrinking.

The key holds the lead output, not the whole set of failing outputs: which of the outputs
a bug reaches past its allowance depends on the input (a backward bug wrong in dq on some
cases and in dq and dk on others), and a key of the whole set made one bug several
findings, and stopped its shrinking at the first smaller case that failed one output
fewer (shrinking follows only failures of the same key).

A campaign keeps one case file per finding (the smallest case it found, with a
``"finding"`` entry holding the signature) and counts the other failing cases of
the same finding as its **examples**, appended to
``<reproducers>/.findings/<signature id>.jsonl`` (one line each; appends are
atomic, so workers share the log). A new failing case is taken as another
example of a known finding, without shrinking, when its key equals the
finding's and its input classes include every class of the finding's shrunk
case (:meth:`FindingIndex.match`).

:func:`recover` puts a reproducer folder in order before a campaign: shrink
steps of a killed campaign (files of one shrink round) collapse to the last
one, duplicates of a signature to the smallest case, and every remaining
failing file becomes a finding. Case files left ``"running"`` by a killed
process are the caller's to replay first (they may be crashes).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from jfa_verify.cases.case import Case
from jfa_verify.cases.coverage import classify
from jfa_verify.core.errors import InvalidInput
from jfa_verify.judge.compare import OUTPUTS
from jfa_verify.judge.findings import findings_from_dict
from jfa_verify.protocol.kernel import GENERIC_TILES
from jfa_verify.run.corpus import RUNNING, Corpus, read_case_file, replay_command, reproducer_folders
from jfa_verify.run.runner import FAILING_STATUSES

__all__ = ["Finding", "FindingIndex", "error_kind", "failure_groups", "finding_id", "fold_examples", "key_of",
           "lead_output", "list_findings", "mark_finding", "match_finding", "record_example", "recover",
           "running_files", "signature", "signature_key", "size_key", "unreadable_case_files", "verdict_of"]

EXAMPLES_DIR = ".findings"


def error_kind(verdict: dict) -> str:
    """The kind of a failing verdict (:meth:`CaseResult.to_dict` output).

    crash: the signal that killed the worker (``SIGABRT``, ``SIGSEGV``), ``illegal_address`` for a sticky CUDA
    error, ``exit`` otherwise; hang: ``hang``; error: the exception type; fail: ``nondeterministic`` (reruns
    differing bit-wise), ``rerun`` (a rerun failing the references), ``contract``, ``invariant``, ``non_finite`` or
    ``numeric``, the last two saying how the lead output (:func:`lead_output`) fails, so that the kind and the
    output a listing shows beside it are one fact.
    """
    status, message = verdict.get("status"), verdict.get("message") or ""
    if status == "crash":
        if message.startswith("illegal address"):
            return "illegal_address"
        for word in message.split():
            if word.startswith("SIG"):
                return word
        return "exit"
    if status == "hang":
        return "hang"
    if status == "error":
        return message.split(":", 1)[0].strip() or "exception"
    if findings_from_dict(verdict, "determinism"):  # reruns of the same inputs differing bit-wise
        return "nondeterministic"
    if findings_from_dict(verdict, "rerun"):  # a rerun (determinism or stress check) failing the references
        return "rerun"
    if findings_from_dict(verdict, "contract"):
        return "contract"
    if findings_from_dict(verdict, "schedule"):
        return "invariant"
    failing = {name: o for name, o in verdict.get("outputs", {}).items() if not o.get("passed")}
    lead = lead_output(failing)
    if lead and failing[lead[0]].get("problem"):
        return "non_finite"
    return "numeric"


def verdict_of(payload: dict) -> dict:
    """A case file's verdict; files whose process ended in a watchdog (status ``"hang"``, no verdict) get one
    built from their status and explanation."""
    return payload.get("verdict") or {"status": payload.get("status"), "kernel": payload.get("kernel"),
                                      "message": payload.get("explanation", "")}


def lead_output(outputs: Iterable[str]) -> tuple:
    """``(the first of outputs in the order o, lse, dq, dk, dv,)`` (names outside that order after it, by name), or
    ``()`` for none: the output a finding is keyed by. The order is the data flow's: a wrong O or LSE spoils every
    gradient, so a forward bug is keyed by its forward output whichever gradients it also reaches."""
    order = {name: i for i, name in enumerate(OUTPUTS)}
    return tuple(sorted(set(outputs), key=lambda n: (order.get(n, len(order)), n))[:1])


def key_of(verdict: dict) -> tuple:
    """``(kernel, status, error kind, (lead output,))``: the part of a signature known before shrinking; the lead
    output is the first failing one (:func:`lead_output`; ``()`` when no output failed), or, where the whole case's
    outputs pass, the first one a sequence or part fails on its own rows (a bug an MXFP8 case shows only per
    sequence was a finding of no output, apart from the same bug's other findings: a new user's trial)."""
    failing = lead_output(n for n, o in verdict.get("outputs", {}).items() if not o.get("passed")) or lead_output(
        name for f in verdict.get("findings", ()) if f.get("kind") in ("sequence", "part")
        for name in f.get("outputs", ()))
    return (verdict.get("kernel"), verdict.get("status"), error_kind(verdict), failing)


# Classes that say how a case was drawn, not what a kernel sees: a prime length is how strategies reach
# odd remainders, and the remainders that matter to a kernel are tile_boundary and multi_tile. Two
# shrinks of one bug often end at 17 and 33 (BLOCK_N + 1 and 2 BLOCK_N + 1): one finding, not two.
INCIDENTAL_CLASSES = frozenset({"prime_length"})

# Classes a shrink reaches by making a case simpler (sequences emptied or cut to one token, the batch cut to one or
# none, values toward zero, self-attention: the first mode drawn), whatever the bug: a smaller case of one bug often
# has some its larger case lacks (a batch of empty sequences). Any other class a fully shrunk case has and a larger
# one lacks is a feature the larger one does not show (a GQA head map, bottom-right causal, a layout), which may be
# another bug's.
SHRINK_BORN_CLASSES = frozenset({"zero_length_q", "zero_length_k", "all_empty", "total_lt_batch", "one_token",
                                 "single_sequence", "no_sequences", "tiny", "self"})


def signature(verdict: dict, classes: Iterable[str]) -> dict:
    """The signature of a failing verdict on a case of input ``classes``, with its ``id`` (12 hex digits).

    :data:`INCIDENTAL_CLASSES` are left out."""
    kernel, status, kind, outputs = key_of(verdict)
    sig = {"kernel": kernel, "status": status, "error_kind": kind, "outputs": list(outputs),
           "classes": sorted(set(classes) - INCIDENTAL_CLASSES)}
    sig["id"] = hashlib.sha256(json.dumps(sig, sort_keys=True).encode()).hexdigest()[:12]
    return sig


def signature_key(sig: dict) -> tuple:
    """``(kernel, status, error kind, (lead output,))`` of a signature, or of a finding row of :func:`list_findings`
    (the same keys): the :func:`key_of` of the verdict it was made from. A signature written before keys held the
    lead output alone lists every failing output; its lead is taken."""
    return (sig.get("kernel"), sig.get("status"), sig.get("error_kind"), lead_output(sig.get("outputs") or ()))


def failure_groups(rows: Sequence[dict]) -> list[list[int]]:
    """The finding rows of :func:`list_findings` grouped by failure: the indices of the rows of each
    :func:`signature_key`, in listing order (most examples first), the first index the group's head; a ``"running"``
    row, which has no verdict yet, is a group of its own, as is a row with no status (a signature not known: keyed
    by nothing, unrelated failures would read as one). The one rule by which ``findings`` sets rows of one failure
    side by side (what tells them apart), a campaign counts its distinct failures and says which are new, and the
    gate makes one finding (one JUnit failure) of each failure.

    Findings of one key whose shrunk cases have different input classes are kept as files of their own (a campaign
    cannot tell from one verdict that a shrink to one token and one to a tile's edge are one bug), but a kernel
    engineer reads them as one failure: a campaign listed one planted LSE-in-base-2 bug as two "NEW" findings (one
    shrunk to one token, one to a tile's edge; a covering campaign, as 49: a new user's trial). Rows of another lead
    output stay apart: that is another key, as a campaign keys them."""
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        key = ("alone", i) if r.get("status") in (RUNNING, None) else signature_key(r)
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def finding_id(path: "str | Path") -> str:
    """The id a user sees for the finding (or failing case) kept in the case file ``path``: the case id its name
    starts with (``<case id>-<kernel>[-...].json``, :meth:`~jfa_verify.run.corpus.Corpus.path_for`), so that the
    listing, the file's name, its replay command and the reports (a run's ``case_id``) say one id. The signature's
    own ``id`` is the key that deduplicates findings (and names their examples' log); listings give it as
    ``signature`` (a new user met two ids for one finding: the listing's and the file's)."""
    return Path(path).name.split("-", 1)[0]


def size_key(case: Case) -> tuple:
    """An order on cases, smallest first (tokens, then batch, heads, head dims), to pick a finding's case."""
    return (case.tokens(), case.batch, case.num_heads_q, case.head_dim + case.dv, case.case_id())


@dataclass
class Finding:
    """One finding: its signature, the case file holding its smallest case, and that case."""

    signature: dict
    path: Path
    case: Case

    @property
    def id(self) -> str:
        return self.signature["id"]

    @property
    def key(self) -> tuple:
        return signature_key(self.signature)


def _examples_log(root: Path, sig_id: str) -> Path:
    return root / EXAMPLES_DIR / f"{sig_id}.jsonl"


def _example_ids(path: Path) -> set[str]:
    """The case ids of the examples logged in ``path`` (lines written before ids were logged: from their case)."""
    ids = set()
    if not path.is_file():
        return ids
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
            ids.add(entry.get("id") or Case.from_dict(entry["case"]).case_id())
        except (ValueError, KeyError, TypeError, InvalidInput):
            continue  # a line cut short by a killed writer
    return ids


def record_example(root: Path, sig_id: str, case: Case, worker: int = 0, *, own: Optional[Case] = None) -> bool:
    """Log ``case`` as an example of finding ``sig_id`` (one JSON line; ``O_APPEND`` keeps workers' lines whole);
    True when it is a new one.

    Examples are distinct cases: ``own`` (the finding's own case, which the shared database hands back every
    round) and a case logged before are not logged again (a new user's finding counted its own shrunk case three
    times, and once more on every rerun)."""
    case_id = case.case_id()
    path = _examples_log(root, sig_id)
    if (own is not None and case_id == own.case_id()) or case_id in _example_ids(path):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"case": case.to_dict(), "id": case_id, "worker": worker, "time": time.time()},
                      sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return True


def example_count(root: Path, sig_id: str, own: Optional[Case] = None) -> int:
    """Distinct cases logged as examples of ``sig_id``, less ``own`` (its own case, which older logs repeat)."""
    return len(_example_ids(_examples_log(root, sig_id)) - ({own.case_id()} if own is not None else set()))


def fold_examples(root: Path, old: Finding, new: Finding) -> None:
    """Make ``old``'s case and its logged examples examples of ``new`` (``old`` gives way to ``new``: shrunk again,
    or one bug's second finding), then remove ``old``'s log. Appends first, the log removed last: a kill between
    them loses no example."""
    record_example(root, new.id, old.case, own=new.case)
    log = _examples_log(root, old.id)
    if old.id == new.id or not log.is_file():
        return
    for line in log.read_text().splitlines():
        try:
            record_example(root, new.id, Case.from_dict(json.loads(line)["case"]), own=new.case)
        except (ValueError, KeyError, TypeError, InvalidInput):
            continue  # a line cut short by a killed writer
    log.unlink(missing_ok=True)


def unreadable_case_files(root: "str | Path") -> list[tuple[Path, str]]:
    """``(path, why)`` of every case file in a reproducer folder that cannot be read as one (truncated, not
    JSON, a field the contract does not know): campaigns pass over them (a writer may have been killed), but
    a listing must say so, since a finding may be lost in one."""
    from jfa_verify.checks.calls import read_call_file
    from jfa_verify.run.report import document_kind_of

    out = []
    folders = reproducer_folders(root)
    for files, read in (([p for f in folders for p in Corpus(f).files()], read_case_file),
                        ([p for f in folders for p in Corpus(f).call_files()], read_call_file)):
        for path in files:
            try:
                read(path)
            except (InvalidInput, OSError, ValueError) as e:
                if document_kind_of(path):
                    continue  # a run's --report beside its case files loses no finding
                why = f"{type(e).__name__}: {e}"
                # (cut at 200 characters, an unknown field's message lost the end of the known fields' list mid-word)
                out.append((path, why if len(why) <= 2000 else why[:2000] + " ..."))
    return out


def match_finding(findings: Iterable[Finding], key: tuple, classes: set[str]) -> Optional[Finding]:
    """The first of ``findings`` that a failing case of ``key`` and input ``classes`` is an example of
    (:meth:`FindingIndex.match`)."""
    for f in findings:
        if f.key == key and (not f.signature.get("shrunk", True) or set(f.signature["classes"]) <= classes):
            return f
    return None


class FindingIndex:
    """The findings of one kernel in a reproducer folder (reload with :meth:`refresh`: other workers add)."""

    def __init__(self, root: "str | Path", kernel: str):
        self.root, self.kernel = Path(root), kernel
        self.findings: dict[str, Finding] = {}
        self.refresh()

    def refresh(self) -> "FindingIndex":
        self.findings = {}
        for path, case, payload in Corpus(self.root).readable(self.kernel):
            sig = payload.get("finding")
            if sig and payload.get("status") in FAILING_STATUSES:
                best = self.findings.get(sig["id"])
                if best is None or size_key(case) < size_key(best.case):
                    self.findings[sig["id"]] = Finding(sig, path, case)
        return self

    def match(self, key: tuple, classes: set[str]) -> Optional[Finding]:
        """A known finding with this key whose shrunk case's classes are all among ``classes``.

        A finding whose shrinking was cut short (``"shrunk": false``: a hang, each step a whole timeout)
        matches on the key alone: its many classes are not the bug's features, and shrinking every new
        example of it again would spend the campaign on timeouts."""
        return match_finding(self.findings.values(), key, classes)

    def add(self, finding: Finding) -> None:
        self.findings[finding.id] = finding


def mark_finding(corpus: Corpus, path: Path, sig: dict, **extra) -> None:
    """Make the case file at ``path`` the file of finding ``sig`` (its shrink-round marks removed)."""
    # (through the corpus: under its folder lock, as another worker may be rewriting the same file)
    corpus.update(path, drop=("shrink_round", "shrink_step"), finding=sig, **extra)


def recover(root: "str | Path", kernel: str, classes_of: Callable[[Case], set[str]]) -> dict:
    """Put the folder's failing case files of ``kernel`` in order (one process at a time: before a campaign).

    1. Files of one unfinished shrink round (a killed campaign): the round's bug is the key of its first file (the
       drawn case that started the shrinking); its last step of that key is kept, marked unshrunk
       (``"shrunk": false``: the kill cut its shrinking short), and the others are removed (shrink steps are not
       examples: they were made from one; a step that failed otherwise is a side failure, as in a live round).
    2. Every failing file without a finding gets its signature; one that a finding already has, or that a finding
       matches as a campaign would (:meth:`FindingIndex.match`: same key, and the finding's classes among the
       file's, or the finding unshrunk), becomes that finding's example (file removed).
    3. Two files of one signature (two workers finding the same bug at once): the smaller case is kept.

    ``"running"`` files are left alone (replay them first, keeping their shrink-round marks: a new user's kill -9
    mid-shrink left two findings of one bug, the replayed in-flight step no longer part of its round). Returns
    counts of what was done.
    """
    root = Path(root)
    corpus = Corpus(root)
    done = {"shrink_steps_removed": 0, "duplicates_removed": 0, "new_findings": 0}
    files = [(p, c, d) for p, c, d in Corpus(root).readable(kernel) if d.get("status") in FAILING_STATUSES]
    rounds: dict[str, list] = {}
    for p, c, d in files:
        if "finding" not in d and d.get("shrink_round"):
            rounds.setdefault(d["shrink_round"], []).append((p, c, d))
    dropped, unshrunk = set(), set()
    for steps in rounds.values():
        steps.sort(key=lambda s: s[2].get("shrink_step", 0))
        target = key_of(verdict_of(steps[0][2]))
        last = [s for s in steps if key_of(verdict_of(s[2])) == target][-1]
        unshrunk.add(last[0])
        for p, c, _ in steps:
            if p != last[0]:
                p.unlink(missing_ok=True)
                dropped.add(p)
                done["shrink_steps_removed"] += 1
    kept: dict[str, tuple] = {}
    findings_first = sorted((f for f in files if f[0] not in dropped),
                            key=lambda f: ("finding" not in f[2], size_key(f[1])))
    for p, c, d in findings_first:
        if "finding" in d:
            sig = d["finding"]
        else:
            classes = classes_of(c)
            sig = signature(verdict_of(d), classes)
            if p in unshrunk:
                sig["shrunk"] = False
            known = match_finding([Finding(k[3], k[0], k[1]) for k in kept.values()], key_of(verdict_of(d)), classes)
            if known is not None and known.id != sig["id"]:
                record_example(root, known.id, c, own=known.case)
                p.unlink(missing_ok=True)
                done["duplicates_removed"] += 1
                continue
        best = kept.get(sig["id"])
        if best is None:
            kept[sig["id"]] = (p, c, d, sig)
            continue
        loser, winner = ((p, c, d, sig), best) if size_key(best[1]) <= size_key(c) else (best, (p, c, d, sig))
        record_example(root, sig["id"], loser[1], own=winner[1])
        loser[0].unlink(missing_ok=True)
        kept[sig["id"]] = winner
        done["duplicates_removed"] += 1
    for p, c, d, sig in kept.values():
        if "finding" not in d:
            mark_finding(corpus, p, sig, found_by="recovered")
            done["new_findings"] += 1
    return done


def running_files(root: "str | Path", kernel: Optional[str] = None) -> list[tuple[Path, Case, dict]]:
    """Case files still marked ``"running"``: their process was killed mid-case (or crashed, in-process)."""
    return [(p, c, d) for p, c, d in Corpus(root).readable(kernel) if d.get("status") == RUNNING]


def fold_round(root: "str | Path", round_id: str, found_by: str) -> list[Path]:
    """Fold a finished shrink round's failing case files into findings: the files whose ``shrink_round`` is
    ``round_id`` (written one per failing call of a Hypothesis test that is done, its shrink steps included), one
    finding per :func:`key_of` of their verdicts: that key's last step, which is the shrunk case (Hypothesis runs its
    final example last), marked a finding (:func:`mark_finding`, signed as :func:`list_findings` signs a file); the
    key's other steps become its examples (:func:`record_example`, logged before their files are removed: a kill
    between the two loses none). Returns the findings' paths.

    A campaign removes a round's steps as it goes (:meth:`~jfa_verify.fuzz.campaign.Campaign`) and :func:`recover`
    those of a killed one; a pytest suite's property test has no campaign around it and left one file per shrink step
    in ``--jfa-corpus`` (29 for one bug, where ``findings`` listed one row: a new user's trial). A round cut short
    (the process killed) keeps its marks, so :func:`recover` treats it as a killed campaign's."""
    root = Path(root)
    corpus = Corpus(root)
    steps: dict[tuple, list] = {}
    for p, c, d in corpus.readable():
        if d.get("shrink_round") == round_id and d.get("status") in FAILING_STATUSES:
            steps.setdefault(key_of(verdict_of(d)), []).append((d.get("shrink_step", 0), p, c, d))
    kept = []
    for found in steps.values():
        found.sort(key=lambda s: s[0])
        _, path, case, payload = found[-1]
        sig = _file_signature(case, payload)
        for _, _, c, _ in found[:-1]:
            record_example(root, sig["id"], c, own=case)
        mark_finding(corpus, path, sig, found_by=found_by)
        for _, p, _, _ in found[:-1]:
            p.unlink(missing_ok=True)
        kept.append(path)
    return kept


def _file_signature(case: Case, payload: dict) -> dict:
    """The signature of a case file that is no finding yet (a ``jfa-verify run`` failure, a killed campaign's
    shrink step or ``"running"`` file): its case's classes under the tiles its verdict records (else the
    generic tiles of its device), as a campaign's :func:`recover` would sign it, without loading the kernel."""
    verdict = verdict_of(payload)
    device = "cuda" if str(payload.get("device", "")).startswith("cuda") else "cpu"
    blocks = tuple(verdict.get("block_sizes") or GENERIC_TILES[device].as_tuple())
    return signature(verdict, classify(case, blocks))


def _plugins_from_here(payload: dict) -> list[str]:
    """A case file's ``--plugin`` files as a replay command from this process's folder should name them: the
    recorded absolute path, shortened to the name the run was given only where that name is the very same file
    from here; the name as given when the recorded file is gone. A file of the same name in this folder (a fixed
    copy, an unrelated ``my_kernel.py``) is never taken for the one the finding ran."""
    given = list(payload.get("plugins", ()))
    absolute = payload.get("plugin_paths") or given  # files written before plugin_paths have only the first
    return [_plugin_from_here(g, a) for g, a in zip(given, absolute)]


def _plugin_from_here(given: str, recorded: str) -> str:
    if not Path(recorded).is_file():
        return given
    try:
        return given if Path(given).is_file() and Path(given).samefile(recorded) else recorded
    except OSError:
        return recorded


def list_findings(root: "str | Path", kernel: Optional[str] = None) -> list[dict]:
    """Every finding in a reproducer folder (all kernels unless ``kernel``), most examples first.

    Each row has the finding's ``id`` (:func:`finding_id`: the case id its file is named by, 12 hex digits), its
    ``signature`` (the signature's id, 12 hex digits, stable: the same case file gives the same one) and its
    ``replay`` command. Failing case files that are no finding yet (a ``jfa-verify run``
    failure, a killed campaign's shrink step) are listed too, with the id a campaign would give them
    (``found_by`` ``"-"``), grouped as a campaign groups examples: one row per group, its smallest case's, the
    other cases' files in its ``cases``; ``"running"`` files with status ``running``, one row each.
    """
    rows = [row for folder in reproducer_folders(root) for row in _folder_rows(folder, kernel)]
    rows.sort(key=lambda r: (-r["examples"], r["kernel"] or "", r["path"]))
    return rows


def _folder_rows(root: Path, kernel: Optional[str]) -> list[dict]:
    rows, unsigned, marked = [], [], []
    for p, c, d in Corpus(root).readable(kernel):
        status = d.get("status")
        if status not in FAILING_STATUSES and status != RUNNING:
            continue
        found = d.get("finding")
        if found:
            rows.append(_row(p, c, d, found, 1 + example_count(root, found["id"], c)))
            marked.append((rows[-1], Finding(found, p, c)))
        elif status == RUNNING:
            rows.append(_row(p, c, d, _file_signature(c, d), 1))
        else:
            unsigned.append((p, c, d, _file_signature(c, d)))
    rows.extend(_grouped_failures(_fold_into_findings(root, unsigned, marked)))
    rows.extend(_relation_rows(root, kernel))
    return rows


def _fold_into_findings(root: Path, unsigned: list, marked: list) -> list:
    """The failing files of ``unsigned`` that no finding of the folder has: one whose signature a finding has, or
    that a finding matches as a campaign would (:func:`match_finding`), is counted as that finding's example (its
    row's ``examples``, its file in the row's ``cases``), as :func:`recover` makes it before the next campaign. A
    campaign killed with -9 left such a file beside its finding; listed apart, one bug read as two findings (two rows
    of one signature: helper-73's trial). A file whose case the finding's example log already holds adds no count."""
    left, logged = [], {}  # (each finding's example log read once, not once per file)
    for item in sorted(unsigned, key=lambda item: size_key(item[1])):
        p, _, _, sig = item
        row = next((r for r, f in marked if f.id == sig["id"]), None)
        if row is None:
            known = match_finding([f for _, f in marked], signature_key(sig), set(sig["classes"]))
            row = next((r for r, f in marked if f is known), None)
        if row is None:
            left.append(item)
            continue
        if row["signature"] not in logged:
            logged[row["signature"]] = _example_ids(_examples_log(root, row["signature"]))
        if item[1].case_id() not in logged[row["signature"]]:
            row["examples"] += 1
        row.setdefault("cases", []).append(str(p))
    return left


def _grouped_failures(unsigned: list) -> list[dict]:
    """Rows for the failing case files that are no finding yet (a ``jfa-verify run``'s failures), one per key
    (status, error kind, lead output), smallest case first, the others its examples, their files named in the row's
    ``cases``. A campaign also asks an example to hold its finding's input classes, which a shrunk case keeps to what
    the bug needs; a run's cases are not shrunk (their classes are whatever the suite built), so that rule split one
    planted bug into 35 rows of a new user's run (88 before any grouping). ``jfa-verify fuzz`` shrinks and tells
    bugs of one key apart."""
    groups: dict[Path, list] = {}  # the group's first case file -> its members, smallest first
    heads: list[Finding] = []
    for item in sorted(unsigned, key=lambda item: size_key(item[1])):
        p, c, _, sig = item
        sig = {**sig, "shrunk": False}  # (match_finding: any case of the key is an example of an unshrunk head)
        head = match_finding(heads, Finding(sig, p, c).key, set(sig["classes"]))
        if head is None:
            head = Finding(sig, p, c)
            heads.append(head)
        groups.setdefault(head.path, []).append(item)
    rows = []
    for head in heads:
        members = groups[head.path]
        row = _row(*members[0], len(members))
        row["cases"] = [str(m[0]) for m in members[1:]]
        rows.append(row)
    return rows


def _row(p: Path, c: Case, d: dict, sig: dict, examples: int) -> dict:
    status = d.get("status")
    return {
        "id": finding_id(p),
        "signature": sig["id"],
        "kernel": d.get("kernel"),
        "status": status,
        "error_kind": sig["error_kind"] if status != RUNNING else "-",
        "outputs": sig["outputs"],
        "classes": sig["classes"],
        "examples": examples,
        "case": c.describe(),
        "path": str(p),
        "replay": replay_command(p, d.get("kernel"), _plugins_from_here(d), d.get("memory")),  # (as `replay` says it)
        "found_by": d.get("found_by", "-"),
    }


def _relation_rows(root: Path, kernel: Optional[str]) -> list[dict]:
    """The broken relation checks and call sequences kept in ``root`` (call files), as finding rows: a new user's
    ``findings`` rejected the call file ``run`` had written for a broken relation as an unreadable case file."""
    from jfa_verify.checks.calls import read_call_file

    rows = []
    for p in Corpus(root).call_files():
        try:
            relation, d = read_call_file(p)
        except InvalidInput:
            continue  # (named by unreadable_case_files)
        if d.get("status") not in FAILING_STATUSES or (kernel and d.get("kernel") != kernel):
            continue
        rows.append({
            # the case's id and the relation: a case's three relations had one id (a new user's trial)
            "id": f"{p.name[:12]}-{relation.name}", "kernel": d.get("kernel"), "status": d["status"],
            "error_kind": f"relation {relation.name}", "outputs": [], "classes": [], "examples": 1,
            "case": relation.case.describe(), "path": str(p),
            "replay": replay_command(p, d.get("kernel"), _plugins_from_here(d)), "found_by": "-",
        })
    return rows
