"""Full check: reference engine == exact oracle on many vectors per distinct catalog datapath.

    python lab/oracle_check.py --arch hopper --count 100000 [--seed 1]

Entries whose arithmetic is identical (same model, K, operand formats, K order, chunking,
C entry) are checked once and the count is credited to each name.  Prints one line per
datapath and a total; exit 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

import numpy as np

from tcnumerics.catalog import all_instructions
from tcnumerics.engines import oracle, reference
from tcnumerics.vectors.families import families_for, generate


def datapath_key(spec):
    return (spec.k, spec.model, spec.a_format, spec.b_format, spec.c_format, spec.k_order, spec.chunk, spec.c_entry)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="hopper")
    ap.add_argument("--count", type=int, default=100000, help="vectors per datapath")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--chain", type=int, default=2, help="instructions chained in one vector for part of the run")
    ap.add_argument("--only", default="", help="regular expression: check only datapaths with a matching name")
    args = ap.parse_args()
    groups: dict = {}
    for spec in all_instructions():
        if spec.arch == args.arch and spec.model.algorithm in ("fused", "integer", "binary") \
                and not getattr(spec, "sparse", False) and ".sp." not in spec.name:
            groups.setdefault(datapath_key(spec), []).append(spec)
    if args.only:
        pattern = re.compile(args.only)
        groups = {key: specs for key, specs in groups.items() if any(pattern.search(s.name) for s in specs)}
    total_bad = total = 0
    for specs in groups.values():
        spec = specs[0]
        fams = families_for(spec)
        rng = np.random.default_rng(args.seed)
        per = -(-args.count // len(fams))
        bad = n = 0
        t0 = time.time()
        for fam in fams:
            for part in range(0, per, 2000):
                cnt = min(2000, per - part)
                chain = args.chain if (part // 2000) % 2 and spec.c_format == spec.d_format else 1
                a, b, c = generate(spec, fam, cnt, rng, k=spec.k * chain)
                d_ref = reference.dot_bits(spec, a, b, c)
                d_exact = oracle.dot_bits(spec, a, b, c)
                bad += int(np.count_nonzero(d_ref != d_exact))
                n += cnt
        total += n
        total_bad += bad
        names = ", ".join(s.name for s in specs)
        print(f"{n:7d} vectors  {bad:3d} mismatches  {time.time() - t0:6.1f}s  {names}", flush=True)
    print(f"total: {total} vectors over {len(groups)} datapaths, {total_bad} mismatches")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
