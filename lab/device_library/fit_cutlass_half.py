"""Score the launch-based CUTLASS 2.x rule (``library/cutlass_half.py``) on every captured BF16/FP16 CUTLASS call.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/fit_cutlass_half.py [--side 8] \
        [--wmma-tile name|64|128|sm|fmt|fmt_sm] [--granule 8] [--serial-granule N] [--list] [--only LABEL_PART]

Collects every BF16/FP16 call of the 7 H100 bit captures whose main kernel (its measured launch, else the
record's ``kernels``) is a CUTLASS tensor-op kernel, builds its structure from the launch alone
(``cutlass_half_structure``), replays it through the op functions (``replay_survey.replay`` with
``selection._measured`` patched to return that plan for these launches: the bit table is not consulted) and
prints, per family label (format x kernel op x split kind x epilogue), the bit-exact calls / captured calls
(2026-11: 169 / 169 at --side 16, ~35 s).  ``--wmma-tile``, ``--granule`` and ``--serial-granule`` try other
rules for the wmma K-tile, the parallel slice granule and the in-place slices (the scores that pin the rule:
``cutlass_half``'s docstring).
"""

from __future__ import annotations

import argparse
import re
import time
from collections import defaultdict

from fit_table import call_of
from replay_survey import load, replay
from tcnumerics.library import cutlass_half, launches, selection
from tcnumerics.library.selection import Plan

CAPTURES = [f"vectors/library/hopper_op_{n}_h100.npz"
            for n in ("survey", "holdout", "ksample", "ksample2", "ksample3", *(f"holdout{i}" for i in range(2, 11)))]


def launch_of(c: dict) -> launches.Launch | None:
    """The measured launch of a record, else one built from the record's kernel names (grid unknown: z = 1)."""
    L = launches.measured_launch(call_of(c))
    if L is None and c.get("kernels"):
        L = launches.Launch(tuple(c["kernels"]), 0, 1)
    return L


def collect() -> list[tuple[str, dict, object, launches.Launch]]:
    """(capture, record, data, launch) of every BF16/FP16 call whose main kernel is a CUTLASS tensor-op kernel."""
    out = []
    for path in CAPTURES:
        index, data = load(path)
        for c in index["records"]:
            if c["fmt"] not in ("bf16", "fp16") or c["op"] == "scaled_mm":
                continue
            L = launch_of(c)
            if L is not None and cutlass_half.parse_name(L.main):
                out.append((path.split("hopper_op_")[1].split("_h100")[0], c, data, L))
    return out


def kind_of(c: dict, L: launches.Launch) -> str:
    """The family label the counts are kept by: op (s1688, s16816, wmma-sm75/80) x split kind."""
    cc = call_of(c)
    s, _ = cutlass_half.cutlass_half_structure(cc, selection.Structure("x", epilogue=selection.epilogue_of(cc)), L)
    return cutlass_half.family_label(c["fmt"], cutlass_half.parse_name(L.main), s)


def _patched_measured(original):
    def measured(c, base, family, tile):
        L = launches.measured_launch(c)
        if L is not None and cutlass_half.parse_name(L.main) and c.fmt in ("bf16", "fp16"):
            s, ok = cutlass_half.cutlass_half_structure(c, base, L)
            return Plan(L.main[:60], s, ok, "cutlass_half rule", c)
        return original(c, base, family, tile)
    return measured


def wmma_rule(how: str):
    """Alternative wmma K-tile rules (the fit's hypotheses)."""
    rules = {
        "name": lambda f, fmt: f["tile_k"] or 64,
        "64": lambda f, fmt: 64,
        "128": lambda f, fmt: 128,
        "sm": lambda f, fmt: 128 if f["sm"] == 80 else 64,
        "fmt": lambda f, fmt: 128 if fmt == "bf16" else 64,
        "fmt_sm": lambda f, fmt: 128 if fmt == "bf16" and f["sm"] == 80 else 64,
    }
    return rules[how]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", type=int, default=8)
    ap.add_argument("--wmma-tile", default=None, help="name, 64, 128, sm, fmt, fmt_sm (default: the module's rule)")
    ap.add_argument("--granule", type=int, default=None)
    ap.add_argument("--serial-granule", type=int, default=None, help="in-place slices rounded to this many elements "
                    "instead of whole K-tiles")
    ap.add_argument("--list", action="store_true", help="print every call, not only the inexact ones")
    ap.add_argument("--only", default="", help="substring of the family label to replay")
    args = ap.parse_args()
    if args.wmma_tile:
        cutlass_half.WMMA_TILE = wmma_rule(args.wmma_tile)
    if args.granule:
        d = list(cutlass_half.parallel_slices.__defaults__)
        cutlass_half.parallel_slices.__defaults__ = (args.granule,)
    if args.serial_granule:
        g = args.serial_granule
        cutlass_half.tile_slices = lambda K, S, tile: cutlass_half.parallel_slices(K, S, g)
    selection._measured = _patched_measured(selection._measured)
    t0 = time.time()
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    flagged = 0
    rows = collect()
    for cap, c, data, L in rows:
        label = kind_of(c, L)
        if args.only and args.only not in label:
            continue
        r = replay(c, data, side=args.side)
        counts[label][0] += r["exact"]
        counts[label][1] += 1
        flagged += not r["modelled"]
        cc = call_of(c)
        s, ok = cutlass_half.cutlass_half_structure(cc, selection.Structure("x", epilogue=selection.epilogue_of(cc)), L)
        if args.list or not r["exact"]:
            short = re.sub(r"^void cutlass::Kernel2<", "", L.main).split(">")[0]
            print(f"{'ok ' if r['exact'] else 'BAD'} {cap}#{c['id']} {c['op']} {c['fmt']}->{c['out']} "
                  f"{c['M']}x{c['N']}x{c['K']} b={c.get('b', 1)} z={L.grid_z} {short} "
                  f"split={len(s.split_k or ())}x{(s.split_k or (0,))[0]} {s.split_reduce} "
                  f"pf={s.split_partial_format} kt={s.k_tile} bad={r['bad']}/{r['n']}")
    total = [0, 0]
    for label in sorted(counts):
        e, n = counts[label]
        total[0] += e
        total[1] += n
        print(f"{label:32s} {e:4d} / {n:4d}{'' if e == n else '  <-'}")
    print(f"{'all':32s} {total[0]:4d} / {total[1]:4d}   ({flagged} flagged by cutlass_half.verified; "
          f"{time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
