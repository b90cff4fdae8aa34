"""The chunked reference (:mod:`jfa_verify.oracles.chunked`) and its judge (:mod:`jfa_verify.judge.chunks`): on small
cases each chunk's reference is the full float64 reference restricted to the chunk, the sequences an int32
overflow can reach are the ones past the boundary, and the judge finds a wrong row of a chunk where it is."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from jfa_verify.cases.case import Case
from jfa_verify.core.errors import InvalidInput
from jfa_verify.judge.chunks import judge_chunks
from jfa_verify.oracles import padded_sdpa_attention, reference_attention
from jfa_verify.oracles.chunked import chunked_reference, reachable_sequences
from jfa_verify.protocol.kernel import TileSizes

CASES = [
    Case(kv_lengths=(5, 0, 19, 33, 8), num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float32", causal=True,
         offsets_start=3, name="self-causal-gqa"),
    Case(kv_lengths=(7, 30, 12), mode="cross", q_lengths=(11, 4, 12), num_heads_q=3, num_heads_kv=1, head_dim=24,
         head_dim_v=8, dtype="bfloat16", causal=True, causal_alignment="bottom_right", name="cross-bottom-right-mqa"),
    Case(kv_lengths=(21, 9, 40), num_heads_q=2, num_heads_kv=2, head_dim=16, dtype="float16", window=(5, 2),
         values="large_logits", name="window-large-logits"),
]


def _full(case):
    t = case.materialize("cpu")
    problem = case.problem(t)
    return t, problem, reference_attention(problem, t.q, t.k, t.v, do=t.do)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("kv_heads_per_chunk", [None, 1])
def test_each_chunk_equals_the_full_float64_reference_on_it(case, kv_heads_per_chunk):
    t, problem, full = _full(case)
    sequences = [b for b in range(problem.batch) if problem.q_lengths[b] and problem.k_lengths[b]]
    chunks = chunked_reference(problem, t.q, t.k, t.v, t.do, sequences, kv_heads_per_chunk=kv_heads_per_chunk)
    per_sequence = problem.num_heads_kv // (kv_heads_per_chunk or problem.num_heads_kv)
    assert [c.sequence for c in chunks] == [b for b in sequences for _ in range(per_sequence)]
    for chunk in chunks:
        for name in ("o", "lse", "dq", "dk", "dv"):
            want, got = chunk.of(name, full[name]), chunk.ref[name]
            assert got.dtype == torch.float64 and got.shape == want.shape, name
            assert torch.allclose(got, want, rtol=0, atol=1e-12, equal_nan=True), (name, (got - want).abs().max())
    # the chunks together cover every KV head of every chosen sequence: dK of those rows is the full one's
    covered = torch.zeros(problem.num_heads_kv * problem.batch, dtype=torch.int64)
    for chunk in chunks:
        covered.view(problem.batch, -1)[chunk.sequence, slice(*chunk.kv_heads)] += 1
    assert covered.view(problem.batch, -1)[sequences].eq(1).all()


def test_reachable_sequences_are_those_past_the_boundary_and_a_sample():
    # q rows hold H_q * D = 8 elements; sequences end at rows 5, 12, 15, 24: at elements 40, 96, 120, 192
    case = Case(kv_lengths=(5, 7, 3, 9), num_heads_q=2, num_heads_kv=1, head_dim=4, dtype="float32")
    problem = case.problem(case.materialize("cpu"))
    assert reachable_sequences(problem, limit=8 * 13, sample=0) == [2, 3]
    assert reachable_sequences(problem, limit=8 * 13, sample=1) == [0, 2, 3]
    assert reachable_sequences(problem, limit=8 * 13, sample=5) == [0, 1, 2, 3]
    assert reachable_sequences(problem, limit=8 * 24, sample=0) == []  # the last element is at 191: inside int32
    with pytest.raises(InvalidInput, match="sample=-1"):
        reachable_sequences(problem, sample=-1)


def test_a_wrong_row_of_one_chunk_is_judged_and_located_in_the_full_tensors():
    case = CASES[0]
    t, problem, full = _full(case)
    sdpa = padded_sdpa_attention(problem, t.q, t.k, t.v, do=t.do)
    got = {name: sdpa[name].clone() for name in ("o", "lse", "dq", "dk", "dv")}
    b, kv_head, token = 3, 1, 20
    row = problem.k_starts[b] + token
    got["dk"][row, kv_head] += 1.0  # a dK row written wrong (what a wrapped key-row index does)
    chunks = chunked_reference(problem, t.q, t.k, t.v, t.do, [0, 2, 3], kv_heads_per_chunk=1, with_sdpa=True)
    judged = judge_chunks(chunks, got, case.torch_dtype, tiles=TileSizes(8, 4))
    failing = [j for j in judged if not j.passed]
    assert [(j.sequence, j.kv_heads, j.comparison.name) for j in failing] == [(b, (kv_head, kv_head + 1), "dk")]
    where = failing[0].where
    assert (where.sequence, where.head, where.token, where.tile) == (b, kv_head, token, token // 4)
    assert where.index[:2] == (row, kv_head)
    assert "FAIL" in failing[0].describe() and all(j.passed for j in judged if j is not failing[0])


def test_bad_requests_are_refused_with_the_fix():
    t, problem, _ = _full(CASES[0])
    with pytest.raises(InvalidInput, match=r"sequences \[9\] out of range"):
        chunked_reference(problem, t.q, t.k, t.v, t.do, [9])
    with pytest.raises(InvalidInput, match="kv_heads_per_chunk=3"):
        chunked_reference(problem, t.q, t.k, t.v, t.do, [0], kv_heads_per_chunk=3)
    chunks = chunked_reference(problem, t.q, t.k, t.v, None, [0])
    assert "dq" not in chunks[0].ref
    with pytest.raises(InvalidInput, match="with_sdpa=True"):
        judge_chunks(chunks, {"o": t.q}, torch.float32)


# -- a whole case judged on chunks (jfa_verify.run.chunked) ---------------------------------------------------------

SMALL = Case(kv_lengths=(20, 9, 33, 14), num_heads_q=2, num_heads_kv=1, head_dim=16, dtype="float32", name="small")
# Q rows hold H_q * D = 32 elements, K rows 16: a boundary at element 32 * 35 lies in sequence 2's Q rows (29..61),
# and in sequence 3's K rows (62..75) at row 70
LIMIT = 32 * 35


def test_run_chunked_passes_triton_jfa_forward_and_backward_on_the_reachable_sequences():
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.chunked import run_chunked

    result = run_chunked(SMALL, get_kernel("triton_jfa"), "cpu", limit=LIMIT, sample=1)
    assert result.status == "pass", result.explain()
    assert result.sequences == [0, 2, 3]
    assert {c.comparison.name for c in result.comparisons} == {"o", "lse", "dq", "dk", "dv"}


def test_run_chunked_kills_a_wrapped_key_row_index_in_the_backward():
    from jfa_verify.protocol.kernel import Kernel
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.chunked import run_chunked

    base = get_kernel("triton_jfa")
    wrap = LIMIT // 16  # what an int32 key-row offset does past the boundary: rows >= wrap take those - wrap's

    def wrapped(grad):
        out = grad.clone()
        out[wrap:] = grad[: grad.shape[0] - wrap]
        return out

    def attention(q, k, v, q_offsets, k_offsets, **options):
        through = k * 1  # dK flows through this copy, and the hook rewrites it
        through.register_hook(wrapped)
        return base.impl(q, through, v, q_offsets, k_offsets, **options)

    planted = Kernel("wrapped-key-rows", "", lambda: attention, base.capabilities, base.tile_sizes_fn)
    result = run_chunked(SMALL, planted, "cpu", limit=LIMIT, sample=1)
    failing = [c for c in result.comparisons if not c.passed]
    assert result.status == "fail" and {c.comparison.name for c in failing} == {"dk"}, result.explain()
    assert {c.sequence for c in failing} == {3} and all(c.where.index[0] >= wrap for c in failing)


# -- GPU: a planted int32 overflow of the dK/dV key-row index, killed by the chunked backward -----------------------

ROOT = Path(__file__).resolve().parents[1]
# Q, K, V and dO rows hold 2 * 128 elements: starting 100 rows before row 2**31 / 256, both sequences straddle the
# int32 boundary in every buffer (about 4 GiB each in bfloat16, as the 2**31 class of the strategies)
KEY_ROWS_PAST = Case(kv_lengths=(65, 127), num_heads_q=2, num_heads_kv=2, head_dim=128, dtype="bfloat16",
                     offsets_dtype="int64", offsets_start=2**31 // 256 - 100, name="k-rows-past-2^31")
# dK/dV pass only: the key row (of K and V read, of dK and dV written) computed in int32, wrapping past 2^31 elements
KEY_ROW_MUTANT = {"name": "int32_dkdv_key_row_overflow",
                  "description": "dK/dV pass: key rows in int32, so row x stride wraps past 2^31 elements",
                  "target": "kernels",
                  "old": "        col_ok = offs_n < k_len\n        k_rows = k_start + offs_n\n",
                  "new": "        col_ok = offs_n < k_len\n        k_rows = (k_start + offs_n).to(tl.int32)\n",
                  "gpu_only": True, "gpu_reason": "needs K of more than 2^31 elements"}


def _key_row_catalogue(folder: Path) -> Path:
    """A catalogue file of the one mutant above, with the packaged triton_jfa catalogue's kernel and targets."""
    from importlib import resources

    text = resources.files("jfa_verify.fuzz").joinpath("catalogues/triton_jfa.json").read_text()
    header = {k: v for k, v in json.loads(text).items() if k != "mutants"}
    path = folder / "key_rows.json"
    path.write_text(json.dumps(dict(header, name="key_rows", mutants=[KEY_ROW_MUTANT])))
    return path


def test_the_key_row_mutant_applies_to_the_dkdv_pass_only(tmp_path):
    from jfa_verify.fuzz.mutation import load_catalogue

    catalogue = load_catalogue(str(_key_row_catalogue(tmp_path)))
    source = catalogue.mutated_source(KEY_ROW_MUTANT["name"])  # raises when the source moved on (a stale mutant)
    assert source.count("k_rows = (k_start + offs_n).to(tl.int32)") == 1


def _judge_in_child(catalogue: str, name: str) -> None:
    """(Run in a child process: a wrapped address may end it with an illegal-address error.) Prints the verdict."""
    from jfa_verify.core.device import select_device
    from jfa_verify.fuzz.mutation import load_catalogue
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.chunked import run_chunked

    kernel = get_kernel(name) if name == "triton_jfa" else load_catalogue(catalogue).kernel_of(name)
    result = run_chunked(KEY_ROWS_PAST, kernel, select_device("cuda"), kv_heads_per_chunk=1)
    print(json.dumps({"status": result.status, "sequences": result.sequences,
                      "outputs": sorted({c.comparison.name for c in result.comparisons}),
                      "explain": result.explain()}))


@pytest.mark.gpu
@pytest.mark.gpu_exclusive
@pytest.mark.slow
@pytest.mark.parametrize("name", ["triton_jfa", KEY_ROW_MUTANT["name"]])
def test_backward_int32_key_row_overflow_is_killed_on_gpu(name, tmp_path, jfa_device):
    if jfa_device.type != "cuda":
        pytest.skip("a K of more than 2**31 elements runs on a GPU only")
    catalogue = _key_row_catalogue(tmp_path)
    code = f"from tests.test_chunked_reference import _judge_in_child; _judge_in_child({str(catalogue)!r}, {name!r})"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    verdict = json.loads(lines[-1]) if lines else {"status": "crash", "explain": proc.stderr[-3000:]}
    print(verdict["explain"])
    if name == "triton_jfa":
        assert proc.returncode == 0 and verdict["status"] == "pass", verdict["explain"]
        assert {"dq", "dk", "dv"} <= set(verdict["outputs"]) and verdict["sequences"] == [0, 1]
    else:  # killed: a wrong dK/dV, an exception, or the process ended by an illegal address
        assert verdict["status"] in ("fail", "error", "crash"), verdict["explain"]
        # running out of memory says nothing of the mutant (it "killed" it on a card shared with a finished test)
        assert "OutOfMemoryError" not in verdict["explain"], verdict["explain"]
