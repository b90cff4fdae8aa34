"""Kernels under test that ship with jfa-verify, one folder each (installed as ``jfa_verify.kernels``).

Each folder's ``__init__`` only registers (through the ``jfa_verify.kernels``
entry-point group); the framework never imports a kernel by name.
"""
