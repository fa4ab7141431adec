"""Differential test: every catalogued entry MMA-Sim models agrees with it bit for bit
(NaN payloads included) on random bit patterns.  Skips when mmasim is not installed."""

import os

import numpy as np
import pytest

import tcnumerics as tc

pytest.importorskip("mmasim")
torch = pytest.importorskip("torch")

from mmasim_bridge import from_torch, mmasim_op, random_operands, to_torch  # noqa: E402

ROWS = int(os.environ.get("TCNUMERICS_MMASIM_ROWS", "600"))
ARCHS = ("volta", "turing", "ampere", "ada", "blackwell", "rtx-blackwell", "cdna1", "cdna2", "cdna3")
NAMES = [n for a in ARCHS for n in tc.instructions(a)]
MODELLED = [n for n in NAMES if mmasim_op(n) is not None]
UNMODELLED = [n for n in NAMES if n not in MODELLED]


def _kind_mmasim_lacks(name: str) -> str | None:
    """Why MMA-Sim 2.1.1 has no model for an entry (None: it should have one)."""
    spec = tc.instruction(name).spec
    if spec.model.algorithm in ("integer", "binary"):
        return "integer / binary mma"
    if ".sp." in name:
        return "structured-sparse mma.sp"
    if spec.c_format != spec.d_format:
        return "C and D of different formats"
    if spec.a_format.name == "fp64":
        return "FP64 mma"
    if spec.c_entry == "ieee_add":  # Blackwell FP8 mma.sync: FP16 HMMAs + an FADD of C (B200 captures)
        return "a compiler lowering (operands converted, C added by an IEEE addition)"
    return None


def test_mmasim_models_every_entry_it_should():
    # the differential test below runs only where MMA-Sim has a model: this guards that list
    # (a broken lookup returning "no model" everywhere would otherwise silently test nothing)
    assert len(MODELLED) >= 300, len(MODELLED)
    unexpected = [n for n in UNMODELLED if _kind_mmasim_lacks(n) is None]
    assert not unexpected, f"MMA-Sim has no model for {unexpected[:5]} (expected one)"


def _case(spec, rng, rows, family):
    fa, fb, fc = spec.a_format, spec.b_format, spec.c_format
    k = spec.k
    a = random_operands(fa, (rows, k), rng, family)
    b = random_operands(fb, (rows, k), rng, family)
    c = random_operands(fc, (rows,), rng, "bits" if family == "bits" else "values")
    scales = None
    if spec.model.is_block_scaled:
        sf = spec.model.scale_format
        blocks = k // spec.model.scale_block
        sa = rng.integers(0, 256, (rows, blocks)).astype(np.uint8)
        sb = rng.integers(0, 256, (rows, blocks)).astype(np.uint8)
        if family != "bits":  # mostly moderate scales
            sa = sf.from_float(np.exp2(rng.integers(-6, 7, (rows, blocks))))
            sb = sf.from_float(np.exp2(rng.integers(-6, 7, (rows, blocks))) * (1 + rng.integers(0, 8, (rows, blocks)) / 8))
        scales = (sa, sb)
    return a, b, c, scales


@pytest.mark.parametrize("name", MODELLED)
def test_agrees_with_mmasim(name):
    op, block_scaled = mmasim_op(name)
    spec = tc.instruction(name).spec
    rng = np.random.default_rng(sum(map(ord, name)))
    packed = block_scaled and spec.k == 64
    for family in ("bits", "values", "narrow"):
        a, b, c, scales = _case(spec, rng, ROWS, family)
        if block_scaled:
            from tcnumerics import blockscale

            ours = blockscale.dot_bits(name, a, b, c, scale_a=scales[0], scale_b=scales[1], engine="reference")
            sf = spec.model.scale_format
            theirs = op.dpa(to_torch(a, spec.a_format, packed), to_torch(b, spec.b_format, packed),
                            to_torch(c, spec.c_format), to_torch(scales[0], sf), to_torch(scales[1], sf))
        else:
            ours = tc.instruction(name, engine="reference").dot_bits(a, b, c)
            theirs = op.dpa(to_torch(a, spec.a_format), to_torch(b, spec.b_format), to_torch(c, spec.c_format))
        theirs = from_torch(theirs, spec.d_format)
        bad = np.flatnonzero(ours != theirs)
        if bad.size:
            i = bad[0]
            pytest.fail(f"{name} [{family}]: {bad.size}/{ROWS} differ; first row {i}: a={[hex(x) for x in a[i]]} "
                        f"b={[hex(x) for x in b[i]]} c={hex(c[i])} ours={hex(ours[i])} mmasim={hex(theirs[i])}")
