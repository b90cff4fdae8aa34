"""Shows each planted bug of catalogue.json is real: one small float32 input per mutant, run on the CPU interpreter
through the real triton_jfa and through the mutant (built by fuzz/mutation.py's Catalogue.build), both compared
with a float64 per-sequence softmax-attention reference written here. Output: show_cases.txt.

Usage: TRITON_INTERPRET=1 python show.py [NAME ...]
"""
import math
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from jfa_verify.cases.case import Case  # noqa: E402
from jfa_verify.core.selection import BlockSelection  # noqa: E402
from jfa_verify.fuzz.mutation import load_catalogue  # noqa: E402
from jfa_verify.kernels.triton_jfa import build  # noqa: E402

HERE = "/tmp/w/blind4"
H = dict(head_dim=16, dtype="float32")

# mutant -> (Case, optional selection spec (block_m, block_n, [kv blocks per flattened query block]))
CASES = {
    "fwd_full_end_from_last_row": Case(kv_lengths=(50,), causal=True, **H),
    "causal_shift_sign_flipped": Case(kv_lengths=(25, 12), q_lengths=(10, 20), mode="cross", causal=True,
                                      causal_alignment="bottom_right", **H),
    "fwd_no_safe_max": Case(kv_lengths=(8,), q_lengths=(20,), mode="cross", causal=True,
                            causal_alignment="bottom_right", **H),
    "fwd_empty_row_division": Case(kv_lengths=(0, 9), q_lengths=(5, 7), mode="cross", **H),
    "fwd_window_lo_uses_right_side": Case(kv_lengths=(60,), causal=True, window=(20, 0), **H),
    "fwd_window_hi_off_by_one": Case(kv_lengths=(40,), window=(4, 1), **H),
    "fwd_acc_not_rescaled": Case(kv_lengths=(40,), **H),
    "dkdv_window_rows_cols_swapped": Case(kv_lengths=(40,), window=(5, 1), **H),
    "dkdv_causal_row_start_shift_sign": Case(kv_lengths=(70,), q_lengths=(40,), mode="cross", causal=True,
                                             causal_alignment="bottom_right", **H),
    "dkdv_gqa_interleaved_heads": Case(kv_lengths=(20,), num_heads_q=4, num_heads_kv=2, **H),
    "dkdv_dv_store_mask_uses_d": Case(kv_lengths=(20,), head_dim_v=32, head_dim=16, dtype="float32"),
    "dq_causal_hi_off_by_one": Case(kv_lengths=(17,), causal=True, **H),
    "dq_broadcast_rows_from_q_start": Case(kv_lengths=(12, 20, 7), mode="broadcast_q", broadcast_q_len=10, **H),
    "dq_mask_dropped": Case(kv_lengths=(20,), causal=True, **H),
    "dq_sparse_tile_as_block": (Case(kv_lengths=(70,), **H), (64, 16, [[0, 2], [1, 3, 4]])),
    "preprocess_broadcast_rows_from_q_start": Case(kv_lengths=(12, 20, 7), mode="broadcast_q",
                                                   broadcast_q_len=10, **H),
    "host_window_alignment_only_when_causal": Case(kv_lengths=(30,), q_lengths=(10,), mode="cross", window=(3, 2),
                                                   causal_alignment="bottom_right", **H),
    "host_aligned_ignores_head_dim_stride": Case(kv_lengths=(20,), layout="head_dim_strided", **H),
    "host_unbounded_window_too_short": Case(kv_lengths=(6,), q_lengths=(40,), mode="cross", window=(-1, 2), **H),
    "host_lse_init_zero": Case(kv_lengths=(10, 7), offsets_start=5, **H),
    "dkdv_sparse_tile_as_block": (Case(kv_lengths=(40,), **H), (32, 32, [[0], [0, 1]])),
    "fwd_mx_key_scale_row_ignores_group": "mx",
    "host_preprocess_head_dim_v": Case(kv_lengths=(20,), head_dim_v=32, head_dim=16, dtype="float32"),
    "host_broadcast_dq_sum_layout": Case(kv_lengths=(12, 20, 7), mode="broadcast_q", broadcast_q_len=10, **H),
    "host_preprocess_persistent_arrays": Case(kv_lengths=(40, 50, 70, 33, 20), **H),
    "host_fwd_grid_kv_heads": Case(kv_lengths=(20,), num_heads_q=4, num_heads_kv=2, **H),
}


def selection_of(spec, case, t):
    bm, bn, blocks = spec
    offsets, indices = [0], []
    for bl in blocks:
        indices += bl
        offsets.append(len(indices))
    return BlockSelection(bm, bn, torch.tensor(offsets, dtype=torch.int32), torch.tensor(indices, dtype=torch.int32))


def reference(case, t, spec):
    """float64 per-sequence softmax attention: (o, lse, dq, dk, dv)."""
    q, k, v, do = (x.detach().double().clone().requires_grad_(x is not t.do) for x in (t.q, t.k, t.v, t.do))
    koff = t.k_offsets.tolist()
    bcast = case.mode == "broadcast_q"
    qoff = None if bcast else t.q_offsets.tolist()
    hq, hkv = q.shape[1], k.shape[1]
    g = hq // hkv
    d = q.shape[2]
    scale = case.sm_scale if case.sm_scale is not None else 1 / math.sqrt(d)
    B = len(koff) - 1
    lq_b = q.shape[0] if bcast else None
    rows = B * lq_b if bcast else q.shape[0]
    o = torch.zeros(rows, hq, v.shape[2], dtype=torch.float64)
    lse = torch.full((hq, rows), float("-inf"), dtype=torch.float64)
    outs = []
    qblk_start = 0
    for b in range(B):
        ks, ke = koff[b], koff[b + 1]
        if bcast:
            qs, qe, os_ = 0, lq_b, b * lq_b
        else:
            qs, qe = qoff[b], qoff[b + 1]
            os_ = qs
        Lq, Lk = qe - qs, ke - ks
        qb, kb, vb = q[qs:qe], k[ks:ke], v[ks:ke]
        kb = kb.repeat_interleave(g, dim=1)
        vb = vb.repeat_interleave(g, dim=1)
        s = torch.einsum("ihd,jhd->hij", qb, kb) * scale  # [H, Lq, Lk]
        i = torch.arange(Lq)[:, None]
        j = torch.arange(Lk)[None, :]
        shift = (Lk - Lq) if case.causal_alignment == "bottom_right" else 0
        mask = torch.ones(Lq, Lk, dtype=torch.bool)
        if case.causal:
            mask &= j <= i + shift
        if case.window is not None:
            left, right = case.window
            if left >= 0:
                mask &= j >= i + shift - left
            if right >= 0:
                mask &= j <= i + shift + right
        if spec is not None:
            bm, bn, blocks = spec
            sel = torch.zeros(Lq, Lk, dtype=torch.bool)
            nqb = -(-Lq // bm)
            for r in range(Lq):
                for c in range(Lk):
                    sel[r, c] = (c // bn) in blocks[qblk_start + r // bm]
            qblk_start += nqb
            mask &= sel
        anyk = mask.any(-1)  # [Lq]
        sm = torch.where(mask, s, torch.tensor(float("-inf"), dtype=torch.float64))
        sm = torch.where(anyk[:, None], sm, torch.zeros((), dtype=torch.float64))
        p = torch.softmax(sm, -1) * anyk[:, None]
        ob = torch.einsum("hij,jhd->ihd", p, vb)
        lb = torch.where(anyk, torch.logsumexp(sm, -1), torch.tensor(float("-inf"), dtype=torch.float64))
        outs.append((os_, ob))
        lse[:, os_:os_ + Lq] = lb.detach()
    o = o.clone()
    for os_, ob in outs:
        o = torch.cat([o[:os_], ob, o[os_ + ob.shape[0]:]], 0) if ob.shape[0] else o
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do, allow_unused=True)
    z = lambda g_, x: torch.zeros_like(x) if g_ is None else g_  # noqa: E731
    return o.detach(), lse, z(dq, q), z(dk, k), z(dv, v)


def run_impl(impl, case, t, spec):
    q, k, v = (x.detach().clone() for x in (t.q, t.k, t.v))
    # keep the case's layout: clone() keeps strides for dense non-overlapping tensors; re-take the case's views
    q, k, v = t.q.detach(), t.k.detach(), t.v.detach()
    for x in (q, k, v):
        x.requires_grad_(True)
    kw = dict(causal=case.causal, causal_alignment=case.causal_alignment)
    if case.window is not None:
        kw["window"] = case.window
    if spec is not None:
        kw["block_selection"] = selection_of(spec, case, t)
    try:
        o, lse = impl(q, k, v, t.q_offsets, t.k_offsets, **kw)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), t.do)
    except Exception as e:  # a raise is reported as such
        for x in (q, k, v):
            x.requires_grad_(False)
        return f"raised {type(e).__name__}: {str(e)[:200]}"
    for x in (q, k, v):
        x.requires_grad_(False)
    return tuple(x.detach().double() for x in (o, lse, dq, dk, dv))


def err(a, b):
    a, b = a.double(), b.double()
    both_inf = torch.isinf(a) & torch.isinf(b) & (torch.sign(a) == torch.sign(b))
    diff = (a - b).abs()
    diff = torch.where(both_inf, torch.zeros_like(diff), diff)
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    return diff.max().item() if diff.numel() else 0.0


def errors(got, ref):
    if isinstance(got, str):
        return got, float("inf")
    parts = {n: err(g, r) for n, g, r in zip(("o", "lse", "dq", "dk", "dv"), got, ref)}
    return " ".join(f"{n}={e:.3g}" for n, e in parts.items()), max(parts.values())


class _MXCase:
    """A hand-built MXFP8 input (forward only): float8 e4m3 q/k/v with random E8M0 block scales, GQA 4/2, D=32."""
    mode, causal, causal_alignment, window, sm_scale = "self", False, "top_left", None, None

    def describe(self):
        return "MXFP8 self full float8_e4m3fn B=2 lengths=(20, 13) H=4/2 D=32, E8M0 scales 2^[-3, 3]"


def run_mx(cat, name):
    from jfa_verify.core.mxfp8 import BlockScales
    from jfa_verify.kernels.triton_jfa._mxfp8 import TritonMXFP8

    g = torch.Generator().manual_seed(0)
    lens, hq, hkv, d = (20, 13), 4, 2, 32
    T = sum(lens)
    off = torch.tensor([0, lens[0], T], dtype=torch.int32)
    x = {n: (torch.randn(T, h, d, generator=g)).to(torch.float8_e4m3fn) for n, h in (("q", hq), ("k", hkv), ("v", hkv))}
    e = {n: torch.randint(124, 131, (T, h, d // 32), generator=g).to(torch.uint8)
         for n, h in (("q", hq), ("k", hkv), ("v", hkv))}
    scales = BlockScales(e["q"], e["k"], e["v"])
    deq = {n: x[n].double() * torch.pow(2.0, e[n].double() - 127).repeat_interleave(32, dim=2) for n in x}

    class T_:
        pass
    t = T_()
    t.q, t.k, t.v, t.q_offsets, t.k_offsets = deq["q"], deq["k"], deq["v"], off, off
    t.do = torch.zeros(T, hq, d, dtype=torch.float64)
    case = _MXCase()
    ref = reference(case, t, None)[:2]

    def go(impl):
        try:
            o, lse = TritonMXFP8(impl)(x["q"], x["k"], x["v"], off, off, block_scales=scales)
        except Exception as ex:
            return f"raised {type(ex).__name__}: {str(ex)[:200]}"
        return o.double(), lse.double()

    def rel(got):
        if isinstance(got, str):
            return got, float("inf")
        eo = err(got[0], ref[0]) / ref[0].abs().max().item()
        el = err(got[1], ref[1])
        return f"o(rel to max|o|)={eo:.3g} lse={el:.3g}", max(eo, el)

    return case, rel(go(build())), rel(go(cat.build(name)))


def main(names):
    cat = load_catalogue(f"{HERE}/catalogue.json")
    real = build()
    lines = []
    names = names or list(cat.mutants)
    ok_all = True
    for name in names:
        item = CASES[name]
        if item == "mx":
            case, (r_desc, r_max), (m_desc, m_max) = run_mx(cat, name)
            shown = r_max < 0.05 and m_max > 0.3
            ok_all &= shown
            line = (f"{name}\n  case: {case.describe()} (forward only; e4m3 P rounding: relative tolerance 0.05)"
                    f"\n  real   max err {r_max:.3g}  ({r_desc})\n  mutant max err {m_max:.3g}  ({m_desc})\n"
                    f"  => {'BUG SHOWN (mutant wrong, real right)' if shown else 'NOT SHOWN'}\n")
            print(line, flush=True)
            lines.append(line)
            continue
        case, spec = item if isinstance(item, tuple) else (item, None)
        t = case.materialize("cpu")
        ref = reference(case, t, spec)
        r_desc, r_max = errors(run_impl(real, case, t, spec), ref)
        m_desc, m_max = errors(run_impl(cat.build(name), case, t, spec), ref)
        shown = r_max < 1e-4 and m_max > 1e-3
        ok_all &= shown
        line = (f"{name}\n  case: {case.describe()}" + (f" selection={spec}" if spec else "") +
                f"\n  real   max err {r_max:.3g}  ({r_desc})\n  mutant max err {m_max:.3g}  ({m_desc})\n"
                f"  => {'BUG SHOWN (mutant wrong, real right)' if shown else 'NOT SHOWN'}\n")
        print(line, flush=True)
        lines.append(line)
    if not sys.argv[1:]:
        with open(f"{HERE}/show_cases.txt", "w") as f:
            f.write("Each mutant vs the real triton_jfa on one float32 CPU-interpreter input, max abs error against a "
                    "float64 per-sequence reference\n(NaN counts as inf; o, lse, dq, dk, dv).\n\n")
            f.write("\n".join(lines))
            f.write(f"\n{sum('BUG SHOWN' in ln for ln in lines)}/{len(lines)} shown\n")
    return ok_all


if __name__ == "__main__":
    main(sys.argv[1:])
