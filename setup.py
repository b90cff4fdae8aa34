"""The package list, derived from the folders (pyproject.toml holds everything else).

One import root: the repository's folders ``kernels/``, ``oracles/`` and ``fuzz/`` install as
subpackages of ``jfa_verify``; every folder with an ``__init__.py`` under them is a package.
``ci/import_graph.py`` reads ``FOLDERS`` from here.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent
# installed package name -> repository folder
FOLDERS = {"jfa_verify": "jfa_verify", "jfa_verify.kernels": "kernels", "jfa_verify.oracles": "oracles",
           "jfa_verify.fuzz": "fuzz"}


def packages() -> list[str]:
    """Every installed package name, one per folder holding an ``__init__.py``."""
    out = []
    for name, folder in FOLDERS.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / folder).parts
            out.append(".".join((name, *rel)))
    return out


if __name__ == "__main__":
    from setuptools import setup

    setup(packages=packages(), package_dir=FOLDERS)
