"""Library-level captures on a Hopper GPU: torch.matmul (BF16/FP16/TF32) and torch._scaled_mm (E4M3).

Run on the device machine from the repository root:

    PYTHONPATH=src:lab/device_library python3 lab/device_library/capture.py [--quick]

Everything goes under $OUT: ``index.json`` (one record per call: op, formats, shape, options,
input seeds, the CUDA kernels torch.profiler saw, determinism across two runs), npz files with
the output bits (all of them for small outputs, a seeded row/column sample for large ones) and
the operands of the targeted probes, and ``log.txt``.  Random operands are not shipped: they are
regenerated from their seeds by ``inputs.operand_bits`` (identical on any machine).

Probes (FPRev-style, Xie et al.): all-"one" operands with a large product +M at position p_i
(row i of A) and -M at q_j (column j of B), so D[i, j] counts the "ones" that survive the
cancellation: how many depends on where p_i and q_j fall in the kernel's reduction tree.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import zlib

import numpy as np
import torch

from inputs import operand_bits

OUT = os.environ.get("OUT", "/tmp/capture_out")
FULL_LIMIT = 512 * 512  # outputs up to this many elements are kept whole
SAMPLE = 64  # rows and columns sampled from larger outputs

TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "e4m3": torch.float8_e4m3fn}
NP_VIEW = {"bf16": (np.int16, torch.int16, np.uint16), "fp16": (np.int16, torch.int16, np.uint16),
           "fp32": (np.int32, torch.int32, np.uint32), "e4m3": (np.uint8, torch.uint8, np.uint8)}

COMMON = [(128, 128, 256), (128, 128, 2048), (256, 256, 512), (512, 512, 1024)]
OTHER = [(64, 64, 8192), (96, 80, 333), (1024, 1024, 1024), (4096, 4096, 4096), (32, 32, 4096),
         (16, 16, 16384), (128, 128, 8192), (256, 256, 4096), (2048, 2048, 2048), (100, 100, 100)]
FP8_OTHER = [(64, 64, 8192), (96, 80, 352), (1024, 1024, 1024), (4096, 4096, 4096), (32, 32, 4096),
             (16, 16, 16384), (128, 128, 8192), (256, 256, 4096), (2048, 2048, 2048), (112, 112, 96)]

records: list[dict] = []
arrays: dict[str, dict[str, np.ndarray]] = {}
log_lines: list[str] = []


def log(msg: str) -> None:
    print(msg, flush=True)
    log_lines.append(msg)


def to_gpu(bits: np.ndarray, fmt: str) -> torch.Tensor:
    signed_np, signed_t, _ = NP_VIEW[fmt]
    return torch.from_numpy(np.ascontiguousarray(bits).view(signed_np)).cuda().view(TORCH[fmt])


def to_bits(t: torch.Tensor, fmt: str) -> np.ndarray:
    _, signed_t, unsigned_np = NP_VIEW[fmt]
    return t.contiguous().view(signed_t).cpu().numpy().view(unsigned_np)


def kernels_of(fn) -> tuple[list[str], torch.Tensor]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA") and e.name not in names:
            names.append(e.name)
    return names, out


def capture(group: str, record: dict, fn, out_fmt: str, extra: dict | None = None) -> None:
    """Run fn twice (determinism), once more under the profiler; keep the output bits."""
    idx = len(records)
    record = dict(record, id=idx, out=out_fmt)
    try:
        d1 = to_bits(fn(), out_fmt)
        torch.cuda.synchronize()
        d2 = to_bits(fn(), out_fmt)
        names, d3 = kernels_of(fn)
        d3 = to_bits(d3, out_fmt)
        record["kernels"] = names
        record["deterministic"] = bool(np.array_equal(d1, d2) and np.array_equal(d1, d3))
        M, N = d1.shape
        store = arrays.setdefault(group, {})
        if M * N <= FULL_LIMIT:
            store[f"d{idx}"] = d1
        else:
            rng = np.random.default_rng(idx)
            rows = np.sort(rng.choice(M, min(M, SAMPLE), replace=False))
            cols = np.sort(rng.choice(N, min(N, SAMPLE), replace=False))
            store[f"d{idx}"] = d1[np.ix_(rows, cols)]
            store[f"rows{idx}"] = rows
            store[f"cols{idx}"] = cols
        for key, value in (extra or {}).items():
            store[f"{key}{idx}"] = value
        record["file"] = f"{group}.npz"
        log(f"[{idx}] {record['op']} {record.get('fmt')} {record['shape']} {record.get('options', {})} -> "
            f"{out_fmt}: {names} det={record['deterministic']}")
    except Exception as exc:  # keep going: one unsupported variant must not lose the rest
        record["error"] = f"{type(exc).__name__}: {exc}"[:500]
        log(f"[{idx}] {record['op']} {record.get('fmt')} {record['shape']} {record.get('options', {})} FAILED: "
            f"{record['error'][:200]}")
    records.append(record)


def seeds_for(tag: str, M: int, N: int, K: int) -> tuple[int, int]:
    h = zlib.crc32(f"{tag}:{M}x{N}x{K}".encode()) % 10**6  # stored in each record anyway
    return 1000 + 2 * h, 1001 + 2 * h


# --- torch.matmul ----------------------------------------------------------------------------
def matmul_captures(fmt: str, shapes) -> None:
    for M, N, K in shapes:
        sa, sb = seeds_for("mm" + fmt, M, N, K)
        a_bits = operand_bits(fmt, sa, (M, K))
        b_bits = operand_bits(fmt, sb, (K, N))
        A, B = to_gpu(a_bits, fmt), to_gpu(b_bits, fmt)
        base = dict(op="torch.matmul", fmt=fmt, shape=[M, N, K], a_seed=sa, b_seed=sb, dist="normal_like")
        if fmt == "fp32":
            torch.backends.cuda.matmul.allow_tf32 = True
            try:
                torch.backends.cuda.matmul.fp32_precision = "tf32"
            except Exception:
                pass
            capture("matmul_tf32", dict(base, options={"allow_tf32": True}), lambda: torch.matmul(A, B), "fp32")
            continue
        flag = "allow_bf16_reduced_precision_reduction" if fmt == "bf16" else "allow_fp16_reduced_precision_reduction"
        for rpr in (True, False):
            setattr(torch.backends.cuda.matmul, flag, rpr)
            capture(f"matmul_{fmt}", dict(base, options={flag: rpr}), lambda: torch.matmul(A, B), fmt)
        setattr(torch.backends.cuda.matmul, flag, True)
        capture(f"matmul_{fmt}", dict(base, op="torch.mm", options={"out_dtype": "float32"}),
                lambda: torch.mm(A, B, out_dtype=torch.float32), "fp32")


def addmm_capture() -> None:
    M, N, K = 256, 256, 512
    sa, sb = seeds_for("addmm", M, N, K)
    sc = sa + 7
    A, B = to_gpu(operand_bits("bf16", sa, (M, K)), "bf16"), to_gpu(operand_bits("bf16", sb, (K, N)), "bf16")
    C = to_gpu(operand_bits("bf16", sc, (M, N), scale=8.0), "bf16")
    capture("matmul_bf16", dict(op="torch.addmm", fmt="bf16", shape=[M, N, K], a_seed=sa, b_seed=sb, c_seed=sc,
                                c_scale=8.0, dist="normal_like"), lambda: torch.addmm(C, A, B), "bf16")


# --- torch._scaled_mm ------------------------------------------------------------------------
def scaled_captures(shapes) -> None:
    one = torch.tensor(1.0, device="cuda")
    for M, N, K in shapes:
        sa, sb = seeds_for("smm", M, N, K)
        a_bits = operand_bits("e4m3", sa, (M, K))
        b_bits = operand_bits("e4m3", sb, (K, N))
        A = to_gpu(a_bits, "e4m3")
        Bt = to_gpu(np.ascontiguousarray(b_bits.T), "e4m3")  # [N, K] row-major = B column-major
        base = dict(op="torch._scaled_mm", fmt="e4m3", shape=[M, N, K], a_seed=sa, b_seed=sb, dist="normal_like")
        for fast in (True, False):
            for out in ("bf16", "fp32"):
                capture("scaled", dict(base, options={"use_fast_accum": fast, "scales": "unit"}),
                        lambda: torch._scaled_mm(A, Bt.t(), one, one, out_dtype=TORCH[out], use_fast_accum=fast), out)


def scaled_scale_captures() -> None:
    """Non-unit per-tensor, row-wise and block-wise scales: where the kernel applies them."""
    for M, N, K in ((256, 256, 512), (64, 64, 8192), (128, 128, 2048)):
        sa, sb = seeds_for("smm_scales", M, N, K)
        a_bits, b_bits = operand_bits("e4m3", sa, (M, K)), operand_bits("e4m3", sb, (K, N))
        A = to_gpu(a_bits, "e4m3")
        Bt = to_gpu(np.ascontiguousarray(b_bits.T), "e4m3")
        base = dict(op="torch._scaled_mm", fmt="e4m3", shape=[M, N, K], a_seed=sa, b_seed=sb, dist="normal_like")
        # per-tensor scales with inexact products (sa*sb needs more than 24 bits)
        s_a = np.array([0.7 + 2.0**-20], np.float32)
        s_b = np.array([1.3 + 2.0**-19], np.float32)
        ta, tb = torch.from_numpy(s_a.reshape(())).cuda(), torch.from_numpy(s_b.reshape(())).cuda()
        for fast in (True, False):
            for out in ("bf16", "fp32"):
                capture("scaled", dict(base, options={"use_fast_accum": fast, "scales": "tensor"}),
                        lambda: torch._scaled_mm(A, Bt.t(), ta, tb, out_dtype=TORCH[out], use_fast_accum=fast), out,
                        extra={"scale_a": s_a.view(np.uint32), "scale_b": s_b.view(np.uint32)})
        # row-wise: scale_a [M, 1], scale_b [1, N]
        r_a = (1.0 + np.abs(operand_bits("fp32", sa + 11, (M, 1)).view(np.float32))).astype(np.float32)
        r_b = (1.0 + np.abs(operand_bits("fp32", sb + 11, (1, N)).view(np.float32))).astype(np.float32)
        ra, rb = torch.from_numpy(r_a).cuda(), torch.from_numpy(r_b).cuda()
        for fast in (True, False):
            for out in ("bf16", "fp32"):
                capture("scaled", dict(base, options={"use_fast_accum": fast, "scales": "rowwise"}),
                        lambda: torch._scaled_mm(A, Bt.t(), ra, rb, out_dtype=TORCH[out], use_fast_accum=fast), out,
                        extra={"scale_a": r_a.view(np.uint32), "scale_b": r_b.view(np.uint32)})
        # block-wise 1x128 (A) and 128x128 (B), DeepSeek-V3 style; layouts as ATen checks them
        kb = -(-K // 128)
        nb = -(-N // 128)
        g_a = (0.5 + np.abs(operand_bits("fp32", sa + 13, (M, kb)).view(np.float32))).astype(np.float32)
        g_b = (0.5 + np.abs(operand_bits("fp32", sb + 13, (kb, nb)).view(np.float32))).astype(np.float32)
        ga = torch.from_numpy(np.ascontiguousarray(g_a.T)).cuda().t()  # shape [M, kb], stride (1, M)
        gb_nk = torch.from_numpy(np.ascontiguousarray(g_b.T)).cuda()  # scale of B^T [N, K]: [nb, kb] row-major
        attempts = [("scaled_mm", lambda fast, out: torch._scaled_mm(A, Bt.t(), ga, gb_nk.t(), out_dtype=TORCH[out],
                                                                      use_fast_accum=fast))]
        try:
            from torch.nn.functional import ScalingType, scaled_mm as f_scaled_mm

            attempts.append(("F.scaled_mm", lambda fast, out: f_scaled_mm(
                A, Bt.t(), ga, ScalingType.BlockWise1x128, gb_nk.t(), ScalingType.BlockWise128x128,
                output_dtype=TORCH[out], use_fast_accum=fast)))
        except Exception as exc:
            log(f"F.scaled_mm unavailable: {exc}")
        for api, call in attempts:
            for fast in (False, True):
                for out in ("bf16", "fp32"):
                    capture("scaled", dict(base, options={"use_fast_accum": fast, "scales": "blockwise_1x128_128x128",
                                                          "api": api}),
                            lambda: call(fast, out), out,
                            extra={"scale_a": g_a.view(np.uint32), "scale_b": g_b.view(np.uint32)})


# --- probes ----------------------------------------------------------------------------------
_ONE = {"bf16": 1.0, "fp16": 2.0**-12, "e4m3": 2.0**-6}
_BIG = {"bf16": 2.0**40, "fp16": 2.0**15, "e4m3": 448.0}


def probe_operands(fmt: str, M: int, N: int, K: int, p, q) -> tuple[np.ndarray, np.ndarray]:
    from tcnumerics.formats import get_format

    f = get_format(fmt)
    a = np.full((M, K), _ONE[fmt])
    b = np.full((K, N), _ONE[fmt])
    a[np.arange(M), p] = _BIG[fmt]
    b[q, np.arange(N)] = -_BIG[fmt]
    return f.from_float(a), f.from_float(b)


def probe_captures(quick: bool) -> None:
    cases = [("bf16", 64, 64, 8192), ("fp16", 64, 64, 8192), ("bf16", 96, 80, 333), ("bf16", 128, 128, 2048)]
    fp8_cases = [(64, 64, 8192), (128, 128, 2048)]
    for fmt, M, N, K in cases:
        for layout in ("coarse", "fine"):
            if layout == "coarse":
                p = (np.arange(M) * K) // M
                q = (np.arange(N) * K) // N + (K // N) // 2
            else:  # dense positions near the start and the middle, where slice edges would be
                p = np.concatenate([np.arange(M // 2) * 3, K // 2 - M // 4 + np.arange(M - M // 2) * 1])[:M]
                q = np.concatenate([K // 2 - N // 4 + np.arange(N // 2) * 1 + 1, K - 1 - np.arange(N - N // 2) * 5])[:N]
            a_bits, b_bits = probe_operands(fmt, M, N, K, p, q)
            A, B = to_gpu(a_bits, fmt), to_gpu(b_bits, fmt)
            base = dict(op="torch.matmul", fmt=fmt, shape=[M, N, K], probe=layout, dist="fprev")
            flag = ("allow_bf16_reduced_precision_reduction" if fmt == "bf16"
                    else "allow_fp16_reduced_precision_reduction")
            for rpr in ((True, False) if not quick else (True,)):
                setattr(torch.backends.cuda.matmul, flag, rpr)
                capture("probes", dict(base, options={flag: rpr}), lambda: torch.matmul(A, B), fmt,
                        extra={"a": a_bits, "b": b_bits})
            setattr(torch.backends.cuda.matmul, flag, True)
            capture("probes", dict(base, op="torch.mm", options={"out_dtype": "float32"}),
                    lambda: torch.mm(A, B, out_dtype=torch.float32), "fp32", extra={"a": a_bits, "b": b_bits})
    one = torch.tensor(1.0, device="cuda")
    for M, N, K in fp8_cases:
        p = (np.arange(M) * K) // M
        q = (np.arange(N) * K) // N + (K // N) // 2
        a_bits, b_bits = probe_operands("e4m3", M, N, K, p, q)
        A = to_gpu(a_bits, "e4m3")
        Bt = to_gpu(np.ascontiguousarray(b_bits.T), "e4m3")
        for fast in (True, False):
            capture("probes", dict(op="torch._scaled_mm", fmt="e4m3", shape=[M, N, K], probe="coarse", dist="fprev",
                                   options={"use_fast_accum": fast, "scales": "unit"}),
                    lambda: torch._scaled_mm(A, Bt.t(), one, one, out_dtype=torch.float32, use_fast_accum=fast),
                    "fp32", extra={"a": a_bits, "b": b_bits})


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a few shapes only (smoke test)")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    t0 = time.time()
    env = dict(torch=torch.__version__, cuda=torch.version.cuda, device=torch.cuda.get_device_name(0),
               capability=list(torch.cuda.get_device_capability(0)),
               blas=str(torch.backends.cuda.preferred_blas_library()))
    try:
        from importlib.metadata import version

        env["nvidia-cublas"] = version("nvidia-cublas")
    except Exception as exc:
        env["nvidia-cublas"] = f"unknown ({exc})"
    log(f"env: {env}")
    shapes = COMMON[:1] if args.quick else COMMON + OTHER
    fp8_shapes = COMMON[:1] if args.quick else COMMON + FP8_OTHER
    steps = [lambda: matmul_captures("bf16", shapes), lambda: matmul_captures("fp16", shapes),
             lambda: matmul_captures("fp32", shapes), addmm_capture, lambda: scaled_captures(fp8_shapes),
             scaled_scale_captures, lambda: probe_captures(args.quick)]
    for step in steps:
        try:
            step()
        except Exception:
            log(traceback.format_exc())
    for group, store in arrays.items():
        np.savez_compressed(os.path.join(OUT, f"{group}.npz"), **store)
    with open(os.path.join(OUT, "index.json"), "w") as fh:
        json.dump(dict(env=env, records=records), fh, indent=1)
    log(f"{len(records)} records, {sum('error' in r for r in records)} failed, {time.time() - t0:.1f} s")
    with open(os.path.join(OUT, "log.txt"), "w") as fh:
        fh.write("\n".join(log_lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
