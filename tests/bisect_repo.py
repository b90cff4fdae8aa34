"""A throwaway git repository of a small plugin kernel (plain torch, fast on the CPU) with planted commits,
for the ``jfa-verify bisect`` tests.

History (``commits[i]`` is ``c<i>``):

====  ==========================================  =====================================================
c0    Add jagged attention kernel                 correct
c1    Document the kernel                         no change in behaviour
c2    Scale queries before the score matmul       rounding only: outputs move by ulps, float64 verdict passes
c3    Rename loop variables                       no change
c4    Move the softmax helper to a module         the plugin no longer imports (ModuleNotFoundError)
c5    Fix the helper import                       imports again
c6    Check offsets on the host                   planted slowdown (sleeps 20 ms per call)
c7    Stop one key early                          correctness bug: each sequence's last key is dropped
c8    Tidy comments                               no change
c9    Bump version                                no change
====  ==========================================  =====================================================
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

KERNEL = "bisect_toy"
PLUGIN = "kern.py"

_TEMPLATE = '''"""{doc}"""
import time

import torch
{helper_import}
from jfa_verify import Capabilities, register_kernel

VERSION = "{version}"


def attention(q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None):
    scale = sm_scale if sm_scale is not None else q.shape[-1] ** -0.5
    {sleep}
    bounds = k_offsets.tolist()
    # rows before the first sequence belong to none: o = 0, lse = -inf
    outs = [q.new_zeros(bounds[0], q.shape[1], v.shape[2])]
    lses = [q.new_full((q.shape[1], bounds[0]), float("-inf"))]
    for {s}, {e} in zip(bounds[:-1], bounds[1:]):
        if {e} == {s}:
            continue
        qs = q[{s}:{e}].transpose(0, 1)
        ks = k[{s}:{e}{stop}].transpose(0, 1)
        vs = v[{s}:{e}{stop}].transpose(0, 1)
        scores = {scores}
        lse = torch.logsumexp(scores, dim=-1)
        outs.append((torch.exp(scores - lse[..., None]) @ vs).transpose(0, 1))
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses, dim=1)


@register_kernel("{kernel}", capabilities=Capabilities(dtypes=(torch.float32,), modes=("self",), causal_alignments=(),
                 gqa=False, gqa_backward=False))
def load():
    """Toy jagged attention in plain torch (bisect tests)."""
    return attention
'''

_STEPS = [
    ("Add jagged attention kernel", {}),
    ("Document the kernel", {"doc": "Toy jagged attention: one softmax per sequence, in plain torch."}),
    ("Scale queries before the score matmul", {"scores": "(qs * scale) @ ks.transpose(1, 2)"}),
    ("Rename loop variables", {"s": "start", "e": "end"}),
    ("Move the softmax helper to a module", {"helper_import": "from softmax_helpers import stable_softmax  # noqa"}),
    ("Fix the helper import", {"helper_import": ""}),
    ("Check offsets on the host", {"sleep": "time.sleep(0.02)  # host-side offsets check"}),
    ("Stop one key early", {"stop": " - 1"}),
    ("Tidy comments", {"sleep": "time.sleep(0.02)  # host-side offsets check (tidied)"}),
    ("Bump version", {"version": "1.1"}),
]

_START = dict(doc="Toy jagged attention.", helper_import="", version="1.0", sleep="pass", s="s", e="e", stop="",
              scores="(qs @ ks.transpose(1, 2)) * scale", kernel=KERNEL)


@dataclass
class ToyRepo:
    path: Path
    commits: list[str]  # c0 .. c9, full hashes

    def git(self, *args: str) -> str:
        return _git(self.path, *args)


def _git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), "-c", "user.name=bisect test", "-c", "user.email=t@example.com",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def build_toy_repo(path: Path, steps=None) -> ToyRepo:
    """Create the repository at ``path`` (a new folder) and return it with its commit hashes.

    ``steps``: ``(subject, template fields changed)`` per commit (default: the history above).
    """
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    fields = dict(_START)
    commits = []
    for subject, change in steps or _STEPS:
        fields.update(change)
        (path / PLUGIN).write_text(_TEMPLATE.format(**fields))
        _git(path, "add", PLUGIN)
        _git(path, "commit", "-q", "-m", subject)
        commits.append(_git(path, "rev-parse", "HEAD"))
    return ToyRepo(path, commits)
