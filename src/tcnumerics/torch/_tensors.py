"""Torch tensors <-> numpy arrays of the same bits and strides (ml_dtypes types for BF16 and FP8).

The views keep torch's strides, so a transposed operand stays a transposed numpy view: the
library presets read the layout (NN / TN / NT) from those strides.

Example:
    >>> import torch
    >>> t = torch.ones(3, 2, dtype=torch.bfloat16).t()
    >>> a = to_numpy(t); a.dtype, a.shape, a.strides
    (dtype(bfloat16), (2, 3), (2, 4))
    >>> from_numpy(a, like=t).dtype
    torch.bfloat16
"""

from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np
import torch

from .. import arrays, interop
from ..arrays import on_device
from .devices import engine_for, on_torch_stream

__all__ = ["to_numpy", "from_numpy", "to_array", "to_tensor", "float64_values", "on_gpu_engine", "gpu_work",
           "format_name", "TORCH_FORMATS"]

# torch dtype -> (integer view dtype for the bits, numpy/ml_dtypes type, tcnumerics format name)
_VIEWS = {
    torch.bfloat16: (torch.int16, ml_dtypes.bfloat16, "bf16"),
    torch.float16: (None, np.float16, "fp16"),
    torch.float32: (None, np.float32, "fp32"),
    torch.float64: (None, np.float64, "fp64"),
    torch.float8_e4m3fn: (torch.uint8, ml_dtypes.float8_e4m3fn, "e4m3"),
    torch.float8_e5m2: (torch.uint8, ml_dtypes.float8_e5m2, "e5m2"),
    torch.float8_e4m3fnuz: (torch.uint8, ml_dtypes.float8_e4m3fnuz, "e4m3fnuz"),
    torch.float8_e5m2fnuz: (torch.uint8, ml_dtypes.float8_e5m2fnuz, "e5m2fnuz"),
}
TORCH_FORMATS = {dt: v[2] for dt, v in _VIEWS.items()}
_BY_NUMPY = {np.dtype(v[1]): dt for dt, v in _VIEWS.items()}


def format_name(dtype: torch.dtype) -> str:
    """The tcnumerics format name of a torch floating-point dtype ("bf16", "e4m3", ...)."""
    try:
        return _VIEWS[dtype][2]
    except KeyError:
        raise TypeError(f"dtype: {dtype} has no matrix-unit format (expected one of "
                        f"{', '.join(str(d) for d in _VIEWS)})") from None


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy view (or, for a CUDA tensor, a CPU copy) of ``t``'s values with the same shape and strides."""
    if t.dtype not in _VIEWS:
        raise TypeError(f"tensor: dtype {t.dtype} is not a floating-point matrix operand type")
    if t.device.type != "cpu":
        t = _cpu_copy(t)
    t = t.detach()
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    int_view, np_type, _ = _VIEWS[t.dtype]
    if int_view is None:
        return t.numpy()
    return t.view(int_view).numpy().view(np_type)


def _cpu_copy(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy that keeps the strides (a transposed view stays transposed)."""
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")
    out.copy_(t)
    return out


def from_numpy(a: np.ndarray, *, like: torch.Tensor | None = None, device: torch.device | str | None = None) \
        -> torch.Tensor:
    """A torch tensor holding ``a``'s values (its dtype from the numpy type), on ``device`` (default: ``like``'s)."""
    a = np.ascontiguousarray(a)
    dtype = _BY_NUMPY.get(a.dtype)
    if dtype is None:
        raise TypeError(f"array: numpy dtype {a.dtype} has no torch counterpart here")
    int_view, _, _ = _VIEWS[dtype]
    if int_view is None:
        t = torch.from_numpy(a)
    else:
        t = torch.from_numpy(a.view(np.int16 if int_view is torch.int16 else np.uint8)).view(dtype)
    if device is None and like is not None:
        device = like.device
    return t if device is None or torch.device(device).type == "cpu" else t.to(device)


def to_array(t: torch.Tensor, engine: str | None = None):
    """The operand as the library takes it: on the GPU engine, a CUDA tensor's own memory as a CuPy array
    (``DeviceValues`` for BF16/FP8) through DLPack, strides kept and nothing copied; otherwise a numpy view
    (a host copy of a CUDA tensor when the GPU engine does not run it)."""
    if t.is_cuda and engine == "cuda":
        if t.dtype not in _VIEWS:
            raise TypeError(f"tensor: dtype {t.dtype} is not a floating-point matrix operand type")
        return interop.from_torch(t)
    return to_numpy(t)


def on_gpu_engine(t: torch.Tensor) -> bool:
    """Does a GEMM of ``t`` run on the GPU engine (a CUDA tensor, CuPy usable)?"""
    return t.is_cuda and engine_for(t.device.type, "auto") == "cuda"


def gpu_work(t: torch.Tensor):
    """A context for CuPy work on ``t``'s values outside the emulation's own call (autograd hooks): on torch's
    current stream and allocator where ``t`` is on the GPU engine, as the emulated GEMMs are; else nothing."""
    return on_torch_stream(t.device) if on_gpu_engine(t) else contextlib.nullcontext()


def float64_values(t: torch.Tensor, device: bool):
    """Exact float64 values of ``t`` where the measurement runs: with ``device`` (a CUDA tensor on the GPU engine)
    a CuPy array decoded from the tensor's own memory (no host copy), else a numpy array (error attribution)."""
    if device:  # contiguous on the device first: an expanded gradient (stride 0) need not survive DLPack as a view
        return arrays.float64(to_array(t.detach().contiguous(), "cuda"))
    return np.asarray(to_numpy(t), np.float64)


def inner(t: torch.Tensor, values) -> float:
    """``<t, values>`` as a float, computed where ``values`` lie (numpy, or CuPy on torch's stream for a tensor on
    the GPU engine): one scalar reaches the host (first-order estimates: a gradient against an error)."""
    with gpu_work(t):
        return float((float64_values(t, on_device(values)) * values).sum())


def to_tensor(result, device: torch.device) -> torch.Tensor:
    """A library result as a torch tensor on ``device``: device arrays without a copy (DLPack)."""
    if on_device(result):
        return interop.to_torch(result)
    return from_numpy(np.asarray(result), device=device)
