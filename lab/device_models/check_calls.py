"""Self-check given GEMM calls on this GPU: each call's torch op on random operands under
``emulate("hopper", check=True)`` -- the library's bits against cuBLAS's, and the kernels it ran.

The calls come from ``lab/device_library/flag_precision.py --changed-out`` (call records per GPU model): calls of a
captured training step whose plan changed after a fold, so their capture-time bit comparison no longer speaks for
the plan.  Operands: normal values (seeded per call), in the call's layout (``a_t``: A passed as a transposed view,
``b_t``: B as one).  Prints one JSON line per call and a total; writes ``$OUT/check_calls_<gpu>.json.gz`` (the
capture format).

    python3 lab/device_models/check_calls.py CHANGED.json [--gpu-key h200]
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def operands(rec: dict, seed: int):
    import torch

    g = torch.Generator("cuda").manual_seed(seed)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[rec["fmt"]]
    M, N, K, b = rec["M"], rec["N"], rec["K"], rec.get("b", 1)

    def mat(rows, cols, transposed):
        shape = (b, cols, rows) if transposed else (b, rows, cols)
        x = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).to(dt)
        return x.transpose(1, 2) if transposed else x

    A, B = mat(M, K, rec.get("a_t", False)), mat(K, N, rec.get("b_t", False))
    return (A, B) if rec["op"] == "bmm" else (A[0], B[0])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("changed", help="flag_precision.py --changed-out file")
    p.add_argument("--gpu-key", nargs="*", default=None, help="check the calls listed for these GPU models (default: "
                   "every list; a launch is the same silicon's numerics on each)")
    args = p.parse_args(argv)
    import torch

    import tcnumerics.torch as tct
    from tcnumerics.library.check import write_capture

    with open(args.changed) as fh:
        lists = json.load(fh)
    recs, seen = [], set()
    for key, rs in lists.items():
        if args.gpu_key is None or key in args.gpu_key:
            for r in rs:
                k = json.dumps({f: v for f, v in r.items() if f != "gpu"}, sort_keys=True)
                if k not in seen:
                    seen.add(k)
                    recs.append(r)
    gpu = torch.cuda.get_device_name()
    observations, totals = [], dict(calls=0, exact=0, flagged=0, silent=0)
    for i, rec in enumerate(recs):
        if rec["op"] not in ("matmul", "bmm") or rec.get("bias") or rec.get("c_kind", "none") != "none":
            print(json.dumps(dict(skipped=rec)), flush=True)
            continue
        A, B = operands(rec, 1000 + i)
        with tct.emulate("hopper", check=True) as run:
            (torch.bmm if rec["op"] == "bmm" else torch.mm)(A, B)
        torch.cuda.synchronize()
        tot = run.check_report().totals()
        sites = [dict(shape=s.shape, layout=s.layout, predicted=s.predicted[:90], modelled=s.modelled,
                      verdict=s.verdict, kernels=[k[:70] for k in s.native_kernels]) for s in run.check_report()]
        print(json.dumps(dict(gpu=gpu, call=rec, **tot, sites=sites)), flush=True)
        observations.extend(run.mode.checker.observations())
        for k in totals:
            totals[k] += tot[k]
    tag = gpu.replace("NVIDIA ", "").split()[0].lower()
    write_capture(os.path.join(os.environ.get("OUT", "/tmp"), f"check_calls_{tag}.json.gz"), observations,
                  dict(device=gpu, torch=torch.__version__, cuda=torch.version.cuda))
    print(json.dumps(dict(gpu=gpu, total=totals)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
