"""The ranges of a dense survey's calls that a cut-short run did not reach, as ``lab/run.sh dense`` specs.

    python3 lab/device_library/dense_rest.py OUT/<set>.npz --processes 6 [--whole]

``run.sh dense SET`` splits a set's calls into P equal slices, one per process, each surveyed from its start until
the deadline; the merged ``<set>.npz`` keeps signature -1 for a call no slice reached.  The rest of the survey is,
per slice, the calls after the last one it reached (calls it reached but could not run, out of memory, stay -1 in
the middle of a slice and are not repeated).  Printed as ``SET:FIRST:LAST`` specs (the next run splits each range
over its own processes) or, with ``--whole``, ``SET:FIRST:LAST:I`` (process I takes its own slice's rest whole).

    >>> sig = np.array([3, 1, -1, -1,  0, 2, 0, 2,  5, -1, -1, -1])   # 3 slices of 4: 2, 4 and 1 reached
    >>> rest_ranges(sig, 3)
    [(2, 4), (9, 12)]
"""

from __future__ import annotations

import argparse
import os

import numpy as np


def rest_ranges(sig: np.ndarray, processes: int) -> list[tuple[int, int]]:
    """[first, last) of each slice's unreached tail (``run.sh dense``'s slicing: ceil(n / P) calls a slice)."""
    n = len(sig)
    per = -(-n // processes)
    out = []
    for start in range(0, n, per):
        end = min(n, start + per)
        reached = np.flatnonzero(sig[start:end] != -1)
        first = start + (int(reached[-1]) + 1 if len(reached) else 0)
        if first < end:
            out.append((first, end))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", help="a dense run's merged <set>.npz")
    ap.add_argument("--processes", "-P", type=int, required=True, help="the P that run used")
    ap.add_argument("--whole", action="store_true", help="SET:FIRST:LAST:I specs (process I takes its range whole)")
    args = ap.parse_args(argv)
    if args.processes < 1:
        ap.error(f"--processes: expected a positive count, got {args.processes}")
    if not os.path.isfile(args.path) or not args.path.endswith(".npz"):
        ap.error(f"{args.path}: not a dense run's <set>.npz")
    name = os.path.basename(args.path)[:-len(".npz")]
    with np.load(args.path, allow_pickle=False) as z:
        sig = z["sig"]
    ranges = rest_ranges(sig, args.processes)
    specs = [f"{name}:{a}:{b}" + (f":{i}" if args.whole else "") for i, (a, b) in enumerate(ranges)]
    print(" ".join(specs) if specs else f"{name}: every slice reached its end")
    print(f"# {sum(b - a for a, b in ranges):,} of {len(sig):,} calls left", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
