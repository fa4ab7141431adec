"""GPU engine speed on an NVIDIA GPU, every figure timed in the same run (best of 3 after a warm-up).

Cases: the Hopper wgmma chains (BF16, FP16, TF32 -> FP32; FP8 E4M3 with the E8M13 output cut),
the mma.sync FP8 lowering (FP16 chunks, C added last), ``promote_every=128`` and split-K = 4
built from ``cuda.accumulate_bits`` with FP32 round-to-nearest-even additions on the GPU (as
``tcnumerics.gemm`` composes them; their bits are checked against ``tcnumerics.gemm`` with the
fast engine on a small size in the same run), ``dot_bits`` at K = 32, and the baselines:
``torch.matmul`` in BF16 on the same GPU (the tensor cores themselves), MMA-Sim 2.1.1 on CUDA
tensors and the CPU fast engine on the host's cores.  Every GEMM's bits at the benchmark size
are compared with the fast engine on a block of rows.  ``--only subgroup``: bits of the tiled sub-group
kernel (NVFP4 / MXFP4 k64 GEMMs, ragged M and N, several K, NaN / zero scales, C specials) against the
reference engine and, at 1000 x 700 x 4096, against the per-output kernel.  ``--only mx``: the BF16 chain, MXFP8 (E4M3, UE8M0 per 32)
and NVFP4 (E2M1 codes, UE4M3 per 16) at 8192^3, a block-scaled GEMM projected past ``--scaled-seconds`` timed at
the largest power-of-two size that fits and compared by MAC/s; bits of a corner against the reference engine.

    PYTHONPATH=src python3 benchmarks/bench_gpu.py --size 8192 --json bench_gpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

CASES = [("BF16 wgmma k16 -> FP32", "hopper.wgmma.m64n8k16.f32.bf16.bf16"),
         ("FP16 wgmma k16 -> FP32", "hopper.wgmma.m64n8k16.f32.f16.f16"),
         ("TF32 wgmma k8 -> FP32", "hopper.wgmma.m64n8k8.f32.tf32.tf32"),
         ("FP8 E4M3 wgmma k32 -> E8M13", "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"),
         ("FP8 E4M3 mma.sync k32 (FP16 lowering)", "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32")]
BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


def operand_bits(fmt, shape, rng) -> np.ndarray:
    """Bit patterns of standard-normal values rounded to ``fmt`` (RNE); E2M1: uniform random codes."""
    import ml_dtypes

    x = rng.standard_normal(shape, dtype=np.float32)
    fast_cast = {"bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
    if fmt.name in fast_cast:  # ml_dtypes' RNE casts: the same bits, ~15x quicker at 8192^2 than from_float
        return x.astype(fast_cast[fmt.name]).view(fmt.container_dtype)
    if fmt.name == "e2m1":  # FP4 (no specials): uniform over its 16 codes, not normal values (quick at 8192^2)
        return rng.integers(0, 16, shape, dtype=np.uint8)
    return fmt.from_float(x.astype(np.float64), "rne")


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16).view(np.uint16)


def best(fn, repeat: int = 3) -> float:
    """Best wall time of ``repeat`` calls after one warm-up, the GPU synchronised around each."""
    import cupy

    fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t)
    return min(times)


def promoted(spec, a, b, every: int):
    """FP32 promotion on the GPU: each block of ``every`` K chained from +0, added RNE into the main sum."""
    import cupy

    from tcnumerics.engines import cuda

    zero = cupy.zeros((a.shape[0], b.shape[0]), np.uint32)
    main = None
    for b0 in range(0, a.shape[1], every):
        part = cuda.accumulate_bits(spec, a, b, zero, b0, min(a.shape[1], b0 + every)).view(cupy.float32)
        main = part if main is None else main + part  # float32 addition: IEEE, round to nearest even
    return main.view(cupy.uint32)


def split(spec, a, b, slices: int):
    """Split-K on the GPU: equal slices (on instruction boundaries) chained from +0, summed in order, RNE."""
    import cupy

    from tcnumerics.engines import cuda
    from tcnumerics.gemm import split_bounds

    zero = cupy.zeros((a.shape[0], b.shape[0]), np.uint32)
    total = None
    for k0, k1 in split_bounds(a.shape[1], slices, spec.k):
        part = cuda.accumulate_bits(spec, a, b, zero, k0, k1).view(cupy.float32)
        total = part if total is None else total + part
    return total.view(cupy.uint32)


def check_compositions(rng) -> dict:
    """promote_every=128 and split_k=4 above equal tcnumerics.gemm(engine='fast') bit for bit."""
    import cupy
    import ml_dtypes

    from tcnumerics.catalog import get_instruction
    from tcnumerics.gemm import gemm

    spec = get_instruction(BF16)
    m, n, k = 192, 160, 1024
    a = _bf16_bits(rng.standard_normal((m, k), dtype=np.float32))
    b = _bf16_bits(rng.standard_normal((n, k), dtype=np.float32))
    A, B = a.view(ml_dtypes.bfloat16), np.ascontiguousarray(b.T).view(ml_dtypes.bfloat16)
    out = {}
    for label, ours, kw in (("promote_every=128", lambda: promoted(spec, cupy.asarray(a), cupy.asarray(b), 128),
                             dict(promote_every=128)),
                            ("split_k=4", lambda: split(spec, cupy.asarray(a), cupy.asarray(b), 4), dict(split_k=4))):
        want = gemm(A, B, instruction=spec, engine="fast", **kw).view(np.uint32)
        out[label] = bool(np.array_equal(ours().get(), want))
    return out


def bench_gemms(n: int, rng, check_rows: int) -> list[dict]:
    import cupy

    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import cuda, fast

    rows = []
    for label, name in CASES:
        spec = get_instruction(name)
        a = operand_bits(spec.a_format, (n, n), rng)
        b = operand_bits(spec.b_format, (n, n), rng)
        da, db = cupy.asarray(a), cupy.asarray(b)
        dc = cupy.zeros((n, n), spec.c_format.container_dtype)
        t = best(lambda: cuda.gemm_bits(spec, da, db, dc))
        d = cuda.gemm_bits(spec, da[:check_rows], db, dc[:check_rows]).get()
        same = bool(np.array_equal(d, fast.gemm_bits(spec, a[:check_rows], b, np.zeros((check_rows, n),
                                                                                       spec.c_format.container_dtype))))
        row = dict(label=label, entry=name, n=n, seconds=t, macs_per_s=n ** 3 / t, checked_rows=check_rows,
                   identical_bits=same)
        print(f"  {label:40s} {n}^3  {t:8.3f} s  {n ** 3 / t:9.3e} MAC/s  bits of {check_rows} rows "
              f"{'identical' if same else 'DIFFER'}", flush=True)
        rows.append(row)
        if name == BF16:
            for clabel, fn in (("promote_every=128", lambda: promoted(spec, da, db, 128)),
                               ("split_k=4", lambda: split(spec, da, db, 4))):
                tc_ = best(fn)
                rows.append(dict(label=f"BF16 {clabel}", entry=name, n=n, seconds=tc_, macs_per_s=n ** 3 / tc_,
                                 ratio_to_chain=tc_ / t))
                print(f"  {'BF16 ' + clabel:40s} {n}^3  {tc_:8.3f} s  {n ** 3 / tc_:9.3e} MAC/s  "
                      f"({tc_ / t:.2f}x the chain)", flush=True)
        del da, db, dc
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


MX = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
NVFP4 = "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"
# scale codes near 1.0: UE8M0 127 = 2**0; UE4M3 0x38 = 1.0 (0x7F is NaN, left out)
SCALE_CODES = {MX: (120, 135), NVFP4: (0x30, 0x41)}


def _scaled_gemm(name: str, n: int, rng) -> tuple:
    """Device operands and scales of a block-scaled [n, n] x [n, n] GEMM, host copies for the bit check."""
    import cupy

    from tcnumerics.catalog import get_instruction

    spec = get_instruction(name)
    lo, hi = SCALE_CODES[name]
    a = operand_bits(spec.a_format, (n, n), rng)
    b = operand_bits(spec.b_format, (n, n), rng)
    sa = rng.integers(lo, hi, (n, n // spec.model.scale_block), dtype=np.uint8)
    sb = rng.integers(lo, hi, (n, n // spec.model.scale_block), dtype=np.uint8)
    return spec, a, b, sa, sb, cupy.asarray(a), cupy.asarray(b), cupy.zeros((n, n), np.uint32)


def _time_scaled(name: str, n: int, rng, label: str, chain_s: float, max_seconds: float) -> dict:
    """Best of 3 of one block-scaled GEMM at n^3 (or the largest power-of-two size projected to fit
    ``max_seconds`` for the 4 calls), bits of a 4 x 32 corner against the reference engine."""
    import cupy

    from tcnumerics.engines import _cuda_build as build
    from tcnumerics.engines import cuda, reference

    size = 256
    spec, a, b, sa, sb, da, db, dc = _scaled_gemm(name, size, rng)
    t_small = best(lambda: cuda.gemm_bits(spec, da, db, dc, scale_a=sa, scale_b=sb), repeat=1)
    print(f"    {label}: {size}^3 one call {t_small:.3f} s", flush=True)
    while size < n and 4 * 8 * t_small <= max_seconds:  # one doubling: 8x the MACs, 4 calls
        size *= 2
        spec, a, b, sa, sb, da, db, dc = _scaled_gemm(name, size, rng)
        t_small = best(lambda: cuda.gemm_bits(spec, da, db, dc, scale_a=sa, scale_b=sb), repeat=1)
        print(f"    {label}: {size}^3 one call {t_small:.3f} s", flush=True)
    t = best(lambda: cuda.gemm_bits(spec, da, db, dc, scale_a=sa, scale_b=sb))
    m, q = 4, 32
    got = cuda.gemm_bits(spec, da[:m], db[:q], dc[:m, :q], scale_a=sa[:m], scale_b=sb[:q]).get()
    want = reference.dot_bits(spec, np.repeat(a[:m], q, 0), np.tile(b[:q], (m, 1)), np.zeros(m * q, np.uint32),
                              scale_a=np.repeat(sa[:m], q, 0), scale_b=np.tile(sb[:q], (m, 1))).reshape(m, q)
    same = bool(np.array_equal(got, want))
    rate = size ** 3 / t
    chain_rate = n ** 3 / chain_s
    kernel = "tiled" if build.tiled_reason(cuda._plan(spec)) is None else "per-output"
    print(f"  {label:40s} {size}^3  {t:8.3f} s  {rate:9.3e} MAC/s  ({chain_rate / rate:.2f}x slower than the BF16 "
          f"chain's MAC/s; {kernel} kernel)  bits of {m}x{q} {'identical' if same else 'DIFFER'}", flush=True)
    del da, db, dc
    cupy.get_default_memory_pool().free_all_blocks()
    return dict(label=label, entry=name, n=size, seconds=t, macs_per_s=rate, kernel=kernel,
                rate_ratio_to_bf16_chain=chain_rate / rate, identical_bits=same)


def bench_mx(n: int, rng, max_seconds: float = 60.0) -> dict:
    """Block-scaled GEMMs against the BF16 wgmma chain timed in the same run: MXFP8 (E4M3, UE8M0 per 32 K)
    and NVFP4 (E2M1, UE4M3 per 16 K).  A GEMM whose 8192^3 calls are projected past ``max_seconds`` is timed
    at the largest size that fits, and compared by MAC/s."""
    import cupy

    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import cuda

    spec = get_instruction(BF16)
    da, db = cupy.asarray(operand_bits(spec.a_format, (n, n), rng)), cupy.asarray(operand_bits(spec.b_format, (n, n), rng))
    dc = cupy.zeros((n, n), np.uint32)
    chain = best(lambda: cuda.gemm_bits(spec, da, db, dc))
    print(f"  {'BF16 wgmma k16 -> FP32 (baseline)':40s} {n}^3  {chain:8.3f} s  {n ** 3 / chain:9.3e} MAC/s", flush=True)
    del da, db, dc
    cupy.get_default_memory_pool().free_all_blocks()
    rows = [_time_scaled(MX, n, rng, "MXFP8 E4M3 block32 (UE8M0 scales)", chain, max_seconds),
            _time_scaled(NVFP4, n, rng, "NVFP4 E2M1 block16 (UE4M3 scales)", chain, max_seconds)]
    return dict(bf16_chain=dict(entry=BF16, n=n, seconds=chain, macs_per_s=n ** 3 / chain), scaled=rows)


SUBGROUP_ENTRIES = (NVFP4, "blackwell.tcgen05.mma.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0")


def _subgroup_inputs(spec, M: int, N: int, K: int, rng) -> tuple:
    """Operands over every E2M1 code, scales near 1 with NaN and zero codes, C with specials and subnormals."""
    model = spec.model
    a = rng.integers(0, 16, (M, K), dtype=np.uint8)
    b = rng.integers(0, 16, (N, K), dtype=np.uint8)
    nan = 0x7F if model.scale_format.name == "ue4m3" else 0xFF
    lo, hi = SCALE_CODES.get(spec.name, (120, 135))
    sa = rng.integers(lo, hi, (M, K // model.scale_block), dtype=np.uint8)
    sb = rng.integers(lo, hi, (N, K // model.scale_block), dtype=np.uint8)
    nan_rows = np.flatnonzero(rng.random(M) < 0.03)  # one NaN scale in 3% of A's rows
    sa[nan_rows, rng.integers(0, sa.shape[1], len(nan_rows))] = nan
    sb[rng.random(sb.shape) < 0.01] = 0  # UE4M3: zero; UE8M0: 2**-127
    sb[:, -1] = rng.integers(0, 256, N)  # every scale code in the last block
    c = rng.normal(size=(M, N)).astype(np.float32).view(np.uint32)
    pick = rng.random(c.shape)
    c[pick < 0.05] = 0
    c[(pick >= 0.05) & (pick < 0.06)] = rng.integers(1, 1 << 23, int(((pick >= 0.05) & (pick < 0.06)).sum()))
    c[(pick >= 0.06) & (pick < 0.062)] = 0x7F800000
    c[(pick >= 0.062) & (pick < 0.064)] = 0xFF800000
    c[(pick >= 0.064) & (pick < 0.065)] = 0x7FC00000
    return a, b, c.astype(np.uint32), sa, sb


def _reference_cells(spec, a, b, c, sa, sb, rows, cols) -> np.ndarray:
    """Reference-engine bits of the outputs (rows[i], cols[i])."""
    from tcnumerics.engines import reference

    return reference.dot_bits(spec, a[rows], b[cols], c[rows, cols], scale_a=sa[rows], scale_b=sb[cols])


def check_subgroup(rng, big=(1000, 700, 4096)) -> dict:
    """Bits of the tiled sub-group kernel (NVFP4 / MXFP4 GEMMs) on the GPU: ragged GEMMs of several K against
    the reference engine (every output), and a ``big`` GEMM against the per-output kernel (every output) and
    the reference engine (its first and last rows and columns, in partial tiles, and 1000 random outputs)."""
    import cupy

    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import _cuda_build as build
    from tcnumerics.engines import cuda

    out = {}
    for name in SUBGROUP_ENTRIES:
        spec = get_instruction(name)
        kernel = "tiled" if build.tiled_reason(cuda._plan(spec)) is None else "per-output"
        rows = []
        for M, N, K in ((131, 67, 64), (257, 130, 192), (129, 65, 1024)) + (big,):
            a, b, c, sa, sb = _subgroup_inputs(spec, M, N, K, rng)
            t = time.perf_counter()
            got = cuda.gemm_bits(spec, cupy.asarray(a), cupy.asarray(b), cupy.asarray(c), scale_a=sa,
                                 scale_b=sb).get()
            t_gpu = time.perf_counter() - t
            row = dict(M=M, N=N, K=K, gpu_seconds=t_gpu)
            if (M, N, K) == tuple(big):
                scalar = cuda.accumulate_bits(spec, cupy.asarray(a), cupy.asarray(b), cupy.asarray(c), scale_a=sa,
                                              scale_b=sb, kernel="scalar").get()
                row["unequal_vs_per_output_kernel"] = int(np.count_nonzero(got != scalar))
                pick = rng.integers(0, (M, N), (1000, 2))
                r = np.concatenate([np.zeros(N, int), np.full(N, M - 1), np.arange(M), np.arange(M), pick[:, 0]])
                q = np.concatenate([np.arange(N), np.arange(N), np.zeros(M, int), np.full(M, N - 1), pick[:, 1]])
            else:
                r, q = (x.ravel() for x in np.meshgrid(np.arange(M), np.arange(N), indexing="ij"))
            want = _reference_cells(spec, a, b, c, sa, sb, r, q)
            row["reference_outputs"] = int(len(r))
            row["unequal_vs_reference"] = int(np.count_nonzero(got[r, q] != want))
            row["inf_or_nan_outputs"] = int(np.count_nonzero((got & 0x7F800000) == 0x7F800000))
            print(f"  {name} ({kernel}) {M}x{N}x{K}: {row}", flush=True)
            rows.append(row)
        out[name] = dict(kernel=kernel, gemms=rows)
    bad = sum(r["unequal_vs_reference"] + r.get("unequal_vs_per_output_kernel", 0) for v in out.values()
              for r in v["gemms"])
    print(f"  sub-group GEMM bits: {'all identical' if bad == 0 else f'{bad} UNEQUAL'}", flush=True)
    return dict(entries=out, unequal=bad)


def bench_torch(n: int) -> dict:
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        torch.matmul(a, b)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    t = min(times)
    print(f"  {'torch.matmul BF16 (tensor cores)':40s} {n}^3  {t:8.4f} s  {n ** 3 / t:9.3e} MAC/s", flush=True)
    return dict(label="torch.matmul bf16", n=n, seconds=t, macs_per_s=n ** 3 / t)


def bench_dot(count: int, rng) -> dict:
    import cupy

    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import cuda, fast

    spec = get_instruction(BF16)
    a = _bf16_bits(rng.standard_normal((count, 32), dtype=np.float32))
    b = _bf16_bits(rng.standard_normal((count, 32), dtype=np.float32))
    c = np.zeros(count, np.uint32)
    da, db, dc = cupy.asarray(a), cupy.asarray(b), cupy.asarray(c)
    t = best(lambda: cuda.dot_bits(spec, da, db, dc))
    head = min(count, 1 << 20)
    same = bool(np.array_equal(cuda.dot_bits(spec, da[:head], db[:head], dc[:head]).get(),
                               fast.dot_bits(spec, a[:head], b[:head], c[:head])))
    print(f"  {'dot_bits BF16 K=32':40s} {count} vectors  {t:8.4f} s  {count / t:9.3e} vectors/s  "
          f"bits identical: {same}", flush=True)
    return dict(label="dot_bits bf16 K=32", vectors=count, seconds=t, vectors_per_s=count / t, identical_bits=same)


def bench_mmasim(sizes: list[int], rng) -> list[dict]:
    try:
        import torch
        from mmasim.nv_ptx.sim import WGMMA
    except ImportError as exc:
        print(f"  mmasim not available ({exc}); skipped")
        return []
    import cupy

    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import cuda

    spec = get_instruction(BF16)
    op = WGMMA("Hopper", "m64n8k16.f32.bf16.bf16")
    rows = []
    for n in sizes:
        a = _bf16_bits(rng.standard_normal((n, n), dtype=np.float32))
        b = _bf16_bits(rng.standard_normal((n, n), dtype=np.float32))
        A = torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
        B = torch.from_numpy(np.ascontiguousarray(b.T).view(np.int16)).cuda().view(torch.bfloat16)
        C = torch.zeros(n, n, device="cuda", dtype=torch.float32)
        torch.cuda.synchronize()
        t = time.perf_counter()
        D = op(A, B, C)
        torch.cuda.synchronize()
        t_sim = time.perf_counter() - t
        da, db = cupy.asarray(a), cupy.asarray(b)
        dc = cupy.zeros((n, n), np.uint32)
        t_gpu = best(lambda: cuda.gemm_bits(spec, da, db, dc))
        same = bool(np.array_equal(D.contiguous().view(torch.int32).cpu().numpy().view(np.uint32),
                                   cuda.gemm_bits(spec, da, db, dc).get()))
        rows.append(dict(n=n, mmasim_seconds=t_sim, cuda_seconds=t_gpu, speedup=t_sim / t_gpu, identical_bits=same))
        print(f"  MMA-Sim WGMMA BF16 on CUDA tensors {n}^3  {t_sim:8.3f} s ({n ** 3 / t_sim:.2e} MAC/s)  "
              f"GPU engine {t_gpu:8.4f} s  speedup {t_sim / t_gpu:8.0f}x  identical bits: {same}", flush=True)
    return rows


CUSTOM_F16_L8 = dict(name="custom.bf16.L8.F16.rz", k=16, a_format="bf16", group_size=8, frac_bits=16,
                     output_rounding="rz")
ALIGN_UNITS = [("FP8 E4M3 wgmma chain", "hopper.wgmma.m64n128k32.f32.e4m3.e4m3"),
               ("FP8 E5M2 wgmma chain", "hopper.wgmma.m64n128k32.f32.e5m2.e5m2"),
               ("BF16 wgmma chain", BF16), ("FP16 wgmma chain", "hopper.wgmma.m64n8k16.f32.f16.f16"),
               ("TF32 wgmma chain", "hopper.wgmma.m64n8k8.f32.tf32.tf32"), ("custom BF16 L=8 F=16 RZ", "custom")]


def _align_spec(name: str):
    from tcnumerics.catalog import get_instruction
    from tcnumerics.model import InstructionSpec, UnitModel

    if name != "custom":
        return get_instruction(name)
    c = CUSTOM_F16_L8
    return InstructionSpec(name=c["name"], k=c["k"], model=UnitModel(
        a_format=c["a_format"], b_format=c["a_format"], c_format="fp32", d_format="fp32", group_size=c["group_size"],
        frac_bits=c["frac_bits"], output_rounding=c["output_rounding"]))


def _tensor_core_rate(spec, M: int, N: int, K: int):
    """MAC/s of the native op on the same shape: torch._scaled_mm (FP8, fast accumulation) or torch.matmul."""
    import torch

    try:
        fn = _tensor_core_op(spec, M, N, K)
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        return M * N * K / min(times)
    except Exception as exc:  # an op this torch build lacks: say so, time nothing
        print(f"    tensor-core op unavailable: {type(exc).__name__}: {exc}", flush=True)
        return None


def _tensor_core_op(spec, M: int, N: int, K: int):
    import torch

    fmt = spec.a_format.name
    if fmt in ("e4m3", "e5m2"):
        dt = torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2
        a = torch.randn(M, K, device="cuda").to(dt)
        b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2)
        one = torch.ones((), device="cuda")
        fn = (lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=True))
    else:
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[fmt]
        torch.backends.cuda.matmul.allow_tf32 = True
        a, b = torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)
        fn = (lambda: a @ b)
    return fn


def _mmaemu_rate(spec, a, b, ours):
    """mmaemu.accumulate (fast accumulation, its default profile) on the same FP8 inputs: MAC/s and bit equality."""
    try:
        import mmaemu
        import torch
    except ImportError:
        return None, None
    dt = torch.float8_e4m3fn if spec.a_format.name == "e4m3" else torch.float8_e5m2
    x = torch.as_tensor(a, device="cuda").view(dt)
    w = torch.as_tensor(b, device="cuda").view(dt)
    fn = (lambda: mmaemu.accumulate(x, w, use_fast_accum=True))
    try:
        out = fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(3):
            t = time.perf_counter()
            out = fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
    except Exception as exc:
        print(f"    mmaemu failed: {type(exc).__name__}: {exc}", flush=True)
        return None, None
    theirs = out.contiguous().view(torch.int32).cpu().numpy().view(np.uint32)
    return a.shape[0] * b.shape[0] * a.shape[1] / min(times), bool(np.array_equal(theirs, ours))


def bench_align(shapes: list[tuple], units: list[str], rng, check_rows: int, tiles: list[str] = ()) -> list[dict]:
    """Per unit and shape: the tiled kernel with its directed-rounding FMA pass against its integer pass (bits of
    every output compared), a block of rows against the CPU fast engine, the tensor core's rate and mmaemu's."""
    import cupy

    from tcnumerics.engines import _cuda_build, _cuda_launch, cuda, fast

    rows = []
    for label, name in ALIGN_UNITS:
        if units and name not in units and label.split()[0] not in units:
            continue
        spec = _align_spec(name)
        fa = _cuda_build.fma_align(cuda._plan(spec), spec)
        for M, N, K in shapes:
            if K % spec.k:
                continue
            a, b = operand_bits(spec.a_format, (M, K), rng), operand_bits(spec.b_format, (N, K), rng)
            da, db = cupy.asarray(a), cupy.asarray(b)
            dc = cupy.zeros((M, N), spec.c_format.container_dtype)
            row = dict(label=label, entry=spec.name, shape=[M, N, K], fma_width=fa and fa.width)
            print(f"  {label} {M}x{N}x{K}:", flush=True)  # (its kernels' lines follow, then the tiled kernel's)
            out = {}
            own = [k for k, o in _cuda_launch.OWN_KERNELS.items() if o.reason(cuda._plan(spec), spec) is None]
            for tile in tiles or [""]:
                os.environ["TCNUMERICS_CUDA_TILE"] = tile
                for align in ([] if tile else own) + ["fma", "int"]:
                    os.environ["TCNUMERICS_CUDA_ALIGN"] = "fma" if align in own else align
                    for k in _cuda_launch.OWN_KERNELS:  # the timed kernel on, every other one off
                        os.environ[f"TCNUMERICS_CUDA_{k.upper()}"] = "auto" if align == k else "off"
                    t = best(lambda: cuda.gemm_bits(spec, da, db, dc))
                    got = cuda.gemm_bits(spec, da, db, dc).get()
                    if align in own:  # the kernel that ran (a failed self-test falls back to another)
                        ran = _cuda_launch._kernel(spec, cuda._plan(spec), cupy.cuda.Device().id, True)[0].name
                        row[f"{align}_kernel_ran"] = ran
                    key = f"{align}_macs_per_s" + (f"@{tile}" if tile else "")
                    row[key] = M * N * K / t
                    if align not in out:
                        out[align] = got
                    elif not np.array_equal(got, out[align]):
                        row[f"DIFFERENT_BITS@{tile}"] = align
                if tile:
                    print(f"    tile {tile}: FMA {row['fma_macs_per_s@' + tile]:9.3e}  int "
                          f"{row['int_macs_per_s@' + tile]:9.3e} MAC/s", flush=True)
            os.environ.pop("TCNUMERICS_CUDA_ALIGN", None)
            os.environ.pop("TCNUMERICS_CUDA_TILE", None)
            for k in _cuda_launch.OWN_KERNELS:
                os.environ.pop(f"TCNUMERICS_CUDA_{k.upper()}", None)
            if tiles:
                row["fma_macs_per_s"] = max(v for k, v in row.items() if k.startswith("fma_macs_per_s@"))
                row["int_macs_per_s"] = max(v for k, v in row.items() if k.startswith("int_macs_per_s@"))
            row["fma_equals_int_all_outputs"] = bool(np.array_equal(out["fma"], out["int"]))
            for k in own:
                row[f"{k}_equals_int_all_outputs"] = bool(np.array_equal(out[k], out["int"]))
                print(f"    gemm_{k} {row[f'{k}_macs_per_s']:9.3e} MAC/s (ran: {row[f'{k}_kernel_ran']}), equal to the "
                      f"integer pass on every output: {row[f'{k}_equals_int_all_outputs']}", flush=True)
            if _cuda_build.exp_mma(cuda._plan(spec), spec) is not None:  # the tensor-core exponent pass, same bits
                os.environ["TCNUMERICS_CUDA_EXP"] = "mma"
                os.environ["TCNUMERICS_CUDA_ALIGN"] = "fma"
                for k in _cuda_launch.OWN_KERNELS:
                    os.environ[f"TCNUMERICS_CUDA_{k.upper()}"] = "off"
                try:
                    row["exp_mma_macs_per_s"] = M * N * K / best(lambda: cuda.gemm_bits(spec, da, db, dc))
                    row["exp_mma_equals_alu_all_outputs"] = bool(np.array_equal(
                        cuda.gemm_bits(spec, da, db, dc).get(), out["fma"]))
                finally:
                    os.environ.pop("TCNUMERICS_CUDA_EXP", None)
                    os.environ.pop("TCNUMERICS_CUDA_ALIGN", None)
                    for k in _cuda_launch.OWN_KERNELS:
                        os.environ.pop(f"TCNUMERICS_CUDA_{k.upper()}", None)
                print(f"    exponent pass on the tensor core: {row['exp_mma_macs_per_s']:9.3e} MAC/s, equal to the "
                      f"CUDA-core pass on every output: {row['exp_mma_equals_alu_all_outputs']}", flush=True)
            r = min(check_rows, M)
            row["rows_equal_cpu_fast"] = bool(np.array_equal(out["fma"][:r], fast.gemm_bits(
                spec, a[:r], b, np.zeros((r, N), spec.c_format.container_dtype))))
            row["tensor_core_macs_per_s"] = _tensor_core_rate(spec, M, N, K)
            if spec.a_format.name in ("e4m3", "e5m2") and spec.a_format == spec.b_format:
                row["mmaemu_macs_per_s"], row["mmaemu_equal_bits"] = _mmaemu_rate(spec, a, b, out["fma"].view(np.uint32))
            tc, mm = row["tensor_core_macs_per_s"], row.get("mmaemu_macs_per_s")
            print(f"    tiled kernel FMA(w{row['fma_width']}) {row['fma_macs_per_s']:9.3e}  "
                  f"int {row['int_macs_per_s']:9.3e} MAC/s  FMA==int {row['fma_equals_int_all_outputs']}  "
                  f"{r} rows==CPU {row['rows_equal_cpu_fast']}  tensor core {tc and f'{tc:.3e}'}  "
                  f"mmaemu {mm and f'{mm:.3e}'} (bits equal {row.get('mmaemu_equal_bits')})", flush=True)
            rows.append(row)
            del da, db, dc
            cupy.get_default_memory_pool().free_all_blocks()
    return rows


def check_random_units(count: int, rng) -> dict:
    """Random fused units (formats, L, F, output rounding) on the GPU against the reference engine."""
    import cupy

    from tcnumerics.engines import _cuda_build, cuda, grid_dot_bits, reference
    from tcnumerics.model import InstructionSpec, UnitModel
    from tcnumerics.vectors.families import families_for, generate

    results = []
    for i in range(count):
        fmt = str(rng.choice(["e4m3", "e5m2", "bf16", "fp16", "tf32"]))
        L = int(rng.choice([2, 4, 8, 16] + ([32] if fmt[0] == "e" else [])))
        F = int(rng.integers(8, 17 if fmt[0] == "e" else 26))
        rounding = str(rng.choice(["rz", "rne", "ru", "rd"]))
        spec = InstructionSpec(name=f"random.{fmt}.L{L}.F{F}.{rounding}", k=2 * L, model=UnitModel(
            a_format=fmt, b_format=fmt, c_format="fp32", d_format="fp32", group_size=L, frac_bits=F,
            output_rounding=rounding))
        parts = [generate(spec, fam, 8, rng, k=8 * L) for fam in families_for(spec)]
        a, b = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        c = np.concatenate([p[2] for p in parts])
        M, N = min(len(a), 150), min(len(b), 130)
        A, B = a[rng.permutation(len(a))[:M]], b[rng.permutation(len(b))[:N]]
        C = c[rng.integers(0, len(c), (M, N))]
        got = cuda.gemm_bits(spec, cupy.asarray(A), cupy.asarray(B), cupy.asarray(C)).get()
        want = grid_dot_bits(reference.dot_bits, spec, A, B, C)
        same = bool(np.array_equal(got, want))
        results.append(dict(unit=spec.name, outputs=M * N, equal_reference=same))
        if _cuda_build.exp_mma(cuda._plan(spec), spec) is not None:  # and with the tensor-core exponent pass
            os.environ["TCNUMERICS_CUDA_EXP"] = "mma"
            try:
                got = cuda.gemm_bits(spec, cupy.asarray(A), cupy.asarray(B), cupy.asarray(C)).get()
            finally:
                os.environ.pop("TCNUMERICS_CUDA_EXP", None)
            results[-1]["exp_mma_equal_reference"] = bool(np.array_equal(got, want))
            same = same and results[-1]["exp_mma_equal_reference"]
        print(f"  random unit {spec.name:34s} {M}x{N}x{8 * L}  equal to reference: {same}", flush=True)
    return dict(units=results, all_equal=all(r["equal_reference"] and r.get("exp_mma_equal_reference", True)
                                             for r in results))


def bench_cpu(n: int, rng) -> dict:
    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import fast

    spec = get_instruction(BF16)
    a = _bf16_bits(rng.standard_normal((n, n), dtype=np.float32))
    b = _bf16_bits(rng.standard_normal((n, n), dtype=np.float32))
    c = np.zeros((n, n), np.uint32)
    fast.gemm_bits(spec, a, b, c)
    t = min(_wall(lambda: fast.gemm_bits(spec, a, b, c)) for _ in range(3))
    print(f"  {'CPU fast engine BF16 (' + str(os.cpu_count()) + ' cores)':40s} {n}^3  {t:8.3f} s  "
          f"{n ** 3 / t:9.3e} MAC/s", flush=True)
    return dict(label="cpu fast bf16", n=n, cores=os.cpu_count(), seconds=t, macs_per_s=n ** 3 / t)


def _wall(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--dot-count", type=int, default=1 << 24)
    p.add_argument("--check-rows", type=int, default=64)
    p.add_argument("--mmasim-sizes", default="512,1024")
    p.add_argument("--cpu-size", type=int, default=1024)
    p.add_argument("--only", default="",
                   help="comma list of sections: gemm,torch,mx,subgroup,dot,compose,mmasim,cpu,align (not by default)")
    p.add_argument("--scaled-seconds", type=float, default=60.0,
                   help="mx: largest projected time of a block-scaled GEMM's 4 calls (else a smaller size)")
    p.add_argument("--align-shapes", default="2048x5760x1920,4096x4096x4096,8192x8192x8192",
                   help="align: MxNxK shapes (the FMA pass against the integer pass, the tensor core, mmaemu)")
    p.add_argument("--align-units", default="", help="align: comma list of entries or labels' first words")
    p.add_argument("--align-tiles", default="", help="align: ';'-separated tx,ty,tm,tn tiles to time (best kept)")
    p.add_argument("--random-units", type=int, default=6, help="align: random custom units checked on the GPU")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    import cupy

    only = set(filter(None, args.only.split(",")))
    want = (lambda s: (not only or s in only) and s != "align")
    rng = np.random.default_rng(0)
    props = cupy.cuda.runtime.getDeviceProperties(0)
    info = dict(gpu=props["name"].decode(), sms=props["multiProcessorCount"], cupy=cupy.__version__)
    print(f"GPU {info['gpu']} ({info['sms']} SMs), CuPy {info['cupy']}", flush=True)
    result = dict(info=info)
    if want("compose"):
        result["compositions_identical"] = check_compositions(rng)
        print(f"  compositions equal tcnumerics.gemm(engine='fast'): {result['compositions_identical']}", flush=True)
    if want("torch"):
        result["torch"] = bench_torch(args.size)
    if want("gemm"):
        result["gemm"] = bench_gemms(args.size, rng, args.check_rows)
    if want("subgroup"):
        result["subgroup"] = check_subgroup(rng)
    if want("mx"):
        result["mx"] = bench_mx(args.size, rng, args.scaled_seconds)
    if want("dot"):
        result["dot"] = bench_dot(args.dot_count, rng)
    if want("mmasim"):
        result["mmasim"] = bench_mmasim([int(x) for x in args.mmasim_sizes.split(",")], rng)
    if want("cpu"):
        result["cpu"] = bench_cpu(args.cpu_size, rng)
    if "align" in only:
        if args.random_units:
            result["random_units"] = check_random_units(args.random_units, rng)
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.align_shapes.split(",")]
        result["align"] = bench_align(shapes, list(filter(None, args.align_units.split(","))), rng, args.check_rows,
                                      list(filter(None, args.align_tiles.split(";"))))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
