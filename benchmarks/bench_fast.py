"""Benchmark of the fast engine (issue 4): GEMM MAC/s against numpy float32 matmul and MMA-Sim,
dot_bits vectors/s, peak memory of a 4096^3 GEMM and cold JIT compile time, in one run.

Ratios are taken in the same process, on the same shapes.  Run the BLAS baseline with the
OpenBLAS overrides unset (this machine may set them for old OpenBLAS builds):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_fast.py

Options: ``--sizes 256,512`` (GEMM edges), ``--no-mmasim``, ``--no-memory``, ``--no-compile``,
``--threads 1`` (our kernels and MMA-Sim's torch on one thread each: CPU work without spin-waiting).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

GEMMS = {  # label -> catalog entry
    "BF16 wgmma k16 (FP32 out)": "hopper.wgmma.m64n8k16.f32.bf16.bf16",
    "FP16 wgmma k16 (FP32 out)": "hopper.wgmma.m64n8k16.f32.f16.f16",
    "TF32 wgmma k8 (FP32 out)": "hopper.wgmma.m64n8k8.f32.tf32.tf32",
    "FP8 E4M3 wgmma k32 (E8M13 out)": "hopper.wgmma.m64n8k32.f32.e4m3.e4m3",
    "FP8 E4M3 mma.sync k32 (FP16 lowering)": "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32",
}


def _operands(spec, m: int, n: int, k: int, seed: int = 0):
    """N(0,1) operands rounded to the operand formats: a_rows [m,k], b_cols [n,k], c [m,n] bits."""
    rng = np.random.default_rng(seed)
    a = spec.a_format.from_float(rng.standard_normal((m, k), dtype=np.float32))
    b = spec.b_format.from_float(rng.standard_normal((n, k), dtype=np.float32))
    c = spec.c_format.from_float(rng.standard_normal((m, n), dtype=np.float32))
    return a, b, c


def _best(fn, repeat: int, budget_s: float = 20.0) -> float:
    best = float("inf")
    start = time.perf_counter()
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        if time.perf_counter() - start > budget_s:
            break
    return best


def _best_cpu(fn, repeat: int) -> float:
    """Least CPU time of the process (all threads) over repeat calls: less sensitive than wall
    time to other jobs on a shared machine (spin-waiting threads still count)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def blas_info() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    return "; ".join(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} threads={i.get('num_threads')}"
                     for i in threadpool_info() if i.get("user_api") == "blas") or "no BLAS found"


def bench_gemm(sizes: list[int]) -> list[dict]:
    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import fast

    rows = []
    for label, name in GEMMS.items():
        spec = get_instruction(name)
        fast.gemm_bits(spec, *_operands(spec, 8, 8, spec.k * 2))  # compile / load from cache
        for n in sizes:
            a, b, c = _operands(spec, n, n, n)
            t_fast = _best(lambda: fast.gemm_bits(spec, a, b, c), 3 if n <= 1024 else 1)
            af = np.ascontiguousarray(spec.a_format.to_float(a).astype(np.float32))
            bf = np.ascontiguousarray(spec.b_format.to_float(b).astype(np.float32).T)
            t_blas = _best(lambda: af @ bf, 5)
            row = dict(label=label, n=n, seconds=t_fast, mac_per_s=n ** 3 / t_fast, blas_seconds=t_blas,
                       slowdown_vs_blas=t_fast / t_blas)
            rows.append(row)
            print(f"  {label:40s} {n:5d}^3  {t_fast:8.3f} s  {n ** 3 / t_fast:9.3e} MAC/s   "
                  f"numpy f32 {t_blas * 1e3:8.2f} ms  ({t_fast / t_blas:6.1f}x slower)", flush=True)
    return rows


def bench_mmasim(sizes: list[int], threads: int | None = None) -> list[dict]:
    try:
        import torch
        from mmasim.nv_ptx.sim import MMA, WGMMA
    except ImportError as exc:
        print(f"  mmasim not installed ({exc}); skipped. Install: pip install torch==2.13.0 mmasim==2.1.1")
        return []
    import mmasim

    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import fast

    torch.set_num_threads(threads or os.cpu_count() or 1)
    print(f"  mmasim {getattr(mmasim, '__version__', '2.1.1')}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    rows = []
    cases = [("BF16 wgmma k16 (FP32 out)", WGMMA("Hopper", "m64n8k16.f32.bf16.bf16"), torch.bfloat16),
             ("FP8 E4M3 wgmma k32 (E8M13 out)", WGMMA("Hopper", "m64n8k32.f32.e4m3.e4m3"), torch.float8_e4m3fn)]
    for label, op, dtype in cases:
        spec = get_instruction(GEMMS[label])
        for n in sizes:
            a, b, c = _operands(spec, n, n, n)
            as_int = {1: np.uint8, 2: np.int16}[a.dtype.itemsize]  # torch has no uint16 view
            A = torch.from_numpy(a.view(as_int).copy()).view(dtype)
            B = torch.from_numpy(np.ascontiguousarray(b.T).view(as_int)).view(dtype)
            C = torch.from_numpy(c.view(np.float32).copy())
            # the fast engine first: torch's OpenMP workers keep spinning for a while after a call
            t_fast = _best(lambda: fast.gemm_bits(spec, a, b, c), 5)
            cpu_fast = _best_cpu(lambda: fast.gemm_bits(spec, a, b, c), 5)
            t, cpu = time.perf_counter(), time.process_time()
            D = op(A, B, C)
            t_sim, cpu_sim = time.perf_counter() - t, time.process_time() - cpu
            d_sim = D.contiguous().view(torch.int32).numpy().view(np.uint32)
            same = bool(np.array_equal(d_sim, fast.gemm_bits(spec, a, b, c)))
            rows.append(dict(label=label, n=n, mmasim_seconds=t_sim, fast_seconds=t_fast, speedup=t_sim / t_fast,
                             mmasim_cpu_seconds=cpu_sim, fast_cpu_seconds=cpu_fast, cpu_speedup=cpu_sim / cpu_fast,
                             identical_bits=same))
            print(f"  {label:40s} {n:5d}^3  mmasim {t_sim:8.2f} s  fast {t_fast:7.3f} s  "
                  f"speedup {t_sim / t_fast:8.0f}x  identical bits: {same};  CPU time (all threads) mmasim "
                  f"{cpu_sim:7.2f} s  fast {cpu_fast:6.3f} s  ratio {cpu_sim / cpu_fast:6.0f}x", flush=True)
    return rows


def bench_dot(count: int = 1_000_000) -> list[dict]:
    import tcnumerics as tc
    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import fast

    rows = []
    for name, k in (("hopper.wgmma.m64n8k16.f32.bf16.bf16", 16), ("hopper.wgmma.m64n8k16.f32.bf16.bf16", 32),
                    ("hopper.wgmma.m64n8k32.f32.e4m3.e4m3", 32), ("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", 32)):
        spec = get_instruction(name)
        a, b, _ = _operands(spec, count, 1, k)
        b = spec.b_format.from_float(np.random.default_rng(1).standard_normal((count, k), dtype=np.float32))
        c = spec.c_format.from_float(np.random.default_rng(2).standard_normal(count, dtype=np.float32))
        fast.dot_bits(spec, a[:10], b[:10], c[:10])
        t_engine = _best(lambda: fast.dot_bits(spec, a, b, c), 3)
        inst = tc.instruction(name)
        t_api = _best(lambda: inst.dot_bits(a, b, c), 3)
        rows.append(dict(instruction=name, k=k, engine_vectors_per_s=count / t_engine, api_vectors_per_s=count / t_api))
        print(f"  {name:42s} K={k:3d}  engine {count / t_engine:9.3e} vectors/s   "
              f"Instruction.dot_bits {count / t_api:9.3e} vectors/s", flush=True)
    return rows


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _peak_child(n: int) -> None:
    """Child process: peak RSS above the operands for one n^3 BF16 GEMM (prints JSON)."""
    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import fast

    spec = get_instruction(GEMMS["BF16 wgmma k16 (FP32 out)"])
    fast.gemm_bits(spec, *_operands(spec, 8, 8, 32))
    a, b, c = _operands(spec, n, n, n)
    # the peak is taken over the GEMM alone: current RSS before, then the high-water mark reset
    # (Linux clear_refs 5) so that the operands' generation does not count
    base = _status_bytes("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    t = time.perf_counter()
    d = fast.gemm_bits(spec, a, b, c)
    seconds = time.perf_counter() - t
    peak = _status_bytes("VmHWM")
    print(json.dumps(dict(n=n, seconds=seconds, operand_bytes=a.nbytes + b.nbytes + c.nbytes, output_bytes=d.nbytes,
                          rss_before=base, rss_peak=peak, growth=peak - base)))


def bench_memory(n: int = 4096) -> dict:
    out = subprocess.run([sys.executable, __file__, "--peak-child", str(n)], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    extra = r["growth"] - r["output_bytes"]
    print(f"  BF16 {n}^3 GEMM: {r['seconds']:.1f} s ({n ** 3 / r['seconds']:.3e} MAC/s); operands {r['operand_bytes'] / 2**20:.0f}"
          f" MiB (already resident), output {r['output_bytes'] / 2**20:.0f} MiB; peak RSS grew by "
          f"{r['growth'] / 2**20:.0f} MiB during the GEMM = output + {extra / 2**20:.0f} MiB working set "
          f"(target: <= 256 MiB)", flush=True)
    r["working_set"] = extra
    return r


def bench_compile() -> dict:
    code = ("import time, numpy as np; t=time.perf_counter()\n"
            "from tcnumerics.engines import fast\n"
            "from tcnumerics.catalog import get_instruction\n"
            "t_import=time.perf_counter()-t\n"
            "for name in ['hopper.wgmma.m64n8k16.f32.bf16.bf16', 'hopper.mma.m16n8k32.s32.s8.s8.s32']:\n"
            "    s=get_instruction(name); a=np.zeros((4, 2*s.k), s.a_format.container_dtype)\n"
            "    fast.dot_bits(s, a, a, np.zeros(4, s.c_format.container_dtype))\n"
            "    fast.gemm_bits(s, a, a, np.zeros((4, 4), s.c_format.container_dtype))\n"
            "print(t_import, time.perf_counter()-t)\n")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        t_cold = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        t_warm = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    cold = [float(x) for x in t_cold.stdout.split()]
    warm = [float(x) for x in t_warm.stdout.split()]
    print(f"  cold cache: every kernel compiled in {cold[1]:.1f} s (import {cold[0]:.2f} s); "
          f"warm cache (cache=True): {warm[1]:.2f} s", flush=True)
    return dict(cold_seconds=cold[1], warm_seconds=warm[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="256,512,1024,2048")
    p.add_argument("--mmasim-sizes", default="256,512")
    p.add_argument("--no-mmasim", action="store_true")
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--threads", type=int, help="threads for our kernels and MMA-Sim's torch (default: all cores); "
                   "--threads 1 compares single-thread CPU work, free of spin-waiting on a shared machine")
    p.add_argument("--json", help="also write all figures to this JSON file (must not exist)")
    p.add_argument("--peak-child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.peak_child:
        _peak_child(args.peak_child)
        return 0
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
        mm_sizes = [int(x) for x in args.mmasim_sizes.split(",")]
    except ValueError:
        print("--sizes: expected comma-separated integers", file=sys.stderr)
        return 2
    if args.json and os.path.exists(args.json):
        print(f"--json: {args.json} exists; not overwriting", file=sys.stderr)
        return 2
    from tcnumerics.engines import fast

    if args.threads is not None:
        if args.threads < 1:
            print("--threads: must be positive", file=sys.stderr)
            return 2
        import numba

        numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"tcnumerics fast engine benchmark, {time.strftime('%Y-%m-%d %H:%M')}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load average {' '.join(load)}; backend {fast.backend()}, {fast.kernel_threads()} "
          f"threads; numpy {np.__version__}; "
          f"BLAS: {blas_info()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}")
    result: dict = {}
    print("GEMM (N(0,1) operands, C = N(0,1)):")
    result["gemm"] = bench_gemm(sizes)
    print("dot_bits (1e6 vectors):")
    result["dot"] = bench_dot()
    if not args.no_mmasim:
        print("MMA-Sim (same inputs; bits compared):")
        result["mmasim"] = bench_mmasim(mm_sizes, args.threads)
    if not args.no_memory:
        print("Peak memory:")
        result["memory"] = bench_memory()
    if not args.no_compile:
        print("JIT compile:")
        result["compile"] = bench_compile()
    if args.json:
        with open(args.json, "x") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
