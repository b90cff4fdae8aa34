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
    ({"timeout_s": -1}, r"timeout_s=-1: give the seconds a case may run, a number > 0, or None"),
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


def test_loose_keywords_still_make_the_settings(tmp_path):
    from jfa_verify.protocol.registry import get_kernel
    from jfa_verify.run.loop import Verifier

    verifier = Verifier(get_kernel("triton_jfa"), "cpu", tmp_path, RunSettings(seed=3), backward=False, accept=["x"])
    assert verifier.settings == RunSettings(seed=3, backward=False, accept=("x",))
    with pytest.raises(InvalidInput, match="jobs=2"):
        Verifier(get_kernel("triton_jfa"), "cpu", tmp_path, jobs=2)
