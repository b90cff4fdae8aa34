"""The calibration records the budget tests read: compact copies in ``tests/data/calibration/``.

``manifest.json`` there maps each file name a table's provenance gives (the raw file's) to its
compact copy, what it was used for and the kernel source commit it was measured at.
``*.jsonl.gz`` copies are ordinary records files; ``*.npz`` ones are columns (numbers in float32)
read back into :class:`Record` objects here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from jfa_verify.workflows.calibrate import Record, read_records

DATA = Path(__file__).resolve().parent / "data" / "calibration"


def manifest() -> dict:
    return json.loads((DATA / "manifest.json").read_text())["files"]


def read_npz_records(path: Path) -> list[Record]:
    with np.load(path, allow_pickle=False) as npz:
        z = {key: npz[key] for key in npz.files}  # each npz[key] decompresses its array again
        env = json.loads(str(z["environment"]))
        outputs = [str(o) for o in z["outputs"]]
        numbers = z["numbers"].astype(np.float64)
        out = []
        for i in range(len(numbers)):
            measured = {o: tuple(numbers[i, j].tolist()) for j, o in enumerate(outputs)
                        if not np.isnan(numbers[i, j]).all()}
            case = {"tokens_q": int(z["tokens_q"][i]), "tokens_k": int(z["tokens_k"][i]),
                    "causal": bool(z["causal"][i])}
            out.append(Record(str(z["row"][i]), str(z["kernel"][i]), int(z["seed"][i]), case, measured, {},
                              str(z["device"][i]), env))
        return out


def load(names) -> list[Record]:
    """The records of the raw files ``names`` (as a provenance names them), from their compact copies."""
    files = manifest()
    out: list[Record] = []
    for name in names:
        path = DATA / files[name]["file"]
        out += read_npz_records(path) if path.suffix == ".npz" else read_records([path])
    return out
