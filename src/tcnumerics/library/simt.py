"""cuBLAS's SIMT small-M kernels (``gemmSN_NN_kernel``, ``gemmSN_TN_kernel``): their FP32 summation order.

Identified from the H100 bit captures (``tools/device_library/probe_simt.py``; cuBLAS 13.1, docs/gemm.md).
torch's ``[M, K] @ [K, N]`` with a small M is cuBLAS's column-major ``N x M`` product, so a kernel
output (n, m) is a dot product of K terms ``A[m, k] * B[k, n]``.  Products of BF16/FP16 inputs are exact
in FP32; FP32 inputs use FFMA (one rounding per term).  Each term below is ``acc = fma(a, b, acc)``.

* ``gemmSN_NN_kernel<float, BS, P, Q, 8, NB, ., .>`` (B row-major, as torch.matmul passes it; BS = 256,
  P = 4 or BS = 128, P = 2): K is cut into ``P`` contiguous ranges of ``ceil(K / P)`` (the last shorter,
  possibly empty), one per K-thread; each range is cut from its start into tiles of ``512 / P`` elements
  (128 for P = 4, 256 for P = 2; equal to ``64 * Q`` for both instantiations seen); each tile is a fresh
  FFMA chain from +0 in K order, added (FP32, RNE) to the thread's accumulator in tile order; the P thread
  results are summed in thread order: ``((t0 + t1) + t2) + t3``.
* ``gemmSN_TN_kernel<float, 128, L, 2, 4, NB, ., .>`` (B transposed, as F.linear passes the weight;
  L = 16): K is dealt to ``L`` lanes element by element (k goes to lane ``k mod L``); each lane cuts its
  elements into consecutive groups of 16 (one 256-element K tile of the CTA), each group a fresh FFMA
  chain from +0 added to the lane's accumulator in order; the L lane results are summed in lane order.
  (Every captured TN call had K a multiple of 256: how a partial last tile is dealt is not measured.)

Evidence (calls whose sampled outputs all reproduce bit-exactly / captured calls with an FP32 output,
the only ones that can tell orders apart): NN 19/19 (P = 4: K = 7..11008; P = 2: K = 7..1600), TN 4/4
(K = 768..11008); the BF16/FP16-output calls (22 more) reproduce too.

    >>> import numpy as np
    >>> name = "void gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, false, cublasGemvTensorStridedBatched<float const>>"
    >>> A = np.ones((2, 9), np.float32); B = np.ones((9, 3), np.float32)
    >>> simt_reduce(name, A, B).tolist()
    [[9.0, 9.0, 9.0], [9.0, 9.0, 9.0]]
    >>> [list(map(list, t)) for t in gemmsn_nn_tiles(600, 4)]
    [[[0, 128], [128, 150]], [[150, 278], [278, 300]], [[300, 428], [428, 450]], [[450, 578], [578, 600]]]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..gemm import _fp32_fma
from .structure import Structure, epilogue as _epilogue

_SN = re.compile(r"gemmSN_(NN|TN)_kernel<float, (\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (true|false)")
_BLOCK = 1 << 21  # products per column block (float64): bounds the working set of large calls


@dataclass(frozen=True)
class SimtKernel:
    """A parsed SIMT small-M kernel: its layout (NN or TN) and its template arguments."""

    layout: str
    block: int
    p1: int
    p2: int
    p3: int
    rows: int

    @property
    def k_threads(self) -> int:
        """K-threads per output (NN: P contiguous ranges) or lanes (TN: element-interleaved)."""
        return self.p1

    @property
    def tile(self) -> int:
        """Elements of one fresh FFMA chain: NN per K-thread tile, TN per lane group (x lanes = CTA K tile)."""
        return 512 // self.p1 if self.layout == "NN" else 16


def parse(kernel_name: str) -> SimtKernel:
    """The template arguments of a ``gemmSN_{NN,TN}_kernel<float, ...>`` activity name.

    >>> parse("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>").k_threads
    16
    """
    m = _SN.search(kernel_name)
    if m is None:
        raise ValueError(f"not a modelled SIMT kernel: {kernel_name[:120]!r}")
    layout, bs, p1, p2, p3, nb = m.group(1), *map(int, m.groups()[1:6])
    return SimtKernel(layout, bs, p1, p2, p3, nb)


def is_simt_kernel(kernel_name: str) -> bool:
    """Whether ``simt_reduce`` models this kernel."""
    return _SN.search(kernel_name) is not None


def gemmsn_nn_tiles(K: int, threads: int, tile: int | None = None) -> list[list[tuple[int, int]]]:
    """gemmSN_NN: per K-thread, its tiles ([start, end) K ranges) in accumulation order."""
    tile = tile or 512 // threads
    per = -(-K // threads)
    out = []
    for t in range(threads):
        s0, e0 = min(t * per, K), min((t + 1) * per, K)
        out.append([(s, min(s + tile, e0)) for s in range(s0, e0, tile)])
    return out


def _chains(P: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Fresh FFMA chains: ``P`` [R, C, K] exact products (float64), ``idx`` [..., L] K positions in chain
    order (-1: no term).  Returns [R, C, ...] FP32 values (as float64)."""
    R, C, K = P.shape
    Pp = np.concatenate([P, np.zeros((R, C, 1))], axis=2)  # position -1 -> a zero product: adds nothing
    acc = np.zeros((R, C) + idx.shape[:-1])
    for s in range(idx.shape[-1]):
        acc = _fp32_fma(Pp[:, :, idx[..., s]], 1.0, acc)
    return acc


def _sum32(x: np.ndarray, axis: int) -> np.ndarray:
    """In-order FP32 sum along ``axis`` (each addition RNE)."""
    x = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    acc = x[..., 0].astype(np.float32)
    for i in range(1, x.shape[-1]):
        acc = acc + x[..., i].astype(np.float32)
    return acc.astype(np.float64)


def _nn(P: np.ndarray, kern: SimtKernel) -> np.ndarray:
    K = P.shape[2]
    tiles = gemmsn_nn_tiles(K, kern.k_threads, kern.tile)
    n_tiles = max(len(t) for t in tiles)
    L = max([e - s for th in tiles for s, e in th] + [1])
    idx = -np.ones((kern.k_threads, max(n_tiles, 1), L), np.int64)
    for t, th in enumerate(tiles):
        for j, (s, e) in enumerate(th):
            idx[t, j, : e - s] = np.arange(s, e)
    partial = _chains(P, idx)  # [R, C, threads, tiles]; a missing tile is +0 and adds nothing
    per_thread = _sum32(np.concatenate([np.zeros(partial.shape[:3] + (1,)), partial], axis=3), 3)
    return _sum32(per_thread, 2)


def _tn(P: np.ndarray, kern: SimtKernel) -> np.ndarray:
    K, lanes, g = P.shape[2], kern.k_threads, kern.tile
    per_lane = -(-K // lanes)
    groups = -(-per_lane // g)
    k = np.arange(groups * g * lanes).reshape(groups, g, lanes)  # k = lane + lanes * (position in lane)
    idx = np.where(k < K, k, -1).transpose(2, 0, 1)  # [lane, group, position]
    partial = _chains(P, idx)  # [R, C, lanes, groups]
    per_lane_acc = _sum32(np.concatenate([np.zeros(partial.shape[:3] + (1,)), partial], axis=3), 3)
    return _sum32(per_lane_acc, 2)


def simt_reduce(kernel_name: str, A, B) -> np.ndarray:
    """The FP32 accumulators [R, C] (float64 holding FP32 values) the kernel computes for ``A`` [R, K] rows
    and ``B`` [K, C] columns (any rows / columns of the call: the order depends only on K)."""
    kern = parse(kernel_name)
    a = np.asarray(A, np.float64)
    b = np.asarray(B, np.float64)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"K mismatch: A {a.shape}, B {b.shape}")
    R, K = a.shape
    if K == 0:
        return np.zeros((R, b.shape[1]))
    step = max(1, _BLOCK // max(1, R * K))
    out = []
    for c0 in range(0, b.shape[1], step):
        P = a[:, None, :] * b[:, c0:c0 + step].T[None, :, :]  # exact: 24 + 24 bits in float64
        out.append(_nn(P, kern) if kern.layout == "NN" else _tn(P, kern))
    return np.concatenate(out, axis=1) if out else np.zeros((R, 0))


def simt_gemm(kernel_name: str, A, B, *, out_format: str, alpha: float = 1.0, beta: float = 0.0, C=None,
              bias=None) -> np.ndarray:
    """The kernel's output: ``simt_reduce`` then ``cvt(fma(beta, C, alpha * acc))`` (a bias is C with
    beta = 1, as torch passes it to cuBLAS) in the output format.

    >>> name = "gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>"
    >>> simt_gemm(name, np.ones((1, 4), np.float32), np.ones((4, 2), np.float32), out_format="fp32",
    ...           bias=np.array([0.5, 1.0])).tolist()
    [[4.5, 5.0]]
    """
    acc = simt_reduce(kernel_name, A, B)
    if bias is not None:
        C, beta = np.broadcast_to(np.asarray(bias, np.float64).reshape(1, -1), acc.shape), 1.0
    if C is None or beta == 0:
        return _epilogue(Structure("gemmSN"), acc, out_format, alpha=alpha)
    return _epilogue(Structure("gemmSN", epilogue="bx"), acc, out_format, alpha=alpha, beta=beta,
                     C=np.broadcast_to(np.asarray(C, np.float64), acc.shape))
