"""CUDA C++ source of ``gemm_native``: the chain of a unit that *is* this GPU's own ``mma.sync`` (private, part of
``_cuda_source.KERNEL_SOURCE``, compiled only under ``BUILD_NATIVE``; ``_cuda_native_build`` says which plans it
runs and ``_cuda_launch`` runs it only on a GPU whose mma passed the self-test there).

Method.  Where the emulated unit's plan is the plan of a measured host instruction -- BF16 or FP16 ``mma.sync``
m16n8k16 (groups of 16) or m16n8k8 (groups of 8) with FP32 C and D, NUMERICS.md's Hopper unit: the Hopper chains,
and any catalog or custom unit with exactly those numerics -- the chain over K is that instruction run over K in
order, each result the next one's C: nothing is re-derived, so nothing can be mis-derived; what has to be right is
that this GPU's instruction is that unit, which the self-test proves (every output of adversarial operands against
the CPU fast engine) before the engine uses the kernel.  The host build runs the same source with the instruction
emulated on the unit model (``_cuda_host_source``), which checks the data movement and the K order.

Layout: blocks of 8 warps, 128 x 128 outputs, each warp 64 x 32 (4 x 4 mma tiles, 64 FP32 accumulators a lane); a
stage holds 32 K of A's rows and B's columns as K pairs (one 32-bit word: the fragment's unit), at a row stride of
136 words (8 mod 32: fragment loads without bank conflicts), filled with 16-byte loads prefetched into registers
during the previous stage's mmas where the rows are 16-byte aligned, element by element otherwise.
"""

from __future__ import annotations

__all__ = ["NATIVE_SOURCE"]

NATIVE_SOURCE = r"""
#if BUILD_NATIVE && NATIVE
#define NV_NT 256
#define NV_BM 128
#define NV_BN 128
#define NV_KS 32                // K per stage
#define NV_KP (NV_KS / 2)       // K pairs per stage
#define NV_S (128 + 8)          // words per K pair of the stage
#define NV_Q (NV_BM * NV_KS / 8 / NV_NT)  // 16-byte loads a thread and operand per stage (2)

// D = A B + D on the host instruction: m16n8kNV_K, NV_F16 ? FP16 : BF16 operands, FP32 accumulator
TC_FN void nv_mma(float* d, const unsigned* a, const unsigned* b) {
#ifdef TC_HOST
    tc_mma_host(d, a, b, NV_K, NV_F16 != 0);
#else
#if NV_K == 16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." NV_TYPE "." NV_TYPE ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32." NV_TYPE "." NV_TYPE ".f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]));
#endif
#endif
}

struct nv_quad { unsigned x, y, z, w; };

// this thread's 16-byte chunks of a stage (8 K of one row a chunk): slot = tid + i * NV_NT, row slot % 128, chunk
// slot / 128 -- rows fastest, as the stage stores them
template <class T> TC_FN void nv_fetch(const T* X, long long ld, int rows, int r0, int kb, int tid, nv_quad (&q)[NV_Q]) {
#pragma unroll
    for (int i = 0; i < NV_Q; ++i) {
        const int slot = tid + i * NV_NT, r = r0 + slot % NV_BM;
        q[i] = r < rows ? *(const nv_quad*)(X + (long long)r * ld + kb + 8 * (slot / NV_BM)) : nv_quad{0u, 0u, 0u, 0u};
    }
}

TC_FN void nv_store(unsigned* S, int tid, const nv_quad (&q)[NV_Q]) {
#pragma unroll
    for (int i = 0; i < NV_Q; ++i) {
        const int slot = tid + i * NV_NT;
        unsigned* s = S + 4 * (slot / NV_BM) * NV_S + slot % NV_BM;
        s[0] = q[i].x;
        s[NV_S] = q[i].y;
        s[2 * NV_S] = q[i].z;
        s[3 * NV_S] = q[i].w;
    }
}

// element by element (rows not 16-byte aligned): K pairs kb + 2 p, zero past k1 (never used: steps stop at k1)
template <class T> TC_FN void nv_stage_slow(const T* X, long long ld, int rows, int r0, int kb, int k1, int tid,
                                            unsigned* S) {
    for (int slot = tid; slot < NV_BM * NV_KP; slot += NV_NT) {
        const int r = slot % NV_BM, p = slot / NV_BM, k = kb + 2 * p;
        const bool in = r0 + r < rows;
        const unsigned lo = in && k < k1 ? (unsigned)X[(long long)(r0 + r) * ld + k] : 0u;
        const unsigned hi = in && k + 1 < k1 ? (unsigned)X[(long long)(r0 + r) * ld + k + 1] : 0u;
        S[p * NV_S + r] = lo | hi << 16;
    }
}

extern "C" __global__ void __launch_bounds__(NV_NT, 1)
gemm_native(const A_T* __restrict__ A, long long lda, const B_T* __restrict__ B, long long ldb,
            const int* __restrict__, const int* __restrict__, unsigned* __restrict__ ACC, int M, int N, int k0, int k1,
            int, int) {  // (gemm_tiled's arguments: the tables and the promotion ones unused)
#ifdef TC_HOST
    unsigned* tc_smem = tc_host_smem;
#else
    extern __shared__ unsigned tc_smem[];
#endif
    unsigned* SA = tc_smem;             // [NV_KP][NV_S]: A's rows, K pairs
    unsigned* SB = SA + NV_KP * NV_S;   // B's columns
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, fg = lane >> 2, ft = lane & 3;
    const int m0 = blockIdx.y * NV_BM, n0 = blockIdx.x * NV_BN;
    const int wr = (w & 1) * 64, wc = (w >> 1) * 32;
    float acc[4][4][4];  // m-tile, n-tile, fragment element (rows fg, fg + 8; columns 2 ft, 2 ft + 1)
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int m = m0 + wr + 16 * mt + fg + 8 * (e >> 1), n = n0 + wc + 8 * nt + 2 * ft + (e & 1);
                acc[mt][nt][e] = TC_U2F(m < M && n < N ? ACC[(long long)m * N + n] : 0u);
            }
    const bool quads = ((lda | ldb | k0) & 7) == 0 && (((unsigned long long)A | (unsigned long long)B) & 15) == 0;
    nv_quad qa[NV_Q], qb[NV_Q];
    if (quads && k0 + NV_KS <= k1) {
        nv_fetch(A, lda, M, m0, k0, tid, qa);
        nv_fetch(B, ldb, N, n0, k0, tid, qb);
    }
#pragma unroll 1
    for (int kb = k0; kb < k1; kb += NV_KS) {
        __syncthreads();  // the previous stage is read
        if (quads && kb + NV_KS <= k1) {
            nv_store(SA, tid, qa);
            nv_store(SB, tid, qb);
        } else {
            nv_stage_slow(A, lda, M, m0, kb, k1, tid, SA);
            nv_stage_slow(B, ldb, N, n0, kb, k1, tid, SB);
        }
        __syncthreads();
        if (quads && kb + 2 * NV_KS <= k1) {  // the next stage's words, during this one's mmas
            nv_fetch(A, lda, M, m0, kb + NV_KS, tid, qa);
            nv_fetch(B, ldb, N, n0, kb + NV_KS, tid, qb);
        }
        const int steps = min(NV_KS, k1 - kb) / NV_K;  // the unit's groups, in K order, none past k1
#pragma unroll 1
        for (int s = 0; s < steps; ++s) {
            const int p = s * (NV_K / 2) + ft;  // this lane's K pair (and p + 4 for k16)
            unsigned fa[4][NV_K / 4], fb[4][NV_K / 8];
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                const int r = wr + 16 * mt + fg;
                fa[mt][0] = SA[p * NV_S + r];
                fa[mt][1] = SA[p * NV_S + r + 8];
#if NV_K == 16
                fa[mt][2] = SA[(p + 4) * NV_S + r];
                fa[mt][3] = SA[(p + 4) * NV_S + r + 8];
#endif
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const int q = wc + 8 * nt + fg;
                fb[nt][0] = SB[p * NV_S + q];
#if NV_K == 16
                fb[nt][1] = SB[(p + 4) * NV_S + q];
#endif
            }
#pragma unroll
            for (int mt = 0; mt < 4; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) nv_mma(acc[mt][nt], fa[mt], fb[nt]);
        }
    }
#pragma unroll
    for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int m = m0 + wr + 16 * mt + fg + 8 * (e >> 1), n = n0 + wc + 8 * nt + 2 * ft + (e & 1);
                if (m < M && n < N) ACC[(long long)m * N + n] = TC_F2U(acc[mt][nt][e]);
            }
}
#endif
"""
