# Sourced by the GPU scripts (ci/gpu_*.sh). A lent GPU machine has torch and Triton but no network, so:
#   gpu_install LOG   installs the wheels carried in .whl/ (pure-Python dependencies the image lacks, such as
#                     allpairspy) into /tmp/site and puts it on PYTHONPATH, installs this package editable
#                     without dependencies, and checks that every runtime dependency of the package is there.
# Returns 2 with the missing requirement and the fix named (a missing allpairspy once made 19 GPU tests fail
# as "NOTHING CHECKED" instead of the run stopping at its start). The installs hold a lock (two scripts started
# side by side raced on pip's entry-point file, OSError, and one lost its whole stage) and are skipped when already
# done (a wheel's package in /tmp/site, this checkout importable as jfa_verify), so no running job loses a file.
# Make the wheels on a machine with network, e.g.
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl allpairspy==2.5.1
# and name .whl in the call's carry.
gpu_install() {
  local log=$1 rc=0 whl
  exec 9>/tmp/jfa-verify-gpu-install.lock
  if command -v flock >/dev/null; then flock 9; else echo "gpu_install: no flock here: installs are not serialized" >&2; fi
  # What is already there stays (a later script of the same call must not replace files that running jobs use).
  for whl in .whl/*.whl; do
    [ -e "$whl" ] || continue
    [ -d "/tmp/site/$(basename "$whl" | cut -d- -f1)" ] && continue
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$whl" >>"$log" 2>&1 \
      || rc=$?
  done
  [ -d /tmp/site ] && case ":${PYTHONPATH:-}:" in *:/tmp/site:*) ;; *) export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH};; esac
  # (asked from / : from the checkout's root, "import jfa_verify" finds the folder whether installed or not)
  if [ "$rc" = 0 ] && ! { command -v jfa-verify >/dev/null && (cd / && python3 -c "import jfa_verify, sys
sys.exit(not jfa_verify.__file__.startswith(sys.argv[1]))" "$PWD/") 2>/dev/null; }; then
    python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >>"$log" 2>&1 || rc=$?
  fi
  exec 9>&-
  if [ "$rc" != 0 ]; then echo "install failed (exit $rc):"; tail -20 "$log"; return 2; fi
  gpu_check_deps jfa-verify
}

# gpu_check_deps DIST: exit status 2, naming each missing requirement and the fix, when a runtime requirement of the
# installed distribution DIST is not installed (versions are not compared: the image's torch is what it is).
gpu_check_deps() {
  python3 - "$1" <<'PY'
import importlib.metadata as md
import re
import sys

missing = []
for req in md.requires(sys.argv[1]) or []:
    if "extra ==" in req:
        continue
    try:
        md.distribution(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0])
    except md.PackageNotFoundError:
        missing.append(req)
if missing:
    print(f"missing dependencies of {sys.argv[1]}: {', '.join(missing)}. This machine has no network: carry their "
          "wheels in .whl/ (see the header of ci/gpu_env.sh)")
    sys.exit(2)
PY
}

# gpu_bytecode LOG: byte-compile, once a machine, the packages a run imports (torch, sympy, triton, this checkout...),
# as `pip install` does on a user's machine. The lent image ships them without .pyc files and runs Python with
# bytecode writing off, so every process there compiled about 1,000 modules from source on every run (3.1 s in the
# parent alone: docs/evidence/h100-2026-12-06-c), a cost no user's installation pays. Timing calls call it first.
gpu_bytecode() {
  [ -e /tmp/jfa-bytecode.done ] && return 0
  python3 - >>"$1" 2>&1 <<'PY' && touch /tmp/jfa-bytecode.done
import compileall
import os
import sys
import time

t0 = time.time()
import hypothesis, numpy, rich, torch, triton  # noqa: E401,F401
import torch.fx.experimental.symbolic_shapes  # noqa: F401  (sympy: autograd imports it in a first backward)
import jfa_verify.cli  # noqa: F401

roots = set()
for mod in list(sys.modules.values()):
    f = getattr(mod, "__file__", None) or ""
    for base in sys.path:
        if base and f.startswith(os.path.join(os.path.abspath(base), "")) and base != os.getcwd():
            roots.add(os.path.join(base, os.path.relpath(f, base).split(os.sep)[0]))
roots.add(os.getcwd())
ok = True
for r in sorted(roots):
    if os.path.isdir(r):
        ok &= bool(compileall.compile_dir(r, quiet=2, workers=os.cpu_count() or 1))
    elif r.endswith(".py"):
        ok &= bool(compileall.compile_file(r, quiet=2))
# (not all: some packages hold files of another Python's syntax, as templates or test data; pip skips them too)
print(f"gpu_bytecode: {len(roots)} package(s) byte-compiled in {time.time() - t0:.1f} s (every file: {ok})")
PY
}
