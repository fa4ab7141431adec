"""Device survey of cuBLAS's kernel choice: kernel names, launch grids and blocks per torch GEMM call.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/kernel_survey.py \
        --sets survey,holdout,holdout2,kernels --budget 300

Operands are uninitialised (``torch.empty``): cuBLAS chooses its kernel from the shapes, layouts,
types and epilogue, never from values, so no bits are captured here (``survey_ops.py`` captures the
bits that identify each family's structure).  Calls run in chunks under one torch.profiler session
each; a call's GPU activities (kernels, memsets) are matched to it through the CUDA runtime launch's
correlation id, whose CPU timestamp lies inside the call's ``record_function`` range.  Writes
``$OUT/kernels/<set>.json.gz``: ``names`` (distinct activity names), ``calls`` (id -> list of
[name index, grid, block]), ``errors``, ``env``; a set cut short by ``--budget`` says how many ran.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import os
import tempfile
import time

import torch

import survey_ops
from kernel_calls import kernel_calls, kernel_calls2, kernel_calls3, kernel_calls4
from survey_calls import SURVEY_SETS
from train_calls import train_bits_calls

OUT = os.environ.get("OUT", "/tmp/survey_out")
SETS = {**SURVEY_SETS, "kernels": kernel_calls, "kernels2": kernel_calls2, "kernels3": kernel_calls3,
        "kernels4": kernel_calls4, "train_bits": train_bits_calls}
GPU_CATS = ("kernel", "gpu_memset", "gpu_memcpy")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def _empty_operand(seed: int, n_rows: int, n_cols: int, fmt: str, scale_log2: int = 0) -> torch.Tensor:
    return torch.empty((n_rows, n_cols), dtype=survey_ops.DT[fmt], device=survey_ops.DEV)


def _sync() -> None:
    if survey_ops.DEV == "cuda":
        torch.cuda.synchronize()


def activities_by_call(trace: dict) -> tuple[dict[int, list], int]:
    """{call id: [(gpu ts, name, grid, block)]} from a chrome trace, and the number of GPU activities
    that matched no call (launched outside every ``tcn#`` range)."""
    events = trace["traceEvents"]
    ranges = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"][4:])) for e in events
                    if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("tcn#"))
    starts = [r[0] for r in ranges]
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    out: dict[int, list] = {}
    unmatched = 0
    for e in events:
        if e.get("cat") not in GPU_CATS:
            continue
        ts = launch_ts.get(e.get("args", {}).get("correlation"))
        i = bisect.bisect_right(starts, ts) - 1 if ts is not None else -1
        if i < 0 or ts > ranges[i][1]:
            unmatched += 1
            continue
        args = e["args"]
        out.setdefault(ranges[i][2], []).append((e["ts"], e["name"], args.get("grid"), args.get("block")))
    for acts in out.values():
        acts.sort(key=lambda a: a[0])
    return out, unmatched


def run_chunk(calls: list[dict], log) -> tuple[dict, dict]:
    """Run ``calls`` under one profiler session: ({id: [(name, grid, block)]}, {id: error})."""
    from torch.profiler import ProfilerActivity, profile, record_function

    errors, fns = {}, []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for c in calls:
            try:
                torch.set_float32_matmul_precision(c["prec"])
                fn = survey_ops.build(c)
                _sync()
                with record_function(f"tcn#{c['id']}"):
                    out = fn()
                    _sync()
                del out, fn
            except Exception as exc:  # an op torch refuses (e.g. a layout _scaled_mm rejects): recorded, not fatal
                errors[c["id"]] = f"{type(exc).__name__}: {exc}"[:300]
    torch.set_float32_matmul_precision("highest")
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        path = fh.name
    prof.export_chrome_trace(path)
    with open(path) as fh:
        trace = json.load(fh)
    os.unlink(path)
    acts, unmatched = activities_by_call(trace)
    if unmatched:
        log(f"  {unmatched} GPU activities matched no call")
    return {i: [(n, g, b) for _, n, g, b in a] for i, a in acts.items()}, errors


def survey_set(name: str, calls: list[dict], deadline: float, chunk: int, log, run=None,
               log_every: int = 1) -> dict:
    """Every call of ``calls`` in chunks until ``deadline``; ``run(part) -> ({id: [(name, grid, block)]}, {id:
    error})`` measures one chunk (default: under torch.profiler, ``run_chunk``).  Activity names are interned."""
    run = run or (lambda part: run_chunk(part, log))
    names: list[str] = []
    index: dict[str, int] = {}
    done, errors, ran = {}, {}, 0

    def intern(n: str) -> int:
        if n not in index:
            index[n] = len(names)
            names.append(n)
        return index[n]

    t0 = time.time()
    for start in range(0, len(calls), chunk):
        if time.time() > deadline:
            log(f"{name}: budget reached after {ran} of {len(calls)} calls")
            break
        part = calls[start:start + chunk]
        acts, errs = run(part)
        errors.update(errs)
        for i, lst in acts.items():
            done[i] = [[intern(n), g, b] for n, g, b in lst]
        ran += len(part)
        if (start // chunk) % log_every == 0 or ran == len(calls):
            log(f"{name}: {ran}/{len(calls)} calls, {len(done)} with activities, {len(errors)} errors "
                f"({time.time() - t0:.0f} s)")
    return dict(set=name, ran=ran, total=len(calls), names=names, calls=done, errors=errors,
                seconds=round(time.time() - t0, 1))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="survey,holdout,holdout2,kernels")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for all sets together")
    ap.add_argument("--chunk", type=int, default=400)
    ap.add_argument("--limit", type=int, default=0, help="first N calls of each set (a smoke test)")
    ap.add_argument("--start", type=int, default=0, help="skip the first N calls of each set (a continued run; "
                    "the file is then <set>_from<N>.json.gz)")
    args = ap.parse_args()
    survey_ops.hashed_gpu = _empty_operand  # values never steer cuBLAS's choice
    out_dir = os.path.join(OUT, "kernels")
    os.makedirs(out_dir, exist_ok=True)
    env = dict(torch=torch.__version__, cuda=torch.version.cuda, device=torch.cuda.get_device_name(0) if survey_ops.DEV == "cuda" else "cpu (dry run)")
    try:
        from importlib.metadata import version
        env["nvidia-cublas"] = version("nvidia-cublas")
    except Exception as exc:
        env["nvidia-cublas"] = f"unknown ({exc})"
    print(f"env: {env}", flush=True)
    deadline = time.time() + args.budget
    for name in args.sets.split(","):
        calls = SETS[name]()[args.start:]
        if args.limit:
            calls = calls[:args.limit]
        res = survey_set(name, calls, deadline, args.chunk, lambda m: print(m, flush=True))
        res["env"] = env
        stem = f"{name}_from{args.start}" if args.start else name
        with gzip.open(os.path.join(out_dir, f"{stem}.json.gz"), "wt") as fh:
            json.dump(res, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
