"""The README's example outputs, regenerated from real runs (``--write``) or checked against them (``--check``).

An example is a fenced block right after a ``<!-- example -->`` comment; its first line is
``$ <command>`` and the rest is what the command printed, as it printed it on the CPU interpreter
after :func:`normalize`. ``--check`` compares them through :func:`comparable`: every count, index,
verdict and word must match, but not the digits of measured floating-point values (errors, allowances,
outputs), whose last digits differ between CPUs (CI saw an SDPA float32 error of 1.53e-06 on one machine
and 1.67e-06 on another, from the same run). Usage, from the repository root::

    python ci/readme_examples.py --check   # exit 1, with a diff, when an output changed
    python ci/readme_examples.py --write   # rewrite the blocks from fresh runs
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARK = "<!-- example -->"
BLOCK = re.compile(re.escape(MARK) + r"\n```\n\$ (?P<command>[^\n]+)\n(?P<output>.*?)```", re.S)


def normalize(text: str) -> str:
    """Output that does not depend on the machine: no trailing spaces, temporary folders named ``$TMP``, this
    checkout named ``$REPO`` (replay commands print absolute paths), durations as ``<s>``."""
    text = re.sub(r"[ \t]+$", "", text, flags=re.M)
    text = text.replace(str(ROOT), "$REPO")
    text = re.sub(r"/tmp/jfa-readme-[^/\s]+", "$TMP", text)
    text = re.sub(r"\b\d+\.\d s\b", "<s>", text)
    text = re.sub(r"; \d+ s\.", "; <s>.", text)
    return text.strip("\n") + "\n"


_FLOAT = re.compile(r"(?<![\w.])-?\d+(?:\.\d+(?:e[-+]?\d+)?|e[-+]?\d+)(?![\w.])")


def comparable(text: str) -> str:
    """``text`` with every floating-point number (a decimal point or an exponent) as ``<float>``."""
    return _FLOAT.sub("<float>", text)


def run(command: str) -> str:
    """Run one example command from the repository root in a fresh temporary folder for its files."""
    with tempfile.TemporaryDirectory(prefix="jfa-readme-") as tmp:
        env = {**os.environ, "TMP_OUT": tmp, "COLUMNS": "160"}
        env.pop("TRITON_INTERPRET", None)
        env.pop("JFA_VERIFY_JOBS", None)  # (a test session's one worker: the example shows the machine's default)
        argv = [a.replace("$TMP", tmp) for a in shlex.split(command)]
        if argv[0] == "jfa-verify":
            argv = [sys.executable, "-m", "jfa_verify.cli", *argv[1:]]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=900)
        return normalize((proc.stdout + proc.stderr).replace(tmp, "$TMP"))


def examples(text: str) -> list[re.Match]:
    return list(BLOCK.finditer(text))


def main() -> int:
    if sys.argv[1:] not in (["--check"], ["--write"]):
        print(__doc__, file=sys.stderr)
        return 2
    text = README.read_text()
    found = examples(text)
    if not found:
        print(f"no {MARK} blocks in {README}", file=sys.stderr)
        return 2
    stale, out = [], text
    for m in reversed(found):
        fresh = run(m["command"])
        if comparable(normalize(m["output"])) != comparable(fresh):
            stale.append((m["command"], normalize(m["output"]), fresh))
            out = out[: m.start("output")] + fresh + out[m.end("output"):]
    if sys.argv[1] == "--write":
        README.write_text(out)
        print(f"{len(found)} example(s), {len(stale)} rewritten")
        return 0
    for command, old, new in stale:
        print(f"$ {command}: the README's output is stale")
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "README", "now"))
    print(f"{len(found)} example(s), {len(stale)} stale")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
