"""How many compiled variants ``triton_jfa`` needs: what its launches specialize on, checked on the CPU.

On the H200 a campaign's throughput is bound by Triton building kernel variants (issue 19), so the kernels
leave unspecialized what changes no code. Triton's own binder computes the cache key of a launch; with the
target-only driver it runs without a GPU, in a subprocess without ``TRITON_INTERPRET`` (the interpreter has
no binder).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = """
import json, torch
from triton.runtime import driver
from triton.runtime.jit import compute_cache_key
from jfa_verify.core.target_driver import TargetOnlyDriver
driver.set_active(TargetOnlyDriver(90))
from jfa_verify.kernels.triton_jfa import _kernels as K

INDEX = ("TILE_SEQ", "TILE_BLOCK", "TILE_ID", "PROG_TILE_START", "VISITS", "PROGS")
ROWS = ("LSE", "DELTA")

FLAGS = ("BOTTOM_RIGHT", "BROADCAST_Q")  # runtime int flags, passed as the host passes them

def key(fn, offsets, data, scalar, index=None, rows=None, flag=None):
    args = {}
    for p in fn.params:
        if p.name in FLAGS:
            args[p.name] = int(p.name == flag)
        elif p.is_constexpr:
            args[p.name] = 64 if p.name.startswith("BLOCK") else False
        elif p.name in ("Q_OFF", "K_OFF"):
            args[p.name] = offsets
        elif p.name in INDEX and index is not None:
            args[p.name] = index
        elif p.name in ROWS and rows is not None:
            args[p.name] = rows
        elif p.name[0].isupper():
            args[p.name] = data
        elif p.name.endswith("scale"):  # qk_scale, sm_scale: floats, never specialized
            args[p.name] = 0.5
        else:
            args[p.name] = scalar
    cache = fn.device_caches[0]
    _, spec, opts = cache[4](**args, num_warps=4, num_stages=2)
    return compute_cache_key(cache[1], spec, opts)

offsets, data = torch.zeros(64, dtype=torch.int32), torch.zeros(72, dtype=torch.bfloat16)
lse = torch.zeros(72, dtype=torch.float32)
out = {}
for fn in (K._fwd_kernel, K._bwd_preprocess_kernel, K._bwd_dkdv_kernel, K._bwd_dq_kernel):
    same = key(fn, offsets[0:9], data[:64], 16)
    out[fn.fn.__name__] = dict(
        # the strided offsets layout: offsets 4 bytes past a 16-byte boundary
        offsets=same == key(fn, offsets[1:10], data[:64], 16),
        # strides, head counts, head dims, window spans: values that address memory or bound masks
        scalars=same == key(fn, offsets[0:9], data[:64], 7),
        # the causal alignment (a scalar shift) and broadcast-Q (where rows start): flags read once per tile
        bottom_right=same == key(fn, offsets[0:9], data[:64], 16, flag="BOTTOM_RIGHT"),
        broadcast_q=same == key(fn, offsets[0:9], data[:64], 16, flag="BROADCAST_Q"),
        # the plan's arrays and counters 4 bytes past a boundary (read one scalar at a time)
        index=key(fn, offsets[0:9], data[:64], 16, index=offsets[0:9])
        == key(fn, offsets[0:9], data[:64], 16, index=offsets[1:10]),
        # LSE/DELTA 4 bytes past a boundary (rows start at an offset read on the device)
        rows=key(fn, offsets[0:9], data[:64], 16, rows=lse[0:64])
        == key(fn, offsets[0:9], data[:64], 16, rows=lse[1:65]),
        # data 2 bytes past a boundary: here alignment changes the code (16-byte vector loads or not)
        data=same == key(fn, offsets[0:9], data[1:65], 16),
    )
print("KEYS" + json.dumps(out))
"""


def _keys() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("KEYS"))
    return json.loads(line[len("KEYS"):])


def test_offsets_plan_lse_alignment_scalars_and_mask_flags_build_no_new_variant_but_data_alignment_does():
    keys = _keys()
    assert set(keys) == {"_fwd_kernel", "_bwd_preprocess_kernel", "_bwd_dkdv_kernel", "_bwd_dq_kernel"}
    for name, same in keys.items():
        assert same["offsets"] is True, f"{name}: offsets 4 bytes off a 16-byte boundary build a second variant"
        assert same["scalars"] is True, f"{name}: a stride or head-count value builds a new variant"
        assert same["bottom_right"] is True, f"{name}: the causal alignment builds a second variant"
        assert same["broadcast_q"] is True, f"{name}: broadcast-Q builds a second variant"
        assert same["index"] is True, f"{name}: plan arrays or counters 4 bytes off a boundary build a new variant"
        assert same["rows"] is True, f"{name}: LSE/DELTA 4 bytes off a boundary build a new variant"
        # the control: the key does see alignment where the kernel specializes on it
        assert same["data"] is False, f"{name}: the key ignores the data pointers' alignment"


_PLANNER_SCRIPT = """
import json, torch
from triton.runtime import driver
from triton.runtime.jit import compute_cache_key
from jfa_verify.core.target_driver import TargetOnlyDriver
driver.set_active(TargetOnlyDriver(90))
from jfa_verify.scheduling import plan_kernels as pk

CONSTANTS = dict(_tiles_kernel=dict(BLOCK=64, WITH_COST=True, BACKWARD=False, BOTTOM_RIGHT=False, HAS_LEFT=False,
                                    HAS_RIGHT=False, S=pk.SLOTS),
                 _deal_kernel=dict(BLOCK=64, SCHED=2, WITH_IDS=False, S=pk.SLOTS),
                 _plan_kernel=dict(P=pk.PLAN_SLOTS))
CONTROL = dict(_tiles_kernel=dict(BLOCK=32), _deal_kernel=dict(BLOCK=32), _plan_kernel=dict(P=pk.PLAN_SLOTS // 2))

INTEGERS = ("B", "CAP", "N", "STEPS", "WIN_LEFT", "RIGHT", "T_A", "T_B", "LEN_A_ALL", "LEN_B_ALL", "BLOCK", "FLAGS")

def key(fn, scalar, **constants):
    array = torch.zeros(64, dtype=torch.int64)
    args = {p.name: (scalar if p.name in INTEGERS else array) for p in fn.params if not p.is_constexpr}
    cache = fn.device_caches[0]
    _, spec, opts = cache[4](**args, **{**CONSTANTS[fn.fn.__name__], **constants}, num_warps=4, num_stages=2)
    return compute_cache_key(cache[1], spec, opts)

out = {}
for fn in (pk._tiles_kernel, pk._deal_kernel, pk._plan_kernel):
    # batch size, capacity, programs, search steps, window spans (_plan_kernel: also rows, tile size, mask and
    # scheduler flags): 1, a multiple of 16, other
    out[fn.fn.__name__] = dict(scalars=len({key(fn, v) for v in (1, 16, 7)}) == 1,
                               control=key(fn, 7) != key(fn, 7, **CONTROL[fn.fn.__name__]))
print("KEYS" + json.dumps(out))
"""


def test_the_planner_kernels_build_one_variant_whatever_the_batch_size_capacity_and_window():
    # a cold GPU suite built 62 planner variants of 265 (H100, 2026-12-06): the batch size, capacity and window
    # spans were specialized on being 1 or a multiple of 16, which changes no code of a planner that only bounds
    # loops and masks with them
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", _PLANNER_SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    keys = json.loads(next(x for x in run.stdout.splitlines() if x.startswith("KEYS"))[len("KEYS"):])
    assert keys == {name: {"scalars": True, "control": True}
                    for name in ("_tiles_kernel", "_deal_kernel", "_plan_kernel")}, keys
