"""The reference engine: a readable, vectorised numpy rendering of the unit model.

This is the specification the fast engine must equal bit for bit; the exact oracle
(``tcnumerics.engines.oracle``) checks it from first principles.  Every function works on
a batch of N independent dot products at once: operand bits ``a``, ``b`` of shape
[N, K] and accumulator bits ``c`` of shape [N].

Example:
    >>> import numpy as np
    >>> from tcnumerics.catalog import get_instruction
    >>> from tcnumerics.engines.reference import dot_bits
    >>> spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    >>> a = np.full((1, 16), 0x3F80, np.uint16)             # bf16 1.0
    >>> hex(int(dot_bits(spec, a, a, np.zeros(1, np.uint32))[0]))   # 16.0 in fp32
    '0x41800000'
"""

from __future__ import annotations

import numpy as np

from ..formats import Decoded, FloatFormat, Format, IntFormat, Rounding
from ..model import InstructionSpec, UnitModel

__all__ = ["dot_bits", "fused_group", "datapath", "instruction_step", "round_signed_sum", "ieee_add"]

_BIG = 60  # magnitudes beyond 2**_BIG are compressed (with a sticky bit) before rounding


def round_signed_sum(total: np.ndarray, exponent: np.ndarray | int, fmt: FloatFormat, rounding: Rounding,
                     overflow: str, negative_zero: bool = False) -> np.ndarray:
    """Round exact values ``total * 2**exponent`` (signed integers, int64 or Python ints) into ``fmt``.

    Magnitudes too wide for 64-bit arithmetic are first narrowed keeping a sticky bit,
    which leaves every directed and nearest rounding unchanged (the kept width exceeds
    the target precision by far more than the two bits that needs).
    """
    total = np.asarray(total)
    exponent = np.broadcast_to(np.asarray(exponent, dtype=np.int64), total.shape).copy()
    negative = total < 0
    mag = np.where(negative, -total, total)
    if mag.dtype == object:
        mags = mag.ravel()
        out = np.empty(mags.shape, dtype=np.uint64)
        exps = exponent.ravel()
        for i, m in enumerate(mags):
            m = int(m)
            extra = m.bit_length() - _BIG
            if extra > 0:
                sticky = 1 if m & ((1 << extra) - 1) else 0
                m = (m >> extra) | sticky
                exps[i] += extra
            out[i] = m
        mag = out.reshape(total.shape)
        exponent = exps.reshape(total.shape)
    else:
        mag = mag.astype(np.uint64)
    sign = negative & (mag != 0) if negative_zero else negative & (mag != 0)
    bits = fmt.encode(sign, mag, exponent, rounding, overflow=overflow)
    if not negative_zero:
        # units observed never write -0: a zero result is +0
        zero_pattern = ((1 << (fmt.width - 1)) << fmt.pad_bits) if fmt.signed else -1
        bits = np.where(bits == zero_pattern, 0, bits).astype(fmt.container_dtype)
    return bits


def _special_mask(A: Decoded, B: Decoded, C: Decoded):
    """NaN / infinity outcome of a group: (is_nan, is_inf, inf_negative)."""
    nan = A.is_nan.any(axis=1) | B.is_nan.any(axis=1) | C.is_nan
    nan |= ((A.is_inf & B.is_zero) | (A.is_zero & B.is_inf)).any(axis=1)
    prod_inf = A.is_inf | B.is_inf
    prod_neg = A.sign ^ B.sign
    pos = (prod_inf & ~prod_neg).any(axis=1) | (C.is_inf & ~C.sign)
    neg = (prod_inf & prod_neg).any(axis=1) | (C.is_inf & C.sign)
    nan |= pos & neg
    return nan, (pos | neg) & ~nan, neg


def fused_group(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    """One fused truncating group: ``d = round(sum_k trunc(a_k*b_k) + trunc(c))``.

    ``a``, ``b``: [N, L] operand bits; ``c``: [N] bits in ``c_format``.  Returns d bits.
    """
    A = model.a_format.decode(a)
    B = model.b_format.decode(b)
    C = c_format.decode(c)
    nan, inf, inf_neg = _special_mask(A, B, C)

    finite_p = (A.kind == 0) & (B.kind == 0)
    p_sig = np.where(finite_p, A.significand * B.significand, 0)  # exact product significands
    p_ulp = A.ulp_exponent + B.ulp_exponent
    p_exp = A.exponent + B.exponent  # unnormalised: significand in [0, 4)
    p_neg = A.sign ^ B.sign
    c_sig = np.where(C.kind == 0, C.significand, 0)

    e_zero = model.zero_exponent if model.zero_exponent is not None else np.iinfo(np.int32).min
    p_exp = np.where(p_sig == 0, e_zero, p_exp)
    c_exp = np.where(c_sig == 0, e_zero, C.exponent)
    e_max = np.maximum(p_exp.max(axis=1), c_exp)

    if model.frac_bits is None:
        # exact: align to the finest ulp with Python integers
        quantum = np.minimum(p_ulp.min(axis=1), C.ulp_exponent)
        total = np.zeros(len(c_sig), dtype=object)
        for k in range(p_sig.shape[1]):
            t = np.array([int(s) << int(u - q) for s, u, q in zip(p_sig[:, k], p_ulp[:, k], quantum)], dtype=object)
            total = total + np.where(p_neg[:, k], -t, t)
        t = np.array([int(s) << int(u - q) for s, u, q in zip(c_sig, C.ulp_exponent, quantum)], dtype=object)
        total = total + np.where(C.sign, -t, t)
    else:
        quantum = e_max - model.frac_bits  # every term is truncated to a multiple of 2**quantum
        total = _truncated(p_sig, p_ulp - quantum[:, None], p_neg).sum(axis=1)
        total += _truncated(c_sig, C.ulp_exponent - quantum, C.sign)

    out_fmt = model.output_format
    bits = round_signed_sum(total, quantum, out_fmt, model.output_rounding, model.output_overflow)
    d = model.d_format
    inf_bits = np.where(inf_neg, (1 << (d.width - 1)) << d.pad_bits, 0) | d.inf_bits
    bits = np.where(inf, inf_bits, bits)
    bits = np.where(nan, model.nan_bits, bits)
    return bits.astype(d.container_dtype)


def _truncated(sig: np.ndarray, rel_exp: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Signed ``trunc(sig * 2**rel_exp)`` toward zero (magnitude truncation), as int64."""
    right = np.clip(-rel_exp, 0, 63)
    left = np.clip(rel_exp, 0, 62)
    mag = np.where(rel_exp >= 0, sig << left, sig >> right)
    return np.where(negative, -mag, mag)


def _integer_group(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    av = model.a_format.decode_int(a)
    bv = model.b_format.decode_int(b)
    total = (av * bv).sum(axis=1) + c_format.decode_int(c)
    return model.d_format.encode_int(total, "saturate" if model.saturate else "wrap")


def _fma_chain(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    """Sequential IEEE fused multiply-adds ``d = fma(a_k, b_k, d)`` in d_format, one rounding each."""
    d_fmt = model.d_format
    acc, acc_fmt = c, c_format
    for k in range(a.shape[1]):
        A = model.a_format.decode(a[:, k])
        B = model.b_format.decode(b[:, k])
        C = acc_fmt.decode(acc)
        quantum = np.minimum(A.ulp_exponent + B.ulp_exponent, C.ulp_exponent)
        total = np.empty(len(acc), dtype=object)
        for i in range(len(acc)):
            p = int(A.significand[i]) * int(B.significand[i]) << int(A.ulp_exponent[i] + B.ulp_exponent[i] - quantum[i])
            s = int(C.significand[i]) << int(C.ulp_exponent[i] - quantum[i])
            total[i] = (-p if A.sign[i] ^ B.sign[i] else p) + (-s if C.sign[i] else s)
        bits = round_signed_sum(total, quantum, d_fmt, model.output_rounding, "ieee", negative_zero=True)
        # IEEE signed zeros: an exact zero sum of like-signed zeros keeps the sign
        zero_sum = np.array([t == 0 for t in total])
        both_neg = (A.sign ^ B.sign) & C.sign & zero_sum & ((A.significand * B.significand) == 0) & (C.significand == 0)
        bits = np.where(both_neg, (1 << (d_fmt.width - 1)) << d_fmt.pad_bits, bits)
        nan, inf, inf_neg = _special_mask(_row(A), _row(B), C)
        inf_bits = np.where(inf_neg, (1 << (d_fmt.width - 1)) << d_fmt.pad_bits, 0) | d_fmt.inf_bits
        bits = np.where(inf, inf_bits, bits)
        acc = np.where(nan, model.nan_bits, bits).astype(d_fmt.container_dtype)
        acc_fmt = d_fmt
    return acc


def _binary_group(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    """One-bit operands: ``d = c + popcount(a OP b)``, wrapping in the int32 accumulator."""
    av = model.a_format.decode_int(a)
    bv = model.b_format.decode_int(b)
    bits = (av & bv) if model.bit_op == "and" else (av ^ bv)
    return model.d_format.encode_int(bits.sum(axis=1) + c_format.decode_int(c), "wrap")


def _ieee_mul_add(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    """``acc = round(acc + round(a_k * b_k))`` in d_format, k = 0, 1, ...: one rounding per operation.

    float64 carries every intermediate: products of operands of at most 26 significand
    bits are exact in it, and a float64 sum of two values of at most 24 bits rounded once
    more equals the correctly rounded sum (53 >= 2p + 2), so each step is one IEEE operation.
    """
    d = model.d_format
    rounding = model.output_rounding
    acc = c_format.to_float(c)
    acc = d.to_float(d.from_float(acc, rounding))  # C enters in d_format
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(a.shape[1]):
            prod = model.a_format.to_float(a[:, k]) * model.b_format.to_float(b[:, k])
            prod = d.to_float(d.from_float(prod, rounding))
            acc = d.to_float(d.from_float(acc + prod, rounding))
    bits = d.from_float(acc, rounding)
    return np.where(np.isnan(acc), model.nan_bits, bits).astype(d.container_dtype)


def _row(d: Decoded) -> Decoded:
    return Decoded(d.sign[:, None], d.significand[:, None], d.ulp_exponent[:, None], d.exponent[:, None],
                   d.kind[:, None])


def datapath(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    """Groups of ``model.group_size`` products in K order, each group's output the next one's C."""
    step = {"fused": fused_group, "integer": _integer_group, "fma_chain": _fma_chain, "binary": _binary_group,
            "ieee_mul_add": _ieee_mul_add}[model.algorithm]
    size = model.group_size
    acc, acc_fmt = c, c_format
    for start in range(0, a.shape[1], size):
        acc = step(model, a[:, start:start + size], b[:, start:start + size], acc, acc_fmt)
        acc_fmt = model.d_format
    return acc


def ieee_add(x: np.ndarray, x_format: FloatFormat, y: np.ndarray, y_format: FloatFormat, out: FloatFormat,
             rounding: Rounding, nan_bits: int) -> np.ndarray:
    """IEEE 754 addition of two bit arrays, one rounding into ``out`` (NaNs become ``nan_bits``).

    Adding in float64 and rounding once is correctly rounded for outputs of at most 25
    significand bits (53 >= 2p + 2); wider outputs are refused.
    """
    if out.man_bits + 1 > 25:
        raise ValueError(f"ieee_add: output format {out.name} is too wide for the float64 route")
    with np.errstate(invalid="ignore", over="ignore"):
        s = x_format.to_float(x) + y_format.to_float(y)
        bits = out.from_float(s, rounding, overflow="ieee")
    return np.where(np.isnan(s), nan_bits, bits).astype(out.container_dtype)


def _convert(bits: np.ndarray, src: Format, dst: Format) -> np.ndarray:
    if src == dst:
        return bits
    return dst.from_float(src.to_float(bits))  # exact for the widening conversions catalogued


def instruction_step(spec: InstructionSpec, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One instruction on [N, spec.k] operands and [N] accumulator bits."""
    model = spec.model
    a = _convert(a, spec.a_format, model.a_format)
    b = _convert(b, spec.b_format, model.b_format)
    if spec.k_order is not None:
        order = np.asarray(spec.k_order)
        a, b = a[:, order], b[:, order]
    chunk = spec.chunk or spec.k
    if spec.c_entry == "fused":
        acc, acc_fmt = c, spec.c_format
    else:
        acc, acc_fmt = np.zeros(len(c), dtype=model.c_format.container_dtype), model.c_format
    for start in range(0, spec.k, chunk):
        acc = datapath(model, a[:, start:start + chunk], b[:, start:start + chunk], acc, acc_fmt)
        acc_fmt = model.d_format
    if spec.c_entry == "ieee_add":
        acc = ieee_add(acc, model.d_format, c, spec.c_format, model.d_format, spec.c_add_rounding, model.nan_bits)
    return acc


def dot_bits(spec: InstructionSpec, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Chain the instruction over K' = a multiple of spec.k; the d of one is the c of the next."""
    n, k_total = a.shape
    acc = c
    for start in range(0, k_total, spec.k):
        acc = instruction_step(spec, a[:, start:start + spec.k], b[:, start:start + spec.k], acc)
    return acc
