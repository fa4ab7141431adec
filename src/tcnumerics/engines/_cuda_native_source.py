"""CUDA C++ source of ``gemm_native``: the chain of a unit that *is* this GPU's own ``mma.sync`` (private, part of
``_cuda_source.KERNEL_SOURCE``, compiled only under ``BUILD_NATIVE``; ``_cuda_native_build`` says which plans it
runs and ``_cuda_launch`` runs it only on a GPU whose mma passed the self-test there).

Method.  Where the emulated unit's plan is the plan of a measured host instruction -- BF16 or FP16 ``mma.sync``
m16n8k16 (groups of 16) or m16n8k8 (groups of 8), or TF32 m16n8k8, with FP32 C and D, NUMERICS.md's Hopper units: the Hopper chains,
and any catalog or custom unit with exactly those numerics -- the chain over K is that instruction run over K in
order, each result the next one's C: nothing is re-derived, so nothing can be mis-derived; what has to be right is
that this GPU's instruction is that unit, which the self-test proves (every output of adversarial operands against
the CPU fast engine) before the engine uses the kernel.  The host build runs the same source with the instruction
emulated on the unit model (``_cuda_host_source``), which checks the data movement and the K order.

Layout: blocks of 8 warps, 128 x 128 outputs, each warp 64 x 32 (4 x 4 mma tiles, 64 FP32 accumulators a lane); a
stage holds 32 K of A's rows and B's columns as 32-bit words (a K pair of 16-bit operands, or one TF32), at a row stride of
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
#define NV_EPW (NV_KIND == 2 ? 1 : 2)  // elements a 32-bit word: TF32 one, BF16 / FP16 a K pair
#define NV_KP (NV_KS / NV_EPW)  // words along K per stage
#define NV_S (128 + 8)          // words per K row of the stage
#define NV_CE (4 * NV_EPW)      // elements a 16-byte load
#define NV_Q (NV_BM * NV_KS / NV_CE / NV_NT)  // 16-byte loads a thread and operand per stage
#define NV_WS (NV_K / NV_EPW)   // words along K an mma step reads: 8 (4 A and 2 B registers) or 4 (2 and 1)

// D = A B + D on the host instruction: m16n8kNV_K, NV_KIND 0 BF16, 1 FP16, 2 TF32 operands, FP32 accumulator
TC_FN void nv_mma(float* d, const unsigned* a, const unsigned* b) {
#ifdef TC_HOST
    tc_mma_host(d, a, b, NV_K, NV_KIND);
#else
#if NV_WS == 8
    asm volatile("mma.sync.aligned.m16n8k" NV_KSTR ".row.col.f32." NV_TYPE "." NV_TYPE ".f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
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

// this thread's 16-byte chunks of a stage (NV_CE K of one row a chunk): slot = tid + i * NV_NT, row slot % 128,
// chunk slot / 128 -- rows fastest, as the stage stores them
template <class T> TC_FN void nv_fetch(const T* X, long long ld, int rows, int r0, int kb, int tid, nv_quad (&q)[NV_Q]) {
#pragma unroll
    for (int i = 0; i < NV_Q; ++i) {
        const int slot = tid + i * NV_NT, r = r0 + slot % NV_BM;
        q[i] = r < rows ? *(const nv_quad*)(X + (long long)r * ld + kb + NV_CE * (slot / NV_BM)) : nv_quad{0u, 0u, 0u, 0u};
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

// element by element (rows not 16-byte aligned): word p holds K kb + NV_EPW p (and its neighbour), zero past k1
// (never used: steps stop at k1)
template <class T> TC_FN void nv_stage_slow(const T* X, long long ld, int rows, int r0, int kb, int k1, int tid,
                                            unsigned* S) {
    for (int slot = tid; slot < NV_BM * NV_KP; slot += NV_NT) {
        const int r = slot % NV_BM, p = slot / NV_BM, k = kb + NV_EPW * p;
        const bool in = r0 + r < rows;
        const unsigned lo = in && k < k1 ? (unsigned)X[(long long)(r0 + r) * ld + k] : 0u;
        const unsigned hi = NV_EPW == 2 && in && k + 1 < k1 ? (unsigned)X[(long long)(r0 + r) * ld + k + 1] : 0u;
        S[p * NV_S + r] = NV_EPW == 2 ? lo | hi << 16 : lo;
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
    const bool quads = ((lda | ldb | k0) & (NV_CE - 1)) == 0 && (((unsigned long long)A | (unsigned long long)B) & 15) == 0;
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
            const int p = s * NV_WS + ft;  // this lane's word along K (and p + 4 where a step reads 8)
            unsigned fa[4][NV_WS / 2], fb[4][NV_WS / 4];
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                const int r = wr + 16 * mt + fg;
                fa[mt][0] = SA[p * NV_S + r];
                fa[mt][1] = SA[p * NV_S + r + 8];
#if NV_WS == 8
                fa[mt][2] = SA[(p + 4) * NV_S + r];
                fa[mt][3] = SA[(p + 4) * NV_S + r + 8];
#endif
            }
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
                const int q = wc + 8 * nt + fg;
                fb[nt][0] = SB[p * NV_S + q];
#if NV_WS == 8
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
