"""For each blind3 mutant: one small valid case the unmutated triton_jfa passes and the mutant fails (CPU interpreter).

Run from /work/main:  TRITON_INTERPRET=1 python docs/evidence/detection-2026-12-04/blind3/show.py
"""
import json
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

from jfa_verify import run_case  # noqa: E402
from jfa_verify.cases.case import Case  # noqa: E402
from jfa_verify.fuzz.mutation import load_catalogue  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CAT = os.path.join(HERE, "catalogue.json")

F = dict(dtype="float32", head_dim=16, num_heads_q=2, num_heads_kv=2)


def C(**kw):
    args = dict(F)
    args.update(kw)
    return Case(**args)


CASES = {
    "fwd_causal_full_end_from_last_row": C(kv_lengths=(40,), causal=True),
    "fwd_causal_hi_drops_diagonal": C(kv_lengths=(33,), causal=True),
    "causal_shift_sign_flipped": C(kv_lengths=(30,), q_lengths=(10,), mode="cross", causal=True,
                                   causal_alignment="bottom_right"),
    "window_left_edge_exclusive": C(kv_lengths=(40,), window=(4, 4)),
    "fwd_gqa_q_head_uses_kv_head": C(kv_lengths=(20,), num_heads_q=2, num_heads_kv=1),
    "fwd_l_not_rescaled": C(kv_lengths=(40,)),
    "fwd_lse_stored_base2": C(kv_lengths=(20,)),
    "pre_delta_rows_from_q_start": C(kv_lengths=(20, 12), mode="broadcast_q", broadcast_q_len=8),
    "dkdv_causal_m_lo_wrong_block": C(kv_lengths=(64,), causal=True),
    "dkdv_window_m_hi_drops_left": C(kv_lengths=(48,), window=(20, 0)),
    "dkdv_gqa_interleaved_heads": C(kv_lengths=(20,), num_heads_q=4, num_heads_kv=2),
    "dkdv_lse_not_base2": C(kv_lengths=(20,)),
    "dkdv_dk_scaled_by_qk_scale": C(kv_lengths=(20,)),
    "dq_gqa_divides_by_num_heads": C(kv_lengths=(20,), num_heads_q=4, num_heads_kv=2),
    "dq_causal_excludes_diagonal": C(kv_lengths=(20,), causal=True),
    "dq_broadcast_rows_from_q_start": C(kv_lengths=(20, 12), mode="broadcast_q", broadcast_q_len=8),
    "host_fwd_scale_missing_log2e": C(kv_lengths=(20,)),
    "host_lse_init_zero": C(kv_lengths=(20,), offsets_start=5),
    "host_fwd_lse_wrong_stride": C(kv_lengths=(20,)),
    "host_dq_grid_kv_heads": C(kv_lengths=(20,), num_heads_q=2, num_heads_kv=1),
    "host_broadcast_dq_sum_wrong_axis": C(kv_lengths=(20, 12), mode="broadcast_q", broadcast_q_len=8),
    "host_bottom_right_only_when_causal": C(kv_lengths=(30,), q_lengths=(10,), mode="cross", window=(3, 3),
                                            causal_alignment="bottom_right"),
    "host_window_unbounded_as_zero": C(kv_lengths=(40,), window=(4, -1)),
    "host_aligned_ignores_dim_stride": C(kv_lengths=(20,), layout="head_dim_strided"),
    "host_dk_uninitialized": C(kv_lengths=(20,), offsets_start=5),
}


def main(names):
    cat = load_catalogue(CAT)
    ok = True
    lines = []
    names = names or [m["name"] for m in json.load(open(CAT))["mutants"]]
    for name in names:
        case = CASES[name]
        base = run_case(case, "triton_jfa", "cpu")
        mut = run_case(case, cat.kernel_of(name), "cpu")
        shown = base.status == "pass" and mut.status != "pass"
        ok &= shown
        print(f"{name}: unmutated={base.status} mutant={mut.status} shown={shown}", flush=True)
        lines.append(case.to_json() if hasattr(case, "to_json") else repr(case))
    if len(names) == len(CASES):
        with open(os.path.join(HERE, "show_cases.txt"), "w") as f:
            f.write("\n".join(l.replace("\n", " ") for l in lines) + "\n")
    print("ALL SHOWN" if ok else "SOME NOT SHOWN")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
