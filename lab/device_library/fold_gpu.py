"""Fold one GPU model's survey (``lab/run.sh gpu-survey``) into its launch table, and measure where it agrees with another's.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/fold_gpu.py --gpu h200 --out-dir H200_OUT \
        [--reference h100] [--reference-out H100_OUT] [--captures SELFCHECK.json.gz ...] [--write]

``--out-dir``: what the device call left in ``$OUT`` (``env.json``, ``<set>.npz`` per dense set, ``bits.tgz``,
``autograd_check.json``).  ``--captures``: self-check capture files (``tcnumerics.library.check.write_capture``) whose
calls ran on this GPU model.  Every launch (dense sets, the bit sets' launches, the captures' launches with a grid)
goes into one table (``export_kernels.merge``: a shape measured twice must agree); each launch with a counterpart in
the reference model's table (the installed one, plus ``--reference-out``: the reference model's own run of the same
script) is compared: the same GEMM kernels and grid (``same_launch``), or failing that the same numerics -- the
structures ``selection.plan_from_launch`` builds from the two launches, both verified, equal (``same_structure``).
Bits: the bit sets both models ran (holdout11: the committed H100 capture; train_bits: ``--reference-out``) are
compared output by output.

Without ``--write`` it only reports.  With it: ``src/tcnumerics/library/<gpu>_launches.npz``, the model's entry in
``library/gpus.json`` (``kinds``: those its table holds; ``agrees_with``: the counts per kind -- a kind may use the
reference's tables only where every compared launch had the same numerics, at least ``gpus.MIN_AGREEING`` of them),
the bit captures as ``vectors/library/hopper_op_<set>_<gpu>.npz``, and the section between the markers
``<!-- fold_gpu GPU -->`` and ``<!-- /fold_gpu GPU -->`` of ``docs/gemm.md``: every number in it comes from this run.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import gzip
import json
import os
import tarfile
import tempfile
from collections import Counter, defaultdict
from functools import lru_cache

import numpy as np

import export_kernels
from tcnumerics.library import gpus, launches
from tcnumerics.library.calls import call_from_kind
from tcnumerics.library.selection import plan_from_launch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LIB = os.path.join(ROOT, "src", "tcnumerics", "library")
BIT_SETS = ("train_bits", "holdout11")  # the bit sets every model's run captures (the H100's adds longk2, holdout12)
MAX_EXAMPLES = 3  # example shapes per differing (kind, reference launch, own launch) group


# --- reading a run ------------------------------------------------------------------------------------------

def read_env(out_dir: str, gpu: str) -> dict:
    """The run's ``env.json``; refuses a run made on another GPU model."""
    path = os.path.join(out_dir, "env.json")
    if not os.path.exists(path):
        raise SystemExit(f"{path}: missing (lab/run.sh gpu-survey writes it); is {out_dir} a gpu-survey output?")
    with open(path) as fh:
        env = json.load(fh)
    seen = gpus.model_key(env.get("device", ""))
    if seen != gpu:
        raise SystemExit(f"{out_dir}: the run's device is {env.get('device')!r} ({seen}), not {gpu!r}")
    return env


def unpack_bits(out_dir: str, into: str) -> str | None:
    """``bits.tgz`` unpacked into ``into`` (its ``bits/`` folder), or None where the run has none."""
    path = os.path.join(out_dir, "bits.tgz")
    if not os.path.exists(path):
        return None
    with tarfile.open(path) as tf:
        for m in tf.getmembers():  # plain files and folders under bits/ only
            if not (m.isfile() or m.isdir()) or not m.name.startswith("bits") or ".." in m.name.split("/"):
                raise SystemExit(f"{path}: unexpected member {m.name!r}")
        tf.extractall(into)
    return os.path.join(into, "bits")


def columns(rows: list[tuple], sig_index: dict[str, int]) -> dict:
    """Row tuples (kind, M, N, K, b, signature, CTAs, grid z) as ``export_kernels.merge``'s columns."""
    rows = sorted(rows)
    return dict(kind=np.array([r[0] for r in rows], dtype=object), M=np.array([r[1] for r in rows], np.int64),
                N=np.array([r[2] for r in rows], np.int64), K=np.array([r[3] for r in rows], np.int64),
                b=np.array([r[4] for r in rows], np.int64),
                sig=np.array([sig_index.setdefault(r[5], len(sig_index)) for r in rows], np.int64),
                ctas=np.array([r[6] for r in rows], np.int64), gz=np.array([r[7] for r in rows], np.int64))


def capture_rows(paths: list[str], gpu: str) -> tuple[list[tuple], int]:
    """Launch rows of self-check capture files' observations on ``gpu`` with a grid; and how many were skipped."""
    from tcnumerics.library.check import read_capture

    rows, skipped = [], 0
    for p in paths:
        _, obs = read_capture(p)
        for ob in obs:
            launch = ob.launch()
            c = ob.call
            if c.gpu != gpu or launch is None or not launches.fits(c.M, c.N, c.K, c.b):
                skipped += 1
                continue
            rows.append((c.kind(), c.M, c.N, c.K, c.b, " | ".join(k[:export_kernels.MAX_NAME] for k in ob.kernels),
                         launch.ctas, launch.grid_z))
    return rows, skipped


def bit_sets(bits_dir: str | None) -> list[str]:
    """The bit sets a run captured (``bits/<set>/index.json``), sorted."""
    if not bits_dir or not os.path.isdir(bits_dir):
        return []
    return sorted(n for n in os.listdir(bits_dir) if os.path.exists(os.path.join(bits_dir, n, "index.json")))


def survey_rows(surveys: list[str]) -> tuple[list[tuple], dict]:
    """Launch rows of kernel-survey result files given as ``SET=PATH`` (``kernel_survey.py`` / ``graph_survey.py``
    output of a named call list), and the count per file."""
    rows, found = [], {}
    for spec in surveys:
        name, sep, path = spec.partition("=")
        if not sep or not os.path.exists(path):
            raise SystemExit(f"--surveys {spec!r}: expected SET=PATH of an existing kernel-survey result file")
        got = export_kernels.rows_of(path, name)
        found[f"{name} ({os.path.basename(path)})"] = len(got)
        rows += got
    return rows, found


def run_launches(out_dir: str, bits_dir: str | None, captures: list[str], gpu: str, sig_index: dict,
                 held_out: tuple[str, ...] = (), surveys: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """Every launch of a run (and of ``captures`` and ``surveys``), merged: (columns, what came from where).  The
    launches of the bit sets named in ``held_out`` are left out: a held-out set tests the table, it does not feed it
    (until its first replay is recorded)."""
    from train_calls import ALL_DENSE_SETS

    parts, found = [], {}
    for name in ALL_DENSE_SETS:
        if glob.glob(os.path.join(out_dir, f"{name}.npz")) + glob.glob(os.path.join(out_dir, f"{name}.part*.npz")):
            part = export_kernels.dense_rows(out_dir, name, sig_index)
            found[name] = len(part["M"])
            parts.append(part)
    rows, from_surveys = survey_rows(list(surveys))
    found.update(from_surveys)
    for name in bit_sets(bits_dir):
        path = os.path.join(bits_dir or "", "launches", f"graph_{name}.json.gz")
        if os.path.exists(path):
            if name in held_out:
                found[f"{name} (launches, held out: not folded)"] = 0
                continue
            got = export_kernels.rows_of(path, name)
            found[f"{name} (launches)"] = len(got)
            rows += got
    cap, skipped = capture_rows(captures, gpu)
    if captures:
        found["captures"], found["captures skipped (no grid, another GPU or too large)"] = len(cap), skipped
    rows += cap
    if rows:
        parts.append(columns(rows, sig_index))
    if not parts:
        raise SystemExit(f"{out_dir}: no dense set, bit-set launches or captures to fold")
    return export_kernels.merge(parts, sig_index), found


# --- comparing with the reference model ---------------------------------------------------------------------

@lru_cache(maxsize=None)
def gemm_part(signature: str) -> tuple[str, ...]:
    """What the numerics depend on: every activity but torch's copy of C (a Memcpy or an elementwise kernel)."""
    return tuple(n for n in signature.split(" | ") if not n.startswith(("Memcpy", "void at::native")))


fits = launches.fits_keys  # which shapes a launch table can store (arrays)


def table_rows(t: dict, sig_index: dict[str, int]) -> dict:
    """Every launch of a loaded launch table as ``merge`` columns (runs expanded along M; signatures interned)."""
    remap = np.array([sig_index.setdefault(sg, len(sig_index)) for sg in t["signatures"]], np.int64)
    parts = []
    for kind in t["kinds"]:
        r = t["kinds"][kind]
        N0, K0, b0, first = launches.unpack_keys(r.keys)
        n = (r.m_last - first) // r.m_step + 1
        i = np.repeat(np.arange(len(r.keys)), n)
        M = first[i] + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)) * r.m_step[i]
        b, K, N = b0[i], K0[i], N0[i]
        parts.append(dict(kind=np.full(len(i), kind, dtype=object), M=M, N=N, K=K, b=b, sig=remap[r.sig[i]],
                          ctas=np.asarray(r.ctas(i, M, N, b), np.int64), gz=r.grid_z[i].astype(np.int64)))
    return {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}


def table_lookup(t: dict, kind: str, M, N, K, b) -> tuple[np.ndarray, list, np.ndarray, np.ndarray]:
    """Vectorised ``launches.launch_in`` over arrays of shapes of one kind: (found, signature texts, CTAs, grid z)."""
    n = len(M)
    sigs, ctas, gz, found = [None] * n, np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool)
    runs = t.get("kinds", {}).get(kind)
    if runs is None or n == 0:
        return found, sigs, ctas, gz
    ok = fits(M, N, K, b)
    key = np.zeros(n, np.int64)
    key[ok] = launches.pack_keys(N[ok], K[ok], b[ok], M[ok])
    i = np.searchsorted(runs.keys, key, side="right") - 1
    iv = np.clip(i, 0, None)
    mbits = launches.KEY_BITS.M
    first = runs.keys[iv] & ((1 << mbits) - 1)
    found = ok & (i >= 0) & ((runs.keys[iv] >> mbits) == (key >> mbits)) & (M <= runs.m_last[iv]) & \
        ((M - first) % runs.m_step[iv] == 0)
    idx = np.flatnonzero(found)
    ctas[idx] = runs.ctas(iv[idx], M[idx], N[idx], b[idx])
    gz[idx] = runs.grid_z[iv[idx]]
    for j in idx:
        sigs[j] = t["signatures"][runs.sig[iv[j]]]
    return found, sigs, ctas, gz


def _short(signature: str, call) -> str:
    """The main kernel and what its grid says (nvjet: S; others: grid z), for the report."""
    L = launches.Launch(tuple(signature.split(" | ")), 0, 1)
    return L.main.replace("void ", "").replace("cutlass::Kernel2<", "").split("(")[0][:64]


def _describe(signature: str, ctas: int, gz: int, call) -> str:
    L = launches.Launch(tuple(signature.split(" | ")), int(ctas), int(gz))
    if L.main.startswith("nvjet"):
        S = launches.nvjet_split_count(L, call)
        return f"{_short(signature, call)} (S = {S if S else '?'})"
    return f"{_short(signature, call)} (grid z = {gz})" + (" in place" if L.in_place else "")


def same_numerics(call, sig_a: str, ctas_a: int, gz_a: int, sig_b: str, ctas_b: int, gz_b: int) -> bool:
    """Both launches give a verified structure, and the same one (the label aside)."""
    pa = plan_from_launch(call, launches.Launch(tuple(sig_a.split(" | ")), int(ctas_a), int(gz_a)))
    pb = plan_from_launch(call, launches.Launch(tuple(sig_b.split(" | ")), int(ctas_b), int(gz_b)))
    if pa is None or pb is None or not (pa.modelled and pb.modelled):
        return False
    return pa.structure.with_(family="") == pb.structure.with_(family="")


def compare(own: dict, signatures: list[str], reference: list[dict], ref_gpu: str) -> tuple[dict, dict]:
    """Per kind: compared, same_launch, same_structure; and the differing groups (kind, reference launch, own
    launch) -> count and example shapes.  ``reference``: tables (``launches.load_table`` dicts) looked up in order."""
    per_kind: dict = {}
    groups: dict = defaultdict(lambda: dict(n=0, examples=[]))
    kinds = own["kind"]
    for kind in sorted(set(kinds.tolist())):
        sel = np.flatnonzero(kinds == kind)
        M, N, K, b = (own[f][sel] for f in ("M", "N", "K", "b"))
        found = np.zeros(len(sel), bool)
        r_sig, r_ctas, r_gz = [None] * len(sel), np.zeros(len(sel), np.int64), np.zeros(len(sel), np.int64)
        for t in reference:
            f, s, c, g = table_lookup(t, kind, M, N, K, b)
            new = f & ~found
            for j in np.flatnonzero(new):
                r_sig[j] = s[j]
            r_ctas[new], r_gz[new] = c[new], g[new]
            found |= f
        counts = Counter()
        for j in np.flatnonzero(found):
            i = sel[j]
            sig = signatures[own["sig"][i]]
            same_launch = (gemm_part(sig) == gemm_part(r_sig[j]) and own["ctas"][i] == r_ctas[j]
                           and own["gz"][i] == r_gz[j])
            counts["compared"] += 1
            counts["same_launch"] += same_launch
            if same_launch:
                counts["same_structure"] += 1
                continue
            call = call_from_kind(kind, int(M[j]), int(N[j]), int(K[j]), int(b[j]), gpu=ref_gpu)
            if same_numerics(call, sig, own["ctas"][i], own["gz"][i], r_sig[j], r_ctas[j], r_gz[j]):
                counts["same_structure"] += 1
                continue
            key = (kind, _describe(r_sig[j], r_ctas[j], r_gz[j], call), _describe(sig, own["ctas"][i], own["gz"][i], call))
            g = groups[key]
            g["n"] += 1
            if len(g["examples"]) < MAX_EXAMPLES:
                g["examples"].append((int(M[j]), int(N[j]), int(K[j]), int(b[j])))
        per_kind[kind] = dict(launches=int(len(sel)), compared=int(counts["compared"]),
                              same_launch=int(counts["same_launch"]), same_structure=int(counts["same_structure"]))
    return per_kind, dict(groups)


def reference_tables(ref_gpu: str, ref_out: str | None, sig_note: dict) -> list[dict]:
    """The reference model's installed table, then (``ref_out``) a table of its own run of the same survey."""
    tables = [launches.table(ref_gpu)]
    if ref_out:
        sig_index: dict[str, int] = {}
        merged, found = run_launches(ref_out, None, [], ref_gpu, sig_index)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ref.npz")
            export_kernels.report(launches.write_table(path, merged, list(sig_index), "reference run"), path)
            tables.append(launches.load_table(path))
            for k in tables[-1]["kinds"]:  # load every kind now: the file goes with the folder
                tables[-1]["kinds"][k]
        sig_note.update({f"reference {k}": v for k, v in found.items()})
    return tables


# --- bits -----------------------------------------------------------------------------------------------------

def load_bits(path: str) -> tuple[dict, dict]:
    """(records by id, arrays) of a bit capture: a survey folder (index.json, survey.npz) or a packed .npz."""
    if path.endswith(".npz"):
        z = np.load(path, allow_pickle=False)
        index = json.loads(str(z["meta"]))
    else:
        with open(os.path.join(path, "index.json")) as fh:
            index = json.load(fh)
        z = np.load(os.path.join(path, "survey.npz"), allow_pickle=False)
    return {r["id"]: r for r in index["records"]}, {k: z[k] for k in z.files if k != "meta"}


def compare_bits(a_path: str, b_path: str) -> dict:
    """Call by call, do two models' sampled output bits (same operands, same samples) agree?  Records with an error
    on either side, or different samples, are not compared."""
    ra, da = load_bits(a_path)
    rb, db = load_bits(b_path)
    same, differ = 0, []
    for i, r in sorted(ra.items()):
        if i not in rb or "error" in r or "error" in rb[i] or f"d{i}" not in da or f"d{i}" not in db:
            continue
        if any(not np.array_equal(da[f"{p}{i}"], db[f"{p}{i}"]) for p in ("rows", "cols", "batches")):
            continue
        if np.array_equal(da[f"d{i}"], db[f"d{i}"]):
            same += 1
        else:
            share = float(np.mean(da[f"d{i}"] != db[f"d{i}"]))
            differ.append(dict(id=i, op=r["op"], fmt=r["fmt"], shape=(r.get("b", 1), r["M"], r["N"], r["K"]),
                               share=share, kernels=(_main(r), _main(rb[i]))))
    return dict(compared=same + len(differ), same=same, differ=differ)


def _main(rec: dict) -> str:
    names = [k for k in rec.get("kernels", []) if launches.is_gemm_kernel(k)]
    return (names[0] if names else "?").replace("void ", "").split("(")[0][:64]


# --- writing ----------------------------------------------------------------------------------------------------

def manifest_entry(gpu: str, env: dict, table_file: str, kinds: list[str], ref_gpu: str, per_kind: dict,
                   counts: dict) -> dict:
    """The model's ``gpus.json`` entry after this fold."""
    old = gpus.manifest()["models"].get(gpu, {})
    names = list(dict.fromkeys(list(old.get("device_names", [])) + [env["device"]]))
    agree = {k: {f: v[f] for f in ("compared", "same_launch", "same_structure")} for k, v in per_kind.items()
             if v["compared"]}
    prov = dict(device=f"{env['device']} ({env.get('sms', '?')} SMs)", torch=env.get("torch"), cuda=env.get("cuda"),
                cublas=env.get("cublas"), driver=env.get("driver"),
                measured=f"lab/run.sh gpu-survey {gpu} (sets {env.get('sets', '?')}), folded "
                         f"{datetime.date.today().isoformat()}: {counts['launches']} launches")
    return dict(old, device_names=names, sms=env.get("sms", old.get("sms")), launches=table_file,
                measured=old.get("measured"), kinds=sorted(kinds), agrees_with={ref_gpu: agree}, provenance=prov)


def kind_label(kind: str) -> str:
    """A call kind (``Call.kind()``) in words, for tables (its '|' would split a markdown cell).

    >>> kind_label("matmul|bf16||bf16|1|0|plain|1|||0"), kind_label("scaled_mm|e4m3|e5m2|fp32|0|0|plain|1||tensor|1")
    ('matmul bf16 A^T', 'scaled_mm e4m3 x e5m2 -> fp32 tensor-scaled fast-accum')
    """
    op, fmt, b_fmt, out, a_t, b_t, epi, alpha_one, prec, scales, fast = kind.split("|")
    parts = [op, fmt + (f" x {b_fmt}" if b_fmt else "") + (f" -> {out}" if out != fmt else "")]
    parts += [x for x, on in (("A^T", a_t == "1"), ("B^T" if op != "linear" else "", b_t == "1" and op != "linear"),
                              ("W not transposed", op == "linear" and b_t == "0")) if on and x]
    parts += [x for x in (epi if epi != "plain" else "", "alpha != 1" if alpha_one == "0" else "", prec,
                          f"{scales}-scaled" if scales else "", "fast-accum" if fast == "1" else "") if x]
    return " ".join(parts)


def docs_section(gpu: str, ref_gpu: str, env: dict, found: dict, per_kind: dict, groups: dict, bits: dict,
                 autograd: dict | None, cmd: str) -> str:
    """The markdown of this fold's results (every figure from the run)."""
    G, R = gpu.upper(), ref_gpu.upper()
    lines = [f"Measured by `{cmd}` (device: {env['device']}, driver {env.get('driver')}, torch {env.get('torch')}, "
             f"CUDA {env.get('cuda')}, cuBLAS {env.get('cublas')}); launches per source: "
             + ", ".join(f"{k} {v:,}" for k, v in found.items()) + ".", ""]
    tot = Counter()
    for v in per_kind.values():
        tot.update(v)
    lines += [f"**{tot['compared']:,} of {tot['launches']:,} {G} launches have an {R} counterpart: "
              f"{tot['same_launch']:,} the same GEMM kernels and grid, {tot['same_structure']:,} the same numerics.**",
              "", f"| call kind | {G} launches | compared with the {R} | same launch | same numerics | "
              f"uses the {R}'s tables |", "|---|---|---|---|---|---|"]
    for kind, v in sorted(per_kind.items()):
        borrow = v["compared"] >= gpus.MIN_AGREEING and v["same_structure"] == v["compared"]
        lines.append(f"| {kind_label(kind)} | {v['launches']:,} | {v['compared']:,} | {v['same_launch']:,} | "
                     f"{v['same_structure']:,} | {'yes' if borrow else 'no'} |")
    if not groups:
        lines += ["", f"No compared launch differs in its numerics between the {R} and the {G}."]
    else:
        lines += ["", f"Where the numerics differ ({R} launch -> {G} launch; M x N x K (x batch) examples), most "
                  "common first:", "", f"| call kind | {R} | {G} | launches | examples |", "|---|---|---|---|---|"]
    for (kind, ref, own), g in sorted(groups.items(), key=lambda kv: -kv[1]["n"])[:40]:
        ex = ", ".join(f"{m} x {n} x {k}" + (f" (x{b})" if b > 1 else "") for m, n, k, b in g["examples"])
        lines.append(f"| {kind_label(kind)} | {ref} | {own} | {g['n']:,} | {ex} |")
    if len(groups) > 40:
        lines.append(f"| ... {len(groups) - 40} more groups | | | {sum(g['n'] for g in list(groups.values())[40:]):,} | |")
    for name, res in bits.items():
        lines += ["", f"Bits, {name}: {res['same']} of {res['compared']} calls give the same sampled output bits on "
                  f"the {R} and the {G}" + (":" if res["differ"] else ".")]
        for d in res["differ"][:12]:
            lines.append(f"- #{d['id']} {d['op']} {d['fmt']} {d['shape']}: {100 * d['share']:.1f}% of the sampled "
                         f"outputs differ ({R}: {d['kernels'][0]}; {G}: {d['kernels'][1]})")
    if autograd:
        lines += ["", f"Autograd check (`train_check.py`): {autograd['agree']} of {autograd['cases']} nn.Linear "
                  "training steps launch exactly the kernels of their three explicit calls."]
    return "\n".join(lines)


def replace_section(text: str, gpu: str, body: str) -> str:
    """``text`` with the part between ``<!-- fold_gpu GPU -->`` and ``<!-- /fold_gpu GPU -->`` replaced by ``body``."""
    begin, end = f"<!-- fold_gpu {gpu} -->", f"<!-- /fold_gpu {gpu} -->"
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise SystemExit(f"docs: expected one '{begin}' ... '{end}' section (docs/gemm.md, 'Per GPU model')")
    a, b = text.index(begin) + len(begin), text.index(end)
    return text[:a] + "\n" + body.strip() + "\n" + text[b:]


def export_bits(bits_dir: str, gpu: str, vectors: str) -> list[str]:
    """The run's bit captures packed as ``export_survey.py`` does: ``vectors/hopper_op_<set>_<gpu>.npz`` (never over
    a committed capture: those are compared, ``compare_bits``)."""
    written = []
    for name in bit_sets(bits_dir):
        src = os.path.join(bits_dir, name)
        if not os.path.exists(os.path.join(src, "index.json")):
            continue
        if os.path.exists(os.path.join(vectors, f"hopper_op_{name}_{gpu}.npz")):
            continue
        with open(os.path.join(src, "index.json")) as fh:
            index = json.load(fh)
        with np.load(os.path.join(src, "survey.npz"), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        dst = os.path.join(vectors, f"hopper_op_{name}_{gpu}.npz")
        np.savez_compressed(dst, meta=np.array(json.dumps(index)), **arrays)
        written.append(dst)
    return written


def fold_into(gpu: str, own: dict, signatures: list[str], path: str, note: str) -> tuple[dict, int, int]:
    """Model ``gpu``'s installed table with the run's launches added, written to ``path`` kind by kind (a launch the
    table already holds is kept; one that differs from it is counted).  Returns (counts, added, differing)."""
    t = launches.table(gpu)
    sig_index = {sg: i for i, sg in enumerate(signatures)}
    old_prov = ""
    with np.load(gpus.table_path(gpu, "launches"), allow_pickle=False) as z:
        old_prov = str(z["provenance"]) if "provenance" in z.files else ""
    kinds = sorted(set(t["kinds"]) | set(own["kind"].tolist()))
    runs, added, differ = [], 0, 0
    for k, kind in enumerate(kinds):
        parts = [table_rows(dict(t, kinds={kind: t["kinds"][kind]}), sig_index)] if kind in t["kinds"] else []
        sel = own["kind"] == kind
        new = {f: v[sel] for f, v in own.items()}
        if parts:
            f, s_, c, g = table_lookup(t, kind, new["M"], new["N"], new["K"], new["b"])
            same = np.array([f[j] and gemm_part(s_[j]) == gemm_part(signatures[new["sig"][j]]) and
                             c[j] == new["ctas"][j] and g[j] == new["gz"][j] for j in range(len(f))], bool)
            differ += int((f & ~same).sum())
            new = {fld: v[~f] for fld, v in new.items()}
        added += len(new["M"])
        parts.append(new)
        cols = {fld: np.concatenate([p[fld] for p in parts]) for fld in parts[0]}
        runs.append(launches.encode_runs(np.full(len(cols["M"]), k), cols["N"], cols["K"], cols["b"], cols["M"],
                                         cols["sig"], cols["ctas"], cols["gz"], list(sig_index)))
    merged = {f: np.concatenate([r[f] for r in runs]) for f in runs[0]}
    counts = export_kernels.report(launches.write_runs(path, kinds, list(sig_index), merged, f"{old_prov}; {note}",
                                                       grid=t.get("grid", ((), ()))), path)
    return counts, added, differ


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", required=True, help="the GPU model the run measured (h200, ...)")
    ap.add_argument("--out-dir", required=True, help="the device call's $OUT (lab/run.sh gpu-survey)")
    ap.add_argument("--reference", default=None, help="the model to compare with (default: the manifest's reference)")
    ap.add_argument("--reference-out", default=None, help="the reference model's own gpu-survey output")
    ap.add_argument("--captures", nargs="*", default=[], help="self-check capture files of calls on this GPU")
    ap.add_argument("--surveys", nargs="*", default=[], metavar="SET=PATH",
                    help="kernel-survey result files (json.gz) of named call lists, measured on this GPU, to fold too")
    ap.add_argument("--hold-out", nargs="*", default=[], metavar="SET",
                    help="bit sets whose launches are not folded (held-out sets, before their first replay)")
    ap.add_argument("--write", action="store_true", help="write the table, manifest, bit captures and docs section")
    ap.add_argument("--add", action="store_true", help="a later survey of a model that has a table: add its launches to "
                    "the installed table and its agreement counts to the manifest entry (the docs section is printed, "
                    "not replaced)")
    ap.add_argument("--lib", default=LIB, help=argparse.SUPPRESS)
    ap.add_argument("--docs", default=os.path.join(ROOT, "docs", "gemm.md"), help=argparse.SUPPRESS)
    ap.add_argument("--vectors", default=os.path.join(ROOT, "vectors", "library"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    gpu = gpus.model_key(a.gpu)
    ref = gpus.model_key(a.reference) if a.reference else gpus.reference_gpu()
    env = read_env(a.out_dir, gpu)
    if gpu == ref:
        return fold_reference(a, gpu, env)
    with tempfile.TemporaryDirectory() as tmp:
        bits_dir = unpack_bits(a.out_dir, os.path.join(tmp, "own"))
        ref_bits = unpack_bits(a.reference_out, os.path.join(tmp, "ref")) if a.reference_out else None
        sig_index: dict[str, int] = {}
        own, found = run_launches(a.out_dir, bits_dir, a.captures, gpu, sig_index, tuple(a.hold_out),
                                  tuple(a.surveys))
        signatures = list(sig_index)
        per_kind, groups = compare(own, signatures, reference_tables(ref, a.reference_out, found), ref)
        bits = {}
        committed = os.path.join(a.vectors, f"hopper_op_holdout11_{ref}.npz")
        if bits_dir and os.path.exists(os.path.join(bits_dir, "holdout11")) and os.path.exists(committed):
            bits["holdout11"] = compare_bits(committed, os.path.join(bits_dir, "holdout11"))
        ref_train = os.path.join(a.vectors, f"hopper_op_train_bits_{ref}.npz")  # the reference's companion run, folded
        if not os.path.exists(ref_train) and ref_bits:
            ref_train = os.path.join(ref_bits, "train_bits")
        if bits_dir and os.path.exists(ref_train) and os.path.exists(os.path.join(bits_dir, "train_bits")):
            bits["train_bits"] = compare_bits(ref_train, os.path.join(bits_dir, "train_bits"))
        autograd = None
        if os.path.exists(os.path.join(a.out_dir, "autograd_check.json")):
            with open(os.path.join(a.out_dir, "autograd_check.json")) as fh:
                autograd = json.load(fh)
        cmd = f"lab/run.sh gpu-survey {gpu}" + (f" (and {ref})" if a.reference_out else "") + f"; fold_gpu.py --gpu {gpu}"
        body = docs_section(gpu, ref, env, found, per_kind, groups, bits, autograd, cmd)
        print(body)
        if not a.write:
            return 0
        if a.add:
            return fold_more(a, gpu, ref, env, own, signatures, per_kind, bits_dir)
        table_file = f"{gpu}_launches.npz"
        table_path = os.path.join(a.lib, table_file)
        counts = export_kernels.report(launches.write_table(
            table_path, own, signatures,
            f"lab/run.sh gpu-survey {gpu} on {env['device']}, torch {env.get('torch')}, CUDA {env.get('cuda')}, cuBLAS "
            f"{env.get('cublas')}, driver {env.get('driver')} (fold_gpu.py)"), table_path)
        m = json.loads(json.dumps(gpus.manifest()))
        m["models"][gpu] = manifest_entry(gpu, env, table_file, sorted(set(own["kind"].tolist())), ref, per_kind,
                                          counts)
        with open(os.path.join(a.lib, "gpus.json"), "w") as fh:
            json.dump(m, fh, indent=2)
            fh.write("\n")
        written = export_bits(bits_dir, gpu, a.vectors) if bits_dir else []
        with open(a.docs) as fh:
            text = fh.read()
        with open(a.docs, "w") as fh:
            fh.write(replace_section(text, gpu, body))
        print(f"wrote {table_file}, gpus.json ({gpu}), {', '.join(os.path.basename(w) for w in written) or 'no bits'}, "
              f"{os.path.relpath(a.docs, ROOT)}")
    return 0


def merged_agreement(old: dict, new: dict) -> dict:
    """Per-kind agreement counts of two runs against the same reference, summed (a kind every compared launch of both
    runs agreed on stays borrowable)."""
    out = {k: dict(v) for k, v in old.items()}
    for kind, v in new.items():
        if not v.get("compared"):
            continue
        acc = out.setdefault(kind, dict(compared=0, same_launch=0, same_structure=0))
        for f in ("compared", "same_launch", "same_structure"):
            acc[f] = int(acc.get(f, 0)) + int(v[f])
    return out


def _fold_note(a, gpu: str, env: dict, bits_dir: str | None, verb: str) -> str:
    """The provenance line of a fold into an installed table: the run, its sets, the launches of which bit sets
    and surveys."""
    held = set(a.hold_out)
    return (f"lab/run.sh gpu-survey {gpu} on {env['device']} {verb} {datetime.date.today().isoformat()} "
            f"(sets {env.get('sets', '?')}; bit sets' launches: "
            f"{', '.join(sorted(set(bit_sets(bits_dir)) - held)) or 'none'}"
            f"{'; surveys ' + ', '.join(x.partition('=')[0] for x in a.surveys) if a.surveys else ''})")


def _add_to_installed(a, gpu: str, own: dict, signatures: list[str], note: str) -> tuple[dict, int, int]:
    """``fold_into`` the model's installed table, written beside it and then moved over it (counts, added, differ)."""
    with tempfile.NamedTemporaryFile(suffix=".npz", dir=a.lib, delete=False) as fh:
        tmp_table = fh.name
    counts, added, differ = fold_into(gpu, own, signatures, tmp_table, note)
    os.chmod(tmp_table, 0o644)  # NamedTemporaryFile makes it 0600; the installed table is read by everyone
    os.replace(tmp_table, os.path.join(a.lib, f"{gpu}_launches.npz"))
    return counts, added, differ


def fold_more(a, gpu: str, ref: str, env: dict, own: dict, signatures: list[str], per_kind: dict,
              bits_dir: str | None) -> int:
    """``--add``: a later survey of a model with a table -- its launches added to the installed table (``fold_into``),
    its call kinds and agreement counts added to the manifest entry."""
    path = os.path.join(a.lib, f"{gpu}_launches.npz")
    if not os.path.exists(path):
        raise SystemExit(f"--add: {gpu} has no installed table ({path}); fold its first survey without --add")
    note = _fold_note(a, gpu, env, bits_dir, "added")
    counts, added, differ = _add_to_installed(a, gpu, own, signatures, note)
    m = json.loads(json.dumps(gpus.manifest()))
    entry = m["models"][gpu]
    entry["kinds"] = sorted(set(entry.get("kinds") or []) | set(own["kind"].tolist()))
    entry["agrees_with"] = dict(entry.get("agrees_with", {}))
    entry["agrees_with"][ref] = merged_agreement(entry["agrees_with"].get(ref, {}), per_kind)
    entry["provenance"] = dict(entry.get("provenance", {}))
    entry["provenance"]["measured"] = (f"{entry['provenance'].get('measured', '')}; + {note}: {added} launches added, "
                                       f"{counts['launches']} in all")
    with open(os.path.join(a.lib, "gpus.json"), "w") as fh:
        json.dump(m, fh, indent=2)
        fh.write("\n")
    written = export_bits(bits_dir, gpu, a.vectors) if bits_dir else []
    print(f"{path}: {added:,} launches added, {differ:,} measured again with another launch (the table's kept); "
          f"{counts['launches']:,} in all; gpus.json ({gpu}): {len(entry['kinds'])} kinds; bit captures written: "
          f"{', '.join(os.path.basename(w) for w in written) or 'none'}")
    return 0


def fold_reference(a, gpu: str, env: dict) -> int:
    """The reference model's own run (the companion survey): its launches added to its installed table."""
    with tempfile.TemporaryDirectory() as tmp:
        bits_dir = unpack_bits(a.out_dir, os.path.join(tmp, "own"))
        sig_index: dict[str, int] = {s: i for i, s in enumerate(launches.table(gpu)["signatures"])}
        own, found = run_launches(a.out_dir, bits_dir, a.captures, gpu, sig_index, tuple(a.hold_out),
                                  tuple(a.surveys))
        t = launches.table(gpu)
        already = sum(int(table_lookup(t, k, own["M"][own["kind"] == k], own["N"][own["kind"] == k],
                                       own["K"][own["kind"] == k], own["b"][own["kind"] == k])[0].sum())
                      for k in set(own["kind"].tolist()))
        print(f"{gpu}'s own run: {len(own['M']):,} launches ({', '.join(f'{k} {v:,}' for k, v in found.items())}); "
              f"{already:,} already in its table")
        if not a.write:
            return 0
        path = os.path.join(a.lib, f"{gpu}_launches.npz")
        counts, added, differ = _add_to_installed(a, gpu, own, list(sig_index), _fold_note(a, gpu, env, bits_dir,
                                                                                          "folded"))
        print(f"{path}: {added:,} launches added, {differ:,} measured again with another launch (the table's kept); "
              f"{counts['launches']:,} launches in all")
        for name in bit_sets(bits_dir):
            committed = os.path.join(a.vectors, f"hopper_op_{name}_{gpu}.npz")
            if bits_dir and os.path.exists(committed) and os.path.exists(os.path.join(bits_dir, name, "index.json")):
                r = compare_bits(committed, os.path.join(bits_dir, name))
                print(f"{name} captured again: {r['same']} of {r['compared']} calls give the committed capture's bits")
        written = export_bits(bits_dir, gpu, a.vectors) if bits_dir else []
        print("bit captures written:", ", ".join(written) or "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
