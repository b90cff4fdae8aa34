"""One findings list per case: kinds declared once, the status derived by one rule, old reports still read."""

import pytest

from jfa_verify import Case
from jfa_verify.judge.findings import KINDS, Finding, explain_findings, findings_from_dict, messages, part_finding
from jfa_verify.run.runner import CaseResult, judged_status


def _result(status: str = "pass", **kw) -> CaseResult:
    return CaseResult(Case(kv_lengths=(3, 5), seed=1), "k", status, **kw)


def test_a_finding_of_an_unknown_kind_is_refused_naming_the_kinds():
    with pytest.raises(ValueError, match=r"finding kind 'race' is not one of \['contract', 'determinism', 'memory', "
                                         r"'part', 'rerun', 'schedule', 'sequence'\]"):
        Finding("race", "a stage released early")


def test_any_finding_makes_a_judged_run_fail_and_none_leaves_it_passing():
    assert judged_status(_result()) == "pass"
    for kind in KINDS:
        assert judged_status(_result(findings=[Finding(kind, "x")])) == "fail", kind


def test_readers_filter_by_kind_and_the_explanation_keeps_each_kinds_form():
    found = [Finding("schedule", "[coverage] fwd h0: tile 3 never visited"), Finding("contract", "o has shape [2]"),
             Finding("memory", "o: 4 bytes after the end"), Finding("schedule", "[visit_count] dq h0: tile 1 twice")]
    result = _result(findings=found, status="fail")
    assert result.findings_of("schedule") == ["[coverage] fwd h0: tile 3 never visited",
                                              "[visit_count] dq h0: tile 1 twice"]
    assert messages(found, "contract") == ["o has shape [2]"]
    assert explain_findings(found) == [
        "  contract (outputs, inputs unchanged): o has shape [2]",
        "  memory: 1 guard band(s) written", "      o: 4 bytes after the end",
        "  scheduler invariants: 2 violation(s)",
        "      [coverage] fwd h0: tile 3 never visited", "      [visit_count] dq h0: tile 1 twice",
    ]
    assert "contract (outputs, inputs unchanged): o has shape [2]" in result.explain()


def test_a_report_entry_round_trips_and_one_of_the_old_format_is_read_the_same_way():
    found = [Finding("contract", "lse is float16"), part_finding(2, ["o", "dq"])]
    entry = _result(findings=found, status="fail").to_dict()
    assert entry["findings"][1] == {"kind": "part", "message": "o, dq", "where": "part 2", "part": 2,
                                    "outputs": ["o", "dq"]}
    assert findings_from_dict(entry) == found
    assert findings_from_dict(entry, "part") == [part_finding(2, ["o", "dq"])]
    old = {"contract_violations": ["lse is float16"], "memory_violations": [], "schedule_violations": ["[order] x"]}
    assert findings_from_dict(old) == [Finding("contract", "lse is float16"), Finding("schedule", "[order] x")]
    assert findings_from_dict(old, "memory") == []
    # a part's finding written before it kept its part and outputs: read from its where and comma-joined message
    before = {"findings": [{"kind": "part", "message": "o, dq", "where": "part 2"}]}
    assert findings_from_dict(before) == [part_finding(2, ["o", "dq"])]


def test_part_failures_are_a_view_of_the_part_findings():
    pack = Case.pack([Case(kv_lengths=(3,), seed=1), Case(kv_lengths=(4,), seed=2), Case(kv_lengths=(5,), seed=3)])
    result = CaseResult(pack, "k", "fail", findings=[part_finding(1, ["o", "lse"])], parts_judged=True)
    assert result.part_failures == [[], ["o", "lse"], []]
    # structured, not parsed: an output name holding the separator stays one name
    odd = CaseResult(pack, "k", "fail", findings=[part_finding(0, ["o, scaled"])], parts_judged=True)
    assert odd.part_failures == [["o, scaled"], [], []]
    assert CaseResult(pack, "k", "pass").part_failures is None


def test_the_determinism_heading_counts_outputs_of_reruns_not_reruns():
    # regression (a new user's trial): 2 reruns whose 4 outputs each differed read "8 rerun(s) differing bit-wise"
    found = [Finding("determinism", f"rerun {r}: {o} differs") for r in (1, 2) for o in ("o", "lse", "dq", "dk")]
    assert explain_findings(found)[0] == ("  determinism: 8 output(s) of reruns differing bit-wise from the first "
                                          "run's")
