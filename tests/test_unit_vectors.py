"""NUMERICS.md section 5: the discriminating test vectors (Fasi et al. 2021; Khattak & Mikaitis), run through
the Hopper entries, give the outcomes the measured model implies (F = 25 fraction bits, L per instruction, FP32
output RZ).  Every case is also run with all signs flipped."""

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.formats import get_format

FP32 = get_format("fp32")
# (instruction, products per group)
HOPPER_FP32_OUT = [
    ("hopper.wgmma.m64n8k16.f32.f16.f16", 16),
    ("hopper.wgmma.m64n8k16.f32.bf16.bf16", 16),
    ("hopper.mma.m16n8k16.f32.f16.f16.f32", 16),
    ("hopper.mma.m16n8k16.f32.bf16.bf16.f32", 16),
    ("hopper.mma.m16n8k8.f32.bf16.bf16.f32", 8),
    ("hopper.mma.m16n8k8.f32.tf32.tf32.f32", 8),
    ("hopper.wgmma.m64n8k8.f32.tf32.tf32", 8),
    ("hopper.mma.m16n8k4.f32.tf32.tf32.f32", 4),
]


def run(name, a, b, c, k_total=None, negate=False):
    """d (as float) for one dot product given as Python floats, zero-padded to k_total."""
    inst = tc.instruction(name, engine="reference")
    k_total = k_total or inst.k
    av = np.zeros(k_total)
    bv = np.zeros(k_total)
    av[: len(a)] = a
    bv[: len(b)] = b
    sgn = -1.0 if negate else 1.0
    a_bits = inst.a_format.from_float(sgn * av)[None, :]
    b_bits = inst.b_format.from_float(bv)[None, :]
    assert np.array_equal(inst.a_format.to_float(a_bits[0]), sgn * av), "test value not representable"
    c_bits = inst.c_format.from_float(np.array([sgn * c]))
    d = inst.dot_bits(a_bits, b_bits, c_bits)
    return float(inst.d_format.to_float(d)[0]) * sgn


@pytest.mark.parametrize("negate", [False, True], ids=["pos", "neg"])
@pytest.mark.parametrize("name,group", HOPPER_FP32_OUT)
class TestHopperFeatures:
    def test_two_extra_alignment_bits(self, name, group, negate):
        if group < 3:
            pytest.skip("needs three products in one group")
        assert run(name, [2.0**-24] * 2, [1, 1], 1.0, negate=negate) == 1 + 2.0**-23
        assert run(name, [2.0**-24] * 3, [1, 0.5, 0.5], 1.0, negate=negate) == 1 + 2.0**-23

    def test_group_size(self, name, group, negate):
        k_total = max(32, tc.instruction(name).k)
        found = None
        for k in range(2, k_total + 1):
            a = [1.0] + [0.0] * (k - 2) + [2.0**-23]
            d = run(name, a, [1.0] * k, 1 + 2.0**-23, k_total=k_total, negate=negate)
            if d != 2 + 2.0**-22:
                found = k - 1
                break
        assert found == min(group, tc.instruction(name).k)

    def test_late_normalisation(self, name, group, negate):
        x = 2.0**-21 + 2.0**-24
        assert run(name, [x, x], [1, 1], 1 - 2.0**-21, negate=negate) == 1 + 2.0**-21 + 2.0**-23

    def test_final_rounding_is_toward_zero(self, name, group, negate):
        if group < 3:
            pytest.skip("needs three products in one group")
        assert run(name, [1, 1, 1], [1, 1, 1], 1 + 2.0**-23 + 2.0**-22, negate=negate) == 4.0

    def test_rounding_between_groups_is_toward_zero(self, name, group, negate):
        k_total = 2 * tc.instruction(name).k
        a = [0.0] * group + [2.0**-24]
        b = [0.0] * group + [1.5]
        assert run(name, a, b, 1 + 2.0**-23, k_total=k_total, negate=negate) == 1 + 2.0**-23

    def test_guard_bits(self, name, group, negate):
        assert run(name, [1.0], [1.0], -(1 - 2.0**-24), negate=negate) == 2.0**-24

    def test_monotone_with_25_fraction_bits(self, name, group, negate):
        if group < 4:
            pytest.skip("needs four products in one group")
        low = run(name, [2.0**-24] * 4, [1] * 4, 1 - 2.0**-24, negate=negate)
        high = run(name, [2.0**-24] * 4, [1] * 4, 1.0, negate=negate)
        assert (low, high) == (1 + 2.0**-23, 1 + 2.0**-22)


@pytest.mark.parametrize("name", ["ampere.mma.m16n8k8.f32.f16.f16.f32", "ampere.mma.m16n8k16.f32.bf16.bf16.f32"])
def test_ampere_keeps_one_bit_less(name):
    # F = 24: the second extra alignment bit is gone, the first survives
    assert run(name, [2.0**-24] * 2, [1, 1], 1.0) == 1 + 2.0**-23
    assert run(name, [2.0**-24] * 3, [1, 0.5, 0.5], 1.0) == 1 + 2.0**-24 - 2.0**-24  # truncated to 1.0


def test_fp8_wgmma_output_is_e8m13_truncated():
    name = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
    # 1 + 2**-13 survives (13 fraction bits), 2**-14 does not
    assert run(name, [1.0, 2.0**-7], [1.0, 2.0**-6], 0.0) == 1 + 2.0**-13
    assert run(name, [1.0, 2.0**-8], [1.0, 2.0**-6], 0.0) == 1.0
    # accumulator bits below the 13-bit cut are dropped even with no products
    assert run(name, [0.0], [0.0], 1 + 2.0**-20) == 1.0


def test_fp8_group_size_is_32():
    name = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
    found = None
    for k in range(2, 65):
        a = [1.0] + [0.0] * (k - 2) + [2.0**-7]
        b = [1.0] * (k - 1) + [2.0**-6]
        if run(name, a, b, 1 + 2.0**-13, k_total=64) != 2 + 2.0**-12:
            found = k - 1
            break
    assert found == 32


def test_mma_sync_fp8_lowering_splits_k_by_interleaved_halves():
    name = "hopper.mma.m16n8k32.f32.e4m3.e4m3.f32"
    # k = 0 and k = 4 land in the same FP16 group; k = 0 and k = 2 do not
    same = run(name, [1.0, 0, 0, 0, 2.0**-9], [1.0, 0, 0, 0, 2.0**-9], 0.0)
    assert same == 1.0 + 2.0**-18
    diff = run(name, [1.0, 0, 2.0**-9], [1.0, 0, 2.0**-9], 0.0)
    assert diff == 1.0 + 2.0**-18  # still exact: F = 25 bits below 2**0 after the chain
    # C is added by an IEEE RNE addition, not truncated: a tie rounds to even
    assert run(name, [1.0], [1.0], 2.0**-24 + 2.0**-25) == 1 + 2.0**-23


def test_specials_follow_the_measured_rules():
    name = "hopper.wgmma.m64n8k16.f32.f16.f16"
    inst = tc.instruction(name)
    fp16 = get_format("fp16")
    z = np.zeros((1, 16), np.uint16)

    def d(a_vals, b_vals, c):
        a, b = z.copy(), z.copy()
        a[0, : len(a_vals)] = fp16.from_float(np.array(a_vals))
        b[0, : len(b_vals)] = fp16.from_float(np.array(b_vals))
        return int(inst.dot_bits(a, b, FP32.from_float(np.array([c])))[0])

    assert d([np.inf], [0.0], 1.0) == 0x7FFFFFFF  # inf * 0
    assert d([np.inf, np.inf], [1.0, -1.0], 1.0) == 0x7FFFFFFF  # +inf + -inf
    assert d([np.nan], [1.0], 1.0) == 0x7FFFFFFF
    assert d([np.inf], [-1.0], 1.0) == 0xFF800000
    assert d([1.0], [1.0], -1.0) == 0  # exact zero is +0
    assert d([-0.0], [1.0], -0.0) == 0  # even from negative zeros
    assert d([], [], 3e38) == FP32.from_float(np.array([3e38]))[0]  # C alone passes unchanged


def test_overflow_gives_inf_even_under_rz():
    bf16 = get_format("bf16")
    inst = tc.instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    a = np.zeros((2, 16), np.uint16)
    b = np.zeros((2, 16), np.uint16)
    a[:, 0] = bf16.from_float(np.array([2.0**127, 2.0**127]))
    b[:, 0] = bf16.from_float(np.array([1.5, 2.0]))
    c = FP32.from_float(np.array([2.0**127 * 0.4, 0.0]))
    d = inst.dot_bits(a, b, c)
    # 1.9 * 2**127 < 2**128 truncates to a finite value; 2**128 itself is inf
    assert FP32.to_float(d).tolist() == [float(FP32.round(np.array([1.9 * 2.0**127]), "rz")[0]), np.inf]
