"""Bad input never passes silently: every public function and every CLI argument gets a clear error.

The API set (more than 40 inputs) asserts a jfa-verify error naming the bad value (``name=value``
or the argument's name); the CLI set (more than 60 argument lists) asserts exit status 2, one line on
stderr naming the argument, and no traceback. A property test drives the CLI with random bad values.
"""

from __future__ import annotations

import contextlib
import io
import textwrap
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jfa_verify import Capabilities, Case, JFAError, TileSizes, get_kernel, load_plugin, register_kernel
from jfa_verify.cli import main
from jfa_verify.core.contract import validate_inputs
from jfa_verify.run.settings import RunSettings

OFF = torch.tensor([0, 3, 5], dtype=torch.int32)


def _qkv(tokens=5, h=2, d=16, dtype=torch.float32):
    return tuple(torch.randn(tokens, h, d, dtype=dtype) for _ in range(3))


Q, K, V = _qkv()

# (label, callable, text the error must contain)
API = [
    ("q not a tensor", lambda: validate_inputs([1], K, V, OFF, OFF), "q must be a torch.Tensor"),
    ("q rank 2", lambda: validate_inputs(Q[:, 0], K, V, OFF, OFF), "q must have rank 3"),
    ("k rank 4", lambda: validate_inputs(Q, K[None], V, OFF, OFF), "k must have rank 3"),
    ("int dtype", lambda: validate_inputs(Q.int(), K.int(), V.int(), OFF, OFF), "q.dtype=torch.int32"),
    ("float64", lambda: validate_inputs(Q.double(), K.double(), V.double(), OFF, OFF), "q.dtype=torch.float64"),
    ("mixed dtypes", lambda: validate_inputs(Q, K.half(), V, OFF, OFF), "dtypes differ"),
    ("k/v tokens", lambda: validate_inputs(Q, K, V[:4], OFF, OFF), "k has 5 tokens but v has 4"),
    ("k/v heads", lambda: validate_inputs(Q, K, V[:, :1], OFF, OFF), "v has 1"),
    ("head dims", lambda: validate_inputs(Q, K[..., :8], V, OFF, OFF), "head-dim mismatch"),
    ("H_q not multiple", lambda: validate_inputs(torch.randn(5, 3, 16), K, V, OFF, OFF), "H_q=3 is not a multiple"),
    ("causal string", lambda: validate_inputs(Q, K, V, OFF, OFF, causal="no"), "causal='no'"),
    ("causal int", lambda: validate_inputs(Q, K, V, OFF, OFF, causal=1), "causal=1"),
    ("alignment", lambda: validate_inputs(Q, K, V, OFF, OFF, causal_alignment="diag"), "causal_alignment='diag'"),
    ("sm_scale text", lambda: validate_inputs(Q, K, V, OFF, OFF, sm_scale="abc"), "sm_scale='abc'"),
    ("sm_scale nan", lambda: validate_inputs(Q, K, V, OFF, OFF, sm_scale=float("nan")), "sm_scale=nan"),
    ("sm_scale bool", lambda: validate_inputs(Q, K, V, OFF, OFF, sm_scale=True), "sm_scale=True"),
    ("offsets list", lambda: validate_inputs(Q, K, V, [0, 3, 5], OFF), "q_offsets must be a 1-D"),
    ("offsets float", lambda: validate_inputs(Q, K, V, OFF.float(), OFF), "q_offsets.dtype=torch.float32"),
    ("offsets 2-D", lambda: validate_inputs(Q, K, V, OFF[None], OFF), "q_offsets must be 1-D"),
    ("offsets empty", lambda: validate_inputs(Q, K, V, OFF[:0], OFF), "q_offsets must be 1-D with B + 1 >= 1"),
    ("offsets negative", lambda: validate_inputs(Q, K, V, torch.tensor([-1, 5]), torch.tensor([-1, 5])),
     "k_offsets[0]=-1"),
    ("offsets decreasing", lambda: validate_inputs(Q, K, V, torch.tensor([0, 4, 3, 5]), torch.tensor([0, 4, 3, 5])),
     "not non-decreasing"),
    ("offsets last", lambda: validate_inputs(Q, K, V, torch.tensor([0, 4]), torch.tensor([0, 4])),
     "k_offsets[-1]=4 does not equal the token count 5"),
    ("offsets lengths differ", lambda: validate_inputs(Q, K, V, torch.tensor([0, 5]), OFF), "q_offsets has 2 entries"),
    ("offsets strided", lambda: validate_inputs(Q, K, V, torch.tensor([[0, 0], [3, 3], [5, 5]])[:, 0], OFF),
     "q_offsets is not contiguous"),
    ("hint below", lambda: validate_inputs(Q, K, V, OFF, OFF, max_seqlen_q=2), "max_seqlen_q=2 is below"),
    ("hint text", lambda: validate_inputs(Q, K, V, OFF, OFF, max_seqlen_k="x"), "max_seqlen_k='x'"),
    ("kernel call", lambda: get_kernel("triton_jfa")(Q, K, V, OFF, OFF, causal="yes"), "causal='yes'"),
    ("case negative length", lambda: Case(kv_lengths=(3, -1)), "kv_lengths=(3, -1)"),
    ("case lengths text", lambda: Case(kv_lengths="abc"), "kv_lengths='abc'"),
    ("case length float", lambda: Case(kv_lengths=(1.5,)), "kv_lengths[0]=1.5"),
    ("case q_lengths for self", lambda: Case(kv_lengths=(3,), q_lengths=(3,)), "q_lengths=(3,) is only for"),
    ("case cross without q", lambda: Case(kv_lengths=(3,), mode="cross"), "mode='cross' needs q_lengths"),
    ("case broadcast without L_q", lambda: Case(kv_lengths=(3,), mode="broadcast_q"), "broadcast_q_len"),
    ("case mode", lambda: Case(kv_lengths=(3,), mode="dense"), "mode='dense'"),
    ("case heads 0", lambda: Case(kv_lengths=(3,), num_heads_q=0), "num_heads_q=0"),
    ("case heads text", lambda: Case(kv_lengths=(3,), num_heads_q="4"), "num_heads_q='4'"),
    ("case heads ratio", lambda: Case(kv_lengths=(3,), num_heads_q=3, num_heads_kv=2), "num_heads_q=3"),
    ("case head_dim 0", lambda: Case(kv_lengths=(3,), head_dim=0), "head_dim=0"),
    ("case dtype", lambda: Case(kv_lengths=(3,), dtype="float64"), "dtype='float64'"),
    ("case alignment", lambda: Case(kv_lengths=(3,), causal_alignment="x"), "causal_alignment='x'"),
    ("case causal text", lambda: Case(kv_lengths=(3,), causal="yes"), "causal='yes'"),
    ("case offsets dtype", lambda: Case(kv_lengths=(3,), offsets_dtype="int16"), "offsets_dtype='int16'"),
    ("case offsets start", lambda: Case(kv_lengths=(3,), offsets_start=-2), "offsets_start=-2"),
    ("case offsets layout", lambda: Case(kv_lengths=(3,), offsets_layout="sparse"), "offsets_layout='sparse'"),
    ("case values", lambda: Case(kv_lengths=(3,), values="zeros"), "values='zeros'"),
    ("case layout", lambda: Case(kv_lengths=(3,), layout="tiled"), "layout='tiled'"),
    ("case seed", lambda: Case(kv_lengths=(3,), seed=-1), "seed=-1"),
    ("case sm_scale", lambda: Case(kv_lengths=(3,), sm_scale="big"), "sm_scale='big'"),
    ("case from list", lambda: Case.from_dict([1, 2]), "got a list"),
    ("case from empty", lambda: Case.from_dict({}), "a case needs kv_lengths"),
    ("case unknown field", lambda: Case.from_dict({"kv_lengths": [1], "heads": 2}), "unknown case fields ['heads']"),
    ("case bad json", lambda: Case.from_json("{kv"), "does not parse"),
    ("capabilities dtypes", lambda: Capabilities(dtypes=(torch.int8,)), "Capabilities dtypes"),
    # (regression, a new user's trial: a dtype's name was told to be one of the names listed)
    ("capabilities dtype names", lambda: Capabilities(dtypes=("float32",)),
     "'float32' is a name: give torch.float32"),
    ("capabilities head dims", lambda: Capabilities(min_head_dim=64, max_head_dim=32), "min_head_dim=64"),
    ("capabilities modes", lambda: Capabilities(modes=("dense",)), "Capabilities modes"),
    ("capabilities lse base", lambda: Capabilities(lse_base="10"), "lse_base='10'"),
    ("capabilities devices", lambda: Capabilities(device_types=("tpu",)), "device_types"),
    ("tile sizes", lambda: TileSizes(0, 16), "block_m=0"),
    ("kernel name", lambda: register_kernel("my kernel", capabilities=Capabilities()), "name='my kernel'"),
    ("kernel capabilities", lambda: register_kernel("k", capabilities={"dtypes": []}),
     "is not a jfa_verify.Capabilities"),
    ("unknown kernel", lambda: get_kernel("flash_typo"), "no kernel named 'flash_typo'"),
    ("plugin missing", lambda: load_plugin("/nonexistent/plugin.py"), "does not exist"),
]


@pytest.mark.parametrize("label, call, text", API, ids=[a[0] for a in API])
def test_api_bad_input_is_a_clear_error(label, call, text):
    with pytest.raises(JFAError) as info:
        call()
    assert text in str(info.value), str(info.value)


def test_api_set_is_large_enough():
    assert len(API) >= 40


@pytest.fixture
def broken_plugins(tmp_path):
    syntax = tmp_path / "syntax.py"
    syntax.write_text("x = 1\ndef broken(:\n")
    missing = tmp_path / "imports.py"
    missing.write_text("import os\n\nimport not_a_module_anywhere  # line 3\n")
    raises = tmp_path / "raises.py"
    raises.write_text(textwrap.dedent("""
        from jfa_verify import Capabilities, register_kernel
        register_kernel("x", capabilities=Capabilities(head_dims=(1,), lse_base="ten"))
    """))
    return syntax, missing, raises


def test_plugin_errors_name_the_file_and_line(broken_plugins):
    syntax, missing, raises = broken_plugins
    for path, where, what in ((syntax, f"{syntax}:2", "SyntaxError"), (missing, f"{missing}:3", "ModuleNotFoundError"),
                              (raises, f"{raises}:3", "lse_base='ten'")):
        with pytest.raises(JFAError) as info:
            load_plugin(path)
        assert where in str(info.value) and what in str(info.value), str(info.value)


def _cli(argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    return rc, err.getvalue()


def _cli_cases(tmp_path, broken_plugins):
    folder = tmp_path / "a-folder"
    folder.mkdir(exist_ok=True)
    afile = tmp_path / "a-file.txt"
    afile.write_text("x")
    case_list = tmp_path / "list.json"
    case_list.write_text("[1, 2]")
    bad_case = tmp_path / "bad-case.json"
    bad_case.write_text('{"format": "jfa-verify-case/1", "case": {"kv_lengths": "abc"}}')
    nofield = tmp_path / "nofield.json"
    nofield.write_text('{"format": "jfa-verify-case/1", "case": {"mode": "self"}}')
    syntax, missing, raises = broken_plugins
    nodir = str(tmp_path / "no" / "such" / "dir" / "x.json")
    empty = tmp_path / "registers_nothing.py"
    empty_records = tmp_path / "empty.jsonl"
    empty_records.write_text("")
    empty.write_text("import jfa_verify  # forgot the @register_kernel\n")
    return [
        (["run", "--plugin", str(empty), "--kernel", "mine"], f"plugin {empty} registered no kernel"),
        (["run", "--timeout", "-1"], "--timeout"), (["run", "--timeout", "0"], "--timeout"),
        (["run", "--timeout", "abc"], "--timeout"), (["run", "--timeout", "nan"], "--timeout"),
        (["run", "--max-cases", "-1"], "--max-cases"), (["run", "--max-cases", "0"], "--max-cases"),
        (["run", "--max-cases", "2.5"], "--max-cases"), (["run", "--seed", "-3"], "--seed"),
        (["run", "--seed", "x"], "--seed"), (["run", "--report", str(folder)], "--report"),
        (["run", "--report", nodir], "--report"), (["run", "--reproducers", str(afile)], "--reproducers"),
        # a folder that takes no new file (a new user's /proc/r.json: a traceback after the whole run)
        (["run", "--report", "/proc/r.json"],
         "--report: /proc/r.json: cannot create a file in '/proc': the system refused it"),
        (["run", "--plugin", str(tmp_path / "missing.py")], "--plugin"),
        (["run", "--plugin", str(syntax)], "syntax.py:2"),
        (["run", "--plugin", str(missing)], "imports.py:3"), (["run", "--plugin", str(raises)], "raises.py"),
        (["run", "--device", "tpu"], "--device"), (["run", "--kernel", "nope"], "nope"),
        (["run", "--suite", "nope"], "suite='nope'"), (["run", "--filter", "no-such-case-name", "--report",
                                                         str(tmp_path / "r.json")], "--filter"),
        (["run", "--bogus"], "--bogus"), (["gate", "--replay", str(tmp_path / "none")], "--replay"),
        (["run", "--filter", ""], "--filter: '' is empty"),
        (["fuzz", "--max-examples", "0"], "--max-examples"), (["fuzz", "--max-examples", "-5"], "--max-examples"),
        (["fuzz", "--max-examples", "ten"], "--max-examples"), (["fuzz", "--timeout", "-2"], "--timeout"),
        (["fuzz", "--seed", "-1"], "--seed"), (["fuzz", "--reproducers", str(afile)], "--reproducers"),
        (["fuzz", "--kernel", "nope"], "nope"), (["fuzz", "--gpus", "0"], "--gpus 0: this campaign runs on cpu"),
        (["replay"], "exactly one"), (["replay", str(tmp_path / "missing.json")], "file"),
        (["replay", str(case_list)], "not a jfa-verify case file"), (["replay", str(bad_case)], "kv_lengths='abc'"),
        (["replay", str(nofield)], "kv_lengths"), (["replay", "--case", "{}"], "kv_lengths"),
        (["replay", "--case", "[1]"], "list"), (["replay", "--case", "{oops"], "does not parse"),
        (["replay", "--case", '{"kv_lengths": [3], "dtype": "float64"}'], "dtype='float64'"),
        (["replay", "--case", '{"kv_lengths": [3]}', "--kernel", "nope"], "nope"),
        (["replay", str(bad_case), "--case", "{}"], "exactly one"),
        (["calibrate", "--cases", "0"], "--cases"), (["calibrate", "--cases", "-5"], "--cases"),
        (["calibrate", "--deadline", "0"], "--deadline"), (["calibrate", "--safety", "-1"], "--safety"),
        (["calibrate", "--records", nodir], "--records"), (["calibrate", "--records", str(folder)], "--records"),
        (["calibrate", "--out", nodir], "--out"), (["calibrate", "--from-records", str(tmp_path / "x.jsonl")],
                                                    "--from-records"),
        (["calibrate", "--dtypes", "float64"], "--dtypes"), (["calibrate", "--min-cases", "0"], "--min-cases"),
        (["calibrate", "--against", str(tmp_path / "b.json")], "--against"),
        (["report", str(tmp_path / "missing.jsonl")], "records"), (["report"], "records"),
        (["refloor", str(afile)], "--out"), (["refloor", str(afile), "--out", str(folder)], "--out"),
        # (a new user's trial, 2026-12-07: an empty records file was "0 records ... wrote" and exit 0)
        (["refloor", str(empty_records), "--out", str(tmp_path / "o.jsonl")], "no calibration records to refloor"),
        (["schedule", "--lengths", "a,b"], "--lengths"), (["schedule", "--lengths", "3,-1"], "--lengths"),
        (["schedule", "--batch", "0"], "--batch"), (["schedule", "--num-sms", "0"], "--num-sms"),
        (["schedule", "--block-m", "-64"], "--block-m"), (["schedule", "--png", nodir], "--png"),
        (["schedule", "--distribution", "zipf"], "--distribution"),
        (["run", "--jobs", "2", "--no-isolate"], "--no-isolate"),
        (["mutants", "--jobs", "0"], "--jobs"), (["mutants", "--only", "no_such_mutant"], "no_such_mutant"),
        (["mutants", "--catalogue", str(tmp_path / "nope.json")], "catalogue"),
        (["mutants", "--max-examples", "-1"], "--max-examples"), (["mutants", "--json", nodir], "--json"),
        (["kernels", "--plugin", str(syntax)], "syntax.py:2"),
        (["gate", "--reruns", "1"], "--reruns"), (["gate", "--checks", "bogus"], "--checks"),
        (["gate", "--campaign-examples", "0"], "--campaign-examples"), (["gate", "--kernel", "nope"], "nope"),
        (["gate", "--perf-baseline", str(afile)], "performance baseline"),
        (["gate", "--sanitizer", "asan"], "--sanitizer"), (["gate", "--replay", str(afile)], "--replay"),
        (["gate", "--checks", "suite", "perf"], "--checks perf needs"),  # (it ran the suite first: helper-67)
        (["frobnicate"], "frobnicate"),
    ]


def test_cli_bad_arguments_exit_2_with_one_line_naming_them(tmp_path, broken_plugins):
    cases = _cli_cases(tmp_path, broken_plugins)
    assert len(cases) >= 60
    for argv, name in cases:
        if argv[0] in ("run", "fuzz", "replay", "calibrate", "mutants", "gate") and "--device" not in argv:
            argv = argv + ["--device", "cpu"]
        rc, err = _cli(argv)
        lines = [line for line in err.splitlines() if line.strip()]
        assert rc == 2, (argv, rc, err)
        assert "Traceback" not in err, (argv, err)
        assert len(lines) == 1 and name in lines[0], (argv, err)


OPTIONS = {  # option -> a parser of values it must refuse
    ("run", "--timeout"): st.sampled_from(["-1", "0", "abc", "inf", "-0.5", ""]),
    ("run", "--max-cases"): st.sampled_from(["0", "-1", "1.5", "x"]),
    ("run", "--seed"): st.sampled_from(["-1", "seed", "0.5"]),
    ("fuzz", "--max-examples"): st.sampled_from(["0", "-3", "many"]),
    ("fuzz", "--timeout"): st.sampled_from(["0", "-9", "never"]),
    ("calibrate", "--cases"): st.sampled_from(["0", "-1", "some"]),
    ("calibrate", "--safety"): st.sampled_from(["0", "-2", "safe"]),
    ("schedule", "--batch"): st.sampled_from(["0", "-4", "b"]),
    ("schedule", "--lengths"): st.text(alphabet="ab,-.", min_size=1, max_size=6).filter(lambda s: s.strip()),
    ("gate", "--reruns"): st.sampled_from(["0", "1", "-1", "twice"]),
    ("mutants", "--jobs"): st.sampled_from(["0", "-1", "all"]),
}


@settings(max_examples=40, deadline=None, database=None)
@given(data=st.data())
def test_cli_refuses_random_bad_values_cleanly(data):
    command, option = data.draw(st.sampled_from(sorted(OPTIONS)))
    value = data.draw(OPTIONS[(command, option)])
    rc, err = _cli([command, f"{option}={value}"])
    assert rc == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and option in lines[0], err


def test_an_option_given_a_lone_double_dash_is_refused_not_dropped():
    # regression (found by the test above): argparse strips "--" from `--lengths=--`, so `schedule` ran on its default
    # MovieLens lengths and exited 0, and `fuzz --max-examples=--` took an empty list for a count
    for argv in (["schedule", "--lengths=--"], ["fuzz", "--max-examples=--"], ["run", "--report=--"]):
        rc, err = _cli(argv)
        option = argv[1].split("=")[0]
        assert rc == 2 and "Traceback" not in err, (argv, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and f"argument {option}: '--' is not a value" in lines[0], (argv, err)


def test_run_case_takes_a_kernel_name_and_names_a_bad_device_with_the_fix():
    """Regression (issue 43, 11): ``run_case(case, "my_jfa", "cpu")`` raised ``AttributeError: 'str' object has no
    attribute 'name'``, and ``run_case(case, k, "gpu")`` torch's own device-string error."""
    from jfa_verify import run_case
    from jfa_verify.core.errors import InvalidInput, UnknownKernel

    case = Case(kv_lengths=(3, 5), head_dim=16, dtype="float32")
    register_kernel("named_in_run_case", capabilities=Capabilities(backward=False))(lambda: _reference_forward)
    result = run_case(case, "named_in_run_case", "cpu", RunSettings(backward=False))
    assert (result.kernel, result.status) == ("named_in_run_case", "pass"), result.message
    with pytest.raises(InvalidInput, match=r"device='gpu' is not a device; give 'cuda' \(or 'cuda:N'\) for a GPU, "
                                           r"or 'cpu'"):
        run_case(case, get_kernel("triton_jfa"), "gpu")
    with pytest.raises(InvalidInput, match="device='meta' is a meta device: jfa-verify runs on CPU and CUDA"):
        run_case(case, "named_in_run_case", "meta")
    with pytest.raises(UnknownKernel, match="no kernel named 'not_registered'"):
        run_case(case, "not_registered", "cpu")
    if not torch.cuda.is_available():  # (a new user's run_case on "cuda" without a GPU: an "error" verdict)
        with pytest.raises(InvalidInput, match="device='cuda' but torch sees no CUDA device here; give 'cpu'"):
            run_case(case, "named_in_run_case", "cuda")
    with pytest.raises(InvalidInput, match="kernel=3 is a int: give a registered kernel's name"):
        run_case(case, 3, "cpu")


def _reference_forward(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
    from jfa_verify.oracles import reference_attention

    ref = reference_attention(validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal,
                                              causal_alignment=causal_alignment, sm_scale=sm_scale), q, k, v)
    return ref["o"].to(q.dtype), ref["lse"].float()


def test_a_suite_seed_out_of_range_names_the_option_and_its_range():
    """Regression (a new user's trial): `run --seed 10000000000000000` said "seed=10000000000000000000 must be in
    [0, 2**63)": a case's seed, 1000x the one typed, which was inside the range it named."""
    from jfa_verify.checks.suites import MAX_SUITE_SEED, get_suite
    from jfa_verify.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match=rf"--seed 10000000000000000 is out of range: .*\[0, {MAX_SUITE_SEED}\]"):
        get_suite("default", "cpu", 10**16)
    with pytest.raises(InvalidInput, match="--seed -1 is out of range"):
        get_suite("default", "cpu", -1)
    for name in ("default", "jagged-grid"):  # the largest seed allowed builds every case
        assert get_suite(name, "cpu", MAX_SUITE_SEED).cases


def test_a_device_fault_on_offsets_outside_the_contract_is_an_error_not_a_rejection(monkeypatch):
    """Regression: any exception on strided offsets (outside the contract: rejecting them is allowed) passed as a
    rejection, a CUDA illegal-address fault of a kernel that read them out of bounds included."""
    import jfa_verify.run.runner as runner
    from jfa_verify import run_case
    from jfa_verify.run.runner import sticky_device_error

    message = {}

    def forward(q, k, v, q_offsets, k_offsets, **kw):
        if q_offsets.is_contiguous():
            return _reference_forward(q, k, v, q_offsets, k_offsets, **kw)
        raise message["error"]

    register_kernel("rejects_strided_offsets", capabilities=Capabilities(backward=False))(lambda: forward)
    case = Case(kv_lengths=(3, 5), head_dim=16, dtype="float32", offsets_layout="strided")

    def verdict():
        result = run_case(case, "rejects_strided_offsets", "cpu", RunSettings(backward=False))
        return result.status, result.message

    message["error"] = ValueError("q_offsets must be contiguous")
    status, text = verdict()
    assert status == "pass" and text.startswith("kernel rejected offsets outside the contract (strided): ValueError: "
                                                "q_offsets must be contiguous"), text
    message["error"] = RuntimeError("CUDA error: an illegal memory access was encountered")
    status, text = verdict()
    assert status == "error" and text.startswith("RuntimeError: CUDA error: an illegal memory access"), text

    def faulted(device):  # a launch before the raise faulted: the next synchronize reports it
        raise RuntimeError("CUDA error: unspecified launch failure")

    message["error"] = ValueError("q_offsets must be contiguous")
    monkeypatch.setattr(runner, "_sync", faulted)
    status, text = verdict()
    assert status == "error" and text.startswith("ValueError: q_offsets must be contiguous; then the device failed: "
                                                 "RuntimeError: CUDA error: unspecified launch failure"), text
    assert sticky_device_error(text)  # a worker that saw it is restarted


def test_a_kernel_raising_on_broadcast_q_is_told_what_that_mode_is_and_how_to_opt_out():
    """A new user's kernel, written for packed Q and registered with the default capabilities (broadcast-Q taken),
    raised ``AttributeError`` on ``q_offsets=None`` with no word on why; the verdict now says what that case is and
    how a kernel declares it does not take it. A raise on a packed case gets no such hint."""
    from jfa_verify.run.runner import run_case

    @register_kernel("packed_q_only_naive", capabilities=Capabilities(backward=False))
    def load():
        def forward(q, k, v, q_offsets, k_offsets, **kwargs):
            q_offsets.tolist()  # (None under broadcast-Q)
            raise RuntimeError("planted: every call fails")
        return forward

    broadcast = run_case(Case(kv_lengths=(5, 3), mode="broadcast_q", broadcast_q_len=4), "packed_q_only_naive", "cpu",
                         RunSettings(backward=False))
    assert broadcast.status == "error" and "AttributeError" in broadcast.message
    assert "modes=('self', 'cross')" in broadcast.message and "q_offsets=None" in broadcast.message
    packed = run_case(Case(kv_lengths=(5, 3)), "packed_q_only_naive", "cpu", RunSettings(backward=False))
    assert packed.status == "error" and "RuntimeError" in packed.message and "modes=" not in packed.message

    @register_kernel("no_fp16_naive", capabilities=Capabilities(backward=False))
    def load_no_fp16():
        def forward(q, k, v, q_offsets, k_offsets, **kwargs):
            raise RuntimeError("fp16 not implemented yet")
        return forward

    # another cause on a broadcast-Q case: no word of that mode (helper-69's kernel without fp16 was told of it)
    other = run_case(Case(kv_lengths=(5, 3), mode="broadcast_q", broadcast_q_len=4, dtype="float16"), "no_fp16_naive",
                     "cpu", RunSettings(backward=False))
    assert other.status == "error" and "fp16 not implemented" in other.message and "modes=" not in other.message


@pytest.mark.parametrize("command", [["run", "--max-cases", "1"], ["gate", "--checks", "suite"],
                                     ["fuzz", "--max-examples", "1"], ["stress"]])
def test_a_plugin_that_registers_kernels_needs_kernel_named(tmp_path, capsys, command):
    """A new user's CI line loaded their plugin and forgot --kernel: the command checked the built-in triton_jfa
    instead, and passed (helper-67). Without --kernel, a --plugin that registers kernels is now a usage error naming
    them, before any work; the built-in stays the default where the plugins register none."""
    plugin = tmp_path / "mine.py"
    plugin.write_text("from jfa_verify import Capabilities, register_kernel\n\n"
                      "@register_kernel('forgot_to_name_me', capabilities=Capabilities(backward=False))\n"
                      "def load():\n    raise AssertionError('not to be loaded')\n")
    rc = main([*command[:1], "--device", "cpu", "--plugin", str(plugin), *command[1:],
               "--reproducers", str(tmp_path / "r")] + (["--json", str(tmp_path / "g.json")] if command[0] == "gate"
                                                       else []))
    err = capsys.readouterr().err
    assert rc == 2 and "--plugin registers forgot_to_name_me, and no --kernel was given" in err, err
    assert "--kernel forgot_to_name_me" in err and not (tmp_path / "g.json").exists()


def test_a_plugin_that_registers_no_kernel_keeps_the_default_kernel(tmp_path, capsys):
    from jfa_verify.cli.context import Context

    patch_only = tmp_path / "patches.py"
    patch_only.write_text("import jfa_verify  # a plugin may only patch things\n")
    ctx = Context(command="run", device_choice="cpu", plugins=(str(patch_only),), kernel_default="triton_jfa")
    assert ctx.kernel_name == "triton_jfa"
    named = Context(command="run", device_choice="cpu", plugins=(str(patch_only),), kernel_names=("x",),
                    kernel_default="triton_jfa")
    assert named.kernel_name == "x"


@pytest.mark.parametrize("command", [["run"], ["fuzz"], ["stress"], ["calibrate"], ["replay"], ["findings"],
                                     ["bisect", "--repo", ".", "--good", "a", "--bad", "b"]])
def test_a_second_kernel_on_a_command_that_checks_one_is_refused_naming_both(command):
    """A new user's ``run --plugin p.py --kernel A --kernel B`` checked B alone (argparse kept the last value), saying
    only "kernel B, suite default". A second, different --kernel on a command that uses one is now a usage error
    naming both values and the fix, before any work; gate and matrix still take several."""
    from jfa_verify.cli import build_parser

    rc, err = _cli([*command, "--kernel", "kernel_a", "--kernel", "kernel_b"])
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "argument --kernel: given twice (kernel_a and kernel_b)" in lines[0], err
    assert "give one --kernel" in lines[0], err
    if command[0] in ("run", "fuzz", "stress", "calibrate", "replay"):
        assert "`jfa-verify gate` checks several" in lines[0], err
    parser = build_parser()
    assert parser.parse_args([*command, "--kernel", "kernel_a", "--kernel", "kernel_a"]).kernel == "kernel_a"
    for several in ("gate", "matrix"):
        assert parser.parse_args([several, "--kernel", "kernel_a", "--kernel", "kernel_b"]).kernel == ["kernel_a",
                                                                                                      "kernel_b"]


@pytest.mark.parametrize("command", [["run"], ["calibrate"], ["bisect", "--good", "HEAD", "--bad", "HEAD"]])
def test_a_second_suite_on_a_command_that_runs_one_is_refused_naming_both(command):
    """As a second --kernel was (helper-70, 2026-12-07): ``run --suite default --suite windows`` ran the windows suite
    alone, keeping the last value silently; matrix still takes several."""
    from jfa_verify.cli import build_parser

    rc, err = _cli([*command, "--suite", "default", "--suite", "windows"])
    assert rc == 2 and "argument --suite: given twice (default and windows)" in err and "Traceback" not in err, err
    assert "give one --suite" in err and "`jfa-verify matrix` runs several" in err, err
    assert build_parser().parse_args(["matrix", "--suite", "default", "--suite", "windows"]).suite == ["default",
                                                                                                       "windows"]


def test_an_output_path_under_a_regular_file_names_the_file_for_folders_and_files_alike(tmp_path):
    """Regression (a new user's trial): ``--reproducers afile/repro`` said "parent folder '.../afile' does not exist",
    while ``--report afile/r.json`` said "is a file, not a folder": one shared check now names the file in the way, at
    any depth, and only a folder truly missing is called missing."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    missing = tmp_path / "missing"
    for option, value, words in [
            ("--reproducers", afile / "repro", f"{str(afile)!r} is a file, not a folder; give a new folder inside"),
            ("--reproducers", afile / "a" / "repro", f"{str(afile)!r} is a file, not a folder"),
            ("--report", afile / "r.json", f"{str(afile)!r} is a file, not a folder; give a file in a folder"),
            ("--report", afile / "a" / "r.json", f"{str(afile)!r} is a file, not a folder"),
            ("--reproducers", missing / "repro", f"folder {str(missing)!r} does not exist; create it first"),
            ("--report", missing / "r.json", f"folder {str(missing)!r} does not exist; create it first")]:
        rc, err = _cli(["run", "--device", "cpu", option, str(value)])
        lines = [line for line in err.splitlines() if line.strip()]
        assert rc == 2 and len(lines) == 1 and f"argument {option}: {value}: {words}" in lines[0], (option, err)
        assert "does not exist" not in err or "afile" not in err, err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this machine")
def test_a_report_that_cannot_be_written_before_any_case_is_a_usage_error(tmp_path, capsys):
    """Regression (helper-69's trial, 2026-12-07): ``run --report /dev/full`` was an internal error (exit 70, a
    traceback, "report it to the maintainers"): a full disk is the machine's, not a bug. Before any case runs it is a
    usage error naming the path and why."""
    rc = main(["run", "--device", "cpu", "--max-cases", "1", "--report", "/dev/full", "--reproducers",
               str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--report /dev/full: cannot be written (No space left on device)" in err, err
    assert "internal error" not in err and "Traceback" not in err, err
