"""Mutation testing: planted-bug copies of a kernel from a catalogue, the CI profile run against each, a kill table.

A **catalogue** (JSON, format ``jfa-verify-mutants/1``; the public one ships as
package data, ``catalogues/triton_jfa.json``; ``--catalogue FILE`` takes any
other) names the kernel it mutates, a *builder* (``"module:function"``, called
as ``builder(kernels_module=..., host_module=..., scheduler=...)`` to build the
implementation on other modules or another scheduler hook), the modules a
mutant may edit (``targets``), and the mutants:

* a source mutant: ``old`` must occur exactly ``count`` times (default 1) in the
  ``target`` module's source; each is replaced by ``new``, the edited source is
  imported from a private temporary folder (Triton's JIT reads kernel source
  from a file) and the builder wraps it;
* a scheduler mutant: ``scheduler`` names a corruption of
  :data:`CORRUPTIONS` applied to the schedules a persistent kernel is handed;
* ``gpu_only`` marks a mutant that shows only on inputs too large for the CPU
  interpreter (``gpu_reason`` says why); CPU runs skip it.

Per mutant, :func:`run_mutant` runs one *stage* up to the first failure:
``targeted`` (the default) runs a fixed, cheap, targeted set of cases
(:func:`targeted_cases`: tile boundaries +-1 of the kernel's own tiles, empty
sequences, both causal alignments with L_q != L_k, GQA, broadcast-Q, int64
offsets with offsets_start > 0, strided layout), then, if the mutant survived
them, a short shrinking campaign; ``suite`` runs the default suite and its
relation checks (what ``jfa-verify run`` in a CI gate catches); ``campaign`` a
campaign alone. A mutant is *killed* when a case fails (a wrong output, a broken contract or invariant),
when its process dies while running a case (a crash, with ``isolate``) or hangs, or when its kernel raises on
a valid case while it computes others (the raise is then the finding). A kernel that raises on a case and on
every one of :func:`targeted_cases` too (a patch that does not compile, say) is **broken**, not killed: nothing
it computed was judged wrong, so it says nothing of the suite's power (status ``"broken"``; a gate counts it as
a failure, never as a kill).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable, Optional, Sequence

from jfa_verify.cases.case import Case
from jfa_verify.cases.coverage import classify
from jfa_verify.core.device import keeps_device_choice
from jfa_verify.core.errors import InvalidInput, KernelConfigError
from jfa_verify.protocol.kernel import Kernel, tiles_for_shape

__all__ = ["CORRUPTIONS", "Catalogue", "Mutant", "MutantResult", "STAGES", "format_table", "gpu_only_cases",
           "load_catalogue", "register_catalogue", "run_mutant", "run_mutants", "stage_item_name", "targeted_cases"]

FORMAT = "jfa-verify-mutants/1"


# ----------------------------------------------------------------------------- scheduler corruptions


def _drop_last(sms, workloads) -> None:
    busiest = max(range(len(sms)), key=lambda i: len(sms[i]))
    if sms[busiest]:
        sms[busiest].pop()


def _repeat_first(sms, workloads) -> None:
    first = next((t for tiles in sms for t in tiles if not t.sentinel), None)
    if first is not None:
        sms[-1].append(first)


def _run_empty(sms, workloads) -> None:
    empty = next((t for t in workloads if t.rows == 0), None)
    if empty is not None:
        sms[0].append(empty)


CORRUPTIONS: dict[str, Callable] = {
    "drop_last_tile_of_busiest": _drop_last,
    "repeat_first_tile": _repeat_first,
    "run_empty_tile": _run_empty,
}
"""Name -> ``corrupt(sm_tiles, workloads)``, editing per-SM tile lists in place."""


def corrupted_scheduler(name: str, num_sms: int = 3):
    """Zigzag forward/dQ, round-robin dK/dV on ``num_sms`` programs, with corruption ``name`` applied."""
    from jfa_verify.protocol.kernel import PassPlan
    from jfa_verify.scheduling.planning import PersistentScheduler

    corrupt = CORRUPTIONS[name]

    class CorruptedScheduler(PersistentScheduler):
        def __call__(self, workloads, kind, problem):
            planned = super().__call__(workloads, kind, problem)
            sms = [list(t) for t in planned.schedule.sm_tiles]
            corrupt(sms, planned.workloads)
            broken = dataclasses.replace(planned.schedule, sm_tiles=tuple(map(tuple, sms)))
            programs = tuple(tuple(t.index for t in tiles if not t.sentinel) for tiles in broken.sm_tiles)
            return PassPlan(kind, planned.workloads, programs, broken, planned.cluster_size)

    return CorruptedScheduler(num_sms=num_sms)


# ----------------------------------------------------------------------------- catalogues


@dataclass(frozen=True)
class Mutant:
    """One planted bug (see the module docstring)."""

    name: str
    description: str
    target: str = "kernels"
    old: str = ""
    new: str = ""
    count: int = 1
    scheduler: str = ""
    gpu_only: bool = False
    gpu_reason: str = ""


@dataclass
class Catalogue:
    """Mutants of one kernel. ``kernel``: the registered kernel whose capabilities and tile sizes the
    mutants keep; ``builder``: ``"module:function"``; ``targets``: ``{target: module name}``."""

    name: str
    kernel: str
    builder: str
    targets: dict
    mutants: dict
    description: str = ""
    source: str = ""
    _modules: dict = field(default_factory=dict, repr=False)

    def __getitem__(self, name: str) -> Mutant:
        try:
            return self.mutants[name]
        except KeyError:
            raise InvalidInput(f"mutant={name!r} is not in catalogue {self.name!r}; choose from "
                               f"{sorted(self.mutants)}") from None

    def device_reason(self, device) -> Optional[str]:
        """Why the catalogue's kernel cannot run on ``device`` (then every mutant is skipped), or None."""
        from jfa_verify.protocol.registry import get_kernel

        return get_kernel(self.kernel).device_reason(device)

    def mutated_source(self, name: str) -> str:
        """The edited source of mutant ``name``'s target module.

        Raises:
            InvalidInput: ``old`` does not occur exactly ``count`` times (the catalogue is stale).
        """
        mutant = self[name]
        origin = importlib.util.find_spec(self.targets[mutant.target]).origin
        text = Path(origin).read_text()
        found = text.count(mutant.old)
        if found != mutant.count:
            # (ci/kill_table.py knows old JSON rows "killed" by this message by its last words: keep them)
            raise InvalidInput(f"mutant {name!r} of catalogue {self.name!r}: expected {mutant.count} occurrence(s) "
                               f"of {mutant.old!r} in {origin}, found {found}; update the catalogue to the source")
        return text.replace(mutant.old, mutant.new)

    def folder(self) -> Path:
        """Where the mutated modules are written: one folder per catalogue and user, the same in every process,
        so that a tool's report naming a mutated file (compute-sanitizer, by base name) can be read back."""
        return Path(tempfile.gettempdir()) / f"jfa-mutants-{os.getuid() if hasattr(os, 'getuid') else 0}" / self.name

    def module(self, name: str):
        """The mutated target module of source mutant ``name``, imported from :meth:`folder` (cached per
        process; the file is rewritten atomically, so processes that import it at once read whole files)."""
        if name not in self._modules:
            source = self.mutated_source(name)
            # the content's digest in the name: checkouts of other versions never overwrite each other's file
            digest = hashlib.sha256(source.encode()).hexdigest()[:10]
            module_name = f"_jfa_mutant_{self.name}_{name}_{digest}"
            path = self.folder() / f"{module_name}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as tmp:
                tmp.write(source)
            os.replace(tmp.name, path)
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except KernelConfigError as e:
                if e.kernel != self.kernel:
                    raise
                # (a user's one-file kernel, registering itself where its code is: a new user's trial, 2026-12-07)
                raise InvalidInput(
                    f"mutant {name!r} of catalogue {self.name!r}: its target module "
                    f"{self.targets[self[name].target]!r} registers kernel {self.kernel!r} itself, so its mutated "
                    f"copy registers the name again ({e}); keep the register_kernel call in another module (the "
                    f"plugin file, which imports the kernel's code) and name the module holding the code as the "
                    f"catalogue's target") from None
            self._modules[name] = module
        return self._modules[name]

    def check_loadable(self) -> None:
        """Check, before any mutant runs, that every target module can be found and the builder imported.

        Raises:
            InvalidInput: a target module that cannot be imported here, or a builder that is not ``module:function``
                of an importable module (every mutant came out "not judged" with an unrelated reason instead).
        """
        for short, module in self.targets.items():
            try:
                spec = importlib.util.find_spec(module)
            except (ImportError, ValueError) as e:
                spec, why = None, f" ({type(e).__name__}: {e})"
            else:
                why = ""
            if spec is None or spec.origin is None:
                raise InvalidInput(f"catalogue {self.name!r}: target {short!r} is module {module!r}, which cannot be "
                                   f"imported here{why}; name a module of the kernel's code that Python can import "
                                   f"(a --plugin file's folder is on the path)")
        module, _, function = self.builder.partition(":")
        try:
            found = callable(getattr(importlib.import_module(module), function)) if function else False
        except (ImportError, AttributeError) as e:
            raise InvalidInput(f"catalogue {self.name!r}: builder {self.builder!r} cannot be found "
                               f"({type(e).__name__}: {e}); give module:function of a function that returns the "
                               f"kernel's implementation") from None
        if not found:
            raise InvalidInput(f"catalogue {self.name!r}: builder {self.builder!r} is not module:function of a "
                               f"function; give module:function of a function that returns the kernel's implementation")
        # a target reaches the builder as <target>_module=: one it does not take made every such mutant "not judged"
        # with a TypeError (a helper's catalogue targeting the planning module, 2026-12-07)
        try:
            params = inspect.signature(getattr(importlib.import_module(module), function)).parameters
        except (TypeError, ValueError):  # (a builtin without a signature: nothing to check)
            return
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return
        taken = [name for name, p in params.items() if p.kind is not inspect.Parameter.POSITIONAL_ONLY]
        for short in self.targets:
            if f"{short}_module" not in taken:
                raise InvalidInput(f"catalogue {self.name!r}: target {short!r} reaches the builder as "
                                   f"{short}_module=, which builder {self.builder!r} does not take (it takes "
                                   f"{', '.join(taken) or 'no keyword'}); name the target after a <name>_module "
                                   f"parameter of the builder, or give a builder that takes {short}_module")

    def build(self, name: str):
        """The implementation of mutant ``name`` (its kernel module or host module replaced, or its scheduler)."""
        mutant = self[name]
        module_name, _, function = self.builder.partition(":")
        builder = getattr(importlib.import_module(module_name), function)
        if mutant.scheduler:
            return builder(scheduler=corrupted_scheduler(mutant.scheduler))
        return builder(**{f"{mutant.target}_module": self.module(name)})

    def kernel_of(self, name: str, prefix: str = "mutant-") -> Kernel:
        """A :class:`Kernel` for mutant ``name`` (not registered), with the mutated kernel's capabilities."""
        from jfa_verify.checks.sanitizer import source_dirs
        from jfa_verify.protocol.registry import get_kernel

        base = get_kernel(self.kernel)
        # the copies' folder, then the base kernel's own sources (a host-code mutant runs its kernels unchanged)
        base_dirs = [str(d) for d in source_dirs(base.loader)]
        return Kernel(f"{prefix}{name}", self[name].description, lambda: self.build(name), base.capabilities,
                      base.tile_sizes_fn, base.requires, sanitizer_control=base.sanitizer_control,
                      source_dirs=(str(self.folder()), *base_dirs, *base.source_dirs))


def load_catalogue(name_or_path: str = "triton_jfa") -> Catalogue:
    """A packaged catalogue by name (``"triton_jfa"``) or a catalogue file by path.

    Raises:
        InvalidInput: no such catalogue, not JSON, not this format, or a malformed mutant.
    """
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise InvalidInput(f"catalogue file {str(path)!r} does not exist")
        text, source = path.read_text(), str(path)
    else:
        packaged = resources.files("jfa_verify.fuzz").joinpath(f"catalogues/{name_or_path}.json")
        if not packaged.is_file():
            names = sorted(p.name[:-5] for p in resources.files("jfa_verify.fuzz").joinpath("catalogues").iterdir()
                           if p.name.endswith(".json"))
            raise InvalidInput(f"catalogue={name_or_path!r} is neither a file nor a packaged catalogue ({names})")
        text, source = packaged.read_text(), f"packaged {name_or_path}"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"catalogue {source}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInput(f"catalogue {source}: format={doc.get('format') if isinstance(doc, dict) else None!r}, "
                           f"expected {FORMAT!r}")
    known = {f.name for f in dataclasses.fields(Mutant)}
    mutants = {}
    for i, m in enumerate(doc.get("mutants", [])):
        if not isinstance(m, dict) or set(m) - known or "name" not in m or "description" not in m:
            raise InvalidInput(f"catalogue {source}: mutants[{i}] must be an object with name, description and only "
                               f"the fields {sorted(known)}")
        mutant = Mutant(**m)
        if mutant.scheduler and mutant.scheduler not in CORRUPTIONS:
            raise InvalidInput(f"catalogue {source}: mutant {mutant.name!r} scheduler={mutant.scheduler!r} is not "
                               f"one of {sorted(CORRUPTIONS)}")
        if not mutant.scheduler and (mutant.target not in doc.get("targets", {}) or not mutant.old):
            raise InvalidInput(f"catalogue {source}: mutant {mutant.name!r} needs old/new text and a target in "
                               f"{sorted(doc.get('targets', {}))}")
        mutants[mutant.name] = mutant
    try:
        return Catalogue(doc["name"], doc["kernel"], doc["builder"], dict(doc.get("targets", {})), mutants,
                         doc.get("description", ""), source)
    except KeyError as e:
        raise InvalidInput(f"catalogue {source}: missing field {e}") from None


def register_catalogue(catalogue: Catalogue, prefix: str = "mutant-") -> list[str]:
    """Register every mutant of ``catalogue`` as a kernel ``<prefix><name>``; returns the names."""
    from jfa_verify.protocol.registry import add_kernel

    return [add_kernel(catalogue.kernel_of(name, prefix)).name for name in catalogue.mutants]


# ----------------------------------------------------------------------------- cases


def targeted_cases(kernel: Optional[Kernel] = None, device_type: str = "cpu") -> list[Case]:
    """The fixed cases run against every mutant, cheapest and most discriminating first.

    Lengths sit at ``kernel``'s own tile boundaries +-1 on ``device_type``: on the CPU interpreter
    head dim 16 (``triton_jfa``: BLOCK_M=32, BLOCK_N=16); on CUDA head dim 160 (``triton_jfa``:
    BLOCK_M=64, BLOCK_N=32), so that BLOCK_M != BLOCK_N and a query-tile/key-tile mix-up shows.
    """
    d = 16 if device_type != "cuda" else 160
    bm, bn = tiles_for_shape(kernel, d, d, None, device_type).as_tuple()
    h = dict(num_heads_q=4, num_heads_kv=2, head_dim=d)
    return [
        Case(kv_lengths=(bn + 1, 0, bm + 1, 5), dtype="float32", name="self/gqa/tile-edges/empty", **h),
        Case(kv_lengths=(9, bm + 3, bn + 1), q_lengths=(bn + 4, 3, bm + 8), mode="cross", causal=True,
             causal_alignment="bottom_right", dtype="float32", name="cross/causal-bottom-right", **h),
        Case(kv_lengths=(9, bm + 3, bn + 1), q_lengths=(bn + 4, 3, bm + 8), mode="cross", causal=True,
             causal_alignment="top_left", dtype="float32", name="cross/causal-top-left", **h),
        Case(kv_lengths=(bn + 1, 0, bm + 1), mode="broadcast_q", broadcast_q_len=bm + 8, dtype="float32",
             name="broadcast-q/gqa", **h),
        Case(kv_lengths=(bm + 1, bn - 1, 0, bn + 1), causal=True, offsets_dtype="int64", offsets_start=5,
             layout="strided", dtype="float32", name="self/causal/int64-offsets/start-5/strided", **h),
        Case(kv_lengths=(3, 0, bm - 1), q_lengths=(0, 4, bm + 1), mode="cross", dtype="float32",
             name="cross/zero-length-q-and-k", **h),
        Case(kv_lengths=(bm + 3, bn + 1, 5), q_lengths=(bm + 1, bn + 4, 2), mode="cross", window=(bn - 1, 3),
             causal_alignment="bottom_right", dtype="float32", name="cross/window-bottom-right", **h),
    ]


def gpu_only_cases() -> list[Case]:
    """Cases for ``gpu_only`` mutants, run only on CUDA: Q of more than 2^31 elements.

    257 sequences of 4096 tokens, H_q=16, D=128: 2.16e9 Q elements (4 GiB in bf16),
    so a token x stride product past row 1,048,576 no longer fits in int32.
    Not exercised on the CPU interpreter; run forward only (see :func:`run_mutant`).
    """
    return [Case(kv_lengths=(4096,) * 257, num_heads_q=16, num_heads_kv=1, head_dim=128, dtype="bfloat16",
                 name="self/q-over-2^31-elements")]


# ----------------------------------------------------------------------------- running


@dataclass
class MutantResult:
    """The verdict on one mutant."""

    name: str
    description: str
    # "killed", "survived", "skipped" (gpu-only on CPU), "broken" (a case raised, and so did every targeted case:
    # the kernel computes nothing, so the raise is no kill) or
    # "error" (jfa-verify's run of the mutant failed: it could not be judged)
    status: str
    gpu_only: bool = False
    reason: str = ""
    stage: str = ""  # what killed it: "targeted", "suite", "campaign" or "crash"
    killing_case: Optional[Case] = None
    killing_status: str = ""  # the failing CaseResult's status: "fail" or "error"
    killed_by: str = ""  # the name of the case or relation check that killed it (run_mutant's first_case takes it)
    outputs: list[str] = field(default_factory=list)  # failing outputs ("o", ..., "schedule", "contract", "error")
    input_classes: list[str] = field(default_factory=list)
    seconds_to_failure: Optional[float] = None
    seconds: float = 0.0
    cases_run: int = 0
    reproducer_batch: Optional[int] = None
    reproducer_tokens: Optional[int] = None
    explanation: str = ""

    @property
    def killed(self) -> bool:
        return self.status == "killed"

    @property
    def killed_by_output(self) -> bool:
        """Killed by what the kernel computed (a wrong output, a contract or invariant finding, a relation), not by
        its raising, crashing or hanging."""
        return self.killed and self.killing_status == "fail"

    @property
    def broken(self) -> bool:
        return self.status == "broken"

    def to_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "killing_case"}
        d["killing_case"] = self.killing_case.to_dict() if self.killing_case is not None else None
        return d


def _failing_outputs(result) -> list[str]:
    if result.status == "error":
        return ["error"]
    out = [c.name for c in result.failing]
    if result.findings_of("schedule"):
        out.append("schedule")
    if result.findings_of("contract"):
        out.append("contract")
    return out


def _record_broken(res: MutantResult, case: Case, result) -> None:
    res.status, res.killing_case, res.killing_status = "broken", case, "error"
    res.outputs = ["error"]
    res.reason = (f"the kernel raised on {case.name or case.describe()} and on every targeted case: "
                  f"{result.message}")[:2000]
    res.explanation = result.explain()


def _raises_everywhere(kernel, dev) -> bool:
    """Whether ``kernel`` raises on every one of :func:`targeted_cases` (forward and backward; each has tokens, so
    a launch): it computes nothing, so a raise is not a finding of the suite but a broken mutant (a patch that does
    not compile). Asked only once a case has raised; stops at the first case that does not raise."""
    from jfa_verify.run.runner import run_case

    return all(run_case(case, kernel, dev).status == "error" for case in targeted_cases(kernel, dev.type))


def _record_kill(res: MutantResult, case: Case, result, kernel, device_type: str, stage: str, t0: float) -> None:
    res.status, res.stage, res.killing_case = "killed", stage, case
    res.killing_status = result.status
    res.outputs = _failing_outputs(result)
    res.input_classes = sorted(classify(case, tiles_for_shape(kernel, case.head_dim, case.dv, case.torch_dtype,
                                                              device_type).as_tuple()))
    res.seconds_to_failure = time.perf_counter() - t0
    res.reproducer_batch, res.reproducer_tokens = case.batch, case.tokens()
    res.explanation = result.explain()


STAGES = ("targeted", "suite", "campaign")


def _stage_cases(stage: str, kernel, dev, mutant, seed: int):
    """The fixed cases of ``stage`` (``"targeted"``: :func:`targeted_cases`; ``"suite"``: the default suite,
    what ``jfa-verify run`` runs) and the suite's relation checks (:mod:`jfa_verify.checks.relations`)."""
    if stage == "suite":
        from jfa_verify.checks.suites import get_suite

        suite = get_suite("default", dev.type, seed, kernel=kernel)
        return list(suite.cases), list(getattr(suite, "relations", ()))
    cases = targeted_cases(kernel, dev.type)
    return (gpu_only_cases() + cases if mutant.gpu_only else cases), []


@keeps_device_choice
def run_mutant(name: str, *, catalogue: "Catalogue | str" = "triton_jfa", device="cpu", max_examples: int = 10,
               seed: int = 0, cases: Optional[Sequence[Case]] = None, stage: str = "targeted",
               corpus_dir: Optional[str] = None, max_cases: Optional[int] = None,
               shared_suite: Optional[tuple] = None, plugins: Sequence[str] = (),
               first_case: Optional[str] = None) -> MutantResult:
    """Run ``stage`` against mutant ``name``, stopping at its first failure.

    Stages: ``"targeted"``: :func:`targeted_cases` (or ``cases``), then, if the mutant survived
    them, a short shrinking campaign of ``max_examples``; ``"suite"``: the default suite's cases in
    order and its relation checks (what a CI gate running ``jfa-verify run`` catches; no campaign), the relation
    checks (dense calls, a few seconds in all on the CPU) before the first block-sparse case, so that a dense-path
    bug only they catch does not first run every block-sparse row (the order changes when a mutant dies, not
    whether);
    ``"campaign"``: a campaign of ``max_examples`` drawn cases alone (not shrunk: the verdict is
    what counts; ``cases_run`` then says how many examples ran before the first failure).
    ``corpus_dir``: where the case about to run is written first (a crash leaves it there); None
    for none. ``max_cases``: run only the stage's first that many fixed cases (its relation checks
    all the same: a few calls each, and the only check of state kept between calls). ``shared_suite``:
    ``(inputs, cases, relations)`` of the default suite built for another kernel (:func:`shared_suite`),
    taken for the ``"suite"`` stage when this mutant's :func:`~jfa_verify.checks.suites.suite_inputs` equal
    ``inputs`` (the suite would come out the same), built afresh otherwise. ``plugins``: files imported first (they
    register the catalogue's kernel, where a plugin file does). ``first_case``: the name of one of the stage's
    cases (of the first ``max_cases``) or relation checks (:func:`stage_item_name`; ``MutantResult.killed_by`` of an
    earlier run) to run before the others, as a failing test is rerun first: whether the mutant dies is the same
    (every case still runs until one fails), only when, and by which case; a name the stage does not hold changes
    nothing.

    Raises:
        InvalidInput: an unknown stage or mutant.
    """
    import torch

    from jfa_verify.core.device import select_device
    from jfa_verify.protocol.registry import load_plugins
    from jfa_verify.run.runner import run_case

    from .campaign import run_campaign

    if stage not in STAGES:
        raise InvalidInput(f"stage={stage!r} is not one of {STAGES}")
    dev = select_device(torch.device(device).type)
    load_plugins(plugins)
    cat = load_catalogue(catalogue) if isinstance(catalogue, str) else catalogue
    mutant = cat[name]
    res = MutantResult(name, mutant.description, "survived", gpu_only=mutant.gpu_only)
    if mutant.gpu_only and dev.type != "cuda":
        res.status, res.reason = "skipped", f"gpu-only: {mutant.gpu_reason}"
        return res
    elsewhere = cat.device_reason(dev)
    if elsewhere:  # (the gluon_jfa catalogue on a CPU: every case unsupported, each mutant a "survivor")
        res.status, res.reason = "skipped", f"the catalogue's kernel {cat.kernel!r} does not run here: {elsewhere}"
        return res
    if not mutant.scheduler:
        try:  # a patch that no longer applies would fail every case as the kernel's error: a "kill" of nothing
            cat.mutated_source(name)
        except InvalidInput as e:
            res.status, res.reason = "error", f"stale: {e}"
            return res
        try:  # imported now (it would be at the first case): a copy that registers its kernel again judges nothing
            cat.module(name)
        except InvalidInput as e:
            res.status, res.reason = "error", str(e)
            return res
        except Exception:  # anything else the cases meet as the kernel's failure, as before
            pass
    kernel = cat.kernel_of(name)
    t0 = time.perf_counter()
    relations = []
    if stage != "campaign":
        if cases is None and stage == "suite" and shared_suite is not None:
            from jfa_verify.checks.suites import suite_inputs

            if suite_inputs(kernel, dev.type) == shared_suite[0]:
                cases, relations = list(shared_suite[1]), list(shared_suite[2])
        if cases is None:
            cases, relations = _stage_cases(stage, kernel, dev, mutant, seed)
        if max_cases is not None and max_cases < len(cases):
            cases = cases[:max_cases]
        huge = {c.name for c in gpu_only_cases()}
        verify = _verifier(kernel, dev, corpus_dir)
        # the relation checks where the first block-sparse case would be (after every case, as before, when none is)
        at = next((i for i, c in enumerate(cases) if c.block_sparsity is not None), len(cases))
        items = [*cases[:at], *relations, *cases[at:]]
        for item in sorted(items, key=lambda it: stage_item_name(it) != first_case):  # (stable: the rest in order)
            res.cases_run += 1
            if not isinstance(item, Case):  # a relation check
                finding = item.check(kernel, dev)
                if finding is not None:
                    _record_relation_kill(res, item, finding, kernel, dev.type, t0)
                    res.killed_by = stage_item_name(item)
                    break
                _mark_judged(corpus_dir)
                continue
            # the 2^31-element case runs forward only: its float64 backward reference needs ~twice the memory
            result = verify(item, item.name not in huge)
            _mark_judged(corpus_dir)
            if result.failed:
                if result.status == "error" and _raises_everywhere(kernel, dev):
                    _record_broken(res, item, result)
                else:
                    _record_kill(res, item, result, kernel, dev.type, stage, t0)
                    res.killed_by = stage_item_name(item)
                break
    campaign_examples = max_examples if stage in ("targeted", "campaign") else 0
    if res.status == "survived" and campaign_examples > 0:
        found: list = []  # the campaign stage's verdict is its first finding: the rest of its examples change nothing
        with tempfile.TemporaryDirectory(prefix="jfa-mutation-") as corpus:
            def on_event(event: dict) -> None:
                if event.get("event") == "case":
                    _mark_judged(corpus_dir)
                elif event.get("event") == "finding":
                    found.append(event)

            summary = run_campaign(kernel, max_examples=campaign_examples, corpus_dir=corpus_dir or corpus,
                                   device=dev, seed=seed, shrink=stage != "campaign", covering=stage == "campaign",
                                   on_event=on_event,
                                   should_stop=(lambda: bool(found)) if stage == "campaign" else None)
            if stage == "campaign":
                res.cases_run = summary.first_failure_at or summary.cases_run
            else:
                res.cases_run += summary.cases_run
            if summary.failures:
                failure = summary.failures[-1]
                result = run_case(failure.case, kernel, dev)  # the kept reproducer's verdict
                if result.status == "error" and _raises_everywhere(kernel, dev):
                    _record_broken(res, failure.case, result)
                else:
                    _record_kill(res, failure.case, result, kernel, dev.type, "campaign", t0)
    res.seconds = time.perf_counter() - t0
    return res


def stage_item_name(item) -> str:
    """The name of a stage's case (its own) or relation check (``relation <name> on <its case's name>``: one relation
    runs on several cases), as :func:`run_mutant`'s ``first_case`` and ``MutantResult.killed_by`` give it."""
    return item.name if isinstance(item, Case) else f"relation {item.name} on {item.case.name}"


@keeps_device_choice
def shared_suite(catalogue: "Catalogue | str", device, seed: int = 0) -> tuple:
    """``(inputs, cases, relations)``: the default suite of the catalogue's own kernel on ``device``, built once
    for :func:`run_mutant`'s ``shared_suite`` (each mutant process otherwise builds its covering array again:
    seconds each, most of a killed mutant's time on the CPU)."""
    import torch

    from jfa_verify.checks.suites import get_suite, suite_inputs
    from jfa_verify.core.device import select_device
    from jfa_verify.protocol.registry import get_kernel

    cat = load_catalogue(catalogue) if isinstance(catalogue, str) else catalogue
    dev = select_device(torch.device(device).type)
    kernel = get_kernel(cat.kernel)
    suite = get_suite("default", dev.type, seed, kernel=kernel)
    return suite_inputs(kernel, dev.type), tuple(suite.cases), tuple(getattr(suite, "relations", ()))


def _verifier(kernel, dev, corpus_dir: Optional[str]):
    """``verify(case, backward) -> CaseResult``: through the write-ahead corpus when there is one."""
    from jfa_verify.run.runner import run_case
    from jfa_verify.run.settings import RunSettings

    settings = {b: RunSettings(backward=b) for b in (True, False)}
    if corpus_dir is None:
        return lambda case, backward: run_case(case, kernel, dev, settings[backward])
    from jfa_verify.run.loop import Verifier

    verifiers = {b: Verifier(kernel, dev, corpus_dir, settings[b]) for b in (True, False)}
    return lambda case, backward: verifiers[backward].verify(case)


def _record_relation_kill(res: MutantResult, relation, finding: str, kernel, device_type: str, t0: float) -> None:
    res.status, res.stage, res.killing_case = "killed", "suite", relation.case
    res.killing_status = "fail"
    res.outputs = [f"relation:{relation.name}"]
    res.input_classes = sorted(classify(relation.case, tiles_for_shape(
        kernel, relation.case.head_dim, relation.case.dv, relation.case.torch_dtype, device_type).as_tuple()))
    res.seconds_to_failure = time.perf_counter() - t0
    res.reproducer_batch, res.reproducer_tokens = relation.case.batch, relation.case.tokens()
    res.explanation = f"[FAIL] relation {relation.name} on {relation.case.describe()}: {finding}"


def _running_case(corpus_dir: Path, older_than: float = 0.0) -> Optional[Path]:
    """The case file left ``running`` in ``corpus_dir`` (the case a worker died in or is stuck in), written
    more than ``older_than`` seconds ago, or None."""
    from jfa_verify.run.corpus import read_case_file

    now = time.time()
    for path in sorted(corpus_dir.glob("*.json")):
        try:
            if now - path.stat().st_mtime >= older_than and read_case_file(path)[1].get("status") == "running":
                return path
        except (OSError, InvalidInput):
            continue
    return None


def _killed_in(name: str, mutant: Mutant, path: Path, status: str, explanation: str) -> MutantResult:
    """A mutant killed by its worker's ``status`` (``"crash"`` or ``"hang"``) in the case file ``path``."""
    from jfa_verify.run.corpus import read_case_file

    case, _ = read_case_file(path)
    return MutantResult(name, mutant.description, "killed", gpu_only=mutant.gpu_only, stage=status,
                        killing_case=case, killing_status=status, outputs=[status], reproducer_batch=case.batch,
                        reproducer_tokens=case.tokens(), explanation=explanation)


# The file a mutant's worker writes into its corpus folder once a case or relation check has had its verdict (not a
# case file: no ``.json``): a worker that dies before it had one died of something other than the mutant.
JUDGED_MARK = "judged-a-case"


def _mark_judged(corpus_dir: Optional[str]) -> None:
    if corpus_dir is not None:
        mark = Path(corpus_dir) / JUDGED_MARK
        if not mark.exists():
            mark.touch()


def _crash_result(name: str, mutant: Mutant, corpus_dir: Path, why: str) -> MutantResult:
    """A mutant whose worker process died (a signal or an abort, not a Python exception): killed by a crash, in
    the case file left ``running`` when there is one; not judged (``"error"``) when it died before any case or
    relation check had its verdict (start-up, the suite's construction: nothing of the mutant had run)."""
    path = _running_case(corpus_dir)
    if path is None and not (corpus_dir / JUDGED_MARK).exists():
        return MutantResult(name, mutant.description, "error", gpu_only=mutant.gpu_only,
                            reason=f"the worker died before its first case had a verdict ({why}): not judged")
    if path is None:
        # Between cases: memory that a case's out-of-bounds write corrupted surfaces at a later allocation (the
        # interpreter, 2026-12-02: "realloc(): invalid pointer" after a passed case). The unmutated kernel's
        # process never dies so, so the death is the mutant's; which case caused it is not known.
        return MutantResult(name, mutant.description, "killed", gpu_only=mutant.gpu_only, stage="crash",
                            killing_status="crash", outputs=["crash"],
                            explanation=f"the process died between cases ({why}); no case was running, so an "
                                        "earlier case's corruption surfaced later: a crash is a finding")
    return _killed_in(name, mutant, path, "crash",
                      f"the process died running {path.name} ({why}): a crash is a finding")


# A case of a mutant with no verdict after this long is a hang (the CPU interpreter's slowest suite
# case takes well under a minute; a mutant's loop bound gone wrong runs for hours).
CASE_TIMEOUT_S = 180.0


def _isolated(name: str, cat: Catalogue, catalogue: str, root: Path, case_timeout_s: float = CASE_TIMEOUT_S,
              stop: Optional[threading.Event] = None, **kwargs) -> Optional[MutantResult]:
    """``run_mutant`` in a fresh process (its own Triton state; a segfault ends only it), forked from the fork
    server that case workers use (a Python start-up of torch and Triton costs seconds a mutant). A case
    that runs past ``case_timeout_s`` (its write-ahead case file stays ``running``) kills the worker and
    the mutant: a hang is a finding, as in ``jfa-verify run --timeout``. When ``stop`` is set (Ctrl-C,
    SIGTERM) the worker is killed and there is no result (None)."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout
    from concurrent.futures.process import BrokenProcessPool

    from jfa_verify.run.isolation import adopt_environment, worker_context

    corpus = root / name
    corpus.mkdir(parents=True, exist_ok=True)
    # (the child takes this process's environment as a spawned one would, not the fork server's older one)
    pool = ProcessPoolExecutor(max_workers=1, mp_context=worker_context(), initializer=adopt_environment,
                               initargs=(dict(os.environ),))

    def kill_worker() -> None:
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()

    try:
        future = pool.submit(run_mutant, name, catalogue=catalogue, corpus_dir=str(corpus), **kwargs)
        while True:
            try:
                return future.result(timeout=2.0)
            except FutureTimeout:
                if stop is not None and stop.is_set():
                    kill_worker()
                    return None
                stuck = _running_case(corpus, older_than=case_timeout_s)
                if stuck is not None:
                    kill_worker()
                    return _killed_in(name, cat[name], stuck, "hang", f"no verdict on {stuck.name} after "
                                      f"{case_timeout_s:g} s: the worker was killed (a hang is a finding)")
            except BrokenProcessPool as e:  # the worker died: a kernel crash (segfault, abort)
                return _crash_result(name, cat[name], corpus, f"{type(e).__name__}: {e}")
            except Exception as e:  # the worker raised: the mutant was not judged
                return MutantResult(name, cat[name].description, "error", gpu_only=cat[name].gpu_only,
                                    reason=f"worker failed: {type(e).__name__}: {e}")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


@keeps_device_choice
def run_mutants(names: Optional[Sequence[str]] = None, *, catalogue: str = "triton_jfa", device="cpu",
                max_examples: int = 10, seed: int = 0, jobs: int = 1, stage: str = "targeted",
                isolate: Optional[bool] = None, max_cases: Optional[int] = None,
                case_timeout_s: float = CASE_TIMEOUT_S,
                on_result: Optional[Callable[[MutantResult], None]] = None,
                plugins: Sequence[str] = (), first_cases: Optional[dict[str, str]] = None) -> list[MutantResult]:
    """Run every mutant in ``names`` (default: the whole catalogue) through ``stage`` (see
    :func:`run_mutant`) and return one result each, in order. ``on_result(result)`` is called as each
    mutant's verdict comes (in the order they finish), so a caller can keep what finished if the run is
    interrupted: on Ctrl-C or SIGTERM the mutants under way are killed and KeyboardInterrupt propagates.

    ``catalogue``: a packaged catalogue name or a file path. ``isolate`` (default: when ``jobs > 1``)
    runs each mutant in its own spawned process, ``jobs`` at once (on CUDA they share the GPU): a
    mutant whose process dies is *killed by a crash* when it left a case file ``running`` (the case
    it crashed on), an error otherwise; one whose case has no verdict after ``case_timeout_s`` seconds
    is *killed by a hang* (its worker is killed). ``plugins``: files that register the catalogue's kernel, imported
    here and in each mutant's process. ``first_cases``: ``{mutant: case name}`` run first for that mutant
    (:func:`run_mutant`'s ``first_case``; the case that killed it last time, say: the verdicts are the same).

    Raises:
        InvalidInput: an unknown catalogue, mutant name or stage.
    """
    if stage not in STAGES:
        raise InvalidInput(f"stage={stage!r} is not one of {STAGES}")
    import torch

    from jfa_verify.core.device import select_device
    from jfa_verify.protocol.registry import load_plugins

    dev = select_device(torch.device(device).type)
    load_plugins(plugins)  # (before any mutant: the catalogue's kernel is looked up first)
    cat = load_catalogue(catalogue)
    names = list(cat.mutants) if not names else list(names)
    for n in names:
        cat[n]  # every name must exist before anything runs
    first = dict(first_cases or {})
    options = dict(device=device, max_examples=max_examples, seed=seed, stage=stage, max_cases=max_cases,
                   plugins=tuple(plugins))
    if cat.device_reason(dev):
        # every mutant is skipped (run_mutant says why), in this process, before any process or suite is made
        return _run_each(names, cat, options, on_result, first)
    cat.check_loadable()  # (after the device: the builder's module may import Triton)
    if stage == "suite" and len(names) > 1:
        options["shared_suite"] = shared_suite(cat, device, seed)
    report = on_result or (lambda result: None)
    if not (jobs > 1 if isolate is None else isolate):
        return _run_each(names, cat, options, on_result, first)
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from jfa_verify.run.isolation import start_worker_server, worker_context

    start_worker_server(worker_context())  # (here, in the calling thread: the mutants' threads cannot make it deaf)
    stop = threading.Event()
    with tempfile.TemporaryDirectory(prefix="jfa-mutants-") as root, ThreadPoolExecutor(max_workers=jobs) as threads:
        futures = {threads.submit(_isolated, n, cat, catalogue, Path(root), case_timeout_s, stop, **options,
                                  first_case=first.get(n)): n
                   for n in names}
        try:
            for future in as_completed(futures):
                report(future.result())
        except BaseException:  # Ctrl-C, SIGTERM: no new mutant starts, those under way are killed
            stop.set()
            for future in futures:
                future.cancel()
            raise
        return [f.result() for f in futures]


def _run_each(names: Sequence[str], cat: Catalogue, options: dict, on_result, first: dict) -> list[MutantResult]:
    """:func:`run_mutants` in this process, one mutant after another."""
    results = []
    for n in names:
        results.append(run_mutant(n, catalogue=cat, **options, first_case=first.get(n)))
        if on_result is not None:
            on_result(results[-1])
    return results


def format_table(results: Sequence[MutantResult]) -> str:
    """A plain-text (markdown) kill table."""
    head = ("| mutant | description | verdict | killing output | input classes | s to failure "
            "| reproducer (B / tokens) |")
    lines = [head, "|" + "---|" * 7]
    for r in results:
        verdict = r.status if r.status != "killed" else f"killed ({r.stage})"
        if r.status == "broken":
            verdict = "broken (raised on every case: not a kill)"
        if r.status == "error":  # (the word the command's footer and --help use)
            verdict = "not judged"
        if r.status == "skipped":
            verdict = "skipped (gpu-only)" if r.reason.startswith("gpu-only") else "skipped (not on this device)"
        lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
            r.name, r.description, verdict, ", ".join(r.outputs) or "-",
            ", ".join(r.input_classes) or "-",
            f"{r.seconds_to_failure:.1f}" if r.seconds_to_failure is not None else "-",
            f"{r.reproducer_batch} / {r.reproducer_tokens}" if r.reproducer_batch is not None else "-"))
    killed = sum(r.killed for r in results)
    eligible = sum(r.status != "skipped" for r in results)
    lines.append("")
    broken = sum(r.broken for r in results)
    unjudged, survived = sum(r.status == "error" for r in results), sum(r.status == "survived" for r in results)
    lines.append(f"{killed}/{eligible} mutants killed ({len(results) - eligible} skipped"
                 + (f", {survived} survived" if survived else "") + (f", {unjudged} not judged" if unjudged else "")
                 + (f", {broken} broken: raised on every case" if broken else "") + ")")
    return "\n".join(lines)
