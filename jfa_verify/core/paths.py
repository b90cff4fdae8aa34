"""Output folders: the default reproducer folder, and whether a folder can be written into, asked before any work (a
bad output folder found after a campaign loses it)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

__all__ = ["DEFAULT_REPRODUCERS", "folder_problem"]

# The reproducer folder of a command not given --reproducers (in the current folder).
DEFAULT_REPRODUCERS = "jfa-reproducers"


def folder_problem(path: "str | Path") -> Optional[str]:
    """Why files cannot be written into folder ``path`` (created if missing, with its parents), or None.

    Tries it: a temporary file in the folder when it exists, else a temporary folder in its nearest existing
    ancestor (removed at once; nothing is left behind either way). ``/proc/r`` (root may write nearly everywhere,
    so permission bits alone do not tell) and ``afile/sub`` (under a regular file) each give a reason.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        return f"{str(path)!r} is a file, not a folder"
    ancestor = path.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{str(ancestor)!r} is a file, so no folder can be made under it"
    try:
        if ancestor == path.absolute():
            with tempfile.NamedTemporaryFile(dir=ancestor, prefix=".jfa-write-check."):
                pass
        else:
            os.rmdir(tempfile.mkdtemp(dir=ancestor, prefix=".jfa-write-check."))
    except OSError as e:
        # (the system's own word, quoted as such: /proc answers "No such file or directory" of a folder that exists)
        return f"cannot create a file in {str(ancestor)!r}: the system refused it ({e.strerror or e})"
    return None
