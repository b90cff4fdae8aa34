"""Findings on real peers, kept as reproducers (``tests/corpus/peers/``): GPU regression tests that assert each
peer's *current* behaviour, so a fixed peer shows up as a failing test (then update the file and the README's list).

The CPU test checks the files are what they claim (the issue's triggers); the GPU tests run the peer.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jfa_verify import run_case
from jfa_verify.core.exits import exit_code_for
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.run.corpus import read_case_file
from jfa_verify.run.settings import RunSettings

PEERS = Path(__file__).with_name("corpus") / "peers"
EMPTY_Q = PEERS / "fa2-varlen-all-empty-query-batch-invalid-argument.json"
ZERO_STRIDES = PEERS / "fa2-varlen-empty-tensor-zero-strides-rejected.json"
PLUS_INF = PEERS / "fa2-varlen-lse-plus-inf-rows-without-keys.json"
NESTED_STORAGE_OFFSET = ("nested-sdpa-dO-with-storage-offset-wrong-gradients",
                         "nested-sdpa-cross-float32-wrong-gradients",
                         "nested-sdpa-cuda-nan-gradients-mixed-layout")
# The findings the framework made itself on the H200 (matrix and campaigns), replayed as printed.
FOUND_ON_H200 = sorted(p for p in PEERS.glob("*.json") if any(
    s in read_case_file(p)[1]["found_by"] for s in ("ci/gpu_peers.py", "jfa-verify matrix on the H200")))


def test_peer_reproducers_hold_the_named_triggers():
    files = sorted(PEERS.glob("*.json"))
    assert EMPTY_Q in files and PLUS_INF in files and ZERO_STRIDES in files
    for path in files:
        case, payload = read_case_file(path)
        assert payload["kernel"] in ("torch_fa2_varlen", "torch_varlen_attn", "flex_document_mask", "nested_sdpa")
        assert payload["symptom"] and payload["found_by"] and payload["status"] in ("fail", "error", "crash")
        get_kernel(payload["kernel"])  # the adapter exists
    case, _ = read_case_file(EMPTY_Q)
    assert sum(case.query_lengths) == 0 < sum(case.kv_lengths)  # every query sequence empty, keys present
    case, _ = read_case_file(PLUS_INF)
    assert case.causal and case.causal_alignment == "bottom_right"
    assert any(q > k for q, k in zip(case.query_lengths, case.kv_lengths))  # rows that see no key
    # found by the framework on the H200 (ci/gpu_peers.py, 2026-12-01): each file holds the trigger it names
    for name in ("fa2-varlen-empty-batch-batch-size-must-be-positive",
                 "varlen-attn-empty-batch-batch-size-must-be-positive"):
        case, _ = read_case_file(PEERS / f"{name}.json")
        assert case.batch == 0  # offsets of one entry: no sequence at all
    for name in ("fa2-varlen-all-empty-key-batch-invalid-argument", "varlen-attn-all-empty-key-batch-invalid-argument"):
        case, payload = read_case_file(PEERS / f"{name}.json")
        assert sum(case.kv_lengths) == 0 < sum(case.query_lengths) and payload["status"] == "crash"
    case, _ = read_case_file(PEERS / "flex-document-mask-cuda-empty-batch-inductor-error.json")
    assert case.batch >= 1 and sum(case.kv_lengths) == 0
    case, _ = read_case_file(PEERS / "varlen-attn-lse-plus-inf-rows-without-keys.json")
    assert any(q > 0 == k for q, k in zip(case.query_lengths, case.kv_lengths))  # a query row with no key at all
    case, payload = read_case_file(PEERS / "nested-sdpa-cuda-causal-empty-sequence-type-error.json")
    assert case.causal and case.batch == 1 and sum(case.kv_lengths) == 0 and payload["status"] == "error"
    for name in NESTED_STORAGE_OFFSET:
        case, payload = read_case_file(PEERS / f"{name}.json")
        # the adapter's output is a concatenation after the rows before the first sequence: dO reaches SDPA as a view
        assert (case.q_offsets_start or case.offsets_start) > 0 and payload["status"] == "fail"


# Runs the adapter on the reproducer's case with default strides for the empty query tensor.
_DEFAULT_STRIDES = """
import sys
from jfa_verify.run.corpus import read_case_file
from jfa_verify.protocol.registry import get_kernel
case, _ = read_case_file(sys.argv[1])
t = case.materialize("cuda")
q = t.q.new_empty(t.q.shape)  # an empty tensor as torch.empty makes it: strides (H * D, D, 1)
assert q.numel() == 0 and q.stride(-1) == 1
run = get_kernel("torch_fa2_varlen").run(case.problem(t), q, t.k, t.v, t.q_offsets, t.k_offsets)
print("no error: o", tuple(run.o.shape))
"""


def _run_alone(args, tmp_path) -> tuple[int, str]:
    """A command in its own process (a CUDA error may poison the context of the test process)."""
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"), cwd=tmp_path)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.gpu
def test_fa2_varlen_all_empty_query_batch_raises_invalid_argument(tmp_path):
    """torch 2.11 (H200): CUDA error: invalid argument when every query sequence is empty."""
    rc, out = _run_alone(["-c", _DEFAULT_STRIDES, str(EMPTY_Q)], tmp_path)
    assert rc != 0 and "invalid argument" in out, out


@pytest.mark.gpu
def test_fa2_varlen_rejects_an_empty_tensor_with_zero_strides(tmp_path):
    """Through the framework (replayed as printed): the op's stride check rejects the empty tensor."""
    rc, out = _run_alone(["-m", "jfa_verify.cli", "replay", str(ZERO_STRIDES), "--device", "cuda"], tmp_path)
    assert rc == 1, out  # a finding
    assert "[ERROR]" in out and "contiguous last dimension" in out, out
    assert "replayed: error (same)" in out


@pytest.mark.gpu
def test_fa2_varlen_lse_is_plus_inf_for_rows_without_keys(jfa_device):
    case, _ = read_case_file(PLUS_INF)
    kernel = get_kernel("torch_fa2_varlen")
    result = run_case(case, kernel, jfa_device, RunSettings(backward=False))
    assert result.status == "fail", result.explain()
    assert [c.name for c in result.failing] == ["lse"], result.explain()
    assert result.failing[0].problem == "infinite values of the wrong sign"
    assert result.conventions == ["lse_plus_inf_empty_rows"]  # explained by the declared convention, still a finding
    accepted = run_case(case, kernel, jfa_device, RunSettings(backward=False, accept=("lse_plus_inf_empty_rows",)))
    assert accepted.status == "pass" and accepted.accepted


@pytest.mark.gpu
@pytest.mark.parametrize("path", FOUND_ON_H200, ids=lambda p: p.stem)
def test_peer_finding_replays_as_recorded(path, tmp_path):
    """Each finding the peers' matrix made on the H200 replays as printed, with the same verdict (torch 2.11)."""
    _, payload = read_case_file(path)
    rc, out = _run_alone(["-m", "jfa_verify.cli", "replay", str(path), "--device", "cuda"], tmp_path)
    assert rc == int(exit_code_for([payload["status"]])), out  # 1 a finding, 4 a crash
    assert f"replayed: {payload['status']} (same)" in out, out
