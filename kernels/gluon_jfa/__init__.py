"""Jagged flash attention for NVIDIA Hopper (sm_90a) in Gluon (Triton 3.6.0): TMA, wgmma, warp specialization, persistent tiles."""
