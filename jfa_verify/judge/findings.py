"""What a case's run found besides its outputs' comparisons: one list of :class:`Finding`, filtered by kind.

A case fails when an output is outside its allowance (:class:`~jfa_verify.judge.compare.OutputComparison`) or when
it has any finding. Each kind is declared once, here, with its heading in a verdict's explanation; a new kind of
verdict is a new entry of :data:`KINDS` and the code that makes it (``docs/architecture.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

__all__ = ["Finding", "KINDS", "explain_findings", "findings_from_dict", "messages", "part_finding",
           "sequence_finding"]


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a kernel's run of a case, other than an output's error.

    ``kind``: a key of :data:`KINDS`. ``message``: what is wrong, in one line. ``where``: the place it names
    (a pass and head for a scheduler invariant, ``"part 3"`` for a packed part), or ``""``. ``part`` and
    ``outputs``: a packed part's finding, structured (the part's index in ``case.parts`` and the outputs that fail
    on its own rows); None and ``()`` for every other kind. :func:`part_finding` makes one.
    """

    kind: str
    message: str
    where: str = ""
    part: Optional[int] = None
    outputs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"finding kind {self.kind!r} is not one of {sorted(KINDS)} "
                             f"(jfa_verify.judge.findings.KINDS)")
        object.__setattr__(self, "outputs", tuple(self.outputs))

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "message": self.message, "where": self.where}
        if self.part is not None:
            out.update(part=self.part, outputs=list(self.outputs))
        elif self.outputs:
            out["outputs"] = list(self.outputs)
        return out


def sequence_finding(index: int, outputs: Sequence[str]) -> Finding:
    """The finding of sequence ``index`` of a block-scaled case whose ``outputs`` fail against the allowance of its own
    rows (:func:`jfa_verify.judge.packing.judge_sequences`: names, with their numbers where they carry them)."""
    said = "; ".join(o.describe() if hasattr(o, "describe") else o for o in outputs)
    return Finding("sequence", f"sequence {index}: outside the allowance of its own rows: {said}", f"sequence {index}",
                   outputs=tuple(str(o) for o in outputs))


def part_finding(index: int, outputs: Sequence[str]) -> Finding:
    """The finding of packed part ``index`` whose ``outputs`` fail on its own rows (:mod:`jfa_verify.judge.packing`)."""
    return Finding("part", ", ".join(outputs), f"part {index}", index, tuple(str(o) for o in outputs))


# kind -> (heading in an explanation, how many of its messages the explanation lists; 0: all on one line)
KINDS: Mapping[str, tuple[str, int]] = {
    "contract": ("contract (outputs, inputs unchanged)", 0),  # the output contract, the inputs left unchanged
    "memory": ("memory: guard band(s) written", 10),          # a write outside an allocation (tracked memory)
    "schedule": ("scheduler invariants: violation(s)", 10),   # a launch plan or tile visits breaking an invariant
    "part": ("packed parts failing on their own rows", 0),    # a packed case's part judged alone (judge.packing)
    # an MXFP8 case's sequence judged alone: its blocks' scales may be binades below another sequence's
    "sequence": ("sequences failing against their own magnitudes (block-scaled inputs)", 10),
    # reruns of one case in one process (checks.determinism, checks.stress): outputs that differ bit-wise from the
    # first run's, and reruns judged failing against the references (a non-deterministic kernel's, a stress rerun's)
    # (counted per rerun and output: "8 rerun(s) differing" of 2 reruns read as a miscount to a new user)
    "determinism": ("determinism: output(s) of reruns differing bit-wise from the first run's", 10),
    "rerun": ("reruns: rerun(s) failing against the references", 10),
}

# Report keys of the format before one findings list (reports and case files written before it are still read)
_LEGACY_KEYS = {"contract": "contract_violations", "memory": "memory_violations", "schedule": "schedule_violations"}


def messages(findings: Iterable[Finding], kind: str) -> list[str]:
    """The messages of the findings of ``kind``, in order."""
    if kind not in KINDS:
        raise ValueError(f"finding kind {kind!r} is not one of {sorted(KINDS)}")
    return [f.message for f in findings if f.kind == kind]


def explain_findings(findings: Sequence[Finding], skip: Sequence[str] = ("part",)) -> list[str]:
    """An explanation's lines for ``findings``, one block per kind in :data:`KINDS` order (kinds in ``skip``
    are explained by their own code: a packed part's line names its seed)."""
    lines = []
    for kind, (heading, listed) in KINDS.items():
        found = messages(findings, kind)
        if not found or kind in skip:
            continue
        if listed == 0:
            lines.append(f"  {heading}: " + "; ".join(found))
        else:
            lines.append(f"  {_counted(heading, len(found))}")
            lines.extend(f"      {m}" for m in found[:listed])
    return lines


def _counted(heading: str, n: int) -> str:
    """``"memory: 3 guard band(s) written"`` from ``"memory: guard band(s) written"``."""
    label, _, rest = heading.partition(": ")
    return f"{label}: {n} {rest}"


def findings_from_dict(entry: Mapping, kind: Optional[str] = None) -> list[Finding]:
    """The findings of a report's or case file's verdict ``entry`` (``CaseResult.to_dict()``), of ``kind`` only
    when given; entries written before the findings list have a list per kind, read the same way."""
    if "findings" in entry:
        found = [_finding(f) for f in entry["findings"] or ()]
    else:
        found = [Finding(k, m) for k, key in _LEGACY_KEYS.items() for m in entry.get(key) or ()]
    return [f for f in found if kind is None or f.kind == kind]


def _finding(f: Mapping) -> Finding:
    """One finding of a report's list; a packed part's written before ``part`` and ``outputs`` were kept has them
    in its ``where`` (``"part 3"``) and comma-joined ``message`` (``"o, dq"``), read from there."""
    if f["kind"] == "part" and "part" not in f:
        index = f.get("where", "").partition("part ")[2]
        if index.isdigit():
            return part_finding(int(index), [o for o in f["message"].split(", ") if o])
    return Finding(f["kind"], f["message"], f.get("where", ""), f.get("part"), tuple(f.get("outputs") or ()))
