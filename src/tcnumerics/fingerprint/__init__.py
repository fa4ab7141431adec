"""Fingerprinting: infer a matrix unit's arithmetic from a black box, with discriminating vectors.

Given any ``dot(a_bits, b_bits, c_bits) -> d_bits`` for an instruction interface (its
operand, accumulator and output formats and its K), ``fingerprint`` works out, in order:

1. **Specials**: the NaN the unit writes (canonical or propagated payloads), inf*0,
   inf-inf, the sign of exact zeros.
2. **Group structure** (after FPRev, Xie et al.): with +B and -B at two K positions and a
   small u everywhere else, a fused unit returns u times the number of positions in the
   groups *after* the later of the two; over all pairs this gives every group, in
   processing order -- the products per group (L), any interleaving such as Hopper
   mma.sync FP8's halves -- and, with B in C, whether C is fused into the first group or
   added last by a separate addition.
3. **Fraction bits kept (F)**: +B, -B and t = B * 2**-s in one group return t exactly when
   s <= F and 0 when the alignment truncated it.
4. **Zero exponent**: a lone term below the zero exponent is truncated on a coarser grid;
   the surviving bits give every zero exponent consistent with the observations (an
   interval; values below what any representable input can reach are indistinguishable).
5. **Output rounding, output precision, overflow, C addition**: a narrowing search over
   the remaining candidates on accumulator-dominant, cancelling, wide-span vectors
   (trailing zero bits of the outputs propose a narrower output mantissa such as E8M13).

The inferred ``InstructionSpec`` is then checked on every input family against the box,
and every catalog entry with the same interface is replayed to name those that match.
Units that are not fused truncating ones (exact integer, IEEE per-operation, AMD's staged
sums, ...) are recognised by that catalog replay.

Example:
    >>> from tcnumerics.fingerprint import fingerprint, catalog_dot
    >>> fp = fingerprint(catalog_dot("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32"),
    ...                  "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32", validation=8)
    >>> fp.group_size, fp.frac_bits, fp.c_entry, fp.output_rounding
    (16, 25, 'ieee_add', ['rz'])
    >>> fp.groups[0][:6]
    [0, 1, 4, 5, 8, 9]
"""

# The package: result.py (Fingerprint, black boxes) <- probes.py <- inference.py (fingerprint) <- device.py (a GPU as
# the box) <- cli.py (`tcnumerics fingerprint`).
from .cli import register
from .device import _gpu_dot, _selected_products  # noqa: F401 - the device adapter, where it always was
from .inference import fingerprint, structure_of
from .result import Dot, Fingerprint, catalog_dot  # noqa: F401 - Dot: the black box's type, as before

__all__ = ["Fingerprint", "fingerprint", "catalog_dot", "register", "structure_of"]

