"""The arithmetic rules every plan is made of, each stated once: FP32 addition, FP32 fused multiply-add, a chain's
FP32 result as values, and the quiet context numpy needs for infinities and NaNs.

They work on the array namespace of their arguments (numpy on the host, CuPy on a GPU).  The interpreter
(``plan.interpret``) composes them; nothing else in the package restates them.

>>> import numpy as np
>>> float(fp32_add(np.float32(1), np.float32(2.0**-24)))     # ties to even
1.0
"""

from __future__ import annotations

import contextlib

import numpy as np

from .. import _casts
from ..arrays import float64, namespace
from ..formats import Format, get_format

__all__ = ["fp32_add", "fp32_fma", "fp32_partial", "quiet", "FP32"]

FP32 = get_format("fp32")


def quiet(xp):
    """numpy's floating-point warnings off (CuPy raises none)."""
    return np.errstate(all="ignore") if xp is np else contextlib.nullcontext()


def fp32_add(x, y):
    """IEEE FP32 addition, RNE: float32 operands add in float32 where the hardware's add is IEEE (one kernel on a
    GPU); otherwise exact FP32 values in float64, one rounding (correct: 53 >= 2*24 + 2)."""
    fast = _casts.fp32_add(x, y)
    if fast is not None:
        return fast
    with quiet(namespace(x, y)):
        return FP32.round(x + y)


def fp32_partial(fmt: Format, bits):
    """A chain's FP32 result as float32 values (the type whose additions are FP32's), else exact float64."""
    values = _casts.fp32_values(fmt, bits)
    return fmt.to_float(bits) if values is None else values


def fp32_fma(x, y, z):
    """Fused multiply-add ``x * y + z`` of FP32 values with one RNE rounding to FP32.

    ``x * y`` is exact in float64 (48 bits); the sum's float64 rounding error is recovered
    exactly (TwoSum) and folded in as a sticky bit (round to odd), after which rounding to
    FP32 is correct because 53 >= 24 + 2.

    >>> float(fp32_fma(np.array(1 + 2.0**-23), np.array(1 - 2.0**-23), np.array(-1.0)))   # -2**-46 exactly
    -1.4210854715202004e-14
    """
    xp = namespace(x, y, z)
    x, y, z = xp.broadcast_arrays(*(float64(xp.asarray(v)) for v in (x, y, z)))  # exact on a GPU too
    with quiet(xp):
        p = x * y
        s = p + z
        bp = s - z
        err = (p - bp) + (z - (s - bp))  # TwoSum: s + err == p + z exactly
        finite = xp.isfinite(s) & xp.isfinite(err)
        odd = (s.view(np.uint64) & np.uint64(1)) == 1
        toward = xp.nextafter(s, xp.where(err > 0, np.inf, -np.inf))
        sticky = xp.where(finite & (err != 0) & ~odd, toward, s)
    return FP32.round(sticky)
