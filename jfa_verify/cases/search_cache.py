"""Answers of the suite's searches kept on disk between processes, so that a run does not redo its covering array.

Two searches keep answers here: :func:`~jfa_verify.cases.construct.lengths_for` (file ``lengths-*``) and whole
covering arrays (:func:`~jfa_verify.cases.pairs.covering_array`, file ``covering-*``, named by the code of the case
model and the kernel protocol, keyed by what the kernel adds).

Building the covering array of a 132-SM GPU's suite spends most of its 10 s (this project's CPU, 2026-12-05) in
:func:`~jfa_verify.cases.construct.lengths_for`, a seeded random search that every ``jfa-verify run``, ``gate`` and
``fuzz --covering`` repeated with the same arguments. Its answer depends only on those arguments and on the code of
the case model, so the answers are kept in one JSON file per version of that code: a change to any module of
``jfa_verify.cases`` or ``jfa_verify.core`` names another file, and old answers are never read.

The folder is ``$JFA_VERIFY_CACHE`` when set, else ``$XDG_CACHE_HOME/jfa-verify`` (``~/.cache/jfa-verify``).
``JFA_VERIFY_CACHE=off`` turns the cache off. A cache that cannot be read or written is skipped without a word:
it only saves time, and the search gives the same answer without it. Each answer read is checked as the search
checks its own (:func:`jfa_verify.cases.construct.lengths_for`), so a damaged file changes no suite.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Optional

__all__ = ["ENV", "SearchCache", "cache_folder", "code_version"]

ENV = "JFA_VERIFY_CACHE"


def cache_folder() -> Optional[Path]:
    """Where the cache lives (``$JFA_VERIFY_CACHE``, else ``$XDG_CACHE_HOME/jfa-verify``, else
    ``~/.cache/jfa-verify``), or None when ``$JFA_VERIFY_CACHE`` is ``off``."""
    given = os.environ.get(ENV, "").strip()
    if given.lower() == "off":
        return None
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jfa-verify"


def code_version(packages: tuple[str, ...] = ("cases", "core")) -> str:
    """A digest of every module of the given ``jfa_verify`` subpackages (by default ``cases`` and ``core``): the code
    a cached answer came from."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted((root / package).glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


class SearchCache:
    """Answers of one search function, by the ``repr`` of its arguments, in ``<folder>/<name>-<code version>.json``.

    Loaded at the first :meth:`get`; the answers this process added are written back when it exits (merged with
    what other processes wrote meanwhile, through an atomic rename: two runs at once lose no file, at worst each
    other's newest answers)."""

    def __init__(self, name: str, folder: Callable[[], Optional[Path]] = cache_folder,
                 packages: tuple[str, ...] = ("cases", "core")):
        self.name, self._folder, self._packages = name, folder, packages
        self._answers: Optional[dict] = None
        self._added: dict = {}
        self._path: Optional[Path] = None

    def _load(self) -> dict:
        if self._answers is None:
            self._answers = {}
            folder = self._folder()
            if folder is not None:
                self._path = folder / f"{self.name}-{code_version(self._packages)}.json"
                self._answers = _read(self._path)
                atexit.register(self.save)
        return self._answers

    def get(self, key: str, compute: Callable[[], object], valid: Callable[[object], bool] = lambda answer: True):
        """The cached answer for ``key`` where ``valid`` takes it, else ``compute()`` (kept, in place of an answer
        ``valid`` refused; it must be JSON: lists come back as lists)."""
        answers = self._load()
        if key in answers and valid(answers[key]):
            return answers[key]
        value = compute()
        answers[key] = self._added[key] = value
        return value

    def save(self) -> None:
        """Write the answers this process added (nothing when it added none, or the folder cannot be written)."""
        if not self._added or self._path is None:
            return
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            merged = {**_read(self._path), **self._added}
            fd, tmp = tempfile.mkstemp(dir=self._path.parent, prefix=f".{self._path.name}.")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(merged, fh)
            os.chmod(tmp, 0o666 & ~_umask())  # (mkstemp's 0600 kept other users of a shared folder out)
            os.replace(tmp, self._path)
            self._added = {}
        except OSError:
            Path(tmp).unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _read(path: Path) -> dict:
    try:
        answers = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return answers if isinstance(answers, dict) else {}
