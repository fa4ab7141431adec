"""Backends: compute one ``GemmCall`` -- on a unit (``UnitBackend``) or as Hopper's cuBLAS does (``LibraryBackend``).

Both return ``(numpy result [batch?, M, N] of the op's output type, CallInfo)`` and do no
arithmetic of their own: the unit path is ``unit.UnitRecipe`` (formats + ``tcnumerics.gemm``
+ ``tcnumerics.blockscale``), the library path is ``tcnumerics.library``'s per-op functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import functools

import numpy as np
import torch

from .. import arrays
from ._tensors import format_name, to_array
from .calls import GemmCall
from .unit import UnitRecipe, epilogue

__all__ = ["CallInfo", "UnitBackend", "LibraryBackend", "NotModelledWarning"]

class NotModelledWarning(UserWarning):
    """A call ran, but what it computes is not modelled bit for bit (the message says why)."""


@dataclass(frozen=True)
class CallInfo:
    """What computed a call: the kernel (library mode) or instruction recipe (unit mode), and whether it is modelled."""

    kernel: str
    modelled: bool = True
    reason: str = ""
    call: object = field(default=None, compare=False)  # library mode: the library's Call (the self-check records it)


class UnitBackend:
    """Unit mode: forward GEMMs on ``recipe``, backward ones on ``backward`` (default: the same)."""

    def __init__(self, recipe: UnitRecipe, backward: UnitRecipe | None = None):
        self.recipe = recipe
        self.backward = backward or recipe

    @property
    def engine(self) -> str:
        """The engine requested for this backend's GEMMs (the forward recipe's)."""
        return self.recipe.engine

    def unsupported(self, call: GemmCall) -> str:
        """Why this backend cannot compute ``call`` ("" when it can): a unit rounds any float operand."""
        return ""

    def describe(self) -> str:
        text = f"unit mode: {self.recipe.describe()}"
        if self.backward is not self.recipe:
            text += f"; backward: {self.backward.describe()}"
        return text

    def execute(self, call: GemmCall, *, backward: bool = False, index: int = 0,
                full_shape: tuple | None = None, engine: str | None = None) -> tuple[np.ndarray, CallInfo]:
        """``full_shape`` is accepted and unused: a unit's result does not depend on the call's size."""
        recipe = self.backward if backward else self.recipe
        engine = engine or recipe.engine
        a, b = to_array(call.a, engine), to_array(call.b, engine)
        out_fmt = format_name(call.out_dtype)
        batched = a.ndim == 3
        a3, b3 = (a, b) if batched else (a[None], b[None])
        shape = (a3.shape[0], a3.shape[1], b3.shape[2])
        c = None
        if call.c is not None and call.beta != 0:
            c = arrays.float64(to_array(call.c, engine))
            c = arrays.namespace(c).broadcast_to(c, shape if batched else shape[1:])
            c = c if batched else c[None]
        acc = recipe.matmul_batch(a3, b3, call_index=index * 65536, engine=engine)
        scaled = call.op == "_scaled_mm"  # its scales are the epilogue's first step, as cuBLASLt applies them
        # the epilogue is elementwise: one pass over the whole batch (a plan run by the interpreter)
        out = epilogue(acc, out_fmt, alpha=call.alpha, C=c, beta=call.beta,
                       bias=None if call.bias is None else to_array(call.bias, engine), acc_format=recipe.acc_format,
                       scale_a=to_array(call.scale_a, engine) if scaled else None,
                       scale_b=to_array(call.scale_b, engine) if scaled else None)
        result = out if batched else out[0]
        return result, CallInfo(recipe.spec.name if recipe.describe() == recipe.spec.name else recipe.describe())


@functools.lru_cache(maxsize=None)
def _device_model(index: int) -> str:
    from ..library.gpus import model_key

    return model_key(torch.cuda.get_device_name(index))


_LIBRARY_DTYPES = {torch.bfloat16, torch.float16, torch.float32, torch.float8_e4m3fn, torch.float8_e5m2}


class LibraryBackend:
    """Library mode: each call as ``tcnumerics.library`` predicts Hopper's cuBLAS computes it."""

    def __init__(self, arch: str = "hopper", engine: str = "auto", gpu: str | None = None):
        from .. import library as lib

        missing = [name for name in ("matmul", "addmm", "bmm", "baddbmm", "scaled_mm") if not hasattr(lib, name)]
        if missing:
            raise RuntimeError("library mode needs tcnumerics.library's per-op functions (library.matmul, addmm, "
                               f"bmm, baddbmm, scaled_mm); this installation lacks {', '.join(missing)}")
        self.lib = lib
        self.arch = arch
        self.engine = engine
        self.gpu = gpu  # None: the GPU the tensors are on (CUDA), the library's default GPU model (CPU)

    def describe(self) -> str:
        where = f"the {self.gpu} tables" if self.gpu else "the tables of the GPU the tensors are on (CPU: the H100's)"
        return f"library mode: {self.arch} cuBLAS as tcnumerics.library models it, {where}"

    def gpu_for(self, tensor: torch.Tensor) -> str | None:
        """The GPU model whose tables predict a call on ``tensor``: ``gpu=`` if given, else the tensor's GPU."""
        if self.gpu is not None or not tensor.is_cuda:
            return self.gpu
        return _device_model(tensor.device.index if tensor.device.index is not None else torch.cuda.current_device())

    def unsupported(self, call: GemmCall) -> str:
        """Why library mode runs ``call`` natively ("" when it models it): dtypes with no modelled cuBLAS kernels."""
        dtypes = {call.a.dtype, call.b.dtype}
        if dtypes <= _LIBRARY_DTYPES:
            return ""
        names = "/".join(sorted(str(d).replace("torch.", "") for d in dtypes - _LIBRARY_DTYPES))
        return (f"{names} GEMMs are not modelled (cuBLAS runs FP64 DMMA / other kernels the library has not "
                "measured); ran natively")

    def _options(self) -> dict:
        precision = torch.get_float32_matmul_precision()
        return dict(arch=self.arch, engine=self.engine, fp32_precision=precision)

    def execute(self, call: GemmCall, *, backward: bool = False, index: int = 0,
                full_shape: tuple | None = None, engine: str | None = None) -> tuple[np.ndarray, CallInfo]:
        engine = engine or self.engine
        fn, args, kwargs, caveat = self._route(call, full_shape, engine)
        kwargs["engine"] = engine
        plan, run = fn.prepare(*args, **kwargs)
        modelled = bool(plan.modelled) and not caveat
        reason = caveat or ("" if plan.modelled else str(getattr(plan, "reason", "")))
        return run(), CallInfo(str(plan.kernel), modelled, reason, plan.call)

    def _route(self, call: GemmCall, full_shape, engine: str):
        """(library function, args, kwargs, caveat) for a call; caveat: why it is not modelled even so."""
        lib = self.lib

        def arr(t):  # the operand where the engine runs: CUDA tensors stay on the GPU for engine="cuda"
            return to_array(t, engine)

        a, b = arr(call.a), arr(call.b)
        opts = self._options()
        opts["gpu"] = self.gpu_for(call.a)
        if full_shape is not None:
            opts["full_shape"] = tuple(full_shape)
        out_dtype = format_name(call.out_dtype)
        caveat = ""
        if call.op == "dot":  # measured (H100): cuBLAS dot_kernel + reduce_1Block_kernel, not a GEMM
            caveat = "aten.dot runs cuBLAS's dot kernel (a reduction, not a GEMM); computed as a 1x1 GEMM"
        if call.op == "_scaled_mm":
            if call.bias is not None or call.extra.get("scale_result") is not None:
                caveat = "_scaled_mm with bias or scale_result is not modelled"
            return lib.scaled_mm, (a, b, arr(call.scale_a), arr(call.scale_b)), \
                dict(opts, out_dtype=out_dtype, use_fast_accum=call.use_fast_accum), caveat
        c = None if call.c is None else arr(call.c)
        if call.batched:
            if c is None:
                return lib.bmm, (a, b), opts, caveat
            return lib.baddbmm, (c, a, b), dict(opts, beta=call.beta, alpha=call.alpha), caveat
        if c is None:
            if call.out_dtype != call.a.dtype:
                opts["out_dtype"] = out_dtype
            return lib.matmul, (a, b), opts, caveat
        return lib.addmm, (c, a, b), dict(opts, beta=call.beta, alpha=call.alpha), caveat
