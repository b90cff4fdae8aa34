"""One frozen RunSettings, set once, reaches the case run; a bad setting is refused naming the value and the fix."""

import dataclasses
import json

import pytest

from jfa_verify.cases.case import Case
from jfa_verify.core.errors import InvalidInput
from jfa_verify.run.settings import RunSettings


@pytest.mark.parametrize("changes, says", [
    ({"jobs": 0}, r"jobs=0: give an integer >= 1"),
    ({"jobs": 2}, r"jobs=2: .*more than one needs isolated workers \(isolate=True"),
    ({"timeout_s": -1}, r"timeout_s=-1: give the seconds a case may run, a number > 0 and at most 604800"),
    ({"timeout_s": "5"}, r"timeout_s='5': give the seconds"),
    ({"memory": "zero"}, r"memory='zero': give None, or one of 'nan', 'large'"),
    ({"plugins": "k.py"}, r"plugins='k.py': give a list of names, e.g. plugins=\['k.py'\]"),
    ({"accept": 3}, r"accept=3: give a list"),
    ({"isolate": "yes"}, r"isolate='yes': give True or False"),
    ({"seed": 1.5}, r"seed=1.5: give an integer"),
])
def test_an_invalid_setting_is_refused_naming_the_value_and_the_fix(changes, says):
    with pytest.raises(InvalidInput, match=says):
        RunSettings(**changes)
    with pytest.raises(InvalidInput, match=says):  # a derived one is validated again
        RunSettings(isolate=changes.get("jobs") != 2).replace(**changes)


def test_settings_are_frozen_normalized_and_derived():
    settings = RunSettings(plugins=["a.py"], accept=("lse_plus_inf_empty_rows",), timeout_s=5)
    assert settings.plugins == ("a.py",) and isinstance(settings.plugins, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.timeout_s = 1
    derived = settings.replace(memory="nan", isolate=True, jobs=2)
    assert (derived.memory, derived.jobs, derived.timeout_s, derived.plugins) == ("nan", 2, 5, ("a.py",))
    assert settings.memory is None  # the original is untouched
    with pytest.raises(TypeError):
        settings.replace(timeout=5)  # no such field


def test_a_setting_given_once_is_what_the_isolated_worker_uses(tmp_path, misbehaving_plugin):
    # one settings object: memory, backward and timeout reach the case worker process, plugins its case files
    from jfa_verify.protocol.registry import get_kernel, load_plugin
    from jfa_verify.run.loop import Verifier

    plugin = misbehaving_plugin("hangs-on-3", hang="B == 3")
    load_plugin(plugin)
    settings = RunSettings(isolate=True, memory="nan", backward=False, timeout_s=5, plugins=[plugin])
    cases = [Case(kv_lengths=(5, 6), head_dim=16, dtype="float32"), Case(kv_lengths=(5, 6, 7), head_dim=16,
                                                                         dtype="float32")]
    with Verifier(get_kernel("hangs-on-3"), "cpu", tmp_path / "repro", settings) as verifier:
        assert verifier.isolated and verifier.settings is settings
        passed = verifier.verify(cases[0])
        assert passed.status == "pass" and passed.memory == "nan"  # run under the memory mode, in the worker
        judged = {c.name for c in passed.comparisons}
        assert "o" in judged and not {"dq", "dk", "dv"} & judged  # forward only
        hung = verifier.verify(cases[1])
    assert hung.status == "hang" and "no verdict after 5 s" in hung.message
    saved = json.loads(next((tmp_path / "repro").glob("*.json")).read_text())
    assert saved["status"] == "hang" and saved["memory"] == "nan" and saved["plugins"] == [str(plugin)]


def test_settings_travel_whole_and_loose_keywords_are_refused(tmp_path):
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.loop import Verifier
    from jfa_verify.run.runner import run_case

    kernel = get_kernel("triton_jfa")
    settings = RunSettings(seed=3, backward=False, accept=["x"], isolate=True, memory="nan", jobs=2)
    verifier = Verifier(kernel, "cpu", tmp_path, settings)  # (its workers start on the first case: none here)
    assert verifier.settings is settings and [w.spec.settings for w in verifier.workers] == [settings, settings]
    assert verifier.workers[0].spec.plugins == settings.plugins
    with pytest.raises(TypeError):
        Verifier(kernel, "cpu", tmp_path, backward=False)  # one way only: the settings object
    with pytest.raises(TypeError):
        run_case(Case(kv_lengths=(3,), head_dim=16, dtype="float32"), kernel, "cpu", backward=False)
    # the simple call keeps the defaults
    result = run_case(Case(kv_lengths=(3,), head_dim=16, dtype="float32"), kernel, "cpu")
    assert result.status == "pass" and {"o", "dq"} <= {c.name for c in result.comparisons}


def test_the_command_line_context_makes_the_settings_once_from_the_arguments():
    import argparse

    from jfa_verify.cli.context import Context

    args = argparse.Namespace(command="matrix", timeout=5.0, isolate=True, plugin=["a.py"], seed=None,
                              forward_only=True, accept=["lse_plus_inf_empty_rows"], memory="nan")
    ctx = Context.from_args(args)
    assert ctx.settings is ctx.settings  # made once
    assert ctx.settings == RunSettings(timeout_s=5.0, isolate=True, plugins=("a.py",), seed=0, backward=False,
                                       accept=("lse_plus_inf_empty_rows",), memory="nan")
    # a command without those options runs with the defaults, in this process
    assert Context.from_args(argparse.Namespace(command="replay")).settings == RunSettings()
