"""Identify the FP32 summation structure of cuBLAS's SIMT small-M kernels from the committed H100 captures.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/probe_simt.py [--family gemmSN_NN] \
        [--side 8] [--list]

Collects every captured call (all ``vectors/library/hopper_op_*_h100.npz``) whose main kernel is a
``gemmSN_{NN,TN}_kernel``, ``gemv2T_kernel_val``, ``gemvNSP_kernel``, ``internal::gemvx::kernel`` (the
``std::enable_if`` activity names) or ``sgemm_largek_lds64``, and scores a parametric family of
reduction structures against the captured output bits (calls reproduced bit-exactly / calls).

A hypothesis ``Lanes(T, W, U, fma)``: K is dealt to ``T`` lanes (threads) in runs of ``W`` consecutive
elements (element k goes to lane ``(k // W) % T``; ``W = ceil(K / T)`` gives contiguous chunks); each lane
keeps ``U`` accumulators (the lane's p-th element goes to accumulator ``p % U``) updated in K order with
an FP32 FMA (``fma``) or a rounded multiply then add; a lane's accumulators are then summed (``useq``: in
order, ``utree``: pairwise halving), and the lanes combined (``tree``: lane i + lane i + T/2, halving --
a shared-memory tree or an xor butterfly from the top offset; ``treelo``: neighbours first, xor 1
first; ``seq``: in lane order).  The epilogue is ``cvt(alpha * acc + beta * C)`` variants.

    >>> import numpy as np
    >>> P = np.arange(1, 9, dtype=np.float64).reshape(1, 1, 8)    # products of one output
    >>> float(reduce_lanes(lane_partials(P, Lanes(2, 1, 1, True)), "tree", "useq")[0, 0])
    36.0
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
from dataclasses import dataclass
from itertools import product as iproduct

import numpy as np

FAMILIES = ("gemmSN_NN_kernel", "gemmSN_TN_kernel", "gemv2T_kernel_val", "gemvNSP_kernel", "gemvx::kernel",
            "sgemm_largek_lds64")
_NAME = re.compile(r"(gemmSN_NN_kernel|gemmSN_TN_kernel|gemv2T_kernel_val|gemvNSP_kernel|gemvx::kernel|"
                   r"sgemm_largek_lds64)<(.*?)(?:, cublas|>\()")


def family_of(kernels) -> tuple[str, str, str] | None:
    """(family, template arguments, full name) of the first SIMT kernel in a call's activity list."""
    for k in kernels:
        m = _NAME.search(k)
        if m:
            tmpl = re.sub(r"__nv_bfloat16|__half", "h", m.group(2))
            return m.group(1), tmpl, k
    return None


def collect(pattern: str = "vectors/library/hopper_op_*_h100.npz"):
    """Every captured SIMT call: dicts with capture, record, family, template, launch."""
    from fit_table import call_of
    from replay_survey import load
    from tcnumerics.library.launches import measured_launch

    out = []
    for path in sorted(glob.glob(pattern)):
        index, data = load(path)
        name = os.path.basename(path).removeprefix("hopper_op_").removesuffix("_h100.npz")
        for c in index["records"]:
            if "error" in c:
                continue
            f = family_of(c["kernels"])
            if f is None:
                continue
            L = measured_launch(call_of(c))
            out.append(dict(capture=name, c=c, data=data, family=f[0], tmpl=f[1], kernel=f[2],
                            ctas=L.ctas if L else None, grid_z=L.grid_z if L else None,
                            split_reduce="splitKreduce" in " ".join(c["kernels"])))
    return out


# ---------------------------------------------------------------------------------------------- arithmetic

def fma32(p: np.ndarray, z: np.ndarray) -> np.ndarray:
    """FP32 fma with an exact float64 product ``p`` (a product of two FP32 values): ``round32(p + z)``.

    The float64 sum's error (TwoSum) is folded in as a sticky bit (round to odd), so the final cast to
    FP32 rounds correctly (53 >= 24 + 2)."""
    z = np.asarray(z, np.float64)
    s = p + z
    bp = s - z
    err = (p - bp) + (z - (s - bp))
    odd = (s.view(np.uint64) & np.uint64(1)) == 1
    toward = np.nextafter(s, np.where(err > 0, np.inf, -np.inf))
    return np.where((err != 0) & ~odd, toward, s).astype(np.float32)


@dataclass(frozen=True)
class Lanes:
    """K dealt to T lanes in runs of W; U accumulators per lane; FMA or multiply-then-add."""

    T: int
    W: int
    U: int
    fma: bool


def lane_index(K: int, T: int, W: int) -> np.ndarray:
    """[T, S] K positions of each lane in order (-1: no element)."""
    lanes = (np.arange(K) // W) % T
    cols = [np.flatnonzero(lanes == t) for t in range(T)]
    S = max(len(x) for x in cols)
    idx = -np.ones((T, S), np.int64)
    for t, x in enumerate(cols):
        idx[t, :len(x)] = x
    return idx


def lane_partials(P: np.ndarray, h: Lanes) -> np.ndarray:
    """[R, C, T, U] FP32 accumulators of the lanes over products ``P`` [R, C, K] (exact, float64)."""
    R, C, K = P.shape
    idx = lane_index(K, h.T, h.W)
    Pp = np.concatenate([P, np.zeros((R, C, 1))], axis=2)  # index -1 -> a zero product (adds nothing)
    acc = np.zeros((R, C, h.T, h.U), np.float32)
    for s in range(idx.shape[1]):
        p = Pp[:, :, idx[:, s]]
        u = s % h.U
        if h.fma:
            acc[:, :, :, u] = fma32(p, acc[:, :, :, u])
        else:
            acc[:, :, :, u] = p.astype(np.float32) + acc[:, :, :, u]
    return acc


def tree(x: np.ndarray, axis: int, low: bool = False) -> np.ndarray:
    """Pairwise FP32 reduction over ``axis`` (power of two): halves (i + i + n/2) or neighbours (low)."""
    x = np.moveaxis(x, axis, -1)
    while x.shape[-1] > 1:
        n = x.shape[-1]
        if n % 2:
            x = np.concatenate([x, np.zeros(x.shape[:-1] + (1,), x.dtype)], axis=-1)
            n += 1
        x = (x[..., 0::2] + x[..., 1::2]) if low else (x[..., : n // 2] + x[..., n // 2:])
    return x[..., 0]


def seq(x: np.ndarray, axis: int) -> np.ndarray:
    """In-order FP32 sum over ``axis``."""
    x = np.moveaxis(x, axis, -1)
    acc = x[..., 0].copy()
    for i in range(1, x.shape[-1]):
        acc = acc + x[..., i]
    return acc


def reduce_lanes(acc: np.ndarray, lanes: str, within: str) -> np.ndarray:
    """[R, C] from [R, C, T, U]: a lane's U accumulators first (``useq`` / ``utree``), then the lanes."""
    a = seq(acc, 3) if within == "useq" else tree(acc, 3)
    return seq(a, 2) if lanes == "seq" else tree(a, 2, low=lanes == "treelo")


def chunk_sums(P: np.ndarray, L: int, fma: bool = True) -> np.ndarray:
    """[R, C, n] FP32 chains from +0 over contiguous K chunks of length ``L`` (the last one shorter)."""
    R, C, K = P.shape
    n = -(-K // L)
    Pp = np.concatenate([P, np.zeros((R, C, n * L - K))], axis=2).reshape(R, C, n, L)
    acc = np.zeros((R, C, n), np.float32)
    for s in range(L):
        acc = fma32(Pp[:, :, :, s], acc) if fma else Pp[:, :, :, s].astype(np.float32) + acc
    return acc


def blocks(c: np.ndarray, g: int, inner: str, outer: str = "seq") -> np.ndarray:
    """Chunk sums [R, C, n] -> [R, C]: groups of ``g`` consecutive chunks reduced (``inner``: tree, treelo,
    seq), the group results summed in order (``outer``: seq) or pairwise (tree, treelo)."""
    R, C, n = c.shape
    m = -(-n // g)
    c = np.concatenate([c, np.zeros((R, C, m * g - n), np.float32)], axis=2).reshape(R, C, m, g)
    r = seq(c, 3) if inner == "seq" else tree(c, 3, low=inner == "treelo")
    return seq(r, 2) if outer == "seq" else tree(r, 2, low=outer == "treelo")


def segment_sums(P: np.ndarray, segs: list[tuple[int, int]], fma: bool = True) -> np.ndarray:
    """[R, C, len(segs)] FP32 chains from +0 over the K ranges ``segs`` ([start, end) each)."""
    R, C, K = P.shape
    L = max([e - s for s, e in segs] + [1])
    idx = np.full((len(segs), L), K)
    for j, (s, e) in enumerate(segs):
        idx[j, : e - s] = np.arange(s, e)
    Pp = np.concatenate([P, np.zeros((R, C, 1))], axis=2)
    acc = np.zeros((R, C, len(segs)), np.float32)
    for t in range(L):
        p = Pp[:, :, idx[:, t]]
        acc = fma32(p, acc) if fma else p.astype(np.float32) + acc
    return acc


def split_tiles(K: int, threads: int, tile: int, align: int = 1, glob: bool = False) -> list[list[tuple[int, int]]]:
    """Per thread, its K tiles: ``threads`` contiguous ranges of ceil(K / threads) (rounded up to ``align``),
    each cut into ``tile``-element tiles from the range's start (``glob``: at multiples of ``tile`` in K)."""
    per = -(-(-(-K // threads)) // align) * align
    out = []
    for t in range(threads):
        s0, e0 = min(t * per, K), min((t + 1) * per, K)
        cuts = [s0] + [x for x in range(s0 + 1, e0) if ((x % tile == 0) if glob else ((x - s0) % tile == 0))] + [e0]
        out.append([(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a])
    return out


def thread_tile_sum(P: np.ndarray, tiles: list[list[tuple[int, int]]], across: str = "seq",
                    fma: bool = True) -> np.ndarray:
    """Each tile a fresh chain, a thread's tiles summed in order, the threads summed (``across``)."""
    flat = [seg for th in tiles for seg in th]
    sums = segment_sums(P, flat, fma)
    R, C, _ = sums.shape
    per_thread, j = [], 0
    for th in tiles:
        acc = np.zeros((R, C), np.float32)
        for _ in th:
            acc = acc + sums[:, :, j]
            j += 1
        per_thread.append(acc)
    x = np.stack(per_thread, axis=2)
    return seq(x, 2) if across == "seq" else tree(x, 2, low=across == "treelo")


def lane_group_sums(P: np.ndarray, T: int, W: int, G: int, fma: bool = True) -> np.ndarray:
    """[R, C, T, n] fresh FP32 chains over each lane's consecutive groups of ``G`` elements (lanes as in
    ``lane_index``)."""
    R, C, K = P.shape
    idx = lane_index(K, T, W)
    S = idx.shape[1]
    n = -(-S // G)
    idx = np.concatenate([idx, -np.ones((T, n * G - S), np.int64)], axis=1).reshape(T, n, G)
    Pp = np.concatenate([P, np.zeros((R, C, 1))], axis=2)
    acc = np.zeros((R, C, T, n), np.float32)
    for s in range(G):
        p = Pp[:, :, idx[:, :, s]]
        acc = fma32(p, acc) if fma else p.astype(np.float32) + acc
    return acc


def combine_groups(g: np.ndarray, mode: str, lanes: str) -> np.ndarray:
    """[R, C, T, n] -> [R, C]: ``lane``: each lane sums its groups in order, then the lanes reduce;
    ``tile``: each group index reduces over the lanes, then the group results are summed in order."""
    if mode == "lane":
        x = seq(g, 3)
        return seq(x, 2) if lanes == "seq" else tree(x, 2, low=lanes == "treelo")
    x = seq(g, 2) if lanes == "seq" else tree(g, 2, low=lanes == "treelo")
    return seq(x, 2)


# ---------------------------------------------------------------------------------------------- scoring

def call_operands(item: dict, side: int):
    """Per sampled batch: products [R, C, K] (float64, exact), expected bits, C, bias; the output format."""
    import tcnumerics as tc
    from replay_survey import operands

    c = item["c"]
    ops = operands(c, item["data"], side)
    prods = [np.asarray(A, np.float64)[:, None, :] * np.asarray(B, np.float64).T[None, :, :]
             for A, B in zip(ops["A"], ops["B"])]
    return prods, ops, tc.get_format(c["out"])


EPI = ("fma", "mul")


def epilogue(acc: np.ndarray, c: dict, ops: dict, b: int, fmt, how: str) -> np.ndarray:
    """Output bits: ``cvt(fma(beta, C, alpha * acc))`` (fma) or ``cvt(alpha * acc + beta * C)`` (mul)."""
    alpha = np.float32(c.get("alpha", 1) or 1)
    beta = np.float32(c.get("beta", 0) or 0)
    y = (alpha * acc).astype(np.float32)
    C = None
    if ops["bias"] is not None:
        C, beta = np.broadcast_to(np.asarray(ops["bias"], np.float32), y.shape), np.float32(1)
    elif ops["C"]:
        C = np.asarray(ops["C"][b], np.float32)
    if C is not None and beta != 0:
        if how == "fma":
            y = fma32(np.float64(beta) * np.asarray(C, np.float64), y)
        else:
            y = (y + (beta * C).astype(np.float32)).astype(np.float32)
    return fmt.bits_of(np.asarray(y, np.float64)) if c["out"] != "fp32" else y.view(np.uint32)


def score_lanes(item: dict, prods, ops, fmt, hyps, reducers=(("tree", "useq"), ("treelo", "useq"), ("seq", "useq"),
                                                            ("tree", "utree"), ("seq", "utree"))):
    """{(hypothesis, lanes-reduction, within-reduction, epilogue): mismatching outputs}."""
    c = item["c"]
    res = {}
    for h in hyps:
        parts = [lane_partials(P, h) for P in prods]
        for red in reducers:
            if h.U == 1 and red[1] == "utree":
                continue
            if h.T == 1 and red[0] != "tree":
                continue
            accs = [reduce_lanes(p, *red) for p in parts]
            for e in EPI:
                bits = np.stack([epilogue(a, c, ops, b, fmt, e) for b, a in enumerate(accs)])
                res[(h, red, e)] = int((bits.reshape(ops["expected"].shape) != ops["expected"]).sum())
    return res


def default_hyps(K: int, fma_options=(True, False)):
    """Lane counts 1..256, runs of 1..32 elements or contiguous chunks, 1..8 accumulators per lane."""
    out = []
    for T, f in iproduct((1, 2, 4, 8, 16, 32, 64, 128, 256), fma_options):
        if T > K and T > 1:
            continue
        Ws = {1, 2, 4, 8, 16, 32, -(-K // T)} if T > 1 else {1}
        for W in sorted(Ws):
            for U in (1, 2, 4, 8):
                if U > 1 and T * U > K:
                    continue
                out.append(Lanes(T, W, U, f))
    return out


def label(key) -> str:
    h, red, e = key
    return f"T={h.T} W={h.W} U={h.U} {'fma' if h.fma else 'muladd'} {red[0]}/{red[1]} epi={e}"


def structured_hyps(K: int) -> dict:
    """Named structures evaluated on every call: {name: fn(P [R, C, K]) -> FP32 acc [R, C]}.

    ``tiles P/t/across``: P contiguous K-thread ranges of ceil(K / P), each cut into t-element tiles from
    its start; each tile a fresh FFMA chain from +0 added to the thread's accumulator; threads summed
    (``across``).  ``lanes T/W/G/mode/red``: elements dealt to T lanes in runs of W (``lane_index``), each
    lane's consecutive G elements a fresh chain; ``lane``: a lane adds its groups in order, then the lanes
    reduce (``red``); ``tile``: each group index reduces over the lanes first.  ``chain``: one FFMA chain."""
    out = {"chain": lambda P: thread_tile_sum(P, split_tiles(P.shape[2], 1, 1 << 30))}
    for th, tile, across in iproduct((2, 4, 8), (64, 128, 256, 512, 1 << 30), ("seq", "tree", "treelo")):
        if th == 2 and across != "seq":
            continue
        name = f"tiles P={th} tile={tile if tile < 1 << 30 else 'all'} {across}"
        out[name] = (lambda th, tile, across: lambda P: thread_tile_sum(P, split_tiles(P.shape[2], th, tile),
                                                                          across))(th, tile, across)
    for T, W, G, mode, red in iproduct((8, 16, 32), (1, 4), (8, 16, 32, 1 << 30), ("lane", "tile"),
                                       ("seq", "tree", "treelo")):
        if G == 1 << 30 and mode == "tile":
            continue
        name = f"lanes T={T} W={W} G={G if G < 1 << 30 else 'all'} {mode} {red}"
        out[name] = (lambda T, W, G, mode, red: lambda P: combine_groups(
            lane_group_sums(P, T, W, min(G, -(-P.shape[2] // T))), mode, red))(T, W, G, mode, red)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", default="gemmSN", help="substring of family<template> to probe")
    ap.add_argument("--side", type=int, default=6, help="sampled rows and columns per call")
    ap.add_argument("--list", action="store_true", help="only list the collected calls")
    ap.add_argument("--maxk", type=int, default=1 << 30, help="skip calls with K above this")
    ap.add_argument("--wide", action="store_true", help="also the Lanes(T, W, U, fma) grid (slow)")
    args = ap.parse_args(argv)
    items = [it for it in collect() if args.family in it["family"] + "<" + it["tmpl"]]
    for it in items:
        c = it["c"]
        print(f"{it['capture']}#{c['id']} {c['op']} {c['fmt']}->{c['out']} b={c.get('b')} {c['M']}x{c['N']}x{c['K']} "
              f"{it['family']}<{it['tmpl']}> ctas={it['ctas']} gz={it['grid_z']}"
              f"{' +splitKreduce' if it['split_reduce'] else ''}")
    if args.list:
        return 0
    counts: dict = {}
    informative = 0
    for it in items:
        c = it["c"]
        if c["K"] > args.maxk:
            continue
        prods, ops, fmt = call_operands(it, args.side)
        informative += c["out"] == "fp32"
        exact = []
        for name, fn in structured_hyps(c["K"]).items():
            bits = np.stack([epilogue(fn(P), c, ops, b, fmt, "fma") for b, P in enumerate(prods)])
            if (bits.reshape(ops["expected"].shape) == ops["expected"]).all():
                exact.append(name)
                counts.setdefault(name, [0, 0])
                counts[name][0] += 1
                counts[name][1] += c["out"] == "fp32"
        if args.wide:
            res = score_lanes(it, prods, ops, fmt, default_hyps(c["K"]))
            for key, bad in res.items():
                if bad == 0 and key[2] == "fma":
                    counts.setdefault(label(key), [0, 0])
                    counts[label(key)][0] += 1
                    counts[label(key)][1] += c["out"] == "fp32"
        tag = "fp32 out" if c["out"] == "fp32" else f"{c['out']} out: orders mostly indistinguishable"
        print(f"{it['capture']}#{c['id']} {c['M']}x{c['N']}x{c['K']} <{it['tmpl']}> ({tag}): "
              f"{len(exact)} structures exact: {'; '.join(exact[:6])}{' ...' if len(exact) > 6 else ''}", flush=True)
    n = sum(1 for it in items if it["c"]["K"] <= args.maxk)
    print(f"\n{n} calls ({informative} with FP32 outputs); structures reproducing the most calls "
          f"(all calls, FP32-output calls):")
    for name, (a, f) in sorted(counts.items(), key=lambda kv: (-kv[1][1], -kv[1][0]))[:15]:
        print(f"  {a}/{n}  {f}/{informative}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
