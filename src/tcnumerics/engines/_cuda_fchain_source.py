"""CUDA C++ source of ``gemm_fchain``: the register-resident fused-chain GEMM for units whose groups end in FP32
(private, part of ``_cuda_source.KERNEL_SOURCE``, compiled only under ``BUILD_FCHAIN``; ``_cuda_fchain_build`` says
which plans it runs and compiles its two forms: FP8 operands, and BF16 / FP16 / TF32 ones -- ``FC_WIDE``).

Method.  A block is 8 warps; warp w owns 8 rows (warp-uniform), lane L the 4 columns L + 32 j; a K-group is staged
in shared memory as values x = +-(|sig| << LS) * 2**e (A signed, B as its positive and negative part; FP32 for FP8,
FP64 for the wide form) and as exponents packed two per word.  Per group and output: pass 1 takes E = max(C's
exponent, max_k ea + eb) two outputs per instruction (``TC_ADDMAX2``).  FP8: two accumulators start at
+-2**(23 + g) (g = E + RS, the unit's grid 2**(E - F) in these units) with C's term already truncated onto the grid
by the same directed-rounding FMA that pass 2 then uses for every product -- exact by the argument of the tiled
kernel's FMA pass: P only grows within the binade whose ulp is 2**g, so fma_rz truncates each non-negative term onto
the grid, N mirrors it for the non-positive terms.  Wide form: one FP64 accumulator starts mid-binade at
1.5 * 2**(52 + g) and stays in it (the terms sum below 2**51 units), non-negative terms rounded toward zero (floor)
and non-positive ones toward +inf (ceil): truncation toward zero either way.  Which of b's parts pairs with which
accumulator or rounding depends on a's sign: it is warp-uniform, so a jump table over four rows' signs (16 cases)
routes every product with two FMAs and no divergence.  The accumulators give the exact group sum; scaled back and
rounded toward zero to the output's significand it is the unit's result (``tc_fast_end``'s argument, C's term
inside the sum).

Whatever the fast path cannot take -- a special operand, a nonzero C outside [2**CMIN, 2**(EMAX + 1)), a result
that would be subnormal or overflow in FP32 -- marks the block, which then recomputes its outputs from the original C
with the per-output chain (``chain_one``): slow, rare, and the same bits as every other path.
"""

from __future__ import annotations

__all__ = ["FCHAIN_SOURCE", "rows_dispatch", "rows8_chained", "ROW_SPLIT", "fchain_source"]


def _case_fmas(i: int, neg: bool, tn: int, acc, a: str, bp0: int, bn0: int, wide: bool) -> list[str]:
    """Row i's FMAs in a jump-table case: FP32 -- P takes the non-negative products, N the non-positive ones, both
    toward zero; FP64 (``wide``) -- one accumulator, non-negative products toward zero, non-positive ones toward
    +inf (a < 0 flips which of b's parts is which)."""
    out = []
    for j in range(tn):
        bp, bn = f"%{bp0 + j}", f"%{bn0 + j}"
        if wide:
            first, second = ("rp", "rz") if neg else ("rz", "rp")
            out.append(f"fma.{first}.f64 {acc('P', i, j)}, {a}, {bp}, {acc('P', i, j)};")
            out.append(f"fma.{second}.f64 {acc('P', i, j)}, {a}, {bn}, {acc('P', i, j)};")
        else:
            pos_b, neg_b = (bn, bp) if neg else (bp, bn)
            out.append(f"fma.rz.f32 {acc('P', i, j)}, {a}, {pos_b}, {acc('P', i, j)};")
            out.append(f"fma.rz.f32 {acc('N', i, j)}, {a}, {neg_b}, {acc('N', i, j)};")
    return out


def _asm(lines: list[str], outs: str, ins: str) -> str:
    body = "\\n\\t".join(lines)
    return f'    asm volatile("{body}"\n                 : {outs}\n                 : {ins});\n'


def rows_dispatch(rows: int, tn: int = 4, wide: bool = False) -> str:
    """The device body of ``fc_rows<R0, rows>``: one ``brx.idx`` jump table over the 2**rows sign patterns of
    ``rows`` rows, each case the FMAs that route the rows' products by a's sign (``_case_fmas``; a uniform branch:
    the pattern is the same in every lane of the warp)."""
    accs = 1 if wide else 2
    def acc(kind: str, i: int, j: int) -> str:
        return f"%{(0 if kind == 'P' else rows * tn) + i * tn + j}"

    a0 = accs * rows * tn
    bp0, bn0 = a0 + rows, a0 + rows + tn
    code = bn0 + tn
    lines = ["{", "TBL%=: .branchtargets " + ", ".join(f"L{s}_%=" for s in range(1 << rows)) + ";",
             f"brx.idx.uni %{code}, TBL%=;"]
    for s in range(1 << rows):
        lines.append(f"L{s}_%=:")
        for i in range(rows):
            lines += _case_fmas(i, bool((s >> i) & 1), tn, acc, f"%{a0 + i}", bp0, bn0, wide)
        if s + 1 < 1 << rows:
            lines.append("bra.uni DONE%=;")
    lines += ["DONE%=:", "}"]
    t = "d" if wide else "f"
    outs = ", ".join(f'"+{t}"({k}[R0 + {i}][{j}])' for k in "PN"[:accs] for i in range(rows) for j in range(tn))
    ins = ", ".join(f'"{t}"(a[R0 + {i}])' for i in range(rows)) + ", " + \
        ", ".join(f'"{t}"(bp[{j}])' for j in range(tn)) + ", " + ", ".join(f'"{t}"(bn[{j}])' for j in range(tn)) + \
        ', "r"(code)'
    return _asm(lines, outs, ins)


def rows8_chained(tn: int = 4, wide: bool = False) -> str:
    """The device body of ``fc_rows8``: the warp's 8 rows as two jump tables of four, the second one entered from
    the end of every case of the first (no join between them, so the second table's target loads while the first
    case's FMAs run)."""
    accs = 1 if wide else 2
    def acc(kind: str, i: int, j: int) -> str:
        return f"%{(0 if kind == 'P' else 8 * tn) + i * tn + j}"

    a0 = accs * 8 * tn
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
                lines += _case_fmas(i, bool((s >> r) & 1), tn, acc, f"%{a0 + i}", bp0, bn0, wide)
            if half == 0:
                lines.append(f"brx.idx.uni %{hi}, THI%=;")
            elif s < 15:
                lines.append("bra.uni DONE%=;")
    lines += ["DONE%=:", "}"]
    t = "d" if wide else "f"
    outs = ", ".join(f'"+{t}"({k}[{i}][{j}])' for k in "PN"[:accs] for i in range(8) for j in range(tn))
    ins = ", ".join(f'"{t}"(a[{i}])' for i in range(8)) + ", " + ", ".join(f'"{t}"(bp[{j}])' for j in range(tn)) + \
        ", " + ", ".join(f'"{t}"(bn[{j}])' for j in range(tn)) + ', "r"(lo), "r"(hi)'
    return _asm(lines, outs, ins)


def _both(narrow: str, wide: str) -> str:
    return f"#if FC_WIDE\n{wide}#else\n{narrow}#endif\n"


def _device_rows(split: tuple[int, ...], tn: int = 4) -> str:
    """``fc_rows<R0, NR>`` for the jump-table sizes ``split`` uses (one ``if constexpr`` branch each)."""
    branches = []
    for rows in sorted(set(split)):
        body = _both(rows_dispatch(rows, tn), rows_dispatch(rows, tn, wide=True))
        branches.append(f"    if constexpr (NR == {rows}) {{\n{body}    }}\n")
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
#define FC_SA (FC_BM + 4)       // A's row stride in values (16-byte rows for the broadcast loads)
#define FC_SB (FC_BN + 1)       // B's row stride in pairs (odd: the loader's stores along K do not conflict)
#define FC_SE (FC_BN / 2 + 1)   // packed B exponents' row stride in words
#define FC_ROWS (GL + 2)        // the stage's rows along K (see the kernel)

#ifdef TC_HOST
struct float2 { float x, y; };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct double2 { double x, y; };
static inline double2 make_double2(double x, double y) { return double2{x, y}; }
struct uint2 { unsigned x, y; };
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static std::atomic<int> tc_fchain_slow_blocks{0};  // blocks that took the slow path (the host build's tests count them)
template <class T> static inline T tc_fma_ru_host(T a, T b, T c) {  // the device's __fma_ru
    return tc_in_mode(FE_UPWARD, [&] { return std::fma(a, b, c); });
}
static inline float tc_d2f_rz_host(double x) {  // the device's __double2float_rz
    return tc_in_mode(FE_TOWARDZERO, [&] { return (float)x; });
}
#define FC_FMA_RZ(a, b, c) tc_fma_rz_host((a), (b), (c))
#define FC_FMA_RU(a, b, c) tc_fma_ru_host((a), (b), (c))
#define FC_D2F_RZ(x) tc_d2f_rz_host(x)
#define FC_LL2D(x) std::bit_cast<double>((long long)(x))
#define FC_D2HI(x) (unsigned)(std::bit_cast<unsigned long long>((double)(x)) >> 32)
#define FC_SYNC_OR(x) tc_sync_or(x)
#else
#if FC_WIDE
#define FC_FMA_RZ(a, b, c) __fma_rz((a), (b), (c))
#else
#define FC_FMA_RZ(a, b, c) __fmaf_ieee_rz((a), (b), (c))  // IEEE subnormals whatever -ftz says (none occur here)
#endif
#define FC_FMA_RU(a, b, c) __fma_ru((a), (b), (c))
#define FC_D2F_RZ(x) __double2float_rz(x)
#define FC_LL2D(x) __longlong_as_double((long long)(x))
#define FC_D2HI(x) (unsigned)__double2hiint(x)
#define FC_SYNC_OR(x) __syncthreads_or(x)
#endif

#if FC_WIDE  // BF16 / FP16 / TF32: FP64 values, one accumulator per output
typedef double fc_t;
typedef double2 fc_pair;
#define FC_PAIR(x, y) make_double2((x), (y))
#else        // FP8: FP32 values, two accumulators per output
typedef float fc_t;
typedef float2 fc_pair;
#define FC_PAIR(x, y) make_float2((x), (y))
#endif

#ifdef TC_HOST
template <int R0, int NR> TC_FN void fc_rows(unsigned code, const fc_t* a, const fc_t* bp, const fc_t* bn,
                                            fc_t (&P)[FC_TM][FC_TN], fc_t (&N)[FC_TM][FC_TN]) {
    for (int i = 0; i < NR; ++i)
        for (int j = 0; j < FC_TN; ++j) {
            const bool neg = (code >> i) & 1;
#if FC_WIDE  // one accumulator P (N unused): non-negative products toward zero, non-positive ones toward +inf
            P[R0 + i][j] = neg ? FC_FMA_RU(a[R0 + i], bp[j], P[R0 + i][j]) : FC_FMA_RZ(a[R0 + i], bp[j], P[R0 + i][j]);
            P[R0 + i][j] = neg ? FC_FMA_RZ(a[R0 + i], bn[j], P[R0 + i][j]) : FC_FMA_RU(a[R0 + i], bn[j], P[R0 + i][j]);
#else
            P[R0 + i][j] = FC_FMA_RZ(a[R0 + i], neg ? bn[j] : bp[j], P[R0 + i][j]);
            N[R0 + i][j] = FC_FMA_RZ(a[R0 + i], neg ? bp[j] : bn[j], N[R0 + i][j]);
#endif
        }
}
TC_FN void fc_rows8(unsigned lo, unsigned hi, const fc_t* a, const fc_t* bp, const fc_t* bn,
                    fc_t (&P)[FC_TM][FC_TN], fc_t (&N)[FC_TM][FC_TN]) {
    fc_rows<0, 4>(lo, a, bp, bn, P, N);
    fc_rows<4, 4>(hi, a, bp, bn, P, N);
}
#else
template <int R0, int NR> __device__ __forceinline__ void fc_rows(unsigned code, const fc_t* a, const fc_t* bp,
        const fc_t* bn, fc_t (&P)[FC_TM][FC_TN], fc_t (&N)[FC_TM][FC_TN]) {
@ROWS@}
__device__ __forceinline__ void fc_rows8(unsigned lo, unsigned hi, const fc_t* a, const fc_t* bp, const fc_t* bn,
                                         fc_t (&P)[FC_TM][FC_TN], fc_t (&N)[FC_TM][FC_TN]) {
@ROWS8@}
#endif

// C's exponents for two outputs, packed as pass 1 keeps them (16-bit halves).  FP8 (E_ZERO below every nonzero
// product there): (|c| >> 23) - 127, so a zero C gives -127 -- also below every nonzero product, its grid used only
// for exact zeros then.  Wide units: a zero C starts at E_ZERO, as the unit's does (their products reach below it).
// (An infinite, NaN or subnormal C: the slow path, see the end.)
TC_FN unsigned fc_cexp2(unsigned lo, unsigned hi) {
#if FC_WIDE
    const int flo = (int)((lo >> 23) & 0xFF), fhi = (int)((hi >> 23) & 0xFF);
    return (unsigned)((flo ? flo - 127 : E_ZERO) & 0xFFFF) | ((unsigned)(fhi ? fhi - 127 : E_ZERO) << 16);
#else
    const unsigned fields = ((lo & 0x7FFFFFFFu) >> 23) | (((hi & 0x7FFFFFFFu) >> 7) & 0x00FF0000u);
    return TC_ADDMAX2(fields, 0xFF81FF81u, 0x80008000u);  // fields - 127 per half (max with -32768: a no-op)
#endif
}

TC_FN int fc_col(int col, int k0) {  // the K column a group's position reads (the unit's K order)
#if !NATURAL
    const int kp = (col - k0) % K_INST;
    col = col - kp + PERM[kp];
#endif
    (void)k0;
    return col;
}

#if FC_WIDE
// an IEEE-style code (sign, EXPB exponent bits, MANB <= 20 fraction bits, bias, subnormals, all-ones exponent
// special): the plan's significand and exponent (_cuda_build's fchain_reason checks every code against the plan's
// tables) as x = +-(|sig| << ls) * 2**e in FP64 -- a normal code's x built from its fields (exact: the fraction
// fits the high word), a subnormal's converted (rare) --, a special as NaN with a zero's exponent
template <int EXPB, int MANB, int BIAS> TC_FN void fc_decode(unsigned code, int ls, double& x, int& e) {
    const unsigned f = (code >> MANB) & ((1u << EXPB) - 1u), m = code & ((1u << MANB) - 1u);
    const unsigned sign = (code << (31 - EXPB - MANB)) & 0x80000000u;
    if (f == 0u) {
        x = (double)(m << ls) * tc_pow2d(1 - BIAS);
        e = m ? 1 - BIAS : ZERO_EXP;
        if (sign) x = -x;
    } else if (f == (1u << EXPB) - 1u) {
        x = FC_LL2D(0x7FF8000000000000LL);
        e = ZERO_EXP;
    } else {
        const unsigned hi = sign | ((f + (unsigned)(1023 - BIAS + MANB + ls)) << 20) | (m << (20 - MANB));
        x = FC_LL2D((unsigned long long)hi << 32);
        e = (int)f - BIAS;
    }
}
#endif

// the stage's loaders: lanes per staged column -- two when a group is 16 or fewer long (each half the column's rows
// of A, half the block's columns of B), one for 32
#define FC_RPL (GL > 16 ? 1 : 2)
#define FC_KL (32 / FC_RPL)  // lanes per part

extern "C" __global__ void __launch_bounds__(FC_NT, 2)
gemm_fchain(const A_T* __restrict__ A, long long lda, const B_T* __restrict__ B, long long ldb,
            const int* __restrict__ TA, const int* __restrict__ TB, unsigned* __restrict__ ACC, int M, int N, int k0,
            int k1, int, int) {  // (gemm_tiled's arguments: the promotion ones unused -- no promotion here)
#ifdef TC_HOST
    unsigned* tc_smem = tc_host_smem;
#else
    extern __shared__ unsigned tc_smem[];
#endif
    // the stage has FC_ROWS = GL + 2 rows along K: row GL is the idle lanes' scratch (see the loader), one more keeps
    // every array 16-byte aligned
    fc_pair* XB = (fc_pair*)tc_smem;                      // [FC_ROWS][FC_SB]: b's positive and negative part
    fc_t* XA = (fc_t*)(XB + FC_ROWS * FC_SB);            // [FC_ROWS][FC_SA]: a, signed
    unsigned* EA = (unsigned*)(XA + FC_ROWS * FC_SA);    // [FC_ROWS][FC_SA]: (ea, ea)
    unsigned short* EB = (unsigned short*)(EA + FC_ROWS * FC_SA);  // [FC_ROWS][FC_SE] words: (eb(L + 64 jj), eb(L + 64 jj + 32))
    uint2* CODE = (uint2*)(EB + 2 * FC_ROWS * FC_SE);    // [FC_ROWS][FC_W]: sign bits of the warp's rows 0-3, 4-7
    unsigned* CS = (unsigned*)(CODE + FC_ROWS * FC_W);   // [32][FC_NT]: each output's C (FP32 bits)
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int m0 = blockIdx.y * FC_BM, n0 = blockIdx.x * FC_BN;
#if !FC_WIDE
    float2* TXB = (float2*)(CS + FC_TM * FC_TN * FC_NT);  // per one-byte code: b's parts, a, the exponents
    float* TXA = (float*)(TXB + 256);
    int* TEA = (int*)(TXA + 256);
    int* TEB = TEA + 256;
    {   // x = +-(|sig| << LS) * 2**e (exact: _cuda_build.fchain_reason checks the ranges) and e
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
#endif
    // each warp's A rows and B columns: element offsets (int: the host keeps M lda and N ldb below 2**31) of column 0
    // of its first row / column, how many exist; the strides between the rows / columns a thread reads
    const int a_rows = min(FC_TM, M - (m0 + w * FC_TM)), b_cols = N - n0;
    const int a_off = (m0 + w * FC_TM) * (int)lda, b_off = (n0 + w) * (int)ldb;
    const int a_step = (int)lda, b_step = FC_W * (int)ldb;
    unsigned umax = 0u, umin = 0xFFFFFFFFu;  // over every C a group starts from: |C| bits, and |C| bits - 1
#if FC_WIDE
    unsigned vmin = 0xFFFFFFFFu;  // over every result: the high word of |value| - 1 (a subnormal FP32 result below)
#endif
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
        // stage A: lane (part, col) decodes column kb + col of its part of the warp's 8 rows and their signs.  Lanes
        // past the group (col >= GL: groups of 8) repeat its last column into a scratch row GL of the stage, so that
        // no lane branches around the loader (a warp diverged there met the closing barrier diverged on an H200)
        const int lane_col = lane % FC_KL, part = lane / FC_KL;
        const int col = lane_col < GL ? lane_col : GL, gcol = lane_col < GL ? lane_col : GL - 1;
        {
            int off = a_off + fc_col(kb + gcol, k0) + part * (FC_TM / FC_RPL) * a_step;
            unsigned code = 0;
#pragma unroll
            for (int ii = 0; ii < FC_TM / FC_RPL; ++ii, off += a_step) {
                const int i = part * (FC_TM / FC_RPL) + ii;
                const unsigned v = i < a_rows ? (unsigned)A[off] : 0u;  // code 0 is a zero (fchain_reason)
#if FC_WIDE
                double x;
                int e;
                fc_decode<FC_A_EXPB, FC_A_MANB, FC_A_BIAS>(v >> A_SHIFT, LS_AB, x, e);
#else
                const float x = TXA[v];
                const int e = TEA[v];
#endif
                XA[col * FC_SA + w * FC_TM + i] = x;
                EA[col * FC_SA + w * FC_TM + i] = (unsigned)(e & 0xFFFF) * 0x10001u;
                code |= (x < 0 ? 1u : 0u) << i;
            }
            if (FC_RPL == 1) CODE[col * FC_W + w] = make_uint2(code & 15u, code >> 4);
            else if (part == 0) CODE[col * FC_W + w].x = code;
            else CODE[col * FC_W + w].y = code >> 4;
        }
        // stage B: lane (part, col) decodes column kb + col of its part of the block's B columns w + 8 t
        {
            int off = b_off + fc_col(kb + gcol, k0) + part * (FC_BN / FC_W / FC_RPL) * b_step;
            fc_pair* xb = XB + col * FC_SB + w;
            unsigned short* eb = EB + 2 * (col * FC_SE + w);
#pragma unroll
            for (int tt = 0; tt < FC_BN / FC_W / FC_RPL; ++tt, off += b_step) {
                // column c = w + 8 t: exponent word c / 64 * 32 + c % 32, half c / 32 % 2
                const int t = part * (FC_BN / FC_W / FC_RPL) + tt;
                const unsigned v = w + FC_W * t < b_cols ? (unsigned)B[off] : 0u;
#if FC_WIDE
                double x;
                int e;
                fc_decode<FC_B_EXPB, FC_B_MANB, FC_B_BIAS>(v >> B_SHIFT, 0, x, e);
                xb[FC_W * t] = x != x ? make_double2(x, x) : x < 0 ? make_double2(0.0, x) : make_double2(x, 0.0);
#else
                xb[FC_W * t] = TXB[v];
                const int e = TEB[v];
#endif
                eb[2 * ((t >> 3) * 32 + FC_W * (t & 3)) + ((t >> 2) & 1)] = (unsigned short)(e & 0xFFFF);
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
                for (int jj = 0; jj < FC_TN / 2; ++jj) E2[i][jj] = TC_ADDMAX2(ea[i], eb[jj], E2[i][jj]);
        }
        // the accumulators, C's term truncated onto the grid 2**g by the first FMA of each: FP8 P and N from
        // +-2**(23 + g); wide units one accumulator from 1.5 * 2**(52 + g), the middle of the binade whose ulp is 2**g
        // (the group's terms sum below 2**51 units either way: checked), toward zero for a non-negative term and
        // toward +inf for a non-positive one -- truncation toward zero of each term either way
        fc_t P[FC_TM][FC_TN];
#if FC_WIDE
        fc_t (&N)[FC_TM][FC_TN] = P;  // (unused by the wide jump tables)
#else
        fc_t N[FC_TM][FC_TN];
#endif
#pragma unroll
        for (int i = 0; i < FC_TM; ++i)
#pragma unroll
            for (int j = 0; j < FC_TN; ++j) {
                const unsigned e2 = E2[i][j >> 1];
                const int e = min((j & 1) ? (int)e2 >> 16 : (int)(short)(e2 & 0xFFFF), FC_EMAX);  // (above: slow path)
                const float c = TC_U2F(CS[(i * FC_TN + j) * FC_NT + tid]);
#if FC_WIDE
                const double mid = FC_LL2D(((long long)(e + RS_AB + 52 + 1023) << 52) | (1LL << 51));
                const double cd = (double)c;
                P[i][j] = cd < 0 ? FC_FMA_RU(cd, FC_SCALE, mid) : FC_FMA_RZ(cd, FC_SCALE, mid);
#else
                const float anchor = TC_U2F((unsigned)(e + RS_AB + 150) << 23);  // 2**(23 + g)
                P[i][j] = FC_FMA_RZ(c > 0.0f ? c : 0.0f, FC_SCALE, anchor);
                N[i][j] = FC_FMA_RZ(c < 0.0f ? c : 0.0f, FC_SCALE, -anchor);
#endif
            }
        // pass 2: every product, routed by a's (warp-uniform) sign
        {
            const fc_t* xa = XA + w * FC_TM;
            const fc_pair* xb = XB + lane;
            const uint2* cd = CODE + w;
#pragma unroll 1
            for (int k = 0; k < GL; ++k, xa += FC_SA, xb += FC_SB, cd += FC_W) {
                fc_t a[FC_TM], bp[FC_TN], bn[FC_TN];
#pragma unroll
                for (int i = 0; i < FC_TM; ++i) a[i] = xa[i];
#pragma unroll
                for (int j = 0; j < FC_TN; ++j) { const fc_pair v = xb[32 * j]; bp[j] = v.x; bn[j] = v.y; }
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
#if FC_WIDE
                    // the anchor again from the accumulator, which never left its binade: its exponent, 1.5
                    const unsigned hi_bits = (FC_D2HI(P[i][j]) & 0xFFF00000u) | 0x00080000u;
                    const double mid = FC_LL2D((unsigned long long)hi_bits << 32);
                    const double value = (P[i][j] - mid) * FC_UNSCALE;  // both exact
                    r[h] = TC_F2U(FC_D2F_RZ(value)) & FC_MASK;
                    vmin = min(vmin, (FC_D2HI(value) & 0x7FFFFFFFu) - 1u);
#else
                    const float total = TC_NORMAL32(P[i][j] + N[i][j]);
                    r[h] = TC_F2U(total * FC_UNSCALE) & FC_MASK;
#endif
                    CS[(i * FC_TN + j) * FC_NT + tid] = r[h];
                    umax = max(umax, r[h] & 0x7FFFFFFFu);  // every group: NaN from a special operand, infinity
                    if (more) umin = min(umin, (r[h] & 0x7FFFFFFFu) - 1u);
                }
                E2[i][jj] = fc_cexp2(r[0], r[1]);  // the next group's start
            }
    }
    // a nonzero C outside [2**CMIN, 2**(EMAX + 1)) (infinities and NaNs above, subnormals below), or a result NaN
    // or infinite (a special operand, an overflow) or as large (the last group's: the general path decides those);
    // wide units: a nonzero result below 2**-126 (a subnormal FP32, which -ftz=true would flush)
    int bad = umax >= FC_UMAX || umin < FC_UMIN - 1u;  // umin: |C| - 1, so a zero C (all ones) never counts
#if FC_WIDE
    bad |= vmin < FC_VMIN - 1u;
#endif
    const bool slow = FC_SYNC_OR(bad);  // then the slow path from the original C, output by output
#ifdef TC_HOST
    if (slow && tid == 0) ++tc_fchain_slow_blocks;
#endif
#pragma unroll 1
    for (int o = 0; o < FC_TM * FC_TN; ++o) {
        const int m = m0 + w * FC_TM + o / FC_TN, n = n0 + lane + 32 * (o % FC_TN);
        if (m >= M || n >= N) continue;
        unsigned* d = ACC + (long long)m * N + n;
        *d = slow ? (unsigned)chain_one(A + (long long)m * lda, B + (long long)n * ldb, TA, TB, (long long)*d, k0, k1)
                  : CS[o * FC_NT + tid];
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
    rows8 = _both(rows8_chained(), rows8_chained(wide=True)) if chained else ""
    return (_FCHAIN_TEXT.replace("@ROWS@", _device_rows(split)).replace("@ROWS8@", rows8)
            .replace("FC_ROWS_CALLS", "\n                ".join(calls)))


FCHAIN_SOURCE = fchain_source()
