"""A naive per-operation IEEE simulator against the fused Volta, Ampere and Hopper units.

Run: python examples/fused_vs_ieee.py      (about half a minute)

Prints, per input family, how often the naive model's bits differ from each unit's, how
far apart they are in ulps, and which side is closer to the exact dot product.
"""

from argparse import Namespace

from tcnumerics.experiments import fused_vs_ieee

args = Namespace(vectors=1000, family=None, accumulator=None, instruction=None, seed=123456, quiet=False)
print(fused_vs_ieee.render(fused_vs_ieee.run(args)))
