"""Device driver: `tcnumerics fingerprint --gpu` for every Hopper entry, plus a chained-K check
of `tcnumerics.probe.gpu_dot` against the catalog.

    PYTHONPATH=src python3 lab/device/fingerprint_hopper.py --out "$OUT" [--workers 14]
Writes <out>/fingerprints.tar (one JSON report per entry, <stem>.json, with the command's
exit status) and prints one line per entry.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def fingerprint(name: str, outdir: str, validation: int) -> tuple[str, int, str]:
    from tcnumerics.probe.capture import file_stem

    cmd = [sys.executable, "-m", "tcnumerics", "fingerprint", "--instruction", name, "--gpu", "--json",
           "--validation", str(validation)]
    t0 = time.time()
    res = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    path = os.path.join(outdir, file_stem(name) + ".json")
    try:
        report = json.loads(res.stdout)
    except json.JSONDecodeError:
        report = {"instruction": name, "error": (res.stderr or res.stdout).strip()[-400:]}
    report["exit_status"] = res.returncode
    report["seconds"] = round(time.time() - t0, 1)
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1)
    summary = (f"matches={report.get('matches')} reproduces={report.get('reproduces')} "
               f"L={report.get('group_size')} F={report.get('frac_bits')}") if "error" not in report else report["error"]
    return name, res.returncode, summary


def chain_check(names: list[str]) -> None:
    import tcnumerics as tc
    from tcnumerics.probe import gpu_dot
    from tcnumerics.sparse import is_sparse
    from tcnumerics.vectors.families import generate

    rng = np.random.default_rng(11)
    for name in names:
        spec = tc.instruction(name).spec
        a, b, c = generate(name, "normal", 512, rng, k=3 * spec.k)
        got = gpu_dot(name)(a, b, c)
        want = tc.instruction(name).dot_bits(a, b, c)
        print(f"chain K={3 * spec.k} {name}: {int((got != want).sum())}/{len(c)} differ", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--validation", type=int, default=64)
    ap.add_argument("--chain", default="hopper.mma.m16n8k16.f32.bf16.bf16.f32,hopper.wgmma.m64n8k32.f32.e4m3.e4m3,"
                    "hopper.mma.m16n8k32.f32.e5m2.e4m3.f32,hopper.mma.m16n8k8.f32.tf32.tf32.f32")
    args = ap.parse_args()
    import tcnumerics as tc

    chain_check([n for n in args.chain.split(",") if n])
    outdir = os.path.join("/tmp", "fingerprints")
    os.makedirs(outdir, exist_ok=True)
    names = tc.instructions("hopper")
    t0 = time.time()
    with ThreadPoolExecutor(args.workers) as ex:
        for name, rc, summary in ex.map(lambda n: fingerprint(n, outdir, args.validation), names):
            print(f"[{time.time() - t0:6.1f}s] rc={rc} {name}: {summary}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with tarfile.open(os.path.join(args.out, "fingerprints.tar"), "w") as tar:
        for f in sorted(os.listdir(outdir)):
            tar.add(os.path.join(outdir, f), arcname=f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
