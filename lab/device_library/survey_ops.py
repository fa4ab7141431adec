"""Device survey of torch GEMM ops on Hopper: kernel names (torch.profiler) and sampled output bits.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/survey_ops.py [--limit N] \
        [--set survey|holdout|holdout2|holdout3]

Runs every call of ``survey_calls.survey_calls()`` (or of a held-out list: ``holdout_calls()`` ...).  Operands are built on the GPU from index
hashes (``inputs.hashed_values``, reimplemented here in int64 torch arithmetic and checked
against the numpy version at start), so only output bits travel back: ``$OUT/survey.npz``
(``d{id}`` bits of sampled batches x rows x columns, ``rows{id}``/``cols{id}``/``batches{id}``)
and ``$OUT/index.json`` (per call: the kernels torch.profiler saw, determinism, errors, env), plus
``$OUT/log.txt``.  ``--set holdout2`` / ``holdout3`` write only the two data files, under ``$OUT/<set>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

from inputs import FIELD_BITS, hashed_bits, hashed_values
from kernel_calls import kernel_sample_calls, kernel_sample_calls2, kernel_sample_calls3
from survey_calls import SURVEY_SETS
from train_calls import train_bits_calls

OUT = os.environ.get("OUT", "/tmp/survey_out")
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "e4m3": torch.float8_e4m3fn,
      "e5m2": torch.float8_e5m2}
VIEW = {1: (torch.uint8, np.uint8), 2: (torch.int16, np.uint16), 4: (torch.int32, np.uint32)}
_M64 = 1 << 64
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run of the script


def _s64(x: int) -> int:
    x %= _M64
    return x - _M64 if x >= 1 << 63 else x


def _lsr(z: torch.Tensor, s: int) -> torch.Tensor:
    return (z >> s) & ((1 << (64 - s)) - 1)


def hashed_gpu(seed: int, n_rows: int, n_cols: int, fmt: str, scale_log2: int = 0) -> torch.Tensor:
    """The GPU twin of inputs.hashed_values for a whole [n_rows, n_cols] matrix, in ``fmt``."""
    out = torch.empty((n_rows, n_cols), dtype=DT[fmt], device=DEV)
    off = _s64(1 + seed * 0x100000001B3)
    step = max(1, (1 << 24) // max(n_cols, 1))
    cols = torch.arange(n_cols, device=DEV, dtype=torch.int64)
    for r0 in range(0, n_rows, step):
        r = torch.arange(r0, min(n_rows, r0 + step), device=DEV, dtype=torch.int64)
        z = (r[:, None] * n_cols + cols[None, :] + off) * _s64(0x9E3779B97F4A7C15)
        z = (z ^ _lsr(z, 30)) * _s64(0xBF58476D1CE4E5B9)
        z = (z ^ _lsr(z, 27)) * _s64(0x94D049BB133111EB)
        z = z ^ _lsr(z, 31)
        mask = (1 << FIELD_BITS) - 1
        total = (z & mask) + (_lsr(z, FIELD_BITS) & mask) + (_lsr(z, 2 * FIELD_BITS) & mask)
        v = (total - 3 * 2 ** (FIELD_BITS - 1)).to(torch.float32) * 2.0 ** (scale_log2 - (FIELD_BITS - 1))
        out[r0:r0 + len(r)] = v.to(DT[fmt])
    return out


def bits_of(t: torch.Tensor) -> np.ndarray:
    tv, nv = VIEW[t.element_size()]
    return t.contiguous().view(tv).cpu().numpy().view(nv)


def scale_gpu(seed: int, rows: int, cols: int) -> torch.Tensor:
    """Scales 1 + v/4 (exact in FP32; inputs.hashed_values with scale_log2=-2, plus one)."""
    return 1.0 + hashed_gpu(seed, rows, cols, "fp32", -2)


def build(c: dict):
    """The torch call for survey call ``c`` (a zero-argument function)."""
    op, fmt, M, N, K, b = c["op"], c["fmt"], c["M"], c["N"], c["K"], c.get("b", 1)
    if op == "scaled_mm":
        A = hashed_gpu(c["seed_a"], M, K, fmt)
        Bt = hashed_gpu(c["seed_b"], K, N, c["b_fmt"]).t().contiguous()  # column-major B
        kind = c["scales"]
        if kind == "tensor":
            sa, sb = scale_gpu(c["seed_c"], 1, 1).reshape(()), scale_gpu(c["seed_c"] + 1, 1, 1).reshape(())
        elif kind == "rowwise":
            sa, sb = scale_gpu(c["seed_c"], M, 1), scale_gpu(c["seed_c"] + 1, 1, N)
        else:  # 1x128 blocks of A (outer-dim-major), 128x128 blocks of B
            kb, nb = -(-K // 128), -(-N // 128)
            sa = scale_gpu(c["seed_c"], M, kb).t().contiguous().t()
            sb = scale_gpu(c["seed_c"] + 1, kb, nb).t().contiguous().t()
        out = DT[c["out_dtype"]]
        return lambda: torch._scaled_mm(A, Bt.t(), sa, sb, out_dtype=out, use_fast_accum=c["fast_accum"])
    dt = DT[fmt]
    if op in ("bmm", "baddbmm"):  # a_t / b_t: each matrix of the batch transposed (attention's backward views)
        A = (hashed_gpu(c["seed_a"], b * K, M, fmt).view(b, K, M).transpose(1, 2) if c.get("a_t") else
             hashed_gpu(c["seed_a"], b * M, K, fmt).view(b, M, K))
        B = (hashed_gpu(c["seed_b"], b * N, K, fmt).view(b, N, K).transpose(1, 2) if c.get("b_t") else
             hashed_gpu(c["seed_b"], b * K, N, fmt).view(b, K, N))
    else:
        A = hashed_gpu(c["seed_a"], b * M, K, fmt)
        if c.get("a_t"):
            A = A.t().contiguous().t()
        B = hashed_gpu(c["seed_b"], K, N, fmt)
        if c.get("b_t"):
            B = B.t().contiguous().t()
    if op == "matmul":
        return lambda: torch.matmul(A, B)
    if op == "matmul_bcast":
        A3 = A.view(b, M, K)
        return lambda: torch.matmul(A3, B)
    if op == "mm_out":
        return lambda: torch.mm(A, B, out_dtype=torch.float32)
    if op == "linear":
        W = B.t().contiguous()
        bias = hashed_gpu(c["seed_c"], 1, N, fmt).view(N) if c["bias"] else None
        return lambda: F.linear(A, W, bias)
    if op == "addmm":
        C = hashed_gpu(c["seed_c"], 1, N, fmt).view(N) if c["c_1d"] else hashed_gpu(c["seed_c"], M, N, fmt)
        return lambda: torch.addmm(C, A, B, beta=c["beta"], alpha=c["alpha"])
    if op == "bmm":
        return lambda: torch.bmm(A, B)
    if op == "baddbmm":
        C = hashed_gpu(c["seed_c"], b * M, N, fmt).view(b, M, N)
        return lambda: torch.baddbmm(C, A, B, beta=c["beta"], alpha=c["alpha"])
    raise ValueError(op)


def kernels_of(fn):
    from torch.profiler import ProfilerActivity, profile

    if DEV != "cuda":
        return [], fn()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn()
        if DEV == "cuda":
            torch.cuda.synchronize()
    names = []
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA") and e.name not in names:
            names.append(e.name)
    return names, out


def sample_index(c: dict, shape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(c["id"])
    b, M, N = (1,) + tuple(shape) if len(shape) == 2 else tuple(shape)
    bs = np.sort(rng.choice(b, min(b, 3), replace=False))
    rows = np.sort(rng.choice(M, min(M, 16), replace=False))
    cols = np.sort(rng.choice(N, min(N, max(16, 256 // len(rows))), replace=False))
    return bs, rows, cols


def self_check(log) -> dict:
    """The GPU operand generator against the numpy one (tcnumerics' RNE conversion), per format."""
    res = {}
    for fmt in DT:
        g = bits_of(hashed_gpu(12345, 37, 1000, fmt))
        n = hashed_bits(fmt, 12345, 1000, np.arange(37), np.arange(1000))
        res[fmt] = int((g != n).sum())
    s = bits_of(scale_gpu(77, 5, 9))
    res["scale"] = int((s != (1.0 + hashed_values(77, 9, np.arange(5), np.arange(9), -2)).astype(np.float32)
                        .view(np.uint32)).sum())
    log(f"self-check (mismatching operand bits per format, must be 0): {res}")
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0)
    sets = {**SURVEY_SETS, "ksample": kernel_sample_calls, "ksample2": kernel_sample_calls2,
            "ksample3": kernel_sample_calls3, "train_bits": train_bits_calls}
    ap.add_argument("--set", choices=tuple(sets), default="survey", help="which call list to run")
    ap.add_argument("--dry-list", action="store_true", help="print the call list's size and kinds, run nothing")
    args = ap.parse_args()
    calls = sets[args.set]()
    if args.dry_list:
        from collections import Counter
        print(len(calls), "calls:", dict(Counter(c["op"] + ":" + c["fmt"] for c in calls)))
        return 0
    two_files = args.set not in ("survey", "holdout")  # later sets: the two data files only, in a folder of their own
    out_dir = os.path.join(OUT, args.set) if two_files else OUT
    os.makedirs(out_dir, exist_ok=True)
    lines = []

    def log(msg):
        print(msg, flush=True)
        lines.append(msg)

    gpu = DEV == "cuda"
    env = dict(torch=torch.__version__, cuda=torch.version.cuda, device=torch.cuda.get_device_name(0) if gpu else "cpu",
               capability=list(torch.cuda.get_device_capability(0)) if gpu else None,
               bf16_rpr=torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
               fp16_rpr=torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)
    try:
        from importlib.metadata import version
        env["nvidia-cublas"] = version("nvidia-cublas")
    except Exception as exc:
        env["nvidia-cublas"] = f"unknown ({exc})"
    log(f"env: {env}")
    env["self_check"] = self_check(log)
    if args.limit:
        calls = [c for c in calls if c.get("b", 1) * c["M"] * c["N"] * c["K"] <= 2 ** 24][:args.limit]
    arrays, records, t0 = {}, [], time.time()
    for c in calls:
        rec = dict(c)
        try:
            torch.set_float32_matmul_precision(c["prec"])
            fn = build(c)
            names, out = kernels_of(fn)
            again = fn()
            if DEV == "cuda":
                torch.cuda.synchronize()
            bs, rows, cols = sample_index(c, out.shape)
            pick = lambda t: (t.unsqueeze(0) if t.dim() == 2 else t)[bs][:, rows][:, :, cols]
            d = bits_of(pick(out))
            rec["deterministic"] = bool(np.array_equal(d, bits_of(pick(again))))
            rec["kernels"] = names
            rec["out"] = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}[out.dtype]
            i = c["id"]
            arrays[f"d{i}"], arrays[f"rows{i}"], arrays[f"cols{i}"], arrays[f"batches{i}"] = d, rows, cols, bs
            del out, again, fn
        except Exception as exc:
            rec["error"] = f"{type(exc).__name__}: {exc}"[:400]
        records.append(rec)
        if c["id"] % 50 == 0 or "error" in rec:
            log(f"[{c['id']}] {c['op']} {c['fmt']} {c['M']}x{c['N']}x{c['K']} -> "
                f"{rec.get('kernels', rec.get('error'))} ({time.time() - t0:.0f} s)")
    torch.set_float32_matmul_precision("highest")
    np.savez_compressed(os.path.join(out_dir, "survey.npz"), **arrays)
    with open(os.path.join(out_dir, "index.json"), "w") as fh:
        json.dump(dict(env=env, records=records), fh)
    log(f"{len(records)} calls, {sum('error' in r for r in records)} errors, {time.time() - t0:.0f} s; "
        f"wrote {out_dir}/survey.npz, index.json")
    if not two_files:  # the log is on stdout
        with open(os.path.join(out_dir, "log.txt"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
