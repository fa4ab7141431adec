"""Full equivalence run: fast engine == reference engine on many vectors per catalog entry.

Per entry: every input family of ``tcnumerics.vectors.families`` (specials, subnormals,
overflow to inf, cancellation, wide spans, accumulator-dominant ties) plus uniform random
bit patterns, with K chained over two instructions where C and D share a format, and a
GEMM through ``gemm_bits`` compared with the reference grid.  Prints one line per entry and
a summary; exits 1 on any difference (naming the entry, family and first vector in hex).

    python benchmarks/fast_equivalence.py --vectors 100000            # every entry
    python benchmarks/fast_equivalence.py --vectors 100000 --match hopper.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vectors", type=int, default=100_000, help="vectors per entry (default 100000)")
    p.add_argument("--match", default="", help="only entries whose name contains this")
    p.add_argument("--seed", type=int, default=4)
    p.add_argument("--chunk", type=int, default=25_000)
    args = p.parse_args(argv)
    if args.vectors < 1 or args.chunk < 1:
        print("--vectors, --chunk: must be positive", file=sys.stderr)
        return 2
    from tcnumerics.catalog import all_instructions
    from tcnumerics.engines import fast, reference
    from tcnumerics.vectors.families import families_for, generate

    rng = np.random.default_rng(args.seed)
    specs = [s for s in all_instructions() if args.match in s.name and fast.unsupported_reason(s) is None]
    skipped = sum(1 for s in all_instructions() if args.match in s.name and fast.unsupported_reason(s) is not None)
    print(f"{len(specs)} entries run by the fast kernels ({skipped} others fall back to the reference); "
          f"{args.vectors} vectors each, seed {args.seed}, backend {fast.backend()}", flush=True)
    total = 0
    t0 = time.perf_counter()
    for spec in specs:
        k = 2 * spec.k if spec.c_format == spec.d_format else spec.k
        kinds = families_for(spec) + ["random-bits"]
        done = 0
        while done < args.vectors:
            for family in kinds:
                n = min(args.chunk // len(kinds) + 1, args.vectors - done)
                if n <= 0:
                    break
                if family == "random-bits":
                    a, b, c = (rng.integers(0, 1 << f.container_bits, shape, dtype=np.uint64).astype(f.container_dtype)
                               for f, shape in ((spec.a_format, (n, k)), (spec.b_format, (n, k)), (spec.c_format, n)))
                else:
                    a, b, c = generate(spec, family, n, rng, k=k)
                got, want = fast.dot_bits(spec, a, b, c), reference.dot_bits(spec, a, b, c)
                bad = np.flatnonzero(got != want)
                if bad.size:
                    i = bad[0]
                    print(f"MISMATCH {spec.name} / {family}: {bad.size} of {n}; a={[hex(int(x)) for x in a[i]]} "
                          f"b={[hex(int(x)) for x in b[i]]} c={hex(int(c[i]))} fast={hex(int(got[i]))} "
                          f"reference={hex(int(want[i]))}", flush=True)
                    return 1
                done += n
        M, N = 24, 40
        a_rows, b_cols = generate(spec, kinds[0], M + N, rng, k=k)[:2]
        c = rng.integers(0, 1 << spec.c_format.container_bits, (M, N), dtype=np.uint64).astype(spec.c_format.container_dtype)
        grid = reference.dot_bits(spec, np.repeat(a_rows[:M], N, axis=0), np.tile(b_cols[M:], (M, 1)), c.ravel())
        if not np.array_equal(fast.gemm_bits(spec, a_rows[:M], b_cols[M:], c).ravel(), grid):
            print(f"MISMATCH {spec.name}: gemm_bits differs from the reference grid", flush=True)
            return 1
        if not any(f.is_integer for f in (spec.a_format, spec.b_format, spec.c_format)):
            # model-like operands (N(0,1) times a per-row / per-column scale): the GEMM kernel's int32 route
            a_rows, b_cols, c = (f.from_float((rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-20, 21, shape[:1]))[
                :, None] if len(shape) == 2 else rng.standard_normal(shape)).astype(np.float32))
                for f, shape in ((spec.a_format, (M, k)), (spec.b_format, (N, k)), (spec.c_format, (M, N))))
            grid = reference.dot_bits(spec, np.repeat(a_rows, N, axis=0), np.tile(b_cols, (M, 1)), c.ravel())
            if not np.array_equal(fast.gemm_bits(spec, a_rows, b_cols, c).ravel(), grid):
                print(f"MISMATCH {spec.name}: gemm_bits on model-like operands differs from the reference grid",
                      flush=True)
                return 1
            total += M * N
        total += done + M * N
        print(f"ok {spec.name}: {done} vectors + {M}x{N} GEMMs", flush=True)
    print(f"all equal: {total} comparisons over {len(specs)} entries in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
