"""Check a GPU digest (``gpu_equivalence.py --digest``) against the CPU oracle, chunk by chunk.

For every datapath of the digest: regenerate its inputs from the seed (as the device did),
compare the input hash (a difference means this machine generates other vectors, e.g. another
numpy: reported as a generation mismatch, not an engine one), evaluate the oracle (the fast
engine; the reference engine for block-scaled units) ``chunk`` vectors at a time and compare
each chunk's hash and the GEMM's.  Unequal chunks are named (``ENTRY:CHUNK``: rerun the device
with ``--dump ENTRY:CHUNK`` to fetch the bits); where the digest holds a chunk's bits, the first
unequal vectors are printed.  Exit status 0: every chunk and GEMM equal; 1: a mismatch; 2: the
digest is incomplete or was generated differently (an engine error on the device: 1).

    nice -n 10 python3 benchmarks/gpu_digest_check.py equiv/digest.json --report check.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_equivalence as ge  # noqa: E402

_HEADER_KEYS = ("format", "backend", "seed", "count", "per_family", "chunk", "arch", "skip_arch", "only", "limit",
                "skip_first", "numpy", "datapaths", "records")
_RECORD_KEYS = ("entry", "k", "vectors", "input_hash", "dot_chunks", "gemm_shape", "gemm_hash")


def load_digest(path: str) -> dict:
    """The digest JSON, with its layout checked (a clear error naming what is missing)."""
    with open(path) as f:
        digest = json.load(f)
    if not isinstance(digest, dict) or digest.get("format") != ge.DIGEST_FORMAT:
        raise ValueError(f"{path}: not a {ge.DIGEST_FORMAT} file (format field "
                         f"{digest.get('format') if isinstance(digest, dict) else None!r})")
    missing = [k for k in _HEADER_KEYS if k not in digest]
    if missing:
        raise ValueError(f"{path}: header lacks {', '.join(missing)}")
    for i, record in enumerate(digest["records"]):
        if "skipped" in record or "error" in record:
            continue
        lacking = [k for k in _RECORD_KEYS if k not in record]
        if lacking:
            raise ValueError(f"{path}: record {i} ({record.get('entry')!r}) lacks {', '.join(lacking)}")
    return digest


def selection_problems(digest: dict) -> list[str]:
    """Differences between the digest's datapath list and the one this checkout selects."""
    args = argparse.Namespace(**{k: digest[k] for k in ("arch", "skip_arch", "only", "limit", "skip_first")})
    here = ge.select_names(args)
    there = digest["datapaths"]
    if here == there:
        return []
    problems = [f"only in the digest: {n}" for n in there if n not in here]
    problems += [f"only selected here: {n}" for n in here if n not in there]
    if not problems:
        problems.append("same datapaths in another order")
    return problems


def _diff_lines(spec, inp, chunk_index: int, chunk: int, hex_bits: str, want: np.ndarray, show: int) -> list[str]:
    got = np.frombuffer(bytes.fromhex(hex_bits), dtype=want.dtype.newbyteorder("<"))
    bad = np.flatnonzero(got != want)
    lines = [f"    chunk {chunk_index}: {len(bad)} of {len(want)} vectors differ"]
    for j in bad[:show]:
        i = chunk_index * chunk + int(j)
        a, b, c, sa, sb = inp.vectors(i, i + 1)
        scales = "" if sa is None else f" scale_a {sa[0].tolist()} scale_b {sb[0].tolist()}"
        lines.append(f"    vector {i}: a {a[0].tolist()} b {b[0].tolist()} c {int(c[0]):#x}{scales} "
                     f"engine {int(got[j]):#x} oracle {int(want[j]):#x}")
    return lines


def check_record(record: dict, digest: dict, show: int = 3) -> dict:
    """Oracle against one datapath's digest: input, per-chunk and GEMM verdicts."""
    from tcnumerics.catalog import get_instruction

    t0 = time.perf_counter()
    name = record["entry"]
    spec = get_instruction(name)
    inp = ge.generate_inputs(spec, digest["count"], digest["per_family"], digest["seed"])
    result = dict(entry=name, vectors=inp.count, k=inp.k, gemm_outputs=int(np.prod(record["gemm_shape"])))
    if inp.digest() != record["input_hash"] or inp.count != record["vectors"]:
        result.update(status="generation differs", seconds=round(time.perf_counter() - t0, 2))
        return result
    chunk = digest["chunk"]
    bad_chunks, lines = [], []
    for j, expected in enumerate(record["dot_chunks"]):
        want = ge.d_bits(spec, ge.oracle_dot(spec, *inp.vectors(j * chunk, (j + 1) * chunk)))
        if ge.bits_hash(want) != expected:
            bad_chunks.append(j)
            hex_bits = record.get("dumps", {}).get(str(j))
            if hex_bits is not None:
                lines += _diff_lines(spec, inp, j, chunk, hex_bits, want, show)
    if len(record["dot_chunks"]) != -(-inp.count // chunk):
        lines.append(f"    digest has {len(record['dot_chunks'])} chunk hashes for {inp.count} vectors")
        bad_chunks.append(-1)
    gemm_equal = ge.bits_hash(ge.d_bits(spec, ge.oracle_gemm(spec, *inp.gemm()))) == record["gemm_hash"]
    result.update(status="equal" if not bad_chunks and gemm_equal else "MISMATCH", unequal_chunks=bad_chunks,
                  gemm_equal=gemm_equal, seconds=round(time.perf_counter() - t0, 2), details=lines)
    return result


def _check_one(args: tuple) -> dict:
    record, digest, show = args
    return check_record(record, digest, show)


def check_all(digest: dict, workers: int = 1, show: int = 3):
    """Yield each record's verdict (in digest order)."""
    header = {k: v for k, v in digest.items() if k != "records"}
    todo = [(r, header, show) for r in digest["records"] if "skipped" not in r and "error" not in r]
    if workers <= 1:
        yield from map(_check_one, todo)
        return
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        yield from pool.imap(_check_one, todo)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("digest", help="JSON written by gpu_equivalence.py --digest")
    p.add_argument("--workers", type=int, default=1, help="processes (each runs the oracle on one datapath)")
    p.add_argument("--only", default=None, help="comma-separated entry names to check (default: all)")
    p.add_argument("--show", type=int, default=3, help="unequal vectors to print per dumped chunk")
    p.add_argument("--report", default=None, help="write the verdicts here (JSON)")
    args = p.parse_args(argv)
    t0 = time.time()
    digest = load_digest(args.digest)
    missing = len(digest["datapaths"]) - len(digest["records"])
    if args.only:
        wanted = set(args.only.split(","))
        digest["records"] = [r for r in digest["records"] if r["entry"] in wanted]
    problems = selection_problems(digest)
    skipped = [r["entry"] for r in digest["records"] if "skipped" in r]
    failed = [(r["entry"], r["error"]) for r in digest["records"] if "error" in r]
    print(f"digest: {len(digest['records']) - len(skipped) - len(failed)} datapaths x {digest['count']} vectors, "
          f"backend {digest['backend']} ({digest.get('device')}), numpy {digest['numpy']} there, "
          f"{np.__version__} here, "
          f"commit {digest.get('git_commit')}", flush=True)
    for line in problems:
        print(f"  datapath list: {line}")
    for name, error in failed:
        print(f"  {name:60s} ENGINE ERROR on the device: {error[:300]}")
    verdicts, counts = [], dict(equal=0, MISMATCH=0)
    counts["generation differs"] = 0
    compared = 0
    for v in check_all(digest, args.workers, args.show):
        verdicts.append(v)
        counts[v["status"]] += 1
        if v["status"] != "generation differs":
            compared += v["vectors"] + v["gemm_outputs"]
        extra = (f" unequal chunks {v['unequal_chunks']} gemm {'equal' if v['gemm_equal'] else 'UNEQUAL'}"
                 if v["status"] == "MISMATCH" else "")
        print(f"  {v['entry']:60s} {v['vectors']:8d} {v['status']}{extra}  {v['seconds']:6.1f} s", flush=True)
        for line in v.get("details", ()):
            print(line)
    summary = dict(digest=args.digest, checked=len(verdicts), compared_outputs=compared, skipped_at_deadline=skipped,
                   engine_errors=failed,
                   not_in_digest=missing, datapath_list_problems=problems, seconds=round(time.time() - t0, 1),
                   **{k.replace(" ", "_"): n for k, n in counts.items()})
    print(f"{counts['equal']} equal, {counts['MISMATCH']} mismatched, {len(failed)} engine errors, "
          f"{counts['generation differs']} generated differently, {len(skipped)} skipped at the device deadline, "
          f"{missing} never reached; {compared} outputs "
          f"compared in {summary['seconds']} s")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(dict(summary, verdicts=verdicts), f, indent=1)
    if counts["MISMATCH"] or failed:
        return 1
    return 2 if counts["generation differs"] or skipped or missing or problems else 0


if __name__ == "__main__":
    sys.exit(main())
