"""A call's operands bound to a plan: values as the instruction's operand bits, each K slice laid out on instruction
boundaries (the kernels' zero padding), and scales as the plan's nodes read them.

``tcnumerics.gemm`` binds its operands with these; the interpreter binds a ``LayOut`` node's (a library kernel's
tensor-core reduction, whose plan says how its operands are laid out) with ``bind``.

>>> split_bounds(100, 2, 16), padded_length(36, 16, 16, "last")
([(0, 64), (64, 100)], 48)
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..arrays import DeviceValues, float64, namespace
from ..bit_arrays import operand_bits
from ..formats import get_format
from .ffma import float32_patterns
from .nodes import LayOut

__all__ = ["split_bounds", "k_segments", "padded_length", "lay_out", "layout", "as_array", "float_values",
           "parse_scales", "fp32_scales", "batch_scales", "bind"]

_FP32 = get_format("fp32")


def split_bounds(k_total: int, split_k: "int | Sequence[int] | None", granule: int) -> list[tuple[int, int]]:
    """K ranges of the split-K slices: ``split_k`` equal slices on ``granule`` boundaries, or given lengths.

    >>> split_bounds(8192, 4, 16)
    [(0, 2048), (2048, 4096), (4096, 6144), (6144, 8192)]
    >>> split_bounds(333, 2, 8)
    [(0, 168), (168, 333)]
    >>> split_bounds(64, [32, 32], 16)
    [(0, 32), (32, 64)]
    """
    if split_k is None:
        return [(0, k_total)]
    if isinstance(split_k, (int, np.integer)) and not isinstance(split_k, bool):
        if split_k < 1:
            raise ValueError(f"split_k: must be >= 1, got {split_k}")
        granules = -(-k_total // granule)
        per = -(-granules // int(split_k)) * granule
        bounds = [(k0, min(k_total, k0 + per)) for k0 in range(0, k_total, per)]
        return bounds
    try:
        if isinstance(split_k, (str, bytes)):
            raise TypeError
        lengths = [int(x) for x in split_k]
    except (TypeError, ValueError):
        raise TypeError(f"split_k: expected an int or a sequence of slice lengths, got {type(split_k).__name__}") \
            from None
    if not lengths or any(n <= 0 for n in lengths):
        raise ValueError(f"split_k: slice lengths must be positive, got {lengths}")
    if sum(lengths) < k_total:
        raise ValueError(f"split_k: slice lengths sum to {sum(lengths)}, less than K={k_total}")
    bounds, k0 = [], 0
    for n in lengths:
        if k0 >= k_total:
            break
        bounds.append((k0, min(k_total, k0 + n)))
        k0 += n
    return bounds


def k_segments(slices, k: int, tile: int, residue: str) -> tuple[list[tuple[int, int]], list[int]]:
    """(segments, origins): each split-K slice's range on the laid-out K axis (the slices one after the other, each
    padded by ``layout``) and where it starts in the caller's K -- what ``plan_gemm`` plans and ``lay_out`` lays
    out, computed once.

    >>> k_segments(split_bounds(100, 2, 16), 32, 32, "last")   # K[0:64) and K[64:100), the second padded to 64
    ([(0, 64), (64, 128)], [0, 64])
    """
    segments, origins, pos = [], [], 0
    for k0, k1 in slices:
        n = padded_length(k1 - k0, k, tile, residue)
        segments.append((pos, pos + n))
        origins.append(k0)
        pos += n
    return segments, origins


def padded_length(n: int, k: int, tile: int, residue: str) -> int:
    """Length of a slice of ``n`` K-elements after ``layout``'s zero padding."""
    r = n % tile
    if residue == "first" and r:
        return -(-r // k) * k + padded_length(n - r, k, tile, "last")
    return -(-n // k) * k


def lay_out(a_bits, b_t, slices, k: int, tile: int, residue: str):
    """(A rows, B columns as rows): each caller K range of ``slices`` laid out on instruction boundaries (zero
    padding where the kernel puts it), the ranges one after the other along the last axis.

    >>> a, b = lay_out(np.ones((1, 5), np.uint16), np.ones((2, 5), np.uint16), [(0, 3), (3, 5)], 2, 2, "last")
    >>> a.tolist(), b.shape
    ([[1, 1, 1, 0, 1, 1]], (2, 6))
    """
    xp = namespace(a_bits)
    pieces_a = [layout(a_bits[..., k0:k1], k, tile, residue) for k0, k1 in slices]
    pieces_b = [layout(b_t[..., k0:k1], k, tile, residue) for k0, k1 in slices]
    if len(pieces_a) == 1:
        return pieces_a[0], pieces_b[0]
    return (xp.ascontiguousarray(xp.concatenate(pieces_a, axis=-1)),
            xp.ascontiguousarray(xp.concatenate(pieces_b, axis=-1)))


def as_array(x, xp):
    """An operand as an array of namespace ``xp`` (``DeviceValues`` pass through: their dtype is their format)."""
    return x if isinstance(x, DeviceValues) else xp.asarray(x)


def layout(bits: np.ndarray, k: int, tile: int, residue: str) -> np.ndarray:
    """One slice's K axis (the last) on instruction boundaries: +0 padding at the end, or after a first partial tile.

    >>> layout(np.arange(1, 6)[None], 2, 4, "first").tolist()   # 5 = 1 + one tile of 4
    [[1, 0, 2, 3, 4, 5]]
    """
    xp = namespace(bits)
    n = bits.shape[-1]
    r = n % tile
    if residue == "first" and r:
        head = xp.zeros(bits.shape[:-1] + (-(-r // k) * k,), bits.dtype)
        head[..., :r] = bits[..., :r]
        return xp.concatenate([head, layout(bits[..., r:], k, tile, "last")], axis=-1)
    n_pad = -(-n // k) * k
    if n_pad == n and bits.flags.c_contiguous:
        return bits
    out = xp.zeros(bits.shape[:-1] + (n_pad,), bits.dtype)
    out[..., :n] = bits
    return out


def float_values(name: str, x) -> np.ndarray:
    """An operand's values as float64 (exact), on the host or the device; a TypeError naming it otherwise."""
    if isinstance(x, DeviceValues):
        return x.format.to_float(x.bits)
    x = namespace(x).asarray(x)
    if x.dtype.kind not in "fiuV" and not x.dtype.name.startswith(("float", "bfloat")):
        raise TypeError(f"{name}: expected numeric values, got dtype {x.dtype}")
    try:
        return float64(x)  # exact on a GPU too (no flush-to-zero cast)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: cannot read dtype {x.dtype} as numbers") from None


def parse_scales(scale_a, scale_b, M: int, N: int, K: int, block: int, xp=np):
    """(block_a [M, KB] or None, block_b [KB, N] or None, epilogue factors (scale_a, scale_b) or None, their
    kind: "tensor" for two scalars, "row" otherwise, None without them)."""
    if scale_a is None and scale_b is None:
        return None, None, None, None
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"scale_block: expected a positive int, got {block!r}")
    sa, sb = fp32_scales("scale_a", scale_a, xp), fp32_scales("scale_b", scale_b, xp)
    kb, nb = -(-K // block), -(-N // block)
    # per-tensor / row-wise shapes win where K fits one block and the shapes coincide
    rowwise = sa.shape in ((), (M,), (M, 1)) and sb.shape in ((), (N,), (1, N))
    a_block = not rowwise and sa.ndim == 2 and sa.shape == (M, kb)
    b_block = not rowwise and sb.ndim == 2 and sb.shape in ((kb, nb), (kb, N))
    if a_block or b_block:
        if not (a_block and b_block):
            raise ValueError(f"scale_a, scale_b: block-wise scaling needs scale_a of shape {(M, kb)} and "
                             f"scale_b of shape {(kb, nb)}, got {sa.shape} and {sb.shape}")
        b_full = sb if sb.shape == (kb, N) else xp.repeat(sb, block, axis=1)[:, :N]  # [KB, N]
        return sa, b_full, None, None
    if sa.ndim == 2 and sa.shape == (M, 1):
        sa = sa[:, 0]
    if sb.ndim == 2 and sb.shape == (1, N):
        sb = sb[0]
    if sa.ndim not in (0, 1) or (sa.ndim == 1 and sa.shape != (M,)):
        raise ValueError(f"scale_a: expected a scalar, shape ({M},) or ({M}, 1), or block-wise ({M}, {kb}); "
                         f"got {sa.shape}")
    if sb.ndim not in (0, 1) or (sb.ndim == 1 and sb.shape != (N,)):
        raise ValueError(f"scale_b: expected a scalar, shape ({N},) or (1, {N}), or block-wise ({kb}, {nb}); "
                         f"got {sb.shape}")
    kind = "tensor" if sa.ndim == sb.ndim == 0 else "row"
    return None, None, (sa[:, None] if sa.ndim else sa, sb[None, :] if sb.ndim else sb), kind


def fp32_scales(name: str, scale, xp):
    """A ``scale_a``/``scale_b`` argument as FP32 values of namespace ``xp`` (None: 1), each finite and nonzero."""
    if scale is None:
        return xp.ones(())
    s = xp.asarray(_FP32.round(float_values(name, scale)))
    bad = ~xp.isfinite(s) | (s == 0)  # a NaN, infinite or zero scale is a bug upstream
    if s.size and bool(bad.any()):
        raise ValueError(f"{name}: scales must be finite and nonzero, found {float(s[bad].ravel()[0])}")
    return s


def batch_scales(scale_a, scale_b, batch: int, M: int, N: int, xp):
    """A batch's scales as ((scale_a [batch, M or 1, 1], scale_b [batch, 1, N or 1]), kind) or (None, None):
    each a scalar, one per item ([batch]) or row-wise ([batch, M] / [batch, N]); "tensor" when both are one
    number per item (``acc * fp32(sa * sb)``), else "row" (``(acc * sb) * sa``), as for a single GEMM."""
    if scale_a is None and scale_b is None:
        return None, None
    shaped = []
    for name, s, rows, where in (("scale_a", scale_a, M, -1), ("scale_b", scale_b, N, -2)):
        if np.shape(s) not in ((), (batch,), (batch, rows)):
            raise ValueError(f"{name}: a batch of {batch} takes a scalar, shape ({batch},) or ({batch}, {rows}); "
                             f"got {np.shape(s)}")
        s = fp32_scales(name, s, xp)
        full = s if s.ndim == 2 else xp.broadcast_to(s.reshape(-1, 1) if s.ndim else s.reshape(1, 1), (batch, 1))
        shaped.append(xp.expand_dims(full, where))
    kind = "tensor" if np.ndim(scale_a) <= 1 and np.ndim(scale_b) <= 1 else "row"
    return tuple(shaped), kind



def bind(node: LayOut, env: dict) -> dict:
    """``env`` with its values ``A`` [.., M, K], ``B`` [.., K, N] (and ``scale_a``/``scale_b`` as ``gemm`` takes them)
    replaced by what ``node.term`` reads: ``A`` rows and ``B`` columns as laid-out operand bits, the scales parsed
    (``block_a``/``block_b`` or ``scale_a``/``scale_b``).  K = 0: one instruction of zeros, no scales (as ``gemm``)."""
    spec, A, B = node.instruction, env["A"], env["B"]
    xp = namespace(A, B)
    if node.input_rounding:  # the kernel rounds FP32 operands to TF32 first
        A, B = (float32_patterns(x, "tf32", node.input_rounding) for x in (A, B))
    A, B = as_array(A, xp), as_array(B, xp)
    a_bits, b_t = operand_bits("A", A, spec.a_format), xp.swapaxes(operand_bits("B", B, spec.b_format), -1, -2)
    M, K, N = A.shape[-2], A.shape[-1], B.shape[-1]
    out = {**env, "scale_a": None, "scale_b": None, "block_a": None, "block_b": None}
    if K == 0:
        out["A"] = xp.zeros(a_bits.shape[:-1] + (spec.k,), a_bits.dtype)
        out["B"] = xp.zeros(b_t.shape[:-1] + (spec.k,), b_t.dtype)
        return out
    out["A"], out["B"] = lay_out(a_bits, b_t, node.slices, spec.k, node.k_tile, node.k_residue)
    sa, sb = env.get("scale_a"), env.get("scale_b")
    if A.ndim == 3:
        out["scale_a"], out["scale_b"] = batch_scales(sa, sb, A.shape[0], M, N, xp)[0] or (None, None)
        return out
    out["block_a"], out["block_b"], tensor_scale, _ = parse_scales(sa, sb, M, N, K, node.scale_block, xp)
    if tensor_scale is not None:
        out["scale_a"], out["scale_b"] = tensor_scale
    return out
