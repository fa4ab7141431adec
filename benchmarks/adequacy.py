"""Mutation-adequate golden vectors per instruction: set size, mutation score, random baseline.

    python benchmarks/adequacy.py [--seed 0] [--per-family 256] [--cap 4096]

For each listed Hopper / Ampere / Volta / Blackwell FP16, BF16, FP8, TF32 and int8 entry:
the mutants (non-equivalent / proven equivalent), the adequate set's size and mutation
score (``tcnumerics.vectors.adequate.adequate_set``), and how many random vectors
(alternating ``normal`` and ``bits`` draws) it takes to kill as many mutants (">cap (k)":
not reached within cap vectors, k killed).  Prints a markdown table (docs/hardware.md).
"""

import argparse
import sys
import time

from tcnumerics.vectors.adequate import adequate_set, random_to_match

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


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-family", type=int, default=256)
    p.add_argument("--cap", type=int, default=4096)
    args = p.parse_args(argv)
    print("| instruction | mutants (equivalent) | adequate set | score | random vectors for the same kills |")
    print("|---|---|---|---|---|")
    t0 = time.time()
    for name in ENTRIES:
        s = adequate_set(name, seed=args.seed, per_family=args.per_family)
        killed = len(s.mutants) - len(s.survivors)
        count, got = random_to_match(name, killed, seed=args.seed, cap=args.cap)
        rnd = f"{count}" if count is not None else f">{args.cap} ({got}/{len(s.mutants)} killed)"
        surv = f" (survive: {', '.join(s.survivors)})" if s.survivors else ""
        print(f"| `{name}` | {len(s.mutants)} ({len(s.equivalent)}) | {s.n} | {s.score:.2f}{surv} | {rnd} |")
    print(f"\n{len(ENTRIES)} entries, seed {args.seed}, {args.per_family} candidates per family, "
          f"{time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
