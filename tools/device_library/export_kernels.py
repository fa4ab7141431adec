"""Pack kernel-survey results (``kernel_survey.py``) into the library's launch table.

    PYTHONPATH=src:tools/device_library python3 tools/device_library/export_kernels.py DIR [--sets ...] \
        [-o src/tcnumerics/library/hopper_launches.npz]

``DIR`` holds ``<set>.json.gz`` files; each set's calls are regenerated from its call list (same ids), turned
into the library's ``Call`` (``fit_table.call_of``) and stored as one row: the call kind (``Call.kind()``),
M, N, K, batch, the launch signature (every activity name, in order) and the main kernel's CTA count and
grid z.  Held-out sets are left out unless named: they test the table, they do not feed it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os

import numpy as np

from fit_table import call_of
from kernel_calls import GRID_M, GRID_NK
from kernel_survey import SETS
from tcnumerics.library.launches import is_gemm_kernel

MAX_NAME = 240  # activity names are cut here (CUTLASS template arguments run to thousands of characters)


def rows_of(path: str, name: str) -> list[tuple]:
    with gzip.open(path, "rt") as fh:
        res = json.load(fh)
    calls = {c["id"]: c for c in SETS[name]()}
    rows = []
    for i, acts in res["calls"].items():
        c = calls[int(i)]
        out = c.get("out_dtype") or c["fmt"]
        call = call_of(dict(c, out=out if c["op"] != "scaled_mm" else c["out_dtype"]))
        names = [res["names"][a[0]][:MAX_NAME] for a in acts]
        main = next((a for a, n in zip(acts, names) if is_gemm_kernel(n)), acts[0])
        grid = main[1] or [1, 1, 1]
        rows.append((call.kind(), call.M, call.N, call.K, call.b, " | ".join(names), grid[0] * grid[1] * grid[2],
                     grid[2]))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--sets", default="survey,holdout,holdout2,kernels")
    ap.add_argument("-o", "--out", default="src/tcnumerics/library/hopper_launches.npz")
    args = ap.parse_args()
    rows, repeats, differ = {}, 0, []
    for entry in args.sets.split(","):  # SET, or SET:FILE_STEM for a continued run (kernel_survey.py --start)
        name, _, stem = entry.partition(":")
        for r in rows_of(os.path.join(args.dir, f"{stem or name}.json.gz"), name):
            old = rows.get(r[:5])
            if old is not None:  # a shape two sets measured: the choice must be the same (deterministic)
                repeats += 1
                if old[5:] != r[5:]:
                    differ.append((old, r))
            rows[r[:5]] = r
    def gemm_part(r):  # the GEMM kernels and the main grid: what the numerics depend on (not torch's copy of C)
        return [n for n in r[5].split(" | ") if not n.startswith(("Memcpy", "void at::native"))], r[6:]
    differ_gemm = [(o, n) for o, n in differ if gemm_part(o) != gemm_part(n)]
    print(f"{repeats} shapes measured twice, {len(differ)} with different launches, {len(differ_gemm)} of them in the "
          "GEMM kernels or grid (the rest: torch's copy of C, a Memcpy or an elementwise kernel)")
    for old, new in differ_gemm[:10]:
        print("  differ:", old, "->", new)
    rows = sorted(rows.values())
    kinds = sorted({r[0] for r in rows})
    sigs = sorted({r[5] for r in rows})
    ki, si = {k: i for i, k in enumerate(kinds)}, {s: i for i, s in enumerate(sigs)}
    np.savez_compressed(
        args.out, kinds=np.array(kinds), signatures=np.array(sigs),
        kind=np.array([ki[r[0]] for r in rows], np.int16), M=np.array([r[1] for r in rows], np.int32),
        N=np.array([r[2] for r in rows], np.int32), K=np.array([r[3] for r in rows], np.int32),
        b=np.array([r[4] for r in rows], np.int32), signature=np.array([si[r[5]] for r in rows], np.int32),
        ctas=np.array([r[6] for r in rows], np.int32), grid_z=np.array([r[7] for r in rows], np.int32),
        grid_m=np.array(GRID_M, np.int32), grid_nk=np.array(GRID_NK, np.int32),
        provenance=np.array("kernel survey on NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, cuBLAS 13.1.0.3 "
                            f"(tools/device_library/kernel_survey.py, sets {args.sets})"))
    print(f"{len(rows)} launches, {len(kinds)} call kinds, {len(sigs)} signatures -> {args.out} "
          f"({os.path.getsize(args.out) / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
