"""``benchmarks/sweep_triton_config.py`` on the CPU: its launch options reach the call path, and its rows run."""

from __future__ import annotations

import pytest
import torch

from tests.test_bench_e2e import BENCH


@pytest.fixture
def sweep(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import sweep_triton_config

    yield sweep_triton_config
    sweep_triton_config.install(None)


def test_a_configuration_replaces_the_launch_options_of_cuda_calls_and_is_undone(sweep):
    from jfa_verify.core.contract import JaggedProblem
    from jfa_verify.kernels.triton_jfa import _host
    from jfa_verify.protocol.kernel import TileSizes

    cuda = JaggedProblem.of_shape(128, None, torch.bfloat16, "cuda")
    cpu = JaggedProblem.of_shape(128, None, torch.bfloat16, "cpu")
    own_cuda, own_cpu = _host.launch_config(cuda), _host.launch_config(cpu)
    sweep.install(sweep.CONFIGS["m128n64w8"])
    cfg = _host.launch_config(cuda)  # (the call path reads the module's launch_config at each call)
    assert (cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["num_warps"], cfg["tiles"]) == (128, 64, 8, TileSizes(128, 64))
    assert cfg["BLOCK_D"] == own_cuda["BLOCK_D"]  # what the configuration does not name stays the kernel's
    assert _host.launch_config(cpu) == own_cpu  # the interpreter's tiles are the suite's: never swept
    sweep.install(None)
    assert _host.launch_config(cuda) == own_cuda


def test_cpu_smoke_run_prints_a_checked_row_per_configuration(sweep, capsys):
    assert sweep.main(["--device", "cpu", "--configs", "current,m64n64w8", "--batches", "uniform-32",
                       "--causal", "true"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("uniform-32") and "triton_jfa" in line]
    assert len(rows) == 2 and not any("WRONG" in r or "error" in r for r in rows), out
    assert "== current" in out and "== m64n64w8" in out


def test_an_unknown_configuration_is_a_usage_error(sweep, capsys):
    with pytest.raises(SystemExit) as exit_:
        sweep.main(["--configs", "m999"])
    assert exit_.value.code == 2 and "m999" in capsys.readouterr().err
