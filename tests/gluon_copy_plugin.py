"""Plugin kernel ``gluon_jfa_copy``: gluon_jfa run from a byte-identical copy of its ``_kernels.py`` in another folder.

The copy is written (atomically, only when its content differs) to ``$JFA_GLUON_COPY_DIR`` (default: a folder of
the temporary directory, one per user) under the same base name, ``_kernels.py``, imported there as a module of
its own, and built into gluon_jfa's adapter (``jfa_verify.kernels.gluon_jfa.build``). It declares gluon_jfa's
racecheck control. Its racecheck verdict must be gluon_jfa's: the sites of the tool's reports are mapped to the
kernel's own source wherever that lies (``jfa_verify.checks.sanitizer``), not to gluon_jfa's folder::

    jfa-verify gate --device cuda --plugin tests/gluon_copy_plugin.py --kernel gluon_jfa_copy \\
        --checks sanitizer --sanitizer racecheck
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from jfa_verify import register_kernel
from jfa_verify.kernels import gluon_jfa


def copy_folder() -> Path:
    default = Path(tempfile.gettempdir()) / f"jfa-gluon-copy-{os.getuid() if hasattr(os, 'getuid') else 0}"
    return Path(os.environ.get("JFA_GLUON_COPY_DIR") or default)


def copy_kernels(folder: Path):
    """The shipped ``_kernels.py``, copied byte for byte into ``folder`` and imported from there."""
    source = Path(importlib.util.find_spec("jfa_verify.kernels.gluon_jfa._kernels").origin).read_bytes()
    path = folder / "_kernels.py"
    folder.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_bytes() != source:
        with tempfile.NamedTemporaryFile("wb", dir=folder, suffix=".tmp", delete=False) as tmp:
            tmp.write(source)
        os.replace(tmp.name, path)
    name = "_jfa_gluon_copy_kernels"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@register_kernel("gluon_jfa_copy", capabilities=gluon_jfa.CAPABILITIES, tile_sizes=gluon_jfa._tile_sizes,
                 requires=("triton",), sanitizer_control="jfa_verify.kernels.gluon_jfa.sanitizer_control")
def load():
    """gluon_jfa from a byte-identical copy of its _kernels.py in another folder (racecheck's path independence)."""
    return gluon_jfa.build(kernels_module=copy_kernels(copy_folder()))
