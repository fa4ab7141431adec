"""A stand-in for CuPy on machines without a GPU: numpy underneath, CuPy's strictness on top.

The composition of a GEMM is written once over an array namespace; on a GPU it runs on CuPy.  CI has
no GPU, so these tests hand the library "device" arrays of this module instead: they behave as CuPy
arrays do where it matters for correctness -- they refuse to turn into numpy arrays implicitly
(``np.asarray(x)`` raises TypeError, as CuPy does), refuse numpy arrays in their arithmetic, keep
results "on the device", and copy to the host only through ``.get()`` / ``asnumpy``.  A code path that
mixes host and device arrays therefore fails here as it would on the GPU.

``install()`` puts this module in ``sys.modules["cupy"]`` (only where no real CuPy is importable) and
routes the GPU engine's chains and dot products to the CPU fast engine, so the library's own CuPy lines are what runs.
"""

from __future__ import annotations

import sys
import types

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin


class ndarray(NDArrayOperatorsMixin):
    """A 'device' array: a numpy array that cannot silently leave the device."""

    __module__ = "cupy._fake"

    def __init__(self, data: np.ndarray):
        self._a = data

    # --- what CuPy refuses ------------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct "
                        "a NumPy array explicitly.")

    def __bool__(self):
        return bool(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __index__(self):
        return int(self._a)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (_wrap(x) for x in self._a)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        args = [_flush(_device(x, ufunc.__name__)) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(_device(o, ufunc.__name__) for o in kwargs["out"])
        return _wrap(_flush(getattr(ufunc, method)(*args, **kwargs)))

    def astype(self, dtype, copy=True):
        """Casts as CuPy's kernels do them: float32 subnormals in or out flush to zero (``-ftz=true``)."""
        return ndarray(_flush(_flush(self._a).astype(dtype, copy=copy)))

    # --- attributes and methods ----------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    dtype = property(lambda self: self._a.dtype)
    strides = property(lambda self: self._a.strides)
    itemsize = property(lambda self: self._a.itemsize)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: ndarray(self._a.T))
    device = property(lambda self: types.SimpleNamespace(id=0))

    def get(self) -> np.ndarray:
        return self._a.copy()

    def __getitem__(self, index):
        return _wrap(self._a[_unwrap_index(index)])

    def __setitem__(self, index, value):
        self._a[_unwrap_index(index)] = _device(value, "setitem")

    def __getattr__(self, name):
        attr = getattr(self._a, name)
        if not callable(attr):
            return attr

        def method(*args, **kwargs):
            return _wrap(attr(*(_device(a, name) for a in args),
                              **{k: _device(v, name) for k, v in kwargs.items()}))
        return method

    def __repr__(self):
        return f"fake_cupy.ndarray({self._a!r})"


def _flush(a):
    """CuPy compiles its kernels with ``-ftz=true``: float32 subnormals, read or written, are zero."""
    if isinstance(a, (np.ndarray, np.generic)) and a.dtype == np.float32:
        tiny = np.abs(a) < np.float32(2.0 ** -126)
        if np.any(tiny & (a != 0)):
            return np.where(tiny, np.copysign(np.float32(0), a), a).astype(np.float32)
    return a


def _unwrap_index(index):
    if isinstance(index, tuple):
        return tuple(_unwrap_index(i) for i in index)
    return index._a if isinstance(index, ndarray) else index


def _device(x, what: str):
    """An operand of a device operation: device arrays unwrap; a host numpy array is refused (as CuPy does)."""
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, np.ndarray):
        raise TypeError(f"Unsupported type <class 'numpy.ndarray'> in {what}: a host array met a device array")
    if isinstance(x, (list, tuple)):
        return type(x)(_device(v, what) for v in x)
    return x


def _wrap(r):
    if isinstance(r, np.generic):  # CuPy's operations give 0-d device arrays, never host scalars
        return ndarray(np.asarray(r))
    if isinstance(r, np.ndarray):
        return ndarray(r)
    if isinstance(r, tuple):
        return tuple(_wrap(v) for v in r)
    if isinstance(r, list):
        return [_wrap(v) for v in r]
    return r


# --- the module's functions ------------------------------------------------------------------------

def asarray(x, dtype=None):
    """Host data uploads; device arrays stay."""
    if isinstance(x, ndarray):
        return x if dtype is None else ndarray(x._a.astype(dtype))
    return ndarray(np.array(x, dtype=dtype))


array = asarray


_fusing = [False]


def fuse(fn):
    """``cupy.fuse``: one kernel on a GPU, named after ``fn``; here the traced operations run one by one, with this
    module's rules, and a ``where`` of two bare Python scalars is refused (CuPy's fusion types them by kind alone:
    on CuPy 14.2 ``where(c, 1 << 52, 0)`` compiled to an int8 result, 0)."""
    if not fn.__name__.isidentifier():
        raise ValueError(f"{fn.__name__!r}: not a C identifier (CuPy's compile of the fused kernel would fail)")

    def traced(*args):
        _fusing[0] = True
        try:
            return fn(*args)
        finally:
            _fusing[0] = False
    traced.__name__ = fn.__name__
    return traced


def where(condition, x=None, y=None):
    if x is None and y is None:
        return _function("where")(condition)
    if _fusing[0] and all(isinstance(v, (bool, int, float)) and not isinstance(v, np.generic) for v in (x, y)):
        raise TypeError(f"where({x!r}, {y!r}) inside fuse: CuPy types bare Python scalars by kind (int8 for ints)")
    return _function("where")(condition, x, y)


def asnumpy(x):
    return x.get() if isinstance(x, ndarray) else np.asarray(x)


def _function(name: str):
    fn = getattr(np, name)
    if not callable(fn) or isinstance(fn, type):
        return fn  # dtypes and constants

    def device_fn(*args, **kwargs):
        return _wrap(fn(*(_device(a, name) for a in args), **{k: _device(v, name) for k, v in kwargs.items()}))
    device_fn.__name__ = name
    return device_fn


def install(monkeypatch) -> types.ModuleType:
    """Make ``import cupy`` give this module and the GPU engine's chains run on the CPU: the fast engine, or -- for
    promotion inside the kernels -- the kernels' own host build (``engines.cuda.host_accumulate_bits``)."""
    module = sys.modules[__name__]
    monkeypatch.setitem(sys.modules, "cupy", module)

    from tcnumerics.engines import _cuda_build, cuda, fast

    def accumulate_bits(spec, a_rows, b_cols, acc, k_start=0, k_stop=None, promote_every=None,
                        promote_from_acc=False, **kw):
        for name, x in (("a_rows", a_rows), ("b_cols", b_cols), ("acc", acc)):
            if not isinstance(x, ndarray):
                raise TypeError(f"{name}: the GPU engine was handed a host array ({type(x).__name__})")
        kw = {k: v for k, v in kw.items() if v is not None}  # unit scales (gemm_bits passes scale_a=None)
        if promote_every is not None:
            out = cuda.host_accumulate_bits(spec, a_rows.get(), b_cols.get(), acc.get(), k_start, k_stop,
                                            promote_every=promote_every, promote_from_acc=promote_from_acc, **kw)
        elif any(v is not None for v in kw.values()):  # block scales: the kernels' host build
            out = cuda.host_accumulate_bits(spec, a_rows.get(), b_cols.get(), acc.get(), k_start, k_stop, **kw)
        else:
            out = fast.accumulate_bits(spec, a_rows.get(), b_cols.get(), acc.get(), k_start, k_stop)
        return ndarray(out)

    def ffma_chain(a, b_t, cols=None):
        for name, x in (("a", a), ("b_t", b_t)):
            if not isinstance(x, ndarray):
                raise TypeError(f"{name}: the GPU engine was handed a host array ({type(x).__name__})")
        a, b_t = a.get(), b_t.get()
        cols = np.arange(a.shape[1]) if cols is None else cols.get()
        if _cuda_build.host_compiler() is None:  # no compiler here: the library's host chain (numba / numpy)
            from tcnumerics.library.structure import Structure, ffma_partials

            return ndarray(ffma_partials(Structure("ffma"), a[:, cols], b_t[:, cols].T)[0].astype(np.float32))
        return ndarray(cuda.host_ffma_chain(a, b_t, cols))

    def dot_bits(spec, a, b, c, **kw):
        for name, x in (("a", a), ("b", b), ("c", c)):
            if not isinstance(x, ndarray):
                raise TypeError(f"{name}: the GPU engine was handed a host array ({type(x).__name__})")
        return ndarray(fast.dot_bits(spec, a.get(), b.get(), c.get(), **kw))

    monkeypatch.setattr(cuda, "accumulate_bits", accumulate_bits)
    monkeypatch.setattr(cuda, "dot_bits", dot_bits)
    monkeypatch.setattr(cuda, "ffma_chain", ffma_chain)
    return module


def __getattr__(name: str):
    return _function(name)
