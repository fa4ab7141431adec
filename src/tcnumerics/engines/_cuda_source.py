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
  Variants of the same kernel, chosen per unit by ``_cuda_build`` (same bits; each argued in its comment):
  ``FMA_ALIGN`` -- pass 2 as directed-rounding FMAs on two sign-anchored accumulators (FP32: the stage holds each
  value's positive and negative part side by side); ``EXP_MMA`` -- pass 1 as a BF16 power sum on the tensor core
  (``mma.sync`` m16n8k16; the host build emulates it for the whole warp on the measured unit model).
* ``gemm_tiled`` for sub-group scaled units (``SUBGROUP``: NVFP4 / MXFP4 k64) -- the same tiling
  with the bits of ``tc_subgroup_one`` (kept as the readable per-output form): operands staged as
  small integers (value / 2**(EMIN - MAN)), each sub-group's SUBG products summed exactly with
  32-bit multiply-adds, scaled by the two scale significands (int32), aligned on E - F into an int64
  total; C's term, NaN / infinity and the single rounding once per output per group.

Files: this one holds the shared device functions (decode, rounding, specials, the per-vector chain);
``_cuda_scalar_source`` the per-vector / per-output kernels and the FP32 FFMA chain; ``_cuda_tiled_source`` the fused tiled GEMM, ``_cuda_subgroup_source`` the
sub-group scaled tiled GEMM, ``_cuda_fchain_source`` the register-resident chain GEMM of the FP8 chains, ``_cuda_tcalign_source`` the chain
GEMM with the tensor core as the aligner, ``_cuda_native_source`` the chain of a unit that is the GPU's own mma,
``_cuda_host_source`` the host shim and launchers.  ``KERNEL_SOURCE`` is their
concatenation, one text for both compilers.
"""

from __future__ import annotations

from ._cuda_fchain_source import FCHAIN_SOURCE
from ._cuda_host_source import (FCHAIN_HOST_LAUNCHER, FFMA_HOST_LAUNCHER, HOST_LAUNCHER, HOST_PRELUDE,
                                TCALIGN_HOST_LAUNCHER)
from ._cuda_subgroup_source import SUBGROUP_TILED_SOURCE
from ._cuda_native_source import NATIVE_SOURCE
from ._cuda_scalar_source import FFMA_SOURCE, SCALAR_SOURCE
from ._cuda_tcalign_source import TCALIGN_SOURCE
from ._cuda_tiled_source import FUSED_TILED_SOURCE

__all__ = ["KERNEL_SOURCE", "HOST_PRELUDE", "HOST_LAUNCHER", "FCHAIN_HOST_LAUNCHER", "TCALIGN_HOST_LAUNCHER", "FFMA_SOURCE",
           "FFMA_HOST_LAUNCHER"]

COMMON_SOURCE = r"""
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
#define TC_ADDMAX2(a, b, c) __viaddmax_s16x2((a), (b), (c))  // per signed 16-bit half: max(a + b, c)
#define TC_NAN __longlong_as_double(0x7FF8000000000000LL)
#define TC_INF __longlong_as_double(0x7FF0000000000000LL)
#define TC_SIGNBIT(x) (__double_as_longlong(x) < 0)
// 2**e as a normal float / double built from its bits (callers keep e in the normal range)
__device__ __forceinline__ float tc_pow2f(int e) { return __int_as_float((e + 127) << 23); }
__device__ __forceinline__ double tc_pow2d(int e) { return __longlong_as_double((long long)(e + 1023) << 52); }
#define TC_FADD_RZ(a, b) __fadd_rz((a), (b))
#define TC_NORMAL32(x) (x)  // the host build checks that an FP32 value is not subnormal (the device flushes it)
#define TC_F2U(x) __float_as_uint(x)
#define TC_U2F(x) __uint_as_float(x)
// two FP32 words from shared memory in one 64-bit load (p 8-byte aligned)
#define TC_LDS2(p, lo, hi) do { const float2 v_ = *reinterpret_cast<const float2*>(p); (lo) = v_.x; (hi) = v_.y; } while (0)
#endif
#ifndef FMA_ALIGN
#define FMA_ALIGN 0
#endif
#ifndef EXP_MMA
#define EXP_MMA 0
#endif
#ifndef FAST_END
#define FAST_END 0
#endif
// the FMA pass's sign routing by a branch: only where a warp is one thread row (otherwise it would diverge)
#define ROW_BRANCH (FMA_ALIGN != 0 && TX == 32 && !EXP_MMA)
#ifndef TCALIGN
#define TCALIGN 0
#endif
#if (EXP_MMA || TCALIGN) && !defined(TC_HOST)
// D += A * B on the tensor core, m16n8k16, BF16 operands, FP32 accumulator (fragments as the PTX ISA lays them out:
// a[0..3] rows g, g+8 x k pairs t, t+4; b[0..1] k pairs t, t+4 x column g; d rows g, g+8 x columns 2t, 2t+1)
__device__ __forceinline__ void tc_mma_bf16(float* d, const unsigned* a, const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
#if FMA_ALIGN == 1
#define MAGW 2
typedef float FT;
#define TC_POW2(T, e) tc_pow2f(e)
#ifndef TC_HOST
#define TC_FMA_RZ(a, b, c) __fmaf_ieee_rz((a), (b), (c))  // IEEE subnormals whatever -ftz says (CuPy sets it)
#endif
#else
#define MAGW 1
#endif
#if FMA_ALIGN == 2
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
#define BUILD_FCHAIN 1
#define BUILD_TCALIGN 1
#define BUILD_NATIVE 1
#endif
#ifndef FCHAIN
#define FCHAIN 0
#endif
#ifndef TCALIGN
#define TCALIGN 0
#endif
#ifndef NATIVE
#define NATIVE 0
#endif

"""

# one text, byte for byte as when it was one string (each piece opens with the line break after its r""")
KERNEL_SOURCE = (COMMON_SOURCE + SCALAR_SOURCE[1:] + SUBGROUP_TILED_SOURCE[1:] + FUSED_TILED_SOURCE[1:]
                 + FCHAIN_SOURCE[1:] + TCALIGN_SOURCE[1:] + NATIVE_SOURCE[1:])
