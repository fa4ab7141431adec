"""FFMA chains: one FP32 fused multiply-add per element, in K order, from +0 (SIMT and xmma f32f32 kernels).

Host operands run a numba kernel (the arithmetic of ``rules.fp32_fma``: the float64 product is exact, the sum's
error is folded in as a sticky bit, then one rounding to FP32), or ``rules.fp32_fma`` column by column without
numba; device operands run the GPU engine's FFMA kernel (``engines.cuda.ffma_chain``: hardware FP32 FMA, IEEE
with subnormals), the result staying on the device.

>>> import numpy as np
>>> ffma_chain(np.ones((1, 3), np.float32), np.ones((3, 2), np.float32), (0, 2)).tolist()
[[2.0, 2.0]]
"""

from __future__ import annotations

import numpy as np

from ..arrays import DeviceValues, float64, namespace
from ..formats import get_format
from .rules import fp32_fma

__all__ = ["ffma_chain", "float32_patterns"]


def float32_patterns(x, fmt: str = "fp32", mode: str = "rne"):
    """``x`` rounded to ``fmt`` (FP32 or TF32) as a float32 array of the patterns themselves: no float cast, so
    nothing flushes on a GPU (CuPy's ``-ftz=true``)."""
    if fmt == "fp32" and not isinstance(x, DeviceValues) and x.dtype == np.float32:
        return x
    f = get_format(fmt)
    return f.to_array(f.from_float(float64(x), mode))


def ffma_chain(A, B, columns) -> "np.ndarray":
    """FP32 values (float64) of the FFMA chain of [M, K] @ [K, N] over the K ``columns``, in that order."""
    cols = np.asarray(columns, np.int64)
    xp = namespace(A, B)
    if xp is not np:
        from ..engines import cuda

        a, b_t = float32_patterns(A), xp.ascontiguousarray(float32_patterns(B).T)
        return float64(cuda.ffma_chain(a, b_t, xp.asarray(cols)))
    A, B = np.asarray(A, np.float32), np.asarray(B, np.float32)
    # the K columns first, then the (exact) float64 cast: a SIMT slice reads a part of K, not all of B
    a_s = np.ascontiguousarray(A[:, cols], dtype=np.float64)
    b_s = np.ascontiguousarray(B[cols].T, dtype=np.float64)
    if _ffma_numba is not None:
        return _ffma_numba(a_s, b_s)
    acc = np.zeros((A.shape[0], B.shape[1]))
    for k in range(len(cols)):
        acc = fp32_fma(a_s[:, k:k + 1], b_s[None, :, k].reshape(1, -1), acc)
    return acc


def _make_ffma_numba():
    """The FFMA chain compiled with numba (same arithmetic as ``rules.fp32_fma``), or None without numba."""
    try:
        import numba
    except ImportError:  # numpy fallback above
        return None

    @numba.njit(cache=True)
    def chain(a, bt):  # pragma: no cover - compiled
        M, K = a.shape
        N = bt.shape[0]
        out = np.zeros((M, N))
        for i in range(M):
            for j in range(N):
                acc = 0.0
                for k in range(K):
                    p = a[i, k] * bt[j, k]  # exact: 24 + 24 bits
                    s = p + acc
                    bp = s - acc
                    err = (p - bp) + (acc - (s - bp))
                    if err != 0.0 and np.isfinite(s):
                        bits = np.array([s]).view(np.uint64)[0]
                        if bits & np.uint64(1) == np.uint64(0):  # round to odd, then RNE to FP32 is exact
                            s = np.nextafter(s, np.inf if err > 0 else -np.inf)
                    acc = np.float64(np.float32(s))
                out[i, j] = acc
        return out

    return chain


_ffma_numba = _make_ffma_numba()
