"""Which engine computes a call whose tensors live on a device: the GPU engine for CUDA tensors
when it is usable (CuPy importable and a GPU present), else the CPU engine on a host copy; and CuPy work on torch's
stream and allocator (``on_torch_stream``)."""

from __future__ import annotations

import contextlib
import functools
import sys

import torch


@functools.lru_cache(maxsize=None)
def gpu_engine_usable() -> bool:
    """True when ``engine="cuda"`` can run here: CuPy imports and sees at least one GPU.

    >>> isinstance(gpu_engine_usable(), bool)
    True
    """
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "copy to the CPU"
        return False


def engine_for(device_type: str, engine: str) -> str:
    """The engine for a call on ``device_type`` ("cpu", "cuda", ...) given the requested ``engine``.

    CUDA tensors with ``engine="auto"`` go to the GPU engine when it is usable; everything else
    keeps the requested engine (a CPU engine on a host copy).

    >>> engine_for("cpu", "auto")
    'auto'
    """
    if device_type == "cuda" and engine == "auto" and gpu_engine_usable():
        return "cuda"
    return engine


@contextlib.contextmanager
def on_torch_stream(device: torch.device):
    """CuPy work on ``device``, on torch's current stream there (emulated GEMMs order with torch's kernels) and in
    torch's caching allocator (one memory pool: CuPy's own pool would hold freed blocks torch cannot reuse)."""
    import cupy

    index = device.index if device.index is not None else torch.cuda.current_device()
    stream = torch.cuda.current_stream(index)
    allocator = _torch_allocator(index, stream)
    with cupy.cuda.Device(index), _cupy_stream(cupy, stream), cupy.cuda.using_allocator(allocator):
        yield


def _cupy_stream(cupy, stream):
    """torch's stream as a CuPy stream (the CUDA stream protocol where CuPy has it, else the raw handle)."""
    try:
        return cupy.cuda.Stream.from_external(stream)
    except (AttributeError, TypeError, ValueError):  # an older CuPy, or a torch stream without the protocol
        return cupy.cuda.ExternalStream(stream.cuda_stream)


class _TorchBlock:
    """Owns one block of torch's caching allocator; handing it back when CuPy drops the memory."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    # both bound at class creation: at interpreter exit the module's globals (torch, sys) are already None
    def __del__(self, _free=torch.cuda.caching_allocator_delete, _finalizing=sys.is_finalizing):
        try:
            _free(self.ptr)
        except Exception:
            if not _finalizing():  # at exit torch releases its whole pool itself
                raise


def _torch_allocator(index: int, stream):
    import cupy

    def alloc(size: int):
        if size == 0:
            return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(0, 0, None, index), 0)
        ptr = torch.cuda.caching_allocator_alloc(size, index, stream)
        return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(ptr, size, _TorchBlock(ptr), index), 0)
    return alloc
