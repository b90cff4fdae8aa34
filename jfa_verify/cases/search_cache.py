"""Answers of slow, deterministic computations kept on disk between processes, so that a run does not redo them.

Three keep answers here: :func:`~jfa_verify.cases.construct.lengths_for` (file ``lengths-*``), whole covering arrays
(:func:`~jfa_verify.cases.pairs.covering_array`, and the :func:`~jfa_verify.cases.pairs.universe` of pairs beside
them, file ``covering-*``, named by the code of the case model and the kernel protocol, keyed by what the kernel
adds) and the precompile step's trace (:mod:`jfa_verify.run.precompile`, file ``traces-*``).

Building the covering array of a 132-SM GPU's suite spends most of its 10 s (this project's CPU, 2026-12-05) in
:func:`~jfa_verify.cases.construct.lengths_for`, a seeded random search that every ``jfa-verify run``, ``gate`` and
``fuzz --covering`` repeated with the same arguments. Its answer depends only on those arguments and on the code of
the case model, so the answers are kept in one JSON file per version of that code: a change to any module of
``jfa_verify.cases`` or ``jfa_verify.core`` names another file, and old answers are never read. The precompile
step keeps its traces the same way (:mod:`jfa_verify.run.precompile`, its own version: :func:`sources_digest` of
the framework's sources, and a key naming everything else its answer depends on).

The folder is ``$JFA_VERIFY_CACHE`` when set, else ``$XDG_CACHE_HOME/jfa-verify`` (``~/.cache/jfa-verify``).
``JFA_VERIFY_CACHE=off`` turns the cache off. A cache that cannot be read or written is skipped without a word:
it only saves time, and the computation gives the same answer without it. Each answer read is checked by its user
as the computation checks its own (:func:`jfa_verify.cases.construct.lengths_for`), so a damaged file changes no
suite.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Optional

__all__ = ["ENV", "SearchCache", "cache_folder", "code_version", "sources_digest"]

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


def sources_digest(folders: Iterable[Path], *, recursive: bool = True) -> str:
    """16 hex digits of a SHA-256 over every ``*.py`` file in ``folders`` (their subfolders too when
    ``recursive``), folder by folder, each file by its path relative to its folder and its bytes. A folder that does
    not exist adds nothing.

    Raises:
        OSError: a file listed cannot be read.
    """
    digest = hashlib.sha256()
    for folder in folders:
        folder = Path(folder)
        for path in sorted(folder.rglob("*.py") if recursive else folder.glob("*.py")):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def code_version() -> str:
    """A digest of every module of ``jfa_verify.cases`` and ``jfa_verify.core``: the code a cached answer came from."""
    root = Path(__file__).resolve().parents[1]
    return sources_digest([root / "cases", root / "core"], recursive=False)


class SearchCache:
    """Answers of one computation, by a string key, in ``<folder>/<name>-<version>.json``.

    Loaded at the first :meth:`get`, :meth:`lookup` or :meth:`put`; the answers this process added are written back
    by :meth:`save`, at the latest when it exits (merged with what other processes wrote meanwhile, through an
    atomic rename: two runs at once lose no file, at worst each other's newest answers).

    Args:
        name: the file's name before the version. folder: where the file is (None: the cache is off).
        version: the version of the code the answers come from (a new one names a new file; default
            :func:`code_version`, the case model's). keep: at most this many answers are kept in the file, the
            newest written (None: all); for answers large enough that an ever-growing file would cost more to read
            than they save.
    """

    def __init__(self, name: str, folder: Callable[[], Optional[Path]] = cache_folder, *,
                 version: Optional[Callable[[], str]] = None, keep: Optional[int] = None):
        self.name, self._folder, self._version, self.keep = name, folder, version, keep
        self._answers: Optional[dict] = None
        self._added: dict = {}
        self._path: Optional[Path] = None

    def _load(self) -> dict:
        if self._answers is None:
            self._answers = {}
            folder = self._folder()
            if folder is not None:
                version = (self._version or code_version)()  # (looked up now: tests replace code_version)
                self._path = folder / f"{self.name}-{version}.json"
                self._answers = _read(self._path)
        return self._answers

    def get(self, key: str, compute: Callable[[], object], valid: Callable[[object], bool] = lambda answer: True):
        """The cached answer for ``key`` where ``valid`` takes it, else ``compute()`` (kept, in place of an answer
        ``valid`` refused; it must be JSON: lists come back as lists)."""
        answers = self._load()
        if key in answers and valid(answers[key]):
            return answers[key]
        value = compute()
        self.put(key, value)
        return value

    def lookup(self, key: str, default=None):
        """The cached answer for ``key`` (as JSON reads it back: unchecked), else ``default``."""
        return self._load().get(key, default)

    def put(self, key: str, value) -> None:
        """Keep ``value`` (JSON) as the answer for ``key``, replacing any (written by :meth:`save`)."""
        self._load()[key] = value
        if self._path is None:  # (the cache is off: nothing to write)
            return
        if not self._added:  # (held for the exit only while it has answers to write: a saved cache can be freed)
            atexit.register(self.save)
        self._added[key] = value

    def save(self) -> None:
        """Write the answers this process added (nothing when it added none, or the folder cannot be written)."""
        if not self._added or self._path is None:
            return
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            merged = _read(self._path)
            for key, value in self._added.items():  # (re-added: moved to the end, the newest)
                merged.pop(key, None)
                merged[key] = value
            if self.keep is not None and len(merged) > self.keep:
                merged = dict(list(merged.items())[len(merged) - self.keep:])
            fd, tmp = tempfile.mkstemp(dir=self._path.parent, prefix=f".{self._path.name}.")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(merged, fh)
            os.chmod(tmp, 0o666 & ~_umask())  # (mkstemp's 0600 kept other users of a shared folder out)
            os.replace(tmp, self._path)
            self._added = {}
            atexit.unregister(self.save)
        except OSError:
            Path(tmp).unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _read(path: Path) -> dict:
    if not path.is_file():  # (a pipe or a device there would hold the run at its read)
        return {}
    try:
        answers = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # (RecursionError: arrays nested deeper than the parser goes)
        return {}
    return answers if isinstance(answers, dict) else {}
