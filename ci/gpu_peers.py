#!/usr/bin/env python3
"""Peer findings on the H200: ``jfa-verify matrix`` for the project's kernel and four peers, plus the GPU regression
tests of ``tests/corpus/peers/``, under one hard wall-time budget.

Usage (one call, from the repository root)::

    OUT=gpu-out BUDGET=230 python3 ci/gpu_peers.py

What it does, all at once on one GPU (the matrix checks numbers, not speed, so the processes may share it):

* one ``jfa-verify matrix`` process per kernel (``triton_jfa torch_fa2_varlen torch_varlen_attn
  flex_document_mask nested_sdpa``): the default, windows and mha suites (in that order), then a campaign of
  ``CAMPAIGN`` examples that keeps searching after a finding; each with ``--deadline`` (cells and campaign
  cases not started by then are skipped), ``--isolate`` (a crash or a sticky CUDA error is that case's
  finding; the next case gets a fresh worker), ``--jobs JOBS`` (default 3: isolated case workers per kernel,
  so that Triton's compiling on the host overlaps: 5 kernels x 3 workers are 15 case workers on the H200
  machine's 16 cores; the verdicts do not depend on it) and a hard ``timeout`` kill (a peer that hangs
  takes only its own process down; its case files stay in ``$OUT/reproducers``);
* ``pytest -m gpu tests/test_peers_gpu.py`` (the peers' current behaviour on the known findings);
* then merges the per-kernel JSON into ``$OUT/matrix.{json,md,png}`` and packs the reproducers.

Budget: BUDGET seconds in all (default 230: about 4 minutes, flex_attention's compiles included); every
kernel process gets a deadline of ``BUDGET - CASE_TIMEOUT - 15`` s (no case or campaign example starts after
it) and is killed ``CASE_TIMEOUT + 5`` s after it, so a case started just before the deadline can still
finish. Exit status: 0 when every process finished and nothing was found, 1 when there are findings
(expected: the peers have some), 3 when a process was killed at the budget, 2 on a setup error. Progress
lines are printed as they happen.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

# KERNELS="a b" and DEVICE=cpu (a CPU dry run of this script) override these.
KERNELS = os.environ.get("KERNELS",
                         "triton_jfa torch_fa2_varlen torch_varlen_attn flex_document_mask nested_sdpa").split()
DEVICE = os.environ.get("DEVICE", "cuda")
CASE_TIMEOUT = 45  # seconds a case may run (--timeout); a case past it is a hang finding
ROOT = Path(__file__).resolve().parents[1]


def say(msg: str) -> None:
    print(f"[gpu_peers {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def main() -> int:
    out = Path(os.environ.get("OUT", "gpu-out")).resolve()
    budget = float(os.environ.get("BUDGET", "230"))
    campaign = int(os.environ.get("CAMPAIGN", "25"))
    jobs = int(os.environ.get("JOBS", "3"))
    start = time.monotonic()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", TRITON_CACHE_DIR=os.environ.get("TRITON_CACHE_DIR",
                                                                                   str(ROOT / ".triton-cache")))
    # ci/gpu_env.sh installs the carried wheels and the package, and checks the dependencies (one home for it)
    # and its PYTHONPATH (where the carried wheels went) is what the kernel processes get
    install = subprocess.run(["bash", "-c",
                              'source ci/gpu_env.sh && gpu_install "$1" && echo "PYTHONPATH=${PYTHONPATH:-}"',
                              "_", str(out / "logs" / "install.log")], cwd=ROOT, capture_output=True, text=True)
    if install.returncode:
        say("install failed:\n" + install.stdout[-2000:] + install.stderr[-2000:])
        return 2
    env["PYTHONPATH"] = install.stdout.strip().splitlines()[-1].removeprefix("PYTHONPATH=")
    if DEVICE == "cpu":
        env["TRITON_INTERPRET"] = "1"
    import torch

    say(f"torch {torch.__version__}, {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'NO GPU'}; "
        f"budget {budget:.0f} s, campaign {campaign} per kernel, {jobs} case workers per kernel")
    # A case started just before the deadline may run its whole --timeout: the hard kill waits that long.
    deadline = max(30.0, budget - (time.monotonic() - start) - CASE_TIMEOUT - 15)
    procs = {}
    for kernel in KERNELS:
        cmd = [sys.executable, "-m", "jfa_verify.cli", "matrix", "--kernel", kernel, "--suite", "default",
               "--suite", "windows", "--suite", "mha", "--campaign", str(campaign), "--device", DEVICE,
               "--deadline", f"{deadline:.0f}",
               "--timeout", str(CASE_TIMEOUT), "--isolate", "--jobs", str(jobs),
               "--reproducers", str(out / "reproducers"),
               "--json", str(out / f"matrix-{kernel}.json"),
               "--markdown", str(out / f"matrix-{kernel}.md")]
        log = open(out / "logs" / f"matrix-{kernel}.log", "w")
        procs[kernel] = (subprocess.Popen(["timeout", "-k", "5", f"{deadline + CASE_TIMEOUT + 5:.0f}", *cmd],
                                          stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT), log)
        say(f"started {kernel}: {' '.join(cmd[1:])}")
    tests_log = open(out / "logs" / "pytest-gpu.log", "w")
    tests = subprocess.Popen(["timeout", "-k", "5", f"{deadline + CASE_TIMEOUT + 5:.0f}", sys.executable, "-m",
                              "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "tests/test_peers_gpu.py"],
                             stdout=tests_log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    status = {}
    for kernel, (proc, log) in procs.items():
        status[kernel] = proc.wait()
        log.close()
        say(f"{kernel}: exit {status[kernel]} ({'killed at the budget' if status[kernel] in (124, 137) else 'done'}),"
            f" {time.monotonic() - start:.0f} s")
    status["pytest"] = tests.wait()
    tests_log.close()
    say(f"pytest -m gpu tests/test_peers_gpu.py: exit {status['pytest']}; "
        + (Path(tests_log.name).read_text().strip().splitlines() or ["(no output)"])[-1])
    parts = [str(out / f"matrix-{k}.json") for k in KERNELS if (out / f"matrix-{k}.json").is_file()]
    if parts:
        merged = subprocess.run([sys.executable, "-m", "jfa_verify.cli", "matrix", "--from-json", *parts, "--json",
                                 str(out / "matrix.json"), "--markdown", str(out / "matrix.md"), "--png",
                                 str(out / "matrix.png")], capture_output=True, text=True, env=env, cwd=ROOT)
        (out / "logs" / "merge.log").write_text(merged.stdout + merged.stderr)
        print(merged.stdout, flush=True)
    missing = [k for k in KERNELS if str(out / f"matrix-{k}.json") not in parts]
    if missing:
        say(f"no matrix from {missing}: see {out}/logs/matrix-<kernel>.log and the case files in {out}/reproducers")
        for k in missing:
            print(f"--- tail of matrix-{k}.log", flush=True)
            print("\n".join((out / "logs" / f"matrix-{k}.log").read_text().splitlines()[-25:]), flush=True)
    if (out / "reproducers").is_dir():
        with tarfile.open(out / "reproducers.tgz", "w:gz") as tar:
            tar.add(out / "reproducers", arcname="reproducers")
    say(f"wall time {time.monotonic() - start:.0f} s (budget {budget:.0f} s); outputs in {out}")
    if any(code in (124, 137) for code in status.values()):
        return 3
    return 1 if any(code == 1 for code in status.values()) else (0 if not missing else 2)


if __name__ == "__main__":
    sys.exit(main())
