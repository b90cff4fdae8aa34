"""Standard-normal float32 values that are a pure function of (seed, role, element index).

A case's inputs must be the same bits on every device, and a large case (the MovieLens batch: 167 M
values) must not be drawn on the host and copied over. A counter-based generator gives both: element
``i`` of a stream is computed from ``i`` and the stream's key alone, so the CPU (NumPy, uint32
arithmetic) and a GPU (torch, int64 arithmetic kept below 2**49) compute it independently and agree
bit for bit. ``tests/test_counter_normals.py`` holds the two implementations to each other on the CPU,
and ``tests/test_peers_gpu.py`` holds a GPU's result to the CPU's.

Per element: ``lo`` = the index modulo 2**32, ``hi`` = the index div 2**32;
``h = mix(mix(lo ^ k1) ^ (k2 + hi * 0x9E3779B9 mod 2**32))``, where ``mix`` is the "lowbias32" integer
hash (xor-shift 16, multiply 0x7feb352d, xor-shift 15, multiply 0x846ca68b, xor-shift 16; constants from
Chris Wellons' hash-prospector search, https://nullprogram.com/blog/2018/07/31/) and ``k1, k2`` are the
two 32-bit halves of BLAKE2b-64 of ``seed`` and ``role``. Keys enter twice, around a bijective mix, so
two streams are not shifts or permutations of each other. The value is the inverse normal CDF,
interpolated linearly in a table of 2**16 + 1 quantiles ``Phi^-1((j + 0.5) / (2**16 + 1))`` (float32,
shipped in ``data/normal_quantiles.npy`` so no platform's libm enters): the high 16 bits of ``h`` pick
the segment, the low 16 bits the position in it, ``x = T[j] + f * (T[j+1] - T[j])`` in float32 with
separate (never fused) multiply and add. Values lie in about [-4.33, 4.33].
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources

import numpy as np
import torch

__all__ = ["counter_normals", "stream_key"]

_MASK = 0xFFFFFFFF
_M1, _M2 = 0x7FEB352D, 0x846CA68B
_GOLDEN = 0x9E3779B9
_TABLE_BITS = 16
# elements per pass (powers of two, so a pass never crosses a multiple of 2**32): NumPy's temporaries stay
# in cache at 2**16 (42 M values: 0.25 s against 0.6 s at 2**24 on an EPYC core); a GPU wants big passes
_CHUNK_NUMPY = 1 << 16
# (2**24: the int64 temporaries of a pass stay near 1 GiB, which the caching allocator keeps; at 2**26 a 2**31-element
# case's passes left 25 GiB reserved and its references ran out of memory on the H200)
_CHUNK_TORCH = 1 << 24


def stream_key(seed: int, role: str) -> tuple[int, int]:
    """The two 32-bit keys ``(k1, k2)`` of stream ``role`` of ``seed`` (BLAKE2b-64 of both, split)."""
    digest = hashlib.blake2b(f"jfa-verify/counter-normals/v1/{seed}/{role}".encode(), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:], "little")


@lru_cache(maxsize=1)
def _table() -> tuple[np.ndarray, np.ndarray]:
    # quantiles T[j] and float32 slopes T[j+1] - T[j], j < 2**16
    with resources.files("jfa_verify").joinpath("data/normal_quantiles.npy").open("rb") as f:
        t = np.load(f)
    if t.dtype != np.float32 or t.shape != ((1 << _TABLE_BITS) + 1,):
        raise RuntimeError(f"jfa_verify/data/normal_quantiles.npy is damaged (dtype {t.dtype}, shape {t.shape}); "
                           f"reinstall jfa-verify")
    return t[:-1].copy(), t[1:] - t[:-1]


_DEVICE_TABLES: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def _device_table(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    if device not in _DEVICE_TABLES:
        _DEVICE_TABLES[device] = tuple(torch.from_numpy(a).to(device) for a in _table())
    return _DEVICE_TABLES[device]


def _mix_np(x: np.ndarray) -> np.ndarray:
    # uint32 arithmetic wraps modulo 2**32, which is the hash's definition
    x ^= x >> np.uint32(16)
    x *= np.uint32(_M1)
    x ^= x >> np.uint32(15)
    x *= np.uint32(_M2)
    x ^= x >> np.uint32(16)
    return x


def _mul32_torch(x: torch.Tensor, c: int) -> torch.Tensor:
    # x * c mod 2**32 for int64 x in [0, 2**32) without int64 overflow: split x in 16-bit halves, every
    # partial product stays below 2**49
    lo, hi = x & 0xFFFF, x >> 16
    return (lo * c + ((hi * (c & 0xFFFF)) << 16)) & _MASK


def _mix_torch(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = _mul32_torch(x, _M1)
    x = x ^ (x >> 15)
    x = _mul32_torch(x, _M2)
    return x ^ (x >> 16)


def _chunk_np(start: int, n: int, k1: int, k2: int) -> np.ndarray:
    lo0, hi = start & _MASK, start >> 32
    x = np.arange(lo0, lo0 + n, dtype=np.uint32)
    x ^= np.uint32(k1)
    x = _mix_np(x)
    x ^= np.uint32((k2 + hi * _GOLDEN) & _MASK)
    h = _mix_np(x)
    t, slope = _table()
    j = (h >> np.uint32(_TABLE_BITS)).astype(np.intp)  # NumPy gathers far faster with intp indices
    f = (h & np.uint32(0xFFFF)).view(np.int32).astype(np.float32) * np.float32(2.0**-16)
    return np.take(t, j) + f * np.take(slope, j)


def _chunk_torch(start: int, n: int, k1: int, k2: int, device: torch.device) -> torch.Tensor:
    lo0, hi = start & _MASK, start >> 32
    x = torch.arange(lo0, lo0 + n, dtype=torch.int64, device=device) ^ k1
    x = _mix_torch(x) ^ ((k2 + hi * _GOLDEN) & _MASK)
    h = _mix_torch(x)
    t, slope = _device_table(device)
    j = h >> _TABLE_BITS
    f = (h & 0xFFFF).to(torch.float32) * 2.0**-16
    # two separate kernels (product, then sum), each rounded as IEEE float32: no fused multiply-add
    return t[j] + f * slope[j]


def counter_normals(seed: int, role: str, shape: tuple[int, ...], device: torch.device | str = "cpu",
                    *, dtype: torch.dtype = torch.float32, scale: float | None = None,
                    use_numpy: bool | None = None) -> torch.Tensor:
    """A tensor of ``shape`` on ``device`` holding stream ``role`` of ``seed`` in row-major order.

    Args:
        seed: integer in ``[0, 2**63)``.
        role: stream name (``"q"``, ``"k"``, ``"v"``, ``"do"``, ``"q.basis"``, ...): each role is an
            independent stream.
        shape: any shape; element ``i`` of the flattened result is stream element ``i``.
        device: where the values are computed and returned.
        dtype: the result's dtype: each float32 value (times ``scale``) rounded to it, round-to-nearest-even,
            pass by pass, so that no float32 copy of a large tensor is held on the device.
        scale: a power of two multiplying every float32 value before the rounding (exact), or None.
        use_numpy: compute with NumPy on the host (the default for a CPU device) or with torch on
            ``device`` (the default elsewhere); both give the same bits.

    Returns:
        ``dtype`` tensor of standard normal values (times ``scale``), quantized to the 2**32
        interpolation points of the table, in about [-4.33, 4.33].
    """
    device = torch.device(device)
    if use_numpy is None:
        use_numpy = device.type == "cpu"
    k1, k2 = stream_key(seed, role)
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    if use_numpy:
        flat = np.empty(n, dtype=np.float32)
        for s in range(0, n, _CHUNK_NUMPY):
            flat[s: s + _CHUNK_NUMPY] = _chunk_np(s, min(_CHUNK_NUMPY, n - s), k1, k2)
        x = torch.from_numpy(flat)
        return (x if scale is None else x * scale).to(dtype).reshape(shape).to(device)
    out = torch.empty(n, dtype=dtype, device=device)
    for s in range(0, n, _CHUNK_TORCH):
        x = _chunk_torch(s, min(_CHUNK_TORCH, n - s), k1, k2, device)
        out[s: s + _CHUNK_TORCH] = x if scale is None else x * scale  # (the copy rounds to dtype)
    return out.reshape(shape)
