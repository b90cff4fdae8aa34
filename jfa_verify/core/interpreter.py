"""Triton's CPU interpreter as jfa-verify runs it: loop bounds loaded from memory work with NumPy >= 2.3
(:func:`index_from_loaded_scalars`), and ``triton.language`` is patched once per launch (:func:`patch_once`).
:func:`prepare_interpreter` does both; :func:`jfa_verify.core.device.select_device` calls it for the CPU.

Why the second:

Under ``TRITON_INTERPRET=1`` a grid launch patches ``triton.language`` (every builtin wrapped for the interpreter,
found by ``inspect.getmembers``) and restores it when the grid is done; Triton 3.6.0 then patches it again on every
call of a ``@triton.jit`` device function inside the kernel, discarding that second patch's record. The second patch
sets the same wrappers over the ones the grid's patch set: it changes nothing, but it is costly (115,887 re-patches
for one mutant's 159 cases of the regression catalogue's CI gate; ``_patch_lang`` 109 s of 330 s under cProfile).
:func:`patch_once` makes a device function's call skip it while its grid's patch covers the language modules it sees
(a module seen first by a device function, as Triton's own library sees ``triton.language.core``, is patched once as
Triton does, then counts as covered); anything else runs as Triton wrote it. Measured on 6 ``triton_jfa`` forward
and backward calls on the CPU (2 cores, shared): 42.5 s before, 32.3 s after, outputs bit-identical.

Only Triton 3.6.0 (the project's pin) is touched: another version runs unchanged. Values are unchanged:
``tests/test_interpreter.py`` runs kernels both ways and compares them bit for bit.
"""

from __future__ import annotations

import inspect
import threading

__all__ = ["PATCHED_VERSION", "index_from_loaded_scalars", "patch_once", "prepare_interpreter"]

PATCHED_VERSION = "3.6.0"
_state = threading.local()  # the language modules the grid running in this thread has patched (a stack)


def prepare_interpreter() -> None:
    """Both of this module's changes to Triton's interpreter (idempotent; GPU runs never call it)."""
    index_from_loaded_scalars()
    patch_once()


def index_from_loaded_scalars() -> None:
    """Let runtime scalars bound ``range`` loops under ``TRITON_INTERPRET=1`` with NumPy >= 2.3.

    Triton 3.6's interpreter keeps scalars as 1-element arrays and implements
    ``tensor.__index__`` as ``int(array)``, which newer NumPy rejects
    ("only 0-dimensional arrays can be converted to Python scalars"), so any
    ``for i in range(lo, hi)`` with loaded bounds fails. Idempotent; GPU runs
    never call it.
    """
    from triton.runtime import interpreter

    if getattr(interpreter, "_jfa_index_shim", False):
        return
    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patched
    interpreter._jfa_index_shim = True


def patch_once() -> bool:
    """Make Triton's interpreter patch ``triton.language`` once per grid launch, not again at every device-function
    call (see the module's docstring). Idempotent; returns whether the interpreter runs so (False: another Triton
    version, left as it is)."""
    import triton
    from triton.runtime import interpreter

    if getattr(interpreter, "_jfa_verify_patch_once", False):
        return True
    original = getattr(interpreter, "_patch_lang", None)
    if triton.__version__ != PATCHED_VERSION or original is None or not hasattr(interpreter, "_LangPatchScope"):
        return False
    langs_of = _languages(interpreter)

    def patch_lang(fn):
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        langs = langs_of(fn)
        if stack and langs <= stack[-1]:  # a device function's call inside a grid that patched these modules
            return interpreter._LangPatchScope()  # (nothing to restore: the grid's patch stands)
        scope = original(fn)
        if stack:  # a device function seeing another language module (Triton's own library functions see
            stack[-1] = stack[-1] | langs  # triton.language.core): patched as Triton does, never restored, once
            return scope
        stack.append(langs)
        restore = scope.restore

        def restore_and_leave() -> None:  # the grid's launch is done (GridExecutor restores in a finally)
            try:
                restore()
            finally:
                stack.pop()

        scope.restore = restore_and_leave
        return scope

    interpreter._patch_lang = patch_lang
    interpreter._jfa_verify_patch_once = True
    interpreter._jfa_verify_original_patch_lang = original  # (tests compare both ways)
    return True


def _languages(interpreter):
    lang_modules = (interpreter.tl, interpreter.tl.core)

    def langs_of(fn) -> frozenset:
        """The ``triton.language`` modules ``fn``'s globals name (what Triton's ``_patch_lang`` patches for it)."""
        return frozenset(id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in lang_modules)

    return langs_of
