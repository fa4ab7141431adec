"""CUDA C++ source of the tiled GEMM for sub-group scaled units (NVFP4 / MXFP4 k64; private, part of
``_cuda_source.KERNEL_SOURCE``, compiled only under ``TILED && BUILD_TILED && SUBGROUP``).

Its method is in ``_cuda_source``'s docstring and the kernel's opening comment.
"""

from __future__ import annotations

__all__ = ["SUBGROUP_TILED_SOURCE"]

SUBGROUP_TILED_SOURCE = r"""
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

"""
