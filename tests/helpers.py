"""Small helpers shared by the tests (not part of the package)."""

from __future__ import annotations

from jfa_verify.core.contract import validate_inputs


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


def signal_when(proc, ready, sig, *, timeout_s: float = 120.0, settle_s: float = 0.5) -> tuple[str, str]:
    """Send ``sig`` to the running ``proc`` once ``ready()`` holds (then ``settle_s`` later), and return its
    (stdout, stderr); the process is killed on the way out whatever happens. Fails the test when ``proc``
    ends or ``timeout_s`` passes before ``ready()`` does."""
    import time

    try:
        deadline = time.monotonic() + timeout_s
        while not ready():
            assert time.monotonic() < deadline and proc.poll() is None, "the awaited state never came"
            time.sleep(0.2)
        time.sleep(settle_s)
        proc.send_signal(sig)
        return proc.communicate(timeout=60)
    finally:
        proc.kill()


def builtin_kernel_names() -> list:
    """The kernels the package itself installs (its entry points), whatever tests registered before: what a
    walk over "every kernel" walks. Kernels registered by tests, at import or at run time, are left out."""
    from jfa_verify.protocol.registry import get_kernel, kernel_names

    return [name for name in kernel_names() if get_kernel(name).loader.__module__.startswith("jfa_verify.")]


_READS_ITS_NEIGHBOUR = """\
        o, starts = ref["o"].clone(), k_offsets.tolist()
        q_starts = starts if broadcast else q_offsets.tolist()
        for b in range(B - 1):
            if lengths[b + 1] and (broadcast or q_starts[b + 1] > q_starts[b]):
                rows = slice(b, b + 1) if broadcast else slice(q_starts[b], q_starts[b + 1])
                o[rows] += 0.5 * v[starts[b + 1]].float().mean(0)  # the next sequence's first value row
        return o.to(q.dtype), ref["lse"].float()"""


def reads_its_neighbour(path):
    """Rewrite ``path``, a ``misbehaving_plugin`` file, into a self- and cross-attention kernel that adds the next
    sequence's first value row to each sequence's output (a result that depends on its neighbour); returns it."""
    path.write_text(path.read_text().replace('        return ref["o"].to(q.dtype), ref["lse"].float()',
                                             _READS_ITS_NEIGHBOUR).replace(
        "Capabilities(backward=False)", "Capabilities(backward=False, modes=('self', 'cross'))"))
    return path
