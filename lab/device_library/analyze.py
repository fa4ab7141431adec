"""Score candidate kernel models against a device capture (run here, on the CPU).

    PYTHONPATH=lab/device_library python3 lab/device_library/analyze.py CAPTURE_DIR [--ids 1,2] [--outputs 256]

For each record of ``index.json`` it regenerates the operands, takes a sample of output
elements (whole rows of A against whole columns of B, so every model sees full K), evaluates
each candidate ``tcnumerics.gemm`` configuration and prints the number of mismatching bits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from inputs import operand_bits

import tcnumerics as tc

TORCH_TO_FMT = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}


def load(capture_dir: str):
    with open(os.path.join(capture_dir, "index.json")) as fh:
        index = json.load(fh)
    files = {}
    return index, files


def arrays_of(capture_dir: str, files: dict, name: str):
    if name not in files:
        files[name] = np.load(os.path.join(capture_dir, name), allow_pickle=False)
    return files[name]


def operands(rec: dict, store) -> tuple[np.ndarray, np.ndarray]:
    M, N, K = rec["shape"]
    idx = rec["id"]
    if f"a{idx}" in store:
        return store[f"a{idx}"], store[f"b{idx}"]
    fmt = rec["fmt"]
    return operand_bits(fmt, rec["a_seed"], (M, K)), operand_bits(fmt, rec["b_seed"], (K, N))


def sample(rec: dict, store, max_side: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, expected bits [len(rows), len(cols)]) of the capture."""
    idx = rec["id"]
    d = store[f"d{idx}"]
    if f"rows{idx}" in store:
        rows, cols = store[f"rows{idx}"], store[f"cols{idx}"]
    else:
        rows, cols = np.arange(d.shape[0]), np.arange(d.shape[1])
    ri = np.sort(rng.choice(len(rows), min(len(rows), max_side), replace=False))
    ci = np.sort(rng.choice(len(cols), min(len(cols), max_side), replace=False))
    return rows[ri], cols[ci], d[np.ix_(ri, ci)]


def as_values(bits: np.ndarray, fmt: str) -> np.ndarray:
    return tc.get_format(fmt).to_array(bits)


def score(rec, store, candidates: dict, max_side: int = 16, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    a_bits, b_bits = operands(rec, store)
    rows, cols, expected = sample(rec, store, max_side, rng)
    fmt = rec["fmt"]
    A = as_values(a_bits[rows], fmt)
    B = as_values(b_bits[:, cols], fmt)
    out_fmt = rec["out"]
    result = {}
    for name, kw in candidates.items():
        kw = dict(kw)
        prepare = kw.pop("prepare", None)
        AA, BB = (prepare(A), prepare(B)) if prepare else (A, B)
        extra = kw.pop("extra", None)
        if extra:
            kw.update(extra(rec, store, rows, cols))
        try:
            got = tc.gemm(AA, BB, out_format=out_fmt, **kw)
            got_bits = tc.get_format(out_fmt).bits_of(got)
            result[name] = int((got_bits != expected).sum())
        except Exception as exc:  # report, keep scoring the others
            result[name] = f"error: {exc}"
    result["_n"] = int(expected.size)
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("capture_dir")
    parser.add_argument("--ids", default="")
    parser.add_argument("--side", type=int, default=16)
    args = parser.parse_args()
    index, files = load(args.capture_dir)
    ids = {int(x) for x in args.ids.split(",") if x}
    from candidates import candidates_for

    for rec in index["records"]:
        if ids and rec["id"] not in ids or "error" in rec:
            continue
        store = arrays_of(args.capture_dir, files, rec["file"])
        cands = candidates_for(rec)
        res = score(rec, store, cands, args.side)
        best = sorted((v, k) for k, v in res.items() if isinstance(v, int) and k != "_n")
        print(rec["id"], rec["op"], rec["fmt"], rec["shape"], rec.get("options"), rec.get("probe", ""), "->",
              rec["out"], f"n={res['_n']}", best[:4], [f"{k}: {v}" for k, v in res.items() if isinstance(v, str)][:2],
              rec["kernels"][0][:60], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
