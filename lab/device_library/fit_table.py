"""Identify each captured call's kernel structure on the CPU and write the library's measured table.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/fit_table.py CAPTURE [CAPTURE ...] \
        [--from-table] [--cache lab/data/fit_cache.json.gz] [-o src/tcnumerics/library/h100_measured.json]

One table from every capture given (the op survey, held-out captures folded in later; each an ``.npz``
from ``export_survey.py``).  Call ids restart in every capture: the cache keys records ``capture#id``
and the table keys entries by call kind (``Call.key()``), each entry listing its ``sources``
(``capture#id``).  A call kind measured more than once -- in one capture or in two -- is verified only
when every measurement identified the same structure.  ``--from-table`` keeps the entries of the
table's captures and fits only the records of captures new to it (quick: folding a capture in).

For every captured call it picks the candidate structures its recorded kernels allow
(nvjet: wgmma chain, split-K slice counts S searched from the fitted guess outwards; FP8:
fast or promoted accumulation; TF32 xmma: RNE inputs, k8 chain; FFMA kernels: sequential FMA),
scores them on the captured sample (a 6 x 6 sub-sample first, then every captured output) and
records the first that reproduces every output bit.  Calls with no reproducing candidate are
written as not verified, with the reason.  The no-split frontier is the (output tiles, K)
points of measured unsplit and split nvjet calls.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import sys
import time

import numpy as np

from replay_survey import load, operands

import tcnumerics as tc
from tcnumerics.library.calls import Call, call_from_record, epilogue_of
from tcnumerics.library.selection import WGMMA
from tcnumerics.library.structure import Structure, run


SEED: dict = {}
BUDGET_S = 40.0  # seconds of candidate search per call (--budget)


def call_of(c: dict) -> Call:
    """The library's Call for a survey record (full shape, layout as torch passed it): ``calls.call_from_record``."""
    return call_from_record(c)


def score(c: dict, s: Structure, ops: dict, sub: int | None = None) -> int:
    exp = ops["expected"]
    bad = 0
    for b in range(len(ops["batches"])):
        A, B, e = ops["A"][b], ops["B"][b], exp[b]
        C = ops["C"][b] if ops["C"] else None
        bias, sa, sb = ops["bias"], ops["scale_a"], ops["scale_b"]
        if sub:
            A, B, e = A[:sub], B[:, :sub], e[:sub, :sub]
            C = None if C is None else C[:sub, :sub]
            bias = None if bias is None else bias[:sub]
            if sa is not None and np.ndim(sa):
                sa, sb = sa[:sub], sb[..., :sub]
        if s.epilogue == "bias" and bias is None and C is not None:
            bias = C[0]
        got = run(s, A, B, out_format=c["out"], alpha=float(c.get("alpha", 1)), beta=float(c.get("beta", 0)),
                  C=C, bias=bias, scale_a=sa, scale_b=sb)
        bad += int((tc.get_format(c["out"]).bits_of(np.asarray(got)) != e).sum())
    return bad


def cutlass_structure(fam: str, fmt: str, names: str, epi: str) -> Structure:
    """CUTLASS 2.x BF16/FP16 kernels: mma.sync k8 (``s1688``) or wmma/k16 groups, the partial K-tile first
    (K-tile 32 for s1688, FPRev-probed at 96x80x333 on the H200; 64 for FP16 wmma, 128 for BF16 wmma)."""
    if "s1688" in names:
        return Structure(fam, instruction=f"hopper.mma.m16n8k8.f32.{'bf16.bf16' if fmt == 'bf16' else 'f16.f16'}.f32",
                         epilogue=epi, k_tile=32, k_residue="first")
    tile = 128 if ("wmma" in names and fmt == "bf16" and "cutlass_80" in names) else 64
    return Structure(fam, instruction=WGMMA[fmt], epilogue=epi, k_tile=tile if "wmma" in names else None,
                     k_residue="first")


def candidates(c: dict, call: Call):
    """(family, base structure, split granule, split?) for a survey record, most likely structure first."""
    ks = [k for k in c["kernels"] if "Mem" not in k and "elementwise" not in k]
    names = " ".join(ks)
    split = any(t in names for t in ("splitKreduce", "splitK", "split_k", "execute_split", "segment_k_on"))
    fam = re.sub(r"<.*|\(.*|void |cutlass::Kernel2", "", ks[0])[:60] if ks else "?"
    if "cutlass" in names:
        m = re.search(r"(cutlass_\w+?)(>|::|\()", names)
        fam = m.group(1) if m else fam
    epi = epilogue_of(call)
    for tag in ("_bias_", "_badd_", "_bx_"):
        if tag in names:
            epi = {"_bias_": "bias", "_badd_": "badd", "_bx_": "bx"}[tag]
    if call.op == "scaled_mm":
        inst = f"hopper.wgmma.m64n8k32.f32.{call.fmt}.{call.b_fmt}"
        base = Structure(fam, instruction=inst, promote_every=128 if "algo2" in names else None)
        if call.scales == "blockwise":
            base = base.with_(promote_every=128)
        return fam, base, 128, split
    if call.fmt == "fp32":
        if "s1688gemm" in names:  # CUTLASS TF32: RNE operands (cuBLAS 13.1), mma k8, K-tile from the name
            m = re.search(r"s1688gemm_\d+x\d+_(\d+)x\d+", names)
            kt = int(m.group(1)) if m else 32
            # split-K slices: ceil(K / S) rounded up to 4 elements (CUTLASS's 128-bit alignment for FP32), as SIMT
            return fam, Structure(fam, instruction="hopper.mma.m16n8k8.f32.tf32.tf32.f32", input_rounding="rne",
                                  k_tile=kt, k_residue="first", epilogue=epi), 4, split
        if "tf32" in names:
            inst = WGMMA["tf32"] if "sm90" in names else "hopper.mma.m16n8k8.f32.tf32.tf32.f32"
            return fam, Structure(fam, instruction=inst, input_rounding="rne", epilogue=epi), 8, split
        return ffma_candidate(c, fam, names, epi, split)
    if not ks[0].startswith("nvjet"):  # CUTLASS epilogues: one linear combination in FP32 (no badd kernels)
        base = cutlass_structure(fam, call.fmt, names, "bx" if epi == "badd" else epi)
        if "cutlass" in names and in_place_split(c):  # in-place split-K, partial sums in the output type
            return fam, base.with_(split_reduce="serial"), base.k_tile or 32, True
        if re.search(r"splitKreduce_kernel<\d+, \d+, int, (__nv_bfloat16|__half),", names):
            base = base.with_(split_partial_format=call.out)  # the reduce kernel reads BF16/FP16 partials
        return fam, base, 8, split
    return fam, Structure(fam, instruction=WGMMA[call.fmt], epilogue=epi), 64, split


def in_place_split(c: dict) -> bool:
    """A Memset (of the split-K semaphores) before one GEMM kernel and no reduce kernel: in-place split-K."""
    return any(k.startswith("Memset") for k in c["kernels"]) and not any("splitKreduce" in k for k in c["kernels"])


def ffma_candidate(c: dict, fam: str, names: str, epi: str, split: bool):
    """FP32 FFMA kernels (H100 survey): ``sm80_xmma_gemm_f32f32`` split-K deals its 8-element K-tiles
    round-robin to the slices (``execute_split_k_kernel``, or in place after a Memset); CUTLASS SIMT
    ``sgemm`` splits K into contiguous slices of ``ceil(K / S)`` rounded up to 4 (+ ``splitKreduce``)
    or, in place after a Memset, to 32 elements, where C / the bias joins the first slice."""
    base = Structure(fam, instruction=None, epilogue=epi)
    in_place = in_place_split(c)
    if in_place:
        base = base.with_(split_reduce="serial")
    if "xmma" in names:
        return fam, base.with_(k_tile=8), 8, split or in_place
    return fam, base, 32 if in_place else 4, split or in_place


def split_tries(c: dict, call: Call, base: Structure, granule: int):
    """Split-K structures to try, the fitted guess's neighbourhood first (slice counts up to 1024)."""
    K = call.K
    if base.instruction is None and base.k_tile == 8 and "xmma" in base.family:  # interleaved K-tiles
        tiles = -(-K // 8)
        return [base.with_(split_interleave=S) for S in range(2, min(tiles, 256) + 1)]
    seen, out = set(), []
    for S in range(2, 1025):
        per = -(-(-(-K // S)) // granule) * granule
        if per >= K or per in seen:
            continue
        seen.add(per)
        out.append(base.with_(split_k=(per,) * -(-K // per)))
    tiles = -(-K // 64)
    ctas = math.ceil(call.M / 64) * math.ceil(call.N / 64)
    guess = max(2, min(-(-tiles // 22), 132 // max(ctas, 1)))
    out.sort(key=lambda s: abs(len(s.split_k) - guess) if granule >= 64 else 0)
    return out + [base]  # a split kernel whose slices turned out empty


def fit_one(c: dict, data, cache: dict, key: str | None = None) -> dict:
    """The fitted entry of record ``c`` (cached under ``key``: ``capture#id``, see ``fit_key``)."""
    key = key or str(c["id"])
    if key in cache:
        return cache[key]
    call = call_of(c)
    ops = operands(c, data)
    fam, base, tile, split = candidates(c, call)
    kernel = " | ".join(k[:80] for k in c["kernels"] if "Mem" not in k and "elementwise" not in k)
    entry = dict(key=call.key(), family=fam, kernel=kernel, verified=False, split=None)
    tries = [base] if not split else split_tries(c, call, base, tile)
    if split and "s1688gemm" in fam and call.fmt == "fp32" and base.k_tile:
        # TF32 s1688 slices: whole K-tiles (held-out 32x2560x10240: 13 x 800, 2x5120x5120: 6 x 864), or
        # ceil(K / S) rounded to 4 at the small shapes of the survey (12x20x36, 127x127x4097)
        tiled = split_tries(c, call, base, base.k_tile)[:-1]
        seen = {t.split_k for t in tiled}
        tries = tiled + [t for t in tries if t.split_k not in seen]
    seeded = SEED.get(key)
    if split and seeded:  # a slice count found earlier (e.g. by a slower exhaustive search): try it first
        tries = [t for t in tries if len(t.split_k or ()) == seeded or t.split_interleave == seeded] + tries
    budget = time.time() + BUDGET_S
    for s in tries:
        if time.time() > budget:
            break
        try:
            if score(c, s, ops, sub=3) or score(c, s, ops, sub=6):
                continue
            if score(c, s, ops) == 0:
                entry.update(verified=True, split=list(s.split_k) if s.split_k else None,
                             split_interleave=s.split_interleave, split_reduce=s.split_reduce, k_tile=s.k_tile)
                break
        except Exception as exc:  # a structure gemm refuses: record and stop trying
            entry["reason"] = f"candidate failed: {exc}"[:200]
            break
    if not entry["verified"]:
        entry.setdefault("reason", f"no candidate structure reproduced the capture ({fam}"
                         + (", split-K slice count not found" if split else "") + ")")
    cache[key] = entry
    return entry


def call_class(c: dict) -> str:
    """The frontier class of a survey call: half (BF16/FP16), fp8, tf32 or fp32."""
    if c["op"] == "scaled_mm":
        return "fp8"
    if c["fmt"] == "fp32":
        return "fp32" if c["prec"] == "highest" else "tf32"
    return "half"


PLAIN = {"half": ("nvjet",), "fp8": ("nvjet",), "tf32": ("sm90_xmma", "sm80_xmma"), "fp32": ("sm80_xmma",)}
SPLIT_TAGS = ("splitK", "split_k", "execute_split", "segment_k_on")


def frontier(items, cache: dict) -> dict:
    """Per class, the (128x128 output tiles x batch, K) points of calls that ran the class's plain family
    unsplit and replayed bit-exactly ("plain"), and of every other call ("other"); ``items`` are
    ``(capture tag, record)`` pairs of every capture the table is built from."""
    out = {k: {"plain": [], "other": []} for k in PLAIN}
    for tag, c in items:
        if "error" in c:
            continue
        cls = call_class(c)
        names = " ".join(k for k in c["kernels"] if "Mem" not in k and "elementwise" not in k)
        call = call_of(c)
        t = math.ceil(call.M / 128) * math.ceil(call.N / 128) * call.b
        if cls == "half" and (call.K % 8 or call.N % 8 or min(call.N, call.K) < 8
                              or (call.op in ("matmul", "addmm") and call.M % 8 and call.M < 16)):
            continue  # misaligned, tiny or small odd M: the selection sends these to the fallback branch first
        entry = cache.get(fit_key(tag, c), {})
        plain = (names.startswith(PLAIN[cls]) and not any(tag_ in names for tag_ in SPLIT_TAGS)
                 and entry.get("verified", False)
                 and not entry.get("split") and not entry.get("split_interleave"))
        out[cls]["plain" if plain else "other"].append([t, call.K])
    for cls in out.values():  # one point per (tiles, K): several captures may hold the same point
        for side in cls:
            cls[side] = sorted({tuple(p): p for p in cls[side]}.values())
    return out


# --- several captures: which file each fitted record came from ---------------------------------------

LEGACY_CAPTURE = "hopper_op_survey_h100"  # tables written before provenance was kept were fitted on the survey only


def capture_tag(path: str) -> str:
    """A capture's name in cache keys and table provenance: its file name without ``.npz`` (or its directory's).

    >>> capture_tag("vectors/library/hopper_op_holdout_h100.npz")
    'hopper_op_holdout_h100'
    """
    return os.path.basename(os.path.normpath(path)).removesuffix(".npz")


def fit_key(tag: str, c: dict) -> str:
    """The fit cache's key of record ``c`` of capture ``tag``: call ids restart at 0 in every capture.

    >>> fit_key("hopper_op_holdout_h100", {"id": 7})
    'hopper_op_holdout_h100#7'
    """
    return f"{tag}#{c['id']}"


def load_captures(paths: list[str]) -> list[tuple[str, dict, object]]:
    """``(tag, index, arrays)`` per capture file, in the order given; two captures may not share a tag."""
    out, tags = [], set()
    for path in paths:
        tag = capture_tag(path)
        if tag in tags:
            raise SystemExit(f"fit_table: two captures named {tag!r} ({path}): cache keys and provenance "
                             "name captures by file name, rename one")
        tags.add(tag)
        index, data = load(path)
        out.append((tag, index, data))
    return out


def load_cache(path: str) -> dict:
    """The fit cache (``capture#id`` -> fitted entry); caches of the one-capture format are refused."""
    if not os.path.exists(path):
        return {}
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as fh:
        cache = json.load(fh)
    old = [k for k in cache if "#" not in k]
    if old:
        raise SystemExit(f"fit_table: {path} keys calls by id only ({len(old)} entries, e.g. {old[0]!r}): written "
                         "before captures were named in keys; delete it or pass another --cache")
    return cache


def save_cache(cache: dict, path: str) -> None:
    """Write the fit cache (gzip-compressed when ``path`` ends in ``.gz``)."""
    with (gzip.open(path, "wt") if path.endswith(".gz") else open(path, "w")) as fh:
        json.dump(cache, fh)


def entry_sources(e: dict) -> set:
    """The captures a table entry was measured in (tables without provenance: the survey)."""
    return {s.split("#")[0] for s in e.get("sources", [LEGACY_CAPTURE + "#"])}


def seed_from_table(items, cache: dict, table: dict, refit: str) -> None:
    """Cache entries from an existing table for the records whose call kind it holds *from the same capture*
    and whose kernels ``refit`` does not match (when the entry is not verified).  A record of a capture the
    entry was not measured in is fitted, so that two captures of one call kind are checked against each other."""
    calls = table["calls"]
    pattern = re.compile(refit) if refit else None
    for tag, c in items:
        names = " ".join(c["kernels"])
        key = call_of(c).key()
        if fit_key(tag, c) in cache or key not in calls or tag not in entry_sources(calls[key]) or (
                pattern and pattern.search(names) and not calls[key].get("verified")):
            continue  # fitted again: an unverified call of a family being identified, or a new capture
        e = {k: v for k, v in calls[key].items() if k != "sources"}
        cache[fit_key(tag, c)] = dict(e, key=key)


def check_table_captures(table: dict, tags: list[str]) -> None:
    """--from-table must be given every capture the table was built from: the table is rebuilt from them."""
    had = set(table.get("captures", {LEGACY_CAPTURE: {}}))
    missing = sorted(had - set(tags))
    if missing:
        raise SystemExit(f"fit_table: the table was built from {sorted(had)}; pass those captures too "
                         f"(missing {missing}) -- the table is rebuilt from the captures given")


STRUCTURE_FIELDS = ("instruction", "input_rounding", "promote_every", "k_tile", "k_residue", "epilogue", "split",
                    "split_interleave", "split_reduce", "split_partial_format")


def table_entry(c: dict, e: dict) -> dict:
    """The table's entry for record ``c`` fitted as ``e`` (cache entry): the structure's fields, kernel, reason."""
    fam, base, _, _ = candidates(c, call_of(c))
    entry = {k: e[k] for k in ("family", "split", "verified", "kernel", "reason") if k in e}
    entry.update(instruction=base.instruction, input_rounding=base.input_rounding,
                 promote_every=base.promote_every, k_tile=base.k_tile, k_residue=base.k_residue,
                 epilogue=base.epilogue)
    entry.update({k: e[k] for k in ("split_interleave", "k_tile") if e.get(k)})
    if base.split_reduce != "parallel":
        entry["split_reduce"] = base.split_reduce
    if base.split_partial_format:
        entry["split_partial_format"] = base.split_partial_format
    return entry


def same_structure(a: dict, b: dict) -> bool:
    """Two verified entries of one call kind that agree on every field the replay executes."""
    return a["verified"] and b["verified"] and all(a.get(k) == b.get(k) for k in STRUCTURE_FIELDS)


def build_calls(items, cache: dict) -> dict:
    """call kind -> table entry over every fitted record of every capture, with ``sources`` (``capture#id``
    of each record of that kind).  A call kind measured more than once (other operands, another capture) is
    verified only when every measurement verified the same structure."""
    calls: dict[str, dict] = {}
    for tag, c in items:
        e = cache.get(fit_key(tag, c))
        if e is None:
            continue
        entry = table_entry(c, e)
        key = call_of(c).key()
        old = calls.get(key)
        if old is None:
            calls[key] = dict(entry, sources=[fit_key(tag, c)])
            continue
        if old["verified"] and not same_structure(old, entry):
            old.update(verified=False, reason=f"{fit_key(tag, c)}: {entry['reason']}" if entry.get("reason") else
                       f"two measurements of this call kind disagree on the structure ({old['sources'][0]} "
                       f"{describe_split(old)}, {fit_key(tag, c)} {describe_split(entry)})")
        old["sources"].append(fit_key(tag, c))
    return calls


def describe_split(e: dict) -> str:
    """A table entry's split in a few words (for disagreement reasons)."""
    if e.get("split"):
        return f"split {len(e['split'])} x {e['split'][0]}"
    if e.get("split_interleave"):
        return f"interleaved split x{e['split_interleave']}"
    return f"unsplit {e.get('family', '')}"[:60]


def provenance(captures, paths: list[str]) -> tuple[str, dict]:
    """The table's provenance line and per-capture record (file, calls, environment, role)."""
    env = captures[0][1]["env"]
    where = dict(zip([t for t, _, _ in captures], paths))  # as given: repo-relative for the committed captures
    info = {tag: {"file": where[tag], "calls": sum("error" not in c for c in index["records"]),
                  "torch": index["env"].get("torch"), "cublas": index["env"].get("nvidia-cublas"),
                  "device": index["env"].get("device"), "role": "training data (fitted into this table)"}
            for tag, index, _ in captures}
    line = (f"lab/device_library/fit_table.py over {len(captures)} capture(s) on an NVIDIA H100, "
            f"{env.get('torch')}, cuBLAS {env.get('nvidia-cublas')}: "
            + ", ".join(f"{tag} ({v['calls']} calls)" for tag, v in info.items())
            + "; every capture listed is training data (an entry's 'sources' names the capture#id it came from)")
    return line, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="+", help="capture files (.npz from export_survey.py) or survey directories")
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                    "fit_cache.json.gz"),
                    help="fitted entries per capture#id (resumable; .gz: compressed)")
    ap.add_argument("-o", "--out", default="src/tcnumerics/library/h100_measured.json")
    ap.add_argument("--budget", type=float, default=40.0, help="seconds of split-K search per call")
    ap.add_argument("--seed", default="", help="JSON {capture#id (or an id of the first capture): split count} "
                                               "to try first")
    ap.add_argument("--only-cache", action="store_true", help="write the table from the cache, fit nothing new")
    ap.add_argument("--refit", default="", help="with --from-table: regex of kernel names whose unverified calls "
                                                "are fitted again")
    ap.add_argument("--from-table", action="store_true",
                    help="start from the current table (-o): every record of a capture the table was built from "
                         "keeps its entry unless --refit matches its kernels; records of new captures are fitted")
    args = ap.parse_args()
    captures = load_captures(args.captures)
    global BUDGET_S
    BUDGET_S = args.budget
    first = captures[0][0]
    if args.seed:
        SEED.update({(k if "#" in k else f"{first}#{k}"): int(v) for k, v in json.load(open(args.seed)).items()})
    cache = load_cache(args.cache)
    t0 = time.time()
    items = [(tag, c) for tag, index, _ in captures for c in index["records"] if "error" not in c]
    data_of = {tag: data for tag, _, data in captures}
    if args.from_table:
        with open(args.out) as fh:
            table = json.load(fh)
        check_table_captures(table, [t for t, _, _ in captures])
        seed_from_table(items, cache, table, args.refit)
    todo = [(tag, c) for tag, c in items if fit_key(tag, c) not in cache and not args.only_cache]
    todo.sort(key=lambda tc_: ("splitK" in " ".join(tc_[1]["kernels"]),
                               tc_[1].get("b", 1) * tc_[1]["M"] * tc_[1]["N"] * tc_[1]["K"]))
    print(f"{len(items)} records in {len(captures)} capture(s); {len(items) - len(todo)} from the table or cache, "
          f"{len(todo)} to fit", flush=True)
    for n, (tag, c) in enumerate(todo):
        fit_one(c, data_of[tag], cache, fit_key(tag, c))
        if n % 25 == 0:
            save_cache(cache, args.cache)
            done = [cache[fit_key(t, r)] for t, r in todo[:n + 1]]
            print(f"{n + 1}/{len(todo)} fitted, {time.time() - t0:.0f} s; verified so far "
                  f"{sum(v['verified'] for v in done)}/{len(done)}", flush=True)
    save_cache(cache, args.cache)
    calls = build_calls(items, cache)
    line, info = provenance(captures, args.captures)
    table = {"provenance": line, "captures": info, "calls": calls, "frontier": frontier(items, cache)}
    with open(args.out, "w") as fh:
        json.dump(table, fh, indent=0, sort_keys=True)
    v = sum(e["verified"] for e in calls.values())
    print(f"{len(calls)} call kinds, {v} verified, {len(calls) - v} not; {time.time() - t0:.0f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
