"""The values a call's error is split by (``tcnumerics.torch.attribution``): the float64 reference epilogue, the
quantised product, one chain, the ordered chain, the value before the output conversion; the exact result of a
site made exact; and the error measures (ulps of the output format, ratios to |A| @ |B|).

>>> from tcnumerics.formats import get_format
>>> _ulp(np.array([1.0, 3.0]), get_format("bf16")).tolist()
[0.0078125, 0.015625]
"""

from __future__ import annotations

import hashlib

import numpy as np

from .. import arrays
from ..gemm import gemm
from . import _tensors
from ._tensors import format_name
from .backends import CallInfo, UnitBackend
from .calls import GemmCall

class _Epilogue:
    """alpha * acc + beta * C + bias in float64 (the reference epilogue) and its scale for |A| @ |B|."""

    def __init__(self, call: GemmCall, device: bool):
        def values(t):
            return _tensors.float64_values(t, device)

        self.alpha = float(call.alpha)
        self.c = None if call.c is None or call.beta == 0 else float(call.beta) * values(call.c)
        self.bias = None if call.bias is None else values(call.bias)
        self.scales = None
        if call.op == "_scaled_mm":
            self.scales = (values(call.scale_a), values(call.scale_b))

    def _descale(self, acc):
        if self.scales is None:
            return acc
        sa, sb = self.scales
        return acc * (sa.reshape(()) * sb.reshape(()) if sa.size == 1 and sb.size == 1
                      else sa.reshape(-1, 1) * sb.reshape(1, -1))

    def scale(self, acc):
        return abs(self.alpha) * abs(self._descale(acc))

    def __call__(self, acc):
        r = self.alpha * self._descale(acc)
        if self.c is not None:
            r = r + self.c
        if self.bias is not None:
            r = r + self.bias
        return r


def _converted(seen: list, values):
    """The value the call's output conversion received, flat in the result's namespace, or None (no plan ended in
    a ``Convert``).  The last values recorded whose sizes add up to the result's: unit mode runs gemm's own plan,
    then the epilogue's over the whole batch (the last one); library mode may run the epilogue per item or per
    block of rows (its runs, in order, are the result's items and rows in order)."""
    parts, size = [], 0
    for v in reversed(seen):
        if size >= values.size:
            break
        parts.append(v.reshape(-1))
        size += v.size
    if size != values.size or not parts:
        return None
    flat = parts[0] if len(parts) == 1 else arrays.concatenate(parts[::-1])
    if arrays.on_device(values) and not arrays.on_device(flat):  # a host epilogue, a device result: move it up
        flat = arrays.namespace(values).asarray(flat)
    return flat


def _stage_values(backend, call: GemmCall, backward: bool, a3, b3, info: CallInfo):
    """[quantised product, one chain, with ordering] before the epilogue, and "stages" or "total"."""
    if isinstance(backend, UnitBackend):
        recipe = backend.backward if backward else backend.recipe
        if recipe.scaling in ("mx", "nvfp4") or recipe.rounding == "stochastic" or call.op == "_scaled_mm":
            return [], "total"
        spec, order = recipe.spec, dict(promote_every=recipe.promote_every, split_k=recipe.split_k)
        quantised = recipe.quantize(a3, b3)  # the batch at once: descales per item
        engine = recipe.engine if recipe.engine != "auto" else "auto"
    else:
        structure = (getattr(getattr(info.call, "plan", None), "structure", None)
                     or _library_structure(backend, call, arrays.on_device(a3)))
        if structure is None or call.op == "_scaled_mm" or any(getattr(structure, k, None) for k in (
                "simt_kernel", "stream_k", "split_interleave", "input_rounding", "split_partial_format")):
            return [], "total"
        spec = structure.instruction
        order = dict(promote_every=structure.promote_every, split_k=structure.split_k, k_tile=structure.k_tile,
                     k_residue=structure.k_residue, split_granule=structure.split_granule)
        quantised = (a3, None, b3, None)
        engine = "auto"
    if arrays.on_device(a3):  # the unit's stages on the GPU engine too ("auto" picks it for device operands)
        engine = "cuda" if engine in ("auto", "fast", "cuda") else engine
    qa, da, qb, db = quantised
    dequantised = arrays.stack([_dequantise(qa[i], None if da is None else da[i], 1)
                                @ _dequantise(qb[i], None if db is None else db[i], 0) for i in range(qa.shape[0])])
    # one batched GEMM per stage (item i as gemm(qa[i], qb[i]) bit for bit)
    chained = arrays.float64(gemm(qa, qb, instruction=spec, scale_a=da, scale_b=db, engine=engine))
    ordered = chained
    if any(v is not None for v in order.values()):
        ordered = arrays.float64(gemm(qa, qb, instruction=spec, scale_a=da, scale_b=db, engine=engine, **order))
    return [dequantised, chained, ordered], "stages"


def _library_structure(backend, call: GemmCall, device: bool):
    """The library plan's structure (its instruction, promotion, split-K) for a library-mode call (CUDA tensors'
    operands stay on the device: the plan reads their shapes and strides)."""
    engine = "cuda" if device else "fast"
    try:
        fn, args, kwargs, _ = backend._route(call, None, engine)
        plan, _ = fn.prepare(*args, **dict(kwargs, engine=engine))
    except Exception:  # a call the plan cannot describe: its stages are not separated
        return None
    return plan.structure


def _dequantise(q, descale, axis: int):
    values = arrays.float64(q)
    if descale is None:
        return values
    d = arrays.float64(descale)
    if arrays.namespace(d) is not arrays.namespace(values):  # a host descale of device operands (a scale vector up)
        d = arrays.namespace(values).asarray(arrays.to_host(d))
    return values * (d.reshape(-1, 1) if axis == 1 and d.size > 1 else d.reshape(1, -1) if d.size > 1 else d)


def _exact(call: GemmCall, device: bool):
    """The call in float64 (product and epilogue), one RNE conversion to the output dtype -- where the call runs
    (CuPy arrays on the GPU engine)."""
    from .unit import epilogue

    def values(t):
        return _tensors.float64_values(t, device)

    a, b = values(call.a), values(call.b)
    acc = a @ b
    if call.op == "_scaled_mm":
        acc = _Epilogue(call, device)._descale(acc)
    c = None if call.c is None else arrays.namespace(acc).broadcast_to(values(call.c), acc.shape)
    return epilogue(acc, format_name(call.out_dtype), alpha=call.alpha, C=c, beta=call.beta,
                    bias=None if call.bias is None else values(call.bias), acc_format="fp64")


def _digest(values) -> bytes:
    """A fingerprint of a call's result bits (the counterfactual's re-run is checked against it): SHA-256 of a host
    array; for a device array two sums of its 64-bit patterns with odd weights, mod 2**64 (computed on the device,
    16 bytes to the host: a change of any one value always changes them)."""
    if not arrays.on_device(values):
        return hashlib.sha256(np.ascontiguousarray(values).tobytes()).digest()
    xp = arrays.namespace(values)
    bits = xp.ascontiguousarray(values).reshape(-1).view(np.uint64)
    weights = xp.arange(bits.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    sums = xp.stack([bits.sum(dtype=np.uint64), (bits * weights).sum(dtype=np.uint64)])
    return hashlib.sha256(arrays.to_host(sums).tobytes()).digest()


def _ulp(ref, fmt):
    """The output format's ulp at each value of ``ref`` (its smallest ulp below the normal range), in its namespace."""
    xp = arrays.namespace(ref)
    with np.errstate(divide="ignore"):
        e = xp.floor(xp.log2(abs(ref)))
    e = xp.where(xp.isfinite(e), xp.maximum(e, float(fmt.emin)), float(fmt.emin))
    return xp.exp2(e - fmt.man_bits)


def _ratio(e, scale):
    xp = arrays.namespace(e, scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = xp.where(scale > 0, e / xp.where(scale > 0, scale, 1.0), xp.where(e > 0, np.inf, 0.0))
    return xp.nan_to_num(r, nan=np.inf)
