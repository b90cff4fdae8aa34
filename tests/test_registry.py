"""The registry: descriptions one line long, broken entry points reported instead of fatal, a name registered once."""

import textwrap

import pytest

from jfa_verify.cli import main


def test_kernels_table_keeps_one_line_per_kernel_for_multi_line_docstrings(tmp_path, capsys):
    """Regression: ``jfa-verify kernels`` broke its table on a loader with a multi-line docstring."""
    plugin = tmp_path / "docs_plugin.py"
    plugin.write_text(textwrap.dedent('''
        from jfa_verify import Capabilities, register_kernel

        @register_kernel("wordy", capabilities=Capabilities())
        def load():
            """First line of the story.

            Second paragraph that must not reach the table.
            """
            return lambda *args, **kwargs: None  # an implementation: `kernels` lists what load() returns
    '''))
    assert main(["kernels", "--plugin", str(plugin)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("wordy")]
    assert len(lines) == 1 and lines[0].endswith("First line of the story.")
    assert "Second paragraph" not in capsys.readouterr().out


def test_broken_entry_point_is_listed_not_fatal(monkeypatch, capsys):
    import jfa_verify.protocol.registry as registry

    class BrokenEntryPoint:
        name, value = "team_broken", "team_broken_pkg.module"

        def load(self):
            raise ImportError("No module named 'team_broken_pkg'")

    monkeypatch.setattr(registry, "_discovered", False)
    monkeypatch.setattr(registry, "_BROKEN", {})
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda group: list(real(group=group)) + [BrokenEntryPoint()])
    assert main(["kernels"]) == 0
    out = capsys.readouterr().out
    assert "triton_jfa" in out and "team_broken" in out and "broken" in out and "team_broken_pkg" in out
    assert main(["run", "--device", "cpu", "--kernel", "team_broken"]) == 2
    assert "broken: entry point team_broken" in capsys.readouterr().err


def test_a_plugin_taking_a_built_in_name_is_refused_naming_both_sources(tmp_path, capsys):
    """Regression: a plugin registering ``triton_jfa_grid`` silently replaced the built-in, so every verdict
    under that name judged the plugin's code."""
    from jfa_verify import get_kernel

    plugin = tmp_path / "shadow.py"
    plugin.write_text(textwrap.dedent('''
        from jfa_verify import Capabilities, register_kernel

        @register_kernel("triton_jfa_grid", capabilities=Capabilities(), description="shadowed")
        def load():
            return None
    '''))
    before = get_kernel("triton_jfa_grid")
    assert main(["kernels", "--plugin", str(plugin)]) == 2
    err = capsys.readouterr().err
    assert "'triton_jfa_grid' is already registered by" in err and "triton_jfa" + "/__init__.py" in err
    assert f"{plugin}:" in err and "another name" in err, err
    assert get_kernel("triton_jfa_grid") is before  # the built-in is untouched


def test_the_same_loader_registered_twice_stays_harmless(tmp_path):
    """A module imported twice (here: under two module names) registers the same loader again: no error."""
    import importlib.util

    from jfa_verify import get_kernel, load_plugin

    plugin = tmp_path / "twice.py"
    plugin.write_text(textwrap.dedent('''
        from jfa_verify import Capabilities, register_kernel

        @register_kernel("registered_twice", capabilities=Capabilities(), description="twice")
        def load():
            return None
    '''))
    load_plugin(plugin)
    spec = importlib.util.spec_from_file_location("twice_again", plugin)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert get_kernel("registered_twice").description == "twice"


def test_two_entry_points_registering_one_name_make_it_a_usage_error(monkeypatch, capsys):
    import jfa_verify.protocol.registry as registry
    from jfa_verify import Capabilities, register_kernel

    class TakesABuiltInName:
        name, value = "team_grid", "team_pkg.grid"

        def load(self):
            def load():
                return None
            register_kernel("triton_jfa_grid", capabilities=Capabilities())(load)

    monkeypatch.setattr(registry, "_discovered", False)
    monkeypatch.setattr(registry, "_BROKEN", {})
    monkeypatch.setattr(registry, "_CONFLICTS", {})
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda group: list(real(group=group)) + [TakesABuiltInName()])
    assert main(["run", "--device", "cpu", "--kernel", "triton_jfa_grid"]) == 2
    err = capsys.readouterr().err
    assert "entry point team_grid = team_pkg.grid" in err and "'triton_jfa_grid' is already registered by" in err
    assert "another name" in err, err
    assert main(["kernels", "--device", "cpu"]) == 0  # the listing still lists, and says why
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("triton_jfa_grid", "team_grid"))]
    assert len(lines) == 2 and all("already registered by" in line for line in lines), lines


def test_register_kernel_without_capabilities_names_the_fix():
    """Regression (a new user's trial): leaving out ``capabilities=`` was a raw TypeError with no example."""
    import pytest

    from jfa_verify import register_kernel
    from jfa_verify.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match=r"register_kernel\('no-caps'\) needs capabilities=: .*Capabilities\("):
        register_kernel("no-caps")


def test_load_plugins_imports_each_file_once_in_order_and_stops_at_the_first_broken_one(tmp_path):
    """One loader for every command's and worker's ``--plugin`` files: in order, each once a process, the first
    broken file raised with its name (the files after it are not imported)."""
    from jfa_verify.core.errors import PluginError
    from jfa_verify.protocol.registry import get_kernel, load_plugins, plugin_of

    first, broken, last = tmp_path / "first_ok.py", tmp_path / "broken.py", tmp_path / "never.py"
    first.write_text(textwrap.dedent('''
        from jfa_verify import Capabilities, register_kernel
        import builtins
        builtins._jfa_first_ok_imports = getattr(builtins, "_jfa_first_ok_imports", 0) + 1

        @register_kernel("loaded_by_load_plugins", capabilities=Capabilities(), description="first")
        def load():
            return None
    '''))
    broken.write_text("raise RuntimeError('planted')\n")
    last.write_text(textwrap.dedent('''
        from jfa_verify import Capabilities, register_kernel

        @register_kernel("never_loaded_by_load_plugins", capabilities=Capabilities(), description="never")
        def load():
            return None
    '''))
    import builtins

    load_plugins([first, str(first)])
    assert builtins._jfa_first_ok_imports == 1
    assert plugin_of("loaded_by_load_plugins") == str(first.resolve())
    with pytest.raises(PluginError, match="broken.py"):
        load_plugins([first, broken, last])
    assert builtins._jfa_first_ok_imports == 1
    with pytest.raises(Exception, match="never_loaded_by_load_plugins"):
        get_kernel("never_loaded_by_load_plugins")
    del builtins._jfa_first_ok_imports
