"""Search for inputs that show the injected RTL bugs argued unreachable (rtlbench.UNREACHABLE).

    python benchmarks/rtl_unreachable.py [--sets volta,hopper_fp8] [--seed 0] [--quick]

For each parameter set and each bug argued unable to show there, builds vectors aimed at
the argument (exhaustive where the space is small) and replays them, with the model's
golden d, through the correct unit and the bug copy at once (``rtlsweep.sweep``, Icarus):

* ``codes``: every operand code of an 8-bit format (the RTL decides inf and NaN from one
  code) times 1, times 0, times itself, and beside its negation, each with C = +0, +inf,
  -inf, NaN and 1 (the inf rules: exhaustive over the codes);
* ``top``: C in the top binade (largest finite included) and every product at the format's
  largest magnitudes, all sign patterns drawn (overflow);
* ``bottom``: a product +2**e1 and a product -2**e2 one to F+3 binades below it, for every
  e1 the operand powers of two reach, C = +0; then all-zero products with C over every
  exponent field (the zero exponent: it can only matter where no nonzero term is above it);
* ``widest``: all products of one sign from the operand's top binade (at most 2**40) with C
  from half the largest product to 2**8 above it (the widest sums a group forms: the
  rounding branch for >= 24-bit sums).

A control replays the same search on a set where the bug can show (Hopper BF16) and must
catch it.  Prints, per search, the count of vectors and whether any tells a unit apart.
"""

import argparse
import sys
import tempfile
import time

import numpy as np

from tcnumerics.catalog import get_instruction
from tcnumerics.vectors.families import expected_d
from tcnumerics.vectors.io import VectorSet
from tcnumerics.vectors.rtlbench import PARAMETER_SETS, UNREACHABLE
from tcnumerics.vectors.rtlsweep import iverilog_available, sweep

SEARCH_OF = {"inf_times_zero_not_nan": "codes", "inf_minus_inf_not_nan": "codes", "overflow_saturates": "top",
             "zero_exponent_off_by_one": "bottom", "rounds_up_not_toward_zero": "widest"}
C_SPECIALS = np.array([0x00000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0x3F800000], np.uint32)


def _vs(name, a, b, c, family):
    with np.errstate(all="ignore"):
        d = expected_d(name, a, b, c, engine="reference")
    return VectorSet(a, b, c, d, {"instruction": name, "K": a.shape[1]}, {"family": np.full(len(c), family)})


def codes(name, rng, quick):
    """Every operand code x (8-bit formats; the control: every inf, zero, some NaNs and random codes) in
    four layouts -- x * 1; x * 1 with -x * 1; x * 0; x * x -- each with C = +0, +inf, -inf, NaN, 1."""
    spec = get_instruction(name)
    fa, fb = spec.a_format, spec.b_format
    every = np.arange(1 << fa.width, dtype=np.uint64)
    if len(every) > 256:
        dec = fa.decode(every.astype(fa.container_dtype) << fa.pad_bits)
        keep = (dec.kind == 1) | ((dec.kind == 2) & ((every & 0x3F) == 1)) | ((dec.kind == 0) & (dec.significand == 0))
        every = np.unique(np.concatenate([every[keep], rng.choice(every, 48)]))
    x = (every << np.uint64(fa.pad_bits)).astype(fa.container_dtype)
    one_b = fb.from_float(np.array([1.0]))[0]
    flip = fa.container_dtype((1 << (fa.width - 1)) << fa.pad_bits)
    n, k = len(x) * 4 * len(C_SPECIALS), spec.k
    a = np.zeros((n, k), fa.container_dtype)
    b = np.zeros((n, k), fb.container_dtype)
    xs = np.repeat(x, 4 * len(C_SPECIALS))
    layout = np.tile(np.repeat(np.arange(4), len(C_SPECIALS)), len(x))
    a[:, 0] = xs
    b[:, 0] = np.where(layout == 2, 0, np.where(layout == 3, xs, one_b))
    a[layout == 1, 1], b[layout == 1, 1] = xs[layout == 1] ^ flip, one_b
    c = np.tile(C_SPECIALS, len(x) * 4)
    return _vs(name, a, b, c, "codes")


def _top_binade(fmt, n, rng, cap=None):
    """Finite codes of the format's largest exponent (at most ``cap``), random signs."""
    dec = fmt.decode(np.arange(1 << fmt.width, dtype=np.uint64).astype(fmt.container_dtype) << fmt.pad_bits)
    finite_exp = dec.exponent[(dec.kind == 0) & (dec.significand != 0)]
    e = finite_exp.max() if cap is None else min(finite_exp.max(), cap)
    finite = np.nonzero((dec.kind == 0) & (dec.significand != 0) & (dec.exponent == e))[0]
    codes = rng.choice(finite, n).astype(np.uint64)
    sign = rng.integers(0, 2, n).astype(np.uint64) << np.uint64(fmt.width - 1)
    return ((codes | sign) << np.uint64(fmt.pad_bits)).astype(fmt.container_dtype)


def top(name, rng, quick):
    spec = get_instruction(name)
    n, k = (256 if quick else 4096), spec.k
    a = _top_binade(spec.a_format, n * k, rng).reshape(n, k)
    b = _top_binade(spec.b_format, n * k, rng).reshape(n, k)
    mant = rng.integers(0, 1 << 23, n).astype(np.uint32)
    mant[:8] = (1 << 23) - 1  # the largest finite C
    field = np.where(np.arange(n) % 4 == 3, 253, 254).astype(np.uint32)
    c = (rng.integers(0, 2, n).astype(np.uint32) << 31) | (field << 23) | mant
    return _vs(name, a, b, c, "top")


def _powers(fmt):
    """exponent -> code of +2**exponent, for every power of two the format holds."""
    codes = np.arange(1 << (fmt.width - 1), dtype=np.uint64).astype(fmt.container_dtype) << fmt.pad_bits
    dec = fmt.decode(codes)
    one = (dec.kind == 0) & (dec.significand != 0) & ((dec.significand & (dec.significand - 1)) == 0)
    return {int(dec.ulp_exponent[i]) + int(dec.significand[i]).bit_length() - 1: codes[i] for i in np.nonzero(one)[0]}


def _power_product(pa, pb, e):
    for ea in sorted(pa):
        if e - ea in pb:
            return pa[ea], pb[e - ea]
    return None


def bottom(name, rng, quick):
    """+2**e1 and -2**e2 products (e2 = e1 - 1 .. e1 - F - 3) over the format's whole product range with
    C = +0, then all-zero products with C over every exponent field."""
    spec = get_instruction(name)
    fa, fb, k, m = spec.a_format, spec.b_format, spec.k, spec.model
    pa, pb = _powers(fa), _powers(fb)
    reach = sorted({x + y for x in pa for y in pb})
    low = reach[0] if not quick else max(reach[0], m.zero_exponent - 25)
    top = reach[-1] if not quick else min(reach[-1], low + 12)
    neg_b = fb.container_dtype(((1 << (fb.width - 1)) << fb.pad_bits))
    rows = []
    for e1 in range(low, top + 1):
        for e2 in range(e1 - m.frac_bits - 3, e1):
            one, two = _power_product(pa, pb, e1), _power_product(pa, pb, e2)
            if one and two:
                rows.append((one, two))
    n = len(rows) + 255 * 2
    a = np.zeros((n, k), fa.container_dtype)
    b = np.zeros((n, k), fb.container_dtype)
    for i, ((x1, y1), (x2, y2)) in enumerate(rows):
        a[i, 0], b[i, 0], a[i, 1], b[i, 1] = x1, y1, x2, y2 | neg_b
    c = np.zeros(n, np.uint32)
    fields = np.repeat(np.arange(255, dtype=np.uint32), 2)
    c[len(rows):] = (fields << 23) | np.where(np.arange(len(fields)) % 2, 1, (1 << 23) - 1).astype(np.uint32)
    return _vs(name, a, b, c, "bottom")


def widest(name, rng, quick):
    spec = get_instruction(name)
    n, k = (256 if quick else 4096), spec.k
    fa, fb = spec.a_format, spec.b_format
    a = _top_binade(fa, n * k, rng, cap=40).reshape(n, k) & ~fa.container_dtype((1 << (fa.width - 1)) << fa.pad_bits)
    b = _top_binade(fb, n * k, rng, cap=40).reshape(n, k) & ~fb.container_dtype((1 << (fb.width - 1)) << fb.pad_bits)
    neg = rng.integers(0, 2, n).astype(bool)
    b[neg] |= fb.container_dtype((1 << (fb.width - 1)) << fb.pad_bits)
    top_product = float(np.abs(fa.to_float(a[:, :1]) * fb.to_float(b[:, :1])).max())
    scale = 2.0 ** rng.integers(0, 9, n)  # C from half the largest product up to 2**8 above it
    cval = np.minimum(np.where(np.arange(n) % 4 == 0, 0.0, rng.uniform(0.5, 1.0, n) * top_product * scale), 3e38)
    c = np.where(neg, -cval, cval).astype(np.float32).view(np.uint32)
    return _vs(name, a, b, c, "widest")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--sets", default="volta,hopper_fp8")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="small searches (the fast test's size)")
    args = p.parse_args(argv)
    if iverilog_available():
        print(f"skipped: {iverilog_available()}")
        return 0
    build = tempfile.mkdtemp(prefix="tcn-unreach-")
    control = PARAMETER_SETS["hopper_bf16"]
    bad = 0
    for ps in args.sets.split(","):
        name, params = PARAMETER_SETS[ps]
        searches = {}
        for bug in UNREACHABLE[ps]:
            searches.setdefault(SEARCH_OF[bug], []).append(bug)
        for search, bugs in searches.items():
            t0 = time.time()
            vs = globals()[search](name, np.random.default_rng(args.seed), args.quick)
            r = sweep(params, vs, bugs, f"{build}/{ps}-{search}")
            ctl = sweep(control[1], globals()[search](control[0], np.random.default_rng(args.seed), args.quick),
                        bugs, f"{build}/control-{search}")
            bad += r["correct"] is not None
            for bug in bugs:
                shown = r["bugs"][bug]
                bad += shown is not None
                print(f"{ps:10s} {bug:26s} {search:7s} {vs.n:6d} vectors: correct unit "
                      f"{'matches' if r['correct'] is None else 'FAILS'}, bug "
                      f"{'never shows' if shown is None else 'SHOWS at vector ' + str(shown['index'])}; "
                      f"control hopper_bf16: {'caught' if ctl['bugs'][bug] else 'not caught'} "
                      f"({time.time() - t0:.0f} s)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
