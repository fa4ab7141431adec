"""The GPU engine against the CPU oracle (fast engine; reference for block-scaled units): equal bits.

For every distinct datapath the GPU engine runs (one catalog entry per distinct kernel
configuration, optionally only one architecture), vectors of every input family
(``tcnumerics.vectors.families``: specials, subnormals, overflow, cancellation, ties...) are
generated into a pool, then recombined (independent random pool rows for A, B and C) up to
``--count`` vectors; a GEMM of pool rows (ragged M = 200, N = 100: partial tiles, C from the
pool) goes through ``gemm_bits`` (tiled or per-output kernel).  Each datapath draws from its own
generator, seeded by ``--seed`` and the entry's name, so its vectors do not depend on which
other datapaths run, in which order or in which process.

Two ways to run it:

* direct (``--json``): the GPU engine and the oracle both evaluate here; counts of unequal bits.
* digest (``--digest``): only the engine under test evaluates (on the device); one JSON keeps,
  per datapath, a hash of the inputs (pool and recombination indices) and a hash of every
  ``--chunk`` vectors of output bits and of the GEMM output.  ``gpu_digest_check.py`` then
  regenerates the inputs on any CPU, checks the input hash (a generation difference between
  machines, e.g. numpy versions, is reported as such, not as an engine mismatch), evaluates
  the oracle and names every chunk whose bits differ (``--dump ENTRY:CHUNK`` makes a later
  device run store that chunk's output bits for a vector-by-vector diff).

``--backend host`` evaluates the same CUDA kernel source compiled for the CPU with g++
(``cuda.host_dot_bits`` / ``cuda.host_accumulate_bits``): it tests the generation, hashing
and checking pipeline without a GPU and says nothing about the GPU's bits.

    PYTHONPATH=src python3 benchmarks/gpu_equivalence.py --count 1048576 --arch hopper --json out.json
    PYTHONPATH=src python3 benchmarks/gpu_equivalence.py --skip-arch hopper --digest $OUT/equiv/d.json --workers 14
    PYTHONPATH=src python3 benchmarks/gpu_digest_check.py $OUT/equiv/d.json
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np

DIGEST_FORMAT = "tcnumerics-gpu-digest-1"
GEMM_M, GEMM_N = 200, 100


def distinct_entries(arch: str | None, skip_arch: str | None = None) -> list:
    """One supported entry per distinct GPU kernel configuration (the datapaths), in catalog order."""
    from tcnumerics.catalog import all_instructions
    from tcnumerics.engines import _cuda_build as build
    from tcnumerics.engines import cuda

    seen = {}
    for spec in all_instructions():
        if arch and spec.arch != arch or spec.arch == skip_arch or cuda.unsupported_reason(spec) is not None:
            continue
        seen.setdefault(build.config_header(spec, cuda._plan(spec), build.DEVICE_TILE), spec)
    return list(seen.values())


def datapath_rng(seed: int, name: str) -> np.random.Generator:
    """The generator of one datapath: a function of the seed and the entry name only."""
    key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(np.random.SeedSequence([int(seed), key]))


def bits_hash(*arrays: np.ndarray) -> str:
    """blake2b-128 of arrays' dtypes, shapes and little-endian bytes (machine independent)."""
    h = hashlib.blake2b(digest_size=16)
    for x in arrays:
        x = np.ascontiguousarray(x)
        x = x.astype(x.dtype.newbyteorder("<"), copy=False)
        h.update(f"{x.dtype.str}{x.shape};".encode())
        h.update(x.tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Inputs:
    """One datapath's vectors: a family pool and the pool rows each vector and GEMM element uses.

    Vector ``i`` is ``(a0[rows_a[i]], b0[rows_b[i]], c0[rows_c[i]])`` (scales follow A and B);
    the first ``len(a0)`` vectors are the pool itself, in order.
    """

    spec: object
    k: int
    a0: np.ndarray
    b0: np.ndarray
    c0: np.ndarray
    sa0: np.ndarray | None
    sb0: np.ndarray | None
    rows_a: np.ndarray
    rows_b: np.ndarray
    rows_c: np.ndarray
    gemm_a: np.ndarray
    gemm_b: np.ndarray
    gemm_c: np.ndarray

    @property
    def count(self) -> int:
        return len(self.rows_a)

    def vectors(self, lo: int = 0, hi: int | None = None) -> tuple:
        """a, b, c, scale_a, scale_b of vectors lo:hi (scales None for unscaled units)."""
        ra, rb, rc = self.rows_a[lo:hi], self.rows_b[lo:hi], self.rows_c[lo:hi]
        scaled = self.sa0 is not None
        return (self.a0[ra], self.b0[rb], self.c0[rc], self.sa0[ra] if scaled else None,
                self.sb0[rb] if scaled else None)

    def gemm(self) -> tuple:
        """A [M, K], B [N, K], C [M, N], scale_a, scale_b of the GEMM check."""
        scaled = self.sa0 is not None
        return (self.a0[self.gemm_a], self.b0[self.gemm_b], self.c0[self.gemm_c],
                self.sa0[self.gemm_a] if scaled else None, self.sb0[self.gemm_b] if scaled else None)

    def digest(self) -> str:
        """Hash of everything the vectors are made of (pool, scales, row indices, GEMM picks)."""
        parts = [self.a0, self.b0, self.c0, self.rows_a, self.rows_b, self.rows_c, self.gemm_a, self.gemm_b,
                 self.gemm_c]
        if self.sa0 is not None:
            parts += [self.sa0, self.sb0]
        return bits_hash(np.frombuffer(self.spec.name.encode(), np.uint8), np.array([self.k]), *parts)


def family_pool(spec, per_family: int, rng) -> tuple:
    """a0, b0, c0, scale_a0, scale_b0 (None unless block-scaled) and K: every family's vectors."""
    from tcnumerics.vectors.families import families_for, generate, generate_scaled

    if spec.model.is_block_scaled:
        k = 2 * spec.k
        parts = [generate_scaled(spec, fam, per_family, rng, k=k) for fam in families_for(spec)]
        a0, b0, c0, sa0, sb0 = (np.concatenate(x) for x in zip(*parts))
        return a0, b0, c0, sa0, sb0, k
    k = 2 * spec.k if spec.c_format == spec.d_format else spec.k
    parts = [generate(spec, fam, per_family, rng, k=k) for fam in families_for(spec)]
    a0, b0, c0 = (np.concatenate(x) for x in zip(*parts))
    return a0, b0, c0, None, None, k


def generate_inputs(spec, count: int, per_family: int, seed: int) -> Inputs:
    """The datapath's vectors (at least ``count``: the whole pool if it is larger) and GEMM picks."""
    rng = datapath_rng(seed, spec.name)
    a0, b0, c0, sa0, sb0, k = family_pool(spec, per_family, rng)
    pool = len(a0)
    extra = max(0, count - pool)
    own = np.arange(pool, dtype=np.int64)
    rows = [np.concatenate([own, rng.integers(0, pool, extra).astype(np.int64)]) for _ in range(3)]
    m, n = min(pool, GEMM_M), min(pool, GEMM_N)
    gemm_a, gemm_b = rng.permutation(pool)[:m], rng.permutation(pool)[:n]
    gemm_c = rng.integers(0, pool, (m, n))
    return Inputs(spec, k, a0, b0, c0, sa0, sb0, *rows, gemm_a.astype(np.int64), gemm_b.astype(np.int64),
                  gemm_c.astype(np.int64))


# --- the evaluators ---------------------------------------------------------------------------

def oracle_dot(spec, a, b, c, sa=None, sb=None) -> np.ndarray:
    """CPU oracle: the reference engine for block-scaled units (scales), the fast engine otherwise."""
    from tcnumerics.engines import fast, reference

    if spec.model.is_block_scaled:
        return reference.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)
    return fast.dot_bits(spec, a, b, c)


def oracle_gemm(spec, A, B, C, SA=None, SB=None) -> np.ndarray:
    from tcnumerics.engines import fast

    if spec.model.is_block_scaled:
        m, n = C.shape
        return oracle_dot(spec, np.repeat(A, n, 0), np.tile(B, (m, 1)), C.ravel(), np.repeat(SA, n, 0),
                          np.tile(SB, (m, 1))).reshape(m, n)
    return fast.gemm_bits(spec, A, B, C)


def engine_dot(backend: str, spec, a, b, c, sa=None, sb=None) -> np.ndarray:
    """The engine under test: ``cuda`` (the GPU) or ``host`` (the same kernel source built with g++)."""
    from tcnumerics.engines import cuda

    if backend == "host":
        return cuda.host_dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)
    with _no_cpu_fallback():
        return cuda.dot_bits(spec, a, b, c, scale_a=sa, scale_b=sb)


@contextlib.contextmanager
def _no_cpu_fallback():
    """A CPU fallback of the cuda engine (its RuntimeWarning) raises: the digest must hold GPU bits."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="engine='cuda': .* runs on the CPU", category=RuntimeWarning)
        yield


def engine_gemm(backend: str, spec, A, B, C, SA=None, SB=None) -> np.ndarray:
    from tcnumerics.engines import cuda

    if backend == "host":
        return cuda.host_accumulate_bits(spec, A, B, C, 0, A.shape[1], scale_a=SA, scale_b=SB)
    import cupy

    with _no_cpu_fallback():
        return cuda.gemm_bits(spec, cupy.asarray(A), cupy.asarray(B), cupy.asarray(C), scale_a=SA,
                              scale_b=SB).get()


def gemm_kernel(spec) -> str:
    from tcnumerics.engines import _cuda_build as build
    from tcnumerics.engines import cuda

    return "tiled" if build.tiled_reason(cuda._plan(spec)) is None else "scalar"


def d_bits(spec, out: np.ndarray) -> np.ndarray:
    """Result bits in the D container dtype (what the hashes cover); refuses values that do not fit."""
    want = np.dtype(spec.d_format.container_dtype)
    out = np.asarray(out)
    if out.dtype != want:
        cast = out.astype(want)
        if not np.array_equal(cast.astype(out.dtype), out):
            raise ValueError(f"{spec.name}: result bits of dtype {out.dtype} do not fit D's container {want}")
        out = cast
    return out


# --- direct mode --------------------------------------------------------------------------------

def check(spec, count: int, per_family: int, seed: int, backend: str = "cuda") -> dict:
    """Engine and oracle on one datapath here: counts of unequal result bits."""
    t0 = time.perf_counter()
    inp = generate_inputs(spec, count, per_family, seed)
    vec = inp.vectors()
    t_gen = time.perf_counter() - t0
    dot_bad = int(np.count_nonzero(d_bits(spec, engine_dot(backend, spec, *vec))
                                   != d_bits(spec, oracle_dot(spec, *vec))))
    g = inp.gemm()
    gemm_bad = int(np.count_nonzero(d_bits(spec, engine_gemm(backend, spec, *g))
                                    != d_bits(spec, oracle_gemm(spec, *g))))
    return dict(entry=spec.name, vectors=inp.count, k=inp.k, dot_mismatches=dot_bad, gemm_outputs=g[2].size,
                gemm_mismatches=gemm_bad, gemm_kernel=gemm_kernel(spec), seconds=round(time.perf_counter() - t0, 2),
                generate_seconds=round(t_gen, 2))


# --- digest mode --------------------------------------------------------------------------------

def chunk_hashes(spec, out: np.ndarray, chunk: int) -> list[str]:
    out = d_bits(spec, out)
    return [bits_hash(out[lo:lo + chunk]) for lo in range(0, len(out), chunk)]


def digest_datapath(name: str, count: int, per_family: int, seed: int, chunk: int, backend: str,
                    dump_chunks: tuple = (), deadline: float | None = None) -> dict:
    """The engine's digest of one datapath (``skipped`` past ``deadline``, a time.time() stamp)."""
    from tcnumerics.catalog import get_instruction

    if deadline is not None and time.time() > deadline:
        return dict(entry=name, skipped="deadline")
    spec = get_instruction(name)
    t0 = time.perf_counter()
    inp = generate_inputs(spec, count, per_family, seed)
    vec = inp.vectors()
    t1 = time.perf_counter()
    out = d_bits(spec, engine_dot(backend, spec, *vec))
    g = inp.gemm()
    gemm_out = d_bits(spec, engine_gemm(backend, spec, *g))
    t2 = time.perf_counter()
    record = dict(entry=name, k=inp.k, vectors=inp.count, input_hash=inp.digest(),
                  dot_chunks=chunk_hashes(spec, out, chunk), gemm_shape=list(gemm_out.shape),
                  gemm_kernel=gemm_kernel(spec), gemm_hash=bits_hash(gemm_out),
                  generate_seconds=round(t1 - t0, 3), engine_seconds=round(t2 - t1, 3),
                  hash_seconds=round(time.perf_counter() - t2, 3))
    if dump_chunks:
        record["dumps"] = {str(j): d_bits(spec, out[j * chunk:(j + 1) * chunk]).astype(
            out.dtype.newbyteorder("<")).tobytes().hex() for j in dump_chunks}
    return record


def digest_or_error(name: str, *args) -> dict:
    """``digest_datapath``, with a failure kept as the datapath's record (the other datapaths go on)."""
    try:
        return digest_datapath(name, *args)
    except Exception as exc:  # noqa: BLE001 - any failure is the datapath's verdict, named in the JSON
        return dict(entry=name, error=f"{type(exc).__name__}: {exc}"[:2000])


def _worker_init() -> None:
    # one process per device core: numpy/BLAS threads would only fight over the same cores
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def run_digests(names: list[str], args, deadline: float | None):
    """Yield (index, record) as datapaths finish: in this process, or spread over ``--workers``."""
    dumps = _parse_dumps(args.dump)
    common = (args.count, args.per_family, args.seed, args.chunk, args.backend)
    if args.workers <= 1:
        for i, name in enumerate(names):
            yield i, digest_or_error(name, *common, tuple(dumps.get(name, ())), deadline)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn: a forked child would inherit the parent's CUDA/OpenMP state
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_worker_init) as pool:
        futures = {pool.submit(digest_or_error, name, *common, tuple(dumps.get(name, ())), deadline): i
                   for i, name in enumerate(names)}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()


def _parse_dumps(items: list[str] | None) -> dict[str, list[int]]:
    dumps: dict[str, list[int]] = {}
    for item in items or ():
        name, sep, j = item.rpartition(":")
        if not sep or not j.isdigit():
            raise SystemExit(f"--dump: expected ENTRY:CHUNK (a chunk number), got {item!r}")
        dumps.setdefault(name, []).append(int(j))
    return dumps


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _device_name(backend: str) -> str:
    if backend == "host":
        return f"host build of the CUDA source (g++) on {platform.machine()}, not a GPU"
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    return props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])


def digest_header(args, names: list[str]) -> dict:
    from tcnumerics.engines._cuda_source import KERNEL_SOURCE

    return dict(format=DIGEST_FORMAT, backend=args.backend, device=_device_name(args.backend),
                seed=args.seed, count=args.count, per_family=args.per_family, chunk=args.chunk,
                arch=args.arch, skip_arch=args.skip_arch, only=args.only, limit=args.limit,
                skip_first=args.skip_first, numpy=np.__version__, python=platform.python_version(),
                git_commit=_git_commit(), kernel_source_hash=bits_hash(np.frombuffer(KERNEL_SOURCE.encode(), np.uint8)),
                datapaths=names)


def select_names(args) -> list[str]:
    """The datapath names this run covers (the checker recomputes the same list from the header)."""
    names = [spec.name for spec in distinct_entries(args.arch, args.skip_arch)]
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - set(names)
        if unknown:
            raise SystemExit(f"--only: not distinct datapaths of this selection: {', '.join(sorted(unknown))}")
        names = [n for n in names if n in wanted]
    names = names[args.skip_first:]
    return names[:args.limit] if args.limit else names


def write_digest(path: str, header: dict, records: dict, wall: float) -> None:
    done = [records[i] for i in sorted(records)]
    unfinished = any("skipped" in r or "error" in r for r in done)
    body = dict(header, complete=len(done) == len(header["datapaths"]) and not unfinished,
                wall_seconds=round(wall, 1), records=done)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(body, f, indent=0)
    os.replace(tmp, path)  # a run stopped mid-write keeps the previous complete file


def main_digest(args) -> int:
    t0 = time.time()
    names = select_names(args)
    header = digest_header(args, names)
    os.makedirs(os.path.dirname(os.path.abspath(args.digest)), exist_ok=True)
    deadline = t0 + args.deadline if args.deadline else None
    print(f"{len(names)} distinct datapaths, {args.count} vectors each, backend {args.backend}, "
          f"{args.workers} worker(s) -> {args.digest}", flush=True)
    records: dict[int, dict] = {}
    for i, record in run_digests(names, args, deadline):
        records[i] = record
        if "error" in record:
            print(f"  {record['entry']:60s} ERROR {record['error'][:300]}", flush=True)
        elif "skipped" not in record and not args.quiet:
            print(f"  {record['entry']:60s} {record['vectors']:8d} gen {record['generate_seconds']:5.2f} s "
                  f"engine {record['engine_seconds']:5.2f} s", flush=True)
        write_digest(args.digest, header, records, time.time() - t0)
    skipped = [r["entry"] for r in records.values() if "skipped" in r]
    failed = [r["entry"] for r in records.values() if "error" in r]
    done = [r for r in records.values() if "input_hash" in r]
    if done:
        slow = max(done, key=lambda r: r["generate_seconds"] + r["engine_seconds"])
        print(f"per datapath: generation {sum(r['generate_seconds'] for r in done):.1f} s, engine (compile, copy, "
              f"run) {sum(r['engine_seconds'] for r in done):.1f} s, hashing {sum(r['hash_seconds'] for r in done):.1f}"
              f" s in all; slowest {slow['entry']} {slow['generate_seconds'] + slow['engine_seconds']:.1f} s")
    print(f"digested {len(records) - len(skipped) - len(failed)} of {len(names)} datapaths in "
          f"{time.time() - t0:.1f} s; {len(skipped)} skipped at the deadline, {len(failed)} failed")
    return 1 if failed else 2 if skipped else 0


def main_direct(args) -> int:
    from tcnumerics.catalog import get_instruction

    names = select_names(args)
    print(f"{len(names)} distinct GPU datapaths, {args.count} vectors each", flush=True)
    rows, total, bad = [], 0, 0
    for name in names:
        r = check(get_instruction(name), args.count, args.per_family, args.seed, args.backend)
        rows.append(r)
        total += r["vectors"] + r["gemm_outputs"]
        bad += r["dot_mismatches"] + r["gemm_mismatches"]
        print(f"  {r['entry']:52s} dot {r['vectors']:8d} bad {r['dot_mismatches']:3d}  gemm {r['gemm_kernel']:6s} "
              f"{r['gemm_outputs']:6d} bad {r['gemm_mismatches']:3d}  {r['seconds']:6.1f} s", flush=True)
        if args.json:  # after every datapath: a run stopped at a time limit keeps what it checked
            with open(args.json, "w") as f:
                json.dump(dict(rows=rows, total=total, mismatches=bad, datapaths=len(names), seed=args.seed,
                               backend=args.backend), f, indent=1)
    print(f"total comparisons {total}, mismatches {bad}")
    return 0 if bad == 0 else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=1 << 20, help="vectors per datapath")
    p.add_argument("--per-family", type=int, default=2048, help="generated vectors per input family")
    p.add_argument("--arch", default=None, help="only this architecture's entries (e.g. hopper)")
    p.add_argument("--skip-arch", default=None, help="leave this architecture's entries out")
    p.add_argument("--only", default=None, help="comma-separated datapath names (of the selection) to run")
    p.add_argument("--limit", type=int, default=0, help="at most this many datapaths (0: all)")
    p.add_argument("--skip-first", type=int, default=0, help="leave out the first N datapaths (checked before)")
    p.add_argument("--seed", type=int, default=20261124)
    p.add_argument("--backend", choices=("cuda", "host"), default="cuda",
                   help="engine under test: the GPU, or the same CUDA source compiled with g++ for the CPU")
    p.add_argument("--json", default=None, help="direct mode: write the counts here")
    p.add_argument("--digest", default=None, help="digest mode: write the engine's digest JSON here")
    p.add_argument("--chunk", type=int, default=1 << 16, help="digest mode: vectors per output hash")
    p.add_argument("--workers", type=int, default=1, help="digest mode: processes (each its own CUDA context)")
    p.add_argument("--deadline", type=float, default=0,
                   help="digest mode: start no datapath after this many seconds (0: none)")
    p.add_argument("--dump", action="append", help="digest mode: ENTRY:CHUNK whose output bits to store")
    p.add_argument("--quiet", action="store_true", help="digest mode: print failures and the summary only")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for name in ("count", "per_family", "chunk"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')}: must be positive, got {getattr(args, name)}")
    if args.digest:
        return main_digest(args)
    return main_direct(args)


if __name__ == "__main__":
    sys.exit(main())
