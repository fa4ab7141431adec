"""Device driver: self-check, capture and replay every Hopper catalog entry in one call.

Run on the GPU machine from the repository root:
    PYTHONPATH=src python3 lab/device/capture_hopper.py --out "$OUT" --count 4096 --keep 512
Writes, under --out: summary.json (per entry: SASS matrix opcodes, self-check, metadata
layout check, per-family mismatch counts against the catalog), and tar parts holding
<stem>.npz (a per-family subsample, mismatches first) and <stem>.mismatch.npz (every
vector the catalog got wrong, up to a cap).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tarfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np

MISMATCH_CAP = 6000


def _seed(name: str, salt: str) -> int:
    return int.from_bytes(hashlib.sha256((salt + name).encode()).digest()[:8], "little")


def work(name: str, count: int, keep: int, stage: str, salt: str) -> dict:
    from dataclasses import replace

    from tcnumerics.probe.capture import capture_entry, file_stem, subsample, write_vectors
    from tcnumerics.probe.layouts import MetadataLayout
    from tcnumerics.probe.runtime import Probe, device_description, discover_metadata
    from tcnumerics.vectors.families import expected_d

    t0 = time.time()
    res: dict = {"name": name}
    try:
        probe = Probe(name)
        res["ptx"] = probe.target.ptx
        res["sass"] = probe.sass_note()
        if probe.target.kind == "mma.sp":
            found = discover_metadata(probe)
            expect = probe.target.metadata.coords
            res["metadata_as_documented"] = bool((found == expect).all())
            if not res["metadata_as_documented"]:
                res["metadata_found"] = found.tolist()
                probe.target = replace(probe.target, metadata=MetadataLayout(found, probe.target.metadata.selector))
        sc = probe.self_check()
        res["self_check"] = {"ok": sc.ok, "tiles": sc.tiles, "mismatches": sc.mismatches, "detail": sc.detail}
        if not sc.ok:
            return res
        rng = np.random.default_rng(_seed(name, salt))
        arrays = capture_entry(name, count, rng, probe=probe, device=device_description())
        with np.errstate(all="ignore"):
            model = expected_d(name, arrays["a"], arrays["b"], arrays["c"],
                               sparse_index=arrays.get("sparse_index"), engine="reference")
        bad = model != arrays["d"]
        fam = arrays["family"]
        res["families"] = {f: [int(bad[fam == f].sum()), int((fam == f).sum())] for f in np.unique(fam)}
        res["mismatches"] = int(bad.sum())
        res["n"] = int(len(bad))
        stem = file_stem(name)
        outdir = os.path.join(os.environ["CAPTURE_DIR"], stage)
        sub = subsample(arrays, keep, np.random.default_rng(1), prefer=bad)
        write_vectors(os.path.join(outdir, stem + ".npz"), sub, overwrite=True)
        if bad.any():
            rows = np.flatnonzero(bad)[:MISMATCH_CAP]
            mm = {k: (v[rows] if isinstance(v, np.ndarray) and v.ndim else v) for k, v in arrays.items()}
            mm["model_d"] = model[rows]
            write_vectors(os.path.join(outdir, stem + ".mismatch.npz"), mm, overwrite=True)
    except Exception as exc:  # report and go on with the other entries
        res["error"] = f"{type(exc).__name__}: {exc}"
        res["trace"] = traceback.format_exc()[-1500:]
    res["seconds"] = round(time.time() - t0, 2)
    return res


def wide_n_check(name: str, n: int, count: int) -> dict:
    """The same vectors through wgmma N=8 and a wider N must give the same bits."""
    from tcnumerics.probe.runtime import Probe
    from tcnumerics.vectors.families import families_for, generate

    res = {"name": name, "n": n}
    try:
        wide = Probe(name.replace("m64n8k", f"m64n{n}k"), n=n)
        sc = wide.self_check(tiles=16)
        if not sc.ok:
            wide.swap_fields = True
            sc2 = wide.self_check(tiles=16)
            res["swapped_fields_needed"] = sc2.ok
            sc = sc2
        res["self_check"] = {"ok": sc.ok, "mismatches": sc.mismatches, "detail": sc.detail}
        res["sass"] = wide.sass_note()
        narrow = Probe(name)
        rng = np.random.default_rng(7)
        same = total = 0
        for fam in families_for(name):
            a, b, c = generate(name, fam, count, rng)
            da, db = narrow.dot(a, b, c), wide.dot(a, b, c)
            same += int((da == db).sum())
            total += len(da)
        res["identical"] = [same, total]
    except Exception as exc:
        res["error"] = f"{type(exc).__name__}: {exc}"
    return res


def tar_parts(src: str, out: str, limit: int = 15 << 20) -> list[str]:
    files = []
    for root, _, names in os.walk(src):
        for f in sorted(names):
            files.append(os.path.join(root, f))
    parts, cur, size = [], [], 0
    for f in files:
        s = os.path.getsize(f)
        if cur and size + s > limit:
            parts.append(cur)
            cur, size = [], 0
        cur.append(f)
        size += s
    if cur:
        parts.append(cur)
    names = []
    for i, group in enumerate(parts):
        path = os.path.join(out, f"captures{i}.tar")
        with tarfile.open(path, "w") as tar:
            for f in group:
                tar.add(f, arcname=os.path.relpath(f, src))
        names.append(path)
    return names


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=4096)
    ap.add_argument("--keep", type=int, default=512)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--only", default="", help="comma-separated substrings of names to capture")
    ap.add_argument("--stage", default="caps")
    ap.add_argument("--salt", default="h200-1")
    ap.add_argument("--sass-dump", default="hopper.mma.m16n8k32.f32.e4m3.e4m3.f32,hopper.mma.m16n8k32.f16.e4m3.e4m3.f16,"
                    "hopper.mma.m16n8k16.f32.e4m3.e4m3.f32,hopper.mma.m16n8k16.f16.e5m2.e4m3.f16,"
                    "hopper.mma.sp.m16n8k64.f32.e4m3.e4m3.f32,hopper.mma.m16n8k64.s32.s4.s4.s32,"
                    "hopper.mma.m16n8k256.s32.b1.b1.s32.xor.popc,hopper.mma.sp.m16n8k32.f32.f16.f16.f32")
    ap.add_argument("--wide", default="hopper.wgmma.m64n8k16.f32.f16.f16,hopper.wgmma.m64n8k32.f32.e4m3.e4m3")
    args = ap.parse_args()
    import tcnumerics as tc

    os.environ.setdefault("CAPTURE_DIR", os.path.join("/tmp", "captures"))
    names = tc.instructions("hopper")
    if args.only:
        keys = args.only.split(",")
        names = [n for n in names if any(k in n for k in keys)]
    t0 = time.time()
    results = []
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=__import__("multiprocessing").get_context("spawn")) as ex:
        futs = {ex.submit(work, n, args.count, args.keep, args.stage, args.salt): n for n in names}
        wide = [ex.submit(wide_n_check, n, 64, 256) for n in args.wide.split(",") if n]
        for f in as_completed(futs):
            r = f.result()
            results.append(r)
            status = ("ERROR " + r["error"]) if "error" in r else (
                "SELF-CHECK FAILED " + r["self_check"]["detail"] if not r["self_check"]["ok"] else
                f"{r['mismatches']}/{r['n']} mismatch")
            print(f"[{time.time() - t0:6.1f}s] {r['name']}: {r.get('sass', '')} | {status}", flush=True)
        wide_res = [w.result() for w in wide]
    for w in wide_res:
        print("wide-N:", json.dumps(w), flush=True)
    summary = {"entries": sorted(results, key=lambda r: r["name"]), "wide_n": wide_res}
    from tcnumerics.probe.runtime import device_description

    summary["device"] = device_description()
    import subprocess

    from tcnumerics.probe.kernels import kernel_source
    from tcnumerics.probe.runtime import build_cubin
    from tcnumerics.probe.targets import target

    with open(os.path.join(args.out, f"sass_{args.stage}.txt"), "w") as fh:
        for name in filter(None, args.sass_dump.split(",")):
            cubin = build_cubin(kernel_source(target(name)))
            sass = subprocess.run(["cuobjdump", "-sass", cubin], capture_output=True, text=True).stdout
            fh.write(f"===== {name}\n{sass}\n")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"summary_{args.stage}.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    parts = tar_parts(os.path.join(os.environ["CAPTURE_DIR"], args.stage), args.out)
    print("parts:", [(p, os.path.getsize(p)) for p in parts], "total", round(time.time() - t0, 1), "s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
