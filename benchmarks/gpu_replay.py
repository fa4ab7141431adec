"""Replay the committed Hopper silicon captures through the GPU engine (``engine="cuda"``).

``vectors/hopper/*.npz``: instruction-level captures, replayed by ``vectors.verify.verify_file``;
``vectors/library/*.npz``: torch.matmul / torch._scaled_mm calls, replayed through the library
presets (as ``tests/test_library_captures.py`` does) with their GEMMs on the GPU.  Entries the
GPU engine does not run (binary, sparse selection, ...) are evaluated by the CPU fast engine
after a warning; the counts say how many vectors each engine replayed.  Needs a GPU.

    PYTHONPATH=src python3 benchmarks/gpu_replay.py --json replay.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import warnings

import numpy as np

ROOT = os.path.join(os.path.dirname(__file__), "..")


def replay_instructions(engine: str = "cuda") -> dict:
    from tcnumerics.engines import cuda
    from tcnumerics.vectors.verify import verify_file

    out = dict(files=0, vectors=0, mismatches=0, gpu_vectors=0, cpu_fallback_vectors=0, failing=[])
    for path in sorted(glob.glob(os.path.join(ROOT, "vectors", "hopper", "*.npz"))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = verify_file(path, engine=engine)
        out["files"] += 1
        out["vectors"] += rep.n
        bad = int(getattr(rep, "mismatches", 0))
        out["mismatches"] += bad
        on_gpu = cuda.unsupported_reason(rep.instruction) is None
        out["gpu_vectors" if on_gpu else "cpu_fallback_vectors"] += rep.n
        if bad:
            out["failing"].append(os.path.basename(path))
    return out


def replay_library(engine: str = "cuda") -> dict:
    import tcnumerics as tc
    from tcnumerics.library.presets import h200_presets

    fmt_of = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "e4m3": "e4m3"}
    out = dict(calls=0, outputs=0, mismatches=0, not_modelled=0, other_format=0, failing=[])
    for path in sorted(glob.glob(os.path.join(ROOT, "vectors", "library", "*.npz"))):
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            arrays = {k: z[k] for k in z.files if k != "meta"}
        for rec in meta["records"]:
            if "shape" not in rec or "operands" not in rec:  # survey records: replayed by their own tool
                out["other_format"] += 1
                continue
            scaled = rec["op"] == "torch._scaled_mm"
            lg = (h200_presets("torch._scaled_mm", dtype=rec["fmt"], fast_accum=rec["options"]["use_fast_accum"])
                  if scaled else h200_presets("torch.matmul", dtype="tf32" if rec["fmt"] == "fp32" else rec["fmt"]))
            M, N, K = rec["shape"]
            kind = rec["options"].get("scales", "unit")
            scales = {"unit": "tensor", "tensor": "tensor", "rowwise": "rowwise"}.get(kind, "blockwise")
            plan = lg.plan(M, N, K, scales=scales) if scaled else lg.plan(M, N, K)
            if not plan.modelled:
                out["not_modelled"] += 1
                continue
            tag, i, fmt = rec["operands"], rec["id"], fmt_of[rec["fmt"]]
            A = tc.get_format(fmt).to_array(arrays[f"a_{tag}"])
            B = tc.get_format(fmt).to_array(arrays[f"b_{tag}"])
            kw = {}
            if f"scale_a_{i}" in arrays:
                sa, sb = arrays[f"scale_a_{i}"].view(np.float32), arrays[f"scale_b_{i}"].view(np.float32)
                rows, cols = arrays[f"rows_{tag}"], arrays[f"cols_{tag}"]
                if kind == "tensor":
                    kw = dict(scale_a=sa.reshape(()), scale_b=sb.reshape(()))
                elif kind == "rowwise":
                    kw = dict(scale_a=sa.reshape(-1)[rows], scale_b=sb.reshape(-1)[cols])
                else:
                    kw = dict(scale_a=sa.reshape(M, -1)[rows], scale_b=sb.reshape(-1, -(-N // 128))[:, cols // 128])
            C = tc.get_format(fmt).to_array(arrays[f"c_{tag}"]) if f"c_{tag}" in arrays else None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = lg(A, B, C, out_dtype=rec["out"], plan=plan, engine=engine, **kw)
            bits = tc.get_format(rec["out"]).bits_of(got)
            want = arrays[f"d_{i}"]
            bad = int(np.count_nonzero(bits != want))
            out["calls"] += 1
            out["outputs"] += int(want.size)
            out["mismatches"] += bad
            if bad:
                out["failing"].append(f"{os.path.basename(path)}:{i}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--engine", default="cuda", help="engine to replay with (cuda; fast for a CPU dry run)")
    args = p.parse_args(argv)
    result = dict(hopper=replay_instructions(args.engine))
    print(f"vectors/hopper through engine={args.engine!r}: {result['hopper']}", flush=True)
    result["library"] = replay_library(args.engine)
    print(f"vectors/library through engine={args.engine!r}: {result['library']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    bad = result["hopper"]["mismatches"] + result["library"]["mismatches"]
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
