"""Random inputs for the experiments: the paper's generator, or numpy's.

Sun et al.'s benchmarks draw N(0, 1) values with ``std::mt19937`` seeded with 123456
and libstdc++'s ``std::normal_distribution<float>`` (Marsaglia's polar method on
``generate_canonical<float>`` uniforms).  ``PaperNormals`` follows that algorithm, so the
experiments see the same input values as the paper's measurements (up to a last-bit
difference in the rare cases where the C library's ``logf`` is not correctly rounded,
which only moves a value by one float ulp).  ``NumpyNormals`` is numpy's PCG64 stream,
offered for independent replications (``--rng numpy``).

Example:
    >>> stream = PaperNormals(123456)
    >>> first = stream.draw(3)
    >>> first.dtype.name, len(first)
    ('float32', 3)
    >>> bool((PaperNormals(123456).draw(5)[:3] == first).all())    # deterministic
    True
"""

from __future__ import annotations

import numpy as np

__all__ = ["PaperNormals", "NumpyNormals", "make_normals", "RNG_NAMES", "PAPER_SEED"]

PAPER_SEED = 123456  # the seed in every one of the paper's numeric benchmarks
RNG_NAMES = ("paper", "numpy")


class PaperNormals:
    """N(0, 1) float32 values in the order libstdc++'s polar method yields them.

    Each accepted pair of uniforms (u1, u2) gives two values, ``y * mult`` first and
    ``x * mult`` second, with ``x = 2 u1 - 1``, ``y = 2 u2 - 1`` and
    ``mult = sqrt(-2 log(r2) / r2)``; pairs with ``r2 = x^2 + y^2`` outside (0, 1] are
    skipped.  Arithmetic follows the C++ expression types (float, with ``2u - 1`` formed
    in double and narrowed).
    """

    def __init__(self, seed: int = PAPER_SEED) -> None:
        if not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**32:
            raise ValueError(f"seed: the paper's mt19937 takes an integer in [0, 2**32), got {seed!r}")
        # numpy's legacy seeding of MT19937 is exactly std::mt19937's init_genrand
        self._words = np.random.RandomState(int(seed))
        self._buffer = np.empty(0, np.float32)

    def _uniforms(self, count: int) -> np.ndarray:
        """generate_canonical<float, 24>: one 32-bit word, converted to float, scaled by 2**-32."""
        words = self._words.randint(0, 2**32, size=count, dtype=np.uint64)
        u = words.astype(np.float32) * np.float32(2.0**-32)  # float(uint32) rounds to nearest
        return np.minimum(u, np.nextafter(np.float32(1), np.float32(0)))  # libstdc++ keeps u < 1

    def _refill(self, needed: int) -> None:
        pairs = max(1024, int(needed * 0.66) + 16)  # ~78.5% of pairs are accepted
        u = self._uniforms(2 * pairs).reshape(pairs, 2)
        x = (2.0 * u[:, 0].astype(np.float64) - 1.0).astype(np.float32)
        y = (2.0 * u[:, 1].astype(np.float64) - 1.0).astype(np.float32)
        r2 = x * x + y * y  # float32 products and sum, as in the C++ source
        keep = (r2 <= 1) & (r2 != 0)
        x, y, r2 = x[keep], y[keep], r2[keep]
        log_r2 = np.log(r2.astype(np.float64)).astype(np.float32)  # a correctly rounded logf
        mult = np.sqrt((np.float32(-2) * log_r2) / r2)
        out = np.empty(2 * len(x), np.float32)
        out[0::2] = y * mult
        out[1::2] = x * mult
        self._buffer = np.concatenate([self._buffer, out])

    def draw(self, count: int) -> np.ndarray:
        """The next ``count`` values of the stream (float32)."""
        if count < 0:
            raise ValueError(f"count: must be >= 0, got {count}")
        while len(self._buffer) < count:
            self._refill(count - len(self._buffer))
        out, self._buffer = self._buffer[:count], self._buffer[count:]
        return out.copy()


class NumpyNormals:
    """N(0, 1) float32 values from numpy's default generator (PCG64)."""

    def __init__(self, seed: int = PAPER_SEED) -> None:
        self._rng = np.random.default_rng(seed)

    def draw(self, count: int) -> np.ndarray:
        if count < 0:
            raise ValueError(f"count: must be >= 0, got {count}")
        return self._rng.standard_normal(count, dtype=np.float32)


def make_normals(rng: str, seed: int) -> "PaperNormals | NumpyNormals":
    """A normal stream by name: ``"paper"`` (mt19937 + polar method) or ``"numpy"``.

    >>> make_normals("numpy", 1).draw(2).shape
    (2,)
    """
    if rng == "paper":
        return PaperNormals(seed)
    if rng == "numpy":
        return NumpyNormals(seed)
    raise ValueError(f"rng: expected one of {', '.join(RNG_NAMES)}, got {rng!r}")
