"""Calibrating the budget table from measured error distributions.

Three steps, each usable alone so that a long GPU sampling run can be split
over processes and fitted afterwards:

1. :func:`sample` runs drawn cases through a kernel and both oracles and
   appends one :class:`Record` per case to a JSON-lines file (flushed per case,
   so a killed or timed-out run keeps what it measured). A record keeps each
   output's raw numbers: the kernel's error ``e``, the SDPA error ``s`` and the
   three floor terms before their constants ``(f1, f2, f3)``, so any table can
   be applied to it later.
2. :func:`fit` proposes a table. Under a table with constants
   ``(k, a, b, c)`` the multiplier of the floor constants at which a case
   passes exactly is ``m = max(0, e - k s) / (a f1 + b f2 + c f3)``; the fitted
   row scales ``a, b, c`` by ``max(safety * max m, min_multiplier)`` (the
   ratios between the floor terms come from the error model in
   :mod:`jfa_verify.judge.compare`, the scale from the data; ``k`` stays the
   FlashAttention tests' 2).
3. :func:`evaluate` applies a table to records (ideally others than those it
   was fitted on: a held-out set) and counts the failures of the correct
   kernel, the false failures, with the headroom distribution.
"""

from __future__ import annotations

import datetime
import gzip
import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from jfa_verify.judge.budgets import Budget, BudgetTable, headroom
from jfa_verify.judge.compare import OUTPUTS

__all__ = ["Record", "needed_multiplier", "record_headroom", "sample", "read_records", "write_records", "refloor",
           "fit", "evaluate", "RowStats"]


@dataclass(frozen=True)
class Record:
    """One calibration case: its budget row, shape summary and per-output raw numbers.

    ``outputs[name] = (kernel_error, sdpa_error, f1, f2, f3)``, absolute errors in the
    output's units; ``problems[name]`` names a non-finite mismatch (always a failure).
    """

    row: str
    kernel: str
    seed: int
    case: dict
    outputs: dict
    problems: dict = field(default_factory=dict)
    device: str = ""
    environment: dict = field(default_factory=dict)  # {"torch": version, "triton": version}
    seconds: dict = field(default_factory=dict)  # wall time: {"kernel", "reference", "sdpa", ..., "case"}, throughput

    def to_json(self) -> str:
        return json.dumps({"row": self.row, "kernel": self.kernel, "seed": self.seed, "device": self.device,
                           "environment": self.environment, "case": self.case, "outputs": self.outputs,
                           "problems": self.problems, "seconds": self.seconds}, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict) -> "Record":
        """Raises KeyError, TypeError or ValueError for a dict that is not a record."""
        outputs = {k: tuple(float(x) for x in v) for k, v in d["outputs"].items()}
        for name, numbers in outputs.items():
            if name not in OUTPUTS:
                raise ValueError(f"output {name!r} is not one of {OUTPUTS}")
            if len(numbers) != 5:
                raise ValueError(f"output {name!r} has {len(numbers)} numbers, not (e, s, f1, f2, f3)")
        return cls(d["row"], d["kernel"], int(d["seed"]), d["case"], outputs, d.get("problems", {}),
                   d.get("device", ""), d.get("environment", {}), d.get("seconds", {}))


def needed_multiplier(numbers: Sequence[float], budget: Budget) -> float:
    """:meth:`Budget.needed_multiplier` of raw numbers ``(kernel_error, sdpa_error, f1, f2, f3)``."""
    return budget.needed_multiplier(numbers[0], numbers[1], numbers[2:])


def record_headroom(numbers: Sequence[float], budget: Budget) -> float:
    """``kernel_error / allowance`` for raw numbers, as :attr:`OutputComparison.headroom` (above 1 fails)."""
    return headroom(numbers[0], budget.allowance(numbers[1], numbers[2:]))


def _case_summary(case) -> dict:
    q = case.query_lengths
    return {
        "batch": case.batch, "max_seqlen_q": max(q, default=0), "max_seqlen_k": max(case.kv_lengths, default=0),
        "tokens_q": int(sum(q)), "tokens_k": int(sum(case.kv_lengths)), "head_dim": case.head_dim,
        "head_dim_v": case.dv, "heads_q": case.num_heads_q, "heads_kv": case.num_heads_kv,
        "causal": case.causal, "mode": case.mode, "values": case.values, "dtype": case.dtype,
        "full": case.to_dict(),  # replay with jfa-verify replay --case '<this JSON>'
    }


class _Deadline(BaseException):
    """Stops a sampling run at its deadline (a BaseException so Hypothesis does not treat it as a failure)."""


def sample(kernel, *, device, dtypes: Iterable[str], cases_per_dtype: int, seed: int, records: Path,
           deadline_s: Optional[float] = None, progress_every: int = 0, fixed_cases: Sequence = (),
           window: Optional[bool] = None) -> dict:
    """Append one :class:`Record` per drawn case to ``records`` (JSON lines), per dtype.

    Args:
        kernel: a registered kernel (its ``capabilities.tf32`` selects the ``float32-tf32`` row).
        device: a torch device. dtypes: case dtype names, drawn by Hypothesis within one campaign.
        cases_per_dtype: the campaign draws ``cases_per_dtype * len(dtypes)`` examples.
        seed: Hypothesis seed. records: file appended to, flushed after every case.
        deadline_s: stop drawing after this many seconds (wall clock, whole call); None for no limit.
        progress_every: print a line every this many cases (0: quiet).
        fixed_cases: :class:`jfa_verify.cases.case.Case` objects run first (those of ``dtypes`` only), for
            example a suite's long sequences, which Hypothesis rarely draws.
        window: draw only windowed cases (True), none (False), or as the strategy does (None; windows
            only for a kernel that declares them). The budget rows do not depend on the mask.

    Returns: ``{"cases": {dtype: n}, "errors": [message, ...], "seconds": s, "records": [Record, ...],
    "spent": {part: s}}`` (this call's records only; the file may hold earlier ones; ``spent`` splits
    the wall time into kernel (compiles included), oracles, whole cases and drawing); a case whose
    kernel raised is an error, not a sample (and not a record).
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    from jfa_verify.judge.budgets import precision_of
    from jfa_verify.run.runner import run_case
    from jfa_verify.strategies import cases

    start = time.monotonic()
    counts: dict = defaultdict(int)
    errors: list[str] = []
    sampled: list[Record] = []
    tf32 = bool(getattr(kernel.capabilities, "tf32", False))
    device_name = device_description(device)
    from jfa_verify.run.corpus import environment as process_environment

    environment = {key: process_environment()[key] for key in ("torch", "triton")}
    environment["kernel_source"] = kernel_source_hash(kernel)  # ties the records to the code they measured
    records = Path(records)
    records.parent.mkdir(parents=True, exist_ok=True)
    dtypes = list(dtypes)

    spent = defaultdict(float)  # where the wall time goes (a GPU run is bound by host work and compiles)

    def measure(case, fh) -> None:
        t0 = time.monotonic()
        result = run_case(case, kernel, device, instrument=False)
        for part, s in result.seconds.items():
            spent[part] += s
        if result.status == "error":
            errors.append(result.explain())
            return
        if result.status == "unsupported":
            return
        outputs = {c.name: (c.kernel_error, c.sdpa_error, *c.floors) for c in result.comparisons}
        problems = {c.name: c.problem for c in result.comparisons if c.problem}
        seconds = {**{k: round(v, 4) for k, v in result.seconds.items()}, "case": round(time.monotonic() - t0, 4)}
        spent["case"] += seconds["case"]
        row = precision_of(case.torch_dtype, tf32=tf32, block_scaled=case.block_scaling is not None)  # mxfp8
        rec = Record(row, kernel.name, seed, _case_summary(case),
                     outputs, problems, device_name, environment, seconds)
        fh.write(rec.to_json() + "\n")
        fh.flush()
        sampled.append(rec)
        counts[case.dtype] += 1
        if progress_every and sum(counts.values()) % progress_every == 0:
            print(f"[calibrate seed {seed}] {dict(counts)} cases, {time.monotonic() - start:.0f} s", flush=True)

    with records.open("a") as fh:
        for case in fixed_cases:
            if case.dtype in dtypes and (deadline_s is None or time.monotonic() - start <= deadline_s):
                measure(case, fh)
        # One campaign over all dtypes, taken in turn, so a deadline cuts every dtype alike.
        # Contiguous layouts only: a strided layout changes addressing, not arithmetic, and each
        # layout is another compiled kernel variant (sampling on a GPU is bound by Triton compiles).
        # Longer sequences on a GPU, where they cost little.
        size = dict(max_len=384, max_batch=8) if device.type == "cuda" else {}
        per_dtype = [cases(kernel, device_type=device.type, dtypes=[dt], layouts=["contiguous"],
                           offsets_layouts=["contiguous"], window=window, **size)
                     for dt in dtypes]
        turn = [0]
        @hypothesis_seed(seed)
        @settings(max_examples=cases_per_dtype * len(dtypes), database=None, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def one(data):
            case = data.draw(per_dtype[turn[0] % len(dtypes)])
            turn[0] += 1
            if deadline_s is not None and time.monotonic() - start > deadline_s:
                raise _Deadline
            measure(case, fh)

        try:
            one()
        except _Deadline:
            pass
    total = time.monotonic() - start
    spent["drawing and other"] = total - spent["case"]
    return {"cases": dict(counts), "errors": errors, "seconds": total, "records": sampled, "spent": dict(spent)}


def refloor(records: Iterable[Record], device="cpu") -> list[Record]:
    """The records with their floor terms ``(f1, f2, f3)`` derived again from their cases.

    The floors are functions of the case alone (the float64 reference and the row's unit
    roundoffs), while the kernel and SDPA errors ``(e, s)`` were measured on the record's
    device: after a change to the error model (a new term, another unit roundoff) measured
    records stay usable without running a kernel again. ``device``: a ``torch.device`` or
    its name, where the float64 reference runs (same inputs on any device:
    :meth:`jfa_verify.cases.case.Case.materialize`). Returns new records in the same order, one per
    input; floors are absolute errors in each output's units.

    Raises:
        InvalidInput: record ``i`` (1-based in the message) without its full case
            (``case["full"]``) or with an unknown row.
    """
    from jfa_verify.cases.case import Case
    from jfa_verify.core.errors import InvalidInput
    from jfa_verify.judge.budgets import PRECISIONS
    from jfa_verify.judge.compare import floor_terms, reference_scales
    from jfa_verify.oracles import reference_attention

    out = []
    for i, rec in enumerate(records):
        if "full" not in rec.case:
            raise InvalidInput(f"record {i + 1} (seed {rec.seed}, {rec.kernel}) keeps no full case: its floors "
                               f"cannot be derived again; re-measure it with jfa-verify calibrate")
        if rec.row not in PRECISIONS:
            raise InvalidInput(f"record {i + 1}: row {rec.row!r} is not one of {sorted(PRECISIONS)}")
        case = Case.from_dict(rec.case["full"])
        t = case.materialize(device)
        backward = any(name in rec.outputs for name in ("dq", "dk", "dv"))
        ref = reference_attention(case.problem(t), t.q, t.k, t.v, do=t.do if backward else None)
        outputs = {}
        for name, numbers in rec.outputs.items():
            outputs[name] = (numbers[0], numbers[1], *floor_terms(name, ref[name], rec.row,
                                                                  *reference_scales(ref, name)))
        out.append(replace(rec, outputs=outputs))
    return out


def kernel_source_hash(kernel) -> str:
    """``sha256:<hex>`` of the kernel's Python sources (its loader's folder and ``source_dirs``), by relative
    path and content; ``"unknown"`` when the loader has no file."""
    import hashlib
    import inspect

    try:
        dirs = [Path(inspect.getfile(kernel.loader)).parent]
    except TypeError:
        return "unknown"
    dirs += [Path(d) for d in getattr(kernel, "source_dirs", ())]
    digest = hashlib.sha256()
    for folder in dirs:
        for path in sorted(folder.rglob("*.py")):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def device_description(device) -> str:
    """``"NVIDIA H200"`` for a CUDA device, ``"cpu (Triton interpreter)"`` otherwise."""
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"


def _open_records(path: Path, mode: str):
    """A records file, gzip-compressed when named ``.gz`` (any case)."""
    return (gzip.open if path.suffix.lower() == ".gz" else open)(path, mode)


def write_records(path: str | Path, records: Iterable[Record]) -> int:
    """Write ``records`` to ``path`` (replaced; ``.gz``: compressed), one JSON line each; returns how many.

    Raises:
        OSError: the file cannot be written there.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with _open_records(path, "wt") as fh:
        for rec in records:
            fh.write(rec.to_json() + "\n")
            n += 1
    return n


def read_records(paths: Iterable[str | Path]) -> list[Record]:
    """Records from JSON-lines files (``.gz`` read compressed).

    A torn *last* line (a writer killed mid-line) is skipped; anything else that is not a
    record is an error naming the file and line.

    Raises:
        InvalidInput: a path is missing or a folder, not gzip while named ``.gz``, or holds a line
            that is not a calibration record.
    """
    from jfa_verify.core.errors import InvalidInput

    out: list[Record] = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise InvalidInput(f"records file {str(path)!r} does not exist or is not a file; "
                               f"jfa-verify calibrate --records FILE writes one")
        try:
            with _open_records(path, "rt") as fh:
                lines = fh.read().splitlines()
        except (OSError, UnicodeDecodeError, EOFError) as e:
            raise InvalidInput(f"cannot read records file {str(path)!r}: {e}") from None
        whole = _one_document(lines)
        if whole is not None:  # (a new user handed `report` the JSON report of a run: "line 1: not JSON")
            raise InvalidInput(f"{path} is one JSON document ({whole}), not calibration records (one JSON record per "
                               f"line, from jfa-verify calibrate --records FILE); a run's failures are listed by "
                               f"`jfa-verify findings`, its report read as it is")
        last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                out.append(Record.from_dict(doc))
            except json.JSONDecodeError:
                if i == last and any(line.strip() for line in lines[:i]):
                    continue  # the last line of a writer killed mid-write (after records: a file whose only line is
                    # not JSON was "no calibration records to plot", the bad line unnamed: a new user's trial)
                raise InvalidInput(f"{path}:{i + 1}: not JSON; a records file has one JSON record per line") from None
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise InvalidInput(f"{path}:{i + 1}: not a calibration record ({type(e).__name__}: {e}); "
                                   f"records come from jfa-verify calibrate --records") from None
    return out


def _one_document(lines: list[str]) -> Optional[str]:
    """What a file of several lines that is one JSON object is, in words (None for records: a line each)."""
    if len(lines) < 2:
        return None
    try:
        doc = json.loads("\n".join(lines))
    except json.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    what = doc.get("format") or ("a gate report" if "verdict" in doc else "an object")
    return f"{what}, with keys {', '.join(sorted(doc)[:6])}{', ...' if len(doc) > 6 else ''}"


@dataclass
class RowStats:
    """Headroom and false failures of one (row, output) under a table."""

    headroom: list = field(default_factory=list)
    needed: list = field(default_factory=list)
    failures: int = 0

    def summary(self) -> dict:
        h = np.asarray(self.headroom, dtype=float) if self.headroom else np.zeros(1)
        return {
            "cases": len(self.headroom), "failures": self.failures,
            "rate": self.failures / max(1, len(self.headroom)),
            "headroom_p50": float(np.quantile(h, 0.5)), "headroom_p99": float(np.quantile(h, 0.99)),
            "headroom_p999": float(np.quantile(h, 0.999)), "headroom_max": float(h.max()),
            "needed_multiplier_max": float(max(self.needed)) if self.needed else 0.0,
        }


def evaluate(records: Iterable[Record], table: BudgetTable) -> dict:
    """Judge ``records`` by ``table``: ``{(row, output): RowStats}``.

    A non-finite mismatch or ``kernel_error > allowance`` is a failure; headroom is
    ``kernel_error / allowance`` (inf for a non-finite mismatch).
    """
    stats: dict = defaultdict(RowStats)
    for rec in records:
        for out, numbers in rec.outputs.items():
            b = table.budget(rec.row, out)
            st = stats[(rec.row, out)]
            if out in rec.problems:
                st.headroom.append(float("inf"))
                st.needed.append(float("inf"))
                st.failures += 1
                continue
            h = record_headroom(numbers, b)
            st.headroom.append(h)
            st.needed.append(needed_multiplier(numbers, b))
            st.failures += int(h > 1)
    return dict(stats)


def fit(records: Sequence[Record], current: BudgetTable, *, safety: float = 2.0, min_multiplier: float = 0.05,
        min_floor_ulps: float = 1.0, provenance: Optional[dict] = None) -> BudgetTable:
    """A new table (version + 1): each measured (row, output) has its floor constants scaled.

    The scale is ``max(safety * largest needed multiplier, min_multiplier)`` under ``current``;
    rows and outputs with no record keep ``current``'s constants. ``floor_ulps`` never goes
    below ``min_floor_ulps``: a kernel's own final rounding of an output moves it by half an
    ulp of its largest element even where the SDPA oracle happens to round exactly, and a
    sample of a few thousand cases cannot show that rare coincidence.

    Raises:
        ValueError: a record needs an infinite multiplier (a non-finite output, or an error with no floor):
            no table can pass it, so it is a kernel bug to fix, not a budget to fit.
    """
    stats = evaluate(records, current)
    budgets = {row: dict(outs) for row, outs in current.budgets.items()}
    for (row, out), st in stats.items():
        worst = max(st.needed) if st.needed else 0.0
        if not math.isfinite(worst):
            raise ValueError(f"row {row!r} output {out!r}: a case needs an infinite allowance (non-finite output "
                             f"or error with no floor); fix the kernel or drop the case before fitting")
        k = max(safety * worst, min_multiplier)
        b = current.budget(row, out)
        budgets.setdefault(row, {})[out] = replace(b, floor_ulps=max(b.floor_ulps * k, min_floor_ulps),
                                                   lowp_ulps=b.lowp_ulps * k, acc_ulps=b.acc_ulps * k)
    return BudgetTable(current.version + 1, dict(provenance or {}), budgets)


def thin_rows(records: Sequence[Record], min_cases: int) -> dict[str, int]:
    """``{row: cases}`` for every budget row with fewer than ``min_cases`` fitting records (a fit on so few
    would move the row's constants on noise: ``calibrate --cases 5`` shrank them 20x)."""
    rows: dict = defaultdict(int)
    for r in records:
        rows[r.row] += 1
    return {row: n for row, n in sorted(rows.items()) if n < min_cases}


def _versions(records: Sequence[Record], package: str) -> str:
    known = sorted({r.environment[package] for r in records if r.environment.get(package)})
    unknown = sum(not r.environment.get(package) for r in records)
    return ", ".join(known + ([f"not recorded for {unknown} case(s)"] if unknown else []))


def provenance(records: Sequence[Record], *, safety: float, min_multiplier: float, min_floor_ulps: float,
               measured_against: int, holdout: Optional[dict] = None, files: Sequence[str] = (),
               earlier: Optional[BudgetTable] = None) -> dict:
    """The provenance block of a fitted table: where, when, with what and on how many cases.

    ``earlier``: the table the fit started from. Its rows that no record refits keep their constants
    (:func:`fit`), so they keep their provenance too: listed under ``"kept_rows"``, with ``earlier``'s whole
    block under ``"kept_rows_provenance"`` (a fit of one new row, such as ``mxfp8``, must not erase where the
    other rows' numbers came from).
    """
    rows: dict = defaultdict(int)
    for r in records:
        rows[r.row] += 1
    kept = sorted(set(earlier.budgets) - set(rows)) if earlier is not None else []
    history = {"kept_rows": kept, "kept_rows_provenance": earlier.provenance} if kept else {}
    return {
        "source": "jfa-verify calibrate: floors scaled by safety x the largest multiplier a fitting case needed",
        "date": datetime.date.today().isoformat(),
        "device": ", ".join(sorted({r.device for r in records})) or None,
        # records written before environments were recorded carry none: counted, not printed as "None"
        "torch": _versions(records, "torch"),
        "triton": _versions(records, "triton"),
        "kernel_source": _versions(records, "kernel_source"),
        "kernels": sorted({r.kernel for r in records}),
        "cases_per_row": dict(sorted(rows.items())),
        "seeds": sorted({r.seed for r in records}),
        "safety": safety,
        "min_multiplier": min_multiplier,
        "min_floor_ulps": min_floor_ulps,
        "fitted_on": list(files),
        "measured_against_version": measured_against,
        "holdout": holdout,
        **history,
    }


def format_stats(stats: dict) -> str:
    """A fixed-width table of :func:`evaluate`'s result."""
    lines = [f"{'row':13s} {'output':6s} {'cases':>6s} {'fails':>5s} {'p50':>8s} {'p99':>8s} {'p99.9':>8s} "
             f"{'max':>8s} {'need x':>8s}"]
    order = {o: i for i, o in enumerate(OUTPUTS)}
    for (row, out), st in sorted(stats.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9))):
        s = st.summary()
        lines.append(f"{row:13s} {out:6s} {s['cases']:6d} {s['failures']:5d} {s['headroom_p50']:8.3g} "
                     f"{s['headroom_p99']:8.3g} {s['headroom_p999']:8.3g} {s['headroom_max']:8.3g} "
                     f"{s['needed_multiplier_max']:8.3g}")
    return "\n".join(lines)
