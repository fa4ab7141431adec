"""Regenerate docs/torch.md's model-numerics table from the command that prints it.

    python lab/docs_model_numerics.py            # run the study, print the table (about 3 min on 2 cores)
    python lab/docs_model_numerics.py --docs     # ... and write it, its environment line and the FP8
                                                   #     training figure of the prose into docs/torch.md

The table is ``tcnumerics reproduce model-numerics``'s own output (its ``render``); nothing is typed by hand.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import re
import sys
import textwrap
import time

# The native FP32 training runs PyTorch's CPU kernels, whose bits depend on the vector ISA that ATen dispatches
# to: 200 training steps on an AVX-512 machine give other weights under ATEN_CPU_CAPABILITY=avx2 than under its
# own avx512, while 1 and 2 threads agree, and so does MKL limited to AVX2 (issue 33: the table drifted between
# environments).  Pinned to AVX2, which every x86-64 machine of the last decade has, before torch is imported
# (MKL's conditional reproducibility too, as a guard); the line above the table names what ran.
os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
os.environ.setdefault("MKL_CBWR", "AVX2")

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "torch.md"
# the paragraph the table follows, its fenced block, and the prose figure taken from the table's last line
_HEAD = re.compile(r"^printed \(\d{4}-\d\d-\d\d;[^)]*\):\n\n```\n.*?```\n", re.M | re.S)
_GAP = re.compile(r"(difference over the \d+ steps is )[-+0-9.e]+")


def _environment(seconds: float) -> str:
    import ml_dtypes
    import numba
    import numpy
    import torch

    m, s = divmod(round(seconds), 60)
    return (f"printed ({datetime.date.today()}; Python {platform.python_version()}, torch {torch.__version__}, "
            f"numpy {numpy.__version__}, numba {numba.__version__}, ml_dtypes {ml_dtypes.__version__}; "
            f"CPU kernels {torch.backends.cpu.get_cpu_capability()}, MKL_CBWR={os.environ.get('MKL_CBWR', '')}; "
            f"{os.cpu_count()} cores, {m} min {s} s):")


def splice(doc: str, table: str, environment: str) -> str:
    """``doc`` with the table block, its environment line and the prose's FP8 training gap replaced."""
    if len(_HEAD.findall(doc)) != 1:
        raise SystemExit(f"{DOC}: expected one 'printed (...):' line followed by the table's fenced block")
    environment = "\n".join(textwrap.wrap(environment, 116))
    doc = _HEAD.sub(lambda _: f"{environment}\n\n```\n{table.rstrip()}\n```\n", doc)
    gap = re.search(r"largest loss difference ([0-9.e+-]+)", table)
    if gap:
        value = float(gap.group(1))
        doc = _GAP.sub(lambda m: m.group(1) + f"{value:.2e}".replace("e-0", "e-"), doc)
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", action="store_true", help="write the table into docs/torch.md")
    args = parser.parse_args(argv)
    from tcnumerics.experiments.cli import run_experiment

    t0 = time.perf_counter()
    rows, exp_args, module = run_experiment("model-numerics", ["--quiet"])
    table = module.render(rows, exp_args)
    print(table)
    if args.docs:
        text = DOC.read_text()
        DOC.write_text(splice(text, table, _environment(time.perf_counter() - t0)))
        print(f"{DOC}: table written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
