"""CUDA C++ source of the per-vector and per-output kernels (``dot_kernel``, ``gemm_scalar``: the shared
``chain_one`` of ``_cuda_source``, one thread a vector or output) and of the FP32 FFMA chain kernel (private; part
of ``_cuda_source.KERNEL_SOURCE``, the FFMA kernel its own module)."""

from __future__ import annotations

__all__ = ["SCALAR_SOURCE", "FFMA_SOURCE"]

SCALAR_SOURCE = r"""
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
