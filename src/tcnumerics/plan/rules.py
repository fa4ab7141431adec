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
from typing import Iterable

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


def fp32_sum(terms: Iterable, from_zero: bool = False):
    """FP32 values ``terms`` (any iterable: taken one at a time) added in order, each addition RNE (``fp32_add``);
    ``from_zero``: into an accumulator that starts at +0 (so a -0 first term gives +0).

    >>> fp32_sum([np.array(1.0), np.array(2.0**-24), np.array(2.0**-24)]).tolist()   # 1 + 2**-24 ties to 1, twice
    1.0
    >>> float(fp32_sum([np.array(-0.0)])), float(fp32_sum([np.array(-0.0)], from_zero=True))
    (-0.0, 0.0)
    """
    total = None
    for t in terms:
        if total is None:
            total = fp32_add(namespace(t).zeros_like(t), t) if from_zero else t
        else:
            total = fp32_add(total, t)
    return total


def fp32_halving_sum(terms: list):
    """FP32 pairwise halving tree over ``terms``: term i + term i + n/2, repeated (an odd count padded with +0),
    each addition RNE -- a shared-memory or shuffle reduction over lanes.

    >>> fp32_halving_sum([np.array(1.0), np.array(2.0**-24), np.array(2.0**-24), np.array(0.0)]).tolist()
    1.0
    """
    x = list(terms)
    while len(x) > 1:
        if len(x) % 2:
            x.append(namespace(x[0]).zeros_like(x[0]))
        h = len(x) // 2
        x = [fp32_add(x[i], x[i + h]) for i in range(h)]
    return x[0]


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
