"""Integer and binary MMA entries (Turing, Ampere, Hopper) against the exact oracle and first principles."""

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.engines import oracle

INT_NAMES = [n for n in tc.instructions() if ".s4." in n or ".u4." in n or ".b1." in n
             or (n.split(".")[0] in ("turing", "ampere") and (".s8." in n or ".u8." in n))]


def test_every_integer_shape_is_catalogued():
    for arch in ("turing", "ampere", "hopper"):
        assert f"{arch}.mma.m8n8k32.s32.s4.u4.s32" in INT_NAMES
        assert f"{arch}.mma.m8n8k128.s32.b1.b1.s32.xor.popc" in INT_NAMES
    assert "hopper.mma.m16n8k64.satfinite.s32.u4.s4.s32" in INT_NAMES
    assert "hopper.mma.m16n8k256.s32.b1.b1.s32.and.popc" in INT_NAMES
    assert "ampere.mma.m16n8k32.satfinite.s32.s8.u8.s32" in INT_NAMES
    assert "turing.mma.m8n8k128.s32.b1.b1.s32.and.popc" not in INT_NAMES  # .and needs sm_80
    assert tc.instruction("hopper.wgmma.m64n256k256.s32.b1.b1.and.popc").k == 256


def _operands(spec, rng, n, extreme):
    fa, fb = spec.a_format, spec.b_format
    if extreme:  # every element at the end of its range: the sum reaches past int32
        a = np.where(rng.random((n, spec.k)) < 0.5, fa.min_value, fa.max_value)
        b = np.where(rng.random((n, spec.k)) < 0.5, fb.min_value, fb.max_value)
    else:
        a = rng.integers(fa.min_value, fa.max_value + 1, (n, spec.k))
        b = rng.integers(fb.min_value, fb.max_value + 1, (n, spec.k))
    c = rng.integers(-2**31, 2**31, n)
    c[: n // 2] = np.where(rng.random(n // 2) < 0.5, 2**31 - 1 - rng.integers(0, 3, n // 2),
                           -2**31 + rng.integers(0, 3, n // 2))
    return fa.encode_int(a), fb.encode_int(b), tc.get_format("s32").encode_int(c), a, b, c


@pytest.mark.parametrize("name", INT_NAMES)
def test_integer_entry_matches_oracle_and_int_arithmetic(name):
    inst = tc.instruction(name, engine="reference")
    spec = inst.spec
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    for extreme in (False, True):
        a, b, c, av, bv, cv = _operands(spec, rng, 24, extreme)
        d = inst.dot_bits(a, b, c)
        assert np.array_equal(d, oracle.dot_bits(spec, a, b, c))
        if spec.model.algorithm == "binary":
            combined = (av & bv) if spec.model.bit_op == "and" else (av ^ bv)
        else:
            combined = av * bv
        exact = [int(x) for x in combined.sum(axis=1)] + cv.astype(object)
        if spec.model.saturate:
            expect = [min(max(int(t), -2**31), 2**31 - 1) & 0xFFFFFFFF for t in exact]
        else:
            expect = [int(t) & 0xFFFFFFFF for t in exact]
        assert d.tolist() == expect


def test_nibble_and_bit_conventions():
    # only the low nibble / bit 0 of each uint8 element is read
    s4 = tc.instruction("ampere.mma.m16n8k64.s32.s4.s4.s32")
    a = np.full(64, 0xF8, np.uint8)  # low nibble 8 = -8 as s4
    b = np.full(64, 0x31, np.uint8)  # low nibble 1
    assert int(s4.dot_bits(a, b, np.uint32(0))) == (-8 * 64) & 0xFFFFFFFF
    u4 = tc.instruction("ampere.mma.m16n8k64.s32.u4.u4.s32")
    assert int(u4.dot_bits(a, b, np.uint32(0))) == 8 * 64
    b1 = tc.instruction("ampere.mma.m16n8k256.s32.b1.b1.s32.and.popc")
    x = np.full(256, 0xFE, np.uint8)  # bit 0 clear
    assert int(b1.dot_bits(x, x, np.uint32(0))) == 0
    assert int(b1.dot_bits(x | 1, x | 1, np.uint32(7))) == 263


def test_satfinite_clamps_and_plain_wraps():
    a = np.full(64, 7, np.uint8)
    c = np.uint32(2**31 - 10)
    sat = tc.instruction("hopper.mma.m16n8k64.satfinite.s32.s4.s4.s32")
    wrap = tc.instruction("hopper.mma.m16n8k64.s32.s4.s4.s32")
    assert int(sat.dot_bits(a, a, c)) == 2**31 - 1
    assert int(wrap.dot_bits(a, a, c)) == (2**31 - 10 + 49 * 64) & 0xFFFFFFFF
