"""Pack kernel-survey results (``kernel_survey.py``, ``graph_survey.py``) into the library's launch table.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/export_kernels.py DIR [--sets ...] \
        [--dense DENSE_DIR] [-o src/tcnumerics/library/h100_launches.npz]

``DIR`` holds ``<set>.json.gz`` files; each set's calls are regenerated from its call list (same ids), turned
into the library's ``Call`` (``fit_table.call_of``) and stored as one launch: the call kind (``Call.kind()``),
M, N, K, batch, the launch signature (every activity name, in order) and the main kernel's CTA count and
grid z.  ``DENSE_DIR`` holds the dense surveys' array files (``<set>.npz`` and ``<set>.part*.npz`` for a set run
in parts; ``dense_calls.DENSE_SETS``).  A shape measured twice must get the same GEMM launch (reported).
The table is written by the package's table writer, ``tcnumerics.library.launches.write_table`` (runs along M).
Held-out sets are left out unless named: they test the table, they do not feed it.
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
from tcnumerics.library.launches import is_gemm_kernel, write_table

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


def _kind_of(op: str, fmt: str, kw: dict) -> str:
    c = dict(op=op, fmt=fmt, M=8, N=64, K=64, b=2, prec="highest")
    c.update(kw)
    out = c["out_dtype"] if op == "scaled_mm" else (c.get("out_dtype") or fmt)
    return call_of(dict(c, out=out)).kind()


def dense_rows(dense_dir: str, name: str, sig_index: dict[str, int]) -> dict:
    """A dense set's measured launches (every part file of it), signatures interned into ``sig_index``."""
    import glob

    from train_calls import ALL_DENSE_SETS
    ds = ALL_DENSE_SETS[name]()
    sig = np.full(len(ds), -1, np.int64)
    ctas, gz = np.zeros(len(ds), np.int64), np.zeros(len(ds), np.int64)
    paths = sorted(glob.glob(os.path.join(dense_dir, f"{name}.npz")) + glob.glob(os.path.join(dense_dir, f"{name}.part*.npz")))
    for p in paths:
        with np.load(p, allow_pickle=False) as z:
            remap = np.array([sig_index.setdefault(str(x), len(sig_index)) for x in z["signatures"]])
            s = z["sig"]
            ok = s >= 0
            sig[ok], ctas[ok], gz[ok] = remap[s[ok]], z["ctas"][ok], z["grid_z"][ok]
    kinds = [_kind_of(*k) for k in ds.kinds]
    ok = sig >= 0
    r = ds.rows[ok]
    print(f"{name}: {int(ok.sum())} of {len(ds)} calls measured ({', '.join(os.path.basename(p) for p in paths)})")
    return dict(kind=np.array(kinds, dtype=object)[r[:, 0]], b=r[:, 1], M=r[:, 2], N=r[:, 3], K=r[:, 4],
                sig=sig[ok], ctas=ctas[ok], gz=gz[ok])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--sets", default="survey,holdout,holdout2,kernels")
    ap.add_argument("--dense", help="folder of the dense surveys' array files")
    ap.add_argument("--dense-sets", default="dense_models,dense_attention,dense_grid,dense_grid_more")
    ap.add_argument("-o", "--out", default="src/tcnumerics/library/h100_launches.npz")
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
    sig_index: dict[str, int] = {}
    rows = sorted(rows.values())
    cols = dict(kind=np.array([r[0] for r in rows], dtype=object), M=np.array([r[1] for r in rows]),
                N=np.array([r[2] for r in rows]), K=np.array([r[3] for r in rows]), b=np.array([r[4] for r in rows]),
                sig=np.array([sig_index.setdefault(r[5], len(sig_index)) for r in rows]),
                ctas=np.array([r[6] for r in rows]), gz=np.array([r[7] for r in rows]))
    parts = [cols]
    if args.dense:
        parts += [dense_rows(args.dense, name, sig_index) for name in args.dense_sets.split(",")]
    launches_ = merge(parts, sig_index)
    report(write_table(args.out, launches_, list(sig_index),
                       "kernel surveys on NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, cuBLAS 13.1.0.3 "
                       f"(lab/device_library/kernel_survey.py, sets {args.sets}; graph_survey.py, dense sets "
                       f"{args.dense_sets if args.dense else 'none'})", grid=(GRID_M, GRID_NK)), args.out)
    return 0


def report(counts: dict, path: str) -> dict:
    """Print what a table writer (``launches.write_table`` / ``write_runs``) wrote; return its counts."""
    print(f"{counts['launches']} launches in {counts['runs']} runs, {counts['kinds']} call kinds, "
          f"{counts['signatures']} signatures -> {path} ({os.path.getsize(path) / 1e6:.1f} MB)")
    return counts


def merge(parts: list[dict], sig_index: dict[str, int]) -> dict:
    """All parts' launches, one per (kind, M, N, K, b): a shape measured by several (the profiled and the dense
    surveys overlap) must agree in its GEMM kernels, CTA count and grid z -- counted and reported."""
    cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    kinds = sorted(set(cat["kind"].tolist()))
    ki = {k: i for i, k in enumerate(kinds)}
    kid = np.array([ki[k] for k in cat["kind"].tolist()])
    order = np.lexsort((cat["M"], cat["b"], cat["K"], cat["N"], kid))
    key = np.column_stack([kid, cat["N"], cat["K"], cat["b"], cat["M"]])[order]
    same = np.all(key[1:] == key[:-1], axis=1)
    signatures = list(sig_index)
    gemm = np.array([hash(tuple(n for n in s.split(" | ") if not n.startswith(("Memcpy", "void at::native"))))
                     for s in signatures])
    a, b = order[:-1][same], order[1:][same]
    bad = (gemm[cat["sig"][a]] != gemm[cat["sig"][b]]) | (cat["ctas"][a] != cat["ctas"][b]) | (cat["gz"][a] != cat["gz"][b])
    print(f"{int(same.sum())} shapes measured twice across surveys, {int(bad.sum())} differ in GEMM kernels or grid")
    keep = order[np.append(~same, True)]
    return {k: v[keep] for k, v in cat.items()}


if __name__ == "__main__":
    raise SystemExit(main())
