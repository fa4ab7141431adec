"""cuBLAS's launch at a GEMM shape the launch table never measured: a k-nearest-neighbour prediction.

The output bits of an nvjet GEMM depend on its epilogue and split-K slice count S (not on its tile shape,
cluster or raster order); those of CUTLASS 2.x BF16/FP16 fallbacks on their chain (k8 or k16), K-tile, S and
reduction (``cutlass_half``); those of other kernels (FP32/TF32 xmma, SIMT) on the kernel and its grid z.  For a
call whose (N, K) pair the table never measured, ``predict_launch`` (defaults ``Params()``):

1. takes the k = 5 launches of the same call kind and batch nearest in ``(|dlog2 N| + |dlog2 K|) + 4 |dlog2 M|``,
   among those whose N and K share the call's alignment class (a multiple of 8 or not; for BF16/FP16 kinds the
   power of two dividing them, up to 8) -- and M's, where A is passed transposed;
2. lets them vote, weight 1 / (distance + 0.25), on the bits *class* above (nvjet: split or not + epilogue),
   and keeps the nearest voter of the winning class as the launch;
3. copies that voter's S (its CTAs over its tiles for nvjet, grid z for the rest); the "wave" rule (S = one wave
   of CTAs // tiles, at least 22 K-tiles a slice) is a ``Params`` option.

Why a vote of neighbours: cuBLAS's kernel choice is a heuristic nobody published, but calls of one kind at nearby
shapes mostly run the same kernel class, and the bits depend on the class and S, not on the exact tile.  Scored
leave-(N, K)-pair-out on the launch table (``lab/device_library/fit_unseen.py --per-kind 150``), the defaults pick
the right bits class for about nine launches in ten, against under six for the grid-corner predictor; each table's
figures are in docs/gemm.md ("The k-NN's evaluations").  A prediction: plans built from it stay flagged not modelled.

    >>> from tcnumerics.library.calls import Call
    >>> c = Call("matmul", "fp16", "fp16", 7, 2048, 11008)
    >>> L = predict_launch(c, hide=(c.N, c.K))  # as if (2048, 11008) had never been measured
    >>> "splitK" in L.main, launches.nvjet_split_count(L, c) > 1
    (True, True)
    >>> c = Call("linear", "fp16", "fp16", 22, 7168, 28672, b_t=True, bias=True)
    >>> L = predict_launch(c, hide=(c.N, c.K))
    >>> "_bias_" in L.main, launches.nvjet_split_count(L, c)
    (True, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import cutlass_half, gpus, launches
from .calls import Call
from .kernel_names import NVJET as _NVJET, nvjet_epilogue

_M_BITS, _B_BITS, _K_BITS = launches.KEY_BITS.M, launches.KEY_BITS.b, launches.KEY_BITS.K  # the key's packing
_M_MASK, _B_MASK, _K_MASK = (1 << _M_BITS) - 1, (1 << _B_BITS) - 1, (1 << _K_BITS) - 1
_KEY_STRIDE = float(_M_BITS + 1)  # > log2 of the largest M


class Params(NamedTuple):
    """The predictor's knobs (chosen by group k-fold over (N, K) pairs in ``lab/device_library/fit_unseen.py``)."""

    k: int = 5  # neighbours that vote on the kernel
    w_m: float = 4.0  # weight of |log2 M| against |log2 N| + |log2 K| in the distance
    s_rule: str = "copy"  # how S follows from the voted kernel: "copy", "kps", "ctas", "wave"
    min_kps: int = 22  # "wave": fewest K-tiles per slice
    vote_on: str = "class"  # "kernel": the main kernel's name; "class": nvjet split or not + epilogue, else the name
    align: str = "auto"  # N and K vote only with launches of their alignment class: "binary", a multiple of 8 or
    # not; "fine", the power of two dividing them, up to 8 (CUTLASS's align1/2/4 fallbacks); "auto": fine for
    # BF16/FP16 kinds, binary for the rest (FP32's choice does not follow align 1/2/4: see the module docstring)


@dataclass(frozen=True)
class KindData:
    """One call kind's launches, decoded for neighbour search: shape, main kernel id, split count S."""

    M: np.ndarray
    N: np.ndarray
    K: np.ndarray
    b: np.ndarray
    row: np.ndarray  # index into the table's arrays of this kind (signature, ctas, grid z)
    main: np.ndarray  # main kernel id (into ``names``)
    S: np.ndarray  # nvjet slice count (1 unsplit, 0 unreadable); grid z for other kernels
    lm: np.ndarray  # log2 M, N, K
    ln: np.ndarray
    lk: np.ndarray
    names: tuple[str, ...]
    tiles: np.ndarray  # per main id: (tile N, tile M, K-tile, cluster x, cluster y, splitK) ; zeros if not nvjet
    klass: np.ndarray  # per main id: what the bits depend on apart from S (nvjet: split or not, epilogue)
    fmt: str  # the kind's input format
    row_class: np.ndarray  # per launch: ``klass``, but for CUTLASS 2.x BF16/FP16 kernels what their bits depend on
    # (``cutlass_half``: chain k8 or k16, K-tile, slice count, reduction), not the tile or alignment in the name
    pairs: Pairs  # the launches grouped by (N, K, batch): the neighbour search's index
    gpu: str  # the GPU model whose table this is: its wave caps a split rule's S (``gpus.wave_slices``)


@dataclass(frozen=True)
class Pairs:
    """The measured (N, K, batch) triples of one kind; launches ``start[i]:start[i + 1]`` are triple i's, in
    ascending M (the table's points are sorted by (N, K, batch, M))."""

    N: np.ndarray
    K: np.ndarray
    b: np.ndarray
    ln: np.ndarray
    lk: np.ndarray
    start: np.ndarray
    order_key: np.ndarray  # per launch: pair index * _KEY_STRIDE + log2 M, ascending (bisection within a pair)

    @classmethod
    def of(cls, keys: np.ndarray, N: np.ndarray, K: np.ndarray, b: np.ndarray, lm: np.ndarray) -> Pairs:
        base = keys >> _M_BITS
        if len(base) > 1 and np.any(base[1:] < base[:-1]):
            raise ValueError("launch points are not sorted by (N, K, batch, M)")
        first = np.flatnonzero(np.r_[True, base[1:] != base[:-1]])
        start = np.r_[first, len(keys)]
        pair = np.repeat(np.arange(len(first)), np.diff(start))
        return cls(N[first], K[first], b[first], np.log2(N[first]), np.log2(K[first]), start,
                   pair * _KEY_STRIDE + lm)


def _main_of(signature: str) -> str:
    ks = signature.split(" | ")
    return next((k for k in ks if launches.is_gemm_kernel(k)), ks[0])


def _tile_params(name: str) -> tuple[int, ...]:
    m = _NVJET.search(name)
    return (*(int(x) for x in m.groups()), int("splitK" in name)) if m else (0,) * 6


def nvjet_tile_count(p: tuple[int, ...] | np.ndarray, M, N, b=1):
    """Output tiles (rounded to clusters) of an nvjet kernel with tile parameters ``p`` over N x M (numpy-friendly)."""
    tm, tn, _, cx, cy = (int(x) for x in p[:5])
    return -(-(-(-N // tm)) // cx) * cx * (-(-(-(-M // tn)) // cy) * cy) * b


_DECODED: dict[tuple[str, str], tuple[object, KindData]] = {}


def kind_data(kind: str, gpu: str | None = None) -> KindData | None:
    """The decoded launches of one call kind in model ``gpu``'s table (default: the default model's), or None if
    the table has no such kind (cached per loaded table: a replaced or hidden table is decoded afresh)."""
    gpu = gpu or gpus.default_gpu()
    t = launches.table(gpu)
    arrays = t.get("kinds", {}).get(kind)
    if arrays is None:
        return None
    hit = _DECODED.get((gpu, kind))
    if hit is None or hit[0] is not arrays:
        _DECODED[(gpu, kind)] = hit = (arrays, _decode(t, arrays, kind.split("|")[1], gpu))
    return hit[1]


def voting_table(c: Call) -> str | None:
    """The model whose launches vote for ``c``: the last of the call's sources holding its kind (the model it
    borrows from, shown to agree, where it has one -- the larger table), or None."""
    have = [g for g in launches.sources(c) if c.kind() in launches.table(g).get("kinds", {})]
    return have[-1] if have else None


def _decode(t: dict, runs: launches.KindRuns, fmt: str, gpu: str) -> KindData:
    keys, sig, ctas, gz = runs.points()
    M, b = keys & _M_MASK, keys >> _M_BITS & _B_MASK
    K, N = keys >> (_M_BITS + _B_BITS) & _K_MASK, keys >> (_M_BITS + _B_BITS + _K_BITS)
    uniq, inv = np.unique(sig, return_inverse=True)
    mains = [_main_of(t["signatures"][s]) for s in uniq]
    names = tuple(sorted(set(mains)))
    ids = {n: i for i, n in enumerate(names)}
    main = np.array([ids[m] for m in mains], dtype=np.int32)[inv]
    tiles = np.array([_tile_params(n) for n in names], dtype=np.int64).reshape(len(names), 6)
    p = tiles[main]
    S = gz.astype(np.int64).copy()
    nv = p[:, 0] > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        tm, tn, cx, cy = (np.maximum(p[:, i], 1) for i in (0, 1, 3, 4))
        tc = -(-(-(-N // tm)) // cx) * cx * (-(-(-(-M // tn)) // cy) * cy) * b
    split = nv & (p[:, 5] == 1)
    readable = split & (ctas % tc == 0) & (ctas // tc >= 2)
    S[nv] = 1
    S[split] = np.where(readable[split], ctas[split] // tc[split], 0)
    row = np.arange(len(keys))
    classes = [("nvjet", "splitK" in n, nvjet_epilogue(n) or "") if tiles[i][0] else n
               for i, n in enumerate(names)]
    cid = {c: i for i, c in enumerate(dict.fromkeys(classes))}
    klass = np.array([cid[c] for c in classes], dtype=np.int32)
    lm = np.log2(np.maximum(M, 1))
    row_class = _row_classes(t, sig, gz, klass[main]) if fmt in ("bf16", "fp16") else klass[main]
    return KindData(M, N, K, b, row, main, S, lm, np.log2(N), np.log2(K), names, tiles, klass, fmt, row_class,
                    Pairs.of(keys, N, K, b, lm), gpu)


def _row_classes(t: dict, sig: np.ndarray, gz: np.ndarray, klass: np.ndarray) -> np.ndarray:
    """Per launch: its kernel class, or for a CUTLASS 2.x BF16/FP16 launch (chain, K-tile, grid z, reduction),
    as ids after every ``klass`` id."""
    combo, inv = np.unique(sig.astype(np.int64) << 16 | gz.astype(np.int64) & 0xFFFF, return_inverse=True)
    ids: dict[tuple, int] = {}
    of_combo = np.full(len(combo), -1, np.int64)
    first = int(klass.max()) + 1 if len(klass) else 0
    for j, c in enumerate(combo.tolist()):
        text = t["signatures"][c >> 16]
        f = cutlass_half.parse_name(_main_of(text))
        if f is None:
            continue
        kernels = tuple(text.split(" | "))
        reduce = (f"reduce-{cutlass_half.partial_format(launches.Launch(kernels, 0, 0))}" if "splitKreduce" in text
                  else "memset" if "Memset" in text else "")
        key = ("k8" if f["op"] == "s1688" else "k16", cutlass_half.k_tile_of(f, "bf16"), c & 0xFFFF, reduce)
        of_combo[j] = first + ids.setdefault(key, len(ids))
    per_row = of_combo[inv]
    return np.where(per_row >= 0, per_row, klass)


def alignment(x, fine: bool = False):
    """The alignment class of a dimension: a multiple of 8 or not; ``fine``: the power of two dividing it, up to 8."""
    x = np.asarray(x)
    return np.minimum(x & -x, 8) if fine else (x % 8 == 0)


def split_for(kd: KindData, j: int, M: int, N: int, K: int, b: int, params: Params) -> int:
    """S for the call with the kernel of measured launch ``j`` (a neighbour): unsplit kernels 1; split ones by
    ``params.s_rule`` -- the neighbour's own S, its K-tiles per slice, its CTA count, or one wave of slices.
    (Not ``split_rule.formula_split``: these follow a measured neighbour, and were scored in ``fit_unseen.py``.)"""
    p = kd.tiles[kd.main[j]]
    if not p[0]:
        return int(kd.S[j])
    if not p[5]:
        return 1
    kt = -(-K // int(p[2]))
    tiles = nvjet_tile_count(p, M, N, b)
    smax = max(2, gpus.wave_slices(tiles, kd.gpu, cluster=int(p[3] * p[4])))
    Sj = int(kd.S[j])
    if params.s_rule == "copy" and Sj:
        S = Sj
    elif params.s_rule == "kps" and Sj:
        kps = -(-(-(-int(kd.K[j]) // int(p[2]))) // Sj)
        S = min(smax, -(-kt // kps))
    elif params.s_rule == "ctas" and Sj:
        S = min(smax, int(kd.S[j]) * int(nvjet_tile_count(p, int(kd.M[j]), int(kd.N[j]), int(kd.b[j]))) // tiles)
    else:
        S = min(smax, kt // params.min_kps)
    return max(2, min(S, kt))


def neighbours(kd: KindData, M: int, N: int, K: int, b: int, k: int, w_m: float,
               hide: tuple[int, int] | None = None, m_aligned_class: bool = False,
               fine_alignment: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The k measured launches nearest (M, N, K) (same batch; ``hide``: an (N, K) pair left out), nearest first
    (ties: lower row first), and their distances ``(|dlog2 N| + |dlog2 K|) + w_m |dlog2 M|`` (summed in
    that order, so both searches round alike).

    Searched by (N, K) pair: the nearest pairs' launches bound the k-th distance; then only pairs nearer than
    that bound, and in each only the M window within it, are read -- the same answer as scanning every
    launch (``neighbours_by_scan``); 2.6 ms against 79 ms a query over 18 kinds of up to a million points."""
    pr = kd.pairs
    dp = np.abs(pr.ln - math.log2(N)) + np.abs(pr.lk - math.log2(K))
    bad = pr.b != b
    # operands whose K or N is not a multiple of 8 are misaligned for TMA: cuBLAS then runs other kernel families,
    # so only launches of the same alignment class vote
    f = fine_alignment
    bad |= (alignment(pr.N, f) != alignment(N, f)) | (alignment(pr.K, f) != alignment(K, f))
    if hide is not None:
        bad |= (pr.N == hide[0]) & (pr.K == hide[1])
    ok = np.flatnonzero(~bad)
    lm = math.log2(max(M, 1))
    take = 8
    while True:  # the nearest pairs' launches give an upper bound on the k-th distance
        near = ok[np.argpartition(dp[ok], take - 1)[:take]] if take < len(ok) else ok
        _, d = _pair_distances(kd, near, dp, lm, w_m, M, m_aligned_class, math.inf)
        if len(d) >= k or len(near) == len(ok):
            break
        take *= 4
    bound = np.partition(d, k - 1)[k - 1] if len(d) >= k else math.inf
    idx, d = _pair_distances(kd, ok[dp[ok] <= bound], dp, lm, w_m, M, m_aligned_class, bound)
    keep = np.lexsort((idx, d))[:k]
    return idx[keep], d[keep]


def _pair_distances(kd: KindData, pairs: np.ndarray, dp: np.ndarray, lm: float, w_m: float, M: int,
                    m_aligned_class: bool, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows and distances of the launches of ``pairs`` that may lie within ``bound``: in each pair the M window
    ``|dlog2 M| <= (bound - pair distance) / w_m``, found by bisection (M ascends within a pair)."""
    pr = kd.pairs
    lo, hi = pr.start[pairs], pr.start[pairs + 1]
    if math.isfinite(bound) and w_m > 0:
        r = (bound - dp[pairs]) / w_m + 1e-9  # the margin keeps launches at exactly the bound (ties)
        lo = np.maximum(lo, np.searchsorted(pr.order_key, pairs * _KEY_STRIDE + (lm - r)))
        hi = np.minimum(hi, np.searchsorted(pr.order_key, pairs * _KEY_STRIDE + (lm + r), side="right"))
    n = np.maximum(hi - lo, 0)
    rows = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(n.sum())
    pair_dist = np.repeat(dp[pairs], n)
    if m_aligned_class:  # A passed transposed: its contiguous side is M
        same = (kd.M[rows] % 8 == 0) == (M % 8 == 0)
        rows, pair_dist = rows[same], pair_dist[same]
    return rows, pair_dist + w_m * np.abs(kd.lm[rows] - lm)


def neighbours_by_scan(kd: KindData, M: int, N: int, K: int, b: int, k: int, w_m: float,
                       hide: tuple[int, int] | None = None, m_aligned_class: bool = False,
                       fine_alignment: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``neighbours`` by the definition: every launch's distance, the k least (ties: lower row first)."""
    d = (np.abs(kd.ln - math.log2(N)) + np.abs(kd.lk - math.log2(K))) + w_m * np.abs(kd.lm - math.log2(max(M, 1)))
    f = fine_alignment
    bad = (kd.b != b) | (alignment(kd.N, f) != alignment(N, f)) | (alignment(kd.K, f) != alignment(K, f))
    if m_aligned_class:
        bad |= (kd.M % 8 == 0) != (M % 8 == 0)
    if hide is not None:
        bad |= (kd.N == hide[0]) & (kd.K == hide[1])
    rows = np.flatnonzero(~bad)
    order = np.lexsort((rows, d[rows]))[:k]
    return rows[order], d[rows[order]]


def predict_index(kd: KindData, M: int, N: int, K: int, b: int, params: Params = Params(),
                  hide: tuple[int, int] | None = None, m_aligned_class: bool = False) -> tuple[int, int] | None:
    """(row of the neighbour whose kernel wins the vote, predicted S); None without neighbours."""
    fine = params.align == "fine" or params.align == "auto" and kd.fmt in ("bf16", "fp16")
    idx, d = neighbours(kd, M, N, K, b, params.k, params.w_m, hide, m_aligned_class, fine)
    if not len(idx):
        return None
    j = vote(kd, idx, d, params.vote_on)
    return j, split_for(kd, j, M, N, K, b, params)


def vote(kd: KindData, idx: np.ndarray, d: np.ndarray, on: str = "kernel") -> int:
    """The row of the nearest neighbour running the kernel (or kernel class) with the most vote weight
    1 / (distance + 0.25) (ties: the nearest neighbour's)."""
    w = 1.0 / (d + 0.25)
    mains = (kd.main[idx] if on == "kernel" else kd.row_class[idx]).tolist()
    score: dict[int, float] = {}
    for i, wi in zip(mains, w.tolist()):
        score[i] = score.get(i, 0.0) + wi
    best = max(score.values())
    pos = next(n for n, i in enumerate(mains) if score[i] >= best - 1e-12)
    return int(idx[pos])


def predict_launch(c: Call, params: Params = Params(), hide: tuple[int, int] | None = None) -> launches.Launch | None:
    """cuBLAS's predicted launch for a call the table did not measure (a prediction: see the module docstring):
    the neighbours' voted kernel (with its memsets and reduction), its CTAs set to tiles x S for nvjet kernels."""
    gpu = voting_table(c)
    kd = kind_data(c.kind(), gpu) if gpu else None
    if kd is None:
        return None
    got = predict_index(kd, c.M, c.N, c.K, c.b, params, hide, m_aligned_class=c.a_t)
    if got is None:
        return None
    j, S = got
    t = launches.table(gpu)
    _, sig, ctas, gz = t["kinds"][c.kind()].points()
    r = int(kd.row[j])
    kernels = tuple(t["signatures"][sig[r]].split(" | "))
    p = kd.tiles[kd.main[j]]
    if p[0]:
        return launches.Launch(kernels, int(nvjet_tile_count(p, c.M, c.N, c.b)) * S, int(gz[r]))
    return launches.Launch(kernels, int(ctas[r]), int(gz[r]))
