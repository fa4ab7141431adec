"""The host build's shim and launchers (private): the kernels' CUDA C++ source compiled as plain C++ on a CPU.

``HOST_PRELUDE`` maps CUDA's threads to ``std::thread``s, ``__syncthreads`` to a ``std::barrier``, the intrinsics
to host functions (the round-toward-zero FMAs exactly, under the thread's rounding mode) and emulates the warp's
BF16 ``mma.sync`` on the measured unit model; ``HOST_LAUNCHER`` runs a kernel's grid with CUDA's semantics.
"""

from __future__ import annotations

__all__ = ["HOST_PRELUDE", "HOST_LAUNCHER", "FCHAIN_HOST_LAUNCHER", "TCALIGN_HOST_LAUNCHER", "FFMA_HOST_LAUNCHER"]

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
static inline unsigned TC_ADDMAX2(unsigned a, unsigned b, unsigned c) {  // per signed 16-bit half: max(a + b, c)
    unsigned r = 0;
    for (int h = 0; h < 32; h += 16) {
        const int x = (short)(a >> h) + (short)(b >> h), y = (short)(c >> h);
        r |= (unsigned)(unsigned short)(x > y ? x : y) << h;
    }
    return r;
}
#define TC_NAN std::numeric_limits<double>::quiet_NaN()
#define TC_INF std::numeric_limits<double>::infinity()
#define TC_SIGNBIT(x) std::signbit(x)
#include <cfenv>
// the device's directed-rounding operations, exactly: the host's (correctly rounded in every IEEE mode; the build
// passes -frounding-math) under this thread's rounding mode set for the one operation
template <class F> static inline auto tc_in_mode(int mode, F op) -> decltype(op()) {
    std::fesetround(mode);
    volatile decltype(op()) r = op();
    std::fesetround(FE_TONEAREST);
    return r;
}
template <class T> static inline T tc_fma_rz_host(T a, T b, T c) {
    return tc_in_mode(FE_TOWARDZERO, [&] { return std::fma(a, b, c); });
}
#define TC_FMA_RZ(a, b, c) tc_fma_rz_host((a), (b), (c))
static inline float tc_fadd_rz_host(float a, float b) {  // the device's __fadd_rz
    return tc_in_mode(FE_TOWARDZERO, [&] { return a + b; });
}
#define TC_FADD_RZ(a, b) tc_fadd_rz_host((a), (b))
// The device build is compiled with -ftz=true (CuPy adds it): an FP32 operation there reads and writes subnormals
// as zero.  The kernels keep every FP32 value they compute with normal (or zero); the host build checks it, and
// host_gemm_tiled returns 2 if any value it was shown was a subnormal.
static std::atomic<int> tc_subnormal_seen{0};
static inline float tc_normal32(float x) {
    if (std::fpclassify(x) == FP_SUBNORMAL) tc_subnormal_seen = 1;
    return x;
}
static inline double tc_normal32(double x) { return x; }  // FP64 ignores the flag
#define TC_NORMAL32(x) tc_normal32(x)
static inline float tc_pow2f(int e) { return std::ldexp(1.0f, e); }
static inline double tc_pow2d(int e) { return std::ldexp(1.0, e); }
#include <bit>
#define TC_F2U(x) std::bit_cast<unsigned>((float)(x))
#define TC_U2F(x) std::bit_cast<float>((unsigned)(x))
#define TC_LDS2(p, x, y) do { (x) = TC_U2F((p)[0]); (y) = TC_U2F((p)[1]); } while (0)
static std::atomic<int> tc_or_flag{0};
static inline int tc_sync_or(int x) {  // __syncthreads_or: every thread of the block calls it
    if (x) tc_or_flag = 1;
    __syncthreads();
    const int r = tc_or_flag;
    __syncthreads();
    if (threadIdx.x == 0) tc_or_flag = 0;
    __syncthreads();
    return r;
}
// mma.sync m16n8k16 / m16n8k8, BF16 or FP16 operands (or m16n8k8 TF32), FP32 C and D, for the whole warp, on the unit model Hopper
// measured for it (NUMERICS.md: products exact with exponent ea + eb and significand in [1, 4), C one more term, a
// zero term at exponent -133, every term truncated toward zero to 25 fraction bits below the largest exponent, the
// exact sum rounded toward zero to FP32 -- 2**128 and above to infinity --; a NaN, inf x 0 or inf - inf gives the
// canonical NaN 0x7FFFFFFF, else an infinite term its infinity; an exact zero is +0).
// Every thread of the block calls it at the same point (the kernel's pass is uniform): registers are published,
// the block waits, each lane gathers its warp's A and B through the fragment layout (A's element (row, k) in
// register (row >> 3) + 2 (k >> 3) of lane (row & 7) * 4 + (k & 7) / 2, B's (k, col) in register 4 + (k >> 3) of
// lane col * 4 + (k & 7) / 2, K neighbours low half first), waits again.
static unsigned tc_mma_regs[1024][6];
static float tc_mma_c[1024][4];
struct tc_term { long long sig; int exp, lsb, kind; };  // value sig * 2**lsb; kind 0 finite, 1 inf, 2 NaN
// an operand's term: kind 0 BF16, 1 FP16 (16-bit patterns), 2 TF32 (an FP32 container, its low 13 bits unread)
static inline tc_term tc_operand_term(unsigned bits, int kind) {
    const int eb = kind == 1 ? 5 : 8, mb = kind == 0 ? 7 : 10, bias = kind == 1 ? 15 : 127, top = (1 << eb) - 1;
    if (kind == 2) bits >>= 13;  // sign, 8 exponent bits, 10 fraction bits
    const int width = 1 + eb + mb;
    const int fe = (bits >> mb) & top, fr = bits & ((1 << mb) - 1);
    tc_term t{fe ? (fr | (1 << mb)) : fr, fe ? fe - bias : 1 - bias, 0, fe == top ? (fr ? 2 : 1) : 0};
    t.lsb = t.exp - mb;
    if ((bits >> (width - 1)) & 1) t.sig = -t.sig;
    return t;
}
static inline float tc_mma_element(const unsigned* a, const unsigned* b, int kk, int kind, float c) {
    tc_term terms[17];
    bool nan = std::isnan(c), pinf = std::isinf(c) && c > 0, ninf = std::isinf(c) && c < 0;
    for (int k = 0; k < kk; ++k) {
        const tc_term x = tc_operand_term(a[k], kind), y = tc_operand_term(b[k], kind);
        const bool zx = x.kind == 0 && x.sig == 0, zy = y.kind == 0 && y.sig == 0;
        if (x.kind == 2 || y.kind == 2 || (x.kind == 1 && zy) || (y.kind == 1 && zx)) nan = true;
        else if (x.kind == 1 || y.kind == 1) ((x.sig < 0) != (y.sig < 0) ? ninf : pinf) = true;
        terms[k] = tc_term{x.sig * y.sig, x.exp + y.exp, x.lsb + y.lsb, 0};
    }
    if (nan || (pinf && ninf)) return std::bit_cast<float>(0x7FFFFFFFu);
    if (pinf || ninf) return pinf ? INFINITY : -INFINITY;
    int ce;
    std::frexp((double)c, &ce);  // |c| in [2**(ce - 1), 2**ce); a subnormal c takes -126
    const int cexp = c != 0.0f && ce - 1 > -126 ? ce - 1 : -126;
    terms[kk] = tc_term{(long long)std::ldexp((double)c, 23 - cexp), cexp, cexp - 23, 0};
    int emax = -100000;
    for (int t = 0; t <= kk; ++t) emax = max(emax, terms[t].sig != 0 ? terms[t].exp : -133);
    long long total = 0;  // in units of 2**(emax - 25), each term truncated toward zero
    for (int t = 0; t <= kk; ++t) {
        const int d = terms[t].lsb - (emax - 25);
        const long long m = terms[t].sig < 0 ? -terms[t].sig : terms[t].sig;
        const long long q = d >= 0 ? m << d : (d > -63 ? m >> -d : 0);
        total += terms[t].sig < 0 ? -q : q;
    }
    const double v = std::ldexp((double)total, emax - 25);  // |total| < 2**53: exact in double
    if (std::fabs(v) >= 0x1p128) return v < 0 ? -INFINITY : INFINITY;  // measured: inf even under RZ
    return tc_in_mode(FE_TOWARDZERO, [&] { return (float)v; });
}
static inline void tc_mma_host(float* d, const unsigned* a, const unsigned* b, int kk, int kind) {
    // registers: 16-bit operands hold K pairs (k16: 4 of A, 2 of B; k8: 2 and 1), TF32 one element (k8: 4 and 2)
    const int t = (int)threadIdx.x, w0 = t & ~31, lane = t & 31, per = kind == 2 ? 1 : 2;
    const int na = kk / per / 2, nb = kk / per / 4;
    for (int r = 0; r < 4; ++r) { tc_mma_regs[t][r] = r < na ? a[r] : 0u; tc_mma_c[t][r] = d[r]; }
    tc_mma_regs[t][4] = b[0]; tc_mma_regs[t][5] = nb == 2 ? b[1] : 0u;
    __syncthreads();
    float out[4];
    for (int e = 0; e < 4; ++e) {
        const int row = (lane >> 2) + 8 * (e >> 1), col = 2 * (lane & 3) + (e & 1);
        unsigned av[16], bv[16];
        for (int k = 0; k < kk; ++k) {
            const int w = k / per, half = k % per;  // the element's word along K, and its half of it
            const unsigned ra = tc_mma_regs[w0 + (row & 7) * 4 + (w & 3)][(row >> 3) + 2 * (w >> 2)];
            const unsigned rb = tc_mma_regs[w0 + col * 4 + (w & 3)][4 + (w >> 2)];
            av[k] = per == 1 ? ra : (half ? ra >> 16 : ra & 0xFFFF);
            bv[k] = per == 1 ? rb : (half ? rb >> 16 : rb & 0xFFFF);
        }
        out[e] = tc_mma_element(av, bv, kk, kind, tc_mma_c[t][e]);
    }
    __syncthreads();
    for (int e = 0; e < 4; ++e) d[e] = out[e];
}
static inline void tc_mma_bf16(float* d, const unsigned* a, const unsigned* b) { tc_mma_host(d, a, b, 16, 0); }
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
// one block-tiled kernel's grid with CUDA's semantics: nt threads a block, bm x bn outputs a block, one block at a time
// (its threads as std::threads meeting at a std::barrier); 2 if any FP32 value computed was subnormal
template <class Kernel> static int tc_host_grid(unsigned nt, unsigned bm, unsigned bn, int M, int N,
                                                long long smem_words, Kernel kernel) {
    std::vector<unsigned> smem((size_t)smem_words);
    blockDim.x = nt;
    for (unsigned by = 0; by * bm < (unsigned)M; ++by)
        for (unsigned bx = 0; bx * bn < (unsigned)N; ++bx) {
            std::barrier<> bar(nt);
            tc_barrier = &bar;
            tc_host_smem = smem.data();
            std::vector<std::thread> threads;
            for (unsigned t = 0; t < nt; ++t)
                threads.emplace_back([=] {
                    blockIdx.x = bx; blockIdx.y = by; threadIdx.x = t;
                    kernel();
                });
            for (auto& th : threads) th.join();
        }
    return tc_subnormal_seen.exchange(0) ? 2 : 0;
}
#if TILED
extern "C" int host_gemm_tiled(const void* a, long long lda, const void* b, long long ldb, const int* ta,
                               const int* tb, unsigned* acc, int M, int N, int k0, int k1, int promote,
                               int promote_start, long long smem_words HOST_SCALE_ARGS) {
    return tc_host_grid(NT, BM, BN, M, N, smem_words, [=] {
        gemm_tiled((const A_T*)a, lda, (const B_T*)b, ldb, ta, tb, acc, M, N, k0, k1, promote, promote_start
                   HOST_SCALE_PASS);
    });
}
#endif
"""

# the host launchers of the kernels with their own build: host_gemm_<name> runs its grid (tc_host_grid)
OWN_LAUNCHER = r"""
#define TC_OWN_LAUNCHER(NAME, NT_, BM_, BN_)                                                                      \
    extern "C" int host_gemm_##NAME(const void* a, long long lda, const void* b, long long ldb, const int* ta,    \
                                    const int* tb, unsigned* acc, int M, int N, int k0, int k1, long long words) { \
        return tc_host_grid(NT_, BM_, BN_, M, N, words, [=] {                                                      \
            gemm_##NAME((const A_T*)a, lda, (const B_T*)b, ldb, ta, tb, acc, M, N, k0, k1, 0, 0);                  \
        });                                                                                                         \
    }
"""

FCHAIN_HOST_LAUNCHER = OWN_LAUNCHER + r"""
#if FCHAIN
TC_OWN_LAUNCHER(fchain, FC_NT, FC_BM, FC_BN)
extern "C" int host_fchain_slow_blocks() { return tc_fchain_slow_blocks.exchange(0); }  // since the last call
#endif
"""

TCALIGN_HOST_LAUNCHER = r"""
#if TCALIGN
TC_OWN_LAUNCHER(tcalign, TA_NT, TA_BM, TA_BN)
extern "C" int host_tcalign_slow_blocks() { return tc_tcalign_slow_blocks.exchange(0); }  // since the last call
#endif
#if NATIVE
TC_OWN_LAUNCHER(native, NV_NT, NV_BM, NV_BN)
#endif
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
