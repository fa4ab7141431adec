"""Fit and score the nvjet split-K rule (``tcnumerics.library.split_rule``) on the op survey, on the CPU.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/fit_split_rule.py \
        vectors/library/hopper_op_survey_h100.npz [--cache ssets.json] \
        [--holdout vectors/library/hopper_op_holdout_h100.npz]

1. For every BF16/FP16 nvjet call that ran a ``*_splitK_*`` kernel, the set of slice counts S whose
   structure (S equal slices of ``ceil(kt / S)`` 64-element K-tiles, FP32 slice sums in order)
   reproduces every sampled output bit (``fit_table.score``; BF16 outputs often admit several S).
   Slow (~1 s a call); cached in ``--cache``.
2. Scores, on all nvjet calls (an unsplit call is right when S = 1 is predicted, a split call when
   the predicted S reproduces its bits): the earlier rule, the formula (``split_rule.formula_split``)
   with its parameters chosen on the whole survey and by 5-fold cross-validation (folds by shape),
   the formula given the real kernel's tile count (what tile prediction would buy), and the
   neighbour vote + formula leave-one-shape-out (``split_rule.cell_vote`` on the other shapes).
3. ``--holdout``: the same scores on a held-out capture (a final check, not used for fitting).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import re
import sys
import time

from fit_table import call_of, candidates, score
from replay_survey import load, operands

from tcnumerics.library import gpus
from tcnumerics.library import split_rule as sr
from tcnumerics.library.selection import TableKey

SMS = gpus.sms("h100")  # the survey's GPU (an H100): the wave its split choices fill

KERNEL = re.compile(r"nvjet_sm90_(\w+?)_(\d+)x(\d+)_(\d+)x(\d+)_(\d+)x(\d+)_([vh])_(.*)_([NT]{3})$")
GRID = dict(MIN_K_TILES=(40, 44, 48), ALWAYS_SPLIT_TILES=(16, 24, 32, 48, 66), WASTE=(0.1, 0.2, 0.25),
            WASTE_K_TILES=(96, 128, 172), LONG_K_TILES=(224, 256, 448), TARGET_TILES=(48, 64))


def nvjet_calls(index) -> list[dict]:
    """The survey's BF16/FP16 nvjet calls with their kernel's tile count and split flag."""
    out = []
    for c in index["records"]:
        if "error" in c or c["op"] == "scaled_mm":
            continue
        ks = [k for k in c["kernels"] if "Mem" not in k and "elementwise" not in k]
        m = KERNEL.match(ks[0]) if ks else None
        if not m:
            continue
        call = call_of(c)
        bm, bn = int(m.group(2)), int(m.group(3))  # cuBLAS column-major: the tile's first side runs along torch's N
        out.append(dict(rec=c, call=call, split="splitK" in m.group(9), kt=-(-call.K // 64),
                        tiles=math.ceil(call.N / bm) * math.ceil(call.M / bn) * call.b))
    return out


def reproducing_slices(r: dict, data) -> list[int]:
    """Every S (1 .. min(kt, 64)) whose split structure reproduces all of the call's sampled bits."""
    c, call = r["rec"], r["call"]
    ops = operands(c, data)
    _, base, _, _ = candidates(c, call)
    good = []
    for S in range(1, min(r["kt"], 64) + 1):
        per = -(-r["kt"] // S) * 64
        if S > 1 and per * (S - 1) >= call.K:
            continue  # the same slicing as a smaller S
        if score(c, base.with_(split_k=(per,) * S if S > 1 else None), ops) == 0:
            good.append(S)
    return good


def attach_slices(calls: list[dict], data, cache_path: str, tag: str) -> None:
    cache = json.load(open(cache_path)) if cache_path and os.path.exists(cache_path) else {}
    t0 = time.time()
    for n, r in enumerate(calls):
        key = f"{tag}:{r['rec']['id']}"
        if not r["split"]:
            r["ok"] = {1}
            continue
        if key not in cache:
            cache[key] = reproducing_slices(r, data)
            if n % 20 == 0 and cache_path:
                json.dump(cache, open(cache_path, "w"))
                print(f"  slice sets: {n}/{len(calls)} ({time.time() - t0:.0f} s)", flush=True)
        r["ok"] = {sr.effective_slices(S, r["call"].K) for S in cache[key]}
    if cache_path:
        json.dump(cache, open(cache_path, "w"))


def right(r: dict, S: int) -> bool:
    return sr.effective_slices(max(S, 1), r["call"].K) in r["ok"] if r["split"] else S <= 1


def tally(calls, predict) -> dict:
    """decision right / S right (reproduces the bits) over ``calls`` for ``predict(r) -> S``."""
    dec = ok = 0
    for r in calls:
        S = predict(r)
        dec += (S > 1) == r["split"]
        ok += right(r, S)
    return dict(calls=len(calls), decision=dec, exact=ok)


def old_rule(r) -> int:
    c = r["call"]
    ctas = math.ceil(c.M / 64) * math.ceil(c.N / 64) * c.b
    return 1 if c.b > 1 or r["kt"] < 44 else max(1, min(-(-r["kt"] // 22), SMS // max(ctas, 1)))


def formula(r) -> int:
    c = r["call"]
    return sr.formula_split(c.M, c.N, c.K, c.b)


@contextlib.contextmanager
def params(p: dict):
    old = {k: getattr(sr, k) for k in p}
    for k, v in p.items():
        setattr(sr, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(sr, k, v)


def best_params(calls) -> tuple[dict, dict]:
    best = None
    for values in itertools.product(*GRID.values()):
        p = dict(zip(GRID, values))
        with params(p):
            t = tally(calls, formula)
        if best is None or (t["exact"], t["decision"]) > (best[1]["exact"], best[1]["decision"]):
            best = (p, t)
    return best


def shape_of(r) -> tuple:
    c = r["call"]
    return (c.M, c.N, c.K, c.b)


def cross_validate(calls, folds: int = 5) -> dict:
    """Parameters chosen on 4/5 of the shapes, scored on the other 1/5 (folds by shape)."""
    shapes = sorted({shape_of(r) for r in calls})
    fold_of = {s: i % folds for i, s in enumerate(sorted(shapes, key=lambda s: hash(s) % 7919))}
    dec = ok = 0
    for f in range(folds):
        train = [r for r in calls if fold_of[shape_of(r)] != f]
        test = [r for r in calls if fold_of[shape_of(r)] == f]
        p, _ = best_params(train)
        with params(p):
            t = tally(test, formula)
        dec, ok = dec + t["decision"], ok + t["exact"]
    return dict(calls=len(calls), decision=dec, exact=ok)


def table_of(skip_shape=None) -> dict:
    """The library's measured table (key -> kernel, split), the calls of one shape left out."""
    from tcnumerics.library.selection import measured_table

    calls = measured_table()["calls"]
    if skip_shape is None:
        return calls
    M, N, K, b = skip_shape
    return {k: v for k, v in calls.items() if TableKey.parse(k)[4:8] != (b, M, N, K)}


def neighbours_leave_one_out(calls) -> dict:
    return tally(calls, lambda r: sr.predicted_split(r["call"], table_of(shape_of(r))))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("survey")
    ap.add_argument("--cache", default="split_slices_cache.json")
    ap.add_argument("--holdout", default="")
    ap.add_argument("--no-grid", action="store_true", help="skip the parameter grid and cross-validation")
    args = ap.parse_args()
    index, data = load(args.survey)
    calls = nvjet_calls(index)
    attach_slices(calls, data, args.cache, "survey")
    n_split = sum(r["split"] for r in calls)
    print(f"survey: {len(calls)} nvjet BF16/FP16 calls, {n_split} split "
          f"({sum(r['split'] and len(r['ok']) <= 3 for r in calls)} of them with at most 3 reproducing S)")
    print("  earlier rule min(ceil(kt/22), 132/CTAs):", tally(calls, old_rule))
    print("  split_rule.formula_split (shipped parameters):", tally(calls, formula))
    split = [r for r in calls if r["split"]]
    print("  given the real kernel's tile count, min(132 // tiles, ceil(3 kt / 64)) on the split calls:",
          tally(split, lambda r: max(1, min(SMS // r["tiles"], math.ceil(3 * r["kt"] / 64)))))
    if not args.no_grid:
        p, t = best_params(calls)
        print("  best grid parameters on the whole survey:", p, t)
        print("  5-fold cross-validation by shape (parameters refitted per fold):", cross_validate(calls))
    print("  neighbour vote + formula, leave-one-shape-out:", neighbours_leave_one_out(calls))
    if args.holdout:
        hindex, hdata = load(args.holdout)
        hold = nvjet_calls(hindex)
        attach_slices(hold, hdata, args.cache, "holdout")
        print(f"holdout: {len(hold)} nvjet calls, {sum(r['split'] for r in hold)} split")
        print("  earlier rule:", tally(hold, old_rule))
        print("  formula:", tally(hold, formula))
        table = table_of()
        print("  neighbour vote (survey table) + formula:", tally(hold, lambda r: sr.predicted_split(r["call"], table)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
