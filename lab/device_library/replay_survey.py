"""Replay the op survey on the CPU: rebuild each call's sampled operands, score kernel structures.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/replay_survey.py CAPTURE [CAPTURE ...] \
        [--side 16] [--ids ..] [--table scratch_table.json] [--json results.json]

Each ``CAPTURE`` is a directory holding ``index.json`` and ``survey.npz`` from ``survey_ops.py``, or its
packed file (``vectors/library/hopper_op_survey_h100.npz``, ``..._holdout_h100.npz``).  Every call is
replayed through ``tcnumerics.library`` (the op functions); the inexact ones are printed with whether
the plan was flagged not modelled, and each capture's summary counts silent misses (inexact and not
flagged), which must be 0 (exit status 1 otherwise).  ``--table`` replays against another measured
table (e.g. a scratch table from ``fit_table.py -o``) instead of the installed one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import Counter

import numpy as np

from inputs import hashed_values

FMT = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "e4m3": "e4m3", "e5m2": "e5m2"}


def load(survey: str):
    """(index, arrays) of a survey directory or of its packed file (``export_survey.py``)."""
    if survey.endswith(".npz"):
        data = np.load(survey, allow_pickle=False)
        return json.loads(str(data["meta"])), data
    with open(os.path.join(survey, "index.json")) as fh:
        index = json.load(fh)
    data = np.load(os.path.join(survey, "survey.npz"), allow_pickle=False)
    return index, data


def _vals(fmt: str, seed: int, n_cols: int, rows, cols, scale_log2: int = 0) -> np.ndarray:
    import tcnumerics as tc

    f = tc.get_format(fmt)
    return f.to_array(f.from_float(hashed_values(seed, n_cols, rows, cols, scale_log2)))


def operands(c: dict, data, side: int = 0) -> dict:
    """Sampled operands of call ``c``: per sampled batch, A rows [R, K] and B columns [K, C] (+ C, bias, scales).

    ``side``: keep only the first ``side`` sampled rows and columns (a quicker, weaker replay)."""
    i = c["id"]
    rows, cols, bs = data[f"rows{i}"], data[f"cols{i}"], data[f"batches{i}"]
    expected = data[f"d{i}"]
    if side:
        rows, cols, expected = rows[:side], cols[:side], expected[:, :side, :side]
    M, N, K, fmt = c["M"], c["N"], c["K"], c["fmt"]
    out = dict(expected=expected, rows=rows, cols=cols, batches=bs, A=[], B=[], C=[], bias=None,
               scale_a=None, scale_b=None)
    kall = np.arange(K)
    for b in bs:
        out["A"].append(_vals(fmt, c["seed_a"], K, b * M + rows, kall))
        brow = b * K + kall if c["op"] in ("bmm", "baddbmm") else kall
        out["B"].append(_vals(c.get("b_fmt", fmt), c["seed_b"], N, brow, cols))
        if c["op"] == "addmm":
            if c["c_1d"]:
                out["C"].append(np.broadcast_to(_vals(fmt, c["seed_c"], N, [0], cols), (len(rows), len(cols))))
            else:
                out["C"].append(_vals(fmt, c["seed_c"], N, rows, cols))
        elif c["op"] == "baddbmm":
            out["C"].append(_vals(fmt, c["seed_c"], N, b * M + rows, cols))
    if c["op"] == "linear" and c["bias"]:
        out["bias"] = _vals(fmt, c["seed_c"], N, [0], cols).reshape(-1)
    if c["op"] == "scaled_mm":
        kind = c["scales"]
        s = lambda seed, n, r, cc: 1.0 + hashed_values(seed, n, r, cc, -2)
        if kind == "tensor":
            out["scale_a"], out["scale_b"] = s(c["seed_c"], 1, [0], [0])[0, 0], s(c["seed_c"] + 1, 1, [0], [0])[0, 0]
        elif kind == "rowwise":
            out["scale_a"] = s(c["seed_c"], 1, rows, [0])[:, 0]
            out["scale_b"] = s(c["seed_c"] + 1, N, [0], cols)[0]
        else:
            kb, nb = -(-K // 128), -(-N // 128)
            out["scale_a"] = s(c["seed_c"], kb, rows, np.arange(kb))
            out["scale_b"] = s(c["seed_c"] + 1, nb, np.arange(kb), cols // 128)
    return out


def lib_call(c: dict, ops: dict, b: int, engine: str = "auto", gpu: str | None = None):
    """The library op for batch sample ``b`` (2-D operands; ``full_shape`` carries the whole call), planned for GPU
    model ``gpu`` (default: the library's default, the H100)."""
    from tcnumerics import library as lib

    A, B = ops["A"][b], ops["B"][b]
    M, N, K = c["M"], c["N"], c["K"]
    prec = c.get("prec", "highest")
    kw = dict(fp32_precision=prec, engine=engine, gpu=gpu)
    op = c["op"]
    if op in ("bmm", "baddbmm", "matmul_bcast"):
        kw["full_shape"] = (c["b"], M, N, K)
    else:
        kw["full_shape"] = (M, N, K)
    if c.get("a_t"):
        A = np.asfortranarray(A)  # a transposed view of contiguous storage, as torch passed it
    if c.get("b_t"):
        B = np.asfortranarray(B)
    if op in ("matmul", "mm_out", "linear", "addmm"):  # where the samples sit (stream-K kernels depend on it)
        kw.update(rows=np.asarray(ops["rows"]), cols=np.asarray(ops["cols"]))
    if op == "matmul":
        return lib.matmul, (A, B), kw
    if op == "matmul_bcast":
        return lib.matmul, (A[None], B), kw
    if op == "mm_out":
        return lib.matmul, (A, B), dict(kw, out_dtype=c["out_dtype"])
    if op == "linear":
        return lib.linear, (A, np.ascontiguousarray(B.T), ops["bias"]), kw
    if op == "addmm":
        C = ops["C"][b][0] if c["c_1d"] else ops["C"][b]
        return lib.addmm, (C, A, B), dict(kw, beta=c["beta"], alpha=c["alpha"])
    if op == "bmm":
        return lib.bmm, (A[None], B[None]), kw
    if op == "baddbmm":
        return lib.baddbmm, (ops["C"][b][None], A[None], B[None]), dict(kw, beta=c["beta"], alpha=c["alpha"])
    if op == "scaled_mm":
        Bc = np.asfortranarray(B)  # column-major, as _scaled_mm requires
        return lib.scaled_mm, (A, Bc, ops["scale_a"], ops["scale_b"]), \
            dict(kw, out_dtype=c["out_dtype"], use_fast_accum=c["fast_accum"])
    raise ValueError(op)


def replay(c: dict, data, engine: str = "auto", side: int = 0, gpu: str | None = None) -> dict:
    """Run the call through the library (planned for GPU model ``gpu``): bit-exact?, flagged?, the plan's family
    and reason."""
    import tcnumerics as tc

    ops = operands(c, data, side)
    got, plan = [], None
    for b in range(len(ops["batches"])):
        fn, args, kw = lib_call(c, ops, b, engine, gpu)
        if plan is None:
            plan = fn.plan(*args, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = np.asarray(fn(*args, **kw))
        got.append(r.reshape(r.shape[-2:]))
    fmt = tc.get_format(c["out"])
    bits = np.stack([fmt.bits_of(np.asarray(g, np.float64)) if g.dtype != fmt.to_array(np.zeros(1, np.uint8)).dtype
                     else fmt.bits_of(g) for g in got])
    exp = ops["expected"]
    bad = int((bits.reshape(exp.shape) != exp).sum())
    return dict(id=c["id"], exact=bad == 0, bad=bad, n=int(exp.size), modelled=bool(plan.modelled),
                family=str(plan.family), reason=str(plan.reason))


def subset_capture(src: str, ids, dst: str) -> int:
    """Write the records ``ids`` of capture ``src`` (their arrays and the index, ids kept) to ``dst`` (.npz).

    For experiments that fold part of a capture into a scratch table and replay the rest; name ``dst``
    as ``src`` (in another directory) so fit caches keyed ``capture#id`` stay valid.  Returns the records kept."""
    index, data = load(src)
    keep = {int(i) for i in ids}
    records = [r for r in index["records"] if r["id"] in keep]
    arrays = {f"{p}{r['id']}": data[f"{p}{r['id']}"] for r in records if "error" not in r
              for p in ("d", "rows", "cols", "batches")}
    np.savez_compressed(dst, meta=np.array(json.dumps(dict(index, records=records))), **arrays)
    return len(records)


def use_table(path: str, gpu: str = "h100") -> None:
    """Replay against the measured table at ``path`` instead of model ``gpu``'s installed one (scratch experiments)."""
    from tcnumerics.library import measured

    measured.set_table(gpu, path)


def use_launches(path: str, gpu: str = "h100") -> None:
    """Replay against the launch table at ``path`` as model ``gpu``'s (e.g. one exported without a held-out set's
    launches)."""
    from tcnumerics.library import launches

    launches.set_table(gpu, path)


def replay_capture(path: str, ids: set, opsel: set, side: int, gpu: str | None = None) -> list[dict]:
    """Replay every call of one capture (or those ``ids`` / ops); print the inexact ones."""
    index, data = load(path)
    results = []
    for c in index["records"]:
        if ids and c["id"] not in ids or opsel and c["op"] not in opsel or "error" in c:
            continue
        try:
            r = replay(c, data, side=side, gpu=gpu)
        except Exception as exc:  # report and go on
            r = dict(id=c["id"], exact=False, bad=-1, n=0, modelled=False, family="error", reason=repr(exc)[:200])
        r["op"], r["fmt"], r["shape"] = c["op"], c["fmt"], (c.get("b"), c["M"], c["N"], c["K"])
        r["kernel"] = " | ".join(k[:70] for k in c["kernels"] if "Mem" not in k and "elementwise" not in k)
        r["capture"] = os.path.basename(os.path.normpath(path)).removesuffix(".npz")
        results.append(r)
        tag = "ok" if r["exact"] else ("FLAGGED" if not r["modelled"] else "SILENT-MISS")
        if not r["exact"] or ids:
            print(f"[{c['id']}] {tag} {c['op']} {c['fmt']} {c.get('prec', '')} {r['shape']} bad={r['bad']}/{r['n']}"
                  f" plan={r['family']} kernel={r['kernel'][:110]}", flush=True)
    return results


def _capture_gpu(paths: list[str]) -> str:
    """The GPU model the captures ran on (their ``env`` device), one for all; the library default if unrecorded."""
    from tcnumerics.library.gpus import default_gpu, model_key

    models = set()
    for p in paths:
        device = (load(p)[0].get("env") or {}).get("device")
        models.add(model_key(device) if device and device != "cpu" else default_gpu())
    if len(models) > 1:
        raise SystemExit(f"captures from several GPU models ({', '.join(sorted(models))}): replay them apart or "
                         "pass --gpu")
    return models.pop() if models else default_gpu()


def summary(results: list[dict], label: str, seconds: float) -> int:
    """Print the counts of one capture's replay; return its silent misses."""
    n = len(results)
    exact = sum(r["exact"] for r in results)
    flagged = sum(not r["modelled"] for r in results)
    silent = sum(not r["exact"] and r["modelled"] for r in results)
    print(f"{label}{n} calls: {exact} bit-exact, {flagged} flagged not modelled "
          f"({sum(not r['modelled'] and r['exact'] for r in results)} of them exact anyway), "
          f"{silent} silent misses; {seconds:.0f} s")
    print(Counter((r["op"], r["exact"], r["modelled"]) for r in results))
    return silent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("captures", nargs="+", help="capture files (.npz) or survey directories, replayed in turn")
    ap.add_argument("--ids", default="")
    ap.add_argument("--ops", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--side", type=int, default=0, help="replay only side x side of each call's sampled outputs")
    ap.add_argument("--table", default="", help="a measured table to replay against instead of the installed one")
    ap.add_argument("--launches", default="", help="a launch table (.npz) to replay against instead of the installed one")
    ap.add_argument("--gpu", default=None, help="plan every call for this GPU model (h100, h200, ...; default: the "
                    "capture's device, else the library's default); --table / --launches replace that model's tables")
    args = ap.parse_args()
    gpu = args.gpu or _capture_gpu(args.captures)
    if args.launches:
        use_launches(args.launches, gpu)
    if args.table:
        use_table(args.table, gpu)
    print(f"planned for GPU model {gpu!r}", flush=True)
    ids = {int(x) for x in args.ids.split(",") if x}
    opsel = set(args.ops.split(",")) - {""}
    results, silent = [], 0
    for path in args.captures:
        t0 = time.time()
        got = replay_capture(path, ids, opsel, args.side, gpu)
        label = f"{path}: " if len(args.captures) > 1 else ""
        silent += summary(got, label, time.time() - t0)
        results += got
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh)
    return 1 if silent else 0


if __name__ == "__main__":
    sys.exit(main())
