"""Device driver: raw register-level experiments for fragment layouts that failed self-check.

For each target: (1) the self-check's random integer tiles with the raw D registers;
(2) A one-hot: every A register slot set to 1 in turn, every B slot 1, C 0;
(3) B one-hot likewise with A all ones.  Raw register images are saved to
<out>/layout_<stem>.npz for analysis on the CPU.
    PYTHONPATH=src python3 lab/device/layout_probe.py --out "$OUT" NAME...
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def one_hot_regs(threads: int, regs: int, slots: int, bits: int, one: int) -> np.ndarray:
    """[threads*regs*slots, threads, regs] images, each with one slot holding ``one``."""
    n = threads * regs * slots
    out = np.zeros((n, threads, regs), np.uint32)
    i = 0
    for th in range(threads):
        for r in range(regs):
            for s in range(slots):
                out[i, th, r] = np.uint32(one << (s * bits))
                i += 1
    return out


def all_regs(count: int, threads: int, regs: int, slots: int, bits: int, one: int) -> np.ndarray:
    word = 0
    for s in range(slots):
        word |= one << (s * bits)
    return np.full((count, threads, regs), word, np.uint32)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("names", nargs="+")
    args = ap.parse_args()
    from tcnumerics.probe.capture import file_stem
    from tcnumerics.probe.runtime import Probe, _encode, _small_ints

    for name in args.names:
        p = Probe(name)
        t = p.target
        rng = np.random.default_rng(1)
        tiles = 8
        a = _small_ints(rng, t.atype, (tiles, t.m, t.a_k))
        b = _small_ints(rng, t.btype, (tiles, t.n, t.k))
        c = _small_ints(rng, t.ctype, (tiles, t.m, t.n), accumulator=True)
        A, B, C = (_encode(ty, v) for ty, v in ((t.atype, a), (t.btype, b), (t.ctype, c)))
        e = np.full((tiles, 32), 0x44444444, np.uint32)
        a_regs, b_regs, c_regs = t.a.pack(A), t.b.pack(B), t.c_fragment.pack(C)
        d_rand = p._execute(a_regs, b_regs, c_regs, e)
        one_a = int(_encode(t.atype, np.ones(1, np.int64))[0])
        one_b = int(_encode(t.btype, np.ones(1, np.int64))[0])
        sa, sb = t.a.coords.shape[2], t.b.coords.shape[2]
        ha = one_hot_regs(32, t.a.registers, sa, t.a.elem_bits, one_a)
        hb = one_hot_regs(32, t.b.registers, sb, t.b.elem_bits, one_b)
        zc = np.zeros((len(ha), 32, t.c_fragment.registers), np.uint32)
        d_ha = p._execute(ha, all_regs(len(ha), 32, t.b.registers, sb, t.b.elem_bits, one_b), zc,
                          np.full((len(ha), 32), 0x44444444, np.uint32))
        zc = np.zeros((len(hb), 32, t.c_fragment.registers), np.uint32)
        d_hb = p._execute(all_regs(len(hb), 32, t.a.registers, sa, t.a.elem_bits, one_a), hb, zc,
                          np.full((len(hb), 32), 0x44444444, np.uint32))
        np.savez_compressed(os.path.join(args.out, f"layout_{file_stem(name)}.npz"), a=a, b=b, c=c,
                            a_regs=a_regs, b_regs=b_regs, c_regs=c_regs, d_rand=d_rand, d_ha=d_ha, d_hb=d_hb)
        print(name, "done", d_ha.shape, d_hb.shape, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
