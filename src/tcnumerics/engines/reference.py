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

from ..formats import Decoded, FloatFormat, Format, Rounding, bit_length
from ..model import InstructionSpec, UnitModel

__all__ = ["dot_bits", "fused_group", "datapath", "instruction_step", "round_signed_sum", "ieee_add",
           "special_outcome", "truncate_toward_zero", "convert_patterns"]  # the last three: fault models build on them

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


def special_outcome(A: Decoded, B: Decoded, C: Decoded):
    """NaN / infinity outcome of a group: (is_nan, is_inf, inf_negative)."""
    nan = A.is_nan.any(axis=1) | B.is_nan.any(axis=1) | C.is_nan
    nan |= ((A.is_inf & B.is_zero) | (A.is_zero & B.is_inf)).any(axis=1)
    prod_inf = A.is_inf | B.is_inf
    prod_neg = A.sign ^ B.sign
    pos = (prod_inf & ~prod_neg).any(axis=1) | (C.is_inf & ~C.sign)
    neg = (prod_inf & prod_neg).any(axis=1) | (C.is_inf & C.sign)
    nan |= pos & neg
    return nan, (pos | neg) & ~nan, neg


def fused_group(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format,
                exponent_shift: np.ndarray | None = None, extra_nan: np.ndarray | None = None) -> np.ndarray:
    """One fused truncating group: ``d = round(sum_k trunc(a_k*b_k) + trunc(c))``.

    ``a``, ``b``: [N, L] operand bits; ``c``: [N] bits in ``c_format``.  Returns d bits.
    ``exponent_shift`` ([N, L] integers) raises each product's exponent (block scales);
    ``extra_nan`` ([N] booleans) forces a NaN result (a NaN scale).
    """
    A = model.a_format.decode(a)
    B = model.b_format.decode(b)
    C = c_format.decode(c)
    nan, inf, inf_neg = special_outcome(A, B, C)
    if extra_nan is not None:
        nan = nan | extra_nan
        inf = inf & ~nan

    finite_p = (A.kind == 0) & (B.kind == 0)
    p_sig = np.where(finite_p, A.significand * B.significand, 0)  # exact product significands
    p_ulp = A.ulp_exponent + B.ulp_exponent
    p_exp = A.exponent + B.exponent  # unnormalised: significand in [0, 4)
    if exponent_shift is not None:
        p_ulp = p_ulp + exponent_shift
        p_exp = p_exp + exponent_shift
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
        total = truncate_toward_zero(p_sig, p_ulp - quantum[:, None], p_neg).sum(axis=1)
        total += truncate_toward_zero(c_sig, C.ulp_exponent - quantum, C.sign)

    out_fmt = model.output_format
    bits = round_signed_sum(total, quantum, out_fmt, model.output_rounding, model.output_overflow)
    d = model.d_format
    inf_bits = np.where(inf_neg, (1 << (d.width - 1)) << d.pad_bits, 0) | d.inf_bits
    bits = np.where(inf, inf_bits, bits)
    bits = np.where(nan, model.nan_bits, bits)
    return bits.astype(d.container_dtype)


def truncate_toward_zero(sig: np.ndarray, rel_exp: np.ndarray, negative: np.ndarray) -> np.ndarray:
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
        # explicit container dtypes: a Python int >= 2**63 would push np.where to float64
        sign_bit = d_fmt.container_dtype((1 << (d_fmt.width - 1)) << d_fmt.pad_bits)
        bits = np.where(both_neg, sign_bit, bits)
        nan, inf, inf_neg = special_outcome(_row(A), _row(B), C)
        inf_bits = np.where(inf_neg, sign_bit, d_fmt.container_dtype(0)) | d_fmt.container_dtype(d_fmt.inf_bits)
        bits = np.where(inf, inf_bits, bits)
        nan_bits = _fma_nan_x86(model, a[:, k], b[:, k], acc, acc_fmt) if model.nan_policy == "x86" else model.nan_bits
        acc = np.where(nan, nan_bits, bits).astype(d_fmt.container_dtype)
        acc_fmt = d_fmt
    return acc


def _fma_nan_x86(model: UnitModel, a, b, c, c_format: Format) -> np.ndarray:
    """NaN bits of an x86 FMA a*b+c: the first NaN of (a, b, c) quieted, else the default NaN."""
    d = model.d_format
    quiet = np.uint64(1 << (d.man_bits - 1))
    default = np.uint64(((1 << (d.exp_bits + 1)) - 1) << (d.man_bits - 1) | (1 << (d.width - 1)))
    out = np.full(len(c), default, np.uint64)
    for fmt, x in ((c_format, c), (model.b_format, b), (model.a_format, a)):  # a has priority: last wins
        if fmt != d:
            raise ValueError("nan_policy: x86 FMA NaNs need operands in the output format")
        is_nan = fmt.decode(x).is_nan
        out = np.where(is_nan, np.asarray(x).astype(np.uint64) | quiet, out)
    return out.astype(d.container_dtype)


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


# --- x86 NaN propagation (MMA-Sim's CPU arithmetic defines some published models) ----------
_F32_QUIET = np.uint32(0x00400000)
_F32_DEFAULT_NAN = np.uint32(0xFFC00000)  # x86 "real indefinite": an invalid operation's result


def _nan_as_f32(fmt: FloatFormat, bits: np.ndarray) -> np.ndarray:
    """The quiet FP32 NaN an x86 CPU makes of a NaN of ``fmt`` (payload kept, top-aligned)."""
    v = fmt._value_bits(bits)
    sign = (v >> np.uint64(fmt.width - 1)) & np.uint64(1)
    frac = v & np.uint64((1 << fmt.man_bits) - 1)
    frac32 = (frac << np.uint64(23 - fmt.man_bits)) if fmt.man_bits <= 23 else (frac >> np.uint64(fmt.man_bits - 23))
    return ((sign << np.uint64(31)) | np.uint64(0x7F800000) | frac32).astype(np.uint32) | _F32_QUIET


def _x86_pick(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """NaN result bits of an x86 binary operation: ``first`` if it is a NaN, else ``second``,
    else the default NaN (both are NaN bits, 0 where that operand is not a NaN).

    Which operand comes first is a property of the compiled code: MMA-Sim's torch kernels
    (vectorised on x86-64) return the NaN of their *second* operand when both are NaN.
    """
    return np.where(first != 0, first, np.where(second != 0, second, _F32_DEFAULT_NAN)).astype(np.uint32)


def _f32_bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def _exact_sum(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    """AMD CDNA1: the exact sum of the group's products and C, rounded once to FP32 (RNE)."""
    A, B, C = model.a_format.decode(a), model.b_format.decode(b), c_format.decode(c)
    quantum = np.minimum((A.ulp_exponent + B.ulp_exponent).min(axis=1), C.ulp_exponent)
    total = np.zeros(len(c), dtype=object)
    for k in range(a.shape[1]):
        t = [int(x) * int(y) << int(ua + ub - q) for x, y, ua, ub, q in
             zip(A.significand[:, k], B.significand[:, k], A.ulp_exponent[:, k], B.ulp_exponent[:, k], quantum)]
        total = total + np.where(A.sign[:, k] ^ B.sign[:, k], -np.array(t, dtype=object), np.array(t, dtype=object))
    t = np.array([int(x) << int(u - q) for x, u, q in zip(C.significand, C.ulp_exponent, quantum)], dtype=object)
    total = total + np.where(C.sign, -t, t)
    bits = round_signed_sum(total, quantum, model.d_format, Rounding.RNE, "inf")
    nan, inf, inf_neg = special_outcome(A, B, C)
    bits = np.where(inf, np.where(inf_neg, np.uint32(0xFF800000), np.uint32(0x7F800000)), bits)
    if model.nan_policy == "x86":
        # the summands (products first, C last) are reduced in double precision; which NaN
        # survives follows MMA-Sim's reduction order: with two products the first NaN,
        # with more the last product NaN, C's only when no product is NaN
        terms = [_product_nan_x86(model, a[:, k], b[:, k], A, B, k) for k in range(a.shape[1])]
        order = terms if a.shape[1] <= 2 else terms[::-1]
        c_nan = np.where(C.is_nan, _nan_as_f32(c_format, c), 0).astype(np.uint32)
        picked = np.zeros(len(c), np.uint32)
        for t in order + [c_nan]:
            picked = np.where(picked != 0, picked, t)
        nan_bits = np.where(picked != 0, picked, _F32_DEFAULT_NAN)
    else:
        nan_bits = model.nan_bits
    return np.where(nan, nan_bits, bits).astype(np.uint32)


def _product_nan_x86(model: UnitModel, a_col, b_col, A: Decoded, B: Decoded, k: int) -> np.ndarray:
    """NaN bits of MMA-Sim's product a*b (b's NaN first, inf*0 the default NaN), 0 if not NaN."""
    an = np.where(A.is_nan[:, k], _nan_as_f32(model.a_format, a_col), 0).astype(np.uint32)
    bn = np.where(B.is_nan[:, k], _nan_as_f32(model.b_format, b_col), 0).astype(np.uint32)
    invalid = (A.is_inf[:, k] & B.is_zero[:, k]) | (A.is_zero[:, k] & B.is_inf[:, k])
    return np.where((an != 0) | (bn != 0), _x86_pick(bn, an), np.where(invalid, _F32_DEFAULT_NAN, 0)).astype(np.uint32)


def _ftz_mul_add(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    """AMD CDNA2: flush subnormal inputs to +0, FP32 products (RNE, subnormal results flushed
    keeping the sign), products added ``pair_tree`` at a time by FP32 RNE additions whose
    subnormal results are flushed, each partial sum then added onto C."""
    fa, fb = model.a_format, model.b_format

    def flush_input(fmt, bits):
        x = fmt.to_float(bits)
        return np.where(np.abs(x) < 2.0 ** fmt.emin, 0.0, x)

    def flush(x):  # subnormal FP32 results become a zero of the same sign
        return np.where(np.abs(x) < np.float32(2.0 ** -126), x * np.float32(0), x).astype(np.float32)

    def nan_of(x):
        return np.where(np.isnan(x), _f32_bits(x), 0).astype(np.uint32)

    x86 = model.nan_policy == "x86"
    with np.errstate(invalid="ignore", over="ignore"):
        xa = flush_input(fa, a).astype(np.float32)
        xb = flush_input(fb, b).astype(np.float32)
        prod = flush(xa * xb)  # exact products of <= 12-bit significands, rounded once
        if x86:
            an = np.where(np.isnan(xa), _nan_as_f32(fa, a), 0).astype(np.uint32)
            bn = np.where(np.isnan(xb), _nan_as_f32(fb, b), 0).astype(np.uint32)
            pn = np.where(np.isnan(prod), _x86_pick(bn, an), 0).astype(np.uint32)
            prod = np.where(pn != 0, pn, _f32_bits(prod)).view(np.float32)
        acc = flush_input(c_format, c).astype(np.float32)
        if x86:
            acc = np.where(np.isnan(acc), _nan_as_f32(c_format, c), _f32_bits(acc)).view(np.float32)

        def add(x, y):
            s = flush(x + y)
            if x86:
                s = np.where(np.isnan(s), _x86_pick(nan_of(y), nan_of(x)), _f32_bits(s)).view(np.float32)
            return s

        for k in range(0, a.shape[1], model.pair_tree):
            part = add(prod[:, k], prod[:, k + 1])
            if model.pair_tree == 4:
                part = add(part, add(prod[:, k + 2], prod[:, k + 3]))
            acc = add(acc, part)
    bits = _f32_bits(acc)
    if not x86:
        bits = np.where(np.isnan(acc), np.uint32(model.nan_bits), bits)
    return bits.astype(np.uint32)


def _floor_shift(x: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """``floor(x * 2**shift)`` for int64 x (arithmetic shifts; floors toward -inf)."""
    left = np.clip(shift, 0, 62)
    right = np.clip(-shift, 0, 63)
    return np.where(shift >= 0, x << left, x >> right)


def _staged_sum(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format) -> np.ndarray:
    """AMD CDNA3: products truncated below their maximum exponent (F fraction bits), the
    product sum floored to F2 + 1 bits and C to F bits below the larger of the two, the
    total floored to F2 fraction bits after normalisation, then rounded RNE to FP32.

    Products whose exponent reaches 2**128 overflow to infinity (FP16/BF16/TF32 units).
    """
    F, F2 = model.frac_bits, model.sum_frac_bits
    A, B, C = model.a_format.decode(a), model.b_format.decode(b), c_format.decode(c)
    nan, inf, inf_neg = special_outcome(A, B, C)
    p_sig = np.where((A.kind == 0) & (B.kind == 0), A.significand * B.significand, 0)
    p_ulp = A.ulp_exponent + B.ulp_exponent
    p_exp = A.exponent + B.exponent
    p_neg = A.sign ^ B.sign
    if not model.split_even_odd:
        two = np.int64(1) << (model.a_format.man_bits + model.b_format.man_bits + 1)
        over = (p_sig != 0) & (p_exp + (p_sig >= two) >= 128)
        if over.any():  # products overflowing FP32's exponent range are infinities
            pos = (over & ~p_neg).any(axis=1) | (inf & ~inf_neg)
            neg = (over & p_neg).any(axis=1) | (inf & inf_neg)
            nan = nan | (pos & neg)
            inf = (pos | neg) & ~nan
            inf_neg = neg
    none = np.iinfo(np.int64).min // 4

    def truncated_sum(sig, ulp, exp, neg):
        e = np.where(sig != 0, exp, none).max(axis=1)
        t = truncate_toward_zero(sig, ulp - (e - F)[:, None], neg).sum(axis=1)
        return t, e  # t in units of 2**(e - F)

    if model.split_even_odd:
        t0, e0 = truncated_sum(p_sig[:, 0::2], p_ulp[:, 0::2], p_exp[:, 0::2], p_neg[:, 0::2])
        t1, e1 = truncated_sum(p_sig[:, 1::2], p_ulp[:, 1::2], p_exp[:, 1::2], p_neg[:, 1::2])
        e_dot = np.maximum(e0, e1)
        s_dot = _floor_shift(t0, e0 - e_dot) + _floor_shift(t1, e1 - e_dot)
    else:
        s_dot, e_dot = truncated_sum(p_sig, p_ulp, p_exp, p_neg)
    c_sig = np.where(C.kind == 0, C.significand, 0)
    # zero C aligns at the minimum normal exponent; a NaN/inf C at -1 (as frexp leaves it)
    c_exp = np.where(C.kind != 0, -1, C.exponent)
    e_max = np.maximum(e_dot, c_exp)
    # both parts on the grid 2**(e_max - F2 - 1)
    dot = _floor_shift(s_dot, np.where(e_dot == none, 0, e_dot - e_max + F2 + 1 - F))
    c_signed = np.where(C.sign, -c_sig, c_sig)
    c_part = _floor_shift(c_signed, C.ulp_exponent - (e_max - F))
    if model.split_even_odd:
        c_part = np.where(c_exp < e_max - F - 1, 0, c_part)
        # MMA-Sim aligns a NaN/inf C at exponent -1 and drops it like any C below the
        # window, so a special C vanishes once the products reach 2**25
        c_dropped = (C.kind != 0) & (np.maximum(e_dot, -1) - F - 1 > -1)
        nan = np.where(c_dropped, (A.is_nan | B.is_nan).any(axis=1), nan)
        inf = np.where(c_dropped, False, inf)
    total = dot + (c_part << (F2 + 1 - F))
    # normalise (exponent at least FP32's minimum normal) and floor to F2 fraction bits
    lead = bit_length(np.abs(total)) - 1 + (e_max - F2 - 1)
    lead = np.maximum(lead, -126)
    kept = _floor_shift(total, (e_max - F2 - 1) - (lead - F2))
    bits = round_signed_sum(kept, lead - F2, model.d_format, Rounding.RNE, "inf")
    bits = np.where(inf, np.where(inf_neg, np.uint32(0xFF800000), np.uint32(0x7F800000)), bits)
    return np.where(nan, model.nan_bits, bits).astype(np.uint32)


def _scales(model: UnitModel, scale_a: np.ndarray, scale_b: np.ndarray):
    """Per-element scale exponents [N, L] and the rows with a NaN scale."""
    sf = model.scale_format
    SA, SB = sf.decode(scale_a), sf.decode(scale_b)
    nan = (SA.kind == 2).any(axis=1) | (SB.kind == 2).any(axis=1)
    return SA, SB, nan


def _scaled_fused(model: UnitModel, a, b, c, c_format, scale_a, scale_b) -> np.ndarray:
    """Block-scaled k32: each product's exponent raised by its two scales' exponents (UE8M0)."""
    SA, SB, nan = _scales(model, scale_a, scale_b)
    # UE8M0 scales are powers of two: significand 1, the exponent carries the value
    shift = SA.ulp_exponent + SB.ulp_exponent + bit_length(SA.significand * SB.significand) - 1
    return fused_group(model, a, b, c, c_format, exponent_shift=shift, extra_nan=nan)


def _subgroup_scaled(model: UnitModel, a, b, c, c_format, scale_a, scale_b) -> np.ndarray:
    """Block-scaled k64 (mxf4 / nvf4): exact sums of ``subgroup_size`` products, each
    multiplied by its two scales and aligned on the scales' exponents (not on the partial
    sum's own magnitude), fused with C: truncated to F bits below the largest, rounded once."""
    G = model.subgroup_size
    A, B, C = model.a_format.decode(a), model.b_format.decode(b), c_format.decode(c)
    SA, SB, nan = _scales(model, scale_a, scale_b)
    nan = nan | C.is_nan
    n, length = a.shape
    p_sig = np.where(A.sign ^ B.sign, -1, 1) * A.significand * B.significand
    p_ulp = A.ulp_exponent + B.ulp_exponent
    base = p_ulp.min(axis=1)  # the operand format's finest product quantum (same for all)
    p = (p_sig << (p_ulp - base[:, None])).reshape(n, length // G, G)
    all_zero = (p == 0).all(axis=2)
    p = p.sum(axis=2)  # exact sub-group sums, in units of 2**base
    sa_sig, sb_sig = SA.significand[:, ::G], SB.significand[:, ::G]
    scale_sig = sa_sig * sb_sig
    e_scale = SA.exponent[:, ::G] + SB.exponent[:, ::G]
    scale_ulp = SA.ulp_exponent[:, ::G] + SB.ulp_exponent[:, ::G]
    e_zero = model.zero_exponent
    e_term = np.where(all_zero | (scale_sig == 0), e_zero, e_scale)
    c_sig = np.where(C.kind == 0, C.significand, 0)
    c_exp = np.where(c_sig == 0, e_zero, C.exponent)
    e_max = np.maximum(e_term.max(axis=1), c_exp)
    quantum = e_max - model.frac_bits
    term_sig = p * scale_sig  # value = term_sig * 2**(base + scale_ulp)
    t = truncate_toward_zero(np.abs(term_sig), base[:, None] + scale_ulp - quantum[:, None], term_sig < 0).sum(axis=1)
    t = t + truncate_toward_zero(c_sig, C.ulp_exponent - quantum, C.sign)
    bits = round_signed_sum(t, quantum, model.output_format, model.output_rounding, model.output_overflow)
    d = model.d_format
    bits = np.where(C.is_inf & ~nan, np.where(C.sign, (1 << (d.width - 1)) | d.inf_bits, d.inf_bits), bits)
    return np.where(nan, model.nan_bits, bits).astype(d.container_dtype)


def _row(d: Decoded) -> Decoded:
    return Decoded(d.sign[:, None], d.significand[:, None], d.ulp_exponent[:, None], d.exponent[:, None],
                   d.kind[:, None])


def datapath(model: UnitModel, a: np.ndarray, b: np.ndarray, c: np.ndarray, c_format: Format,
             scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None) -> np.ndarray:
    """Groups of ``model.group_size`` products in K order, each group's output the next one's C.

    Block-scaled units take ``scale_a``/``scale_b`` as per-element scale bits [N, K].
    """
    step = {"fused": fused_group, "integer": _integer_group, "fma_chain": _fma_chain, "binary": _binary_group,
            "ieee_mul_add": _ieee_mul_add, "exact_sum": _exact_sum, "ftz_mul_add": _ftz_mul_add,
            "staged_sum": _staged_sum, "scaled_fused": _scaled_fused,
            "subgroup_scaled": _subgroup_scaled}[model.algorithm]
    size = model.group_size
    acc, acc_fmt = c, c_format
    for start in range(0, a.shape[1], size):
        if model.is_block_scaled:
            acc = step(model, a[:, start:start + size], b[:, start:start + size], acc, acc_fmt,
                       scale_a[:, start:start + size], scale_b[:, start:start + size])
        else:
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


def convert_patterns(bits: np.ndarray, src: Format, dst: Format) -> np.ndarray:
    """Operand patterns of ``src`` as ``dst`` patterns (the catalogued conversions widen, so this is exact)."""
    if src == dst:
        return bits
    return dst.from_float(src.to_float(bits))  # exact for the widening conversions catalogued


def instruction_step(spec: InstructionSpec, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                     scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None, *,
                     group_datapath=None) -> np.ndarray:
    """One instruction on [N, spec.k] operands and [N] accumulator bits (block-scaled
    instructions: per-element scale bits [N, spec.k]).  ``group_datapath``: the groups' datapath over one chunk,
    called as ``datapath`` is (default ``datapath``; ``vectors.faults`` passes a faulty one)."""
    datapath_ = datapath if group_datapath is None else group_datapath
    model = spec.model
    if model.is_block_scaled:
        return datapath_(model, a, b, c, spec.c_format, scale_a, scale_b)
    a = convert_patterns(a, spec.a_format, model.a_format)
    b = convert_patterns(b, spec.b_format, model.b_format)
    if spec.k_order is not None:
        order = np.asarray(spec.k_order)
        a, b = a[:, order], b[:, order]
    chunk = spec.chunk or spec.k
    if spec.c_entry == "fused":
        acc, acc_fmt = c, spec.c_format
    else:
        acc, acc_fmt = np.zeros(len(c), dtype=model.c_format.container_dtype), model.c_format
    if spec.chunk_combine == "ieee_add":  # every chunk from +0, the results summed in K order by IEEE additions
        parts = [datapath_(model, a[:, s:s + chunk], b[:, s:s + chunk], acc, acc_fmt) for s in range(0, spec.k, chunk)]
        acc = parts[0]
        for part in parts[1:]:
            acc = ieee_add(acc, model.d_format, part, model.d_format, model.d_format, spec.c_add_rounding,
                           model.nan_bits)
    else:
        for start in range(0, spec.k, chunk):
            acc = datapath_(model, a[:, start:start + chunk], b[:, start:start + chunk], acc, acc_fmt)
            acc_fmt = model.d_format
    if spec.c_entry == "ieee_add":
        acc = ieee_add(acc, model.d_format, c, spec.c_format, model.d_format, spec.c_add_rounding, model.nan_bits)
    return acc


def dot_bits(spec: InstructionSpec, a: np.ndarray, b: np.ndarray, c: np.ndarray,
             scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None) -> np.ndarray:
    """Chain the instruction over K' = a multiple of spec.k; the d of one is the c of the next.

    Block-scaled instructions take ``scale_a``/``scale_b``: [N, K'/scale_block] scale bits
    (None: unit scales; ``tcnumerics.blockscale`` validates and documents them).
    """
    n, k_total = a.shape
    model = spec.model
    if model.is_block_scaled:
        scale_a, scale_b = (_expand_scales(model, s, n, k_total) for s in (scale_a, scale_b))
    acc = c
    for start in range(0, k_total, spec.k):
        if model.is_block_scaled:
            acc = instruction_step(spec, a[:, start:start + spec.k], b[:, start:start + spec.k], acc,
                                   scale_a[:, start:start + spec.k], scale_b[:, start:start + spec.k])
        else:
            acc = instruction_step(spec, a[:, start:start + spec.k], b[:, start:start + spec.k], acc)
    return acc


def unit_scale_bits(model: UnitModel) -> int:
    """The bit pattern of the scale 1.0 in the model's scale format."""
    return int(model.scale_format.from_float(np.array([1.0]))[0])


def _expand_scales(model: UnitModel, scale, n: int, k_total: int) -> np.ndarray:
    blocks = k_total // model.scale_block
    if scale is None:
        scale = np.full((n, blocks), unit_scale_bits(model), model.scale_format.container_dtype)
    scale = np.asarray(scale)
    if scale.shape != (n, blocks):
        raise ValueError(f"scale: expected shape ({n}, {blocks}) (one per {model.scale_block} K elements), "
                         f"got {scale.shape}")
    return np.repeat(scale, model.scale_block, axis=1)
