"""Write a bounded copy of capture files: only the calls whose workload matches a pattern.

    python lab/device_models/bound.py IN.npz OUT.npz --workloads 'bfloat16'

Keeps the format (metadata JSON as uint8, arrays per call, no pickles).
"""

from __future__ import annotations

import argparse
import json
import re
import sys

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--workloads", default=".", help="regular expression a call's workload must match")
    args = ap.parse_args(argv)
    pattern = re.compile(args.workloads)
    with np.load(args.src, allow_pickle=False) as z:
        meta = json.loads(bytes(z["meta"]).decode())
        keep = [c for c in meta["calls"] if pattern.search(c["workload"])]
        prefixes = tuple(f"c{c['index']}_" for c in keep)
        arrays = {k: z[k] for k in z.files if k.startswith(prefixes)}
    meta["calls"] = keep
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez_compressed(args.dst, **arrays)
    print(f"{args.dst}: {len(keep)} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
