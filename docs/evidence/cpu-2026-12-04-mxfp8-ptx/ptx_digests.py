"""sm_90 PTX digests of triton_jfa's kernels, with the forward kernels of c7323b6 (``before``) or of this tree
(``after``); see this folder's README. Run from the repository root with ``TRITON_INTERPRET`` unset."""

import importlib.util
import json
import sys

import benchmarks.inspect_codegen as ic
import jfa_verify.kernels.triton_jfa as pkg

which = sys.argv[1]
if which == "before":
    spec = importlib.util.spec_from_file_location("jfa_verify.kernels.triton_jfa._kernels_old",
                                                  "/tmp/old_jfa_kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pkg._kernels = mod
    sys.modules["jfa_verify.kernels.triton_jfa._kernels"] = mod
out = {}
for d in (64, 128):
    for t in ("bfloat16", "float16", "float32", "float8_e4m3fn"):
        for c in (False, True):
            found = ic.inspect(d, 4, t, 90, c)
            out[f"D{d}-{t}-{'causal' if c else 'dense'}"] = {k: v["digest"] for k, v in found.items()}
json.dump(out, open(f"/tmp/ptx_{which}.json", "w"), indent=1)
print(which, "done", len(out))
