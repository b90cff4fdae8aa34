"""The blind catalogue through an older jfa-verify's default suite or campaign: the "before" column of the
kill table (issue 17), on the CPU or a GPU.

The older package is the one first on ``PYTHONPATH`` (build it from the old commit:
``git archive OLD | tar -x -C DIR/src && pip wheel --no-deps -w DIR/whl DIR/src && pip install --no-deps
--target DIR/site DIR/whl/*.whl``). Each mutant runs in its own process (a crash takes only that mutant and
counts as a kill: a crash is a finding), ``--jobs`` at a time; the first failing case kills it. The campaign
stage runs the old package's ``run_campaign`` with seed 0 and no shrinking, stopped at its first failing case.
Rows are written to ``--json`` as they finish (fields as ``jfa-verify mutants --json``, so ``ci/kill_table.py``
reads them), and a SIGTERM keeps the rows already written.

    PYTHONPATH=DIR/site python ci/detection_before.py --stage suite --device cuda --jobs 12 --json before-suite.json
    PYTHONPATH=DIR/site python ci/detection_before.py --stage campaign --examples 200 --device cuda \\
        --json before-campaign.json

Exit 0 when every mutant got a verdict, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

CATALOGUE = Path(__file__).resolve().parents[1] / "tests" / "quality" / "regression_catalogue.json"
FAILING = ("fail", "error", "crash", "hang")


def _one(name: str, stage: str, device: str, examples: int) -> dict:
    from jfa_verify.core.device import select_device
    from jfa_verify.fuzz.mutation import load_catalogue

    select_device(device)
    catalogue = load_catalogue(str(CATALOGUE))
    try:
        catalogue.mutated_source(name) if not catalogue[name].scheduler else None
    except Exception as exc:  # a mutant the old kernel's source cannot take: not judged
        return {"name": name, "status": "skipped", "reason": f"{type(exc).__name__}: {exc}"[:300]}
    kernel = catalogue.kernel_of(name)
    start = time.time()
    if stage == "suite":
        from jfa_verify.checks.suites import get_suite
        from jfa_verify.protocol.registry import get_kernel
        from jfa_verify.run.runner import run_case

        cases = get_suite("default", device, 0, kernel=get_kernel(catalogue.kernel)).cases
        for index, case in enumerate(cases):
            result = run_case(case, kernel, device)
            if result.status in FAILING:
                return {"name": name, "status": "killed", "by": case.name, "cases_run": index + 1,
                        "killing_status": result.status, "seconds": round(time.time() - start, 1)}
        return {"name": name, "status": "survived", "cases_run": len(cases), "seconds": round(time.time() - start, 1)}

    from jfa_verify.fuzz.campaign import run_campaign

    seen = {"cases": 0, "first": None, "status": None}

    def on_event(event):
        if event.get("event") == "case":
            seen["cases"] += 1
            if event.get("status") in FAILING and seen["first"] is None:
                seen["first"], seen["status"] = seen["cases"], event["status"]

    with tempfile.TemporaryDirectory(prefix="jfa-before-campaign-") as corpus:
        summary = run_campaign(kernel, max_examples=examples, corpus_dir=corpus, device=device, seed=0, shrink=False,
                               on_event=on_event, should_stop=lambda: seen["first"] is not None)
    row = {"name": name, "cases_total": summary.cases_run, "seconds": round(time.time() - start, 1)}
    if summary.failures or seen["first"]:
        return {**row, "status": "killed", "cases_run": seen["first"], "killing_status": seen["status"]}
    return {**row, "status": "survived", "cases_run": summary.cases_run}


def _in_process(name: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--one", name, "--stage", args.stage, "--device", args.device,
               "--examples", str(args.examples)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"name": name, "status": "timeout", "reason": f"no verdict in {args.timeout:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if lines:
        return json.loads(lines[-1])
    if done.returncode > 0 and "Traceback" in done.stderr:
        # The framework raised (the H200 run saw the float64 oracle out of memory with 14 mutants at once): the
        # mutant was not judged.
        return {"name": name, "status": "error", "reason": f"exit {done.returncode}: {done.stderr[-300:]}"}
    # The process died of a signal without a verdict: the kernel crashed it (a finding, so a kill).
    return {"name": name, "status": "killed", "killing_status": "crash", "cases_run": None,
            "reason": f"exit {done.returncode}: {done.stderr[-300:]}"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", choices=("suite", "campaign"), required=True)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--examples", type=int, default=200, help="campaign examples per mutant (default 200)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants at a time (default 1)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per mutant (default 1800)")
    parser.add_argument("--json", default=None, help="write the rows here as they finish")
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME", help="only these mutants")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args.one, args.stage, args.device, args.examples)), flush=True)
        return 0
    names = args.only or [mutant["name"] for mutant in json.loads(CATALOGUE.read_text())["mutants"]]
    rows = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(_in_process, name, args) for name in names]
        for future in as_completed(futures):
            row = {**future.result(), "finished_at_utc": time.strftime("%H:%M:%S", time.gmtime())}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1))
    killed = sum(row["status"] == "killed" for row in rows)
    print(f"killed {killed} of {len(rows)}")
    return 0 if all(row["status"] in ("killed", "survived", "skipped") for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
