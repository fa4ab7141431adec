"""Turn the H100 toolchain run (published_device.py) into committed evidence under vectors/published/device/.

Writes, from ``toolchain.npz`` / ``summary.json`` / ``bench_sass.txt`` (the device run) and the
cubin ``index.json`` (published_ptxas.py build):

* ``h100_ptxas12_4-12_6_<form>.npz``: FP8 ``mma.sync`` k32 FP32 bits from the ptxas 12.4.131 cubins
  (12.5.82 and 12.6.85 gave the same bits), instruction ``hopper-ptxas12_4-12_6.mma...``;
* ``h100_ptxas12_8-13_5_<form>.npz``: the same inputs through the 12.8.93 / 12.9.86 / 13.0.88 /
  13.5.37 cubins and this machine's nvcc 13.0 (all equal), instruction ``hopper.mma...``;
* ``h100_bench_nvcc13_<type>_<out>.npz``: Khattak & Mikaitis' FP8 benches rebuilt with nvcc 13.0,
  fed their H100 inputs (first ``--count``);
* ``sass.json``: the FP8 opcodes per ptxas release, architecture and form, the full SASS of the
  k32 e4m3 FP32 form per release, and the matrix/addition lines of the benches.

Vectors kept per form: every one whose bits differ between the two lowerings, plus the first
``--per-family`` of each family.

* ``h100_wgmma_vs_published_fp32.json`` (with ``--wgmma``): their FP8 -> FP32 d against our H100 wgmma.

Usage::

    python lab/device/published_record.py RUN_DIR CUBIN_DIR SRC_DIR vectors/published/device \
        [--wgmma RUN2/wgmma.npz] [--overwrite]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from published_device import FAMILIES, PER_FAMILY  # noqa: E402
from published_import import LICENCE, convert_set  # noqa: E402

from tcnumerics.vectors.io import VectorSet, save  # noqa: E402

OLD = ("12.4.131", "12.5.82", "12.6.85")
NEW = ("12.8.93", "12.9.86", "13.0.88", "13.5.37", "nvcc-device")
DEVICE = "NVIDIA H100 80GB HBM3 (sm_90), driver 580.159.04"


def _same(z, keys: list[str]) -> np.ndarray:
    first = z[keys[0]]
    for k in keys[1:]:
        if not np.array_equal(z[k], first):
            raise ValueError(f"{k} differs from {keys[0]}: the releases do not agree")
    return first


def record_lowerings(z, out: str, per_family: int, overwrite: bool) -> list[str]:
    written = []
    family = np.repeat(np.array(FAMILIES), PER_FAMILY)
    for a in ("e4m3", "e5m2"):
        for b in ("e4m3", "e5m2"):
            form = f"m16n8k32.f32.{a}.{b}.f32"
            A, B, C = (z[f"families/{form}/{x}"] for x in "abc")
            old = _same(z, [f"families/{form}/d@{r}" for r in OLD])
            new = _same(z, [f"families/{form}/d@{r}" for r in NEW])
            first = (np.arange(len(C)) % PER_FAMILY) < per_family
            keep = np.flatnonzero((old != new) | first)
            for label, d, name, releases in (
                    ("12_4-12_6", old, f"hopper-ptxas12_4-12_6.mma.{form}", OLD),
                    ("12_8-13_5", new, f"hopper.mma.{form}", NEW)):
                meta = {"instruction": name, "K": 32, "device": DEVICE,
                        "source": "measured by tcnumerics: lab/device/published_ptxas.py cubins through "
                                  "tcnumerics.probe (CuPy 14.2) on an H100, lab/device/published_device.py",
                        "ptxas": ", ".join(r if r != "nvcc-device" else "nvcc 13.0 on the device" for r in releases),
                        "identical_bits_under": list(releases),
                        "differs_from_other_lowering": int((old != new)[keep].sum()),
                        "selection": f"every vector whose bits differ between the ptxas 12.4-12.6 and 12.8-13.5 "
                                     f"lowerings, plus the first {per_family} of each family"}
                path = os.path.join(out, f"h100_ptxas{label}_mma_{form.replace('.', '_')}.npz")
                save(path, VectorSet(A[keep], B[keep], C[keep], d[keep], meta, {"family": family[keep]}),
                     overwrite=overwrite)
                written.append(path)
    return written


def record_bench(z, src: str, out: str, count: int, overwrite: bool) -> list[str]:
    written = []
    for fmt in ("E4M3", "E5M2"):
        for o in ("fp32", "fp16"):
            t = fmt.lower()
            vs = convert_set(src, "H100", fmt, o)
            d = z[f"bench/{t}/{o}"]
            if o == "fp16":
                d = d.view(np.float32).astype(np.float16).view(np.uint16)
            c = vs.extra.get("c_file", vs.c)  # the bench adds their c file's C (the published d did not)
            dt = "f32" if o == "fp32" else "f16"
            meta = {"instruction": f"hopper.mma.m16n8k32.{dt}.{t}.{t}.{dt}", "K": 32, "device": DEVICE,
                    "source": "Khattak & Mikaitis' bench (model_validation/CUDA/mma_fp8_output_"
                              f"{o}.cu, not committed) rebuilt with nvcc 13.0 "
                              "(-gencode=arch=compute_90,code=sm_90), run by tcnumerics on their H100 inputs",
                    "inputs_licence": LICENCE,
                    "their_d_differs": int((d != vs.d).sum()), "vectors_in_set": len(d)}
            n = min(count, len(d))
            path = os.path.join(out, f"h100_bench_nvcc13_{t}_{o}.npz")
            save(path, VectorSet(vs.a[:n], vs.b[:n], c[:n], d[:n], meta, {"family": np.full(n, "published")}),
                 overwrite=overwrite)
            written.append(path)
    return written


def record_sass(run: str, cubins: str, out: str) -> str:
    with open(os.path.join(cubins, "index.json")) as fh:
        index = json.load(fh)
    ops = {f"{r['ptxas']}/{r['arch']}/{r['form']}": r.get("sass_ops") or {"refused": r["refused"]}
           for r in index["builds"]}
    full = {f"{r['ptxas']}/{r['arch']}": [x for x in r["sass"] if not x.startswith("NOP")]
            for r in index["builds"] if r["form"] == "m16n8k32.f32.e4m3.e4m3.f32" and "sass" in r}
    with open(os.path.join(run, "bench_sass.txt")) as fh:
        bench = fh.read()
    keep = re.compile(r"=====|HMMA|HADD2|FADD|QGMMA|HGMMA|UNPACK")
    bench_lines = [re.sub(r"\s+", " ", re.sub(r"/\*[0-9a-fx]*\*/", "", x)).strip()
                   for x in bench.splitlines() if keep.search(x)]
    with open(os.path.join(run, "summary.json")) as fh:
        summary = json.load(fh)
    doc = {"device": summary["device"], "nvcc_on_device": summary["nvcc"],
           "fp8_opcodes": ops, "sass_k32_f32_e4m3": full, "bench_sass_lines": bench_lines}
    path = os.path.join(out, "sass.json")
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=0)
    return path


def record_wgmma(wgmma_npz: str, src: str, out: str) -> str:
    """Their FP8 -> FP32 sets against our H100 wgmma run (D = 0 and with their C): counts per set."""
    z = np.load(wgmma_npz, allow_pickle=False)
    doc = {"device": DEVICE, "kernel": "tcnumerics.probe wgmma.mma_async m64n8k32 (SASS: QGMMA.64 x1), nvcc 13.0",
           "inputs": "their H100 E4M3/E5M2 sets (H200's are the same operands), all 5,000"}
    for gpu in ("H100", "H200"):
        for fmt in ("E4M3", "E5M2"):
            t = fmt.lower()
            theirs = convert_set(src, gpu, fmt, "fp32").d
            doc[f"{gpu}/{t}"] = {"differ_with_zero_accumulator": int((z[f"wgmma/{t}/d_c0"] != theirs).sum()),
                                 "differ_with_their_c": int((z[f"wgmma/{t}/d_c"] != theirs).sum()),
                                 "vectors": len(theirs)}
    path = os.path.join(out, "h100_wgmma_vs_published_fp32.json")
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("cubins")
    p.add_argument("src")
    p.add_argument("out")
    p.add_argument("--per-family", type=int, default=128)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--wgmma", help="wgmma.npz of published_device.py --wgmma (optional)")
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.wgmma:
        print(record_wgmma(args.wgmma, args.src, args.out))
    z = np.load(os.path.join(args.run, "toolchain.npz"), allow_pickle=False)
    for path in (record_lowerings(z, args.out, args.per_family, args.overwrite)
                 + record_bench(z, args.src, args.out, args.count, args.overwrite)
                 + [record_sass(args.run, args.cubins, args.out)]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
