"""CUDA C++ source of the tiled GEMM for fused units (private, part of ``_cuda_source.KERNEL_SOURCE``, compiled
only under ``TILED && BUILD_TILED && !SUBGROUP``).

Per group: the stage load, pass 1 (the group exponent E: CUDA-core add-max, or ``EXP_MMA``: a BF16 power sum on
the tensor core), pass 2 (the truncated products' exact sum: integer multiply / shift / one's complement, or
``FMA_ALIGN``: directed-rounding FMAs on two sign-anchored accumulators), then C's term and one rounding per
output.  Each variant's exactness argument is in the comment above its code.
"""

from __future__ import annotations

__all__ = ["FUSED_TILED_SOURCE"]

FUSED_TILED_SOURCE = r"""
#if TILED && BUILD_TILED && !SUBGROUP
#define NT (TX * TY)
#define BM (TY * TM)
#define BN (TX * TN)
#define KS (GL * GPS)

// load one operand's stage: magnitudes (shifted left by lshift), exponents, sign masks [KS][R]; per (group, row) flags
template <class T> TC_FN void tc_load_stage(const T* __restrict__ X, long long ldx, const int* __restrict__ TX_,
                                            int shift, int lshift, int r0, int R, int rows, int col0, int k0, int ng,
                                            unsigned* MAG, int* EXP, int* SGN, unsigned* MASK, int* FLAG, int tid
#if EXP_MMA
                                            , unsigned* XP, int xbias
#endif
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
#if EXP_MMA
        unsigned xpair = 0;
#endif
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
                const float x = mag ? TC_NORMAL32((float)mag * tc_pow2f(e)) : 0.0f;
                MAG[2 * at] = TC_F2U(sig < 0 ? 0.0f : x);  // its positive part, then its negative part
                MAG[2 * at + 1] = TC_F2U(sig < 0 ? -x : 0.0f);
            }
#else
            MAG[at] = (unsigned)(sig < 0 ? -sig : sig) << lshift;
#endif
            EXP[at] = e;
            SGN[at] = sig < 0 ? -1 : 0;
            mask |= (sig < 0 ? 1u : 0u) << i;
            zf |= (e <= ZERO_EXP ? 1 : 0) | (e < ZERO_EXP ? 2 : 0);
#if EXP_MMA  // 2**(MMA_M * (e - xbias)) as BF16 bits (0 for e <= ZERO_EXP), two K neighbours per word, low first
            const unsigned xp = e > ZERO_EXP ? (unsigned)(MMA_M * (e - xbias) + 127) << 7 : 0u;
            if (i & 1) XP[((gg * GL + i) >> 1) * (R + 8) + r] = xpair | xp << 16;
            else xpair = xp;
#endif
        }
        MASK[gg * R + r] = mask;
        FLAG[gg * R + r] = zf;
    }
}

#if EXP_MMA
// outputs follow the mma's accumulator fragments (t: the thread index): 8 warps as 2 x 4 warp tiles of 32 x 16,
// each two m16 x two n8 mma tiles; row i: m-tile i / 2, fragment row g + 8 (i % 2); column j: n-tile j / 2,
// fragment column 2 t4 + j % 2 (g = lane / 4, t4 = lane % 4).  _cuda_build.exp_mma requires this 16 x 16 x 4 x 4 tile.
TC_FN int tc_row(int t, int i) { return ((t >> 5) & 1) * 32 + (i >> 1) * 16 + (i & 1) * 8 + ((t & 31) >> 2); }
TC_FN int tc_col(int t, int j) { return (t >> 6) * 16 + (j >> 1) * 8 + 2 * (t & 3) + (j & 1); }
#else
TC_FN int tc_row(int t, int i) { return i < TM / 2 ? t * (TM / 2) + i : BM / 2 + t * (TM / 2) + (i - TM / 2); }
TC_FN int tc_col(int t, int j) { return j < TN / 2 ? t * (TN / 2) + j : BN / 2 + t * (TN / 2) + (j - TN / 2); }
#endif

#if FMA_ALIGN == 2
// the FP64 FMA pass's operand at stage index at: its value x = mag * 2**exp (exact in FP64: _cuda_build checks the
// ranges) as a positive and a negative part, one of them 0, so that pass 2 routes each product by sign with no branch
// (FMA_ALIGN == 1 stages the FP32 parts themselves: tc_load_stage)
TC_FN void tc_parts(const unsigned* MAG, const int* EXP, const int* SGN, int at, FT& p, FT& n) {
    const unsigned m = MAG[at];
    const FT x = m ? (FT)m * TC_POW2(FT, EXP[at]) : (FT)0;
    const bool ng = SGN[at] != 0;
    p = ng ? (FT)0 : x;
    n = ng ? -x : (FT)0;
}
#endif

#if FAST_END
// The group's end in FP32 for FP32 C/D and an FP32-cut output rounded toward zero (_cuda_build.fast_end says when):
// s = P + N is the truncated products' exact sum in FMA units, whose grid is 2**g, g = emax + RS_AB (unclamped here);
// a value v is v * 2**(RS_AB + F_BITS) in those units.  C's term: cs = c in FMA units (exact: a power-of-two scaling,
// |cs| < 2**(g + F_BITS + 1), normal or subnormal, no overflow below FMA_HI), truncated toward zero onto the grid by
// adding a same-signed anchor 2**(g + 23) under round-toward-zero (cs + anchor lies in the binade whose ulp is 2**g,
// as F_BITS <= 22) and subtracting it again (exact).  The total s + ct is a multiple of 2**g below 2**(g + 24) (the
// build checks the group's bound), so the FP32 addition is exact, and so is its scaling back to a value unless the
// result is subnormal (the general end then) or reaches 2**128 (inf: the unit's overflow).  Rounding toward zero to
// FmtOut's significand is clearing the low bits of the magnitude; a zero total is +0.  False: use the general end.
// CuPy compiles every kernel with -ftz=true (FP32 subnormals read and written as zero), so no FP32 operation here
// may see or make one: a subnormal C takes the general end, 2**g is normal (so is every nonzero multiple of it), and
// a subnormal (flushed) result has a zero exponent field, which sends it to the general end too.
TC_FN bool tc_fast_end(unsigned c_bits, int emax, int flags, float s, unsigned& out) {
    const int g = emax + RS_AB;
    const unsigned c_exp = c_bits & 0x7F800000u;
    if ((flags & 2) || c_exp == 0x7F800000u || (c_exp == 0u && (c_bits & 0x007FFFFFu) != 0u) || g < FMA_LO ||
        g > FMA_HI || g < -126) return false;
    const float cs = TC_NORMAL32(TC_NORMAL32(TC_U2F(c_bits)) * tc_pow2f(RS_AB + F_BITS));
    const float anchor = TC_U2F((c_bits & 0x80000000u) | TC_F2U(tc_pow2f(g + 23)));
    const float ct = TC_NORMAL32(TC_NORMAL32(TC_FADD_RZ(cs, anchor)) - anchor);
    const float total = TC_NORMAL32(TC_NORMAL32(s) + ct);
    if (total == 0.0f) { out = 0u; return true; }
    const unsigned r = TC_F2U(total * tc_pow2f(-(RS_AB + F_BITS)));  // subnormal (host) or flushed (device): below
    if ((r & 0x7F800000u) == 0u) return false;
    out = (r & 0x7F800000u) == 0x7F800000u ? r : r & ~((1u << (23 - FmtOut::man_bits)) - 1u);
    return true;
}
#endif

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
    // MAGW words per staged operand: FMA_ALIGN == 1 keeps each value's positive and negative part side by side
    int* AE = (int*)(AM + MAGW * KS * BM);
    int* AS = AE + KS * BM;
    unsigned* BMG = (unsigned*)(AS + KS * BM);
    int* BE = (int*)(BMG + MAGW * KS * BN);
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
#if EXP_MMA
    // EXP_MMA: each operand's powers 2**(m (e - bias)), [KS / 2][rows + 8] words of two BF16 (K pairs)
    unsigned* XA = MAIN + (PROMOTE ? TM * TN * NT : 0);
    unsigned* XB = XA + (KS / 2) * (BM + 8);
    const int tx = tid, ty = tid;  // tc_row / tc_col take the thread index
#else
    const int tx = tid % TX, ty = tid / TX;
#endif
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
#if EXP_MMA
#define TC_POWERS_A , XA, XBIAS_A
#define TC_POWERS_B , XB, XBIAS_B
#else
#define TC_POWERS_A
#define TC_POWERS_B
#endif
        tc_load_stage(A, lda, TA, A_SHIFT, LS_AB, m0, BM, M, k0 + gs0 * GL, k0, ng, AM, AE, AS, AMASK, AFLAG, tid
                      TC_POWERS_A TC_SCALES_A);
        tc_load_stage(B, ldb, TB, B_SHIFT, 0, n0, BN, N, k0 + gs0 * GL, k0, ng, BMG, BE, BS, BMASK, BFLAG, tid
                      TC_POWERS_B TC_SCALES_B);
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
#if EXP_MMA
            // pass 1 on the tensor core (power sum).  Each nonzero operand entered the stage as x = 2**(m (e - bias))
            // in BF16 (zeros and specials, e <= ZERO_EXP, as 0); the group's products are then the powers
            // 2**(m s), s = ea + eb - XBIAS_A - XBIAS_B, of the nonzero products (exact: the build keeps every x a
            // normal BF16 and every 2**(m s) a normal FP32).  The BF16 mma (L = 16, F = 25, FP32 RZ: NUMERICS) sums
            // them from a zero accumulator, the second k16 half of a 32-group onto the first.  With S the result
            // and s* the largest s: the term 2**(m s*) is the group's largest, so it is never truncated (it sets the
            // alignment, or a C term of the same binade and larger value does, which is then at least 2**(m s*)),
            // and every other term is >= 0 and only truncated or rounded toward zero, so S >= 2**(m s*); and
            // S <= the exact sum <= GL 2**(m s*) < 2**(m (s* + 1)) as GL < 2**m.  So floor(log2(S) / m) = s* and
            // E = max(E, s* + XBIAS_A + XBIAS_B) is the CUDA-core pass's max(ea + eb, E) over the nonzero products
            // (zero products never win that max: their ea + eb is below -16000, E starts >= E_ZERO or C's exponent).
            // S = 0: no nonzero product.  The host build runs the same code with the mma emulated on the unit model.
            {
                float S[2][2][4];
#pragma unroll
                for (int u = 0; u < 16; ++u) S[u >> 3][(u >> 2) & 1][u & 3] = 0.0f;
                const int lane = tid & 31, fg = lane >> 2, ft = lane & 3;
                const int r0 = ((tid >> 5) & 1) * 32 + fg, q0 = (tid >> 6) * 16 + fg;
#pragma unroll
                for (int h = 0; h < GL / 16; ++h) {
                    const int kp = (kb >> 1) + 8 * h + ft;  // this lane's K pairs: kp and kp + 4
                    unsigned fa[2][4], fb[2][2];
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt) {
                        fa[mt][0] = XA[kp * (BM + 8) + r0 + 16 * mt];
                        fa[mt][1] = XA[kp * (BM + 8) + r0 + 16 * mt + 8];
                        fa[mt][2] = XA[(kp + 4) * (BM + 8) + r0 + 16 * mt];
                        fa[mt][3] = XA[(kp + 4) * (BM + 8) + r0 + 16 * mt + 8];
                    }
#pragma unroll
                    for (int nt = 0; nt < 2; ++nt) {
                        fb[nt][0] = XB[kp * (BN + 8) + q0 + 8 * nt];
                        fb[nt][1] = XB[(kp + 4) * (BN + 8) + q0 + 8 * nt];
                    }
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                        for (int nt = 0; nt < 2; ++nt) tc_mma_bf16(S[mt][nt], fa[mt], fb[nt]);
                }
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        const unsigned sb = TC_F2U(S[i >> 1][j >> 1][(i & 1) * 2 + (j & 1)]);
                        // floor((biased exponent - 127) / m), the dividend made non-negative first
                        const int sx = (int)(sb >> 23) - 127 + 64 * MMA_M;
                        const int es = sx / MMA_M - 64 + XBIAS_A + XBIAS_B;
                        if (sb != 0u && es > E[i][j]) E[i][j] = es;
                    }
            }
#else
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
#endif
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
#if FMA_ALIGN == 1  // the stage holds each value's positive and negative part: one 64-bit load each
#pragma unroll
                for (int i = 0; i < TM; ++i) TC_LDS2(AM + 2 * ((kb + kk) * BM + tc_row(ty, i)), ap[i], an[i]);
#pragma unroll
                for (int j = 0; j < TN; ++j) TC_LDS2(BMG + 2 * ((kb + kk) * BN + tc_col(tx, j)), bp[j], bn[j]);
#else
#pragma unroll
                for (int i = 0; i < TM; ++i) tc_parts(AM, AE, AS, (kb + kk) * BM + tc_row(ty, i), ap[i], an[i]);
#pragma unroll
                for (int j = 0; j < TN; ++j) tc_parts(BMG, BE, BS, (kb + kk) * BN + tc_col(tx, j), bp[j], bn[j]);
#endif
#if ROW_BRANCH
                // a warp is one thread row (TX == 32): a's sign is the same in every lane, so a branch on it routes
                // each product with two FMAs and no divergence -- a < 0: a * bn >= 0 into P, a * bp <= 0 into N;
                // a >= 0 the other way (a = 0 adds exact zeros)
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    if (an[i] != (FT)0) {
#pragma unroll
                        for (int j = 0; j < TN; ++j) {
                            accP[i][j] = TC_FMA_RZ(an[i], bn[j], accP[i][j]);
                            accN[i][j] = TC_FMA_RZ(an[i], bp[j], accN[i][j]);
                        }
                    } else {
#pragma unroll
                        for (int j = 0; j < TN; ++j) {
                            accP[i][j] = TC_FMA_RZ(ap[i], bp[j], accP[i][j]);
                            accN[i][j] = TC_FMA_RZ(ap[i], bn[j], accN[i][j]);
                        }
                    }
                }
#else
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        accP[i][j] = TC_FMA_RZ(ap[i], bp[j], accP[i][j]);
                        accP[i][j] = TC_FMA_RZ(an[i], bn[j], accP[i][j]);
                        accN[i][j] = TC_FMA_RZ(ap[i], bn[j], accN[i][j]);
                        accN[i][j] = TC_FMA_RZ(an[i], bp[j], accN[i][j]);
                    }
#endif
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    const int at = (i * TN + j) * NT + tid;
                    ES[at] = E[i][j];
#if FAST_END  // the exact sum P + N itself (grid units 2**g): the group's end works on it in FP32
                    SUM[at] = (int)TC_F2U(TC_NORMAL32(accP[i][j] + accN[i][j]));
#else
                    const int g = min(max(E[i][j] + RS_AB, FMA_LO), FMA_HI);
                    SUM[at] = (int)TC_NORMAL32(TC_NORMAL32(accP[i][j] + accN[i][j]) * TC_POW2(FT, -g));
#endif
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
                const int emax = ES[at];
                long long res;
#if FAST_END
                unsigned fast_bits;
                if (tc_fast_end(bits, emax, fl, TC_U2F((unsigned)SUM[at]), fast_bits)) {
                    CB[at] = fast_bits;
                    continue;
                }
                {  // the general end: the sum in grid units, as the integer pass keeps it
                    const int g = min(max(emax + RS_AB, FMA_LO), FMA_HI);
                    SUM[at] = (int)TC_NORMAL32(TC_U2F((unsigned)SUM[at]) * TC_POW2(FT, -g));
                }
#endif
                int cexp, ckind;
                const int csig = first ? tc_decode32<FmtC>(bits, cexp, ckind) : tc_decode32<FmtD>(bits, cexp, ckind);
                if ((fl & 2) || ckind != 0) {
                    int nan = ckind == 3, pos = ckind == 1, neg = ckind == 2;
                    for (int kk = 0; kk < GL; ++kk) {
                        int ata = (kb + kk) * BM + r, atb = (kb + kk) * BN + q;
#if FMA_ALIGN == 1  // only zero / nonzero and the sign matter here
                        int sa = (AM[2 * ata] | AM[2 * ata + 1]) != 0u, sb = (BMG[2 * atb] | BMG[2 * atb + 1]) != 0u;
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
