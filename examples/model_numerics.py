"""A character-level MLP trained on the CPU, evaluated on emulated matrix units, and trained on FP8 two ways.

    python examples/model_numerics.py          # writes examples/model_numerics.png, prints the table

The same as ``tcnumerics reproduce model-numerics --plot examples/model_numerics.png --force``; see
``tcnumerics.experiments.model_numerics`` for the model, data (Python's own documentation text) and settings.
"""

import sys
from pathlib import Path

from tcnumerics.experiments.cli import run_experiment
from tcnumerics.experiments.model_numerics import render

if __name__ == "__main__":
    out = Path(__file__).with_suffix(".png")
    rows, args, _ = run_experiment("model-numerics", ["--quiet", "--plot", str(out), "--force"] + sys.argv[1:])
    print(render(rows, args))
    print(f"figure: {out}")
