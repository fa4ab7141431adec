"""Arrays of bit patterns at the API's edge: checked once, with an error that names the argument and the format.

    >>> import numpy as np
    >>> from tcnumerics.formats import get_format
    >>> check_bits("a", np.array([0x3F80], np.uint16), get_format("bf16")).dtype
    dtype('uint16')
"""

from __future__ import annotations

import numpy as np

from .formats import Format, IntFormat


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


def operand_bits(name: str, x, fmt: Format):
    """Values of an operand as ``fmt``'s bit patterns: integer values encoded (range-checked) for an integer format,
    float arrays of the format's dtype used bit for bit, other floats rounded to the format first (RNE).

    >>> from tcnumerics.formats import get_format
    >>> operand_bits("A", np.array([1.0, 2.0]), get_format("bf16")).tolist()
    [16256, 16384]
    """
    if isinstance(fmt, IntFormat):
        if x.dtype.kind not in "iu":
            raise TypeError(f"{name}: expected integer values for {fmt.name}, got dtype {x.dtype}")
        lo, hi = (int(x.min()), int(x.max())) if x.size else (0, 0)
        if lo < fmt.min_value or hi > fmt.max_value:
            raise ValueError(f"{name}: values must lie in [{fmt.min_value}, {fmt.max_value}] for {fmt.name}")
        return fmt.encode_int(x)
    if x.dtype.kind not in "fV" and x.dtype.name not in ("bfloat16",) and not x.dtype.name.startswith("float"):
        raise TypeError(f"{name}: expected floating-point values for {fmt.name}, got dtype {x.dtype}")
    return fmt.bits_of(x)
