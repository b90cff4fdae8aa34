"""Judging in batches gives the verdicts judging one piece at a time gives.

* the float64 reference padded in length groups equals it one sequence at a time (to 1e-12 of each output's size),
  on drawn jagged batches of every mode (self, cross, broadcast-Q), GQA, both causal alignments and windows;
* the padded SDPA oracle, its rows gathered in one pass, gives the same bits as before (its grouping by length
  rounds as SDPA of another batch size does: the tests of ``tests/test_oracles.py`` hold it to the reference);
* the packed judge, which measures every part of an output at once, gives per part the verdicts of
  ``compare_output`` on that part's cut, whatever the kernel got wrong (noise, NaN, infinities).
"""

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from jfa_verify.judge.budgets import default_table, precision_of
from jfa_verify.judge.compare import OUTPUTS, compare_output
from jfa_verify.judge.packing import judge_parts
from jfa_verify.oracles import padded_sdpa_attention, reference_attention
from jfa_verify.protocol.registry import get_kernel
from jfa_verify.strategies import cases, packs


def _drawn(strategy, count: int, seed: int) -> list:
    """The first ``count`` examples Hypothesis draws from ``strategy`` under ``seed`` (no database: the same ones
    on every machine)."""
    got = []

    @hypothesis_seed(seed)
    @settings(database=None, deadline=None, max_examples=count, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(x=strategy)
    def collect(x):
        got.append(x)

    collect()
    return got[:count]


KINDS = [dict(modes=["self"], causal=True), dict(modes=["cross"], causal=True), dict(modes=["broadcast_q"]),
         dict(modes=["self"], window=True), dict(modes=["cross"], causal=False, window=False)]


def test_index_put_accumulates_as_index_add_does():
    # the float64 reference adds each group's gradients with index_put_(accumulate=True), not the CPU's slow
    # index_add_: the same sums in the same order, bit for bit, repeated rows (broadcast-Q's dQ) included
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        rows, n = int(torch.randint(1, 30, (), generator=gen)), int(torch.randint(1, 90, (), generator=gen))
        index = torch.randint(0, rows, (n,), generator=gen)
        src = torch.randn(n, 3, 5, dtype=torch.float64, generator=gen) * 10.0 ** torch.randint(-6, 6, (n, 1, 1),
                                                                                                generator=gen)
        base = torch.randn(rows, 3, 5, dtype=torch.float64, generator=gen)
        assert torch.equal(base.clone().index_add_(0, index, src),
                           base.clone().index_put_((index,), src, accumulate=True))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
def test_drawn_reference_in_groups_equals_it_one_sequence_at_a_time(kind, monkeypatch):
    import jfa_verify.oracles.float64 as mod

    drawn = _drawn(cases(get_kernel("triton_jfa"), device_type="cpu", gqa=True, **kind), 6, 1)
    assert any(c.batch > 1 for c in drawn)
    for case in drawn:
        t = case.materialize("cpu")
        problem = case.problem(t)
        with monkeypatch.context() as m:
            grouped = reference_attention(problem, t.q, t.k, t.v, do=t.do, by_sequence=True)
            m.setattr(mod, "GROUP_SCORE_ELEMENTS", 1)  # every sequence alone, unpadded
            # (a batch with no score at all stays one group: there is nothing to pad)
            assert all(len(g) == 1 for g in mod.sequence_groups(problem)) or not any(
                problem.q_lengths[b] * problem.k_lengths[b] for b in range(problem.batch))
            alone = reference_attention(problem, t.q, t.k, t.v, do=t.do, by_sequence=True)
        assert grouped.keys() == alone.keys()
        for name, a in grouped.items():
            b = alone[name]
            assert torch.equal(torch.isinf(a), torch.isinf(b)) and not a.isnan().any(), (name, case.describe())
            fin = torch.isfinite(b)
            size = max(1.0, float(b[fin].abs().max())) if bool(fin.any()) else 1.0
            if bool(fin.any()):
                assert float((a[fin] - b[fin]).abs().max()) <= 1e-12 * size, (name, case.describe())


def _gather_as_it_was(x, index, requires_grad):
    """The SDPA oracle's row gather before it used ``index_select``: advanced indexing."""
    if x.shape[0] == 0:
        return x.new_zeros(*index.shape, *x.shape[1:]).requires_grad_(requires_grad)
    return x.detach()[index].requires_grad_(requires_grad)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
def test_padded_sdpa_gathering_rows_in_one_pass_changes_no_bit(kind, monkeypatch):
    """The guarantee the same-dtype oracle keeps: its rows are gathered with ``index_select`` (a copy, ~10x faster
    on the CPU than advanced indexing) and its gradients added without a host sync, and every output is the same
    bits as before. (Its grouping by length is no such guarantee: SDPA of another batch size may round otherwise,
    on the CPU up to ~2e-5 of an output's size in float32 even where no group pads; the tests of
    ``tests/test_oracles.py`` hold the grouped oracle to the float64 reference.)"""
    import jfa_verify.oracles.padded_sdpa as mod

    drawn = _drawn(cases(get_kernel("triton_jfa"), device_type="cpu", gqa=True, **kind), 6, 2)
    assert any(c.batch > 1 for c in drawn)
    for case in drawn:
        t = case.materialize("cpu")
        problem = case.problem(t)
        now = padded_sdpa_attention(problem, t.q, t.k, t.v, do=t.do)
        with monkeypatch.context() as m:
            m.setattr(mod, "_gather", _gather_as_it_was)
            before = padded_sdpa_attention(problem, t.q, t.k, t.v, do=t.do)
        for name in ("o", "lse", "dq", "dk", "dv"):
            assert torch.equal(now[name], before[name]), (name, case.describe())


def _one_part_at_a_time(case, got, ref, sdpa):
    """The packed judge as it was: ``compare_output`` on each part's cut of each output."""
    row = precision_of(case.torch_dtype)
    table = default_table()
    verdicts, first = [], 0
    for (n, _), (q_rows, k_rows) in zip(case.parts, case.part_rows()):
        failing = []
        for name in (o for o in OUTPUTS if o in ref and o in got):
            def cut(x):
                if name == "lse":
                    return x[:, q_rows.start: q_rows.stop]
                rows = q_rows if name in ("o", "dq") else k_rows
                return x[rows.start: rows.stop]
            scales = [float(ref[f"{name}_{kind}_by_sequence"][first: first + n].max())
                      if n and f"{name}_{kind}_by_sequence" in ref else 0.0 for kind in ("lowp", "acc")]
            cmp = compare_output(name, cut(got[name]), cut(sdpa[name]), cut(ref[name]), case.torch_dtype, *scales,
                                 budget=table.budget(row, name), precision=row)
            if not cmp.passed:
                failing.append(name)
        verdicts.append(failing)
        first += n
    return verdicts


def _spoiled(got: dict, ref: dict, gen: torch.Generator) -> list[dict]:
    """Kernel outputs wrong in the ways a verdict turns on: noise of several sizes on a few rows, a NaN, an
    infinity where the reference is finite, an infinity of the wrong sign."""
    out = [got]
    for size in (1e-6, 1e-3, 3e-2, 1.0):
        bad = {k: v.clone(memory_format=torch.contiguous_format) for k, v in got.items()}
        for name, x in bad.items():
            if x.numel():
                flat = x.view(-1)
                at = torch.randint(0, flat.numel(), (3,), generator=gen)
                scale = float(ref[name][torch.isfinite(ref[name])].abs().max()) if torch.isfinite(ref[name]).any() \
                    else 1.0
                flat[at] += (size * max(scale, 1e-3)) * torch.randn(3, generator=gen).to(flat.dtype)
        out.append(bad)
    for name in ("o", "lse", "dk"):
        x = got.get(name)
        if x is None or not x.numel():
            continue
        finite, minus = torch.isfinite(ref[name]).view(-1), torch.isneginf(ref[name]).view(-1)
        for pick, value in ((finite, float("nan")), (finite, float("inf")), (minus, float("inf"))):
            where = torch.nonzero(pick)
            if len(where):
                bad = dict(got)
                bad[name] = x.clone(memory_format=torch.contiguous_format)
                bad[name].view(-1)[where[int(torch.randint(0, len(where), (), generator=gen))]] = value
                out.append(bad)
    return out


def test_packed_judge_measuring_every_part_at_once_gives_each_part_its_own_verdict():
    drawn = [c for c in _drawn(packs(get_kernel("triton_jfa"), device_type="cpu", size=5), 40, 3)
             if c.parts is not None][:8]
    assert len(drawn) >= 4
    gen = torch.Generator().manual_seed(0)
    seen = set()
    for case in drawn:
        t = case.materialize("cpu")
        problem = case.problem(t)
        ref = reference_attention(problem, t.q, t.k, t.v, do=t.do, by_sequence=True)
        sdpa = padded_sdpa_attention(problem, t.q, t.k, t.v, do=t.do)
        kernel = {k: sdpa[k].float() if k == "lse" else sdpa[k] for k in ("o", "lse", "dq", "dk", "dv")}
        for got in _spoiled(kernel, ref, gen):
            batched, alone = judge_parts(case, got, ref, sdpa), _one_part_at_a_time(case, got, ref, sdpa)
            assert batched == alone, case.describe()
            seen.update(bool(f) for f in batched)
    assert seen == {True, False}  # both verdicts were reached, so the agreement means something


def test_an_output_and_a_packs_parts_are_judged_with_one_read_from_the_device(monkeypatch):
    # on a GPU every .item(), bool(tensor) or .tolist() waits for the device: compare_output made about fourteen per
    # output and judge_parts that per part and output; each now reads its numbers back in one .tolist()
    case = _drawn(packs(get_kernel("triton_jfa"), device_type="cpu", size=5, modes=["self"]), 40, 4)
    case = next(c for c in case if c.parts is not None and len(c.parts) > 2)
    t = case.materialize("cpu")
    problem = case.problem(t)
    ref = reference_attention(problem, t.q, t.k, t.v, do=t.do, by_sequence=True)
    sdpa = padded_sdpa_attention(problem, t.q, t.k, t.v, do=t.do)
    got = {k: sdpa[k].clone() for k in ("o", "lse", "dq", "dk", "dv")}
    got["o"].view(-1)[0] = float("nan")
    reads = []
    host = {id(v) for k, v in ref.items() if k.endswith("_by_sequence")}  # made on the host by the reference

    def counted(method):
        real = getattr(torch.Tensor, method)

        def read(self, *args):
            if id(self) not in host:
                reads.append(method)
            return real(self, *args)
        return read

    for method in ("item", "tolist", "__bool__", "__float__"):
        monkeypatch.setattr(torch.Tensor, method, counted(method))
    verdicts = judge_parts(case, got, ref, sdpa)
    assert reads == ["tolist"] and verdicts[0] == ["o"]
    reads.clear()
    cmp = compare_output("o", got["o"], sdpa["o"], ref["o"], case.torch_dtype)
    assert reads == ["tolist"] and cmp.problem == "1 NaN value(s)" and cmp.worst_index == (0, 0, 0)
