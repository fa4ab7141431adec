"""CUDA C++ source of ``gemm_tcalign``: the fused-group chain with the GPU's own tensor core as the aligner (private,
part of ``_cuda_source.KERNEL_SOURCE``, compiled only under ``BUILD_TCALIGN``; ``_cuda_tcalign_build`` says which
plans it runs and ``_cuda_launch`` runs it only on a GPU whose ``mma.sync`` passed the self-test there).

Method.  The host instruction is ``mma.sync`` m16n8k16 with BF16 operands and an FP32 accumulator, whose numerics
are measured (NUMERICS.md, Hopper and Ampere-class units: products exact, C one more term, every term truncated toward
zero to 25 fraction bits below the largest term exponent, the exact sum rounded toward zero to FP32).  The emulated
unit (groups of GL products with F <= 16 fraction bits, FP32 C and an FP32 result cut toward zero) is the same
operation on a coarser grid, 2**(E - F) with E = max(C's exponent, every product's exponent).  Per group and output:

1. E on the tensor core (the tiled kernel's ``EXP_MMA`` argument): operands enter as powers 2**(m (e - bias)) in
   BF16, the mma sums the products' powers, floor(exponent / m) is the largest product exponent (m: the least with
   2**m above the terms of one sum -- the group, or 16 or 8 products summed apart where the exponents span more).
2. The products on the tensor core, aligned by it: an mma whose largest term has exponent A = E + 25 - F truncates
   every other term onto exactly the unit's grid 2**(E - F).  The output's anchor term is +2**A in the mma's C; its
   cancelling -2**A is a product -- A's first eight K columns hold each output's -2**A(row, n) at column n and B's
   first eight rows are the identity, so the per-output anchor costs no rank-one structure --, and the last eight K
   columns hold eight of the group's products.  The anchors cancel exactly, the eight products are truncated onto the
   grid, and their exact sum (below 2**(E + 5): 8 terms under 2**(E + 2)) is a multiple of 2**(E - F) with at most
   F + 5 <= 21 significant bits: the FP32 result is exact.  GL / 8 such mmas cover the group.
3. C's term, truncated onto the same grid by adding a same-signed 2**(E - F + 23) toward zero and subtracting it
   (exact: |C| < 2**(E + 1) keeps the sum in the binade whose ulp is the grid, as F <= 22), plus the mmas' sums:
   every partial sum is a multiple of the grid below 2**(E + 8), so FP32 adds them exactly; cut toward zero to the
   output's significand (a mask) it is the unit's result.

The wide form (``TA_WIDE``, BF16 operands): the values enter the mma as they are (a K pair a 32-bit load), and E
comes from the CUDA cores -- max over the group of ea + eb, two columns an instruction (``TC_ADDMAX2``) -- since
BF16's exponents span more than a power sum holds.  What the one-byte form's build proves for every code, the wide
form checks per group: a product exponent above EMAX, a grid 2**(E - F) below 2**-126 or a subnormal operand marks
the block for the slow path; steps 2 and 3 and their argument are unchanged (a product is below 2**(E + 2) and F <=
16 keeps the anchor 9 or more binades above it).

Every value computed is normal or zero for a normal C (results are multiples of 2**(E - F), E >= the least
product exponent, which the build checks).  A special operand (NaN), a C outside [2**-126, 2**(EMAX + 1)) or a
result that large marks the block; the block then recomputes its outputs from the original C with the per-output
chain (``chain_one``), the same bits as every other path.
"""

from __future__ import annotations

__all__ = ["TCALIGN_SOURCE"]

TCALIGN_SOURCE = r"""
#if BUILD_TCALIGN && TCALIGN
#define TA_NT 256               // 8 warps: 2 (rows) x 4 (columns) warp tiles of 32 x 32
#define TA_BM 64
#define TA_BN 128
#define TA_KP (GL / 2)          // K pairs of a group: one word of two BF16 each
#if TA_WIDE
#define TA_CPW 2                // codes a 32-bit load: two BF16 codes, one K pair
#else
#define TA_CPW 4                // four one-byte codes
#endif
#define TA_SA (TA_BM + 8)       // words per K pair of the A stage (= 8 mod 32: fragment loads without conflicts)
#define TA_SB (TA_BN + 8)

#ifdef TC_HOST
static std::atomic<int> tc_tcalign_slow_blocks{0};  // blocks that took the slow path (the host build's tests count them)
#define TA_SYNC_OR(x) tc_sync_or(x)
#else
#define TA_SYNC_OR(x) __syncthreads_or(x)
#endif

TC_FN int ta_col(int col, int k0) {  // the K column a group's position reads (the unit's K order)
#if !NATURAL
    const int kp = (col - k0) % K_INST;
    col = col - kp + PERM[kp];
#endif
    (void)k0;
    return col;
}

// the low halves of x and y as one word (selector 0x5410), or their high halves (0x7632): __byte_perm
TC_FN unsigned ta_prmt(unsigned x, unsigned y, unsigned sel) {
#ifdef TC_HOST
    return sel == 0x5410u ? (x & 0xFFFFu) | y << 16 : x >> 16 | (y & 0xFFFF0000u);
#else
    return __byte_perm(x, y, sel);
#endif
}

#if !TA_WIDE
// one code's stage word: its value as BF16 (exact: the build checks every code; NaN for a special) in the low half,
// 2**(m (e - bias)) as BF16 (0 for a zero or a special) in the high half
TC_FN unsigned ta_entry(int packed, int man, int xbias) {
    const int sig = packed >> 16, e = (int)(short)(packed & 0xFFFF);
    if (e < ZERO_EXP) return 0x7FC0u;
    if (e == ZERO_EXP || sig == 0) return 0u;
    const float v = (float)sig * tc_pow2f(e - man);
    const unsigned power = (unsigned)(MMA_M * (e - xbias) + 127) << 7;
    return (TC_F2U(v) >> 16) | power << 16;
}

// four consecutive codes (a little-endian word): their values into two K pairs of V, their powers of P
TC_FN void ta_stage4(unsigned v, const unsigned* T, unsigned* V, unsigned* P, int stride) {
    const unsigned t0 = T[v & 0xFFu], t1 = T[(v >> 8) & 0xFFu], t2 = T[(v >> 16) & 0xFFu], t3 = T[v >> 24];
    V[0] = ta_prmt(t0, t1, 0x5410u);
    P[0] = ta_prmt(t0, t1, 0x7632u);
    V[stride] = ta_prmt(t2, t3, 0x5410u);
    P[stride] = ta_prmt(t2, t3, 0x7632u);
}

#else
// a BF16 code's exponent for pass 1: ZERO_EXP for a zero, field - 127 else (a subnormal -- -127 here -- marks `odd`:
// the block takes the slow path)
TC_FN unsigned ta_exp16(unsigned code, bool& odd) {
    const int f = (int)((code >> 7) & 0xFFu);
    odd |= f == 0 && (code & 0x7Fu) != 0u;
    return (unsigned)(((code & 0x7FFFu) == 0u ? ZERO_EXP : f - 127) & 0xFFFF);
}

// one K pair word of two BF16 codes: the values as they are (V), each code's exponent into X's K rows 2 kp, 2 kp + 1
// -- in both 16-bit halves for A (dup 0x10001: a row's exponent meets a pair of columns), the low half for B
TC_FN void ta_stage_word(unsigned w, unsigned* V, unsigned* X, int stride, unsigned dup, bool& odd) {
    V[0] = w;
    X[0] = ta_exp16(w & 0xFFFFu, odd) * dup;
    X[stride] = ta_exp16(w >> 16, odd) * dup;
}
#endif

// a group's codes from K column kb, TA_CPW a 32-bit load: this thread's TA_QA words of A's rows and TA_QB of B's
// (slot = tid + i * TA_NT: row slot % rows, K quad slot / rows -- rows fastest, as the stage stores them)
#define TA_QA (TA_BM * GL / TA_CPW / TA_NT)
#define TA_QB (TA_BN * GL / TA_CPW / TA_NT)
TC_FN void ta_fetch(const A_T* A, long long lda, const B_T* B, long long ldb, int M, int N, int m0, int n0, int kb,
                    int tid, unsigned (&qa)[TA_QA], unsigned (&qb)[TA_QB]) {
#pragma unroll
    for (int i = 0; i < TA_QA; ++i) {
        const int slot = tid + i * TA_NT, m = m0 + slot % TA_BM;
        qa[i] = m < M ? TC_LDG((const unsigned*)(A + (long long)m * lda + kb + TA_CPW * (slot / TA_BM))) : 0u;
    }
#pragma unroll
    for (int i = 0; i < TA_QB; ++i) {
        const int slot = tid + i * TA_NT, n = n0 + slot % TA_BN;
        qb[i] = n < N ? TC_LDG((const unsigned*)(B + (long long)n * ldb + kb + TA_CPW * (slot / TA_BN))) : 0u;
    }
}

// code by code in the unit's K order (rows not 4-byte aligned, or a permuted K order): K pair p of the ROWS rows
// from r0 into V and P (rows fastest)
#if TA_WIDE
template <int ROWS, class T> TC_FN void ta_stage_codes(const T* X, long long ld, int rows, int r0, int kb, int k0,
                                                       int tid, unsigned* V, unsigned* XE, int stride, unsigned dup,
                                                       bool& odd) {
#pragma unroll 1
    for (int slot = tid; slot < ROWS * TA_KP; slot += TA_NT) {
        const int r = slot % ROWS, p = slot / ROWS;
        const bool in = r0 + r < rows;
        const unsigned lo = in ? X[(long long)(r0 + r) * ld + ta_col(kb + 2 * p, k0)] : 0u;
        const unsigned hi = in ? X[(long long)(r0 + r) * ld + ta_col(kb + 2 * p + 1, k0)] : 0u;
        ta_stage_word(lo | hi << 16, V + p * stride + r, XE + 2 * p * stride + r, stride, dup, odd);
    }
}
#else
template <int ROWS, class T> TC_FN void ta_stage_codes(const T* X, long long ld, int rows, int r0, int kb, int k0,
                                                       int tid, const unsigned* TT, unsigned* V, unsigned* P,
                                                       int stride) {
#pragma unroll 1
    for (int slot = tid; slot < ROWS * TA_KP; slot += TA_NT) {
        const int r = slot % ROWS, p = slot / ROWS;
        const bool in = r0 + r < rows;
        const unsigned lo = in ? TT[X[(long long)(r0 + r) * ld + ta_col(kb + 2 * p, k0)]] : 0u;
        const unsigned hi = in ? TT[X[(long long)(r0 + r) * ld + ta_col(kb + 2 * p + 1, k0)]] : 0u;
        V[p * stride + r] = ta_prmt(lo, hi, 0x5410u);
        P[p * stride + r] = ta_prmt(lo, hi, 0x7632u);
    }
}
#endif

extern "C" __global__ void __launch_bounds__(TA_NT, 2)
gemm_tcalign(const A_T* __restrict__ A, long long lda, const B_T* __restrict__ B, long long ldb,
             const int* __restrict__ TA, const int* __restrict__ TB, unsigned* __restrict__ ACC, int M, int N, int k0,
             int k1, int, int) {  // (gemm_tiled's arguments: the promotion ones unused -- no promotion here)
#ifdef TC_HOST
    unsigned* tc_smem = tc_host_smem;
#else
    extern __shared__ unsigned tc_smem[];
#endif
    unsigned* VA = tc_smem;                 // [TA_KP][TA_SA]: A's values, two K neighbours per word (low first)
    unsigned* VB = VA + TA_KP * TA_SA;      // [TA_KP][TA_SB]: B's values
#if TA_WIDE
    unsigned* XA = VB + TA_KP * TA_SB;      // [GL][TA_SA]: A's exponents (both halves)
    unsigned* XB = XA + GL * TA_SA;         // [GL][TA_SB]: B's exponents (low half)
    bool odd = false;                       // a subnormal operand, or a group's E out of the fast path's range
#else
    unsigned* PA = VB + TA_KP * TA_SB;      // [TA_KP][TA_SA]: A's powers, as the values
    unsigned* PB = PA + TA_KP * TA_SA;      // B's powers
    unsigned* TTA = PB + TA_KP * TA_SB;     // [256]: ta_entry per code of A
    unsigned* TTB = TTA + 256;
#endif
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, fg = lane >> 2, ft = lane & 3;
    const int m0 = blockIdx.y * TA_BM, n0 = blockIdx.x * TA_BN;
    const int wr = (w & 1) * 32, wc = (w >> 1) * 32;  // the warp tile's first row and column in the block
#if !TA_WIDE
    TTA[tid] = ta_entry(TC_LDG(TA + ((unsigned)tid >> A_SHIFT)), MAN_A, XBIAS_A);
    TTB[tid] = ta_entry(TC_LDG(TB + ((unsigned)tid >> B_SHIFT)), MAN_B, XBIAS_B);
#endif
    // B's identity half for the anchors: B[k][n] = (k == n) over k < 8, this lane's k = 2 ft, 2 ft + 1 at n = fg
    const unsigned ident = (fg == 2 * ft ? 0x3F80u : 0u) | (fg == 2 * ft + 1 ? 0x3F800000u : 0u);
    // the 32 outputs: m-tile mt, n-tile nt, fragment element e (rows fg, fg + 8; columns 2 ft, 2 ft + 1)
    float c[2][4][4];
    unsigned umax = 0u, umin = 0xFFFFFFFFu;  // over every C a group starts from: |C| bits, and |C| bits - 1
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int m = m0 + wr + 16 * mt + fg + 8 * (e >> 1), n = n0 + wc + 8 * nt + 2 * ft + (e & 1);
                const unsigned bits = m < M && n < N ? ACC[(long long)m * N + n] : 0u;
                c[mt][nt][e] = TC_U2F(bits);
                umax = max(umax, bits & 0x7FFFFFFFu);
                umin = min(umin, (bits & 0x7FFFFFFFu) - 1u);
            }
    const int groups = (k1 - k0) / GL;
    const bool quads = NATURAL && ((lda | ldb | k0) & (TA_CPW - 1)) == 0 &&
                       (((unsigned long long)A | (unsigned long long)B) & 3) == 0;
    unsigned qa[TA_QA], qb[TA_QB];
    if (quads && groups > 0) ta_fetch(A, lda, B, ldb, M, N, m0, n0, k0, tid, qa, qb);
#pragma unroll 1
    for (int g = 0; g < groups; ++g) {
        const int kb = k0 + g * GL;
        __syncthreads();  // the tables are written; the previous group's stage is read
        // the stage: per K pair and row (column of B), the two codes' values and powers -- four codes a 32-bit
        // load where the K order is natural and the rows are 4-byte aligned (rows fastest: conflict-free stores)
#if TA_WIDE
        if (quads) {  // this group's words, loaded during the previous group's mmas: a K pair each
#pragma unroll
            for (int i = 0; i < TA_QA; ++i) {
                const int slot = tid + i * TA_NT, r = slot % TA_BM, kp = slot / TA_BM;
                ta_stage_word(qa[i], VA + kp * TA_SA + r, XA + 2 * kp * TA_SA + r, TA_SA, 0x10001u, odd);
            }
#pragma unroll
            for (int i = 0; i < TA_QB; ++i) {
                const int slot = tid + i * TA_NT, r = slot % TA_BN, kp = slot / TA_BN;
                ta_stage_word(qb[i], VB + kp * TA_SB + r, XB + 2 * kp * TA_SB + r, TA_SB, 1u, odd);
            }
        } else {
            ta_stage_codes<TA_BM>(A, lda, M, m0, kb, k0, tid, VA, XA, TA_SA, 0x10001u, odd);
            ta_stage_codes<TA_BN>(B, ldb, N, n0, kb, k0, tid, VB, XB, TA_SB, 1u, odd);
        }
#else
        if (quads) {  // this group's words, loaded during the previous group's mmas
#pragma unroll
            for (int i = 0; i < TA_QA; ++i) {
                const int slot = tid + i * TA_NT, r = slot % TA_BM, kq = slot / TA_BM;
                ta_stage4(qa[i], TTA, VA + 2 * kq * TA_SA + r, PA + 2 * kq * TA_SA + r, TA_SA);
            }
#pragma unroll
            for (int i = 0; i < TA_QB; ++i) {
                const int slot = tid + i * TA_NT, r = slot % TA_BN, kq = slot / TA_BN;
                ta_stage4(qb[i], TTB, VB + 2 * kq * TA_SB + r, PB + 2 * kq * TA_SB + r, TA_SB);
            }
        } else {
            ta_stage_codes<TA_BM>(A, lda, M, m0, kb, k0, tid, TTA, VA, PA, TA_SA);
            ta_stage_codes<TA_BN>(B, ldb, N, n0, kb, k0, tid, TTB, VB, PB, TA_SB);
        }
#endif
        __syncthreads();
        const bool more = g + 1 < groups;
        if (quads && more) ta_fetch(A, lda, B, ldb, M, N, m0, n0, kb + GL, tid, qa, qb);
#if TA_WIDE
        // 1. the largest product exponent on the CUDA cores (BF16's exponents span more than a power sum holds):
        // max over the group of ea + eb, two columns an instruction, [mt][row fg / fg + 8][nt]
        unsigned E2[2][2][4];
#pragma unroll
        for (int i = 0; i < 16; ++i) E2[i >> 3][(i >> 2) & 1][i & 3] = 0x80008000u;
#pragma unroll
        for (int k = 0; k < GL; ++k) {
            unsigned xb[4];
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const int col = wc + 8 * nt + 2 * ft;
                xb[nt] = ta_prmt(XB[k * TA_SB + col], XB[k * TA_SB + col + 1], 0x5410u);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const unsigned xa = XA[k * TA_SA + wr + 16 * (i >> 1) + fg + 8 * (i & 1)];
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) E2[i >> 1][i & 1][nt] = TC_ADDMAX2(xa, xb[nt], E2[i >> 1][i & 1][nt]);
            }
        }
#endif
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            const int r0 = wr + 16 * mt + fg;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const int q0 = wc + 8 * nt + fg;
#if !TA_WIDE
                // 1. the largest product exponent: a power sum on the tensor core (the tiled kernel's EXP_MMA) --
                // over the whole group, or over TA_XTERMS products apart (16: each k16 step; 8: half a step, the
                // other half zero), the largest sum's bits then (positive floats order as their bits)
                float S[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                unsigned sbits[4] = {0u, 0u, 0u, 0u};
#pragma unroll
                for (int h = 0; h < GL / 16; ++h)
#pragma unroll
                    for (int half = 0; half < (TA_XTERMS == 8 ? 2 : 1); ++half) {
                        const int kp = 8 * h + 4 * half + ft;
                        const bool both = TA_XTERMS != 8;  // the step's second K half in the same sum
                        const unsigned fa[4] = {PA[kp * TA_SA + r0], PA[kp * TA_SA + r0 + 8],
                                                both ? PA[(kp + 4) * TA_SA + r0] : 0u,
                                                both ? PA[(kp + 4) * TA_SA + r0 + 8] : 0u};
                        const unsigned fb[2] = {PB[kp * TA_SB + q0], both ? PB[(kp + 4) * TA_SB + q0] : 0u};
                        if (TA_XTERMS != GL) S[0] = S[1] = S[2] = S[3] = 0.0f;
                        tc_mma_bf16(S, fa, fb);
                        if (TA_XTERMS != GL)
#pragma unroll
                            for (int e = 0; e < 4; ++e) sbits[e] = max(sbits[e], TC_F2U(S[e]));
                    }
                if (TA_XTERMS == GL)
#pragma unroll
                    for (int e = 0; e < 4; ++e) sbits[e] = TC_F2U(S[e]);
#endif
                // E = max(C's exponent, the products'); the anchor 2**A, A = E + 25 - F, as FP32 bits; C's term
                unsigned anchor[4];
                float total[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
#if TA_WIDE
                    const unsigned cb = TC_F2U(c[mt][nt][e]);
#else
                    const unsigned cb = TC_F2U(c[mt][nt][e]), sb = sbits[e];
#endif
                    const int ec = (int)((cb >> 23) & 0xFFu) - 127;  // -127 for a zero C: below every product
#if TA_WIDE
                    // (a group of zero products: es near 2 ZERO_EXP.)  Out of range for the fast path: a product
                    // exponent above EMAX, or a grid 2**(E - F) below FP32's normal range
                    const unsigned pair = E2[mt][e >> 1][nt];
                    const int es = (int)(short)(e & 1 ? pair >> 16 : pair & 0xFFFFu);
                    odd |= es > TA_EMAX || (es > -1000 && es - F_BITS < -126);
                    const int E = min(es > ec ? es : ec, TA_EMAX);
#else
                    const int es = ((int)(sb >> 23) - 127 + 64 * MMA_M) / MMA_M - 64 + XBIAS_A + XBIAS_B;
                    const int E = min(sb != 0u && es > ec ? es : ec, TA_EMAX);  // (above: the slow path)
#endif
                    anchor[e] = (unsigned)(E + 25 - F_BITS + 127) << 23;
                    const float big = TC_U2F(((unsigned)(E - F_BITS + 23 + 127) << 23) | (cb & 0x80000000u));
                    total[e] = TC_FADD_RZ(c[mt][nt][e], big) - big;
                }
                // 2. the products, eight a mma, aligned by it: -2**A(row, n) in A's K column n < 8 (B: identity)
                const unsigned fa0 = (anchor[0] >> 16) | (anchor[1] & 0xFFFF0000u) | 0x80008000u;
                const unsigned fa1 = (anchor[2] >> 16) | (anchor[3] & 0xFFFF0000u) | 0x80008000u;
#pragma unroll
                for (int s = 0; s < GL / 8; ++s) {
                    const int kp = 4 * s + ft;
                    const unsigned fa[4] = {fa0, fa1, VA[kp * TA_SA + r0], VA[kp * TA_SA + r0 + 8]};
                    const unsigned fb[2] = {ident, VB[kp * TA_SB + q0]};
                    float D[4] = {TC_U2F(anchor[0]), TC_U2F(anchor[1]), TC_U2F(anchor[2]), TC_U2F(anchor[3])};
                    tc_mma_bf16(D, fa, fb);
#pragma unroll
                    for (int e = 0; e < 4; ++e) total[e] += D[e];  // exact: multiples of the grid below 2**24 of it
                }
                // 3. cut toward zero to the output's significand: the unit's result, the next group's C
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const unsigned r = TC_F2U(total[e]) & TA_MASK;
                    c[mt][nt][e] = TC_U2F(r);
                    umax = max(umax, r & 0x7FFFFFFFu);  // NaN from a special operand, or too large
                    if (more) umin = min(umin, (r & 0x7FFFFFFFu) - 1u);
                }
            }
        }
    }
    // a nonzero C outside [2**-126, 2**(EMAX + 1)), a NaN or as large a result: the block's slow path
#if TA_WIDE
    const bool slow = TA_SYNC_OR(umax >= TA_UMAX || umin < (1u << 23) - 1u || odd);
#else
    const bool slow = TA_SYNC_OR(umax >= TA_UMAX || umin < (1u << 23) - 1u);
#endif
#ifdef TC_HOST
    if (slow && tid == 0) ++tc_tcalign_slow_blocks;
#endif
    if (!slow) {
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int m = m0 + wr + 16 * mt + fg + 8 * (e >> 1), n = n0 + wc + 8 * nt + 2 * ft + (e & 1);
                    if (m < M && n < N) ACC[(long long)m * N + n] = TC_F2U(c[mt][nt][e]);
                }
        return;
    }
#pragma unroll 1
    for (int o = 0; o < 32; ++o) {  // the slow path, one chain a step (a rolled loop: one copy of chain_one)
        const int mt = o >> 4, nt = (o >> 2) & 3, e = o & 3;
        const int m = m0 + wr + 16 * mt + fg + 8 * (e >> 1), n = n0 + wc + 8 * nt + 2 * ft + (e & 1);
        if (m >= M || n >= N) continue;
        unsigned* d = ACC + (long long)m * N + n;
        *d = (unsigned)chain_one(A + (long long)m * lda, B + (long long)n * ldb, TA, TB, (long long)*d, k0, k1);
    }
}
#endif
"""
