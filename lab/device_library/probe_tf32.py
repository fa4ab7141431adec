"""Score TF32 Hopper stream-K hypotheses (``sm90_xmma_gemm_*tf32*_segment_k_on``) on every captured call.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/probe_tf32.py [--side 8] [--off]

For each captured call of the family (7 ``hopper_op_*_h100.npz`` files; 30 calls) and each hypothesis,
the sampled outputs (``--side`` x ``--side`` of the 16 x 16) are predicted through
``tcnumerics.library.streamk.tiled_outputs`` (segments = TF32 wgmma k8 chains from +0, combined with FP32
adds) and compared bit for bit; the counts of calls reproduced are printed per hypothesis.
``--off`` also scores the plain chain on the ``segment_k_off`` calls (with and without a Memset).

Hypotheses:
  unsplit                 one chain over K per output (what ``segment_k_off`` does)
  shares/fwd              equal consecutive shares of all tiles' iterations per CTA, summed in K order
                          (the previous probe, probe_streamk.py)
  dpsk/<seg>/<tree>/<W>   data-parallel + stream-K: the last r = T mod C (T > C) or all T tiles of the
                          schedule are shared by s = C // r CTAs; segments ``rem_last`` (q = ipt // s, the
                          remainder one each to the last), ``rem_first`` or ``ceil``; fix-up tree ``pairs``
                          (pairs from the last segment, level by level), ``fwd`` ((p0 + p1) + p2 ...) or
                          ``last`` (p0 + (p1 + (... + p_{s-1}))); schedule bands of W m-tiles, n serpentine
                          (W = 1, the fitted ``FITTED_SWIZZLE``, or the best of 1..16).
Result (2026-11-26, default --side 16: all 256 sampled outputs of each of the 30 calls; ~4 min on one core):
  30  dpsk/rem_last/pairs with the fitted W (the one call followed by ``execute_split_k``, 384x384x65536,
      13 segments, sums from the last instead: p0 + (p1 + (... + p12)); 29 without that exception)
  21  the same with W = 1 everywhere (the band width decides the shared tiles in 9 calls)
  22  dpsk/rem_last/last (p0 + (p1 + ...)) fitted W; 20 rem_first or ceil segments; 14 fwd fix-up
   6  shares/fwd (the previous probe's map), 6 unsplit (calls whose sampled tiles are all data-parallel).
The band width W is not derivable from the captures (needed: 2 for 448x5632x4608 and 400x6144x6144, 4 for
464x27648x5120 and 1024x1024x8192, 8 for 864/880x5120x13824 and 4096x8192x4096); ``probe_tf32_device.py``
measures it per shape on a device.  --side 8 is quick but weak (the 8 x 8 tiles are often all data-parallel).
"""
from __future__ import annotations

import argparse
import glob
import warnings
from collections import Counter

import numpy as np

from fit_table import call_of
from replay_survey import load, operands
from tcnumerics.formats import get_format
from tcnumerics.library.launches import measured_launch
from tcnumerics.library.streamk import (FITTED_SWIZZLE, _fold_from_last, pair_tree, parse_tile, plan,
                                        tiled_outputs)

warnings.filterwarnings("ignore")
FP32 = get_format("fp32")


def fold_fwd(s: int):
    """((p0 + p1) + p2) + ... (CUTLASS-style in-order workspace accumulation)."""
    t: object = 0
    for k in range(1, s):
        t = (t, k)
    return t


TREES = {"pairs": pair_tree, "fwd": fold_fwd, "last": _fold_from_last}


def seg_bounds(ipt: int, s: int, mode: str) -> list[tuple[int, int]]:
    """Iteration ranges of s segments of one tile: ``rem_last``, ``rem_first`` or ``ceil`` lengths."""
    q, r = divmod(ipt, s)
    if mode == "ceil":
        q1 = -(-ipt // s)
        lens = [max(0, min(q1, ipt - k * q1)) for k in range(s)]
    else:
        lens = [q + (1 if (k >= s - r if mode == "rem_last" else k < r) else 0) for k in range(s)]
    b = np.concatenate([[0], np.cumsum(lens)])
    return [(int(x), int(y)) for x, y in zip(b[:-1], b[1:]) if y > x]


def dpsk_segments(c, launch, tile, mode: str, W: int):
    p = plan(c.M, c.N, c.K, launch.ctas, tile, W)

    def f(tm: int, tn: int):
        one = p.segments(tm, tn)
        return one if len(one) == 1 else seg_bounds(p.iters, p.splits, mode)
    return f


def shares_segments(c, launch, tile):
    """The previous probe: CTA c gets iterations [c * total / C, (c + 1) * total / C) of all tiles, m fastest."""
    TM, TN, TK = tile
    tm_n, tn_n, ipt = -(-c.N // TM), -(-c.M // TN), -(-c.K // TK)
    total, C = tm_n * tn_n * ipt, launch.ctas
    q, r = divmod(total, C)
    bounds = np.concatenate([[0], np.cumsum([q + (1 if k < r else 0) for k in range(C)])])

    def f(tm: int, tn: int):
        lo = (tm + tn * tm_n) * ipt
        pts = [lo] + [int(b) for b in bounds if lo < b < lo + ipt] + [lo + ipt]
        return [(a - lo, b - lo) for a, b in zip(pts, pts[1:])]
    return f


def exact(ops, c, tile, segments, tree) -> bool:
    got = tiled_outputs(ops["A"][0], ops["B"][0], ops["rows"], ops["cols"], tile=tile, K=c.K,
                        segments=segments, tree=tree, engine="fast")
    return bool((FP32.bits_of(got) == ops["expected"][0]).all())


def score_call(rec, data, side: int) -> dict[str, bool]:
    c = call_of(rec)
    launch = measured_launch(c)
    tile = parse_tile(launch.main)
    ops = operands(rec, data, side=side)
    ipt = -(-c.K // tile[2])
    res = {"unsplit": exact(ops, c, tile, lambda tm, tn: [(0, ipt)], pair_tree),
           "shares/fwd": exact(ops, c, tile, shares_segments(c, launch, tile), fold_fwd)}
    fitted = FITTED_SWIZZLE.get((c.M, c.N, c.K), 1)
    reduce_kernel = "execute_split_k" in launch.text
    for mode in ("rem_last", "rem_first", "ceil"):
        for tname, tree in TREES.items():
            res[f"dpsk/{mode}/{tname}/W=1"] = exact(ops, c, tile, dpsk_segments(c, launch, tile, mode, 1), tree)
            res[f"dpsk/{mode}/{tname}/W=fitted"] = (res[f"dpsk/{mode}/{tname}/W=1"] if fitted == 1 else
                                                    exact(ops, c, tile, dpsk_segments(c, launch, tile, mode, fitted),
                                                          tree))
    best = [W for W in (1, 2, 4, 8, 16) if exact(ops, c, tile, dpsk_segments(c, launch, tile, "rem_last", W),
                                                  _fold_from_last if reduce_kernel else pair_tree)]
    res["dpsk/rem_last/pairs(+last after execute_split_k)/W=fitted"] = exact(
        ops, c, tile, dpsk_segments(c, launch, tile, "rem_last", fitted), _fold_from_last if reduce_kernel else pair_tree)
    res["dpsk/rem_last/pairs(+last after execute_split_k)/W=any"] = bool(best)
    res["_W"] = best
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", type=int, default=16, help="sampled rows and columns (8 is quick but weak: its tiles are often all data-parallel)")
    ap.add_argument("--off", action="store_true", help="also score the plain chain on segment_k_off calls")
    args = ap.parse_args()
    counts, n = Counter(), 0
    off = Counter()
    for path in sorted(glob.glob("vectors/library/hopper_op_*_h100.npz")):
        index, data = load(path)
        for rec in index["records"]:
            ks = rec.get("kernels") or []
            if args.off and any("sm90_xmma_gemm" in k and "tf32" in k and "segment_k_off" in k for k in ks):
                c = call_of(rec)
                launch = measured_launch(c)
                tile = parse_tile(launch.main)
                ops = operands(rec, data, side=args.side)
                ipt = -(-c.K // tile[2])
                if rec.get("op") in ("matmul", "bmm") and len(ops["A"]) == 1:
                    key = "after Memset" if ks[0].startswith("Memset") else "alone"
                    off[key, exact(ops, c, tile, lambda tm, tn: [(0, ipt)], pair_tree)] += 1
            if not any("segment_k_on" in k for k in ks):
                continue
            res = score_call(rec, data, args.side)
            n += 1
            for k, v in res.items():
                if not k.startswith("_"):
                    counts[k] += v
            print(f"{path.split('hopper_op_')[1][:-9]:9s} {rec['id']:7d} {rec['M']}x{rec['N']}x{rec['K']} ok W: {res['_W']} "
                  f"pairs/fitted {res['dpsk/rem_last/pairs(+last after execute_split_k)/W=fitted']} "
                  f"shares {res['shares/fwd']} unsplit {res['unsplit']}", flush=True)
    print(f"\nsegment_k_on calls: {n}; calls reproduced bit-exactly (side {args.side}) per hypothesis:")
    for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {v:3d}  {k}")
    if off:
        print("segment_k_off (single-batch matmul/bmm), plain chain:", dict(off))


if __name__ == "__main__":
    main()
