#!/usr/bin/env python3
"""gluon_jfa on its jagged-length grid: ``jfa-verify run --device cuda --kernel gluon_jfa --suite jagged-grid``.

The grid is the framework's ``jagged-grid`` suite (``jfa_verify/checks/suites.py``), judged by the one tolerance
rule; planted bugs: ``jfa-verify mutants --catalogue gluon_jfa``. Extra arguments go to ``jfa-verify run``.
"""
import sys

import torch

if not torch.cuda.is_available():
    sys.exit(print("gpu_gluon_check.py needs a CUDA device (Hopper): nothing checked", file=sys.stderr) or 2)
from jfa_verify.cli import main  # noqa: E402

sys.exit(main(["run", "--device", "cuda", "--kernel", "gluon_jfa", "--suite", "jagged-grid", *sys.argv[1:]]))
