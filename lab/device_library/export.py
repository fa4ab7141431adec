"""Turn a device capture into the committed replay files under vectors/library/.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/export.py CAPTURE_DIR vectors/library [--side 4]

One ``.npz`` per library function and operand format.  For each captured call it keeps a
seeded sample of ``side`` rows of A and ``side`` columns of B (whole K), the captured output
bits of those rows x columns, the scales, and in ``meta`` (a JSON string) the call: op,
formats, the full shape (the kernel choice depends on it), options, the kernels
torch.profiler recorded, and the environment.  Operands shared by several calls are stored once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from inputs import operand_bits


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("capture_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--side", type=int, default=4)
    args = parser.parse_args()
    with open(os.path.join(args.capture_dir, "index.json")) as fh:
        index = json.load(fh)
    stores = {}
    groups: dict[str, dict] = {}
    for rec in index["records"]:
        if "error" in rec:
            continue
        store = stores.setdefault(rec["file"], np.load(os.path.join(args.capture_dir, rec["file"]), allow_pickle=False))
        i = rec["id"]
        op = "torch_matmul" if rec["op"] in ("torch.matmul", "torch.mm", "torch.addmm") else "torch_scaled_mm"
        fmt = "tf32" if rec["fmt"] == "fp32" else rec["fmt"]
        name = f"hopper_{op}_{fmt}" + ("_probes" if rec.get("probe") else "")
        g = groups.setdefault(name, {"arrays": {}, "records": [], "operand_sets": {}})
        M, N, K = rec["shape"]
        d = store[f"d{i}"]
        avail_rows = store[f"rows{i}"] if f"rows{i}" in store else np.arange(M)
        avail_cols = store[f"cols{i}"] if f"cols{i}" in store else np.arange(N)
        key = (rec.get("a_seed"), rec.get("b_seed"), rec.get("probe"), tuple(rec["shape"]),
               tuple(avail_rows[: args.side * 4]) if f"rows{i}" in store else None)
        sets = g["operand_sets"]
        if key not in sets:
            rng = np.random.default_rng(len(sets) + 17)
            side = args.side * 4 if rec.get("probe") else args.side  # probes compress to almost nothing
            rows = np.sort(rng.choice(avail_rows, min(len(avail_rows), side), replace=False))
            cols = np.sort(rng.choice(avail_cols, min(len(avail_cols), side), replace=False))
            if f"a{i}" in store:
                a, b = store[f"a{i}"][rows], store[f"b{i}"][:, cols]
            else:
                a = operand_bits(rec["fmt"], rec["a_seed"], (M, K), rows=rows)
                b = operand_bits(rec["fmt"], rec["b_seed"], (K, N), cols=cols)
            tag = f"s{len(sets)}"
            g["arrays"][f"a_{tag}"] = a
            g["arrays"][f"b_{tag}"] = np.ascontiguousarray(b)
            g["arrays"][f"rows_{tag}"] = rows
            g["arrays"][f"cols_{tag}"] = cols
            if "c_seed" in rec:
                g["arrays"][f"c_{tag}"] = operand_bits(rec["fmt"], rec["c_seed"], (M, N), scale=rec["c_scale"],
                                                       rows=rows, cols=cols)
            sets[key] = (tag, rows, cols)
        tag, rows, cols = sets[key]
        ri = np.searchsorted(avail_rows, rows)
        ci = np.searchsorted(avail_cols, cols)
        assert np.array_equal(avail_rows[ri], rows) and np.array_equal(avail_cols[ci], cols)
        g["arrays"][f"d_{i}"] = d[np.ix_(ri, ci)]
        for s in ("scale_a", "scale_b"):
            if f"{s}{i}" in store:
                g["arrays"][f"{s}_{i}"] = store[f"{s}{i}"]
        entry = {k: rec[k] for k in ("id", "op", "fmt", "shape", "out", "kernels", "deterministic") if k in rec}
        entry["options"] = rec.get("options") or {}
        entry["operands"] = tag
        if rec.get("probe"):
            entry["probe"] = rec["probe"]
        g["records"].append(entry)
    os.makedirs(args.out_dir, exist_ok=True)
    total = 0
    for name, g in groups.items():
        meta = json.dumps({"env": index["env"], "records": g["records"],
                           "source": "lab/device_library/capture.py on the device machine"})
        path = os.path.join(args.out_dir, f"{name}.npz")
        np.savez_compressed(path, meta=np.array(meta), **g["arrays"])
        size = os.path.getsize(path)
        total += size
        print(f"{path}: {len(g['records'])} calls, {size / 1e6:.2f} MB")
    print(f"total {total / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
