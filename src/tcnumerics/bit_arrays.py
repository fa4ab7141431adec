"""Arrays of bit patterns at the API's edge: checked once, with an error that names the argument and the format.

    >>> import numpy as np
    >>> from tcnumerics.formats import get_format
    >>> check_bits("a", np.array([0x3F80], np.uint16), get_format("bf16")).dtype
    dtype('uint16')
"""

from __future__ import annotations

import numpy as np

from .formats import Format


def check_bits(name: str, x, fmt: Format, ndim: int | None = None) -> np.ndarray:
    """Validate an array of bit patterns for ``fmt``: integer dtype, non-negative, in range."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{name}: expected unsigned integer bit patterns of {fmt.name}, got dtype {arr.dtype}"
                        " (use .mma() or tcnumerics.gemm() for values)")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-D array, got shape {arr.shape}")
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= 1 << fmt.container_bits:
            raise ValueError(f"{name}: bit patterns must lie in [0, 2**{fmt.container_bits}) for {fmt.name}, "
                             f"found {lo if lo < 0 else hi}")
    return arr.astype(fmt.container_dtype, copy=False)
