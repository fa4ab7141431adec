"""Device driver: the TF32 (1:2) and s4/u4 (pairwise 4:8) ``mma.sp`` entries of Hopper, in one call.

Run on the GPU machine from the repository root:
    PYTHONPATH=src python3 lab/device/capture_sparse_tf32_int4.py --out "$OUT" --count 4096 --keep 256
For every ``hopper.mma.sp`` entry with TF32 or s4/u4 operands it runs what
``capture_hopper.py`` runs (metadata discovery, exact-integer self-check, SASS, capture of
every family, per-family mismatch counts against the catalog, a subsample kept), and for
the TF32 entries it also measures the grouping: ``fingerprint`` of the GPU as a black box
(the selected products only), and the mismatch counts of candidate datapaths (group sizes
1..8, F = 24/25) on freshly captured vectors.  Writes summary_<stage>.json,
sass_<stage>.txt and captures<i>.tar under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_hopper import tar_parts, work  # noqa: E402  (the same capture as every other entry)


def new_entries() -> list[str]:
    import tcnumerics as tc

    return [n for n in tc.instructions("hopper")
            if ".mma.sp." in n and (".tf32." in n or ".s4." in n or ".u4." in n)]


def grouping(name: str, count: int) -> dict:
    """TF32: which datapath over the selected products reproduces the silicon."""
    from dataclasses import replace

    from tcnumerics import sparse
    from tcnumerics.api import Instruction
    from tcnumerics.fingerprint import fingerprint
    from tcnumerics.probe.capture import capture_entry
    from tcnumerics.probe.runtime import Probe

    res: dict = {"name": name}
    try:
        probe = Probe(name)
        spec = sparse.get_sparse(name)
        scheme = sparse.sparsity(spec)

        def box(a, b_sel, c):  # the selected products only: every chunk keeps position 0
            n, half = a.shape
            idx = np.zeros((n, half), np.uint8)
            b = np.zeros((n, 2 * half), b_sel.dtype)
            np.put_along_axis(b, sparse.positions(idx, scheme), b_sel, axis=1)
            return probe.dot(a, b, c, idx)

        fp = fingerprint(box, name, validation=256, seed=5)
        res["fingerprint"] = fp.to_dict()
        arrays = capture_entry(name, count, np.random.default_rng(99), probe=probe)
        b_sel = sparse.select_b(arrays["b"], arrays["sparse_index"], scheme)
        fam = arrays["family"]
        cands = {}
        for g in (1, 2, 4, 8):
            if g > spec.k:
                continue
            for f in (24, 25):
                alt = replace(spec, model=replace(spec.model, group_size=g, frac_bits=f))
                with np.errstate(all="ignore"):
                    d = Instruction(alt, "reference").dot_bits(arrays["a"], b_sel, arrays["c"])
                bad = d != arrays["d"]
                cands[f"L={g},F={f}"] = {"mismatches": int(bad.sum()),
                                         "families": {x: int(bad[fam == x].sum()) for x in np.unique(fam)}}
        res["candidates"] = cands
        res["n"] = int(len(fam))
    except Exception as exc:  # report and go on
        import traceback

        res["error"] = f"{type(exc).__name__}: {exc}"
        res["trace"] = traceback.format_exc()[-1500:]
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=4096)
    ap.add_argument("--keep", type=int, default=256)
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--stage", default="tf32_int4")
    ap.add_argument("--salt", default="h200-tf32-int4")
    ap.add_argument("--group-count", type=int, default=2048)
    ap.add_argument("--only", default="", help="comma-separated substrings of the names to run")
    args = ap.parse_args()
    os.environ.setdefault("CAPTURE_DIR", os.path.join("/tmp", "captures"))
    os.makedirs(args.out, exist_ok=True)
    names = new_entries()
    if args.only:
        names = [n for n in names if any(key in n for key in args.only.split(","))]
    t0 = time.time()
    results, groups = [], []
    ctx = __import__("multiprocessing").get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as ex:
        futs = [ex.submit(work, n, args.count, args.keep, args.stage, args.salt) for n in names]
        gfuts = [ex.submit(grouping, n, args.group_count) for n in names if ".tf32." in n]
        for f in as_completed(futs):
            r = f.result()
            results.append(r)
            status = ("ERROR " + r["error"]) if "error" in r else (
                "SELF-CHECK FAILED " + r["self_check"]["detail"] if not r["self_check"]["ok"] else
                f"{r['mismatches']}/{r['n']} mismatch {r['families']}")
            print(f"[{time.time() - t0:6.1f}s] {r['name']}: {r.get('sass', '')} | metadata as coded: "
                  f"{r.get('metadata_as_documented')} | {status}", flush=True)
        for f in gfuts:
            g = f.result()
            groups.append(g)
            if "error" in g:
                print("grouping", g["name"], "ERROR", g["error"], g.get("trace", ""), flush=True)
                continue
            fp = g["fingerprint"]
            print(f"grouping {g['name']}: fingerprint groups={fp['groups']} L={fp['group_size']} "
                  f"F={fp['frac_bits']} reproduces={fp['reproduces']} matches={fp['matches']}", flush=True)
            print("  candidates:", {k: v["mismatches"] for k, v in g["candidates"].items()}, "of", g["n"], flush=True)
    from tcnumerics.probe.kernels import kernel_source
    from tcnumerics.probe.runtime import build_cubin, device_description
    from tcnumerics.probe.targets import target

    summary = {"entries": sorted(results, key=lambda r: r["name"]), "grouping": groups,
               "device": device_description()}
    with open(os.path.join(args.out, f"summary_{args.stage}.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    dump = [n for n in names if ".tf32." in n or (".s4.s4." in n and ".satfinite" not in n)]
    with open(os.path.join(args.out, f"sass_{args.stage}.txt"), "w") as fh:
        for name in dump:
            sass = subprocess.run(["cuobjdump", "-sass", build_cubin(kernel_source(target(name)))],
                                  capture_output=True, text=True).stdout
            fh.write(f"===== {name}\n{sass}\n")
    parts = tar_parts(os.path.join(os.environ["CAPTURE_DIR"], args.stage), args.out)
    differ = [r["name"] for r in results if "metadata_found" in r]
    print("metadata layouts differing from layouts.sparse_metadata (found ones in the summary):", differ)
    print("device:", summary["device"])
    print("parts:", [(p, os.path.getsize(p)) for p in parts], "total", round(time.time() - t0, 1), "s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
