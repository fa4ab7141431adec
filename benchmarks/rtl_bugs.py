"""Injected RTL bugs vs golden vectors: adequate set and a random set of the same size, per parameter set.

    python benchmarks/rtl_bugs.py [--sets volta,hopper_bf16,hopper_fp8] [--seed 0] [--check N]
                                  [--simulator icarus|verilator]

Prints, per parameter set, whether the correct RTL passes the adequate set, the random set
and N vectors of every family (``--check``), then per bug the first failing adequate vector
(index and family) and whether the random set catches it; bugs argued unable to show on a
parameter set are marked (``rtlbench.UNREACHABLE``; ``benchmarks/rtl_unreachable.py``
searches for them).  All units run in one Icarus simulation per set (``rtlsweep``).
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

from tcnumerics.vectors.adequate import adequate_set
from tcnumerics.vectors.families import expected_d, families_for, generate
from tcnumerics.vectors.io import VectorSet, write_hex
from tcnumerics.vectors.rtlbench import BUGS, PARAMETER_SETS, UNREACHABLE
from tcnumerics.vectors.rtlsweep import iverilog_available, sweep


def random_set(name, n, seed):
    rng = np.random.default_rng(seed + 1)
    parts = [generate(name, ("normal", "bits")[i % 2], 1, rng) for i in range(n)]
    a, b, c = (np.concatenate([p[j] for p in parts]) for j in range(3))
    fam = np.array([("normal", "bits")[i % 2] for i in range(n)])
    with np.errstate(all="ignore"):
        d = expected_d(name, a, b, c, engine="reference")
    return VectorSet(a, b, c, d, {"instruction": name, "K": a.shape[1]}, {"family": fam})


def family_set(name, count, seed):
    rng = np.random.default_rng(seed + 2)
    fams = families_for(name)
    parts = [generate(name, f, count, rng) for f in fams]
    a, b, c = (np.concatenate([p[j] for p in parts]) for j in range(3))
    with np.errstate(all="ignore"):
        d = expected_d(name, a, b, c, engine="reference")
    return VectorSet(a, b, c, d, {"instruction": name, "K": a.shape[1]},
                     {"family": np.repeat(np.array(fams), count)})


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--sets", default=",".join(PARAMETER_SETS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", type=int, default=100)
    p.add_argument("--simulator", default="icarus", choices=["icarus", "verilator"])
    args = p.parse_args(argv)
    missing = iverilog_available() if args.simulator == "icarus" else (
        "" if shutil.which("verilator") else "verilator not on PATH")
    if missing:
        print(f"skipped: {missing}")
        return 0
    work = tempfile.mkdtemp(prefix="tcn-rtl-")
    for ps in args.sets.split(","):
        name, params = PARAMETER_SETS[ps]
        ad = adequate_set(name, seed=args.seed)
        sets = {"adequate": ad.to_vector_set(), "random": random_set(name, ad.n, args.seed),
                "families": family_set(name, args.check, args.seed)}
        res = {key: sweep(params, vs, list(BUGS), os.path.join(work, f"{ps}-{key}"), args.simulator)
               for key, vs in sets.items()}
        print(f"{ps} ({name}): adequate set {ad.n} vectors (score {ad.score:.2f}); correct RTL: "
              + ", ".join(f"{k} {r['vectors']} {'pass' if r['correct'] is None else 'FAIL'}" for k, r in res.items()))
        caught = {"adequate": 0, "random": 0}
        for bug in BUGS:
            cells = []
            for key in ("adequate", "random"):
                f = res[key]["bugs"][bug]
                caught[key] += f is not None
                cells.append(f"{key}: " + (f"vector {f['index']} ({f['family']})" if f else "passes (missed)"))
            note = "  [unreachable here]" if bug in UNREACHABLE[ps] else ""
            print(f"  {bug:28s} " + "; ".join(cells) + note)
        reach = len(BUGS) - len(UNREACHABLE[ps])
        print(f"  caught: adequate {caught['adequate']}/{len(BUGS)} ({reach} can show), "
              f"random (same size) {caught['random']}/{len(BUGS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
