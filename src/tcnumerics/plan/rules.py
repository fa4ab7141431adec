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

__all__ = ["fp32_add", "fp32_fma", "fp32_partial", "fp32_sum", "fp32_halving_sum", "fp32_tree_sum", "quiet", "FP32"]

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


def fp32_sum(x, axis: int):
    """In-order FP32 sum of FP32 values along ``axis``, each addition RNE (``fp32_add``); float64 values.

    >>> fp32_sum(np.array([1.0, 2.0**-24, 2.0**-24]), 0).tolist()   # in order: 1 + 2**-24 ties to 1, twice
    1.0
    """
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1).astype(np.float32)
    acc = x[..., 0]
    for i in range(1, x.shape[-1]):
        acc = fp32_add(acc, x[..., i])
    return acc.astype(np.float64)


def fp32_halving_sum(x, axis: int):
    """FP32 pairwise halving tree along ``axis``: element i + element i + n/2, repeated (an odd count padded with
    +0), each addition RNE; float64 values.

    >>> fp32_halving_sum(np.array([1.0, 2.0**-24, 2.0**-24, 0.0]), 0).tolist()   # (1 + 2**-24) + 2**-24
    1.0
    """
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1).astype(np.float32)
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            x = np.concatenate([x, np.zeros(x.shape[:-1] + (1,), np.float32)], axis=-1)
        h = x.shape[-1] // 2
        x = fp32_add(x[..., :h], x[..., h:])
    return x[..., 0].astype(np.float64)


def fp32_tree_sum(tree, terms: list):
    """FP32 values ``terms`` added along ``tree`` (a term's index, or a pair of subtrees), each addition RNE.

    >>> fp32_tree_sum((0, (1, 2)), [np.array(1.0), np.array(2.0**-24), np.array(2.0**-24)]).tolist()
    1.0000001192092896
    """
    if isinstance(tree, int):
        return terms[tree]
    return fp32_add(fp32_tree_sum(tree[0], terms), fp32_tree_sum(tree[1], terms))


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
