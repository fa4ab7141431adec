"""LLVM register-level helpers for the fast engine's vectorised kernels (private).

Numba widens int16 arithmetic to int64 and has no bit casts between floats and integers; these
intrinsics keep both in the lane type, so LLVM vectorises the loops that use them (32 int16 or 8
float64 lanes per AVX-512 op).

Example:
    >>> from numba import njit
    >>> njit(lambda x: f64_bits(x))(1.0) == 0x3FF0000000000000
    True
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["f64_bits", "bits_f64", "f32_bits", "bits_f32", "add16", "max16"]


def _bitcast(source, target, llvm_target, doc: str):
    """An intrinsic reinterpreting a ``source`` register as ``target`` (no conversion, vectorisable)."""
    def typer(typingctx, x):
        if x != source:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llvm_target)

        return target(source), codegen

    typer.__doc__ = doc
    return intrinsic(typer)


f64_bits = _bitcast(types.float64, types.int64, ir.IntType(64), "The IEEE bit pattern of a float64 as int64.")
bits_f64 = _bitcast(types.int64, types.float64, ir.DoubleType(), "The float64 whose IEEE bit pattern is the int64.")
f32_bits = _bitcast(types.float32, types.int32, ir.IntType(32), "The IEEE bit pattern of a float32 as int32.")


@intrinsic
def bits_f32(typingctx, n):
    """The float32 whose IEEE bit pattern is the low 32 bits of the integer n."""
    if not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        low = args[0] if n.bitwidth == 32 else builder.trunc(args[0], ir.IntType(32))
        return builder.bitcast(low, ir.FloatType())

    return types.float32(n), codegen


@intrinsic
def add16(typingctx, x, y):
    """x + y in int16 arithmetic (wrapping; callers keep sums within int16)."""
    if x != types.int16 or y != types.int16:
        return None

    def codegen(context, builder, signature, args):
        return builder.add(args[0], args[1])

    return types.int16(types.int16, types.int16), codegen


@intrinsic
def max16(typingctx, x, y):
    """max(x, y) of two int16 values, in int16."""
    if x != types.int16 or y != types.int16:
        return None

    def codegen(context, builder, signature, args):
        return builder.select(builder.icmp_signed(">", args[0], args[1]), args[0], args[1])

    return types.int16(types.int16, types.int16), codegen
