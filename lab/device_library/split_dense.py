"""Split a dense survey's array file into ``<set>.part<i>.npz`` files (each under the device's 16 MiB return limit).

    python3 lab/device_library/split_dense.py PATH OUT_DIR [--parts 3]

Each part holds every array of the file, with the calls of the other parts marked unmeasured (signature -1):
``export_kernels.dense_rows`` reads ``<set>.npz`` and ``<set>.part*.npz`` alike and takes each call from the part
that measured it.
"""

from __future__ import annotations

import argparse
import os

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("out_dir")
    ap.add_argument("--parts", type=int, default=3)
    a = ap.parse_args()
    stem = os.path.basename(a.path)[:-len(".npz")]
    with np.load(a.path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    n = len(arrays["sig"])
    bounds = np.linspace(0, n, a.parts + 1).astype(np.int64)
    for i in range(a.parts):
        part = {}
        for k, v in arrays.items():  # per-call arrays: kept in this part's range, -1 (sig) or 0 elsewhere
            if v.ndim == 1 and len(v) == n and k != "signatures":
                w = np.full(n, -1 if k == "sig" else 0, v.dtype)
                w[bounds[i]:bounds[i + 1]] = v[bounds[i]:bounds[i + 1]]
                v = w
            part[k] = v
        dst = os.path.join(a.out_dir, f"{stem}.part{i + 1}.npz")
        np.savez_compressed(dst, **part)
        print(dst, os.path.getsize(dst))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
