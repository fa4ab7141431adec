"""The GPU engine against the CPU fast engine (itself proven equal to the reference): counts of equal bits.

For every distinct datapath the GPU engine runs (one catalog entry per distinct kernel
configuration, optionally only one architecture), vectors of every input family
(``tcnumerics.vectors.families``: specials, subnormals, overflow, cancellation, ties...) are
generated, then recombined (independent random rows of A, B and C from the family pool, each
row's K order shuffled per instruction-free position) up to ``--count`` vectors, and evaluated
by ``cuda.dot_bits`` and ``fast.dot_bits``; a GEMM of family rows (ragged M, N: partial tiles)
compares ``cuda.gemm_bits`` (tiled or per-output kernel) with ``fast.gemm_bits``.  Needs a GPU.

    PYTHONPATH=src python3 benchmarks/gpu_equivalence.py --count 1048576 --arch hopper --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def distinct_entries(arch: str | None, skip_arch: str | None = None) -> list:
    """One supported entry per distinct GPU kernel configuration (the datapaths)."""
    from tcnumerics.catalog import all_instructions
    from tcnumerics.engines import _cuda_build as build
    from tcnumerics.engines import cuda

    seen = {}
    for spec in all_instructions():
        if arch and spec.arch != arch or spec.arch == skip_arch or cuda.unsupported_reason(spec) is not None:
            continue
        seen.setdefault(build.config_header(spec, cuda._plan(spec), build.DEVICE_TILE), spec)
    return list(seen.values())


def family_pool(spec, per_family: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    from tcnumerics.vectors.families import families_for, generate

    k = 2 * spec.k if spec.c_format == spec.d_format else spec.k
    parts = [generate(spec, fam, per_family, rng, k=k) for fam in families_for(spec)]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]), k)


def check_scaled(spec, count: int, per_family: int, rng) -> dict:
    """Block-scaled (MX) entries: the reference engine with the scales is the oracle."""
    import cupy

    from tcnumerics.engines import _cuda_build as build
    from tcnumerics.engines import cuda, reference
    from tcnumerics.vectors.families import families_for, generate_scaled

    t0 = time.perf_counter()
    parts = [generate_scaled(spec, fam, per_family, rng, k=2 * spec.k) for fam in families_for(spec)]
    a0, b0, c0, sa0, sb0 = (np.concatenate(x) for x in zip(*parts))
    extra = max(0, count - len(a0))
    ia, ib, ic = (rng.integers(0, len(a0), extra) for _ in range(3))
    a, sa = np.concatenate([a0, a0[ia]]), np.concatenate([sa0, sa0[ia]])
    b, sb = np.concatenate([b0, b0[ib]]), np.concatenate([sb0, sb0[ib]])
    c = np.concatenate([c0, c0[ic]])
    want = reference.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)
    got = cuda.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)
    M, N = min(len(a0), 200), min(len(b0), 100)
    ra, rb = rng.permutation(len(a0))[:M], rng.permutation(len(b0))[:N]
    C = c0[rng.integers(0, len(c0), (M, N))]
    gw = reference.dot_bits(spec, np.repeat(a0[ra], N, 0), np.tile(b0[rb], (M, 1)), C.ravel(),
                            scale_a=np.repeat(sa0[ra], N, 0), scale_b=np.tile(sb0[rb], (M, 1))).reshape(M, N)
    gg = cuda.gemm_bits(spec, cupy.asarray(a0[ra]), cupy.asarray(b0[rb]), cupy.asarray(C), scale_a=sa0[ra],
                        scale_b=sb0[rb]).get()
    return dict(entry=spec.name, vectors=len(a), k=2 * spec.k, dot_mismatches=int(np.count_nonzero(got != want)),
                gemm_outputs=M * N, gemm_mismatches=int(np.count_nonzero(gg != gw)),
                gemm_kernel="tiled" if build.tiled_reason(cuda._plan(spec)) is None else "scalar",
                seconds=round(time.perf_counter() - t0, 2), generate_seconds=0.0)


def check(spec, count: int, per_family: int, rng) -> dict:
    import cupy

    from tcnumerics.engines import cuda, fast

    if spec.model.is_block_scaled:
        return check_scaled(spec, count, per_family, rng)
    t0 = time.perf_counter()
    a0, b0, c0, k = family_pool(spec, per_family, rng)
    extra = max(0, count - len(a0))
    ia, ib, ic = (rng.integers(0, len(a0), extra) for _ in range(3))
    a = np.concatenate([a0, a0[ia]])
    b = np.concatenate([b0, b0[ib]])
    c = np.concatenate([c0, c0[ic]])
    t_gen = time.perf_counter() - t0
    want = fast.dot_bits(spec, a, b, c)
    got = cuda.dot_bits(spec, a, b, c)
    dot_bad = int(np.count_nonzero(got != want))
    # GEMM: ragged sizes over family rows (partial tiles in M and N), C from the pool
    M, N = min(len(a0), 200), min(len(b0), 100)
    A, B = a0[rng.permutation(len(a0))[:M]], b0[rng.permutation(len(b0))[:N]]
    C = c0[rng.integers(0, len(c0), (M, N))]
    gw = fast.gemm_bits(spec, A, B, C)
    gg = cuda.gemm_bits(spec, cupy.asarray(A), cupy.asarray(B), cupy.asarray(C)).get()
    gemm_bad = int(np.count_nonzero(gg != gw))
    from tcnumerics.engines import _cuda_build as build

    return dict(entry=spec.name, vectors=len(a), k=k, dot_mismatches=dot_bad, gemm_outputs=M * N,
                gemm_mismatches=gemm_bad, gemm_kernel="tiled" if build.tiled_reason(cuda._plan(spec)) is None
                else "scalar", seconds=round(time.perf_counter() - t0, 2), generate_seconds=round(t_gen, 2))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=1 << 20, help="vectors per datapath")
    p.add_argument("--per-family", type=int, default=2048, help="generated vectors per input family")
    p.add_argument("--arch", default=None, help="only this architecture's entries (e.g. hopper)")
    p.add_argument("--skip-arch", default=None, help="leave this architecture's entries out")
    p.add_argument("--limit", type=int, default=0, help="at most this many datapaths (0: all)")
    p.add_argument("--skip-first", type=int, default=0, help="leave out the first N datapaths (checked before)")
    p.add_argument("--json", default=None)
    p.add_argument("--seed", type=int, default=20261124)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    entries = distinct_entries(args.arch, args.skip_arch)
    entries = entries[args.skip_first:]
    if args.limit:
        entries = entries[:args.limit]
    print(f"{len(entries)} distinct GPU datapaths, {args.count} vectors each", flush=True)
    rows, total, bad = [], 0, 0
    for spec in entries:
        r = check(spec, args.count, args.per_family, rng)
        rows.append(r)
        total += r["vectors"] + r["gemm_outputs"]
        bad += r["dot_mismatches"] + r["gemm_mismatches"]
        print(f"  {r['entry']:52s} dot {r['vectors']:8d} bad {r['dot_mismatches']:3d}  gemm {r['gemm_kernel']:6s} "
              f"{r['gemm_outputs']:6d} bad {r['gemm_mismatches']:3d}  {r['seconds']:6.1f} s", flush=True)
        if args.json:  # after every datapath: a run stopped at a time limit keeps what it checked
            with open(args.json, "w") as f:
                json.dump(dict(rows=rows, total=total, mismatches=bad, datapaths=len(entries)), f, indent=1)
    print(f"total comparisons {total}, mismatches {bad}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
