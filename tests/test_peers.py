"""Peer kernels behind the contract on the CPU: adapters, the TLX stand-in, declared conventions, campaigns that
keep searching, and ``jfa-verify matrix``."""

import dataclasses
import json
import math
import shlex
import shutil
from pathlib import Path

import pytest
import torch

from jfa_verify import Case, run_case
from jfa_verify.core.errors import KernelUnavailable
from jfa_verify.protocol.kernel import Kernel
from jfa_verify.protocol.registry import add_kernel, get_kernel, load_plugin
from jfa_verify.run.settings import RunSettings

HERE = Path(__file__).resolve().parent
PLUGIN = HERE / "fa2_like_plugin.py"
STANDIN = HERE / "tlx_standin.py"

H = dict(num_heads_q=2, num_heads_kv=2, head_dim=16)


# -- adapters that run on the CPU ---------------------------------------------------------------------------


def test_flex_document_mask_forward_on_cpu_all_masks():
    kernel = get_kernel("flex_document_mask")
    cases = [
        Case(kv_lengths=(9, 1, 17), dtype="bfloat16", num_heads_q=4, num_heads_kv=2, head_dim=16),
        Case(kv_lengths=(9, 0, 17), q_lengths=(12, 3, 5), mode="cross", causal=True, causal_alignment="bottom_right",
             dtype="float32", **H),
        Case(kv_lengths=(9, 4, 17), q_lengths=(2, 3, 20), mode="cross", window=(2, 5), dtype="float16",
             offsets_start=3, **H),
        Case(kv_lengths=(9, 4), mode="broadcast_q", broadcast_q_len=6, window=(1, -1), causal=True,
             causal_alignment="bottom_right", dtype="float32", **H),
    ]
    for case in cases:
        result = run_case(case, kernel, "cpu")
        assert result.status == "pass", result.explain()
        assert any("forward only: no backward on device cpu" in n for n in result.notes)
        assert {c.name for c in result.comparisons} == {"o", "lse"}


def test_flex_all_empty_batch_is_reported_as_the_kernels_error():
    """Found on the CPU (torch 2.13): flex_attention's block mask over zero tokens raises; a finding, not a crash."""
    result = run_case(Case(kv_lengths=(0, 0), dtype="float32", **H), get_kernel("flex_document_mask"), "cpu")
    assert result.status == "error" and "IndexError" in result.message


def test_nested_sdpa_on_cpu_forward_backward_and_declared_limits():
    kernel = get_kernel("nested_sdpa")
    ok = run_case(Case(kv_lengths=(9, 1, 17), q_lengths=(4, 6, 2), mode="cross", dtype="float32", head_dim=16,
                       head_dim_v=8, num_heads_q=2, num_heads_kv=2), kernel, "cpu")
    assert ok.status == "pass", ok.explain()
    assert {c.name for c in ok.comparisons} == {"o", "dq", "dk", "dv"}  # no LSE from SDPA
    causal = run_case(Case(kv_lengths=(5, 3), causal=True, dtype="float32", **H), kernel, "cpu")
    assert causal.status == "unsupported" and "refuses is_causal" in causal.message
    gqa = run_case(Case(kv_lengths=(5,), num_heads_q=4, num_heads_kv=2, head_dim=16), kernel, "cpu")
    assert gqa.status == "unsupported" and "GQA" in gqa.message
    # torch 2.13's current behaviour (a fixed torch shows up here): an all-empty batch raises
    empty = run_case(Case(kv_lengths=(0, 0), dtype="float32", **H), kernel, "cpu")
    assert empty.status == "error" and "to_padded_tensor" in empty.message
    # and a batch of no sequence (B = 0) raises too (on CUDA, torch 2.11: "min(): Expected reduction dim to be
    # specified for input.numel() == 0", the H200 matrix of 2026-12-02, 10 suite cases and its campaign's case 1)
    none = run_case(Case(kv_lengths=(), dtype="float32", **H), kernel, "cpu")
    assert none.status == "error" and "Dimension out of range" in none.message, none.explain()
    # the backward breaks on a dO whose rows are strided (a slice of a wider buffer): torch 2.13's behaviour
    strided = run_case(Case(kv_lengths=(1,), layout="strided", dtype="bfloat16", num_heads_q=1, num_heads_kv=1,
                            head_dim=16), kernel, "cpu")
    assert strided.status == "error" and "split_with_sizes" in strided.message


def _nested_sdpa_grads(output_grad: torch.Tensor, q, k, v, offsets) -> tuple:
    nested = lambda x: torch.nested.nested_tensor_from_jagged(x, offsets).transpose(1, 2)  # noqa: E731
    o = torch.nn.functional.scaled_dot_product_attention(nested(q), nested(k), nested(v)).transpose(1, 2).values()
    return torch.autograd.grad(o, (q, k, v), output_grad)


def test_nested_sdpa_backward_ignores_the_storage_offset_of_the_output_gradient():
    """Found by the H200 matrix's campaign (tests/corpus/peers/nested-sdpa-dO-with-storage-offset-wrong-gradients.json)
    and narrowed here: the same dO values give other dQ/dK/dV when dO is a view that starts one row into its
    storage. torch 2.13's current behaviour; a fixed torch makes this test fail (then update docs/peers.md)."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, 2, 16, generator=gen).requires_grad_() for _ in range(3))
    offsets = torch.tensor([0, 2, 5])
    wider = torch.randn(6, 2, 16, generator=gen)
    as_view = _nested_sdpa_grads(wider[1:], q, k, v, offsets)  # storage offset 32 elements
    as_copy = _nested_sdpa_grads(wider[1:].clone(), q, k, v, offsets)
    errors = [(a - b).abs().max().item() for a, b in zip(as_view, as_copy)]
    assert min(errors) > 0.5, errors  # every gradient wrong (errors of order 1 on unit-normal inputs)
    # a view at offset 0 of a wider buffer is fine: the offset, not the view, is what the backward drops
    at_start = _nested_sdpa_grads(wider[:5], q, k, v, offsets)
    assert all(torch.equal(a, b) for a, b in zip(at_start, _nested_sdpa_grads(wider[:5].clone(), q, k, v, offsets)))


def test_flex_attention_returns_no_lse_for_a_query_without_rows():
    """Found by the H200 matrix's campaign (tests/corpus/peers/flex-attention-empty-query-returns-no-lse.json) and
    narrowed here to torch alone: asked for the LSE, flex_attention gives None when the query has no row (an empty
    [1, H, 0] tensor would keep the contract). torch 2.13's current behaviour; a fixed torch makes this fail."""
    import warnings

    from torch.nn.attention.flex_attention import AuxRequest, flex_attention

    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    k, v = torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
    for rows in (0, 3):
        o, aux = flex_attention(torch.randn(1, 2, rows, 16), k, v, return_aux=AuxRequest(lse=True))
        assert o.shape == (1, 2, rows, 16)
        assert (aux.lse is None) == (rows == 0), (rows, aux.lse)


def test_flex_empty_query_finding_replays_on_the_cpu_with_the_peer_named():
    from jfa_verify.run.corpus import read_case_file

    case, payload = read_case_file(HERE / "corpus" / "peers" / "flex-attention-empty-query-returns-no-lse.json")
    assert case.mode == "broadcast_q" and case.broadcast_q_len == 0 and payload["environment"]["gpu"] == "NVIDIA H200"
    result = run_case(case, get_kernel("flex_document_mask"), "cpu")
    assert result.status == "error" and "flex_attention returned no LSE (None) for a query of 0 rows" in result.message


def test_nested_sdpa_storage_offset_finding_replays_on_the_cpu():
    """The H200 finding's reproducer, replayed where CI runs: dK and dV fail (the first row before the sequences
    makes the adapter's output a concatenation, so autograd hands SDPA a dO view with a storage offset)."""
    from jfa_verify.run.corpus import read_case_file

    case, payload = read_case_file(HERE / "corpus" / "peers"
                                   / "nested-sdpa-dO-with-storage-offset-wrong-gradients.json")
    assert case.offsets_start == 1 and payload["environment"]["gpu"] == "NVIDIA H200"
    result = run_case(case, get_kernel("nested_sdpa"), "cpu")
    assert result.status == "fail", result.explain()
    assert {c.name for c in result.failing} == {"dk", "dv"}, result.explain()
    assert min(c.kernel_error for c in result.failing) > 1.0  # wrong, not rounding (allowances about 0.05)
    shifted = run_case(dataclasses.replace(case, offsets_start=0), get_kernel("nested_sdpa"), "cpu")
    assert shifted.status == "pass", shifted.explain()  # the same sequences from row 0: right


def test_cuda_only_peers_are_unsupported_on_cpu_with_the_reason():
    case = Case(kv_lengths=(5, 3), **H)
    for name in ("torch_fa2_varlen", "torch_varlen_attn"):
        result = run_case(case, get_kernel(name), "cpu")
        assert result.status == "unsupported" and "device=cpu not in ('cuda',)" in result.message, name
        assert "compute capability 8.0" in result.message
        # what `replay` prints says why too (regression: only "[UNSUPPORTED] <case> on <kernel>")
        assert result.explain().splitlines()[1] == f"  {result.message}"


def test_varlen_attn_exists_in_cpu_torch_but_has_no_cpu_kernel():
    """Why torch_varlen_attn declares CUDA only: torch 2.13 (CPU) has the function, its op has no CPU kernel."""
    from torch.nn.attention.varlen import AuxRequest, varlen_attn

    q = torch.randn(6, 2, 16, dtype=torch.bfloat16)
    cu = torch.tensor([0, 2, 6], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="_flash_attention_forward"):
        varlen_attn(q, q, q, cu, cu, 4, 4, return_aux=AuxRequest(lse=True))


def test_varlen_attn_gqa_is_read_from_the_signature_without_importing_dynamo():
    """torch_varlen_attn reads whether ``varlen_attn`` takes ``enable_gqa`` from its source: importing the module
    pulled torch._dynamo into every jfa-verify process (about 1.5 s each: workers, mutant processes, CLI)."""
    import inspect
    import subprocess
    import sys

    from torch.nn.attention.varlen import varlen_attn

    from jfa_verify.kernels.torch_varlen_attn import _has_gqa

    assert _has_gqa() == ("enable_gqa" in inspect.signature(varlen_attn).parameters)
    code = ("import sys; from jfa_verify.protocol.registry import kernel_names; kernel_names(); "
            "print('torch._dynamo' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stdout + proc.stderr[-2000:]


# -- tlx_jfa through its stand-in ----------------------------------------------------------------------------


def _checkout(tmp_path: Path, bug=None) -> Path:
    """A fake checkout with the stand-in where TLX JFA's source lives (optionally with a planted bug)."""
    root = tmp_path / f"checkout-{bug or 'ok'}"
    src = root / "tlx_jfa" / "src"
    src.mkdir(parents=True)
    text = STANDIN.read_text()
    if bug:
        text = text.replace("PLANTED_BUG = None", f"PLANTED_BUG = {bug!r}")
    (src / "tlx_jagged_flash_attention.py").write_text(text)
    return root


def _standin_kernel(tmp_path, bug=None, balanced=False) -> Kernel:
    import dataclasses

    from jfa_verify.kernels.tlx_jfa import CAPABILITIES, build

    checkout = _checkout(tmp_path, bug)
    caps = dataclasses.replace(CAPABILITIES, device_types=("cpu",), min_compute_capability=None,
                               max_compute_capability=None)
    name = f"tlx_standin_{bug or 'ok'}{'_balanced' if balanced else ''}"
    return add_kernel(Kernel(name, "TLX JFA stand-in",
                             lambda: build(checkout=checkout, balanced=balanced, capabilities=caps), caps))


TLX_CASES = [
    Case(kv_lengths=(9, 1, 17, 0), dtype="bfloat16", **H),
    Case(kv_lengths=(9, 1, 17), q_lengths=(4, 6, 0), mode="cross", dtype="float16", offsets_start=3, **H),
    Case(kv_lengths=(12, 5, 20), window=(3, 3), dtype="bfloat16", layout="strided", **H),  # dO not contiguous
    Case(kv_lengths=(12, 0, 20), mode="broadcast_q", broadcast_q_len=7, window=(2, 2), dtype="bfloat16", **H),
    Case(kv_lengths=(12, 5), num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="bfloat16"),  # GQA: forward only
]


@pytest.mark.parametrize("balanced", [False, True])
def test_tlx_adapter_passes_against_its_standin(tmp_path, balanced):
    kernel = _standin_kernel(tmp_path, balanced=balanced)
    for case in TLX_CASES:
        result = run_case(case, kernel, "cpu")
        assert result.status == "pass", result.explain()
        assert any("base 2" in n for n in result.notes)  # M is log2, converted by the framework
    gqa = run_case(TLX_CASES[-1], kernel, "cpu")
    assert any("no backward" in n for n in gqa.notes)


def test_tlx_declared_limits_are_unsupported_not_passed(tmp_path):
    from jfa_verify.core.errors import UnsupportedCase

    kernel = _standin_kernel(tmp_path)
    t = Case(kv_lengths=(5,), **H).materialize("cpu")
    with pytest.raises(UnsupportedCase, match="mask='causal' not supported"):  # a direct call too
        kernel.impl(t.q, t.k, t.v, t.q_offsets, t.k_offsets, causal=True)
    for case, why in [(Case(kv_lengths=(5,), causal=True, **H), "mask='causal'"),
                      (Case(kv_lengths=(5,), window=(1, 2), **H), "not symmetric"),
                      (Case(kv_lengths=(5,), dtype="float32", **H), "dtype=float32"),
                      (Case(kv_lengths=(5,), head_dim=160, num_heads_q=1, num_heads_kv=1), "head_dim=160")]:
        result = run_case(case, kernel, "cpu")
        assert result.status == "unsupported" and why in result.message, result.message


@pytest.mark.parametrize("bug, output", [("natural_m", "lse"), ("window_off_by_one", "o")])
def test_planted_bug_in_the_tlx_standin_is_caught(tmp_path, bug, output):
    kernel = _standin_kernel(tmp_path, bug)
    case = TLX_CASES[2] if bug == "window_off_by_one" else TLX_CASES[0]
    result = run_case(case, kernel, "cpu")
    assert result.status == "fail", result.explain()
    assert output in {c.name for c in result.failing}


def test_the_adapters_conversions_are_needed(tmp_path):
    """The stand-in enforces the kernel's conventions: without the adapter, int64 offsets and a strided dO fail."""
    import importlib.util

    path = _checkout(tmp_path) / "tlx_jfa" / "src" / "tlx_jagged_flash_attention.py"
    spec = importlib.util.spec_from_file_location("_standin_direct", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    q = torch.randn(5, 2, 16, dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(AssertionError, match="int32"):
        mod.tlx_jagged_flash_attention(q, q, q, torch.tensor([0, 5]), torch.tensor([0, 5]), 5, 5)
    off = torch.tensor([0, 5], dtype=torch.int32)
    o, m = mod.tlx_jagged_flash_attention(q, q, q, off, off, 5, 5)
    wide = torch.randn(5, 2, 20, dtype=torch.bfloat16)[..., :16]
    with pytest.raises(AssertionError, match="contiguous dO"):
        o.backward(wide)


def test_tlx_without_checkout_or_b200_names_what_is_missing(monkeypatch, tmp_path):
    from jfa_verify.kernels.tlx_jfa import build

    monkeypatch.delenv("JFA_TLX_CHECKOUT", raising=False)
    with pytest.raises(KernelUnavailable, match="set JFA_TLX_CHECKOUT"):
        build()
    with pytest.raises(KernelUnavailable, match="no tlx_jfa/src/tlx_jagged_flash_attention.py there"):
        build(checkout=tmp_path)
    result = run_case(Case(kv_lengths=(5,), **H), get_kernel("tlx_jfa"), "cpu")
    assert result.status == "unsupported" and "B200 (sm_100)" in result.message and "JFA_TLX_CHECKOUT" in result.message
    # a kernel that cannot be loaded here is unsupported with the loader's reason, never an error or a pass
    broken = add_kernel(Kernel("tlx_nowhere", "", lambda: build(checkout=tmp_path), _cpu_tlx_capabilities()))
    result = run_case(Case(kv_lengths=(5,), **H), broken, "cpu")
    assert result.status == "unsupported" and "KernelUnavailable" in result.message


def _cpu_tlx_capabilities():
    import dataclasses

    from jfa_verify.kernels.tlx_jfa import CAPABILITIES

    return dataclasses.replace(CAPABILITIES, device_types=("cpu",), min_compute_capability=None,
                               max_compute_capability=None)


# -- declared conventions: reported, accepted only by name ---------------------------------------------------

CROSS_EMPTY_ROWS = Case(kv_lengths=(2, 3), q_lengths=(6, 3), mode="cross", causal=True,
                        causal_alignment="bottom_right", dtype="bfloat16", **H)


def test_declared_convention_is_still_a_finding_unless_accepted():
    load_plugin(PLUGIN)
    kernel = get_kernel("fa2_like")
    result = run_case(CROSS_EMPTY_ROWS, kernel, "cpu", RunSettings(backward=False))
    assert result.status == "fail" and result.conventions == ["lse_plus_inf_empty_rows"] and not result.accepted
    assert [c.name for c in result.failing] == ["lse"]
    assert "infinite values of the wrong sign" in result.failing[0].problem
    assert "--accept lse_plus_inf_empty_rows" in result.explain()
    # the worst index points at a row that sees no key (row 0 of sequence 0: L_q=6 > L_k=2)
    assert result.locations["lse"].token == 0 and result.failing[0].kernel_value == math.inf
    accepted = run_case(CROSS_EMPTY_ROWS, kernel, "cpu",
                        RunSettings(backward=False, accept=("lse_plus_inf_empty_rows",)))
    assert accepted.status == "pass" and accepted.accepted and accepted.failing  # the finding stays visible
    assert any("accepted convention" in n for n in accepted.notes)


def test_convention_does_not_excuse_other_failures(tmp_path):
    """+inf on a row that sees keys is no convention: the case is a plain finding even with --accept."""
    plugin = tmp_path / "bad_inf.py"
    plugin.write_text(PLUGIN.read_text().replace('"fa2_like"', '"fa2_like_bad"').replace(
        "lse = torch.where(torch.isneginf(lse), torch.full_like(lse, float(\"inf\")), lse)",
        "lse = torch.full_like(lse, float(\"inf\"))"))
    load_plugin(plugin)
    result = run_case(CROSS_EMPTY_ROWS, get_kernel("fa2_like_bad"), "cpu",
                      RunSettings(backward=False, accept=("lse_plus_inf_empty_rows",)))
    assert result.status == "fail" and result.conventions == [] and not result.accepted


# -- campaigns find both of the FA2 symptoms by themselves ------------------------------------------


def test_campaign_finds_the_empty_batch_error_and_the_plus_inf_lse(tmp_path):
    """The issue's two FlashAttention-2 findings, planted in a plain-torch plugin: a campaign draws the triggers
    itself and keeps searching after the first (one finding per kind, each shrunk)."""
    from jfa_verify.fuzz import run_campaign

    load_plugin(PLUGIN)
    kernel = get_kernel("fa2_like")
    # (seed 2: seed 1's draws, no longer shortened by the database's replays, meet the empty batch only: issue 43, 8)
    summary = run_campaign(kernel, max_examples=40, corpus_dir=tmp_path, device="cpu", seed=2, backward=False,
                           plugins=(str(PLUGIN),))
    kinds = {(f.status, f.signature["error_kind"], tuple(f.signature["outputs"])) for f in summary.failures}
    assert ("error", "RuntimeError", ()) in kinds
    assert ("fail", "non_finite", ("lse",)) in kinds
    for f in summary.failures:
        assert f.path.is_file() and f.case.batch <= 2
        if f.status == "fail":
            assert "explained by the kernel's declared convention lse_plus_inf_empty_rows" in f.explanation
    # when each was first met: a drawn case's position among the cases run, the shrink's after it
    found = sorted(f.found_at for f in summary.failures)
    assert all(isinstance(n, int) and 1 <= n <= summary.cases_run for n in found), found
    assert found[0] == summary.first_failure_at and len(set(found)) == len(found)
    assert [f["found_at"] for f in summary.to_dict()["failures"]] == [f.found_at for f in summary.failures]


# -- jfa-verify matrix ---------------------------------------------------------------------------------------


def test_matrix_cli_table_findings_outputs_and_replays(tmp_path, monkeypatch, capsys):
    from jfa_verify.cli import main
    from jfa_verify.protocol import registry

    monkeypatch.chdir(tmp_path)
    shutil.copy(PLUGIN, tmp_path / "fa2_like_plugin.py")
    # as in its own process (each command is one): an earlier test of this worker registered 'fa2_like' from
    # the original file, and a second file may not take a registered name
    # (on a copy of the registry: the copy's registration must not outlive this test either)
    registry.discover()  # the installed kernels first, into the registry that is kept
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry._REGISTRY.pop("fa2_like", None)
    args = ["matrix", "--kernel", "fa2_like", "--kernel", "nested_sdpa", "--kernel", "torch_fa2_varlen",
            "--plugin", "fa2_like_plugin.py", "--suite", "default", "--filter", "tile-edges", "--max-cases", "2",
            "--campaign", "6", "--device", "cpu", "--forward-only", "--json", "m.json", "--markdown", "m.md",
            "--png", "m.png", "--quiet"]
    assert main(args) == 1  # fa2_like has findings
    out = capsys.readouterr().out
    assert "| case | fa2_like | nested_sdpa | torch_fa2_varlen |" in out
    doc = json.loads(Path("m.json").read_text())
    assert doc["kernels"] == ["fa2_like", "nested_sdpa", "torch_fa2_varlen"] and len(doc["cases"]) == 2
    statuses = {(c["kernel"], c["status"]) for c in doc["cells"]}
    assert ("fa2_like", "fail") in statuses and ("torch_fa2_varlen", "unsupported") in statuses
    assert doc["summary"]["fa2_like"]["worst_headroom"] == "inf"
    findings = doc["findings"]
    assert {f["source"] for f in findings} == {"suite", "campaign"}
    for f in findings:  # a campaign finding says when the campaign first met it, and survives the merge below
        if f["source"] == "campaign":
            assert 1 <= f["found_at"] <= doc["campaigns"][f["kernel"]]["cases_run"], f
            assert f"first met at its case {f['found_at']}," in out
    assert Path("m.md").read_text().startswith("# jfa-verify matrix") and Path("m.png").stat().st_size > 1000
    # every replay command works as printed (it names the plugin), and reproduces the finding
    for f in findings:
        if f["kernel"] != "fa2_like":
            continue
        cmd = shlex.split(f["replay"])
        assert cmd[:2] == ["jfa-verify", "replay"] and "--plugin" in cmd
        assert main(cmd[1:] + ["--device", "cpu"]) == 1
    # one process per kernel, merged afterwards
    assert main(["matrix", "--kernel", "triton_jfa", "--suite", "windows", "--max-cases", "1", "--device", "cpu",
                 "--json", "t.json", "--quiet", "--reproducers", "r2"]) == 0
    capsys.readouterr()
    assert main(["matrix", "--from-json", "m.json", "t.json", "--markdown", "all.md"]) == 1
    # regression (new-user trial): cells left out read like a full run; the count is said whatever the exit status
    assert "cells not run" in capsys.readouterr().out and "this is not a full run" not in out
    merged = Path("all.md").read_text()
    assert "| case | fa2_like | nested_sdpa | torch_fa2_varlen | triton_jfa |" in merged
    assert "not run" in merged  # triton_jfa did not run m.json's cases, nor the others t.json's
    assert "first met at its case" in merged


def test_a_filtered_matrix_says_how_much_of_the_covering_array_it_ran(tmp_path, monkeypatch, capsys):
    """Regression (a new user's trial): `matrix --filter tile-edges` printed the whole suite's "N covering-array
    cases ... run first" above the 6 tile-edge cases it ran, none of them rows; it now says so, as `run` does."""
    from jfa_verify.checks.suites import get_suite
    from jfa_verify.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["matrix", "--kernel", "triton_jfa", "--filter", "tile-edges/self/float32", "--device", "cpu",
                 "--json", "m.json", "--quiet", "--reproducers", "r"]) == 0
    note = json.loads(Path("m.json").read_text())["suite_note"]
    assert note.endswith("(in the whole suite; 0 of the 1 case(s) picked here are covering-array rows)"), note
    suite = get_suite("default", "cpu", 0)
    assert suite.note_for(suite.cases) == suite.note  # the whole suite: the note as it is


def test_matrix_accept_turns_a_declared_convention_into_a_marked_pass(tmp_path, monkeypatch, capsys):
    from jfa_verify.cli import main

    monkeypatch.chdir(tmp_path)
    base = ["matrix", "--kernel", "fa2_like", "--plugin", str(PLUGIN), "--suite", "default", "--filter",
            "tile-edges/cross-causal/bfloat16", "--device", "cpu", "--forward-only", "--quiet"]
    assert main(base) == 1
    assert main(base + ["--accept", "lse_plus_inf_empty_rows", "--json", "a.json"]) == 0
    (cell,) = json.loads(Path("a.json").read_text())["cells"]
    assert cell["status"] == "pass" and cell["accepted"] and cell["conventions"] == ["lse_plus_inf_empty_rows"]
    assert "accepted inf" in capsys.readouterr().out


def test_matrix_usage_errors(capsys):
    from jfa_verify.cli import main

    assert main(["matrix"]) == 2
    assert "needs --kernel" in capsys.readouterr().err
    assert main(["matrix", "--kernel", "no_such_kernel", "--device", "cpu"]) == 2
    assert main(["matrix", "--kernel", "triton_jfa", "--campaign", "-1"]) == 2


def test_matrix_jobs_below_one_is_a_usage_error(capsys):
    from jfa_verify.cli import main
    from jfa_verify.core.exits import ExitCode

    assert main(["matrix", "--kernel", "triton_jfa", "--device", "cpu", "--jobs", "0"]) == ExitCode.USAGE
    assert "argument --jobs: 0 must be > 0" in capsys.readouterr().err


# fa2_like, forward only: a pass, a fail (+inf LSE on rows without keys) and an error (every query sequence empty)
JOBS_CASES = [Case(kv_lengths=(5, 6), dtype="float32", **H), CROSS_EMPTY_ROWS,
              Case(kv_lengths=(3, 2), q_lengths=(0, 0), mode="cross", dtype="float32", **H)]


def test_verify_all_starts_no_case_after_its_deadline(tmp_path):
    import time

    from jfa_verify.run.loop import Verifier

    load_plugin(PLUGIN)
    kernel = get_kernel("fa2_like")
    # a deadline already past: no case starts, in this process or on isolated workers (none is even started)
    for isolate, jobs in ((False, 1), (True, 1), (True, 2)):
        seen = []
        with Verifier(kernel, "cpu", tmp_path / f"past-{isolate}-{jobs}",
                      RunSettings(backward=False, plugins=[str(PLUGIN)], isolate=isolate, jobs=jobs)) as verifier:
            results = verifier.verify_all(JOBS_CASES, on_result=seen.append, deadline=time.monotonic() - 1)
            assert [w.pid for w in verifier.workers] == [None] * (jobs if isolate else 0)
        assert results == [None, None, None] and seen == []
    assert not list(tmp_path.rglob("*.json"))  # not even a write-ahead case file
    # no deadline: every case, in order
    seen = []
    with Verifier(kernel, "cpu", tmp_path / "all", RunSettings(backward=False)) as verifier:
        results = verifier.verify_all(JOBS_CASES, on_result=seen.append)
    assert [r.status for r in results] == ["pass", "fail", "error"]
    assert [r.case for r in results] == JOBS_CASES and seen == results
    # the deadline passes while the first case's result is handled: that case has its verdict, the others never start

    def past_the_deadline(result):
        seen.append(result)
        while time.monotonic() <= deadline:
            time.sleep(0.01)

    seen = []
    deadline = time.monotonic() + 1.0
    with Verifier(kernel, "cpu", tmp_path / "some", RunSettings(backward=False)) as verifier:
        results = verifier.verify_all(JOBS_CASES, on_result=past_the_deadline, deadline=deadline)
    assert [r and r.status for r in results] == ["pass", None, None] and seen == results[:1]


def test_run_matrix_with_jobs_gives_the_cells_of_one_at_a_time(tmp_path):
    from jfa_verify.workflows.matrix import NOT_RUN, run_matrix

    load_plugin(PLUGIN)
    kernels, cpu = [get_kernel("fa2_like")], torch.device("cpu")
    settings = RunSettings(plugins=[str(PLUGIN)], backward=False)
    one = run_matrix(kernels, JOBS_CASES, cpu, settings, reproducers=tmp_path / "one")
    two = run_matrix(kernels, JOBS_CASES, cpu, settings, reproducers=tmp_path / "two", jobs=2, deadline_s=600)
    for m in (one, two):
        assert [m.cell("fa2_like", c).status for c in JOBS_CASES] == ["pass", "fail", "error"]
    # the same cells, recorded in the cases' order whichever worker finished first
    assert list(two.cells) == list(one.cells) == [("fa2_like", c.case_id()) for c in JOBS_CASES]
    assert [c.signature for c in two.cells.values()] == [c.signature for c in one.cells.values()]
    # a deadline spent before the first case: every cell is "not run", as with the loop's break before
    late = run_matrix(kernels, JOBS_CASES, cpu, settings, reproducers=tmp_path / "late", jobs=2, deadline_s=1e-9)
    assert [late.cell("fa2_like", c).status for c in JOBS_CASES] == [NOT_RUN] * 3 and late.cells == {}
    assert late.counts("fa2_like")[NOT_RUN] == 3


def _short_of_memory(tmp_path, misbehaving_plugin, name: str):
    """A plugin kernel whose first call of each batch size of 2 or more runs out of device memory (a busy card),
    and whose batch of 3 always does (its own need); and three cases, of batch sizes 1, 2 and 3."""
    marks = tmp_path / "marks"
    marks.mkdir()
    plugin = misbehaving_plugin(name, wrong="B >= 2")
    plugin.write_text(plugin.read_text().replace('raise RuntimeError("planted failure")',
                                                 f"""mark = {str(marks)!r} + f"/{{B}}"
            if B == 3 or not os.path.exists(mark):
                open(mark, "w").close()
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 86.00 MiB")"""))
    load_plugin(plugin)
    return plugin, [Case(kv_lengths=(5,) * n, dtype="float32", **H) for n in (1, 2, 3)]


@pytest.mark.parametrize("jobs", [1, 2])
def test_cases_that_ran_out_of_device_memory_run_again_alone(tmp_path, misbehaving_plugin, jobs):
    """Regression (H200 gate, 2026-12-02): two gates side by side, 8 case workers each, filled the card; 5 suite
    cases came back as out-of-memory errors and failed the gate. Each passed when run alone."""
    from jfa_verify.run.loop import Verifier

    name = f"short_of_memory_{jobs}"
    plugin, cases = _short_of_memory(tmp_path, misbehaving_plugin, name)
    with Verifier(get_kernel(name), "cpu", tmp_path / "r",
                  RunSettings(backward=False, plugins=[str(plugin)], isolate=jobs > 1, jobs=jobs)) as verifier:
        seen = []
        results = verifier.verify_all(cases, on_result=seen.append)
    assert [r.status for r in results] == ["pass", "pass", "error"] and "out of device memory" in results[2].message
    assert verifier.memory_reruns == [2, 1] and len(seen) == 3  # progress saw each case once
    assert [p.name for p in (tmp_path / "r").glob("*.json")] == [f"{cases[2].case_id()}-{name}.json"]
    # Regression (H100, 2026-12-07): "alone" beside eleven idle workers, each holding 5-7.5 GiB of the card, a case
    # ran out again. The others are ended before the reruns (they restart on use), and a case out of memory again
    # says so.
    assert all(w.pid is None for w in verifier.workers[1:])
    ended = " (1 other case worker(s) of this run ended first)" if jobs == 2 else ""
    assert results[2].message.endswith(f"run again alone after the other cases{ended}: out of device memory again")


def test_run_reports_the_cases_run_again_after_running_out_of_device_memory(tmp_path, misbehaving_plugin, capsys):
    from jfa_verify.cli import main

    marks = tmp_path / "marks"
    marks.mkdir()
    plugin = misbehaving_plugin("short_of_memory_once", wrong="B >= 2")
    oom_once = f"""mark = {str(marks)!r} + "/" + "-".join(map(str, lengths))
            if not os.path.exists(mark):
                open(mark, "w").close()
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 86.00 MiB")"""
    plugin.write_text(plugin.read_text().replace('raise RuntimeError("planted failure")', oom_once))
    report = tmp_path / "run.json"
    rc = main(["run", "--device", "cpu", "--plugin", str(plugin), "--kernel", "short_of_memory_once", "--max-cases",
               "4", "--jobs", "2", "--no-progress", "--report", str(report), "--reproducers", str(tmp_path / "r")])
    doc = json.loads(report.read_text())
    again = len(list(marks.iterdir()))
    assert rc == 0 and again >= 1 and doc["summary"]["pass"] == 4, capsys.readouterr().out[-3000:]
    assert doc["memory_reruns"] == {"run_again": again, "no_longer_out_of_memory": again}
    assert (f"{again} case(s) ran out of device memory beside the others and were run again alone: {again} no longer "
            "did") in capsys.readouterr().out


def test_matrix_runs_cells_that_ran_out_of_device_memory_again_one_at_a_time(tmp_path, misbehaving_plugin):
    """Regression (H200, 2026-12-02): beside another job holding 112 GiB of the card, 27 cells of a peer came back
    as out-of-memory errors and stood as its findings; run again once the card was free, they would have run."""
    from jfa_verify.workflows.matrix import run_matrix

    plugin, cases = _short_of_memory(tmp_path, misbehaving_plugin, "short_of_memory")
    m = run_matrix([get_kernel("short_of_memory")], cases, torch.device("cpu"),
                   RunSettings(plugins=[str(plugin)], backward=False), reproducers=tmp_path / "r")
    assert [m.cell("short_of_memory", c).status for c in cases] == ["pass", "pass", "error"]
    assert "out of device memory" in m.cell("short_of_memory", cases[2]).message
    assert "2 cell(s) that ran out of device memory were run again, one at a time: 1 no longer did" in m.suite_note
    assert [p.name for p in (tmp_path / "r").glob("*.json")] == [f"{cases[2].case_id()}-short_of_memory.json"]


def test_varlen_inputs_give_the_ops_a_unit_head_dim_stride():
    # regression: on the H200 a q/k/v view with head-dim stride 2 reached FlashAttention's varlen op
    from jfa_verify.protocol.adapting import varlen_inputs

    case = Case(kv_lengths=(3, 5), mode="cross", q_lengths=(4, 2), offsets_start=2, q_offsets_start=1,
                layout="head_dim_strided", dtype="float32")
    t = case.materialize("cpu")
    assert t.q.stride(-1) == 2
    call = varlen_inputs(case.problem(t), t.q, t.k, t.v, t.q_offsets, t.k_offsets)
    assert all(x.stride(-1) == 1 for x in (call.q, call.k, call.v))
    assert torch.equal(call.q, t.q[1:]) and torch.equal(call.k, t.k[2:]) and torch.equal(call.v, t.v[2:])
    assert call.cu_q.tolist() == [0, 4, 6] and call.cu_k.tolist() == [0, 3, 8]


@pytest.mark.parametrize("layout", ["misaligned_k", "misaligned_v"])
def test_varlen_inputs_copy_a_view_of_odd_strides_and_keep_aligned_views(layout):
    # FlashAttention's varlen kernels load rows in 16-byte vectors: k or v alone with an odd head stride (a layout
    # the contract allows, drawn since a blind planted bug of 2026-12-06) reaches them copied; aligned views do not
    from jfa_verify.protocol.adapting import varlen_inputs, vector_ready

    case = Case(kv_lengths=(3, 5), num_heads_q=2, num_heads_kv=2, head_dim=16, layout=layout, dtype="bfloat16",
                offsets_start=2)
    t = case.materialize("cpu")
    odd = t.k if layout == "misaligned_k" else t.v
    assert odd.stride()[1] % 2 == 1 and not vector_ready(odd[2:]) and vector_ready(t.q[2:])
    call = varlen_inputs(case.problem(t), t.q, t.k, t.v, t.q_offsets, t.k_offsets)
    assert all(vector_ready(x) for x in (call.q, call.k, call.v))
    assert torch.equal(call.k, t.k[2:]) and torch.equal(call.v, t.v[2:]) and torch.equal(call.q, t.q[2:])
    assert call.q.data_ptr() == t.q[2:].data_ptr()  # an aligned view is passed as it is, not copied


def test_flash_attention_peers_declare_head_dims_in_multiples_of_8():
    # seen on the H200: the raw varlen op rejects other head sizes ("must be a multiple of 8")
    for name in ("torch_fa2_varlen", "torch_varlen_attn"):
        caps = get_kernel(name).capabilities
        assert caps.supports_head_dim(24) and caps.supports_head_dim(256)
        assert not caps.supports_head_dim(33) and not caps.supports_head_dim(20)


def test_matrix_in_a_fresh_process_runs_triton_kernels_on_the_interpreter(tmp_path):
    # regression (new-user trial): the matrix loaded its kernels before selecting the device, so on a CPU-only
    # machine Triton was imported before TRITON_INTERPRET=1 and every triton_jfa cell was an InterpreterError
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "matrix", "--kernel", "triton_jfa", "--max-cases",
                           "2", "--device", "cpu", "--forward-only", "--quiet", "--json", "m.json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cells = json.loads((tmp_path / "m.json").read_text())["cells"]
    assert [c["status"] for c in cells] == ["pass", "pass"], cells


def test_matrix_deadline_is_shared_by_the_kernels_in_turn(tmp_path, monkeypatch):
    # regression (new-user trial): the first kernel could spend the whole --deadline, leaving every cell of
    # the kernels after it "not run", however fast they were
    import time

    from jfa_verify.run.loop import Verifier
    from jfa_verify.workflows.matrix import run_matrix

    given = []

    def fake_verify_all(self, cases, on_result=None, *, deadline=None):
        given.append((self.kernel.name, deadline - time.monotonic()))
        time.sleep(0.2 if self.kernel.name == "triton_jfa" else 0.0)  # the first kernel uses its whole share
        return [None for _ in cases]

    monkeypatch.setattr(Verifier, "verify_all", fake_verify_all)
    kernels = [get_kernel(k) for k in ("triton_jfa", "nested_sdpa", "flex_document_mask")]
    run_matrix(kernels, JOBS_CASES[:1], torch.device("cpu"), reproducers=tmp_path, deadline_s=0.6)
    assert [k for k, _ in given] == ["triton_jfa", "nested_sdpa", "flex_document_mask"]
    first, second, third = (left for _, left in given)
    assert 0.15 < first <= 0.2  # a third of 0.6 s
    assert 0.15 < second <= 0.2  # half of the 0.4 s left, shared by the two still to run
    assert 0.35 < third <= 0.4  # the second took no time: the last kernel gets all that is left


def test_matrix_gives_the_time_fast_kernels_leave_to_the_cells_a_slow_one_did_not_reach(tmp_path, monkeypatch):
    # regression (H200, 2026-12-02): the first kernel's share ran out with 32 cells "not run", the others
    # finished early, and the matrix ended 86 s before its deadline with those cells never revisited
    import time

    from jfa_verify.run.loop import Verifier
    from jfa_verify.workflows.matrix import NOT_RUN, run_matrix

    load_plugin(PLUGIN)
    # the real verdicts, computed before the clock starts: only the paced sleeps spend the deadline
    with Verifier(get_kernel("fa2_like"), "cpu", tmp_path / "real",
                  RunSettings(backward=False, plugins=[str(PLUGIN)])) as v:
        real = {c.case_id(): r for c, r in zip(JOBS_CASES, v.verify_all(JOBS_CASES))}
    calls = []

    def paced_verify_all(self, cases, on_result=None, *, deadline=None):
        calls.append((self.kernel.name, len(cases)))
        out = []
        for case in cases:  # each fa2_like case costs 0.6 s: its first share (1 s) has no room for the third
            if deadline is not None and time.monotonic() >= deadline:
                out.append(None)
                continue
            if self.kernel.name == "fa2_like":
                time.sleep(0.6)
                out.append(real[case.case_id()])
            else:
                # unsupported on the CPU: instant
                out.append(run_case(case, self.kernel, "cpu", RunSettings(backward=False)))
        return out

    monkeypatch.setattr(Verifier, "verify_all", paced_verify_all)
    kernels = [get_kernel("fa2_like"), get_kernel("torch_varlen_attn")]
    m = run_matrix(kernels, JOBS_CASES, torch.device("cpu"), RunSettings(plugins=[str(PLUGIN)], backward=False),
                   reproducers=tmp_path, deadline_s=2.0)
    assert [m.cell("fa2_like", c).status for c in JOBS_CASES] == ["pass", "fail", "error"]
    assert calls[:2] == [("fa2_like", 3), ("torch_varlen_attn", 3)] and [k for k, _ in calls[2:]] == ["fa2_like"]
    assert m.counts("torch_varlen_attn")[NOT_RUN] == 0
    # the cells stay in the cases' order, kernel by kernel, whichever pass ran them
    assert [key for key in m.cells if key[0] == "fa2_like"] == [("fa2_like", c.case_id()) for c in JOBS_CASES]


def test_an_interrupted_matrix_prints_and_writes_the_cells_it_ran_and_exits_130(tmp_path, monkeypatch, capsys):
    """Regression (a new user's trial): a matrix stopped by Ctrl-C after 75 passed cells printed only "jfa-verify
    matrix: interrupted": no table, no summary, and its --json never written. It now keeps the verdicts given, as
    `run`, `fuzz` and `gate` do (SIGTERM is the same KeyboardInterrupt: terminate_as_interrupt)."""
    from jfa_verify.cli import main
    from jfa_verify.run.loop import Verifier

    monkeypatch.chdir(tmp_path)

    def stopped_after_one(self, cases, on_result=None, *, deadline=None):  # one verdict, then Ctrl-C
        on_result(run_case(cases[0], self.kernel, "cpu", RunSettings(backward=False)))
        raise KeyboardInterrupt

    monkeypatch.setattr(Verifier, "verify_all", stopped_after_one)
    code = main(["matrix", "--kernel", "nested_sdpa", "--kernel", "triton_jfa", "--filter", "tile-edges",
                 "--max-cases", "2", "--campaign", "3", "--device", "cpu", "--forward-only", "--json", "m.json",
                 "--quiet", "--reproducers", "r"])
    out, err = capsys.readouterr()
    assert code == 130, out + err
    assert "| case | nested_sdpa | triton_jfa |" in out and "Interrupted (Ctrl-C or SIGTERM): 3 of 4 cells" in out
    assert "jfa-verify matrix: interrupted: 3 of 4 cells not run (report written)" in err
    doc = json.loads(Path("m.json").read_text())
    first = doc["cases"][0]["case_id"]
    assert doc["interrupted"] is True and doc["campaigns"] == {}  # no campaign starts after the stop
    (cell,) = doc["cells"]  # the verdict given before the stop (nested_sdpa's on the CPU), kept
    assert (cell["kernel"], cell["case_id"]) == ("nested_sdpa", first) and cell["status"] != "not run"
    assert sorted((c["kernel"], c["case_id"]) for c in doc["not_run"]) == sorted(
        [("nested_sdpa", doc["cases"][1]["case_id"])] + [("triton_jfa", c["case_id"]) for c in doc["cases"]])
    assert doc["summary"]["triton_jfa"]["counts"]["not run"] == 2


def test_a_hang_or_a_crash_cell_is_a_finding_of_the_matrix():
    # regression (H200, 2026-12-02): cells that hung past --timeout showed "hang" in the table but were left out
    # of the findings and of the per-kernel counts, so a matrix whose only trouble was hangs read as clean
    from jfa_verify.core.exits import ExitCode
    from jfa_verify.workflows.matrix import Cell, Matrix

    hang, crash, ok = JOBS_CASES
    m = Matrix(["k"], [hang, crash, ok])
    m.cells[("k", hang.case_id())] = Cell("k", hang.case_id(), "hang", signature="hang hang",
                                          message="no verdict after 45 s (--timeout); the worker process was killed")
    m.cells[("k", crash.case_id())] = Cell("k", crash.case_id(), "crash", signature="crash SIGSEGV")
    m.cells[("k", ok.case_id())] = Cell("k", ok.case_id(), "pass", headroom=0.1)
    assert sorted(f.signature for f in m.findings()) == ["crash SIGSEGV", "hang hang"] and m.failed
    assert m.exit_code() == ExitCode.CRASH  # as for `run`: a crash before a hang before any other finding
    del m.cells[("k", crash.case_id())]
    assert m.exit_code() == ExitCode.HANG
    assert Matrix.from_dict(m.to_dict()).exit_code() == ExitCode.HANG  # the status survives a --from-json merge
    m.cells[("k", crash.case_id())] = Cell("k", crash.case_id(), "crash", signature="crash SIGSEGV")
    counts = m.counts("k")
    assert (counts["hang"], counts["crash"], counts["pass"]) == (1, 1, 1)
    md = m.to_markdown()
    assert "| kernel | pass | fail | error | crash | hang |" in md and "| k | 1 | 0 | 0 | 1 | 1 |" in md


def test_matrix_refuses_inputs_it_cannot_use_before_any_work(tmp_path, monkeypatch, capsys):
    import importlib.util

    from jfa_verify.cli import main
    from jfa_verify.workflows.matrix import Matrix

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["matrix", "--kernel", "triton_jfa", "--png", str(tmp_path / "m.png")]) == 2
    assert "needs matplotlib" in capsys.readouterr().err and not (tmp_path / "m.png").exists()
    monkeypatch.setattr(importlib.util, "find_spec", real)
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "report.json").write_text(json.dumps({"kernel": "triton_jfa", "results": []}))
    a = Matrix(["triton_jfa"], list(JOBS_CASES[:1]), device="cpu")
    (tmp_path / "a.json").write_text(json.dumps(a.to_dict()))
    (tmp_path / "b.json").write_text(json.dumps(Matrix(["triton_jfa"], [], device="cpu").to_dict()))
    (tmp_path / "c.json").write_text(json.dumps(Matrix(["nested_sdpa"], [], device="cuda").to_dict()))
    for files, message in ((["bad.json"], "not a readable JSON file"), (["report.json"], "not a matrix written by"),
                           (["a.json", "b.json"], "kernel 'triton_jfa' is in matrix 1 and matrix 2"),
                           (["a.json", "c.json"], "different devices")):
        assert main(["matrix", "--from-json", *[str(tmp_path / f) for f in files]]) == 2, files
        assert message in capsys.readouterr().err, files
    # regression (new-user trial): run options beside --from-json were dropped without a word
    assert main(["matrix", "--from-json", str(tmp_path / "a.json"), "--kernel", "nested_sdpa", "--campaign", "5",
                 "--no-isolate"]) == 2
    err = capsys.readouterr().err
    assert "--kernel, --campaign, --isolate would be ignored" in err, err
    main(["matrix", "--from-json", str(tmp_path / "a.json"), "--quiet", "--markdown", str(tmp_path / "a.md")])
    assert "would be ignored" not in capsys.readouterr().err and (tmp_path / "a.md").exists()  # output options apply


def test_a_findings_symptom_is_its_worst_output():
    # regression (new-user trial): the symptom was the first failing output (dq, 3.6x its allowance) while the
    # cell's headroom came from the worst (dv, 11,000x)
    from jfa_verify.workflows.matrix import _symptom

    verdict = ("[FAIL] c: self full bfloat16 on k\n  dq: max abs error 0.00907 > allowance 0.00255 (SDPA 1e-3)\n"
               "      worst at sequence 1, head 0, token 1: kernel 1.0, reference 0.9\n"
               "  dv: max abs error 6.26 > allowance 0.00055 (SDPA 1e-3)\n  replay: jfa-verify replay f.json")
    assert _symptom(verdict).startswith("dv: max abs error 6.26")
    nan = "[FAIL] c\n  o: max abs error 9 > allowance 1 (SDPA 0)\n  dq: 192 NaN value(s) (SDPA 0)"
    assert _symptom(nan) == "dq: 192 NaN value(s) (SDPA 0)"
    assert (_symptom("[ERROR] c\n  kernel raised: RuntimeError: boom\n  replay: x")
            == "kernel raised: RuntimeError: boom")
