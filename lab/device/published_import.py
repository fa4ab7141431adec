"""Convert Khattak & Mikaitis' published GPU captures into tcnumerics vector files.

Source: github.com/north-numerical-computing/MATLAB-tensor-core, ``model_validation/``
(BSD-2-Clause, Copyright (c) 2025, Faizan A. Khattak and Mantas Mikaitis).  Each set is
5,000 dot products captured on one GPU by one of their CUDA benches:

* ``wmma_fp16_bf16_tf32_input.cu``: ``wmma`` m16n16k16 (FP16, BF16) or m16n16k8 (TF32);
  row 0 of A and column 0 of B hold the first ``fma_size`` values of a line (the rest
  zero), converted on the host with ``__float2half`` / ``__float2bfloat16`` (RNE; TF32:
  the raw FP32 bits); C (0,0) is the FP32 value of the c file, or ``__float2half`` of it
  for FP16 output; D (0,0) is written as the FP32 bits of the result.
* ``mma_fp8_output_fp32.cu`` / ``..._fp16.cu``: ``mma.sync`` m16n8k32 FP8; the kernel is
  launched with the b file's values as A and the a file's as B (``(d_C, d_b, d_a, c)``),
  converted on the device with ``__nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...)``.

The vector files hold exactly what reached the instruction (operands zero-padded to the
instruction's K, as the bench did) and the mapping to the catalog entry that explains the
set (``SETS`` below; docs/catalog.md gives the evidence).

Every set is converted and replayed through its entry in full (5,000 vectors); the first
``--count`` (default: all 5,000) are written.

Usage (a checkout of their repository, or ``git archive HEAD model_validation LICENCE``)::

    python lab/device/published_import.py SRC_DIR vectors/published [--count N] [--overwrite]
"""

from __future__ import annotations

import argparse
import os
import sys

import ml_dtypes
import numpy as np

from tcnumerics.vectors.families import expected_d
from tcnumerics.vectors.io import VectorSet, save

REPO = "github.com/north-numerical-computing/MATLAB-tensor-core"
COMMIT = "b12b5a7"  # the snapshot converted here
LICENCE = ("BSD-2-Clause; Copyright (c) 2025, Faizan A. Khattak and Mantas Mikaitis; all rights reserved "
           "(full notice: vectors/published/LICENCE-MATLAB-tensor-core)")
WMMA_BENCH = "model_validation/CUDA/wmma_fp16_bf16_tf32_input.cu"
FP8_BENCH = {"fp32": "model_validation/CUDA/mma_fp8_output_fp32.cu",
             "fp16": "model_validation/CUDA/mma_fp8_output_fp16.cu"}
GPUS = {  # their folder -> (the GPU named in provenance, catalog architecture)
    "V100": ("NVIDIA V100", "volta"), "A100": ("NVIDIA A100", "ampere"), "A2": ("NVIDIA A2", "ampere"),
    "Ada": ("NVIDIA L40S (Ada; their Ada/ and L40S/ folders hold byte-identical files)", "ada"),
    "H100": ("NVIDIA H100", "hopper"), "H200": ("NVIDIA H200", "hopper"), "B200": ("NVIDIA B200", "blackwell"),
}
FMA_SIZE = {  # values per line of the a/b files (the bench's fma_size; FP8: the whole k32)
    ("volta", "fp16"): 4, ("ampere", "fp16"): 8, ("ampere", "bf16"): 8, ("ampere", "tf32"): 4,
    ("ada", "fp16"): 8, ("ada", "bf16"): 8, ("ada", "tf32"): 4,
}
_PTX = {"fp16": "f16", "fp32": "f32", "bf16": "bf16", "E4M3": "e4m3", "E5M2": "e5m2"}


# Sets their published bench did not produce: Hopper FP8 with FP32 output.  Their bench, built
# with nvcc 13.0 and run on an H100 with their inputs, returns our hopper.mma entry bit for bit and
# differs from their d on 5,000 of 5,000; no ptxas from 12.4 to 13.5 gives their d, with or without
# C.  Their d is the wgmma FP8 unit with a zero accumulator on all 5,000 -- as their validation
# script says ("D = AB + D where D is zero for fp8 with WGMMA"; H100 and H200 d files are
# byte-identical).  docs/catalog.md has the evidence.
WGMMA_ZERO_C = {("hopper", "E4M3", "fp32"), ("hopper", "E5M2", "fp32")}


def instruction_for(arch: str, fmt: str, out: str) -> tuple[str, int, str]:
    """(catalog entry, K, the PTX the bench issued) for one of their sets."""
    d = _PTX[out]
    if (arch, fmt, out) in WGMMA_ZERO_C:
        t = _PTX[fmt]
        return f"hopper.wgmma.m64n8k32.{d}.{t}.{t}", 32, f"wgmma.mma_async.sync.aligned.m64nNk32.{d}.{t}.{t} with scale-d 0 (no accumulator)"
    if fmt in ("E4M3", "E5M2"):
        t = _PTX[fmt]
        ptx = f"mma.sync.aligned.m16n8k32.row.col.{d}.{t}.{t}.{d}"
        return f"{arch}.mma.m16n8k32.{d}.{t}.{t}.{d}", 32, ptx
    if fmt == "tf32":  # wmma m16n16k8 TF32 is 2 chained HMMA.1684 per n8 half on sm_80..sm_100 (SASS)
        return f"{arch}.mma.m16n8k4.f32.tf32.tf32.f32", 8, "wmma.mma.sync.aligned.row.col.m16n16k8.f32.tf32.tf32.f32"
    ptx = f"wmma.mma.sync.aligned.row.col.m16n16k16.{d}.{_PTX[fmt]}.{_PTX[fmt]}.{d}"
    if arch == "volta":
        return f"volta.wmma.m16n16k16.{d}.f16.f16.{d}", 16, ptx
    # sm_80+ wmma m16n16k16 is two mma.sync m16n8k16 halves (HMMA.16816, nvcc 13.0 SASS): the same dot product
    return f"{arch}.mma.m16n8k16.{d}.{_PTX[fmt]}.{_PTX[fmt]}.{d}", 16, ptx


def read_hex_rows(path: str) -> np.ndarray:
    """Lines of space-separated 8-digit hex FP32 bit patterns -> uint32 [rows, values]."""
    with open(path) as fh:
        rows = [[int(t, 16) for t in line.split()] for line in fh if line.strip()]
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise ValueError(f"{path}: rows of different lengths {sorted(widths)}")
    return np.array(rows, dtype=np.uint32)


def read_binary_words(path: str) -> np.ndarray:
    """One 32-character binary FP32 bit pattern per line -> uint32 [rows]."""
    with open(path) as fh:
        words = [line.strip() for line in fh if line.strip()]
    bad = [w for w in words if len(w) != 32 or set(w) - {"0", "1"}]
    if bad:
        raise ValueError(f"{path}: not a 32-bit binary word: {bad[0]!r}")
    return np.array([int(w, 2) for w in words], dtype=np.uint32)


def _f32(bits: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)


def convert_operands(bits: np.ndarray, fmt: str) -> np.ndarray:
    """FP32 bit patterns -> the operand bits the bench handed the instruction."""
    x = _f32(bits)
    if fmt == "fp16":  # __float2half: RNE
        return x.astype(np.float16).view(np.uint16)
    if fmt == "bf16":  # __float2bfloat16: RNE
        return x.astype(ml_dtypes.bfloat16).view(np.uint16)
    if fmt == "tf32":  # raw FP32 bits; the unit reads the upper 19
        return np.asarray(bits, dtype=np.uint32)
    dtype = {"E4M3": ml_dtypes.float8_e4m3fn, "E5M2": ml_dtypes.float8_e5m2}[fmt]
    top = float(ml_dtypes.finfo(dtype).max)
    # __NV_SATFINITE: out-of-range values (infinities too) become the largest finite; NaN stays NaN
    sat = np.where(np.isnan(x), x, np.clip(x, -top, top)).astype(np.float32)
    return sat.astype(dtype).view(np.uint8)


def _exact_fp16(bits32: np.ndarray, path: str) -> np.ndarray:
    x = _f32(bits32)
    h = x.astype(np.float16)
    if not np.array_equal(h.astype(np.float32).view(np.uint32), bits32):
        raise ValueError(f"{path}: an FP16-output word is not an FP16 value")
    return h.view(np.uint16)


def convert_set(src: str, gpu: str, fmt: str, out: str) -> VectorSet:
    """One of their sets (GPU folder, input format folder, output 'fp32'/'fp16') -> VectorSet."""
    device, arch = GPUS[gpu]
    name, k, ptx = instruction_for(arch, fmt, out)
    folder = os.path.join(src, "model_validation", gpu, fmt)
    files = {x: os.path.join(folder, f"{x}_{gpu}_{fmt}.txt") for x in "ab"}
    files["c"] = os.path.join(folder, f"c_{gpu}_fp32.txt")
    files["d"] = os.path.join(folder, f"d_{gpu}_{out}.txt")
    a_raw, b_raw = read_hex_rows(files["a"]), read_hex_rows(files["b"])
    c_raw, d_raw = read_binary_words(files["c"]), read_binary_words(files["d"])
    n = len(d_raw)
    if not (len(a_raw) == len(b_raw) == len(c_raw) == n):
        raise ValueError(f"{folder}: a, b, c, d hold {len(a_raw)}, {len(b_raw)}, {len(c_raw)}, {n} rows")
    fp8 = fmt in ("E4M3", "E5M2")
    used = k if fp8 else FMA_SIZE.get((arch, fmt), 16 if fmt != "tf32" else 4)
    if a_raw.shape[1] != used:
        raise ValueError(f"{files['a']}: {a_raw.shape[1]} values per line, the bench reads {used}")
    if fp8:  # the FP8 benches pass file b as A and file a as B
        a_raw, b_raw = b_raw, a_raw
    a_ops, b_ops = convert_operands(a_raw, fmt), convert_operands(b_raw, fmt)
    pad = ((0, 0), (0, k - used))
    a, b = np.pad(a_ops, pad), np.pad(b_ops, pad)
    extra = {"family": np.full(n, "published")}
    zero_c = (arch, fmt, out) in WGMMA_ZERO_C
    if out == "fp16":  # C enters through __float2half (RNE); D was written as the FP32 of an FP16
        c = _f32(c_raw).astype(np.float16).view(np.uint16)
        d = _exact_fp16(d_raw, files["d"])
    elif zero_c:  # the c file did not take part (see WGMMA_ZERO_C); kept for the record
        c, d = np.zeros(n, np.uint32), d_raw
        extra["c_file"] = c_raw
    else:
        c, d = c_raw, d_raw
    bench = FP8_BENCH[out] if fp8 else WMMA_BENCH
    if zero_c:
        bench = (f"not {bench}: that bench, rebuilt with nvcc 13.0 on an H100, reproduces hopper.mma.m16n8k32 "
                 f"(0 of 5,000 differ) and not this d (5,000 differ); this d is wgmma FP8 with D = 0")
    meta = {
        "instruction": name, "K": k,
        "device": device,
        "source": f"published capture: Khattak & Mikaitis, {REPO} @ {COMMIT}, "
                  f"model_validation/{gpu}/{fmt}/ (a, b, c_{gpu}_fp32, d_{gpu}_{out})",
        "bench": f"{bench} (issues {ptx})",
        "licence": LICENCE,
        "operands": ("file b -> A, file a -> B (the bench's launch order); " if fp8 else "")
                    + f"{used} values per vector, zero-padded to K={k} as the bench's fragments were",
        "conversion": {"fp16": "__float2half (RNE)", "bf16": "__float2bfloat16 (RNE)", "tf32": "raw FP32 bits",
                       }.get(fmt, "__nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) (RNE, saturating)"),
        "c_entry": "__float2half(c) (RNE)" if out == "fp16" else
                   ("zero (their c file is kept as c_file)" if zero_c else "FP32 bits of the c file"),
    }
    return VectorSet(a, b, c, d, meta, extra)


def discover(src: str) -> list[tuple[str, str, str]]:
    """Every (GPU folder, format folder, output) set in a model_validation tree, L40S/ skipped
    (byte-identical to Ada/, checked by ``main``)."""
    sets = []
    root = os.path.join(src, "model_validation")
    for gpu in sorted(GPUS):
        for fmt in sorted(os.listdir(os.path.join(root, gpu))):
            for out in ("fp32", "fp16"):
                if os.path.exists(os.path.join(root, gpu, fmt, f"d_{gpu}_{out}.txt")):
                    sets.append((gpu, fmt, out))
    return sets


def file_name(gpu: str, fmt: str, out: str) -> str:
    return f"{gpu.lower()}_{fmt.lower()}_{out}.npz"


def _same_tree(src: str, x: str, y: str) -> bool:
    rx, ry = (os.path.join(src, "model_validation", g) for g in (x, y))
    names = sorted(os.path.relpath(os.path.join(d, f), rx) for d, _, fs in os.walk(rx) for f in fs)
    for rel in names:
        with open(os.path.join(rx, rel), "rb") as fa, open(os.path.join(ry, rel.replace(x, y)), "rb") as fb:
            if fa.read() != fb.read():
                return False
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", help="a checkout of MATLAB-tensor-core (holding model_validation/)")
    p.add_argument("out", help="output directory (vectors/published)")
    p.add_argument("--count", type=int, default=5000, help="vectors written per set (all are replayed)")
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    if os.path.isdir(os.path.join(args.src, "model_validation", "L40S")) and not _same_tree(args.src, "L40S", "Ada"):
        print("L40S/ differs from Ada/: convert it separately", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    failing = 0
    for gpu, fmt, out in discover(args.src):
        vs = convert_set(args.src, gpu, fmt, out)
        bad = int((expected_d(vs.meta["instruction"], vs.a, vs.b, vs.c) != vs.d).sum())
        failing += bad > 0
        n = min(args.count, len(vs.d))
        vs.meta.update(vectors_in_set=len(vs.d), vectors_here=n, replayed_in_full=f"{len(vs.d) - bad} of "
                       f"{len(vs.d)} bit-exact at conversion")
        part = VectorSet(vs.a[:n], vs.b[:n], vs.c[:n], vs.d[:n], vs.meta, {k: v[:n] for k, v in vs.extra.items()})
        path = os.path.join(args.out, file_name(gpu, fmt, out))
        save(path, part, overwrite=args.overwrite)
        print(f"{path}: {vs.meta['instruction']} K={vs.meta['K']}: {len(vs.d) - bad}/{len(vs.d)} bit-exact, {n} written")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
