"""CUDA C++ source of the GPU engine's kernels (private; ``tcnumerics.engines.cuda`` is the interface).

One source serves two compilers: NVRTC (through CuPy) builds it for the GPU, and a host C++
compiler builds the very same text for the CPU behind ``HOST_PRELUDE`` (CUDA threads as
``std::thread``s, ``__syncthreads`` as a ``std::barrier``), so CI checks the kernels' logic
without a GPU.  Every unit parameter arrives as a compile-time constant from a generated
configuration header (``_cuda_build.config_header``): operand containers, table shifts, the
group schedule, F, the zero exponent, the C / D / output formats (``FmtC``, ``FmtD``,
``FmtOut``), roundings, the NaN pattern, the C-added-last flag and the tile shape.

Kernels (``extern "C"``):

* ``dot_kernel`` -- one thread per independent vector: the instruction chain through the
  operand tables (``chain_one``, a re-statement of ``_fast_numba``'s integer kernels).
* ``gemm_scalar`` -- one thread per output of a GEMM, the same ``chain_one``; every plan.
* ``gemm_tiled`` -- fused units with equal groups of at most 32 products: a register-tiled
  SIMT GEMM.  Per group, shared-memory tiles hold each operand's magnitude (pre-shifted
  left by ``LS_AB``), alignment exponent and sign mask; pass 1 forms the maximum exponent
  E of every output (``max(ea + eb, E)``), pass 2 truncates each product toward zero with
  one 32-bit multiply and one clamped right shift ``(|a| << LS) * |b| >> (E + RS - ea - eb)``
  and sums in int32 as ``t ^ sa ^ sb`` (one's complement); the per-group count of negative
  products (``popc`` of the rows' and columns' sign masks) turns that into the exact
  two's-complement sum.  C's truncated term and the single rounding run once per output per
  group; lanes with an inf/NaN operand or accumulator take the scalar special-value rule.
  The int32 sum is exact while ``GL * 2**(F + 2) <= 2**31`` (other units take ``gemm_scalar``).
* ``gemm_tiled`` for sub-group scaled units (``SUBGROUP``: NVFP4 / MXFP4 k64) -- the same tiling
  with the bits of ``tc_subgroup_one`` (kept as the readable per-output form): operands staged as
  small integers (value / 2**(EMIN - MAN)), each sub-group's SUBG products summed exactly with
  32-bit multiply-adds, scaled by the two scale significands (int32), aligned on E - F into an int64
  total; C's term, NaN / infinity and the single rounding once per output per group.
"""

from __future__ import annotations

__all__ = ["KERNEL_SOURCE", "HOST_PRELUDE", "HOST_LAUNCHER", "FFMA_SOURCE", "FFMA_HOST_LAUNCHER"]

KERNEL_SOURCE = r"""
#ifndef TC_HOST
#define TC_FN __device__ __forceinline__
#define TC_SHR(x, d) tc_shr_dev((x), (d))
__device__ __forceinline__ unsigned tc_shr_dev(unsigned x, unsigned d) {
    unsigned r;
    asm("shr.u32 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(d));  // amounts >= 32 give 0 (PTX clamps)
    return r;
}
#define TC_CLZLL(x) __clzll(x)
#define TC_CLZ(x) __clz(x)
#define TC_POPC(x) __popc(x)
#define TC_LDG(p) __ldg(p)
#if USE_DPX
#define TC_ADDMAX(a, b, c) __viaddmax_s32((a), (b), (c))  // Hopper DPX: max(a + b, c) in one instruction
#else
#define TC_ADDMAX(a, b, c) max((a) + (b), (c))
#endif
#define TC_NAN __longlong_as_double(0x7FF8000000000000LL)
#define TC_INF __longlong_as_double(0x7FF0000000000000LL)
#define TC_SIGNBIT(x) (__double_as_longlong(x) < 0)
// 2**e as a normal float / double built from its bits (callers keep e in the normal range)
__device__ __forceinline__ float tc_pow2f(int e) { return __int_as_float((e + 127) << 23); }
__device__ __forceinline__ double tc_pow2d(int e) { return __longlong_as_double((long long)(e + 1023) << 52); }
#define TC_F2U(x) __float_as_uint(x)
#define TC_U2F(x) __uint_as_float(x)
#endif
#ifndef FMA_ALIGN
#define FMA_ALIGN 0
#endif
#if FMA_ALIGN == 1
typedef float FT;
#define TC_POW2(T, e) tc_pow2f(e)
#ifndef TC_HOST
#define TC_FMA_RZ(a, b, c) __fmaf_rz((a), (b), (c))
#endif
#elif FMA_ALIGN == 2
typedef double FT;
#define TC_POW2(T, e) tc_pow2d(e)
#ifndef TC_HOST
#define TC_FMA_RZ(a, b, c) __fma_rz((a), (b), (c))
#endif
#endif

#define ZERO_EXP (-16384)

struct Dec { long long sig; long long exp; int kind; };

template <class FP> TC_FN Dec tc_decode(long long bits) {
    long long v = (bits >> FP::pad) & ((1LL << FP::width) - 1);
    int neg = FP::is_signed ? (int)((v >> (FP::width - 1)) & 1) : 0;
    long long code = v & ((1LL << (FP::exp_bits + FP::man_bits)) - 1);
    long long fe = code >> FP::man_bits;
    long long frac = code & ((1LL << FP::man_bits) - 1);
    long long sig, exp;
    if (FP::subnormals) {
        sig = fe > 0 ? (frac | (1LL << FP::man_bits)) : frac;
        exp = (fe > 1 ? fe : 1) - FP::bias;
    } else {
        sig = frac | (1LL << FP::man_bits);
        exp = fe - FP::bias;
    }
    int kind = 0;
    if (FP::specials == 0) {
        if (fe == (1LL << FP::exp_bits) - 1) kind = frac != 0 ? 3 : (neg ? 2 : 1);
    } else if (FP::specials == 1) {
        if (code == (1LL << (FP::exp_bits + FP::man_bits)) - 1) kind = 3;
    } else if (FP::specials == 2) {
        if (neg && code == 0) kind = 3;
    }
    if (kind != 0) sig = 0;
    Dec d = {neg ? -sig : sig, exp, kind};
    return d;
}

TC_FN long long tc_bitlen(long long x) { return 64 - TC_CLZLL((unsigned long long)x); }

// 32-bit decode of a float pattern of at most 32 container bits: signed significand, exponent, kind
template <class FP> TC_FN int tc_decode32(unsigned bits, int& exp, int& kind) {
    const unsigned wmask = FP::width >= 32 ? 0xFFFFFFFFu : ((1u << FP::width) - 1u);
    const unsigned v = (bits >> FP::pad) & wmask;
    const int neg = FP::is_signed ? (int)((v >> (FP::width - 1)) & 1u) : 0;
    const unsigned code = v & ((1u << (FP::exp_bits + FP::man_bits)) - 1u);
    const int fe = (int)(code >> FP::man_bits);
    const unsigned frac = code & ((1u << FP::man_bits) - 1u);
    int sig;
    if (FP::subnormals) {
        sig = (int)(fe > 0 ? (frac | (1u << FP::man_bits)) : frac);
        exp = (fe > 1 ? fe : 1) - FP::bias;
    } else {
        sig = (int)(frac | (1u << FP::man_bits));
        exp = fe - FP::bias;
    }
    kind = 0;
    if (FP::specials == 0) {
        if (fe == (1 << FP::exp_bits) - 1) kind = frac != 0 ? 3 : (neg ? 2 : 1);
    } else if (FP::specials == 1) {
        if (code == (1u << (FP::exp_bits + FP::man_bits)) - 1u) kind = 3;
    } else if (FP::specials == 2) {
        if (neg && code == 0) kind = 3;
    }
    if (kind != 0) sig = 0;
    return neg ? -sig : sig;
}

// tc_round for a normal, finite result of |total| < 2**31 in 32-bit arithmetic; ok = false: use tc_round
template <class FP> TC_FN unsigned tc_round32(long long total, int exp2, bool& ok) {
    ok = true;
    if (total == 0) return 0u;  // units write +0 for a zero result
    const bool neg = total < 0;
    const long long m64 = neg ? -total : total;
    if (m64 >> 31) { ok = false; return 0u; }
    const unsigned mag = (unsigned)m64;
    const int P = FP::man_bits;
    const int n = 32 - TC_CLZ(mag);
    int q = exp2 + n - 1 - P;
    if (q < (int)FP::emin - P) { ok = false; return 0u; }  // below the normal range
    const int shift = n - 1 - P;
    unsigned sig;
    if (shift > 0) {
        const unsigned trunc = mag >> shift, rem = mag & ((1u << shift) - 1u), half = 1u << (shift - 1);
        bool up = false;
        if (ROUND_OUT == 0) up = rem > half || (rem == half && (trunc & 1u));
        else if (ROUND_OUT == 1) up = rem >= half;
        else if (ROUND_OUT == 3) up = rem != 0 && !neg;
        else if (ROUND_OUT == 4) up = rem != 0 && neg;
        sig = trunc + (up ? 1u : 0u);
        if (ROUND_OUT == 5 && rem != 0) sig |= 1u;
    } else {
        sig = mag << (-shift);
    }
    if (sig >> (P + 1)) { sig >>= 1; q += 1; }
    const long long code = ((long long)(q + P + FP::bias) << P) | (long long)(sig - (1u << P));
    if (code > FP::max_code) { ok = false; return 0u; }
    return (((neg ? 1u : 0u) << (FP::width - 1)) | (unsigned)code) << FP::pad;
}

// (-1)**neg * mag * 2**exp2 rounded once into FP (FloatFormat.encode for one value)
template <class FP> TC_FN long long tc_round(bool neg, long long mag, long long exp2, int rounding, int overflow,
                                             bool keep_negative_zero) {
    const long long p = FP::man_bits;
    long long code = 0, fe = 0;
    if (mag != 0) {
        long long q = exp2 + tc_bitlen(mag) - 1 - p;
        if (q < FP::emin - p) q = FP::emin - p;
        long long shift = q - exp2;
        long long sig;
        if (shift > 0) {
            long long trunc, rem;
            bool above, tie;
            if (shift >= 63) {
                trunc = 0; rem = mag;
                above = shift == 63 && mag > (1LL << 62);
                tie = shift == 63 && mag == (1LL << 62);
            } else {
                trunc = mag >> shift;
                rem = mag - (trunc << shift);
                long long half = 1LL << (shift - 1);
                above = rem > half;
                tie = rem == half;
            }
            bool inexact = rem != 0, up = false;
            if (rounding == 0) up = above || (tie && (trunc & 1) == 1);
            else if (rounding == 1) up = above || tie;
            else if (rounding == 3) up = inexact && !neg;
            else if (rounding == 4) up = inexact && neg;
            sig = trunc + (up ? 1 : 0);
            if (rounding == 5 && inexact) sig |= 1;
        } else {
            sig = mag << (-shift < 63 ? -shift : 63);
        }
        if ((sig >> (p + 1)) != 0) { sig >>= 1; q += 1; }
        if (sig >= (1LL << p)) {
            fe = q + p + FP::bias;
            code = (fe << p) | (sig - (1LL << p));
        } else {
            code = sig;
        }
    }
    if (code > FP::max_code || fe > (FP::max_code >> p)) {
        bool to_inf;
        if (overflow == 0) to_inf = rounding == 0 || rounding == 1 || (rounding == 3 && !neg) || (rounding == 4 && neg);
        else to_inf = overflow != 2;
        if (to_inf) {
            code = ((1LL << FP::exp_bits) - 1) << p;
            if (overflow == 3) code |= 1LL << (p - 1 > 0 ? p - 1 : 0);
        } else {
            code = FP::max_code;
        }
    }
    if (code == 0 && !keep_negative_zero) return 0;
    return ((((long long)(neg ? 1 : 0)) << (FP::width - 1)) | code) << FP::pad;
}

template <class FP> TC_FN long long tc_inf_bits(bool neg) {
    return ((((long long)(neg ? 1 : 0)) << (FP::width - 1)) | (((1LL << FP::exp_bits) - 1) << FP::man_bits)) << FP::pad;
}

template <class FP> TC_FN double tc_to_double(long long bits) {
    Dec d = tc_decode<FP>(bits);
    if (d.kind == 3) return TC_NAN;
    if (d.kind != 0) return d.kind == 2 ? -TC_INF : TC_INF;
    if (d.sig == 0) {
        bool neg = FP::is_signed && (((bits >> FP::pad) >> (FP::width - 1)) & 1);
        return neg ? -0.0 : 0.0;
    }
    return ldexp((double)d.sig, (int)(d.exp - FP::man_bits));
}

// IEEE addition of two patterns rounded once into FO (the reference's float64 route)
template <class FX, class FY, class FO> TC_FN long long tc_ieee_add(long long x, long long y, int rounding) {
    double s = tc_to_double<FX>(x) + tc_to_double<FY>(y);
    if (s != s) return NAN_BITS;
    bool neg = TC_SIGNBIT(s);
    if (fabs(s) == TC_INF) return tc_inf_bits<FO>(neg);
    int e;
    double m = frexp(fabs(s), &e);
    long long mag = (long long)ldexp(m, 53);
    return tc_round<FO>(neg, mag, (long long)e - 53, rounding, 0, true);
}

#ifndef PROMOTE
#define PROMOTE 0
#endif
// FP32 promotion (``gemm(promote_every=P)``): a block's chain result joins the FP32 main accumulator by one IEEE
// RNE addition (FmtD is FP32 wherever it is used); the first block's result is the main accumulator itself unless
// a start value was given -- as the host loop over ``promotion_blocks`` does
TC_FN long long tc_promote(long long main, long long part, bool combine) {
    return combine ? tc_ieee_add<FmtD, FmtD, FmtD>(main, part, 0) : part;
}

// result of a group with an inf/NaN operand or accumulator (-1: none); entries as in the tables
TC_FN long long tc_special_one(int sa, int ea, int sb, int eb, int& nan, int& pos, int& neg) {
    int ka = ea < ZERO_EXP ? ZERO_EXP - ea : 0;
    int kb = eb < ZERO_EXP ? ZERO_EXP - eb : 0;
    if (ka == 3 || kb == 3) {
        nan = 1;
    } else if (ka != 0 || kb != 0) {
        bool a_zero = ka == 0 && sa == 0, b_zero = kb == 0 && sb == 0;
        if (a_zero || b_zero) {
            nan = 1;
        } else {
            bool na = ka != 0 ? ka == 2 : sa < 0;
            bool nb = kb != 0 ? kb == 2 : sb < 0;
            if (na != nb) neg = 1; else pos = 1;
        }
    }
    return 0;
}

TC_FN long long tc_special_result(int nan, int pos, int neg) {
    if (nan || (pos && neg)) return NAN_BITS;
    if (pos || neg) return tc_inf_bits<FmtD>(neg != 0);
    return -1;
}

template <class FP> TC_FN long long tc_decode_int(long long bits) {
    long long v = bits & ((1LL << FP::width) - 1);
    if (FP::is_signed && v >= (1LL << (FP::width - 1))) v -= 1LL << FP::width;
    return v;
}

TC_FN long long tc_int_wrap(long long total) {
    if (SATURATE) total = total < FmtD::emin ? FmtD::emin : (total > FmtD::max_code ? FmtD::max_code : total);
    return total & ((1LL << FmtD::width) - 1);
}

TC_FN long long tc_term(long long sig, long long dist, int lshift, int rshift) {
    long long s = sig >> 63;
    long long mag = ((sig ^ s) - s) << lshift;
    long long sh = dist + rshift;
    long long t = sh >= 63 ? 0 : (sh <= 0 ? mag : mag >> sh);
    return (t ^ s) - s;
}

#if KIND_INTEGER == 0
// one fused group of one vector from table entries (``_fast_numba._fused_one``)
template <class FA> TC_FN long long tc_fused_one(const int* sa, const int* ea, const int* sb, const int* eb, int L,
                                                 long long acc_bits, bool acc_zero, int ls_acc, int rs_acc) {
    Dec c = {0, 0, 0};
    if (!acc_zero) c = tc_decode<FA>(acc_bits);
    bool special = c.kind != 0;
    long long emax = c.sig != 0 ? c.exp : (long long)E_ZERO;
    for (int i = 0; i < L; ++i) {
        if (ea[i] < ZERO_EXP || eb[i] < ZERO_EXP) special = true;
        if (sa[i] == 0 || sb[i] == 0) {
            if (emax < E_ZERO) emax = E_ZERO;
        } else {
            long long e = (long long)ea[i] + eb[i];
            if (emax < e) emax = e;
        }
    }
    if (special) {
        int nan = c.kind == 3, pos = c.kind == 1, neg = c.kind == 2;
        for (int i = 0; i < L; ++i) tc_special_one(sa[i], ea[i], sb[i], eb[i], nan, pos, neg);
        return tc_special_result(nan, pos, neg);
    }
    long long total = tc_term(c.sig, emax - c.exp, ls_acc, rs_acc);
    for (int i = 0; i < L; ++i)
        total += tc_term((long long)sa[i] * sb[i], emax - ea[i] - eb[i], LS_AB, RS_AB);
    return tc_round<FmtOut>(total < 0, total < 0 ? -total : total, emax - F_BITS, ROUNDING, OVERFLOW, false);
}
#endif

#if SUBGROUP
// Blackwell k64 block-scaled group (reference ``_subgroup_scaled``): exact sums of SUBG products,
// each multiplied by its two scales (TS: 4 ints per scale code -- significand, exponent, ulp
// exponent, NaN), aligned on the scales' exponents, fused with C, truncated to F bits, rounded once
TC_FN unsigned long long tc_shift_mag(unsigned long long mag, long long rel) {
    if (rel >= 0) return mag << (rel < 62 ? rel : 62);
    return -rel >= 63 ? 0ull : mag >> (-rel);
}

TC_FN long long tc_subgroup_one(const int* sa, const int* ea, const int* sb, const int* eb, int L, long long acc_bits,
                                const int* scale_a, const int* scale_b, const int* TS) {
    Dec c = tc_decode<FmtC>(acc_bits);
    bool nan = c.kind == 3;
    long long base = 0;
    for (int i = 0; i < L; ++i) {  // the finest product quantum of the group (zeros at their format's emin)
        long long u = (long long)(ea[i] > ZERO_EXP ? ea[i] : EMIN_A) - MAN_A + (eb[i] > ZERO_EXP ? eb[i] : EMIN_B) - MAN_B;
        if (i == 0 || u < base) base = u;
    }
    long long e_term[GLMAX / SUBG], term[GLMAX / SUBG], scale_ulp[GLMAX / SUBG];
    long long e_max = c.sig != 0 ? c.exp : (long long)E_ZERO;
    const int groups = L / SUBG;
    for (int j = 0; j < groups; ++j) {
        long long sum = 0;
        bool all_zero = true;
        for (int i = j * SUBG; i < (j + 1) * SUBG; ++i) {
            long long u = (long long)(ea[i] > ZERO_EXP ? ea[i] : EMIN_A) - MAN_A + (eb[i] > ZERO_EXP ? eb[i] : EMIN_B) - MAN_B;
            long long p = (long long)sa[i] * sb[i];
            if (p != 0) all_zero = false;
            sum += p < 0 ? -(long long)((unsigned long long)(-p) << (u - base)) : (long long)((unsigned long long)p << (u - base));
        }
        const int* qa = TS + 4 * scale_a[j];
        const int* qb = TS + 4 * scale_b[j];
        if (qa[3] || qb[3]) nan = true;
        const long long scale_sig = (long long)qa[0] * qb[0];
        e_term[j] = (all_zero || scale_sig == 0) ? (long long)E_ZERO : (long long)qa[1] + qb[1];
        scale_ulp[j] = (long long)qa[2] + qb[2];
        term[j] = sum * scale_sig;
        if (e_term[j] > e_max) e_max = e_term[j];
    }
    if (nan) return NAN_BITS;
    if (c.kind == 1 || c.kind == 2) return tc_inf_bits<FmtD>(c.kind == 2);
    const long long quantum = e_max - F_BITS;
    long long t = 0;
    for (int j = 0; j < groups; ++j) {
        unsigned long long m = tc_shift_mag((unsigned long long)(term[j] < 0 ? -term[j] : term[j]),
                                            base + scale_ulp[j] - quantum);
        t += term[j] < 0 ? -(long long)m : (long long)m;
    }
    unsigned long long cm = tc_shift_mag((unsigned long long)(c.sig < 0 ? -c.sig : c.sig),
                                         c.exp - FmtC::man_bits - quantum);
    t += c.sig < 0 ? -(long long)cm : (long long)cm;
    return tc_round<FmtOut>(t < 0, t < 0 ? -t : t, quantum, ROUNDING, OVERFLOW, false);
}
#endif

template <class T> TC_FN int tc_entry(const int* table, T raw, int shift) {
    return TC_LDG(table + ((unsigned)raw >> shift));
}

// the instruction chain of one vector over columns [k0, k1) of its operand rows
#if !SCALED && !SUBGROUP
#define SCALE_ARGS
#define SCALE_PASS
#else
// block scales: one code per SCALE_BLOCK K elements of a row; TS maps a code to its exponent shift
// (NAN_SCALE for a NaN scale, which makes the group's result NaN)
#define SCALE_ARGS , const unsigned char* sarow, const unsigned char* sbrow, const int* TS
#define SCALE_PASS , sarow, sbrow, TS
#endif
#define NAN_SCALE 0x40000000

TC_FN long long chain_one(const A_T* arow, const B_T* brow, const int* TA, const int* TB, long long acc, int k0,
                          int k1 SCALE_ARGS) {
#if KIND_INTEGER
    for (int base = k0; base < k1; base += K_INST) {
        int pos = 0;
        for (int g = 0; g < NG; ++g) {
            long long total = g == 0 ? tc_decode_int<FmtC>(acc) : tc_decode_int<FmtD>(acc);
            for (int i = 0; i < GLEN[g]; ++i) {
                int col = base + PERM[pos + i];
                const long long x = tc_entry(TA, arow[col], A_SHIFT) >> 16, y = tc_entry(TB, brow[col], B_SHIFT) >> 16;
                total += BIT_XOR ? (x ^ y) : x * y;  // binary units: AND is the product of the bits, XOR their sum mod 2
            }
            acc = tc_int_wrap(total);
            pos += GLEN[g];
        }
    }
    return acc;
#else
    int sa[GLMAX], ea[GLMAX], sb[GLMAX], eb[GLMAX];
    for (int base = k0; base < k1; base += K_INST) {
        long long c_in = acc;
        int pos = 0;
        for (int g = 0; g < NG; ++g) {
            int L = GLEN[g];
#if SCALED
            bool scale_nan = false;
#endif
            for (int i = 0; i < L; ++i) {
                int col = base + PERM[pos + i];
                int wa = tc_entry(TA, arow[col], A_SHIFT), wb = tc_entry(TB, brow[col], B_SHIFT);
                sa[i] = wa >> 16; ea[i] = (int)(short)(wa & 0xFFFF);
                sb[i] = wb >> 16; eb[i] = (int)(short)(wb & 0xFFFF);
#if SCALED
                const int s_a = TC_LDG(TS + sarow[col / SCALE_BLOCK]), s_b = TC_LDG(TS + sbrow[col / SCALE_BLOCK]);
                if (s_a == NAN_SCALE || s_b == NAN_SCALE) scale_nan = true;
                else if (ea[i] > ZERO_EXP) ea[i] += s_a + s_b;  // the product's exponent, raised by both scales
#endif
            }
#if SUBGROUP
            int sca[GLMAX / SUBG], scb[GLMAX / SUBG];
            for (int j = 0; j < L / SUBG; ++j) {
                const int col = base + PERM[pos + j * SUBG];
                sca[j] = sarow[col / SCALE_BLOCK];
                scb[j] = sbrow[col / SCALE_BLOCK];
            }
            acc = tc_subgroup_one(sa, ea, sb, eb, L, acc, sca, scb, TS);
#else
            if (g == 0)
                acc = tc_fused_one<FmtC>(sa, ea, sb, eb, L, acc, IEEE_ADD != 0, LS_C, RS_C);
            else
                acc = tc_fused_one<FmtD>(sa, ea, sb, eb, L, acc, false, LS_D, RS_D);
#endif
#if SCALED
            if (scale_nan) acc = NAN_BITS;
#endif
            pos += L;
        }
#if IEEE_ADD
        acc = tc_ieee_add<FmtD, FmtC, FmtD>(acc, c_in, ADD_ROUNDING);
#endif
    }
    return acc;
#endif
}

#ifndef BUILD_DOT
#define BUILD_DOT 1
#define BUILD_SCALAR 1
#define BUILD_TILED 1
#endif

#if BUILD_DOT
extern "C" __global__ void dot_kernel(const A_T* __restrict__ A, const B_T* __restrict__ B,
                                      const C_T* __restrict__ C, D_T* __restrict__ D,
                                      const int* __restrict__ TA, const int* __restrict__ TB, long long n, int k
#if SCALED || SUBGROUP
                                      , const unsigned char* __restrict__ SA, const unsigned char* __restrict__ SB,
                                      const int* __restrict__ TS
#endif
                                      ) {
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n) return;
#if SCALED || SUBGROUP
    const unsigned char* sarow = SA + row * (k / SCALE_BLOCK);
    const unsigned char* sbrow = SB + row * (k / SCALE_BLOCK);
#endif
    D[row] = (D_T)chain_one(A + row * k, B + row * k, TA, TB, (long long)C[row], 0, k SCALE_PASS);
}

#endif

#if BUILD_SCALAR
// acc: [M, N] uint32 accumulator bits, updated in place over columns [k0, k1)
extern "C" __global__ void gemm_scalar(const A_T* __restrict__ A, long long lda, const B_T* __restrict__ B,
                                       long long ldb, const int* __restrict__ TA, const int* __restrict__ TB,
                                       unsigned* __restrict__ ACC, int M, int N, int k0, int k1, int promote,
                                       int promote_start
#if SCALED || SUBGROUP
                                       , const unsigned char* __restrict__ SA, const unsigned char* __restrict__ SB,
                                       const int* __restrict__ TS
#endif
                                       ) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)M * N) return;
    int m = (int)(idx / N), n = (int)(idx % N);
#if SCALED || SUBGROUP
    const unsigned char* sarow = SA + m * (lda / SCALE_BLOCK);
    const unsigned char* sbrow = SB + n * (ldb / SCALE_BLOCK);
#endif
    if (promote == 0) {
        ACC[idx] = (unsigned)chain_one(A + m * lda, B + n * ldb, TA, TB, (long long)ACC[idx], k0, k1 SCALE_PASS);
        return;
    }
    // promotion blocks of ``promote`` columns from k0: each chained from zero, added into the FP32 main accumulator
    long long main = ACC[idx];
    for (int b0 = k0; b0 < k1; b0 += promote) {
        const int b1 = b0 + promote < k1 ? b0 + promote : k1;
        const long long part = chain_one(A + m * lda, B + n * ldb, TA, TB, 0LL, b0, b1 SCALE_PASS);
        main = tc_promote(main, part, promote_start || b0 > k0);
    }
    ACC[idx] = (unsigned)main;
}
#endif

#if TILED && BUILD_TILED && SUBGROUP
#define NT (TX * TY)
#define BM (TY * TM)
#define BN (TX * TN)
#define NSUB (GL / SUBG)
// the finest product quantum, 2**BASE: operand integers are values in units of 2**(EMIN - MAN)
#define SUB_BASE (EMIN_A - MAN_A + EMIN_B - MAN_B)
static_assert(TM * TN <= 32, "the NaN mask holds one bit per output of a thread");

TC_FN int tc_row(int t, int i) { return i < TM / 2 ? t * (TM / 2) + i : BM / 2 + t * (TM / 2) + (i - TM / 2); }
TC_FN int tc_col(int t, int j) { return j < TN / 2 ? t * (TN / 2) + j : BN / 2 + t * (TN / 2) + (j - TN / 2); }

// one operand's group of GL columns: V[k][R] its values as integers in units of 2**(EMIN - MAN)
// (sig << (exp - EMIN); 0 outside the matrix), Q[(s * 4 + f)][R] per sub-group s the scale's significand
// (f = 0), exponent (1), ulp exponent (2), and (f = 3) the NaN flag << 16 | the nonzero-operand mask
template <class T> TC_FN void tc_load_subgroup_stage(const T* __restrict__ X, long long ldx, const int* __restrict__ TX_,
                                                     int shift, int emin, int r0, int R, int rows, int col0,
                                                     int* V, int* Q, const unsigned char* __restrict__ S,
                                                     const int* __restrict__ TS, int tid) {
    for (int p = tid; p < NSUB * R; p += NT) {
        const int sg = p / R, r = p % R, row = r0 + r;
        const int c0 = col0 + sg * SUBG;
        unsigned nonzero = 0;
        for (int i = 0; i < SUBG; ++i) {
            int v = 0;
            if (row < rows) {
                const int w = tc_entry(TX_, X[(long long)row * ldx + c0 + i], shift);
                const int sig = w >> 16, e = (int)(short)(w & 0xFFFF);
                v = e > ZERO_EXP ? sig * (1 << (e - emin)) : 0;
            }
            V[(sg * SUBG + i) * R + r] = v;
            nonzero |= (v != 0 ? 1u : 0u) << i;
        }
        const int* q = TS + 4 * (row < rows ? (int)S[(long long)row * (ldx / SCALE_BLOCK) + c0 / SCALE_BLOCK] : 0);
        const bool in = row < rows;
        Q[(sg * 4 + 0) * R + r] = in ? TC_LDG(q) : 0;
        Q[(sg * 4 + 1) * R + r] = in ? TC_LDG(q + 1) : 0;
        Q[(sg * 4 + 2) * R + r] = in ? TC_LDG(q + 2) : 0;
        Q[(sg * 4 + 3) * R + r] = ((in && TC_LDG(q + 3)) ? 1 << 16 : 0) | (int)nonzero;
    }
}

// The tiled form of ``tc_subgroup_one`` (same bits): per group of GL = NSUB * SUBG columns, pass 1 forms
// every output's largest exponent E (C's, and each sub-group's scale exponent unless its products are all
// zero or its scale significand is 0); pass 2 sums each sub-group's SUBG products exactly in int32 (operand
// integers multiply to the product in units of 2**SUB_BASE), multiplies by the two scale significands
// (int32: _cuda_build checks the width) and adds the term truncated to 2**(E - F) into an int64 total;
// once per output, C's truncated term and one rounding.
extern "C" __global__ void __launch_bounds__(NT, 1)
gemm_tiled(const A_T* __restrict__ A, long long lda, const B_T* __restrict__ B, long long ldb,
           const int* __restrict__ TA, const int* __restrict__ TB, unsigned* __restrict__ ACC,
           int M, int N, int k0, int k1, int promote, int promote_start, const unsigned char* __restrict__ SA,
           const unsigned char* __restrict__ SB, const int* __restrict__ TS) {
    static_assert(!PROMOTE, "sub-group scaled units promote through the host loop");
    (void)promote; (void)promote_start;
#ifdef TC_HOST
    unsigned* tc_smem = tc_host_smem;
#else
    extern __shared__ unsigned tc_smem[];
#endif
    int* AV = (int*)tc_smem;
    int* BV = AV + GL * BM;
    int* AQ = BV + GL * BN;
    int* BQ = AQ + NSUB * 4 * BM;
    // per output, [TM * TN][NT]: accumulator bits, E, the aligned total's low and high words
    unsigned* CB = (unsigned*)(BQ + NSUB * 4 * BN);
    int* ES = (int*)(CB + TM * TN * NT);
    unsigned* TLO = (unsigned*)(ES + TM * TN * NT);
    int* THI = (int*)(TLO + TM * TN * NT);
    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
#pragma unroll 1
    for (int o = 0; o < TM * TN; ++o) {
        int m = m0 + tc_row(ty, o / TN), n = n0 + tc_col(tx, o % TN);
        CB[o * NT + tid] = (m < M && n < N) ? ACC[(long long)m * N + n] : 0u;
    }
    const int groups = (k1 - k0) / GL;
#pragma unroll 1
    for (int g = 0; g < groups; ++g) {
        __syncthreads();
        tc_load_subgroup_stage(A, lda, TA, A_SHIFT, EMIN_A, m0, BM, M, k0 + g * GL, AV, AQ, SA, TS, tid);
        tc_load_subgroup_stage(B, ldb, TB, B_SHIFT, EMIN_B, n0, BN, N, k0 + g * GL, BV, BQ, SB, TS, tid);
        __syncthreads();
        // pass 1: E of every output, and which outputs meet a NaN (C or a scale)
        int E[TM][TN];
        unsigned nan_mask = 0;
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                int cexp, ckind;
                const int csig = tc_decode32<FmtC>(CB[(i * TN + j) * NT + tid], cexp, ckind);
                E[i][j] = csig != 0 ? cexp : E_ZERO;
                nan_mask |= (ckind == 3 ? 1u : 0u) << (i * TN + j);
            }
#pragma unroll 1
        for (int sg = 0; sg < NSUB; ++sg) {
            int asig[TM], aexp[TM], aflag[TM], bsig[TN], bexp[TN], bflag[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int r = tc_row(ty, i);
                asig[i] = AQ[(sg * 4) * BM + r]; aexp[i] = AQ[(sg * 4 + 1) * BM + r]; aflag[i] = AQ[(sg * 4 + 3) * BM + r];
            }
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const int q = tc_col(tx, j);
                bsig[j] = BQ[(sg * 4) * BN + q]; bexp[j] = BQ[(sg * 4 + 1) * BN + q]; bflag[j] = BQ[(sg * 4 + 3) * BN + q];
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    const bool live = ((aflag[i] & bflag[j]) & 0xFFFF) != 0 && asig[i] * bsig[j] != 0;
                    E[i][j] = max(E[i][j], live ? aexp[i] + bexp[j] : (int)E_ZERO);
                    nan_mask |= (((aflag[i] | bflag[j]) >> 16) & 1u) << (i * TN + j);
                }
        }
        // pass 2: exact sub-group sums, scaled, truncated to 2**(E - F) and summed in int64
        long long T[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) T[i][j] = 0;
#pragma unroll 1
        for (int sg = 0; sg < NSUB; ++sg) {
            int acc[TM][TN];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = 0;
#pragma unroll 4
            for (int kk = 0; kk < SUBG; ++kk) {
                int av[TM], bv[TN];
#pragma unroll
                for (int i = 0; i < TM; ++i) av[i] = AV[(sg * SUBG + kk) * BM + tc_row(ty, i)];
#pragma unroll
                for (int j = 0; j < TN; ++j) bv[j] = BV[(sg * SUBG + kk) * BN + tc_col(tx, j)];
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
            }
            int asig[TM], aulp[TM], bsig[TN], bulp[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int r = tc_row(ty, i);
                asig[i] = AQ[(sg * 4) * BM + r]; aulp[i] = AQ[(sg * 4 + 2) * BM + r];
            }
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const int q = tc_col(tx, j);
                bsig[j] = BQ[(sg * 4) * BN + q]; bulp[j] = BQ[(sg * 4 + 2) * BN + q];
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    const int term = acc[i][j] * (asig[i] * bsig[j]);
                    const unsigned mag = (unsigned)(term < 0 ? -term : term);
                    // the term's quantum relative to 2**(E - F); a nonzero term has sh <= SUB_BASE + F
                    const int sh = SUB_BASE + aulp[i] + bulp[j] + F_BITS - E[i][j];
                    const long long v = sh >= 0 ? (long long)((unsigned long long)mag << (sh < 62 ? sh : 62))
                                                : (long long)TC_SHR(mag, (unsigned)(-sh));
                    T[i][j] += term < 0 ? -v : v;
                }
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const int at = (i * TN + j) * NT + tid;
                ES[at] = E[i][j];
                TLO[at] = (unsigned)(unsigned long long)T[i][j];
                THI[at] = (int)(T[i][j] >> 32);
            }
        // once per output: C's truncated term, specials, one rounding
#pragma unroll 1
        for (int o = 0; o < TM * TN; ++o) {
            const int at = o * NT + tid;
            int cexp, ckind;
            const int csig = tc_decode32<FmtC>(CB[at], cexp, ckind);
            long long res;
            if ((nan_mask >> o) & 1u) {
                res = NAN_BITS;
            } else if (ckind == 1 || ckind == 2) {
                res = tc_inf_bits<FmtD>(ckind == 2);
            } else {
                const int quantum = ES[at] - F_BITS;
                long long t = (long long)(((unsigned long long)(unsigned)THI[at] << 32) | TLO[at]);
                const unsigned long long cm = tc_shift_mag((unsigned long long)(csig < 0 ? -csig : csig),
                                                           (long long)cexp - FmtC::man_bits - quantum);
                t += csig < 0 ? -(long long)cm : (long long)cm;
                bool ok;
                res = tc_round32<FmtOut>(t, quantum, ok);
                if (!ok)  // subnormal, overflowing or wide results: the general rounding
                    res = tc_round<FmtOut>(t < 0, t < 0 ? -t : t, quantum, ROUNDING, OVERFLOW, false);
            }
            CB[at] = (unsigned)res;
        }
    }
#pragma unroll 1
    for (int o = 0; o < TM * TN; ++o) {
        int m = m0 + tc_row(ty, o / TN), n = n0 + tc_col(tx, o % TN);
        if (m < M && n < N) ACC[(long long)m * N + n] = CB[o * NT + tid];
    }
}
#endif

#if TILED && BUILD_TILED && !SUBGROUP
#define NT (TX * TY)
#define BM (TY * TM)
#define BN (TX * TN)
#define KS (GL * GPS)

// load one operand's stage: magnitudes (shifted left by lshift), exponents, sign masks [KS][R]; per (group, row) flags
template <class T> TC_FN void tc_load_stage(const T* __restrict__ X, long long ldx, const int* __restrict__ TX_,
                                            int shift, int lshift, int r0, int R, int rows, int col0, int k0, int ng,
                                            unsigned* MAG, int* EXP, int* SGN, unsigned* MASK, int* FLAG, int tid
#if SCALED
                                            , const unsigned char* __restrict__ S, const int* __restrict__ TS
#endif
                                            ) {
    for (int p = tid; p < ng * R; p += NT) {
        int gg = p / R, r = p % R;
        int row = r0 + r;
        unsigned mask = 0;
        int zf = 0;
        int c0 = col0 + gg * GL;
#if SCALED
        int scale_shift = row < rows ? TC_LDG(TS + S[(long long)row * (ldx / SCALE_BLOCK) + c0 / SCALE_BLOCK]) : 0;
        if (scale_shift == NAN_SCALE) { zf |= 4; scale_shift = 0; }
#endif
        for (int i = 0; i < GL; ++i) {
            int col = c0 + i;
#if !NATURAL
            int kp = (col - k0) % K_INST;
            col = col - kp + PERM[kp];
#endif
            int w = row < rows ? tc_entry(TX_, X[(long long)row * ldx + col], shift) : (int)(ZERO_EXP & 0xFFFF);
            int sig = w >> 16, e = (int)(short)(w & 0xFFFF);
#if SCALED
            if (e > ZERO_EXP) e += scale_shift;
#endif
            int at = (gg * GL + i) * R + r;
#if FMA_ALIGN == 1
            {  // the FP32 FMA pass reads the signed value x = +-(|sig| << lshift) * 2**e (exact: _cuda_build)
                const unsigned mag = (unsigned)(sig < 0 ? -sig : sig) << lshift;
                const float x = mag ? (float)mag * tc_pow2f(e) : 0.0f;
                MAG[at] = TC_F2U(sig < 0 ? -x : x);
            }
#else
            MAG[at] = (unsigned)(sig < 0 ? -sig : sig) << lshift;
#endif
            EXP[at] = e;
            SGN[at] = sig < 0 ? -1 : 0;
            mask |= (sig < 0 ? 1u : 0u) << i;
            zf |= (e <= ZERO_EXP ? 1 : 0) | (e < ZERO_EXP ? 2 : 0);
        }
        MASK[gg * R + r] = mask;
        FLAG[gg * R + r] = zf;
    }
}

TC_FN int tc_row(int t, int i) { return i < TM / 2 ? t * (TM / 2) + i : BM / 2 + t * (TM / 2) + (i - TM / 2); }
TC_FN int tc_col(int t, int j) { return j < TN / 2 ? t * (TN / 2) + j : BN / 2 + t * (TN / 2) + (j - TN / 2); }

extern "C" __global__ void __launch_bounds__(NT, 1)
gemm_tiled(const A_T* __restrict__ A, long long lda, const B_T* __restrict__ B, long long ldb,
           const int* __restrict__ TA, const int* __restrict__ TB, unsigned* __restrict__ ACC,
           int M, int N, int k0, int k1, int promote, int promote_start
#if SCALED
           , const unsigned char* __restrict__ SA, const unsigned char* __restrict__ SB, const int* __restrict__ TS
#endif
           ) {
#ifdef TC_HOST
    unsigned* tc_smem = tc_host_smem;
#else
    extern __shared__ unsigned tc_smem[];
#endif
    unsigned* AM = tc_smem;
    int* AE = (int*)(AM + KS * BM);
    int* AS = AE + KS * BM;
    unsigned* BMG = (unsigned*)(AS + KS * BM);
    int* BE = (int*)(BMG + KS * BN);
    int* BS = BE + KS * BN;
    unsigned* AMASK = (unsigned*)(BS + KS * BN);
    int* AFLAG = (int*)(AMASK + GPS * BM);
    unsigned* BMASK = (unsigned*)(AFLAG + GPS * BM);
    int* BFLAG = (int*)(BMASK + GPS * BN);
    // per output, [TM * TN][NT]: accumulator bits, E, the group's product sum
    unsigned* CB = (unsigned*)(BFLAG + GPS * BN);
    int* ES = (int*)(CB + TM * TN * NT);
    int* SUM = ES + TM * TN * NT;
    int* SUM_HALF = SUM + TM * TN * NT;  // SPLIT_SUM: the first half of the group's products
    unsigned* CIN = (unsigned*)(SUM_HALF + (SPLIT_SUM ? TM * TN * NT : 0));  // IEEE_ADD: C of each instruction
    unsigned* MAIN = CIN + (IEEE_ADD ? TM * TN * NT : 0);  // PROMOTE: the FP32 main accumulator
    (void)CIN; (void)MAIN;
    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    // promotion: blocks of promote_groups groups from k0, each chained from zero (0: one chain over k0:k1)
    const int promote_groups = PROMOTE ? promote / GL : 0;
    (void)promote_start;
#pragma unroll 1
    for (int o = 0; o < TM * TN; ++o) {
        int m = m0 + tc_row(ty, o / TN), n = n0 + tc_col(tx, o % TN);
        const unsigned in = (m < M && n < N) ? ACC[(long long)m * N + n] : 0u;
        if (promote_groups) { MAIN[o * NT + tid] = in; CB[o * NT + tid] = 0u; }
        else CB[o * NT + tid] = in;
    }
    const int groups = (k1 - k0) / GL;
    for (int gs0 = 0; gs0 < groups; gs0 += GPS) {
        int ng = groups - gs0 < GPS ? groups - gs0 : GPS;
        __syncthreads();
#if SCALED
#define TC_SCALES_A , SA, TS
#define TC_SCALES_B , SB, TS
#else
#define TC_SCALES_A
#define TC_SCALES_B
#endif
        tc_load_stage(A, lda, TA, A_SHIFT, LS_AB, m0, BM, M, k0 + gs0 * GL, k0, ng, AM, AE, AS, AMASK, AFLAG, tid
                      TC_SCALES_A);
        tc_load_stage(B, ldb, TB, B_SHIFT, 0, n0, BN, N, k0 + gs0 * GL, k0, ng, BMG, BE, BS, BMASK, BFLAG, tid
                      TC_SCALES_B);
        __syncthreads();
        for (int gg = 0; gg < ng; ++gg) {
            const int g = gs0 + gg;
            const bool first = g % NG == 0;
            const bool last = g % NG == NG - 1;
            const int kb = gg * GL;
            // group start (once per output): C's exponent, or E_ZERO for a zero C or a zero product
            int E[TM][TN];
            int fbv[TN];
#pragma unroll
            for (int j = 0; j < TN; ++j) fbv[j] = BFLAG[gg * BN + tc_col(tx, j)];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int fa = AFLAG[gg * BM + tc_row(ty, i)];
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    const int at = (i * TN + j) * NT + tid;
                    unsigned bits = CB[at];
#if IEEE_ADD
                    if (first) { CIN[at] = bits; bits = 0u; CB[at] = 0u; }
#endif
                    int cexp, ckind;
                    const int csig = first ? tc_decode32<FmtC>(bits, cexp, ckind) : tc_decode32<FmtD>(bits, cexp, ckind);
                    int e = csig != 0 ? cexp : E_ZERO;
                    if (((fa | fbv[j]) & 1) && e < E_ZERO) e = E_ZERO;
                    E[i][j] = e;
                }
            }
            // pass 1: the maximum exponent over the group's products
#pragma unroll 4
            for (int kk = 0; kk < GL; ++kk) {
                int ea[TM], eb[TN];
#pragma unroll
                for (int i = 0; i < TM; ++i) ea[i] = AE[(kb + kk) * BM + tc_row(ty, i)];
#pragma unroll
                for (int j = 0; j < TN; ++j) eb[j] = BE[(kb + kk) * BN + tc_col(tx, j)];
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) E[i][j] = TC_ADDMAX(ea[i], eb[j], E[i][j]);
            }
#if FMA_ALIGN
            // pass 2, directed-rounding FMA (method: the FPU aligns and truncates).  In grid units 2**G,
            // G = E + RS (clamped to [FMA_LO, FMA_HI], see below), product k of output (i, j) is
            // q = |a|<<LS * |b| * 2**(ea + eb - G) and the unit wants sum_k sign_k * trunc(|q|).  With
            // x = |a|<<LS * 2**ea (exact: FT holds the magnitude's bits and the exponent, _cuda_build checks
            // the ranges), an accumulator P starting at +2**(FMA_P - 1 + G) lies in the binade whose ulp is
            // 2**G; it only grows, and stays below 2**(FMA_P + G) since the products' sum is < 2**(FMA_P - 1)
            // units (checked).  fma_rz(x_a, x_b, P) rounds the exact P + q toward zero = floor onto the
            // grid, which is trunc for q >= 0.  Negative products go into N from -2**(FMA_P - 1 + G): there
            // toward zero is ceil = trunc for q <= 0.  Splitting each operand into its positive and negative
            // part routes every product by sign with no branch (the other pairs add an exact 0).  P + N is
            // exact (both on the grid, |P + N| < 2**(FMA_P - 1 + G)), so (P + N) * 2**-G is the exact sum.
            // Clamping G is harmless: below FMA_LO no product is nonzero (E >= ea + eb of every nonzero
            // product), and from FMA_HI every product truncates to 0 on G's grid and on any coarser one.
            FT accP[TM][TN], accN[TM][TN];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    const int g = min(max(E[i][j] + RS_AB, FMA_LO), FMA_HI);
                    accP[i][j] = TC_POW2(FT, FMA_P - 1 + g);
                    accN[i][j] = -accP[i][j];
                }
#pragma unroll 4
            for (int kk = 0; kk < GL; ++kk) {
                FT ap[TM], an[TM], bp[TN], bn[TN];
#if FMA_ALIGN == 1  // the stage holds the signed FP32 values
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const float x = TC_U2F(AM[(kb + kk) * BM + tc_row(ty, i)]);
                    ap[i] = fmaxf(x, 0.0f); an[i] = fminf(x, 0.0f);
                }
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    const float x = TC_U2F(BMG[(kb + kk) * BN + tc_col(tx, j)]);
                    bp[j] = fmaxf(x, 0.0f); bn[j] = fminf(x, 0.0f);
                }
#else
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const int at = (kb + kk) * BM + tc_row(ty, i);
                    const unsigned m = AM[at];
                    const FT x = m ? (FT)m * TC_POW2(FT, AE[at]) : (FT)0;
                    const bool ng = AS[at] != 0;
                    ap[i] = ng ? (FT)0 : x; an[i] = ng ? -x : (FT)0;
                }
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    const int at = (kb + kk) * BN + tc_col(tx, j);
                    const unsigned m = BMG[at];
                    const FT x = m ? (FT)m * TC_POW2(FT, BE[at]) : (FT)0;
                    const bool ng = BS[at] != 0;
                    bp[j] = ng ? (FT)0 : x; bn[j] = ng ? -x : (FT)0;
                }
#endif
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        accP[i][j] = TC_FMA_RZ(ap[i], bp[j], accP[i][j]);
                        accP[i][j] = TC_FMA_RZ(an[i], bn[j], accP[i][j]);
                        accN[i][j] = TC_FMA_RZ(ap[i], bn[j], accN[i][j]);
                        accN[i][j] = TC_FMA_RZ(an[i], bp[j], accN[i][j]);
                    }
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    const int at = (i * TN + j) * NT + tid;
                    ES[at] = E[i][j];
                    const int g = min(max(E[i][j] + RS_AB, FMA_LO), FMA_HI);
                    SUM[at] = (int)((accP[i][j] + accN[i][j]) * TC_POW2(FT, -g));
                    if (SPLIT_SUM) SUM_HALF[at] = 0;
                }
#else
            // pass 2: truncate every product to F fraction bits below 2**E, sum exactly
            int acc[TM][TN];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) { acc[i][j] = 0; E[i][j] += RS_AB; }
#pragma unroll 4
            for (int kk = 0; kk < GL; ++kk) {
#if SPLIT_SUM
                if (kk == GL / 2) {  // 32 products could overflow int32: keep the first half apart
#pragma unroll
                    for (int i = 0; i < TM; ++i)
#pragma unroll
                        for (int j = 0; j < TN; ++j) { SUM_HALF[(i * TN + j) * NT + tid] = acc[i][j]; acc[i][j] = 0; }
                }
#endif
                unsigned am[TM], bm[TN];
                int ea[TM], eb[TN], as[TM], bs[TN];
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    int at = (kb + kk) * BM + tc_row(ty, i);
                    am[i] = AM[at]; ea[i] = AE[at]; as[i] = AS[at];
                }
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    int at = (kb + kk) * BN + tc_col(tx, j);
                    bm[j] = BMG[at]; eb[j] = BE[at]; bs[j] = BS[at];
                }
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        unsigned t = TC_SHR(am[i] * bm[j], (unsigned)(E[i][j] - ea[i] - eb[j]));
                        acc[i][j] += (int)(t ^ (unsigned)as[i] ^ (unsigned)bs[j]);
                    }
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    ES[(i * TN + j) * NT + tid] = E[i][j] - RS_AB;
                    SUM[(i * TN + j) * NT + tid] = acc[i][j];
                }
#endif
            // once per output: C's term, the negative-product count, one rounding (rows rolled, columns unrolled)
            unsigned mbv[TN];
#pragma unroll
            for (int j = 0; j < TN; ++j) mbv[j] = BMASK[gg * BN + tc_col(tx, j)];
#pragma unroll 1
            for (int i = 0; i < TM; ++i) {
              const int r = tc_row(ty, i);
              const int fa = AFLAG[gg * BM + r];
              const unsigned ma = AMASK[gg * BM + r];
#pragma unroll
              for (int j = 0; j < TN; ++j) {
                const int at = (i * TN + j) * NT + tid;
                const int q = tc_col(tx, j);
                const int fl = fa | fbv[j];
                const unsigned bits = CB[at];
                int cexp, ckind;
                const int csig = first ? tc_decode32<FmtC>(bits, cexp, ckind) : tc_decode32<FmtD>(bits, cexp, ckind);
                const int emax = ES[at];
                long long res;
                if ((fl & 2) || ckind != 0) {
                    int nan = ckind == 3, pos = ckind == 1, neg = ckind == 2;
                    for (int kk = 0; kk < GL; ++kk) {
                        int ata = (kb + kk) * BM + r, atb = (kb + kk) * BN + q;
#if FMA_ALIGN == 1  // only zero / nonzero and the sign matter here
                        int sa = AM[ata] != 0u, sb = BMG[atb] != 0u;
#else
                        int sa = (int)(AM[ata] >> LS_AB), sb = (int)BMG[atb];
#endif
                        tc_special_one(AS[ata] ? -sa : sa, AE[ata], BS[atb] ? -sb : sb, BE[atb], nan, pos, neg);
                    }
                    res = tc_special_result(nan, pos, neg);
                } else {
                    // C's term in 32 bits: |c| << LS < 2**(F+1), shifted right by its distance to E (clamped)
                    const unsigned cm = (unsigned)(csig < 0 ? -csig : csig) << (first ? LS_C : LS_D);
                    const unsigned ct = TC_SHR(cm, (unsigned)(emax - cexp + (first ? RS_C : RS_D)));
                    const long long total = (long long)SUM[at] + (SPLIT_SUM ? (long long)SUM_HALF[at] : 0LL) + (FMA_ALIGN ? 0 : TC_POPC(ma ^ mbv[j])) +
                                            (csig < 0 ? -(long long)ct : (long long)ct);
                    bool ok;
                    res = tc_round32<FmtOut>(total, emax - F_BITS, ok);
                    if (!ok)  // subnormal, overflowing or wide results: the general rounding
                        res = tc_round<FmtOut>(total < 0, total < 0 ? -total : total, (long long)emax - F_BITS, ROUNDING,
                                               OVERFLOW, false);
                }
#if SCALED
                if (fl & 4) res = NAN_BITS;  // a NaN block scale
#endif
#if IEEE_ADD
                if (last) res = tc_ieee_add<FmtD, FmtC, FmtD>(res, (long long)CIN[at], ADD_ROUNDING);
#endif
                CB[at] = (unsigned)res;
              }
            }
            (void)last;
            if (promote_groups && ((g + 1) % promote_groups == 0 || g + 1 == groups)) {  // a promotion block ends
                const bool combine = promote_start || g + 1 > promote_groups;
#pragma unroll 1
                for (int o = 0; o < TM * TN; ++o) {
                    const int at = o * NT + tid;
                    MAIN[at] = (unsigned)tc_promote((long long)MAIN[at], (long long)CB[at], combine);
                    CB[at] = 0u;
                }
            }
        }
    }
    const unsigned* RES = promote_groups ? MAIN : CB;
#pragma unroll 1
    for (int o = 0; o < TM * TN; ++o) {
        int m = m0 + tc_row(ty, o / TN), n = n0 + tc_col(tx, o % TN);
        if (m < M && n < N) ACC[(long long)m * N + n] = RES[o * NT + tid];
    }
}
#endif
"""

# The host build: the same source as plain C++ (CI checks the kernels' logic without a GPU).
HOST_PRELUDE = r"""
#define TC_HOST 1
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#include <algorithm>
#include <limits>
using std::max;
using std::min;
struct tc_dim3 { unsigned x = 0, y = 0, z = 0; };
static thread_local tc_dim3 threadIdx, blockIdx;
static tc_dim3 blockDim, gridDim;
static std::barrier<>* tc_barrier = nullptr;
static unsigned* tc_host_smem = nullptr;
#define TC_FN static inline
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(a, b)
#define __constant__ static const
#define __syncthreads() tc_barrier->arrive_and_wait()
#define extern_shared_smem
static inline unsigned TC_SHR(unsigned x, unsigned d) { return d >= 32 ? 0u : x >> d; }
#define TC_CLZLL(x) ((x) == 0 ? 64 : __builtin_clzll(x))
#define TC_CLZ(x) ((x) == 0 ? 32 : __builtin_clz(x))
#define TC_POPC(x) __builtin_popcount(x)
#define TC_LDG(p) (*(p))
#define TC_ADDMAX(a, b, c) max((a) + (b), (c))
#define TC_NAN std::numeric_limits<double>::quiet_NaN()
#define TC_INF std::numeric_limits<double>::infinity()
#define TC_SIGNBIT(x) std::signbit(x)
#include <cfenv>
// the device's round-toward-zero FMAs, exactly: the host FMA (correctly rounded in every IEEE mode;
// the build passes -frounding-math) under this thread's rounding mode set to toward zero
template <class T> static inline T tc_fma_rz_host(T a, T b, T c) {
    std::fesetround(FE_TOWARDZERO);
    volatile T r = std::fma(a, b, c);
    std::fesetround(FE_TONEAREST);
    return r;
}
#define TC_FMA_RZ(a, b, c) tc_fma_rz_host((a), (b), (c))
static inline float tc_pow2f(int e) { return std::ldexp(1.0f, e); }
static inline double tc_pow2d(int e) { return std::ldexp(1.0, e); }
#include <bit>
#define TC_F2U(x) std::bit_cast<unsigned>((float)(x))
#define TC_U2F(x) std::bit_cast<float>((unsigned)(x))
"""

# extern "C" entry points of the host build: run a kernel's grid with CUDA's semantics
HOST_LAUNCHER = r"""
#if SCALED || SUBGROUP
#define HOST_SCALE_ARGS , const unsigned char* sa, const unsigned char* sb, const int* ts
#define HOST_SCALE_PASS , sa, sb, ts
#else
#define HOST_SCALE_ARGS , const unsigned char*, const unsigned char*, const int*
#define HOST_SCALE_PASS
#endif
extern "C" void host_dot(const void* a, const void* b, const void* c, void* d, const int* ta, const int* tb,
                         long long n, int k HOST_SCALE_ARGS) {
    blockDim.x = 64;
    for (long long blk = 0; blk * 64 < n; ++blk)
        for (unsigned t = 0; t < 64; ++t) {
            blockIdx.x = (unsigned)blk; threadIdx.x = t;
            dot_kernel((const A_T*)a, (const B_T*)b, (const C_T*)c, (D_T*)d, ta, tb, n, k HOST_SCALE_PASS);
        }
}
extern "C" void host_gemm_scalar(const void* a, long long lda, const void* b, long long ldb, const int* ta,
                                 const int* tb, unsigned* acc, int M, int N, int k0, int k1, int promote,
                                 int promote_start HOST_SCALE_ARGS) {
    blockDim.x = 64;
    long long total = (long long)M * N;
    for (long long blk = 0; blk * 64 < total; ++blk)
        for (unsigned t = 0; t < 64; ++t) {
            blockIdx.x = (unsigned)blk; threadIdx.x = t;
            gemm_scalar((const A_T*)a, lda, (const B_T*)b, ldb, ta, tb, acc, M, N, k0, k1, promote, promote_start
                        HOST_SCALE_PASS);
        }
}
#if TILED
extern "C" int host_gemm_tiled(const void* a, long long lda, const void* b, long long ldb, const int* ta,
                               const int* tb, unsigned* acc, int M, int N, int k0, int k1, int promote,
                               int promote_start, long long smem_words HOST_SCALE_ARGS) {
    std::vector<unsigned> smem((size_t)smem_words);
    blockDim.x = NT;
    for (unsigned by = 0; by * BM < (unsigned)M; ++by)
        for (unsigned bx = 0; bx * BN < (unsigned)N; ++bx) {
            std::barrier<> bar(NT);
            tc_barrier = &bar;
            tc_host_smem = smem.data();
            std::vector<std::thread> threads;
            for (unsigned t = 0; t < NT; ++t)
                threads.emplace_back([=] {
                    blockIdx.x = bx; blockIdx.y = by; threadIdx.x = t;
                    gemm_tiled((const A_T*)a, lda, (const B_T*)b, ldb, ta, tb, acc, M, N, k0, k1, promote, promote_start
                               HOST_SCALE_PASS);
                });
            for (auto& th : threads) th.join();
        }
    return 0;
}
#endif
"""

# FP32 FFMA chains (cuBLAS's SIMT / xmma FP32 kernels, one split-K slice): one thread per output, acc = fma(a, b, acc)
# over the given K columns in order from +0.  __fmaf_ieee_rn is IEEE RNE with subnormals whatever -ftz says.
FFMA_SOURCE = r"""
#ifdef TC_HOST
#define TC_FMA_IEEE(a, b, c) std::fma((a), (b), (c))
#else
#define TC_FMA_IEEE(a, b, c) __fmaf_ieee_rn((a), (b), (c))
#endif
extern "C" __global__ void ffma_chain(const float* __restrict__ A, long long lda, const float* __restrict__ BT,
                                      long long ldb, const long long* __restrict__ COLS, int ncols,
                                      float* __restrict__ OUT, int M, int N) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)M * N) return;
    const long long m = idx / N, n = idx % N;
    float acc = 0.0f;
    for (int t = 0; t < ncols; ++t) {
        const long long k = COLS[t];
        acc = TC_FMA_IEEE(A[m * lda + k], BT[n * ldb + k], acc);
    }
    OUT[idx] = acc;
}
"""

FFMA_HOST_LAUNCHER = r"""
extern "C" void host_ffma_chain(const float* a, long long lda, const float* bt, long long ldb, const long long* cols,
                                int ncols, float* out, int M, int N) {
    blockDim.x = 64;
    const long long total = (long long)M * N;
    for (long long blk = 0; blk * 64 < total; ++blk)
        for (unsigned t = 0; t < 64; ++t) {
            blockIdx.x = (unsigned)blk; threadIdx.x = t;
            ffma_chain(a, lda, bt, ldb, cols, ncols, out, M, N);
        }
}
"""
