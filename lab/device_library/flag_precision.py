"""How precise the self-check's flags are on captured training steps, against the tables as they are now.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/flag_precision.py CAPTURE.json.gz ... \
        [--steps CHECK.jsonl ...] [--save PLANS.json | --before PLANS.json | --before-rev REV | --as-captured] \
        [--recheck RECHECK.json.gz ...] [--changed-out CHANGED.json] [--json COUNTS.json] [--by-reason]

A capture (``check_training.py``'s ``check_<gpu>_set<N>_calls.json.gz``) holds, per GEMM call of a checked training
step, the call, what cuBLAS ran (kernels, launch grid), whether the library's bits matched the native ones and
whether the plan then claimed bit-exactness.  Each call falls in one of four classes:

* **exact**: modelled, bits equal;  **flagged-exact**: not modelled, bits equal anyway (a flag that cried wolf);
* **flagged-differ**: not modelled, bits differ (a flag that was right);  **silent**: modelled, bits differ.

The bits were compared against the plan of the tables *at capture time*.  ``--save`` records each call's plan
(modelled, numerics) now; run before a fold, it is the capture-time plan (checked: its ``modelled`` must equal the
capture's).  Without it, a plan whose family (kernel, split count, reduction) is the one the capture names kept
its numerics.  ``--before`` such a file, after a fold: where a call's plan kept its numerics, the capture's bit
comparison still holds and the call is classed as above with its new flag; where the numerics changed, the bits
of the new plan were never compared -- the call is counted apart ("changed"), with whether the launch cuBLAS ran
gives the new plan's numerics (``check.compare_launch``), and counts as not exact in the fractions, unless
``--recheck`` gives a device re-check of the same call, launch and plan (``lab/device_models/check_calls.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections import Counter

from tcnumerics.library.calls import Call, call_record
from tcnumerics.library.check import Observation, compare_launch, read_capture
from tcnumerics.library.kernel_names import is_gemm_kernel
from tcnumerics.library.selection import select


def numerics(plan) -> str:
    """What the output bits depend on: the plan's structure without its family label."""
    return repr(dataclasses.replace(plan.structure, family=""))


def key(ob, i: int) -> str:
    return f"{i}:{ob.call.key()}"


def _launch_key(ob) -> tuple:
    """A call (shape and kind, without its GPU model) and the launch cuBLAS ran for it (GEMM kernels, main grid)."""
    c = dataclasses.replace(ob.call, gpu="h100")
    return c.key(), tuple(k for k in ob.kernels if not k.startswith("Memset")), ob.main_grid


def rechecked(paths: list[str]) -> dict:
    """Calls a later device check (``lab/device_models/check_calls.py``) ran, by ``_launch_key``: (bits matched,
    modelled, planned family).  A launch -- kernels and grid -- is the same numerics on every GPU model of the
    architecture, so a re-check on one model speaks for a call that ran the same launch on another."""
    out = {}
    for path in paths:
        for ob in load(path):
            out[_launch_key(ob)] = (ob.bits_match, ob.modelled, ob.planned)
    return out


_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def site_observations(path: str) -> list[Observation]:
    """The calls of a self-check's site summary (``check_<gpu>.json``: per step, per call site, how many calls and
    how many exact), for the checks that kept no capture (CHECK_SET_1): one observation per call, with the site's
    native kernels (no grid), planned family and claim; only BF16/FP16/FP32 mm and bmm sites."""
    with open(path) as fh:
        doc = json.load(fh)
    out = []
    for step in doc["steps"]:
        for site in step["sites"]:
            shape = site["shape"]
            b, (M, N, K) = (shape[0], shape[1:]) if len(shape) == 4 else (1, shape)
            fmt = _DTYPES[site["dtypes"].split("x")[0]]
            call = Call("bmm" if site["op"] == "bmm" else "matmul", fmt, fmt, M, N, K, b=b, b_fmt=None,
                        a_t=site["layout"][0] == "T", b_t=site["layout"][1] == "T", gpu=step.get("gpu") or doc["gpu"])
            for i in range(site["calls"]):
                out.append(Observation(call, tuple(site["native_kernels"]) or ("unknown",), (), i < site["exact"],
                                       None, doc["gpu"], f"{step.get('model')} {step.get('tokens')}",
                                       site["predicted"], site["modelled"]))
    return out


def load(path: str) -> list[Observation]:
    """A capture's observations, or (a JSON document with ``steps``) a site summary's."""
    try:
        return read_capture(path)[1]
    except ValueError:
        return site_observations(path)


def _gemm_kernel(kernels) -> str:
    """The call's GEMM kernel for a report (``kernel_names.is_gemm_kernel``: not the split-K workspace memset
    launched before it), else its first launch."""
    return next((k for k in kernels if is_gemm_kernel(k)), kernels[0] if kernels else "")


def classify(obs: list, gpu: str | None, before: dict | None, again: dict | None = None
             ) -> tuple[Counter, list[dict], dict]:
    """(counts per class, one row per call, each call's plan now) of a capture's observations, planned for ``gpu``
    (default: each call's own); ``before``: the plans a ``--save`` recorded; ``again``: ``rechecked``'s calls."""
    counts: Counter = Counter()
    rows, plans = [], {}
    for i, ob in enumerate(obs):
        call = ob.call if gpu is None else dataclasses.replace(ob.call, gpu=gpu)
        plan = select(call)
        k = key(ob, i)
        plans[k] = dict(modelled=bool(plan.modelled), numerics=numerics(plan), family=plan.family)
        if before is not None:
            same = before[k]["numerics"] == plans[k]["numerics"]
        else:  # the capture-time plan as the capture names it: its family (kernel, split count, reduction)
            same = not ob.planned or ob.planned == plan.family
        if not same:
            grid = ob.main_grid
            agrees = compare_launch(call, ob.kernels, grid, plan).agrees
            cls = "changed" + ("-launch-agrees" if agrees else "-launch-differs" if agrees is False else "-unknown")
            seen = (again or {}).get(_launch_key(ob))
            if agrees and seen is not None and seen[2] == plan.family and seen[1] == bool(plan.modelled):
                cls = ("exact" if plan.modelled else "flagged-exact") if seen[0] else \
                    ("silent" if plan.modelled else "flagged-differ")  # the re-check's bits, same launch and plan
        elif ob.bits_match:
            cls = "exact" if plan.modelled else "flagged-exact"
        else:
            cls = "silent" if plan.modelled else "flagged-differ"
        counts[cls] += 1
        rows.append(dict(cls=cls, record=call_record(call), kind=call.kind(), shape=(call.b, call.M, call.N, call.K),
                         modelled=plan.modelled,
                         reason=plan.reason, site=ob.site[:60], kernel=_gemm_kernel(ob.kernels)[:70]))
    return counts, rows, plans


def by_tokens(rows: list[dict], steps_path: str) -> dict:
    """The classes per token count: the capture's calls split into the steps of ``steps_path`` (check_training.py's
    JSON lines, in the order the steps ran), each step's ``calls`` calls in turn."""
    with open(steps_path) as fh:
        steps = [json.loads(line) for line in fh if line.startswith("{") and '"tokens"' in line]
    tokens = [s["tokens"] for s in steps for _ in range(s["calls"])]
    if len(tokens) != len(rows):
        raise SystemExit(f"{steps_path}: its steps hold {len(tokens)} calls, the capture {len(rows)}")
    out: dict = {}
    for t, r in zip(tokens, rows):
        out.setdefault(str(t), Counter())[r["cls"]] += 1
    return {t: dict(c) for t, c in out.items()}


def plans_at_rev(captures: list[str], gpu: str | None, rev: str) -> dict:
    """Each capture's plans under the launch tables and GPU manifest of git revision ``rev`` (the bit table,
    ``h100_measured.json``, is the installed one: folds do not change it)."""
    import subprocess
    import tempfile

    from tcnumerics.library import gpus, launches

    lib = "src/tcnumerics/library"
    manifest = json.loads(subprocess.run(["git", "show", f"{rev}:{lib}/gpus.json"], capture_output=True, check=True,
                                         text=True).stdout)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        gpus.set_manifest(manifest)
        for key, entry in manifest["models"].items():
            if entry.get("launches"):
                path = os.path.join(tmp, entry["launches"])
                with open(path, "wb") as fh:
                    fh.write(subprocess.run(["git", "show", f"{rev}:{lib}/{entry['launches']}"], capture_output=True,
                                            check=True).stdout)
                launches.set_table(key, path)
        try:
            for path in captures:
                out[path] = classify(load(path), gpu, None)[2]
        finally:
            gpus.set_manifest(None)
            for key in manifest["models"]:
                launches.set_table(key, None)
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("captures", nargs="+", help="self-check captures (.json.gz) or site summaries (check_<gpu>.json)")
    ap.add_argument("--gpu", default=None, help="plan the calls for this GPU model (default: the capture's)")
    ap.add_argument("--before", default=None, help="a --save file written before a fold")
    ap.add_argument("--save", default=None, help="write each call's plan (modelled, numerics) here")
    ap.add_argument("--before-rev", default=None, metavar="REV", help="instead of --before: plan the calls first with "
                    "the tables (launch tables, manifest) of git revision REV, then with the installed ones")
    ap.add_argument("--recheck", nargs="*", default=[], help="captures of check_calls.py: a changed call whose launch "
                    "and plan a re-check ran takes the re-check's bits")
    ap.add_argument("--steps", nargs="*", default=[], help="per capture, in order: check_training.py's JSON lines (one "
                    "per step, with its token count and number of calls): the classes per token count too")
    ap.add_argument("--as-captured", action="store_true", help="class each call by the plan the capture recorded (its "
                    "modelled flag at capture time), not by the tables now")
    ap.add_argument("--no-launch-frontier", action="store_true", help="plan as if models without bit captures had no "
                    "no-split frontier (tcnumerics.library.launch_frontier; what the tables alone say)")
    ap.add_argument("--by-reason", action="store_true", help="list the flagged calls by reason")
    ap.add_argument("--json", default=None, help="write the counts here")
    ap.add_argument("--changed-out", default=None, help="write the calls whose plan changed (call records, per GPU "
                    "model) here, for lab/device_models/check_calls.py to compare on the device")
    return ap


def _plans_for(before: dict, path: str) -> dict:
    """A --save file's plans of the capture ``path``: under its own path, else under the one saved path with the
    same file name (the file was saved from another folder: an unpacked archive, the tree before ``lab/``)."""
    if path in before:
        return before[path]
    same_name = [k for k in before if os.path.basename(k) == os.path.basename(path)]
    if len(same_name) != 1:
        raise KeyError(f"{path}: the --before file holds no plans of this capture (it has {', '.join(before)})")
    return before[same_name[0]]


def _as_captured(rows: list[dict], obs: list) -> Counter:
    """Each call's class by the capture's own verdict (its plan's claim then, its bits)."""
    for r, ob in zip(rows, obs):
        r["cls"] = (("exact" if ob.modelled else "flagged-exact") if ob.bits_match else
                    ("silent" if ob.modelled else "flagged-differ"))
    return Counter(r["cls"] for r in rows)


def summary(counts: Counter, rows: list[dict], obs: list) -> dict:
    """The counts of one capture, with the fractions of bit-exact and flagged-but-exact calls and the flags."""
    n = len(obs)
    exact = counts["exact"] + counts["flagged-exact"]
    return dict(counts=dict(counts), calls=n, exact_fraction=round(exact / n, 4),
                flagged_exact_fraction=round(counts["flagged-exact"] / n, 4),
                flagged_now=sum(1 for r in rows if not r["modelled"]),
                flagged_at_capture=sum(1 for ob in obs if ob.modelled is False),
                claimed_over_differing_bits=sum(1 for r, ob in zip(rows, obs) if r["modelled"] and
                                                ob.bits_match is False))


def _print(path: str, rep: dict, rows: list[dict], by_reason: bool) -> None:
    c, n = rep["counts"], rep["calls"]
    print(f"{path}: {n} calls; " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) +
          f"; bit-exact {rep['exact_fraction']:.1%}, flagged-but-exact {rep['flagged_exact_fraction']:.1%}; flagged "
          f"now {rep['flagged_now']} (at capture {rep['flagged_at_capture']}); modelled now where the capture's bits "
          f"differed: {rep['claimed_over_differing_bits']}")
    for t, ct in rep.get("by_tokens", {}).items():
        print(f"  T = {t}: " + ", ".join(f"{k} {v}" for k, v in sorted(ct.items())))
    if by_reason:
        def short(r):
            return re.sub(r"\d+", "#", r["reason"])[:150]
        groups = Counter((r["cls"], r["kind"], short(r)) for r in rows if r["cls"] != "exact")
        for (cls, kind, reason), m in groups.most_common():
            ex = next(r for r in rows if (r["cls"], r["kind"], short(r)) == (cls, kind, reason))
            print(f"  {m:4d} {cls:15s} {kind:40s} e.g. {ex['shape']} {ex['kernel'][:50]}\n       {reason}")


def _write(path: str | None, data, indent: int | None = 1) -> None:
    if path:
        with open(path, "w") as fh:
            json.dump(data, fh, indent=indent)


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if a.no_launch_frontier:
        from tcnumerics.library import gpus, launch_frontier

        launch_frontier.applies = lambda c: False
        gpus.tables_changed()
    try:
        before = None
        if a.before:
            with open(a.before) as fh:
                before = json.load(fh)
        elif a.before_rev:
            before = plans_at_rev(a.captures, a.gpu, a.before_rev)
        report, saved, changed = {}, {}, {}
        again = rechecked(a.recheck)
        for path in a.captures:
            obs = load(path)
            counts, rows, plans = classify(obs, a.gpu, _plans_for(before, path) if before else None, again)
            if a.as_captured:
                counts = _as_captured(rows, obs)
            elif before is None:
                counts["plan-differs-from-capture"] = sum(1 for ob, p in zip(obs, plans.values()) if ob.modelled
                                                          is not None and bool(ob.modelled) != p["modelled"])
            report[path], saved[path] = summary(counts, rows, obs), plans
            if a.steps:
                report[path]["by_tokens"] = by_tokens(rows, a.steps[a.captures.index(path)])
            for r in rows:
                if r["cls"].startswith("changed"):
                    changed.setdefault(r["record"].get("gpu") or a.gpu or "", []).append(r["record"])
            _print(path, report[path], rows, a.by_reason)
    except (OSError, ValueError, KeyError) as exc:
        print(f"flag_precision: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    _write(a.save, saved, None)
    _write(a.changed_out, changed)
    _write(a.json, report)
    return 1 if any(r["counts"].get("silent") for r in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
