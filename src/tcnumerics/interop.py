"""Torch tensors in and out without copies: CUDA tensors become CuPy arrays (or ``DeviceValues`` for BF16
and FP8) through DLPack, strides kept; CPU tensors numpy / ml_dtypes views.  torch is imported only when a
torch tensor is handed in, so nothing here needs the ``[torch]`` extra.

Example:
    >>> import numpy as np
    >>> is_torch(np.ones(2))
    False
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from .arrays import DeviceValues, namespace
from .formats import get_format

__all__ = ["is_torch", "from_torch", "to_torch", "torch_args", "takes_torch"]

# torch dtype name -> (same-width integer dtype name the bits travel as, tcnumerics format)
_BITS = {"bfloat16": ("int16", "bf16"), "float8_e4m3fn": ("uint8", "e4m3"), "float8_e5m2": ("uint8", "e5m2"),
         "float8_e4m3fnuz": ("uint8", "e4m3fnuz"), "float8_e5m2fnuz": ("uint8", "e5m2fnuz")}


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "is_cuda")


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def from_torch(t) -> Any:
    """The tensor's values where they live: a CuPy array / ``DeviceValues`` (CUDA) or a numpy view (CPU)."""
    t = t.detach()
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    name = _dtype_name(t)
    bits = _BITS.get(name)
    if not t.is_cuda:
        if bits is None:
            return t.numpy()
        import torch

        return t.view(getattr(torch, bits[0])).numpy().view(get_format(bits[1]).dtype)
    import cupy

    if bits is None:
        return cupy.from_dlpack(t)
    import torch

    fmt = get_format(bits[1])
    raw = cupy.from_dlpack(t.view(getattr(torch, bits[0])))
    return DeviceValues(raw.view(fmt.container_dtype), fmt)


def to_torch(x: Any, device=None):
    """An array of this library as a torch tensor (zero-copy through DLPack on a GPU)."""
    import torch

    if isinstance(x, DeviceValues):
        name = next((k for k, v in _BITS.items() if v[1] == x.format.name), None)
        if name is None:
            raise TypeError(f"result: format {x.format.name} has no torch dtype; pass CuPy arrays to get it as "
                            "DeviceValues")
        int_name = _BITS[name][0]
        t = torch.from_dlpack(x.bits.view(np.dtype(int_name)))
        return t.view(getattr(torch, name))
    if namespace(x) is not np:
        return torch.from_dlpack(x)
    x = np.ascontiguousarray(x)
    fmt_name = {v[1]: (k, v[0]) for k, v in _BITS.items()}.get(_format_name(x))
    try:
        t = torch.from_numpy(x.view(np.dtype(fmt_name[1]))).view(getattr(torch, fmt_name[0])) if fmt_name else \
            torch.from_numpy(x)
    except TypeError:
        raise TypeError(f"result: dtype {x.dtype} has no torch counterpart; pass numpy arrays to get it") from None
    if not t.numel():  # numpy gives empty arrays zero strides; torch's own empties are contiguous
        t = torch.empty(t.shape, dtype=t.dtype)
    return t if device is None else t.to(device)


def _format_name(x: np.ndarray) -> str | None:
    try:
        return get_format(x.dtype.name).name
    except ValueError:
        return None


def torch_args(*arrays) -> tuple[list, Callable]:
    """Torch tensors among ``arrays`` as this library's arrays, and a function putting a result back as torch."""
    like = next((x for x in arrays if is_torch(x)), None)
    converted = [from_torch(x) if is_torch(x) else x for x in arrays]
    if like is None:
        return converted, lambda r: r
    return converted, lambda r: to_torch(r, like.device)


def takes_torch(fn: Callable) -> Callable:
    """``fn`` taking this library's arrays, made to take torch tensors in any argument too: tensors become arrays
    where they live (``from_torch``: no copy, CUDA stays on the GPU) and an array result comes back as a tensor of
    torch's dtype on the first tensor's device.  Without a tensor among the arguments, ``fn`` runs as it is.

    >>> takes_torch(lambda a, b=None: a + 1)(np.ones(2)).tolist()
    [2.0, 2.0]
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args, kwargs, like = untorch(args, kwargs)
        result = fn(*args, **kwargs)
        return result if like is None else as_torch_like(result, like)
    return wrapper


def untorch(args: tuple, kwargs: dict) -> tuple[tuple, dict, Any]:
    """``args`` and ``kwargs`` with every torch tensor as this library's array (``from_torch``), and the first
    tensor (None where there is none): results go back as tensors on its device."""
    like = next((x for x in (*args, *kwargs.values()) if is_torch(x)), None)
    if like is None:
        return args, kwargs, None
    args = tuple(from_torch(x) if is_torch(x) else x for x in args)
    return args, {k: from_torch(v) if is_torch(v) else v for k, v in kwargs.items()}, like


def as_torch_like(result: Any, like) -> Any:
    """``result`` as a tensor on ``like``'s device where it is an array; anything else (a plan, a scalar) as it is."""
    if isinstance(result, DeviceValues) or isinstance(result, np.ndarray) or type(result).__module__.startswith("cupy"):
        return to_torch(result, like.device)
    return result
