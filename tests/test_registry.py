"""The registry: descriptions one line long, broken entry points reported instead of fatal, plugins shadowing."""

import textwrap

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
            return None
    '''))
    assert main(["kernels", "--plugin", str(plugin)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("wordy")]
    assert len(lines) == 1 and lines[0].endswith("First line of the story.")
    assert "Second paragraph" not in capsys.readouterr().out


def test_broken_entry_point_is_listed_not_fatal(monkeypatch, capsys):
    import jfa_verify.registry as registry

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


def test_a_plugin_may_shadow_a_built_in(tmp_path):
    from jfa_verify import get_kernel, load_plugin

    plugin = tmp_path / "shadow.py"
    plugin.write_text(textwrap.dedent('''
        from jfa_verify import Capabilities, register_kernel

        @register_kernel("triton_jfa_grid", capabilities=Capabilities(), description="shadowed")
        def load():
            return None
    '''))
    before = get_kernel("triton_jfa_grid")
    try:
        load_plugin(plugin)
        assert get_kernel("triton_jfa_grid").description == "shadowed"
    finally:
        from jfa_verify.registry import add_kernel

        add_kernel(before)
