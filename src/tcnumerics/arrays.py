"""Where an array lives: numpy on the host, CuPy on an NVIDIA GPU -- and typed values CuPy cannot hold.

The arithmetic of a GEMM's composition (conversions, FP32 roundings, split-K sums, epilogues) is
written once over an array namespace ``xp``: ``namespace(x)`` is ``numpy`` for host arrays and
``cupy`` for device arrays, so the same lines run where the data is.  CuPy has no BF16 or FP8
dtypes, so device operands of those formats travel as ``DeviceValues``: the bit patterns (an
unsigned CuPy array, strides kept) and the format they are in.  Nothing here imports CuPy unless a
device array is handed in.

Example:
    >>> import numpy as np
    >>> namespace(np.zeros(3)) is np
    True
    >>> namespace(None, 1.0) is np
    True
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["namespace", "on_device", "DeviceValues", "to_host", "asarray", "float64", "fused", "decode_ieee", "stack",
           "concatenate"]


def on_device(x: Any) -> bool:
    """True for CuPy arrays and ``DeviceValues`` (data in GPU memory).

    >>> on_device(np.ones(2)), on_device(None)
    (False, False)
    """
    return isinstance(x, DeviceValues) or type(x).__module__.startswith("cupy")


def namespace(*arrays: Any) -> ModuleType:
    """``cupy`` if any argument lives on a GPU, else ``numpy`` (None and Python scalars are ignored)."""
    if any(on_device(x) for x in arrays):
        import cupy

        return cupy
    return np


def to_host(x: Any) -> Any:
    """A numpy copy of a device array (``DeviceValues`` become typed numpy arrays); host arrays pass through."""
    if isinstance(x, DeviceValues):
        return x.get()
    if type(x).__module__.startswith("cupy"):
        return x.get()
    return x


def asarray(x: Any) -> Any:
    """``x`` as an array where it lives: ``DeviceValues`` and CuPy arrays as they are, anything else numpy."""
    return x if isinstance(x, DeviceValues) else namespace(x).asarray(x)


def float64(x: Any) -> Any:
    """Exact float64 values of an array of any supported type, in its namespace.

    On a GPU, float16 / float32 arrays are decoded from their bit patterns: CuPy compiles its kernels with
    ``-ftz=true``, so its float32 -> float64 cast turns subnormals into zeros.

    >>> float64(np.array([1.5], np.float16)).dtype
    dtype('float64')
    """
    if isinstance(x, DeviceValues):
        return x.format.to_float(x.bits)
    x = asarray(x)
    if namespace(x) is not np and x.dtype.kind == "f" and x.dtype.itemsize in _IEEE_FIELDS:
        return decode_ieee(x.view(f"uint{8 * x.dtype.itemsize}"), *_IEEE_FIELDS[x.dtype.itemsize], xp=namespace(x))
    return x.astype(np.float64)


# (width, exp_bits, man_bits, bias) of float16 and float32
_IEEE_FIELDS = {2: (16, 5, 10, 15), 4: (32, 8, 23, 127)}


def fused(body):
    """``body(x, xp, *params)`` -- elementwise, written once over the array namespace -- as one GPU kernel per
    ``params`` on CuPy (``cupy.fuse`` traces the same Python source into a single elementwise kernel instead of one
    kernel and one temporary per operation), as is on numpy or where CuPy cannot fuse it (then it runs unfused:
    the same operations, the same bits).  ``params`` must be hashable constants (a format's fields).

    The body must not depend on Python scalars' types: CuPy's fusion types a bare Python scalar by its kind alone
    (measured on CuPy 14.2: ``where(c, 1 << 52, 0)`` became an int8 kernel and gave 0); typed numpy scalars
    (``np.int64(...)``) or arrays on each branch of a ``where`` keep the width.  The tests' fake CuPy refuses a
    ``where`` of two Python scalars inside ``fuse``."""
    kernels: dict = {}

    def run(x, xp, *params):
        if xp is np:
            return body(x, xp, *params)
        key = (xp, *params)
        fn = kernels.get(key)
        if fn is None:
            def kernel(v):
                return body(v, xp, *params)
            kernel.__name__ = f"tc{body.__name__}"  # the fused kernel's name: a C identifier ("<lambda>" is not)
            try:
                fn = xp.fuse(kernel)
            except Exception:  # no fuse in this CuPy
                fn = False
            kernels[key] = fn
        if fn is not False:
            try:
                return fn(x)
            except Exception:  # not fusable in this CuPy: the unfused operations from now on
                kernels[key] = False
        return body(x, xp, *params)

    run.__doc__, run.__name__, run.__wrapped__ = body.__doc__, body.__name__, body
    run.kernels = kernels  # (namespace, *params) -> the fused kernel, or False: runs unfused (tests, benchmarks)
    return run


def decode_ieee(bits: Any, width: int, exp_bits: int, man_bits: int, bias: int, pad_bits: int = 0, *,
                xp: ModuleType = np, specials: str = "ieee") -> Any:
    """float64 values of signed bit patterns with subnormals (``width`` bits above ``pad_bits``) in integer
    arithmetic and exact float64 scaling: no float32 operation, so flush-to-zero kernels give the exact values
    (one fused kernel on a GPU).  ``specials``: "ieee" (the top exponent is inf / NaN), "fn" (only the all-ones
    magnitude is NaN; OCP E4M3), "fnuz" (only the "-0" pattern is NaN) or "none" (every pattern finite: FP6, FP4).
    NaNs: numpy's on the host; on a GPU the device's own, 0xFFF8... (``_casts.to_float`` canonicalises FP8's).

    >>> decode_ieee(np.array([0x3C00, 0x0001, 0xFC00], np.uint16), 16, 5, 10, 15).tolist()
    [1.0, 5.960464477539063e-08, -inf]
    >>> decode_ieee(np.array([0x7E, 0x7F, 0x80], np.uint8), 8, 4, 3, 7, specials="fn").tolist()
    [448.0, nan, -0.0]
    """
    if specials not in ("ieee", "fn", "fnuz", "none"):
        raise ValueError(f"specials: expected 'ieee', 'fn', 'fnuz' or 'none', got {specials!r}")
    return _decode_ieee(bits, xp, width, exp_bits, man_bits, bias, pad_bits, specials)


@fused
def _decode_ieee(bits: Any, xp: ModuleType, width: int, exp_bits: int, man_bits: int, bias: int, pad_bits: int,
                 specials: str) -> Any:
    v = (bits.astype(np.int64) >> pad_bits) & ((1 << width) - 1)
    sign = v >> (width - 1)
    code = v & ((1 << (width - 1)) - 1)
    e = code >> man_bits
    f = code & ((1 << man_bits) - 1)
    normal = xp.ldexp((f | (1 << man_bits)).astype(np.float64), (e - bias - man_bits).astype(np.int32))  # exact
    tiny = f.astype(np.float64) * 2.0 ** (1 - bias - man_bits)  # exact: a float64 normal number
    mag = xp.where(e == 0, tiny, normal)
    if specials == "ieee":
        mag = xp.where(e == (1 << exp_bits) - 1, xp.where(f == 0, np.float64(np.inf), np.float64(np.nan)), mag)
    out = xp.where(sign == 1, -mag, mag)
    if specials == "fn":
        out = xp.where(code == (1 << (width - 1)) - 1, np.float64(np.nan), out)
    elif specials == "fnuz":
        out = xp.where((sign == 1) & (code == 0), np.float64(np.nan), out)
    return out  # a NaN literal in a GPU kernel is the GPU's NaN, 0xFFF8... (measured on an H200; fused abs keeps it)


def stack(arrays: list) -> Any:
    """``xp.stack`` that also stacks ``DeviceValues`` (by their bits)."""
    if arrays and isinstance(arrays[0], DeviceValues):
        import cupy

        return DeviceValues(cupy.stack([a.bits for a in arrays]), arrays[0].format)
    return namespace(*arrays).stack(arrays)


def concatenate(arrays: list, axis: int = 0) -> Any:
    """``xp.concatenate`` that also joins ``DeviceValues`` (by their bits)."""
    if arrays and isinstance(arrays[0], DeviceValues):
        import cupy

        return DeviceValues(cupy.concatenate([a.bits for a in arrays], axis=axis), arrays[0].format)
    return namespace(*arrays).concatenate(arrays, axis=axis)


class DeviceValues:
    """Values of a floating-point format on a GPU, held as their bit patterns.

    ``bits``: an unsigned CuPy array of the format's container width (its shape and strides are the
    values'); ``format``: a ``tcnumerics.formats.FloatFormat``.  It offers what the library's ops read
    from an operand -- ``shape``, ``ndim``, ``strides`` (torch's layout rules), ``dtype`` (the
    format's numpy/ml_dtypes dtype, for its name), ``T``, ``reshape`` and indexing -- and ``get()``,
    a typed numpy copy.
    """

    __slots__ = ("bits", "format")

    def __init__(self, bits, fmt) -> None:
        if bits.dtype.kind != "u" or bits.dtype.itemsize * 8 != fmt.container_bits:
            raise TypeError(f"bits: expected uint{fmt.container_bits} patterns of {fmt.name}, got dtype {bits.dtype}")
        self.bits = bits
        self.format = fmt

    def __repr__(self) -> str:
        return f"DeviceValues({self.format.name}, shape={self.shape}, device={self.bits.device.id})"

    @property
    def shape(self) -> tuple:
        return tuple(self.bits.shape)

    @property
    def ndim(self) -> int:
        return self.bits.ndim

    @property
    def size(self) -> int:
        return int(self.bits.size)

    @property
    def strides(self) -> tuple:
        return tuple(self.bits.strides)

    @property
    def dtype(self) -> np.dtype:
        dt = self.format.dtype
        return dt if dt is not None else np.dtype(self.format.container_dtype)

    @property
    def T(self) -> "DeviceValues":
        return DeviceValues(self.bits.T, self.format)

    def reshape(self, *shape) -> "DeviceValues":
        return DeviceValues(self.bits.reshape(*shape), self.format)

    def __getitem__(self, index) -> "DeviceValues":
        return DeviceValues(self.bits[index], self.format)

    def __len__(self) -> int:
        return len(self.bits)

    def get(self) -> np.ndarray:
        """A numpy copy with the format's ml_dtypes type (float32 containers for TF32-like formats)."""
        return self.format.to_array(self.bits.get())
