"""Sun et al.'s Fig. 17: the error along a chain of MMAs, drawn to examples/chain_matmul.png.

Run: python examples/chain_matmul.py [TRIALS]     (needs matplotlib; 1000 trials take a few minutes)

The committed figure was drawn with 1000 trials, the paper's count.
"""

import sys
from argparse import Namespace
from pathlib import Path

from tcnumerics.experiments import chain

trials = int(sys.argv[1]) if len(sys.argv) > 1 else 100
target = Path(__file__).with_name("chain_matmul.png")
args = Namespace(trials=trials, length=20, instruction=None, arch=None, format=None, rng="paper", seed=123456,
                 plot=None, force=False, quiet=False)
rows = chain.run(args)
print(chain.render(rows))
try:
    chain.plot(rows, str(target))
    print(f"figure written to {target}")
except ImportError:
    print("matplotlib is not installed (pip install -e \".[plot]\"): no figure drawn")
