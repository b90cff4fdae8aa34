"""Show each planted bug wrong on one small CPU-interpreter input against a float64 reference."""
import os, sys, json, math, time, traceback
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, "/work/main")
import torch
from jfa_verify.cases.case import Case
from fuzz.mutation import load_catalogue
import jfa_verify.kernels.triton_jfa as tj

D = "/tmp/w/blind5"
H = dict(num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float32")
CASES = {
    "gqa_causal": Case(kv_lengths=(17, 0, 33, 5), causal=True, **H),
    "cross_br": Case(kv_lengths=(9, 35, 17), q_lengths=(20, 3, 40), mode="cross", causal=True,
                     causal_alignment="bottom_right", **H),
    "cross_tl": Case(kv_lengths=(20, 9), q_lengths=(40, 5), mode="cross", causal=True, **H),
    "window": Case(kv_lengths=(40, 21), window=(3, 1), **H),
    "window2": Case(kv_lengths=(60, 7), window=(1, 20), **H),
    "window_br": Case(kv_lengths=(25, 12), q_lengths=(10, 30), mode="cross", window=(4, 2),
                      causal_alignment="bottom_right", **H),
    "window_unb": Case(kv_lengths=(10, 4), q_lengths=(40, 6), mode="cross", window=(-1, 2), **H),
    "broadcast": Case(kv_lengths=(17, 0, 33), mode="broadcast_q", broadcast_q_len=20, **H),
    "offs_start": Case(kv_lengths=(33, 15, 0, 17), causal=True, offsets_dtype="int64", offsets_start=5, **H),
    "nonpow2": Case(kv_lengths=(17, 20), num_heads_q=2, num_heads_kv=2, head_dim=40, head_dim_v=24, dtype="float32"),
    "strided": Case(kv_lengths=(20, 9), causal=True, layout="strided", **H),
    "sparse": Case(kv_lengths=(70, 30), num_heads_q=2, num_heads_kv=1, head_dim=16, dtype="float32",
                   block_sparsity={"block_m": 64, "block_n": 16, "pattern": "topk", "ratio": 0.7}),
}


def strided_hd():
    g = torch.Generator().manual_seed(1)
    lens = (20, 9); T = sum(lens)
    def mk(h, d):
        buf = torch.randn(T, h, 2 * d, generator=g)
        return buf[..., ::2]
    q, k, v = mk(4, 16), mk(2, 16), mk(2, 16)
    off = torch.tensor([0, 20, 29], dtype=torch.int32)
    do = torch.randn(T, 4, 16, generator=g)
    return dict(q=q, k=k, v=v, qo=off, ko=off, do=do, causal=False, align="top_left", window=None, bq=False,
                blocks=None, bm=None, bn=None, scales=None)


def mx_inputs():
    g = torch.Generator().manual_seed(2)
    lens = (20, 37); T = sum(lens); hq, hkv, d, dv = 4, 2, 32, 64
    def mk(h, dd):
        x = (torch.randn(T, h, dd, generator=g) * 2).to(torch.float8_e4m3fn)
        s = torch.randint(122, 133, (T, h, dd // 32), generator=g).to(torch.uint8)
        return x, s
    (q, sq), (k, sk), (v, sv) = mk(hq, d), mk(hkv, d), mk(hkv, dv)
    off = torch.tensor([0, 20, 57], dtype=torch.int32)
    from jfa_verify.core.mxfp8 import BlockScales
    return dict(q=q, k=k, v=v, qo=off, ko=off, do=None, causal=False, align="top_left", window=None, bq=False,
                blocks=None, bm=None, bn=None, scales=BlockScales(sq, sk, sv))


def from_case(c):
    t = c.materialize("cpu")
    sel = t.block_selection
    return dict(q=t.q, k=t.k, v=t.v, qo=t.q_offsets, ko=t.k_offsets, do=t.do, causal=c.causal,
                align=c.causal_alignment, window=c.window, bq=c.mode == "broadcast_q",
                blocks=c.selected_blocks(), bm=None if sel is None else c.block_sparsity.block_m,
                bn=None if sel is None else c.block_sparsity.block_n, sel=sel, scales=None)


def deq(x, s):
    x = x.to(torch.float64)
    if s is None:
        return x
    f = torch.pow(2.0, s.to(torch.float64) - 127).repeat_interleave(32, dim=2)
    return x * f


def reference(inp):
    """float64 per-sequence softmax attention; returns o, lse, dq, dk, dv (grads None for MX)."""
    sc = inp["scales"]
    q = deq(inp["q"], None if sc is None else sc.q).detach().requires_grad_(True)
    k = deq(inp["k"], None if sc is None else sc.k).detach().requires_grad_(True)
    v = deq(inp["v"], None if sc is None else sc.v).detach().requires_grad_(True)
    ko = [int(x) for x in inp["ko"]]
    B = len(ko) - 1
    hq, hkv, d = q.shape[1], k.shape[1], q.shape[2]
    G = hq // hkv
    scale = 1 / math.sqrt(d)
    if inp["bq"]:
        L = q.shape[0]; qo = [b * L for b in range(B + 1)]; rows = B * L
    else:
        qo = [int(x) for x in inp["qo"]]; rows = q.shape[0]
    o = torch.zeros(rows, hq, v.shape[2], dtype=torch.float64)
    lse = torch.full((hq, rows), float("-inf"), dtype=torch.float64)
    o_parts = []
    for b in range(B):
        qs, qe, ks, ke = qo[b], qo[b + 1], ko[b], ko[b + 1]
        Lq, Lk = qe - qs, ke - ks
        if Lq == 0:
            continue
        qb = q if inp["bq"] else q[qs:qe]
        kb, vb = k[ks:ke], v[ks:ke]
        i = torch.arange(Lq)[:, None]; j = torch.arange(Lk)[None, :]
        shift = (Lk - Lq) if inp["align"] == "bottom_right" else 0
        vis = torch.ones(Lq, Lk, dtype=torch.bool)
        if inp["causal"]:
            vis &= j <= i + shift
        if inp["window"] is not None:
            l, r = inp["window"]
            if l >= 0: vis &= j >= i + shift - l
            if r >= 0: vis &= j <= i + shift + r
        if inp["blocks"] is not None:
            selm = torch.zeros(Lq, Lk, dtype=torch.bool)
            for qb_i, kvs in enumerate(inp["blocks"][b]):
                for kb_i in kvs:
                    selm[qb_i * inp["bm"]:(qb_i + 1) * inp["bm"], kb_i * inp["bn"]:(kb_i + 1) * inp["bn"]] = True
            vis &= selm
        outs = []
        for h in range(hq):
            s = (qb[:, h] @ kb[:, h // G].T) * scale
            s = s.masked_fill(~vis, float("-inf"))
            m = s.max(-1).values if Lk > 0 else torch.full((Lq,), float("-inf"), dtype=torch.float64)
            ms = torch.where(torch.isinf(m), torch.zeros_like(m), m).detach()
            p = torch.exp(s - ms[:, None]) if Lk > 0 else s
            lsum = p.sum(-1)
            ob = (p @ vb[:, h // G]) / torch.where(lsum > 0, lsum, torch.ones_like(lsum))[:, None]
            outs.append(ob)
            lse[h, qs:qe] = torch.where(lsum > 0, ms + torch.log(torch.where(lsum > 0, lsum, torch.ones_like(lsum))),
                                        torch.full_like(lsum, float("-inf"))).detach()
        o_parts.append((qs, qe, torch.stack(outs, 1)))
    o = o.clone()
    for qs, qe, ob in o_parts:
        o = o.index_put((torch.arange(qs, qe),), ob)
    grads = (None, None, None)
    if inp["do"] is not None and o.requires_grad:
        grads = torch.autograd.grad(o, (q, k, v), inp["do"].to(torch.float64), allow_unused=True)
        grads = tuple(torch.zeros_like(x) if g is None else g for x, g in zip((q, k, v), grads))
    return o.detach(), lse, grads


def run_impl(impl, inp):
    q, k, v = (inp[n].clone().requires_grad_(inp["scales"] is None) for n in "qkv")
    kw = dict(causal=inp["causal"], causal_alignment=inp["align"])
    if inp["window"] is not None:
        kw["window"] = inp["window"]
    if inp.get("sel") is not None:
        kw["block_selection"] = inp["sel"]
    if inp["scales"] is not None:
        kw["block_scales"] = inp["scales"]
    o, lse = impl(q, k, v, inp["qo"] if not inp["bq"] else None, inp["ko"], **kw)
    grads = (None, None, None)
    if inp["do"] is not None:
        grads = torch.autograd.grad(o, (q, k, v), inp["do"], allow_unused=True)
    return o.detach(), lse.detach(), grads


def compare(got, ref, mx):
    o, lse, g = got; ro, rlse, rg = ref
    msgs = []
    def err(a, b, name, tol):
        a = a.to(torch.float64); b = b.to(torch.float64)
        if a.shape != b.shape:
            msgs.append(f"{name}: shape {tuple(a.shape)} vs {tuple(b.shape)}"); return
        if torch.isnan(a).any():
            msgs.append(f"{name}: NaN"); return
        e = (a - b).abs().max().item() if a.numel() else 0.0
        s = b.abs().max().item() if b.numel() else 0.0
        if e > tol * (1 + s):
            msgs.append(f"{name}: err {e:.3g} (scale {s:.3g})")
    tol = 0.1 if mx else 2e-3
    err(o, ro, "o", tol)
    fin = torch.isfinite(rlse)
    if not torch.equal(torch.isfinite(lse) , fin) or torch.isnan(lse).any():
        msgs.append(f"lse: finite pattern differs ({(torch.isfinite(lse) != fin).sum().item()} entries)")
    else:
        err(lse[fin], rlse[fin], "lse", 0.05 if mx else 2e-3)
    if g[0] is not None:
        for a, b, n in zip(g, rg, ("dq", "dk", "dv")):
            err(a, b, n, tol)
    return msgs


def main():
    only = sys.argv[1:]
    cfgs = json.load(open(f"{D}/cfgs.json"))
    inputs = {n: from_case(c) for n, c in CASES.items()}
    inputs["strided_hd"] = strided_hd()
    inputs["mx"] = mx_inputs()
    refs = {n: reference(i) for n, i in inputs.items()}
    base, base_mx = tj.build(), tj.build_mxfp8()
    results = {"baseline": {}, "mutants": {}}
    needed = sorted(set(c for n, cs in cfgs.items() if not only or n in only for c in cs))
    for n in needed:
        t0 = time.time()
        got = run_impl(base_mx if n == "mx" else base, inputs[n])
        msgs = compare(got, refs[n], n == "mx")
        results["baseline"][n] = msgs
        print(f"[baseline] {n}: {'RIGHT' if not msgs else 'WRONG ' + '; '.join(msgs)} ({time.time()-t0:.1f}s)", flush=True)
    for path in (f"{D}/catalogue.json", f"{D}/catalogue_mxfp8.json"):
        cat = load_catalogue(path)
        for name in cat.mutants:
            if only and name not in only:
                continue
            verdict = None
            for c in cfgs[name]:
                t0 = time.time()
                try:
                    impl = cat.build(name)
                    msgs = compare(run_impl(impl, inputs[c]), refs[c], c == "mx")
                except Exception as e:
                    msgs = [f"raised {type(e).__name__}: {str(e)[:200]}"]
                print(f"[{name}] {c}: {'shown wrong: ' + '; '.join(msgs) if msgs else 'not shown'} "
                      f"({time.time()-t0:.1f}s)", flush=True)
                if msgs:
                    verdict = (c, msgs); break
            results["mutants"][name] = verdict
    ok = sum(v is not None for v in results["mutants"].values())
    print(f"shown wrong: {ok}/{len(results['mutants'])}; baseline right on all: "
          f"{all(not m for m in results['baseline'].values())}")
    json.dump(results, open(f"{D}/show_results{'_partial' if only else ''}.json", "w"), indent=1, default=str)


if __name__ == "__main__":
    main()
