"""cuBLAS's SIMT small-M kernels (``gemmSN_NN_kernel``, ``gemmSN_TN_kernel``): their FP32 summation order.

Identified from the H100 bit captures (``lab/device_library/probe_simt.py``; cuBLAS 13.1, docs/gemm.md).
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
  A partial last tile is dealt the same way (device probe, K = 1000: 2048/2048 FPRev queries exact).

The gemv kernels (FPRev device probe ``lab/device_library/probe_simt_device.py``, H100, then the captures).
For torch's ``[1, K] @ [K, N]`` the kernel computes N outputs, each a K-dot; ``lanes`` (threads per output)
is a launch choice, ``2**L / rows per CTA`` with ``rows = next_pow2(ceil(N / (ctas / grid_z)))`` (``L``: the
template's log2 of the CTA size; ``gemvx_lanes``):

* ``internal::gemvx::kernel<I, I, ..., false, true, false, false, L, false>`` (matrix not transposed:
  torch.matmul's ``[1, K] @ [K, N]``): element k goes to lane ``(k // W) % lanes`` (``W = 64`` for int
  indices, ``W = 1`` for the long-index instantiation); each lane one FFMA chain in K order (no fresh
  tiles); the lanes reduced by a halving tree (lane i + lane i + n/2, n/2 = lanes/2, ..., 1: shared memory).
  Short dots are split in two halves (H100 captures, 2 and 8 lanes, K = 7..65: ``W = ceil(K / 2)``, e.g.
  ``(k0..k3) + (k4..k6)``), so the int instantiation's ``W`` is ``min(64, ceil(K / 2))``; with a whole warp per
  output (32 lanes: K = 384..512) elements are dealt one by one (``W = 1``).  Pinned (``modelled``) for
  K <= 65 at up to 8 lanes and for at least 64 elements per lane below 32 lanes; at 16 lanes and K = 200..257
  no run length reproduces the captures (flagged).
  With ``splitKreduce`` (grid z = S > 1) each of S slices of ``ceil(K / S)`` (rounded up to 4) is such a
  dot from +0 and the reduce kernel sums the slices in order, ``((s0 + s1) + s2) ...``, then the epilogue.
* ``gemvx::kernel<..., false, true, true, false, L, false>`` (transposed: F.linear's weight, bmm with N = 1):
  ``lanes`` lanes per output (a warp for L = 7), element k to lane ``(k // W) % lanes``: for short dots
  (``ceil(K / lanes) <= 8``) each lane takes one contiguous run, ``W`` the power of two covering ``K / lanes``
  (H100 captures: K = 64, 100, 256 at 32 lanes; K = 64 at 8 lanes, L = 6), for long ones ``W = 1`` (K = 2048,
  8192); one FFMA chain per lane, a halving (xor-shuffle) tree.  Pinned for at most 4 or exactly 8 elements per
  lane, or at least 64 (L = 7), and for K = 64 (L = 6).  A bias joins after the reduction:
  ``cvt(fma(1, bias, acc))`` (bias into lane 0 first: rejected).
* ``gemvNSP_kernel<..., 1, 32, 4, 1024, false>``: 32 lanes, runs of 4 consecutive elements per lane
  (lane ``(k // 4) % 32``), one chain per lane, halving tree (only K = 64 measured).
* ``gemv2T_kernel_val<int, int, h, h, h, float, 128, 16, 4, 4, ..>``: 16 lanes (k to lane ``k % 16``),
  each lane's consecutive groups of 32 elements (one 512-element K tile) fresh FFMA chains from +0 added to
  the lane's accumulator in order, the 16 lanes summed in lane order (as gemmSN_TN with 32-element groups).
* ``sgemm_largek_lds64<tA, tB, ...>`` (after ``Memset`` + ``scal_kernel``): grid z = S slices of
  ``ceil(K / S)`` rounded up to 8 (the last shorter); each slice one FFMA chain in K order; the slices are
  added into the zeroed output strictly in slice order (semaphores: deterministic, no atomics race):
  ``((0 + s0) + s1) + ...``; F.linear's bias is added by the separate epilogue kernel afterwards.

Not identified: ``gemvx::kernel<..., true, true, false, false, 7, false>`` (``std::enable_if<true>``,
BF16 calls only): every candidate order reproduces its 3 captured BF16 calls, so ``is_simt_kernel`` is False.

Evidence (calls whose sampled outputs all reproduce bit-exactly / captured calls with an FP32 output,
the only ones that can tell orders apart): NN 19/19 (P = 4: K = 7..11008; P = 2: K = 7..1600), TN 4/4
(K = 768..11008); the BF16/FP16-output calls (22 more) reproduce too.  gemv families (probe queries exact;
captured calls exact at 16 x 16 samples / FP32-output captured calls): gemvx N 6 shapes (all queries) and
11/11 FP32 + 4/4 BF16/FP16 calls; gemvx T 2 shapes, 4/4 FP32 + 2/2 BF16/FP16; gemvNSP 64/64, 2/2;
gemv2T 50257/50257 queries, 2/2 FP16 calls (indistinguishable); largek 5120/5120 queries, 5/5 FP32 calls.

    >>> import numpy as np
    >>> name = "void gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, false, cublasGemvTensorStridedBatched<float const>>"
    >>> A = np.ones((2, 9), np.float32); B = np.ones((9, 3), np.float32)
    >>> simt_reduce(name, A, B).tolist()
    [[9.0, 9.0, 9.0], [9.0, 9.0, 9.0]]
    >>> [list(map(list, t)) for t in gemmsn_nn_tiles(600, 4)]
    [[[0, 128], [128, 150]], [[150, 278], [278, 300]], [[300, 428], [428, 450]], [[450, 578], [578, 600]]]
    >>> gx = "internal::gemvx::kernel<int, int, float, float, float, float, false, true, false, false, 9, false, x>"
    >>> gemvx_lanes(gx, 28672, 224), modelled(gx, 768, lanes=4), modelled(gx, 100, lanes=4)
    (4, True, False)
    >>> simt_reduce(gx, np.ones((1, 300), np.float32), np.ones((300, 2), np.float32), lanes=4).tolist()
    [[300.0, 300.0]]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..plan import interpret
from ..plan.nodes import FFMAChain, Node, OrderedSum

_SN = re.compile(r"gemmSN_(NN|TN)_kernel<float, (\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (true|false)")
_T = r"[^,<>]+"  # one type argument
_GEMVX = re.compile(rf"gemvx::kernel<(int|long), (?:int|long), {_T}, {_T}, {_T}, {_T}, (true|false), (true|false), "
                    r"(true|false), (true|false), (\d+), (true|false)")
_NSP = re.compile(rf"gemvNSP_kernel<{_T}, {_T}, {_T}, {_T}, (\d+), (\d+), (\d+), (\d+), (true|false)")
_G2T = re.compile(rf"gemv2T_kernel_val<{_T}, {_T}, {_T}, {_T}, {_T}, {_T}, (\d+), (\d+), (\d+), (\d+), ")
_LARGEK = re.compile(r"sgemm_largek_lds64<(true|false), (true|false), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+)>")


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


def _gemvx_flags(kernel_name: str):
    """(long indices, transposed, log2 CTA size) of an identified gemvx activity name, else None."""
    m = _GEMVX.search(kernel_name)
    if m is None or m.group(2) != "false":  # the first flag true (std::enable_if<true>): not identified
        return None
    return m.group(1) == "long", m.group(4) == "true", int(m.group(6))


def family(kernel_name: str) -> str | None:
    """The SIMT family of an activity name: gemmSN_NN, gemmSN_TN, gemvx_N, gemvx_T, gemvNSP, gemv2T, largek.

    >>> family("void sgemm_largek_lds64<false, false, 6, 3, 4, 5, 2, 64>(float*, ...)")
    'largek'
    """
    m = _SN.search(kernel_name)
    if m is not None:
        return f"gemmSN_{m.group(1)}"
    g = _gemvx_flags(kernel_name)
    if g is not None:
        return "gemvx_T" if g[1] else "gemvx_N"
    for fam, rx in (("gemvNSP", _NSP), ("gemv2T", _G2T), ("largek", _LARGEK)):
        if rx.search(kernel_name):
            return fam
    return None


def is_simt_kernel(kernel_name: str) -> bool:
    """Whether ``simt_reduce`` models this kernel (gemmSN, identified gemvx / gemvNSP / gemv2T, largek)."""
    return family(kernel_name) is not None


def modelled(kernel_name: str, K: int, slices: int = 1, lanes: int | None = None) -> bool:
    """Whether the kernel's summation structure was verified bit-exactly (device probe and captures) for
    this K (``slices``: the split-K grid z of gemvx + splitKreduce, whose slice rounding is pinned only
    where ``ceil(K / slices)`` is a multiple of 4; ``lanes``: gemvx's threads per output, whose run length
    is pinned only for some dot lengths per lane -- see the module's notes).

    >>> modelled("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>", 1000)
    True
    >>> modelled("void gemvNSP_kernel<float, float, float, float, 1, 32, 4, 1024, false, x>", 256)
    False
    """
    fam = family(kernel_name)
    if fam in ("gemmSN_NN", "gemmSN_TN", "largek"):
        return True
    if fam == "gemvx_N":
        per = -(-K // max(1, slices))
        short = lanes is not None and lanes <= 8 and per <= 65  # halves: captured at 2 and 8 lanes, K = 7..65
        long_ = lanes is not None and lanes < 32 and per >= 64 * lanes  # runs of 64
        return (_gemvx_flags(kernel_name)[0] or short or long_) and (slices <= 1 or per % 4 == 0)
    if fam == "gemvx_T":
        if slices > 1 or lanes is None:
            return False
        per = -(-K // lanes)
        return (per <= 4 or per == 8 or per >= 64) if _gemvx_flags(kernel_name)[2] >= 7 else K == 64
    if fam == "gemvNSP":
        return tuple(map(int, _NSP.search(kernel_name).groups()[:4])) == (1, 32, 4, 1024) and K <= 64
    if fam == "gemv2T":
        return tuple(map(int, _G2T.search(kernel_name).groups())) == (128, 16, 4, 4) and K % 512 == 0
    return False


def gemvx_lanes(kernel_name: str, n_out: int, ctas: int) -> int:
    """Threads per output of a gemvx launch: ``2**L / rows``, rows per CTA the power of two covering
    ``n_out`` outputs with ``ctas`` CTAs (per matrix: the launch's CTAs / grid z, batch or split slices).

    >>> gemvx_lanes("gemvx::kernel<int, int, float, float, float, float, false, true, true, false, 7, false, x>",
    ...             1024, 256)
    32
    """
    g = _gemvx_flags(kernel_name)
    if g is None:
        raise ValueError(f"not an identified gemvx kernel: {kernel_name[:120]!r}")
    rows = 1
    while rows * ctas < n_out:
        rows *= 2
    return max(1, (1 << g[2]) // rows)


def gemmsn_nn_tiles(K: int, threads: int, tile: int | None = None) -> list[list[tuple[int, int]]]:
    """gemmSN_NN: per K-thread, its tiles ([start, end) K ranges) in accumulation order."""
    tile = tile or 512 // threads
    per = -(-K // threads)
    out = []
    for t in range(threads):
        s0, e0 = min(t * per, K), min((t + 1) * per, K)
        out.append([(s, min(s + tile, e0)) for s in range(s0, e0, tile)])
    return out


def _sum(terms: list, kind: str = "contiguous", from_zero: bool = False) -> Node:
    """Terms added in order (or by a halving tree); one term without a start is itself."""
    if len(terms) == 1 and kind == "contiguous" and not from_zero:
        return terms[0]
    return OrderedSum(tuple(terms), kind, from_zero=from_zero)


def _nn(K: int, kern: SimtKernel) -> Node:
    """gemmSN_NN: per K-thread its tiles' fresh chains added into an accumulator from +0, the threads in order.
    (A thread's accumulator, from +0, is never -0, so its missing tiles and idle steps -- +0 terms -- are left out.)"""
    threads = [_sum([FFMAChain(tuple(range(s, e))) for s, e in th], from_zero=True)
               for th in gemmsn_nn_tiles(K, kern.k_threads, kern.tile) if th]
    return _sum(threads)


def _dealt(K: int, lanes: int, run: int, offset: int = 0) -> list[np.ndarray]:
    """Per lane its K positions in chain order: element k to lane ``(k // run) % lanes``."""
    owner = (np.arange(K) // run) % lanes
    return [np.flatnonzero(owner == t) + offset for t in range(lanes)]


def _lane_groups(K: int, lanes: int, group: int) -> Node:
    """gemmSN_TN / gemv2T: k to lane ``k % lanes``, each lane's consecutive ``group`` elements a fresh chain
    added to the lane's accumulator (from +0) in order, the lanes summed in lane order (missing groups and lanes,
    +0 terms into accumulators that are never -0, left out)."""
    groups = -(-(-(-K // lanes)) // group)
    k = np.arange(groups * group * lanes).reshape(groups, group, lanes)  # [group, position, lane]
    per_lane = []
    for t in range(lanes):
        chains = [FFMAChain(tuple(int(x) for x in k[g, :, t] if x < K)) for g in range(groups) if k[g, 0, t] < K]
        if chains:
            per_lane.append(_sum(chains, from_zero=True))
    return _sum(per_lane)


def _padded_lanes(cols: list[np.ndarray], width: int) -> list[FFMAChain]:
    """One chain per lane, padded with idle +0 products to ``width`` steps (they turn a lane's -0 into +0, which a
    halving tree can tell apart)."""
    return [FFMAChain(tuple(int(x) for x in c), width - len(c)) for c in cols]


def _gemvx_run(trans: bool, long_idx: bool, K: int, lanes: int) -> int:
    """Consecutive elements per lane turn (``W``) of a gemvx dot of ``K`` elements."""
    if trans:  # short dots: each lane a contiguous run (a power of two covering K / lanes); long ones dealt by element
        per = -(-K // lanes)
        return 1 << (per - 1).bit_length() if per <= 8 else 1
    if long_idx or lanes >= 32:  # a whole warp per output deals element by element (K = 384..512 captures)
        return 1
    return min(64, -(-K // 2))  # short dots split in two halves (K = 7..65 captures), long ones in runs of 64


def _gemvx_plan(kernel_name: str, K: int, lanes: int, slices: int) -> Node:
    long_idx, trans, _ = _gemvx_flags(kernel_name)
    per = -(-(-(-K // max(1, slices))) // 4) * 4 if slices > 1 else K
    dealt = [_dealt(min(per, K - s0), lanes, _gemvx_run(trans, long_idx, min(per, K - s0), lanes), s0)
             for s0 in range(0, K, per)]
    width = max(max(len(c) for c in d) for d in dealt)  # every slice's lanes step as long as the longest
    parts = [_sum(_padded_lanes(d, max(width, 1)), "halving") for d in dealt]
    return _sum(parts)  # splitKreduce: the slices in order


def _largek(K: int, slices: int) -> Node:
    per = -(-(-(-K // slices)) // 8) * 8
    return _sum([FFMAChain(tuple(range(s0, min(K, s0 + per))), s0 + per - min(K, s0 + per))
                 for s0 in range(0, K, per)])  # added into the zeroed output in slice order


@lru_cache(maxsize=256)
def reduction(kernel_name: str, K: int, lanes: int | None = None, slices: int = 1) -> Node:
    """The kernel's K reduction as a plan: FFMA chains over its lanes' K columns and the ordered sums that join them
    (``plan.interpret`` runs it; ``explain()`` prints it).  ``lanes``: gemvx's threads per output; ``slices``: the
    split-K grid z of gemvx + splitKreduce or of sgemm_largek_lds64.

    >>> from tcnumerics.plan import Plan
    >>> print(Plan(reduction("sgemm_largek_lds64<false, false, 6, 3, 4, 5, 2, 64>", 20, slices=2)).explain())
    ordered sum (contiguous) of 2 terms, FP32 RNE additions in order
      FFMA chain over K[0:16) from +0
      FFMA chain over K[16:20) from +0, then 12 +0 products
    """
    fam = family(kernel_name)
    if fam is None:
        raise ValueError(f"not a modelled SIMT kernel: {kernel_name[:120]!r}")
    if K == 0:  # no products: +0
        return FFMAChain(())
    if fam.startswith("gemmSN"):
        kern = parse(kernel_name)
        return _nn(K, kern) if kern.layout == "NN" else _lane_groups(K, kern.k_threads, kern.tile)
    if fam.startswith("gemvx"):
        if lanes is None:
            raise ValueError("gemvx: pass lanes= (gemvx_lanes from the launch's CTA count)")
        return _gemvx_plan(kernel_name, K, lanes, slices)
    if fam == "gemvNSP":
        _, nsp_lanes, run, _ = map(int, _NSP.search(kernel_name).groups()[:4])
        cols = _dealt(K, nsp_lanes, run)
        return _sum(_padded_lanes(cols, max(len(c) for c in cols)), "halving")
    if fam == "gemv2T":
        lanes2t = int(_G2T.search(kernel_name).group(2))
        return _lane_groups(K, lanes2t, 512 // lanes2t)
    if slices < 1:
        raise ValueError("largek: pass slices= (the launch's grid z)")
    return _largek(K, slices)


def order(kernel_name: str, lanes: int | None = None, slices: int = 1) -> str:
    """The FP32 summation order ``simt_reduce`` follows for this kernel, in words (a plan's ``explain()``).

    >>> order("sgemm_largek_lds64<false, false, 6, 3, 4, 5, 2, 64>", slices=3)
    'largek: 3 K slices, each one FFMA chain from +0, added in slice order (FP32 RNE)'
    """
    fam = family(kernel_name)
    if fam is None:
        raise ValueError(f"not a modelled SIMT kernel: {kernel_name[:120]!r}")
    if fam == "gemmSN_NN":
        k = parse(kernel_name)
        return (f"{fam}: K in {k.k_threads} contiguous ranges, each FFMA chains of {k.tile} from +0 added in order, "
                "the ranges added in order (FP32 RNE)")
    if fam in ("gemmSN_TN", "gemv2T"):
        n = parse(kernel_name).k_threads if fam == "gemmSN_TN" else int(_G2T.search(kernel_name).group(2))
        g = parse(kernel_name).tile if fam == "gemmSN_TN" else 512 // n
        return (f"{fam}: element k to lane k mod {n}, each lane's FFMA chains of {g} from +0 added in order, "
                "the lanes added in order (FP32 RNE)")
    if fam.startswith("gemvx"):
        split = f"; {slices} K slices added in order (splitKreduce)" if slices > 1 else ""
        return (f"{fam}: K dealt to {lanes} lanes in runs (the run length from K), an FFMA chain per lane, a halving "
                f"tree over the lanes{split}")
    if fam == "gemvNSP":
        _, n, run, _ = map(int, _NSP.search(kernel_name).groups()[:4])
        return f"gemvNSP: K dealt to {n} lanes in runs of {run}, an FFMA chain per lane, a halving tree over the lanes"
    return f"largek: {slices} K slices, each one FFMA chain from +0, added in slice order (FP32 RNE)"


def simt_reduce(kernel_name: str, A, B, *, lanes: int | None = None, slices: int = 1) -> np.ndarray:
    """The FP32 accumulators [R, C] (float64 holding FP32 values) the kernel computes for ``A`` [R, K] rows
    and ``B`` [K, C] columns (any rows / columns of the call: the order depends only on K and the launch):
    ``reduction``'s plan, run by the interpreter.

    ``lanes``: gemvx's threads per output (``gemvx_lanes``); ``slices``: the split-K grid z of gemvx +
    splitKreduce or of sgemm_largek_lds64 (required there)."""
    if family(kernel_name) is None:
        raise ValueError(f"not a modelled SIMT kernel: {kernel_name[:120]!r}")
    a, b = np.asarray(A, np.float64), np.asarray(B, np.float64)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"K mismatch: A {a.shape}, B {b.shape}")
    if a.shape[1] == 0:
        return np.zeros((a.shape[0], b.shape[1]))
    node = reduction(kernel_name, a.shape[1], lanes, slices)
    return np.asarray(interpret.run(node, {"A": a, "B": b}), np.float64)
