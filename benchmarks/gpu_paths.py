"""The GPU engine's array paths on the device, bits against the CPU engines: torch CUDA tensors in and
out (bit patterns through ``cuda.dot_bits``/``gemm_bits``, on a side stream too), ``tcnumerics.gemm``
with GPU-resident values (torch CUDA tensors, CuPy arrays; ``engine="cuda"`` and ``"auto"``; promotion,
split-K, ragged K, a BF16 output), block-scaled MX/NVFP4 through ``tcnumerics.blockscale`` with
``engine="cuda"`` and torch scale tensors, and the b1 binary units.  Needs a GPU (CuPy, torch).

    PYTHONPATH=src python3 benchmarks/gpu_paths.py --json paths.json
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

import numpy as np

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
FP8 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
MX = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
MX_FP4 = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e2m1.e2m1.ue8m0"
NVFP4 = "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"
B1 = ["ampere.mma.m16n8k256.s32.b1.b1.s32.and.popc", "ampere.mma.m16n8k256.s32.b1.b1.s32.xor.popc"]


def _same(got, want) -> bool:
    return bool(np.array_equal(np.asarray(got), np.asarray(want)))


def torch_bits(rng) -> dict:
    """cuda.dot_bits / gemm_bits on torch CUDA tensors (int16/int32 bit patterns): torch result, same device."""
    import torch

    from tcnumerics.engines import cuda, fast

    a = rng.integers(0, 1 << 16, (300, 64), dtype=np.uint16)
    b = rng.integers(0, 1 << 16, (77, 64), dtype=np.uint16)
    c = rng.integers(0, 1 << 32, (300, 77), dtype=np.uint32)
    want = fast.gemm_bits(BF16, a, b, c)
    ta, tb = torch.from_numpy(a.view(np.int16)).cuda(), torch.from_numpy(b.view(np.int16)).cuda()
    tc = torch.from_numpy(c.view(np.int32)).cuda()
    out = {}
    got = cuda.gemm_bits(BF16, ta, tb, tc)
    out["gemm_torch_result_is_cuda_tensor"] = bool(isinstance(got, torch.Tensor) and got.is_cuda)
    out["gemm_torch_bits"] = _same(got.cpu().numpy().view(np.uint32), want)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        got_side = cuda.gemm_bits(BF16, ta, tb, tc)
    side.synchronize()
    out["gemm_torch_side_stream_bits"] = _same(got_side.cpu().numpy().view(np.uint32), want)
    d = cuda.dot_bits(BF16, ta[:77], tb, tc[0, :77])
    out["dot_torch_bits"] = _same(d.cpu().numpy().view(np.uint32), fast.dot_bits(BF16, a[:77], b, c[0, :77]))
    out["gemm_torch_cpu_tensor_bits"] = _same(
        cuda.gemm_bits(BF16, torch.from_numpy(a.view(np.int16)), torch.from_numpy(b.view(np.int16)),
                       torch.from_numpy(c.view(np.int32))).numpy().view(np.uint32), want)
    return out


def tc_gemm_gpu_values(rng) -> dict:
    """tcnumerics.gemm with torch CUDA / CuPy values equals engine='fast' on host copies."""
    import cupy
    import ml_dtypes
    import torch

    import tcnumerics as tc

    out = {}
    M, K, N = 96, 200, 72  # K = 200: ragged against k16 and k32
    x = rng.standard_normal((M, K)).astype(np.float32)
    y = rng.standard_normal((K, N)).astype(np.float32)
    cm = rng.standard_normal((M, N)).astype(np.float32)
    hA, hB = x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16)
    tA, tB = torch.from_numpy(x).to(torch.bfloat16).cuda(), torch.from_numpy(y).to(torch.bfloat16).cuda()
    tC = torch.from_numpy(cm).cuda()
    for label, kw in (("plain", {}), ("promote_every=64", dict(promote_every=64)), ("split_k=3", dict(split_k=3)),
                      ("k_residue=first", dict(k_residue="first")), ("out bf16", dict(out_format="bf16")),
                      ("C epilogue", dict(c_role="epilogue"))):
        use_c = label == "C epilogue"
        want = tc.gemm(hA, hB, cm if use_c else None, instruction=BF16, engine="fast", **kw)
        for engine in ("cuda", "auto"):
            got = tc.gemm(tA, tB, tC if use_c else None, instruction=BF16, engine=engine, **kw)
            ok = isinstance(got, torch.Tensor) and got.is_cuda
            host = got.float().cpu().numpy() if ok else np.asarray(got, np.float32)
            out[f"torch bf16 {label} engine={engine}"] = bool(ok and np.array_equal(
                host.view(np.uint32), np.asarray(want, np.float32).view(np.uint32)))
    # FP8 values from torch float8 tensors
    f8A, f8B = x[:, :128].astype(ml_dtypes.float8_e4m3fn), y[:128].astype(ml_dtypes.float8_e4m3fn)
    want = tc.gemm(f8A, f8B, instruction=FP8, engine="fast", promote_every=64)
    got = tc.gemm(torch.from_numpy(x[:, :128]).to(torch.float8_e4m3fn).cuda(),
                  torch.from_numpy(y[:128]).to(torch.float8_e4m3fn).cuda(), instruction=FP8, engine="cuda",
                  promote_every=64)
    out["torch fp8 promote_every=64"] = _same(got.cpu().numpy().view(np.uint32), np.asarray(want).view(np.uint32))
    # CuPy float16 values
    hA16, hB16 = x.astype(np.float16), y.astype(np.float16)
    want = tc.gemm(hA16, hB16, instruction="hopper.wgmma.m64n8k16.f32.f16.f16", engine="fast", split_k=2)
    got = tc.gemm(cupy.asarray(hA16), cupy.asarray(hB16), instruction="hopper.wgmma.m64n8k16.f32.f16.f16",
                  engine="auto", split_k=2)
    out["cupy fp16 split_k=2 engine=auto result is cupy"] = type(got).__module__.startswith("cupy")
    out["cupy fp16 split_k=2 engine=auto bits"] = _same(cupy.asnumpy(got).view(np.uint32),
                                                         np.asarray(want).view(np.uint32))
    return out


def block_scaled(rng) -> dict:
    """blockscale.dot_bits(engine='cuda') with torch CUDA operands/scales equals the reference engine."""
    import torch

    from tcnumerics import blockscale
    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import cuda, reference
    from tcnumerics.vectors.families import families_for, generate_scaled

    out = {}
    for name in (MX, MX_FP4, NVFP4):
        spec = get_instruction(name)
        parts = [generate_scaled(spec, fam, 256, rng, k=2 * spec.k) for fam in families_for(spec)]
        a, b, c, sa, sb = (np.concatenate(x) for x in zip(*parts))
        want = reference.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)
        got = blockscale.dot_bits(name, a, b, c, scale_a=sa, scale_b=sb, engine="cuda")
        out[f"{name} blockscale engine=cuda ({len(a)} vectors)"] = _same(got, want)
        to_t = (lambda x: torch.from_numpy(x.view(np.dtype(f"int{8 * x.itemsize}")) if x.itemsize > 1 else x).cuda())
        got_t = cuda.dot_bits(spec, to_t(a), to_t(b), to_t(c), scale_a=to_t(sa), scale_b=to_t(sb))
        out[f"{name} cuda.dot_bits torch tensors"] = bool(got_t.is_cuda) and _same(
            got_t.cpu().numpy().view(want.dtype), want)
    return out


def binary(rng) -> dict:
    """b1 AND/XOR + popc entries: dot and GEMM bits equal the fast engine on random and all-ones rows."""
    from tcnumerics.engines import cuda, fast

    out = {}
    for name in B1:
        from tcnumerics.catalog import get_instruction

        spec = get_instruction(name)
        k = 4 * spec.k
        a = rng.integers(0, 2, (65536, k), dtype=np.uint8)
        b = rng.integers(0, 2, (65536, k), dtype=np.uint8)
        a[:64] = 1
        b[:32] = 1
        c = rng.integers(-(1 << 31), 1 << 31, 65536, dtype=np.int64).astype(np.int32).view(np.uint32)
        c[:16] = 0x7FFFFFFF  # saturation / wrap at the int32 top
        out[f"{name} dot 65536 x K={k}"] = _same(cuda.dot_bits(spec, a, b, c), fast.dot_bits(spec, a, b, c))
        C = c[:200 * 90].reshape(200, 90)
        out[f"{name} gemm 200x90 K={k}"] = _same(cuda.gemm_bits(spec, a[:200], b[:90], C),
                                                 fast.gemm_bits(spec, a[:200], b[:90], C))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--seed", type=int, default=20261125)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    result, failed = {}, 0
    for section in (torch_bits, tc_gemm_gpu_values, block_scaled, binary):
        print(f"{section.__name__} ...", flush=True)
        try:
            rows = section(rng)
        except Exception:
            rows = {"error": traceback.format_exc()}
        result[section.__name__] = rows
        for key, ok in rows.items():
            failed += ok is not True
            print(f"  {section.__name__:20s} {key:75s} {ok if key != 'error' else 'ERROR'}", flush=True)
            if key == "error":
                print(ok, flush=True)
    print(f"{sum(len(r) for r in result.values())} checks, {failed} failed")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
