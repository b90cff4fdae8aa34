"""CI gating: the CPU gate is ``.ci/run``; the GPU gate is ``ci/gpu_run.sh``."""
