"""Mutation-adequate golden vectors per instruction: set size, mutation score, random baseline.

    python benchmarks/adequacy.py [--seed 0] [--per-family 256] [--cap 4096]
    python benchmarks/adequacy.py --all [--seeds 0,1,2,3] [--cap 4096] [--no-random]

For each listed Hopper / Ampere / Volta / Blackwell FP16, BF16, FP8, TF32 and int8 entry:
the mutants (non-equivalent / proven equivalent), the adequate set's size and mutation
score (``tcnumerics.vectors.adequate.adequate_set``), and how many random vectors
(alternating ``normal`` and ``bits`` draws) it takes to kill as many mutants (">cap (k)":
not reached within cap vectors, k killed).  Prints a markdown table (docs/hardware.md).

``--all``: every entry of the four architectures that ``mutants`` covers
(``adequate.adequacy_entries``: dense, unscaled, fused or integer; FP4/FP6 operands left out),
each at every seed of ``--seeds`` (sizes as min-max over the seeds, the lowest score), then
per architecture the entries at score 1.0 for every seed and the range of set sizes.
"""

import argparse
import sys
import time

from tcnumerics.vectors.adequate import ARCHS, adequacy_entries, adequate_set, random_to_match

ENTRIES = [
    "hopper.wgmma.m64n8k16.f32.f16.f16", "hopper.wgmma.m64n8k16.f32.bf16.bf16",
    "hopper.wgmma.m64n8k32.f32.e4m3.e4m3", "hopper.wgmma.m64n8k32.f32.e5m2.e5m2",
    "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", "hopper.wgmma.m64n8k8.f32.tf32.tf32",
    "hopper.wgmma.m64n8k32.s32.s8.s8", "hopper.mma.m16n8k32.satfinite.s32.s8.s8.s32",
    "ampere.mma.m16n8k16.f32.f16.f16.f32", "ampere.mma.m16n8k16.f16.f16.f16.f16",
    "ampere.mma.m16n8k16.f32.bf16.bf16.f32", "ampere.mma.m16n8k8.f32.tf32.tf32.f32",
    "ampere.mma.m16n8k32.s32.s8.s8.s32",
    "volta.mma.m8n8k4.f32.f16.f16.f32", "volta.mma.m8n8k4.f16.f16.f16.f16",
    "volta.wmma.m16n16k16.f32.f16.f16.f32",
    "blackwell.mma.m16n8k16.f32.f16.f16.f32", "blackwell.mma.m16n8k16.f32.bf16.bf16.f32",
    "blackwell.mma.m16n8k32.f32.e4m3.e4m3.f32", "blackwell.tcgen05.mma.kind::f8f6f4.f32.e4m3.e4m3",
    "blackwell.tcgen05.mma.kind::f16.f32.bf16.bf16", "blackwell.tcgen05.mma.kind::tf32.f32.tf32.tf32",
]


def _random(name, killed, total, seed, cap, skip):
    if skip:
        return "-"
    count, got = random_to_match(name, killed, seed=seed, cap=cap)
    return f"{count}" if count is not None else f">{cap} ({got}/{total} killed)"


def listed(args) -> int:
    """The table of ``ENTRIES`` at one seed.  Returns how many entries fall short of score 1.0."""
    t0 = time.time()
    short = 0
    print("| instruction | mutants (equivalent) | adequate set | score | random vectors for the same kills |")
    print("|---|---|---|---|---|")
    for name in ENTRIES:
        s = adequate_set(name, seed=args.seed, per_family=args.per_family)
        killed = len(s.mutants) - len(s.survivors)
        rnd = _random(name, killed, len(s.mutants), args.seed, args.cap, args.no_random)
        surv = f" (survive: {', '.join(s.survivors)})" if s.survivors else ""
        short += bool(s.survivors)
        print(f"| `{name}` | {len(s.mutants)} ({len(s.equivalent)}) | {s.n} | {s.score:.2f}{surv} | {rnd} |")
    print(f"\n{len(ENTRIES)} entries, seed {args.seed}, {args.per_family} candidates per family, "
          f"{time.time() - t0:.0f} s")
    return short


def every_entry(args) -> int:
    """Every covered entry at every seed; per-architecture summary.  Returns how many entries fall short."""
    t0 = time.time()
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"| instruction | mutants (equivalent) | set size (seeds {args.seeds}) | lowest score | random vectors |")
    print("|---|---|---|---|---|")
    per_arch: dict = {arch: [] for arch in ARCHS}
    for name in adequacy_entries():
        sets = [adequate_set(name, seed=seed, per_family=args.per_family) for seed in seeds]
        low = min(sets, key=lambda s: s.score)
        sizes = [s.n for s in sets]
        first = sets[0]
        rnd = _random(name, len(first.mutants) - len(first.survivors), len(first.mutants), seeds[0], args.cap,
                      args.no_random)
        surv = f" (survive at seed {low.seed}: {', '.join(low.survivors)})" if low.survivors else ""
        print(f"| `{name}` | {len(first.mutants)} ({len(first.equivalent)}) | {min(sizes)}-{max(sizes)} | "
              f"{low.score:.3f}{surv} | {rnd} |", flush=True)
        per_arch[name.split(".")[0]].append((low.score == 1.0, min(sizes), max(sizes), rnd[0].isdigit()))
    print()
    short = 0
    for arch, rows in ((arch, rows) for arch, rows in per_arch.items() if rows):
        ok = sum(r[0] for r in rows)
        short += len(rows) - ok
        rnd = "" if args.no_random else (f"; random draws reach the same kills within {args.cap} vectors "
                                         f"on {sum(r[3] for r in rows)}")
        print(f"{arch}: {len(rows)} entries, {ok} at score 1.0 for every seed, set sizes "
              f"{min(r[1] for r in rows)}-{max(r[2] for r in rows)}{rnd}")
    print(f"{sum(map(len, per_arch.values()))} entries, seeds {args.seeds}, {args.per_family} candidates per family, "
          f"{time.time() - t0:.0f} s")
    return short


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--all", action="store_true", help="every covered entry of the four architectures")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", default="0,1,2,3", help="with --all: the seeds (comma-separated)")
    p.add_argument("--per-family", type=int, default=256)
    p.add_argument("--cap", type=int, default=4096)
    p.add_argument("--no-random", action="store_true", help="leave out the random baseline")
    args = p.parse_args(argv)
    short = every_entry(args) if args.all else listed(args)
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
