"""Static instruction counts of the tiled GEMM kernel's PTX for one unit, per build (no GPU needed; nvcc).

Not a speed figure: a check that a change removes the instructions it means to from the kernel's loops
(the PTX of the unrolled loop bodies, before ptxas).  ``--rev`` adds the kernel source of a git revision.

    python3 benchmarks/kernel_ptx_counts.py --unit hopper.wgmma.m64n128k32.f32.e4m3.e4m3 --rev d03b66a
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KEYS = ("fma.rz.f32", "max.f32", "min.f32", "max.s32", "add.s32", "mma.sync")


def _old_source(rev: str) -> str:
    text = subprocess.run(["git", "show", f"{rev}:src/tcnumerics/engines/_cuda_source.py"], capture_output=True,
                          text=True, check=True).stdout
    ns: dict = {}
    exec(compile(text.replace("from __future__ import annotations", ""), rev, "exec"), ns)  # our own file
    return ns["KERNEL_SOURCE"]


def counts(text: str, nvcc: str) -> collections.Counter:
    with tempfile.TemporaryDirectory() as tmp:
        src, ptx = Path(tmp) / "k.cu", Path(tmp) / "k.ptx"
        src.write_text(text)
        subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "-ptx", "-o", str(ptx), str(src)], check=True,
                       capture_output=True)
        body = ptx.read_text()
    return collections.Counter(m.group(1) for m in re.finditer(r"^\s+(?:@!?%p\d+ )?([a-z][\w.]*)", body, re.M))


def main(argv: list[str] | None = None) -> int:
    from tcnumerics.catalog import get_instruction
    from tcnumerics.engines import _cuda_build as build
    from tcnumerics.engines import _cuda_source, cuda

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--unit", default="hopper.wgmma.m64n128k32.f32.e4m3.e4m3")
    p.add_argument("--rev", default=None, help="also count this git revision's kernel source (default build)")
    args = p.parse_args(argv)
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("no nvcc", file=sys.stderr)
        return 1
    spec = get_instruction(args.unit)
    plan = cuda._plan(spec)
    flags = "".join(f"#define {f} {int(n == 'gemm_tiled')}\n" for n, f in build._KERNEL_FLAGS.items())
    builds = [(f"{args.rev} (auto, alu)", _old_source(args.rev), "alu")] if args.rev else []
    builds += [("this tree (auto, alu)", _cuda_source.KERNEL_SOURCE, "alu"),
               ("this tree (auto, mma)", _cuda_source.KERNEL_SOURCE, "mma")]
    print(f"{spec.name}, gemm_tiled, tile {build.DEVICE_TILE}: PTX instructions (static)")
    for label, source, exp in builds:
        header = build.config_header(spec, plan, build.DEVICE_TILE, exp_pass=exp)
        c = counts("#define USE_DPX 1\n" + flags + header + source, nvcc)
        shown = {k: sum(v for op, v in c.items() if op.startswith(k)) for k in KEYS}
        loads = sum(v for op, v in c.items() if op.startswith("ld.shared"))
        print(f"  {label:28s} " + "  ".join(f"{k} {v}" for k, v in shown.items()) +
              f"  ld.shared {loads}  all {sum(c.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
