import itertools, traceback, warnings, torch
from jfa_verify.core.contract import validate_inputs
from jfa_verify.oracles import padded_sdpa_attention, reference_attention
dev = torch.device("cuda")
def syncs(lengths):
    off = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32, device=dev)
    q, k, v, do = (torch.randn(int(off[-1]), 2, 16, device=dev) for _ in range(4))
    problem = validate_inputs(q, k, v, off, off, causal=True)
    torch.cuda.synchronize()
    where = []
    def show(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" in str(message):
            st = [f"{f.filename.split('gpu-src/')[-1]}:{f.lineno} {f.name}" for f in traceback.extract_stack()[:-1]
                  if "gpu-src" in f.filename and "sync_where" not in f.filename]
            where.append(" <- ".join(reversed(st[-3:])))
    old = warnings.showwarning; warnings.showwarning = show
    with warnings.catch_warnings():
        warnings.simplefilter("always"); warnings.showwarning = show
        torch.cuda.set_sync_debug_mode("warn")
        try:
            reference_attention(problem, q, k, v, do=do)
            padded_sdpa_attention(problem, q, k, v, do=do)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    warnings.showwarning = old
    return where
for name, lengths in [("few", [64, 60, 50]), ("many", [1, 3, 7, 15, 31, 63, 127, 255, 1000]), ("few again", [64, 60, 50]), ("many again", [1, 3, 7, 15, 31, 63, 127, 255, 1000])]:
    w = syncs(lengths); print(name, len(w))
    for x in w: print("   ", x)
