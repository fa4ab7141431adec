"""Candidate kernel models (tcnumerics.gemm keyword sets) for each kind of capture record."""

from __future__ import annotations

import numpy as np

import tcnumerics as tc

WG = {"bf16": "hopper.wgmma.m64n8k16.f32.bf16.bf16", "fp16": "hopper.wgmma.m64n8k16.f32.f16.f16",
      "fp32": "hopper.wgmma.m64n8k8.f32.tf32.tf32", "e4m3": "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"}
MMA8 = {"bf16": "hopper.mma.m16n8k8.f32.bf16.bf16.f32", "fp16": "hopper.mma.m16n8k8.f32.f16.f16.f32"}
SPLITS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32)


def _tf32_round(mode):
    fmt = tc.get_format("tf32")

    def prepare(x):
        return fmt.to_float(fmt.from_float(np.asarray(x, np.float64), mode)).astype(np.float32)
    return prepare


def _scales(rec, store, rows, cols):
    idx = rec["id"]
    sa = store[f"scale_a{idx}"].view(np.float32)
    sb = store[f"scale_b{idx}"].view(np.float32)
    kind = rec["options"]["scales"]
    if kind == "tensor":
        return {"scale_a": float(sa[0]), "scale_b": float(sb[0])}
    if kind == "rowwise":
        return {"scale_a": sa.reshape(-1)[rows], "scale_b": sb.reshape(-1)[cols]}
    # block-wise: A [M, KB] per row; B [KB, NB] per 128x128 block -> expand to the sampled columns
    nb_of_col = cols // 128
    b = sb[:, nb_of_col]  # [KB, len(cols)]: every sampled column its own "block"
    return {"scale_a": sa[rows], "scale_b": b, "scale_block": 128}


def candidates_for(rec: dict) -> dict:
    fmt = rec["fmt"]
    M, N, K = rec["shape"]
    out = {}
    if fmt in ("bf16", "fp16"):
        for name, inst in (("wg", WG[fmt]), ("mma8", MMA8[fmt])):
            for s in SPLITS:
                for g in ((16,) if s == 1 else (64, 128, 256)):
                    if s > 1 and -(-K // g) < s:
                        continue
                    out[f"{name}-split{s}-g{g}"] = dict(instruction=inst, split_k=_split(K, s, g, 16))
    elif fmt == "fp32":
        for rname, prep in (("trunc", None), ("rne", _tf32_round("rne")), ("rna", _tf32_round("rna"))):
            for s in SPLITS:
                for g in ((8,) if s == 1 else (32, 64, 128)):
                    if s > 1 and -(-K // g) < s:
                        continue
                    kw = dict(instruction=WG[fmt], split_k=_split(K, s, g, 8))
                    if prep:
                        kw["prepare"] = prep
                    out[f"{rname}-split{s}-g{g}"] = kw
    elif fmt == "e4m3":
        extra = _scales if rec["options"].get("scales", "unit") != "unit" else None
        for promote in (None, 128, 256, 64):
            for s in SPLITS:
                for g in ((32,) if s == 1 else (128, 256)):
                    if s > 1 and -(-K // g) < s:
                        continue
                    kw = dict(instruction=WG[fmt], split_k=_split(K, s, g, 32), promote_every=promote)
                    if extra:
                        kw["extra"] = extra
                    out[f"p{promote}-split{s}-g{g}"] = kw
    return out


def _split(K: int, s: int, granule: int, k: int):
    """Slice lengths: s equal slices on ``granule`` boundaries (None for one slice)."""
    if s == 1:
        return None
    k_pad = -(-K // k) * k
    per = -(-(-(-k_pad // granule)) // s) * granule
    return [per] * s
