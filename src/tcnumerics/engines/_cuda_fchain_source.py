"""CUDA C++ source of ``gemm_fchain``: the register-resident fused-chain GEMM for units whose group ends in FP32
(private, part of ``_cuda_source.KERNEL_SOURCE``, compiled only under ``BUILD_FCHAIN``; ``_cuda_build.fchain_reason``
says which plans it runs: the FP8 chains of Hopper-class units).

Method.  A block is 8 warps; warp w owns 8 rows (warp-uniform), lane L the 4 columns L + 32 j; a K-group is staged
in shared memory as FP32 values x = +-(|sig| << LS) * 2**e (A signed, B as its positive and negative part) and as
exponents packed two per word.  Per group and output: pass 1 takes E = max(C's exponent, max_k ea + eb) two outputs
per instruction (``__viaddmax_s16x2``); the two accumulators start at +-2**(23 + g) (g = E + RS, the unit's grid
2**(E - F) in these units) with C's term already truncated onto the grid by the same directed-rounding FMA that
pass 2 then uses for every product -- exact by the argument of the tiled kernel's FMA pass: P only grows within the
binade whose ulp is 2**g, so fma_rz truncates each non-negative term onto the grid, N mirrors it for the
non-positive terms.  Which of b's parts pairs with which accumulator depends on a's sign: it is warp-uniform, so a
jump table over four rows' signs (16 cases, 32 FMAs each) routes every product with two FMAs and no divergence.
P + N is the exact group sum (a multiple of 2**g below 2**(g + 24)); scaled back and cut to the output's
significand toward zero it is the unit's result (``tc_fast_end``'s argument, C's term now inside the sum).

Whatever the fast path cannot take -- a special operand, a nonzero C outside [2**CMIN, 2**(EMAX + 1)) (its grid
or its results could leave FP32's normal range) -- marks the block, which then recomputes its outputs from the original C
with the per-output chain (``chain_one``): slow, rare, and the same bits as every other path.
"""

from __future__ import annotations

__all__ = ["FCHAIN_SOURCE", "rows_dispatch", "ROW_SPLIT", "fchain_source"]


def rows_dispatch(rows: int, tn: int = 4) -> str:
    """The device body of ``fc_rows<R0, rows>``: one ``brx.idx`` jump table over the 2**rows sign patterns of
    ``rows`` rows, each case the 2 x rows x ``tn`` round-toward-zero FMAs that route the rows' products by a's sign
    (a uniform branch: the pattern is the same in every lane of the warp)."""
    def acc(kind: str, i: int, j: int) -> str:
        return f"%{(0 if kind == 'P' else rows * tn) + i * tn + j}"

    a0 = 2 * rows * tn
    bp0, bn0 = a0 + rows, a0 + rows + tn
    code = bn0 + tn
    lines = ["{", "TBL%=: .branchtargets " + ", ".join(f"L{s}_%=" for s in range(1 << rows)) + ";",
             f"brx.idx.uni %{code}, TBL%=;"]
    for s in range(1 << rows):
        lines.append(f"L{s}_%=:")
        for i in range(rows):
            neg = (s >> i) & 1
            for j in range(tn):
                bp, bn = f"%{bp0 + j}", f"%{bn0 + j}"
                pos_b, neg_b = (bn, bp) if neg else (bp, bn)
                lines.append(f"fma.rz.f32 {acc('P', i, j)}, %{a0 + i}, {pos_b}, {acc('P', i, j)};")
                lines.append(f"fma.rz.f32 {acc('N', i, j)}, %{a0 + i}, {neg_b}, {acc('N', i, j)};")
        if s + 1 < 1 << rows:
            lines.append("bra.uni DONE%=;")
    lines += ["DONE%=:", "}"]
    body = "\\n\\t".join(lines)
    outs = ", ".join(f'"+f"(P[R0 + {i}][{j}])' for i in range(rows) for j in range(tn)) + ", " + \
        ", ".join(f'"+f"(N[R0 + {i}][{j}])' for i in range(rows) for j in range(tn))
    ins = ", ".join(f'"f"(a[R0 + {i}])' for i in range(rows)) + ", " + \
        ", ".join(f'"f"(bp[{j}])' for j in range(tn)) + ", " + ", ".join(f'"f"(bn[{j}])' for j in range(tn)) + \
        ', "r"(code)'
    return f'    asm volatile("{body}"\n                 : {outs}\n                 : {ins});\n'


def rows8_chained(tn: int = 4) -> str:
    """The device body of ``fc_rows8``: the warp's 8 rows as two jump tables of four, the second one entered from
    the end of every case of the first (no join between them, so the second table's target loads while the first
    case's FMAs run)."""
    def acc(kind: str, i: int, j: int) -> str:
        return f"%{(0 if kind == 'P' else 8 * tn) + i * tn + j}"

    a0 = 16 * tn
    bp0, bn0 = a0 + 8, a0 + 8 + tn
    lo, hi = bn0 + tn, bn0 + tn + 1
    lines = ["{", "TLO%=: .branchtargets " + ", ".join(f"L{s}_%=" for s in range(16)) + ";",
             "THI%=: .branchtargets " + ", ".join(f"H{s}_%=" for s in range(16)) + ";",
             f"brx.idx.uni %{lo}, TLO%=;"]
    for half, label in ((0, "L"), (1, "H")):
        for s in range(16):
            lines.append(f"{label}{s}_%=:")
            for r in range(4):
                i = 4 * half + r
                neg = (s >> r) & 1
                for j in range(tn):
                    bp, bn = f"%{bp0 + j}", f"%{bn0 + j}"
                    pos_b, neg_b = (bn, bp) if neg else (bp, bn)
                    lines.append(f"fma.rz.f32 {acc('P', i, j)}, %{a0 + i}, {pos_b}, {acc('P', i, j)};")
                    lines.append(f"fma.rz.f32 {acc('N', i, j)}, %{a0 + i}, {neg_b}, {acc('N', i, j)};")
            if half == 0:
                lines.append(f"brx.idx.uni %{hi}, THI%=;")
            elif s < 15:
                lines.append("bra.uni DONE%=;")
    lines += ["DONE%=:", "}"]
    body = "\\n\\t".join(lines)
    outs = ", ".join(f'"+f"(P[{i}][{j}])' for i in range(8) for j in range(tn)) + ", " + \
        ", ".join(f'"+f"(N[{i}][{j}])' for i in range(8) for j in range(tn))
    ins = ", ".join(f'"f"(a[{i}])' for i in range(8)) + ", " + ", ".join(f'"f"(bp[{j}])' for j in range(tn)) + \
        ", " + ", ".join(f'"f"(bn[{j}])' for j in range(tn)) + ', "r"(lo), "r"(hi)'
    return f'    asm volatile("{body}"\n                 : {outs}\n                 : {ins});\n'


def _device_rows(split: tuple[int, ...], tn: int = 4) -> str:
    """``fc_rows<R0, NR>`` for the jump-table sizes ``split`` uses (one ``if constexpr`` branch each)."""
    branches = []
    for rows in sorted(set(split)):
        branches.append(f"    if constexpr (NR == {rows}) {{\n{rows_dispatch(rows, tn)}    }}\n")
    return "".join(branches)


ROW_SPLIT = (4, 4)  # the warp's 8 rows as jump tables of these sizes (their sign patterns' bits, low first)


_FCHAIN_TEXT = r"""
#if BUILD_FCHAIN && FCHAIN
#define FC_W 8                  // warps per block
#define FC_NT (32 * FC_W)
#define FC_TM 8                 // rows per warp (two jump tables of four)
#define FC_TN 4                 // columns per lane: L + 32 j
#define FC_BM (FC_W * FC_TM)
#define FC_BN (32 * FC_TN)
#define FC_SA (FC_BM + 4)       // A's row stride in words (16-byte rows for the broadcast loads; 4-way store conflicts)
#define FC_SB (FC_BN + 1)       // B's row stride in pairs (odd: the loader's stores along K do not conflict)
#define FC_SE (FC_BN / 2 + 1)   // packed B exponents' row stride in words

#ifdef TC_HOST
struct float2 { float x, y; };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct uint2 { unsigned x, y; };
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static std::atomic<int> tc_or_flag{0};
static std::atomic<int> tc_fchain_slow_blocks{0};  // blocks that took the slow path (the host build's tests count them)
static inline int tc_sync_or(int x) {  // __syncthreads_or: every thread of the block calls it
    if (x) tc_or_flag = 1;
    __syncthreads();
    const int r = tc_or_flag;
    __syncthreads();
    if (threadIdx.x == 0) tc_or_flag = 0;
    __syncthreads();
    return r;
}
TC_FN unsigned fc_addmax2(unsigned a, unsigned b, unsigned c) {  // per signed 16-bit half: max(a + b, c)
    unsigned r = 0;
    for (int h = 0; h < 32; h += 16) {
        const int x = (short)(a >> h) + (short)(b >> h), y = (short)(c >> h);
        r |= (unsigned)(unsigned short)(x > y ? x : y) << h;
    }
    return r;
}
template <int R0, int NR> TC_FN void fc_rows(unsigned code, const float* a, const float* bp, const float* bn,
                                            float (&P)[FC_TM][FC_TN], float (&N)[FC_TM][FC_TN]) {
    for (int i = 0; i < NR; ++i)
        for (int j = 0; j < FC_TN; ++j) {
            const bool neg = (code >> i) & 1;
            P[R0 + i][j] = TC_FMA_RZ(a[R0 + i], neg ? bn[j] : bp[j], P[R0 + i][j]);
            N[R0 + i][j] = TC_FMA_RZ(a[R0 + i], neg ? bp[j] : bn[j], N[R0 + i][j]);
        }
}
TC_FN void fc_rows8(unsigned lo, unsigned hi, const float* a, const float* bp, const float* bn,
                    float (&P)[FC_TM][FC_TN], float (&N)[FC_TM][FC_TN]) {
    fc_rows<0, 4>(lo, a, bp, bn, P, N);
    fc_rows<4, 4>(hi, a, bp, bn, P, N);
}
#define FC_SYNC_OR(x) tc_sync_or(x)
#else
#define fc_addmax2(a, b, c) __viaddmax_s16x2((a), (b), (c))
template <int R0, int NR> __device__ __forceinline__ void fc_rows(unsigned code, const float* a, const float* bp,
        const float* bn, float (&P)[FC_TM][FC_TN], float (&N)[FC_TM][FC_TN]) {
@ROWS@}
__device__ __forceinline__ void fc_rows8(unsigned lo, unsigned hi, const float* a, const float* bp, const float* bn,
                                         float (&P)[FC_TM][FC_TN], float (&N)[FC_TM][FC_TN]) {
@ROWS8@}
#define FC_SYNC_OR(x) __syncthreads_or(x)
#endif

// C's exponents for two outputs, packed as pass 1 keeps them: (|c| >> 23) - 127 per 16-bit half.  A zero C gives
// -127: below every nonzero product's exponent (so the max is the unit's), and its grid 2**(E - F) is only ever
// used for exact zeros then.  (Infinite or NaN C: the slow path, see the end.)
TC_FN unsigned fc_cexp2(unsigned lo, unsigned hi) {
    const unsigned fields = ((lo & 0x7FFFFFFFu) >> 23) | (((hi & 0x7FFFFFFFu) >> 7) & 0x00FF0000u);
    return fc_addmax2(fields, 0xFF81FF81u, 0x80008000u);  // fields - 127 per half (max with -32768: a no-op)
}

TC_FN int fc_col(int col, int k0) {  // the K column a group's position reads (the unit's K order)
#if !NATURAL
    const int kp = (col - k0) % K_INST;
    col = col - kp + PERM[kp];
#endif
    (void)k0;
    return col;
}

extern "C" __global__ void __launch_bounds__(FC_NT, 2)
gemm_fchain(const unsigned char* __restrict__ A, long long lda, const unsigned char* __restrict__ B, long long ldb,
            const int* __restrict__ TA, const int* __restrict__ TB, unsigned* __restrict__ ACC, int M, int N, int k0,
            int k1, int, int) {  // (gemm_tiled's arguments: the promotion ones unused -- no promotion here)
#ifdef TC_HOST
    unsigned* tc_smem = tc_host_smem;
#else
    extern __shared__ unsigned tc_smem[];
#endif
    float2* XB = (float2*)tc_smem;                        // [GL][FC_SB]: b's positive and negative part
    float* XA = (float*)(XB + GL * FC_SB);                // [GL][FC_SA]: a, signed
    unsigned* EA = (unsigned*)(XA + GL * FC_SA);          // [GL][FC_SA]: (ea, ea)
    float2* TXB = (float2*)(EA + GL * FC_SA);             // per code: b's parts, a, the exponents
    float* TXA = (float*)(TXB + 256);
    int* TEA = (int*)(TXA + 256);
    int* TEB = TEA + 256;
    unsigned short* EB = (unsigned short*)(TEB + 256);    // [GL][FC_SE] words: (eb(L + 64 jj), eb(L + 64 jj + 32))
    uint2* CODE = (uint2*)(EB + 2 * GL * FC_SE);          // [GL][FC_W]: sign bits of the warp's rows 0-3, 4-7
    unsigned* CS = (unsigned*)(CODE + GL * FC_W);         // [32][FC_NT]: each output's C (FP32 bits)
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int m0 = blockIdx.y * FC_BM, n0 = blockIdx.x * FC_BN;
    {   // per code: x = +-(|sig| << LS) * 2**e (exact: _cuda_build.fchain_reason checks the ranges) and e
        const int wa = TC_LDG(TA + ((unsigned)tid >> A_SHIFT)), wb = TC_LDG(TB + ((unsigned)tid >> B_SHIFT));
        const int sa = wa >> 16, sb = wb >> 16, ea = (int)(short)(wa & 0xFFFF), eb = (int)(short)(wb & 0xFFFF);
        const unsigned ma = (unsigned)(sa < 0 ? -sa : sa) << LS_AB, mb = (unsigned)(sb < 0 ? -sb : sb);
        const float xa = ma ? TC_NORMAL32((float)ma * tc_pow2f(ea)) : 0.0f;
        const float xb = mb ? TC_NORMAL32((float)mb * tc_pow2f(eb)) : 0.0f;
        // a special operand (NaN, infinity) enters as NaN, which every FMA it meets propagates to the group's
        // result, where the end's check sends the block to the slow path; its exponent counts as a zero's
        const float nan = TC_U2F(0x7FC00000u);
        TXA[tid] = ea < ZERO_EXP ? nan : sa < 0 ? -xa : xa;
        TXB[tid] = eb < ZERO_EXP ? make_float2(nan, nan) : make_float2(sb < 0 ? 0.0f : xb, sb < 0 ? -xb : 0.0f);
        TEA[tid] = max(ea, ZERO_EXP);
        TEB[tid] = max(eb, ZERO_EXP);
    }
    // each warp's A rows and B columns: byte offsets (int: the host keeps M lda and N ldb below 2**31) of column 0
    // of its first row / column, how many exist; the strides between the rows / columns a thread reads
    const int a_rows = min(FC_TM, M - (m0 + w * FC_TM)), b_cols = N - n0;
    const int a_off = (m0 + w * FC_TM) * (int)lda, b_off = (n0 + w) * (int)ldb;
    const int a_step = (int)lda, b_step = FC_W * (int)ldb;
    unsigned umax = 0u, umin = 0xFFFFFFFFu;  // over every C a group starts from: |C| bits, and |C| bits - 1
    unsigned E2[FC_TM][FC_TN / 2];  // E per output, two per word (low half: column L + 64 jj, high: L + 64 jj + 32)
#pragma unroll
    for (int o = 0; o < FC_TM * FC_TN; o += 2) {
        unsigned c[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + w * FC_TM + (o + h) / FC_TN, n = n0 + lane + 32 * ((o + h) % FC_TN);
            c[h] = m < M && n < N ? ACC[(long long)m * N + n] : 0u;
            CS[(o + h) * FC_NT + tid] = c[h];
            umax = max(umax, c[h] & 0x7FFFFFFFu);
            umin = min(umin, (c[h] & 0x7FFFFFFFu) - 1u);
        }
        E2[o / FC_TN][(o % FC_TN) / 2] = fc_cexp2(c[0], c[1]);
    }
    const int groups = (k1 - k0) / GL;
#pragma unroll 1
    for (int g = 0; g < groups; ++g) {
        const int kb = k0 + g * GL;
        __syncthreads();  // the tables are written; the previous group's stage is read
        // stage A: thread (w, lane) decodes column kb + lane of the warp's 8 rows and their sign pattern
        if (lane < GL) {
            int off = a_off + fc_col(kb + lane, k0);
            unsigned code = 0;
#pragma unroll
            for (int i = 0; i < FC_TM; ++i, off += a_step) {
                const unsigned v = i < a_rows ? A[off] : 0u;  // code 0 is a zero (fchain_reason)
                const float x = TXA[v];
                XA[lane * FC_SA + w * FC_TM + i] = x;
                EA[lane * FC_SA + w * FC_TM + i] = (unsigned)(TEA[v] & 0xFFFF) * 0x10001u;
                code |= (x < 0.0f ? 1u : 0u) << i;
            }
            CODE[lane * FC_W + w] = make_uint2(code & 15u, code >> 4);
        }
        // stage B: thread (w, lane) decodes column kb + lane of the block's B columns w + 8 t
        if (lane < GL) {
            int off = b_off + fc_col(kb + lane, k0);
            float2* xb = XB + lane * FC_SB + w;
            unsigned short* eb = EB + 2 * (lane * FC_SE + w);
#pragma unroll
            for (int t = 0; t < FC_BN / FC_W; ++t, off += b_step) {  // column c = w + 8 t: word c / 64 * 32 + c % 32, half c / 32 % 2
                const unsigned v = w + FC_W * t < b_cols ? B[off] : 0u;
                xb[FC_W * t] = TXB[v];
                eb[2 * ((t >> 3) * 32 + FC_W * (t & 3)) + ((t >> 2) & 1)] = (unsigned short)(TEB[v] & 0xFFFF);
            }
        }
        __syncthreads();
        // pass 1: E = max(C's exponent, every product's ea + eb), two outputs per instruction
#pragma unroll 4
        for (int k = 0; k < GL; ++k) {
            unsigned ea[FC_TM], eb[FC_TN / 2];
#pragma unroll
            for (int i = 0; i < FC_TM; ++i) ea[i] = EA[k * FC_SA + w * FC_TM + i];
#pragma unroll
            for (int jj = 0; jj < FC_TN / 2; ++jj) {
                const unsigned* row = (const unsigned*)EB + k * FC_SE;
                eb[jj] = row[jj * 32 + lane];
            }
#pragma unroll
            for (int i = 0; i < FC_TM; ++i)
#pragma unroll
                for (int jj = 0; jj < FC_TN / 2; ++jj) E2[i][jj] = fc_addmax2(ea[i], eb[jj], E2[i][jj]);
        }
        // the accumulators: +-2**(23 + g), C's term truncated onto the grid 2**g by the first FMA of each
        float P[FC_TM][FC_TN], N[FC_TM][FC_TN];
#pragma unroll
        for (int i = 0; i < FC_TM; ++i)
#pragma unroll
            for (int j = 0; j < FC_TN; ++j) {
                const unsigned e2 = E2[i][j >> 1];
                const int e = min((j & 1) ? (int)e2 >> 16 : (int)(short)(e2 & 0xFFFF), FC_EMAX);  // (above: slow path)
                const float anchor = TC_U2F((unsigned)(e + RS_AB + 150) << 23);  // 2**(23 + g)
                const float c = TC_U2F(CS[(i * FC_TN + j) * FC_NT + tid]);
                P[i][j] = TC_FMA_RZ(c > 0.0f ? c : 0.0f, FC_SCALE, anchor);
                N[i][j] = TC_FMA_RZ(c < 0.0f ? c : 0.0f, FC_SCALE, -anchor);
            }
        // pass 2: every product, routed by a's (warp-uniform) sign
        {
            const float* xa = XA + w * FC_TM;
            const float2* xb = XB + lane;
            const uint2* cd = CODE + w;
#pragma unroll 1
            for (int k = 0; k < GL; ++k, xa += FC_SA, xb += FC_SB, cd += FC_W) {
                float a[FC_TM], bp[FC_TN], bn[FC_TN];
#pragma unroll
                for (int i = 0; i < FC_TM; ++i) a[i] = xa[i];
#pragma unroll
                for (int j = 0; j < FC_TN; ++j) { const float2 v = xb[32 * j]; bp[j] = v.x; bn[j] = v.y; }
                const uint2 code = *cd;
                FC_ROWS_CALLS
            }
        }
        // the group's end: the exact sum, scaled back, cut toward zero to the output's significand
        const bool more = g + 1 < groups;
#pragma unroll
        for (int i = 0; i < FC_TM; ++i)
#pragma unroll
            for (int jj = 0; jj < FC_TN / 2; ++jj) {
                unsigned r[2];
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int j = 2 * jj + h;
                    const float total = TC_NORMAL32(P[i][j] + N[i][j]);
                    r[h] = TC_F2U(total * FC_UNSCALE) & FC_MASK;
                    CS[(i * FC_TN + j) * FC_NT + tid] = r[h];
                    umax = max(umax, r[h] & 0x7FFFFFFFu);  // every group: NaN from a special operand, infinity
                    if (more) umin = min(umin, (r[h] & 0x7FFFFFFFu) - 1u);
                }
                E2[i][jj] = fc_cexp2(r[0], r[1]);  // the next group's start
            }
    }
    // a nonzero C outside [2**CMIN, 2**(EMAX + 1)) (infinities and NaNs above, subnormals below), or a result NaN
    // or infinite (a special operand, an overflow) or as large (the last group's: the general path decides those)
    const int bad = umax >= FC_UMAX || umin < FC_UMIN - 1u;  // umin: |C| - 1, so a zero C (all ones) never counts
    if (FC_SYNC_OR(bad)) {  // the slow path from the original C, output by output
#ifdef TC_HOST
        if (tid == 0) ++tc_fchain_slow_blocks;
#endif
#pragma unroll 1
        for (int o = 0; o < FC_TM * FC_TN; ++o) {
            const int m = m0 + w * FC_TM + o / FC_TN, n = n0 + lane + 32 * (o % FC_TN);
            if (m < M && n < N)
                ACC[(long long)m * N + n] = (unsigned)chain_one(A + (long long)m * lda, B + (long long)n * ldb, TA, TB,
                                                                (long long)ACC[(long long)m * N + n], k0, k1);
        }
        return;
    }
#pragma unroll 1
    for (int o = 0; o < FC_TM * FC_TN; ++o) {
        const int m = m0 + w * FC_TM + o / FC_TN, n = n0 + lane + 32 * (o % FC_TN);
        if (m < M && n < N) ACC[(long long)m * N + n] = CS[o * FC_NT + tid];
    }
}
#endif
"""


def fchain_source(split: tuple[int, ...] = ROW_SPLIT, chained: bool = True) -> str:
    """``FCHAIN_SOURCE`` with the warp's rows dispatched in jump tables of ``split`` rows (sum 8); ``chained`` (split
    4 + 4 only): the second table entered from the end of the first's cases (``rows8_chained``)."""
    assert sum(split) == 8 and all(1 <= r <= 4 for r in split), split
    if chained:
        assert split == (4, 4), split
        calls = ["fc_rows8(code.x, code.y, a, bp, bn, P, N);"]
    else:
        calls, r0 = ["const unsigned bits = code.x | code.y << 4;"], 0
        for rows in split:
            calls.append(f"fc_rows<{r0}, {rows}>((bits >> {r0}) & {(1 << rows) - 1}u, a, bp, bn, P, N);")
            r0 += rows
    return (_FCHAIN_TEXT.replace("@ROWS@", _device_rows(split)).replace("@ROWS8@", rows8_chained() if chained else "")
            .replace("FC_ROWS_CALLS", "\n                ".join(calls)))


FCHAIN_SOURCE = fchain_source()
