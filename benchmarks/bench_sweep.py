"""A sweep on the GPU engine against the same sweep on CPU cores (issue 29): time ratio and table equality.

Runs one spec twice in this process -- the CPU engines with ``--workers`` processes (default 2, the CI machine's
cores; each worker gets cores/workers engine threads as in any sweep) and ``engine="cuda"`` with one worker -- and
prints both times, their ratio and whether the two tables are identical cell for cell.  Workloads the GPU engine
does not serve are dropped from the spec (named on stdout).

    taskset -c 0,1 python benchmarks/bench_sweep.py examples/sweeps/accumulator-design.toml --workers 2 [--json X]

(``taskset`` pins the run to two cores: the workers' engine threads follow the affinity, not the machine's count.
``--cpu-cores 2`` pins only the CPU run, so that ``--gpu-workers N`` can use the machine's other cores.)

``--cpu-only`` times the CPU side alone (no GPU needed): the baseline for a later GPU run.

Both sides start warm where a user's second sweep would: the fast engine's numba kernels are compiled (and
cached on disk) by one small call before the CPU run is timed.  The GPU side is timed ``--gpu-runs`` times
(default 2): the first run compiles one kernel per swept unit (NVRTC; CuPy caches them on disk), later runs
load them -- both figures are printed, with their ratios to the CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time


def _spec(path: str, seeds: int | None, gpu: bool):
    from tcnumerics.sweep import load_spec, parse_spec
    from tcnumerics.sweep.workloads import WORKLOADS

    spec = load_spec(path)
    source = dict(spec.source)
    kept = [w for w in source["workloads"] if not gpu or WORKLOADS[w["kind"]].on_gpu]
    for w in source["workloads"]:
        if w not in kept:
            print(f"dropped workload {w['kind']}: runs on the CPU engines only")
    kept = [w for w in kept if w["kind"] != "model_eval" or _torch_ok()]
    source["workloads"] = kept
    if seeds is not None:
        source["sweep"] = {**source.get("sweep", {}), "seeds": seeds}
    return parse_spec(source)


def _torch_ok() -> bool:
    from tcnumerics.sweep.workloads import torch_available

    if not torch_available():
        print("dropped workload model_eval: torch is not installed")
    return torch_available()


def _timed(spec, out: str, **kwargs):
    from tcnumerics.sweep import run_sweep

    t0 = time.perf_counter()
    table = run_sweep(spec, out, progress=False, **kwargs)
    return table, time.perf_counter() - t0


def _warm_cpu_engine() -> None:
    """Compile (or load from the cache) the fast engine's numba kernels once, as any earlier sweep leaves them."""
    import numpy as np

    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import fast

    spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    fast.gemm_bits(spec, np.zeros((2, 16), np.uint16), np.zeros((2, 16), np.uint16), np.zeros((2, 2), np.uint32))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--workers", type=int, default=2, help="CPU worker processes of the baseline (default 2)")
    ap.add_argument("--seeds", type=int, default=None, help="override the spec's seed count")
    ap.add_argument("--cpu-only", action="store_true", help="time the CPU side only")
    ap.add_argument("--gpu-runs", type=int, default=2, help="GPU runs timed (the first compiles the kernels)")
    ap.add_argument("--cpu-cores", type=int, default=None,
                    help="pin the CPU run (only) to this many cores, e.g. 2 for the CI machine's count (Linux)")
    ap.add_argument("--gpu-workers", type=int, default=1,
                    help="worker processes sharing the GPU (default 1; the tasks are small, so their host-side work "
                         "can be the bound)")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    args = ap.parse_args(argv)
    spec = _spec(args.spec, args.seeds, gpu=not args.cpu_only)
    from tcnumerics.sweep import expand

    tasks = len(expand(spec))
    from tcnumerics.sweep.executors import usable_cores

    result = {"spec": args.spec, "tasks": tasks, "cpu_workers": args.workers, "gpu_workers": args.gpu_workers,
              "cores": usable_cores(),
              "host": platform.node()}
    _warm_cpu_engine()
    everything = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    with tempfile.TemporaryDirectory() as tmp:
        if args.cpu_cores:  # the CPU side on N cores; its workers inherit the mask, the GPU side gets all back
            os.sched_setaffinity(0, sorted(everything)[:args.cpu_cores])
            result["cores"] = usable_cores()
        try:
            cpu, result["cpu_s"] = _timed(spec, os.path.join(tmp, "cpu.parquet"), workers=args.workers,
                                          engine="fast")
        finally:
            if args.cpu_cores:
                os.sched_setaffinity(0, everything)
        print(f"{tasks} tasks, CPU engines, {args.workers} workers: {result['cpu_s']:.1f} s")
        if not args.cpu_only:
            import pandas as pd

            result["gpu_runs_s"], result["identical"] = [], True
            for run in range(max(1, args.gpu_runs)):
                gpu, seconds = _timed(spec, os.path.join(tmp, f"gpu{run}.parquet"), engine="cuda",
                                      workers=args.gpu_workers)
                result["gpu_runs_s"].append(seconds)
                try:
                    pd.testing.assert_frame_equal(cpu.reset_index(drop=True), gpu.reset_index(drop=True),
                                                  check_exact=True)
                except AssertionError as exc:
                    result["identical"] = False
                    print(f"TABLES DIFFER: {str(exc).splitlines()[0]}")
                print(f"{tasks} tasks, GPU engine, {args.gpu_workers} worker(s), run {run + 1} ({'compiles' if run == 0 else 'cached'} "
                      f"kernels): {seconds:.1f} s; GPU/CPU speed-up x{result['cpu_s'] / seconds:.1f}; tables "
                      f"identical so far: {result['identical']}")
            result["gpu_s"] = result["gpu_runs_s"][0]
            result["speedup"] = result["cpu_s"] / result["gpu_s"]
            result["speedup_cached"] = result["cpu_s"] / min(result["gpu_runs_s"])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0 if result.get("identical", True) else 1


if __name__ == "__main__":
    sys.exit(main())
