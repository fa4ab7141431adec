"""Replay captured model GEMM calls through an emulation and count exact / flagged / silent calls.

    python lab/device_models/replay.py vectors/models/*.npz                 # library mode, emulate("hopper")
    python lab/device_models/replay.py FILES --instruction hopper.wgmma.m64n8k16.f32.bf16.bf16 --dtype bfloat16

Exit status 1 if any call is silently wrong (modelled, but bits differ).
"""

from __future__ import annotations

import argparse
import sys

import tcnumerics.torch as tct
from tcnumerics.torch.replay import replay


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--instruction", help="unit mode on this instruction instead of library mode")
    ap.add_argument("--dtype", help="only calls whose A operand has this torch dtype (e.g. bfloat16)")
    ap.add_argument("--op", help="only calls of this aten op")
    args = ap.parse_args(argv)
    emulation = tct.emulate(instruction=args.instruction) if args.instruction else tct.emulate("hopper")

    def select(meta):
        return (args.dtype is None or meta["a"]["dtype"] == args.dtype) and (args.op is None or meta["op"] == args.op)

    summary = replay(args.files, emulation, select=select)
    print(summary)
    return 1 if summary.count("silent") else 0


if __name__ == "__main__":
    sys.exit(main())
