"""Sun et al.'s tables XII-XV on the modelled A100, and what the paper's numbers say about the datapath.

Run: python examples/elementwise_tables.py          (about 10 s on a laptop)

1. Every cell of the four tables, next to the paper's value, with the reason the unit
   model gives (the same as ``tcnumerics reproduce elementwise``).
2. A what-if: the BF16 accumulation cell (init BF16) is 1.89e-8 in the paper.  On the
   paper's own inputs, only a datapath keeping 24 fraction bits with round-toward-zero
   output gives that number -- an independent check of the published Ampere parameters.
"""

from argparse import Namespace
from dataclasses import replace

from tcnumerics.catalog import get_instruction
from tcnumerics.experiments import elementwise

args = Namespace(instruction=None, arch=None, format=None, samples=None, rng="paper", seed=123456, quiet=True)
rows = elementwise.run(args)
print(elementwise.render(rows))

print("\nBF16 accumulation, init BF16 (paper: 1.89e-08) for other datapaths:")
base = get_instruction("ampere.mma.m16n8k8.f32.bf16.bf16.f32")
for frac_bits in (23, 24, 25, 26):
    for rounding in ("rz", "rne"):
        spec = replace(base, model=base.model.with_(frac_bits=frac_bits, output_rounding=rounding))
        err = elementwise.profile(spec, "accumulation", "low", samples=1000)[0]["mean_abs_error"]
        mark = "  <- the paper's value" if abs(err / 1.89e-8 - 1) < 0.03 else ""
        print(f"  frac_bits={frac_bits} output {rounding.upper():<3}  mean |error| = {err:.3g}{mark}")
