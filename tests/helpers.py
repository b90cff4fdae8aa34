"""Small helpers shared by the tests (not part of the package)."""

from __future__ import annotations

from jfa_verify.contract import validate_inputs


def oracle(fn, q, k, v, q_offsets, k_offsets, *, causal=False, causal_alignment="top_left", sm_scale=None, do=None,
           **options):
    """Call a reference of :mod:`jfa_verify.oracles` on a raw contract call (validated here, once)."""
    problem = validate_inputs(q, k, v, q_offsets, k_offsets, causal=causal, causal_alignment=causal_alignment,
                              sm_scale=sm_scale)
    return fn(problem, q, k, v, do=do, **options)


def interruptible():
    """``preexec_fn`` for a child that a test interrupts with SIGINT: a shell that starts pytest in the
    background (``cmd &``) makes it ignore SIGINT, the children inherit that, and Python then installs
    no KeyboardInterrupt handler; restore the default so Ctrl-C reaches the child as it would from a
    terminal."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
