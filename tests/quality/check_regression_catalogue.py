"""Check the regression mutant catalogue ``regression_catalogue.json`` (once blind) (a script, not a pytest test).

For every mutant: (a) its edit applies to the current source, (b) the mutant, built
through the catalogue's builder and run on the CPU under Triton's interpreter on one
small input chosen for it, differs from a float64 reference written here (explicit
per-sequence softmax), or raises. The unmutated kernel is run on the same inputs to
show that it agrees with the reference there.

Uninitialized memory is made visible: ``torch.use_deterministic_algorithms(True)``
fills every ``torch.empty`` float tensor with NaN, so a row the kernel forgot to
write is NaN rather than whatever the allocator returned.

Usage::

    python tests/quality/check_regression_catalogue.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import math
import sys
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from jfa_verify.core.device import select_device

CATALOGUE = Path(__file__).with_name("regression_catalogue.json")


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Inp:
    """One small call. ``q_lens`` None: self-attention (one shared offsets tensor);
    ``l_q`` set: broadcast-Q (dense Q of ``l_q`` rows, ``q_offsets=None``)."""

    k_lens: tuple
    q_lens: Optional[tuple] = None
    l_q: Optional[int] = None
    hq: int = 2
    hkv: int = 2
    d: int = 16
    dv: Optional[int] = None
    causal: bool = False
    window: Optional[tuple] = None  # (left, right), -1 unbounded; centred on the aligned diagonal
    align: str = "top_left"
    sm_scale: Optional[float] = None
    q_start: int = 0
    k_start: int = 0
    off_dtype: torch.dtype = torch.int32
    q_layout: str = "contiguous"  # or "dim_stride_2": head-dim stride 2 (interleaved view)
    v_layout: str = "contiguous"  # or "padded": last dim padded to a multiple of 16 (view [..., :D_v])
    do_layout: str = "contiguous"  # or "transposed" ([H, T, D_v] storage) or "padded"
    logit_scale: float = 1.0  # multiplies q and k (large logits)
    backward: bool = True
    seed: int = 0

    @property
    def d_v(self) -> int:
        return self.d if self.dv is None else self.dv


def _offsets(lens, start, dtype):
    out = [start]
    for n in lens:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=dtype)


def _padded(rows, heads, dim, gen):
    width = -(-dim // 16) * 16 if dim % 16 else dim + 16
    return torch.randn(rows, heads, width, generator=gen)[..., :dim]


def make_tensors(inp: Inp):
    gen = torch.Generator().manual_seed(inp.seed)
    broadcast = inp.l_q is not None
    self_attn = inp.q_lens is None and not broadcast
    q_lens = inp.k_lens if self_attn else inp.q_lens
    k_off = _offsets(inp.k_lens, inp.k_start, inp.off_dtype)
    if broadcast:
        q_off, t_q = None, inp.l_q
    elif self_attn:
        q_off, t_q = k_off, inp.k_start + sum(inp.k_lens)
    else:
        q_off, t_q = _offsets(q_lens, inp.q_start, inp.off_dtype), inp.q_start + sum(q_lens)
    t_k = inp.k_start + sum(inp.k_lens)
    if inp.q_layout == "dim_stride_2":
        q = torch.randn(t_q, inp.hq, inp.d, 2, generator=gen)[..., 0]
    else:
        q = torch.randn(t_q, inp.hq, inp.d, generator=gen)
    k = torch.randn(t_k, inp.hkv, inp.d, generator=gen)
    if inp.v_layout == "padded":
        v = _padded(t_k, inp.hkv, inp.d_v, gen)
    else:
        v = torch.randn(t_k, inp.hkv, inp.d_v, generator=gen)
    if inp.logit_scale != 1.0:
        q, k = q * inp.logit_scale, k * inp.logit_scale
    rows = len(inp.k_lens) * inp.l_q if broadcast else t_q
    if inp.do_layout == "transposed":
        do = torch.randn(inp.hq, rows, inp.d_v, generator=gen).transpose(0, 1)
    elif inp.do_layout == "padded":
        do = _padded(rows, inp.hq, inp.d_v, gen)
    else:
        do = torch.randn(rows, inp.hq, inp.d_v, generator=gen)
    return q, k, v, q_off, k_off, do


# ----------------------------------------------------------------------------- float64 reference


def reference(inp: Inp, q, k, v, q_off, k_off, do):
    """``{"o", "lse", "dq", "dk", "dv"}`` in float64: explicit per-sequence softmax, autograd for gradients."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    scale = inp.sm_scale if inp.sm_scale is not None else 1.0 / math.sqrt(inp.d)
    group = inp.hq // inp.hkv
    ko = k_off.tolist()
    broadcast = q_off is None
    qo = None if broadcast else q_off.tolist()
    o_parts, lse_parts = [], []
    if not broadcast and qo[0] > 0:  # rows before offsets[0]: no sequence
        o_parts.append(torch.zeros(qo[0], inp.hq, inp.d_v, dtype=torch.float64))
        lse_parts.append(torch.full((inp.hq, qo[0]), -math.inf, dtype=torch.float64))
    for b in range(len(ko) - 1):
        qb = q64 if broadcast else q64[qo[b]:qo[b + 1]]
        kb = k64[ko[b]:ko[b + 1]].repeat_interleave(group, dim=1)  # query head h reads KV head h // group
        vb = v64[ko[b]:ko[b + 1]].repeat_interleave(group, dim=1)
        lq, lk = qb.shape[0], kb.shape[0]
        s = torch.einsum("ihd,jhd->hij", qb, kb) * scale
        visible = torch.ones(lq, lk, dtype=torch.bool)
        diagonal = torch.arange(lq)[:, None] + (0 if inp.align == "top_left" else lk - lq)
        key = torch.arange(lk)[None, :]
        if inp.causal:
            visible = key <= diagonal
        if inp.window is not None:
            left, right = inp.window
            if left >= 0:
                visible = visible & (key >= diagonal - left)
            if right >= 0:
                visible = visible & (key <= diagonal + right)
        s = torch.where(visible[None], s, torch.tensor(-math.inf, dtype=torch.float64))
        m = s.amax(-1, keepdim=True) if lk else torch.full((inp.hq, lq, 1), -math.inf, dtype=torch.float64)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
        e = torch.exp(s - m)
        den = e.sum(-1)
        seen = den > 0
        o_b = torch.einsum("hij,jhd->ihd", e, vb) / torch.where(seen, den, torch.ones_like(den)).T[:, :, None]
        lse_b = torch.where(seen, torch.log(torch.where(seen, den, torch.ones_like(den))) + m[..., 0],
                            torch.tensor(-math.inf, dtype=torch.float64))
        o_parts.append(o_b)
        lse_parts.append(lse_b)
    o = torch.cat(o_parts, 0) if o_parts else torch.zeros(0, inp.hq, inp.d_v, dtype=torch.float64)
    lse = torch.cat(lse_parts, 1) if lse_parts else torch.zeros(inp.hq, 0, dtype=torch.float64)
    out = {"o": o.detach(), "lse": lse.detach()}
    if inp.backward:
        if o.requires_grad:
            dq, dk, dv = torch.autograd.grad(o, (q64, k64, v64), do.double(), allow_unused=True)
        else:  # no sequence: nothing depends on q, k, v
            dq = dk = dv = None
        out.update(dq=dq if dq is not None else torch.zeros_like(q64),
                   dk=dk if dk is not None else torch.zeros_like(k64),
                   dv=dv if dv is not None else torch.zeros_like(v64))
    return out


# ----------------------------------------------------------------------------- running and comparing


def run_impl(impl, inp: Inp):
    q, k, v, q_off, k_off, do = make_tensors(inp)
    ref = reference(inp, q, k, v, q_off, k_off, do)
    if inp.backward:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    window = {} if inp.window is None else {"window": inp.window}  # the contract passes window only when set
    o, lse = impl(q, k, v, q_off, k_off, causal=inp.causal, causal_alignment=inp.align, sm_scale=inp.sm_scale,
                  **window)
    got = {"o": o.detach(), "lse": lse.detach()}
    if inp.backward:
        got.update(zip(("dq", "dk", "dv"), torch.autograd.grad(o, (q, k, v), do)))
    return got, ref


def max_diff(got, ref) -> tuple[float, str]:
    """Largest |got - ref| over every output (NaN or a wrong infinity counts as inf), and which output."""
    worst, where = 0.0, "-"
    for name, r in ref.items():
        g = got[name].double()
        if g.shape != r.shape:
            return math.inf, f"{name} shape {tuple(g.shape)} != {tuple(r.shape)}"
        same = (g == r) | (torch.isinf(g) & torch.isinf(r) & (torch.sign(g) == torch.sign(r)))
        diff = torch.where(same, torch.zeros_like(r), (g - r).abs())
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
        d = diff.max().item() if diff.numel() else 0.0
        if d > worst:
            worst, where = d, name
    return worst, where


def tolerance(ref) -> float:
    scale = max((r[torch.isfinite(r)].abs().max().item() if torch.isfinite(r).any() else 0.0) for r in ref.values())
    return 1e-3 * max(1.0, scale)


# ----------------------------------------------------------------------------- the input of each mutant

SELF_MULTI = Inp(k_lens=(40, 0, 33, 17, 5))  # multi-tile, an empty sequence, lengths off the 16/32 tile edges
MANY_TILES = Inp(k_lens=(40, 35, 33, 20, 50), hq=4, hkv=2)  # 9 query tiles on 4 persistent programs
BR_CROSS = Inp(k_lens=(16, 10, 35), q_lens=(16, 30, 20), causal=True, align="bottom_right")  # L_q>L_k and L_q<L_k
BR_CROSS_WINDOW = Inp(k_lens=(30,), q_lens=(10,), window=(3, 3), align="bottom_right")  # no causal
GQA = Inp(k_lens=(20, 37), hq=4, hkv=2)
GQA_6_3 = Inp(k_lens=(20, 9), hq=6, hkv=3)  # group 2 with 3 KV heads (group != H_kv)
LARGE_LOGITS = Inp(k_lens=(24, 40), logit_scale=8.0)
EMPTY_KEYS = Inp(k_lens=(0, 9), q_lens=(5, 12))
DV24 = Inp(k_lens=(20, 37), dv=24)
DV24_PADDED = Inp(k_lens=(20, 37), dv=24, v_layout="padded", do_layout="padded")
Q_DIM_STRIDED = Inp(k_lens=(20, 37), q_layout="dim_stride_2")
CROSS_STARTS = Inp(k_lens=(30, 7), q_lens=(12, 20), q_start=5, k_start=2, off_dtype=torch.int64)
START_1 = Inp(k_lens=(20, 9), k_start=1)
EMPTY_BATCH = Inp(k_lens=(), q_lens=(), q_start=4, k_start=6)
BROADCAST = Inp(k_lens=(20, 0, 37), l_q=10, hq=4, hkv=2)
SCALE = Inp(k_lens=(20, 37), causal=True, sm_scale=0.7)
CROSS_LQ_GT_LK = Inp(k_lens=(5, 12), q_lens=(40, 10))
DO_TRANSPOSED = Inp(k_lens=(20, 37), do_layout="transposed")
CAUSAL_SELF = Inp(k_lens=(17, 60, 33), causal=True)
KEY_EDGE = Inp(k_lens=(17, 16))  # one key past a 17-key sequence is the next sequence's first key

# name -> (input, warm-up input run first on the same implementation, or None)
PLAN: dict[str, tuple[Inp, Optional[Inp]]] = {
    "host_o_zeroing_uses_k_offsets": (CROSS_STARTS, None),
    "host_lse_padding_wrong_axis": (START_1, None),
    "host_dkdv_zeroing_skipped_without_sequences": (EMPTY_BATCH, None),
    "host_broadcast_dq_reduce_wrong_view": (BROADCAST, None),
    "host_aligned_ignores_head_dim_stride": (Q_DIM_STRIDED, None),
    "host_aligned_ignores_value_head_dim": (DV24_PADDED, None),
    "host_backward_ignores_sm_scale": (SCALE, None),
    "host_dkdv_tiles_use_block_m": (SELF_MULTI, None),
    "host_delta_preprocess_uses_dkdv_tiles": (CROSS_LQ_GT_LK, None),
    "host_dq_grid_over_kv_heads": (GQA, None),
    "host_plan_cache_keyed_by_totals": (Inp(k_lens=(10, 40)), Inp(k_lens=(40, 10))),
    "host_plan_cache_keyed_by_lengths": (Inp(k_lens=(20, 9), d=40), Inp(k_lens=(20, 9), d=16)),
    "host_preprocess_do_strides_from_o": (DO_TRANSPOSED, None),
    "host_tile_blocks_from_unscheduled_order": (MANY_TILES, None),
    "fwd_alpha_uses_unguarded_max": (BR_CROSS, None),
    "fwd_acc_not_rescaled": (SELF_MULTI, None),
    "fwd_full_end_not_clamped": (BR_CROSS, None),
    "fwd_gqa_interleaved_heads": (GQA, None),
    "fwd_lse_naive_exp": (LARGE_LOGITS, None),
    "fwd_empty_row_divides_by_zero": (EMPTY_KEYS, None),
    "causal_shift_sign_flipped": (BR_CROSS, None),
    "causal_shift_sign_flipped_blind3": (BR_CROSS, None),
    "host_bottom_right_only_when_causal": (BR_CROSS_WINDOW, None),
    "fwd_kv_loop_end_ignores_shift": (BR_CROSS, None),
    "fwd_o_store_masked_by_qk_head_dim": (DV24, None),
    "fwd_v_pointer_uses_k_strides": (DV24, None),
    "fwd_q_ignores_head_dim_stride": (Q_DIM_STRIDED, None),
    "fwd_k_base_pointer_accumulates": (MANY_TILES, None),
    "fwd_key_mask_off_by_one": (KEY_EDGE, None),
    "q_len_from_key_start": (CROSS_STARTS, None),
    "preprocess_mask_ignores_value_head_dim": (DV24, None),
    "preprocess_rows_from_query_start": (BROADCAST, None),
    "dkdv_lse_read_with_kv_head": (GQA, None),
    "dkdv_causal_start_sign": (BR_CROSS, None),
    "dkdv_causal_mask_strict": (CAUSAL_SELF, None),
    "dq_gqa_divides_by_kv_heads": (GQA_6_3, None),
    "dq_rows_use_block_n": (CAUSAL_SELF, None),
    "dq_kv_loop_end_off_by_one": (CAUSAL_SELF, None),
    "dq_probabilities_unshifted_exp": (LARGE_LOGITS, None),
}


def describe(inp: Inp) -> str:
    base = Inp(k_lens=())
    parts = [f"{f}={getattr(inp, f)}" for f in inp.__dataclass_fields__ if getattr(inp, f) != getattr(base, f)
             or f in ("k_lens", "hq", "hkv", "d")]
    return ", ".join(parts).replace("torch.", "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="mutant names to check (default: all)")
    args = parser.parse_args(argv)

    warnings.filterwarnings("ignore", category=RuntimeWarning)  # NumPy overflow/NaN notes from the interpreter
    select_device("cpu")  # TRITON_INTERPRET=1, before any kernel module is imported
    torch.use_deterministic_algorithms(True)  # torch.empty float tensors come back NaN-filled
    from jfa_verify.fuzz.mutation import load_catalogue
    from jfa_verify.kernels.triton_jfa import build

    cat = load_catalogue(str(CATALOGUE))
    names = args.only or list(cat.mutants)
    missing = sorted(set(names) - set(PLAN))
    if missing:
        print(f"no input planned for: {missing}")
        return 1

    base_cache: dict = {}
    failures = 0
    print(f"{'mutant':48s} {'target':8s} applies  {'max|diff| vs float64':>22s}  output  "
          f"(unmutated kernel on the same input)")
    for name in names:
        mutant = cat[name]
        inp, warm = PLAN[name]
        try:
            cat.mutated_source(name)
            applies = "yes"
        except Exception as e:  # noqa: BLE001
            print(f"{name:48s} {mutant.target:8s} no       {type(e).__name__}: {e}")
            failures += 1
            continue
        key = (inp, warm)
        if key not in base_cache:
            base = build()
            if warm is not None:
                run_impl(base, warm)
            got, ref = run_impl(base, inp)
            base_cache[key] = (max_diff(got, ref), tolerance(ref))
        (base_d, base_out), tol = base_cache[key]
        try:
            impl = cat.build(name)
            if warm is not None:
                run_impl(impl, warm)
            got, ref = run_impl(impl, inp)
            d, out = max_diff(got, ref)
            shown = "nan/inf" if math.isinf(d) else f"{d:.3e}"
            differs = d > tol
        except Exception as e:  # noqa: BLE001  (a raising mutant is detected too)
            shown, out, differs = f"raised {type(e).__name__}", str(e).splitlines()[0][:60] if str(e) else "", True
            if "--traceback" in sys.argv:
                traceback.print_exc()
        verdict = "DIFFERS" if differs else "SAME (equivalent on this input!)"
        print(f"{name:48s} {mutant.target:8s} {applies:8s} {shown:>22s}  {out:6s}  (base {base_d:.1e} {base_out}; "
              f"tol {tol:.1e}) {verdict}")
        if not differs or base_d > tol:
            failures += 1
    print()
    print("inputs:")
    for name in names:
        inp, warm = PLAN[name]
        w = f"  after warm-up [{describe(warm)}]" if warm is not None else ""
        print(f"  {name}: {describe(inp)}{w}")
    print()
    print(f"{len(names) - failures}/{len(names)} mutants apply and differ from the float64 reference "
          f"(unmutated kernel within tolerance on every input)" if not failures else f"{failures} problem(s)")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
