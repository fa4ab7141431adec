"""Torch tensors in and out without copies: CUDA tensors become CuPy arrays (or ``DeviceValues`` for BF16
and FP8) through DLPack, strides kept; CPU tensors numpy / ml_dtypes views.  torch is imported only when a
torch tensor is handed in, so nothing here needs the ``[torch]`` extra.

Example:
    >>> import numpy as np
    >>> is_torch(np.ones(2))
    False
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .arrays import DeviceValues, namespace
from .formats import get_format

__all__ = ["is_torch", "from_torch", "to_torch", "torch_args", "torch_call", "torch_io"]

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


def torch_call(args: tuple, kwargs: dict) -> tuple[tuple, dict, Callable]:
    """A call's arguments with every torch tensor (positional or keyword) as this library's array -- CUDA tensors
    stay on their GPU (DLPack), CPU tensors become numpy / ml_dtypes views -- and a function putting the result
    back as a torch tensor on the first tensor's device (identity when no tensor was passed).

    >>> import numpy as np
    >>> args, kwargs, restore = torch_call((np.ones(2),), {"engine": "auto"})
    >>> restore(args[0]).tolist(), kwargs
    ([1.0, 1.0], {'engine': 'auto'})
    """
    like = next((x for x in (*args, *kwargs.values()) if is_torch(x)), None)
    if like is None:
        return args, kwargs, lambda r: r
    args = tuple(from_torch(x) if is_torch(x) else x for x in args)
    kwargs = {k: from_torch(v) if is_torch(v) else v for k, v in kwargs.items()}
    return args, kwargs, lambda r: to_torch(r, like.device)


def torch_io(fn: Callable) -> Callable:
    """``fn`` taking and returning torch tensors as well as arrays: the one adapter of every public entry point
    (``torch_call`` on the way in, the result back on the tensors' device on the way out).

    >>> import numpy as np
    >>> torch_io(lambda a, b: a + b)(np.ones(2), b=np.ones(2)).tolist()
    [2.0, 2.0]
    """
    import functools

    @functools.wraps(fn)
    def adapted(*args, **kwargs):
        args, kwargs, restore = torch_call(args, kwargs)
        return restore(fn(*args, **kwargs))
    return adapted
