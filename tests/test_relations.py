"""Checks no single case makes: permutation, batch invariance, inputs unchanged, the production launch,
call files and their replay."""

import dataclasses
import json

import pytest
import torch

from jfa_verify import Case
from jfa_verify.checks.calls import check_relations, is_call_file, read_call_file, write_call_file
from jfa_verify.checks.relations import Relation, permuted
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.protocol.registry import add_kernel, get_kernel
from jfa_verify.run.runner import run_case

CASE = Case(kv_lengths=(5, 0, 17, 3), mode="cross", q_lengths=(9, 2, 4, 3), causal=True,
            causal_alignment="bottom_right", num_heads_q=3, num_heads_kv=1, head_dim=16, dtype="float32",
            offsets_start=3, offsets_dtype="int64", layout="mixed", name="rel")


def _wrapped(name: str, edit, caps=None):
    """``triton_jfa`` with ``edit(problem, q, k, v, run)`` applied after each launch (a planted bug)."""
    base = get_kernel("triton_jfa")

    class Wrapped:
        def launch(self, problem, q, k, v, q_off, k_off, *, instrument=False):
            run = base.impl.launch(problem, q, k, v, q_off, k_off, instrument=instrument)
            edit(problem, q, k, v, run)
            return run

    return add_kernel(Kernel(name, "planted", Wrapped, caps or base.capabilities, base.tile_sizes_fn))


def test_permuted_batch_holds_the_same_rows(jfa_device):
    t = CASE.materialize(jfa_device)
    perm, rows = permuted(CASE, t, [2, 0, 3, 1])
    assert perm.k_offsets.tolist() == [3, 20, 25, 28, 28] and perm.q_offsets.tolist() == [3, 7, 16, 19, 21]
    assert torch.equal(perm.q[3:7], t.q[14:18]) and perm.q.stride() == t.q.stride()
    assert rows["dk"][3:20] == list(range(8, 25)) and rows["o"][:3] == [0, 1, 2]


@pytest.mark.parametrize("name", ["permutation", "batch_invariance"])
def test_relations_hold_bit_for_bit_on_the_real_kernel(name, jfa_kernel, jfa_device):
    assert Relation(name, CASE).check(jfa_kernel, jfa_device) is None
    bq = dataclasses.replace(CASE, mode="broadcast_q", q_lengths=None, broadcast_q_len=7, dtype="bfloat16")
    assert Relation(name, bq).check(jfa_kernel, jfa_device) is None


def _batch_variant(problem, q, k, v, run):
    # a reduction whose rounding depends on the batch: one float32 ulp-scale change when B > 1,
    # far inside the oracles' allowance
    if problem.batch > 1:
        run.o = run.o * (1 + 2.0**-22)


def test_a_batch_dependent_rounding_passes_the_oracles_and_fails_the_relations(jfa_device):
    kernel = _wrapped("planted-batch-variant", _batch_variant)
    assert run_case(CASE, kernel, jfa_device).status == "pass"  # no single case sees it
    finding = Relation("batch_invariance", CASE).check(kernel, jfa_device)
    assert finding and "sequence 0 run alone differs" in finding and "o:" in finding


def _position_dependent(problem, q, k, v, run):
    # sequence b's rows scaled by (1 + b half-ulps): right within the allowance, wrong under a permutation
    scale = torch.ones(run.o.shape[0], 1, 1, dtype=run.o.dtype, device=run.o.device)
    for b, (s, n) in enumerate(zip(problem.out_starts, problem.q_lengths)):
        scale[s:s + n] += b * 2.0**-23
    run.o = run.o * scale


def test_a_sequence_index_dependence_fails_the_permutation(jfa_device):
    kernel = _wrapped("planted-position", _position_dependent)
    assert run_case(CASE, kernel, jfa_device).status == "pass"
    finding = Relation("permutation", CASE).check(kernel, jfa_device)
    assert finding and finding.startswith("permuting the sequences in order [1, 2, 3, 0]") and "o:" in finding


_CALLS = [0]


def _noisy(problem, q, k, v, run):
    # a reduction order that changes from one call to the next: one to three float32 half-ulps, never the same twice
    # running, far inside the allowance
    _CALLS[0] += 1
    run.o = run.o * (1 + (_CALLS[0] % 3 + 1) * 2.0**-24)


@pytest.mark.parametrize("name", ["permutation", "batch_invariance"])
def test_a_kernel_whose_own_reruns_differ_is_called_nondeterministic_not_order_dependent(name, jfa_device):
    kernel = _wrapped(f"planted-noisy-{name}", _noisy)
    assert run_case(CASE, kernel, jfa_device).status == "pass"  # inside the allowance
    finding = Relation(name, CASE).check(kernel, jfa_device)
    assert finding and finding.startswith("the same call twice gave different outputs (o:"), finding
    assert "not deterministic" in finding and "permuting" not in finding and "run alone" not in finding


def _writes_into_k(problem, q, k, v, run):
    k.data[problem.k_starts[0]] += 1.0  # e.g. a scratch buffer aliased with the input (no autograd trace)


def test_a_kernel_that_writes_into_its_inputs_fails_the_case(jfa_device):
    result = run_case(CASE, _wrapped("planted-writes-k", _writes_into_k), jfa_device)
    assert result.status == "fail"
    assert any("input k was modified by the call" in v for v in result.findings_of("contract")), result.explain()
    assert "inputs unchanged" in result.explain()


def _adds_into_q_in_place(problem, q, k, v, run):
    with torch.no_grad():
        q.add_(1.0)  # an in-place write autograd sees: its saved q is now stale


def test_an_input_written_in_place_is_the_finding_even_when_autograd_then_refuses_the_backward(jfa_device):
    """Regression (a new user's trial): a kernel adding 1 to q in place was reported as "kernel raised: RuntimeError:
    one of the variables needed for gradient computation has been modified by an inplace operation" (autograd's
    words, not the kernel's), with no line saying q was modified; it was said only when the case had no backward."""
    result = run_case(CASE, _wrapped("planted-adds-into-q", _adds_into_q_in_place), jfa_device)
    assert result.status == "fail", result.message
    assert any("input q was modified by the call" in v for v in result.findings_of("contract")), result.explain()
    assert "kernel raised" not in result.explain()


@pytest.mark.parametrize("edit, said", [
    (lambda run: run.o[:, :, :-1], "o.shape=(21, 3, 15), expected (21, 3, 16)"),
    (lambda run: run.o.to("meta"), "o.device=meta, expected cpu"),
])
def test_an_output_contract_violation_on_o_is_a_contract_finding_not_an_autograd_error(edit, said):
    """Regression (issue 43, 4): an O of the wrong shape or device ran the backward first, so the verdict was an
    autograd traceback ("Mismatch in shape") where the same mistake on LSE was named as a contract finding."""
    def broken(problem, q, k, v, run):
        run.o = edit(run)

    result = run_case(CASE, _wrapped(f"planted-o-{said[:7]}", broken), "cpu")
    assert result.status == "fail", result.message
    assert any(said in m for m in result.findings_of("contract")), (result.findings, result.message)
    assert "Traceback" not in result.message and "Mismatch" not in result.explain()


def test_the_production_launch_is_judged_when_the_case_asks_for_it(jfa_device):
    seen = []
    kernel = _wrapped("spy-instrument", lambda p, q, k, v, run: seen.append(run.plan is not None))
    small = Case(kv_lengths=(3, 4), dtype="float32", head_dim=16)
    assert run_case(small, kernel, jfa_device).status == "pass"
    assert run_case(dataclasses.replace(small, instrument=False), kernel, jfa_device).status == "pass"
    assert seen == [True, False]
    # the late field keeps old case files and ids valid
    assert "instrument" not in small.to_dict()
    assert Case.from_dict(dataclasses.replace(small, instrument=False).to_dict()).instrument is False


def test_mixed_layout_strides_every_tensor_differently(jfa_device):
    t = CASE.materialize(jfa_device)
    strides = {x.stride() for x in (t.q, t.k, t.v, t.do)}
    assert len(strides) == 4 and not t.q.is_contiguous() and not torch.isnan(t.q).any()
    plain = dataclasses.replace(CASE, layout="contiguous").materialize(jfa_device)
    assert all(torch.equal(a, b) for a, b in zip((t.q, t.k, t.v, t.do), (plain.q, plain.k, plain.v, plain.do)))
    assert run_case(CASE, get_kernel("triton_jfa"), jfa_device).status == "pass"


def test_a_broken_relation_leaves_a_call_file_that_replays(tmp_path, jfa_device, capsys):
    from jfa_verify.cli import main

    kernel = _wrapped("planted-batch-variant-2", _batch_variant)
    relations = [Relation("batch_invariance", CASE), Relation("sequence", CASE, (dataclasses.replace(CASE, seed=9),))]
    findings = check_relations(relations, kernel, jfa_device, str(tmp_path))
    assert len(findings) == 1 and "[FAIL] relation batch_invariance on rel" in findings[0]
    (path,) = tmp_path.glob("*.calls.json")  # the holding relation's file was removed
    assert is_call_file(path) and json.loads(path.read_text())["status"] == "fail"
    relation, _ = read_call_file(path)
    assert relation == relations[0]
    assert main(["replay", str(path), "--kernel", "planted-batch-variant-2", "--device", jfa_device.type]) == 1
    assert "fail (same)" in capsys.readouterr().out
    assert main(["replay", str(path), "--kernel", "triton_jfa", "--device", jfa_device.type]) == 0


def test_a_relation_that_now_holds_keeps_its_earlier_call_file_in_now_passing(tmp_path, jfa_device, capsys):
    """Regression (a new user's trial): rerun with the kernel fixed, a broken relation's call file vanished without a
    line, where case files are moved to now-passing/ with one."""
    broken = [True]

    def edit(problem, q, k, v, run):
        if broken[0]:
            _position_dependent(problem, q, k, v, run)

    kernel = _wrapped("planted-fixable", edit)
    relations = [Relation("permutation", CASE)]
    assert check_relations(relations, kernel, jfa_device, str(tmp_path))
    (path,) = tmp_path.glob("*.calls.json")
    before = path.read_text()
    broken[0] = False
    assert check_relations(relations, kernel, jfa_device, str(tmp_path)) == []
    kept = tmp_path / "now-passing" / path.name
    assert not path.exists() and kept.read_text() == before
    assert f"{path.name} (a broken relation recorded) now holds" in capsys.readouterr().err
    assert check_relations(relations, kernel, jfa_device, str(tmp_path)) == []  # held before: nothing is kept
    assert not list(tmp_path.glob("*.calls.json")) and kept.read_text() == before


def test_call_file_errors_name_the_file(tmp_path):
    from jfa_verify.core.errors import InvalidInput

    bad = tmp_path / "x.calls.json"
    write_call_file(bad, Relation("sequence", CASE), kernel="k", device="cpu")
    doc = json.loads(bad.read_text())
    doc["relation"] = "nope"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InvalidInput, match="relation='nope' is not one of"):
        read_call_file(bad)


def _raises(problem, q, k, v, run):
    raise RuntimeError("planted: the kernel's launch failed")


def test_a_kernel_exception_is_a_finding_but_a_framework_exception_is_not(jfa_device, monkeypatch):
    # regression: an ImportError inside the relation code once came back as "kernel raised", so a
    # framework bug counted as killing five planted mutants
    finding = Relation("permutation", CASE).check(_wrapped("planted-raises", _raises), jfa_device)
    assert finding is not None and finding.startswith("kernel raised: RuntimeError: planted")

    import jfa_verify.checks.relations as relations

    def broken(*args, **kwargs):
        raise ImportError("planted: the framework's own import failed")

    monkeypatch.setattr(relations, "permuted", broken)
    with pytest.raises(ImportError, match="framework's own import"):
        Relation("permutation", CASE).check(get_kernel("triton_jfa"), jfa_device)


def test_the_sequence_of_related_calls_ends_with_the_same_lengths_at_another_head_dim():
    # a launch plan cached on the lengths alone is seen only by a later call with the same lengths
    from jfa_verify.cases.dimensions import padded_width
    from jfa_verify.checks.suites import related_calls

    calls = related_calls(CASE, get_kernel("triton_jfa").capabilities)
    last = calls[-1]
    assert last.kv_lengths == CASE.kv_lengths and last.q_lengths == CASE.q_lengths
    assert padded_width(last.head_dim) != padded_width(CASE.head_dim)
    assert len(related_calls(CASE)) == len(calls) - 1  # no capabilities: no head dim is assumed


def test_a_sequence_whose_first_call_fails_says_no_call_of_the_check_carried_state(jfa_device):
    # a new user's stateless kernel, wrong on every call, was reported as breaking "no host state carries over"
    # ("call 1 of 4 failed after 0 earlier call(s)")
    def doubled(problem, q, k, v, run):
        run.o = run.o * 2

    finding = Relation("sequence", CASE, (dataclasses.replace(CASE, seed=9),)).check(
        _wrapped("planted-always-wrong", doubled), jfa_device)
    assert finding.startswith("call 1 of 2 failed, the first call of this check") and "no call of the check" in finding
    # (but calls before the check, in the same process, are not ruled out: a new user's module-level counter)
    assert "from calls this process made before the check" in finding and "in a new process" in finding


def test_a_later_call_that_fails_alone_too_is_not_called_state_but_one_that_passes_alone_is(jfa_device):
    """Regression (a new user's trial): a stateless kernel wrong only on the second call's lengths was reported as
    "call 2 of 4 failed after 1 earlier call(s) on the same kernel object" (host state), while that call failed on
    its own too. The failing call now runs first on a fresh kernel object before state is blamed."""
    second = dataclasses.replace(CASE, seed=9, kv_lengths=tuple(n + 1 for n in CASE.kv_lengths))

    def wrong_on_the_second_lengths(problem, q, k, v, run):
        if problem.total_k_rows == sum(second.kv_lengths) + second.offsets_start:
            run.o = run.o * 2

    finding = Relation("sequence", CASE, (second,)).check(
        _wrapped("planted-wrong-on-lengths", wrong_on_the_second_lengths), jfa_device)
    # (not "not state": a fresh object does not reset state kept outside it, a module-level cache, say)
    assert finding.startswith("call 2 of 2 failed after 1 earlier call(s), and as the first call on a fresh kernel "
                              "object too: a wrong result of this case, or state the kernel keeps outside its "
                              "object") and "replaying the case in a new process" in finding, finding

    class Stateful:
        def __init__(self):
            self.seen = 0

        def launch(self, problem, q, k, v, q_off, k_off, *, instrument=False):
            run = get_kernel("triton_jfa").impl.launch(problem, q, k, v, q_off, k_off, instrument=instrument)
            self.seen += 1
            if self.seen > 1:
                run.o = run.o * 2
            return run

    base = get_kernel("triton_jfa")
    stateful = add_kernel(Kernel("planted-stateful", "planted", Stateful, base.capabilities, base.tile_sizes_fn))
    finding = Relation("sequence", CASE, (second,)).check(stateful, jfa_device)
    assert finding.startswith("call 2 of 2 failed after 1 earlier call(s) on the same kernel object, and passed as "
                              "the first call on a fresh one: state carried between calls"), finding

