"""Catalog breadth: every architecture's entries against the exact oracle on random and
adversarial vectors, the published feature vectors (NUMERICS.md section 5), naming, and
the block-scaled API's validation."""

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics import blockscale
from tcnumerics.engines import oracle

from mmasim_bridge import random_operands

ARCHS = ("volta", "turing", "ampere", "ada", "blackwell", "rtx-blackwell", "cdna1", "cdna2", "cdna3")


def _representatives():
    """One entry per (architecture, algorithm, operand formats, d format)."""
    seen, out = set(), []
    for arch in ARCHS:
        for name in tc.instructions(arch):
            spec = tc.instruction(name).spec
            m = spec.model
            key = (arch, m.algorithm, spec.a_format.name, spec.b_format.name, m.d_format.name, m.group_size)
            if key not in seen and m.algorithm not in ("integer", "binary"):  # test_catalog_integer.py
                seen.add(key)
                out.append(name)
    return out


REPS = _representatives()


def _is_nan(fmt, bits):
    return np.isnan(fmt.to_float(bits))


@pytest.mark.parametrize("name", REPS)
def test_reference_matches_exact_oracle(name):
    spec = tc.instruction(name).spec
    rng = np.random.default_rng(sum(map(ord, name)) + 1)
    rows = 6 if spec.model.algorithm in ("fma_chain", "exact_sum") else 10
    for family in ("bits", "values", "narrow"):
        a = random_operands(spec.a_format, (rows, spec.k), rng, family)
        b = random_operands(spec.b_format, (rows, spec.k), rng, family)
        c = random_operands(spec.c_format, (rows,), rng, "bits" if family == "bits" else "values")
        if spec.model.is_block_scaled:
            blocks = spec.k // spec.model.scale_block
            sa = rng.integers(0, 256, (rows, blocks)).astype(np.uint8)
            sb = spec.model.scale_format.from_float(np.exp2(rng.integers(-4, 5, (rows, blocks))))
            ours = blockscale.dot_bits(name, a, b, c, scale_a=sa, scale_b=sb)
            exact = oracle.scaled_dot_bits(name, a, b, c, sa, sb)
        else:
            ours = tc.instruction(name, engine="reference").dot_bits(a, b, c)
            exact = oracle.dot_bits(name, a, b, c)
        same = ours == exact  # NaN payloads included (x86 policy: the oracle derives them too)
        bad = np.flatnonzero(~same)
        assert bad.size == 0, (f"{name} [{family}] row {bad[0]}: a={a[bad[0]].tolist()} b={b[bad[0]].tolist()} "
                               f"c={int(c[bad[0]])} ours={int(ours[bad[0]])} oracle={int(exact[bad[0]])}")


@pytest.mark.parametrize("name", ["ampere.mma.m8n8k4.f64.f64.f64.f64", "cdna3.mfma.f32_16x16x4_f32"])
def test_fma_chain_is_sequential_ieee_fma(name):
    from fractions import Fraction

    spec = tc.instruction(name).spec
    fmt = spec.d_format
    rng = np.random.default_rng(5)
    x = rng.standard_normal((50, spec.k * 2)) * np.exp2(rng.integers(-30, 30, (50, spec.k * 2)))
    a, b = fmt.from_float(x[:, :spec.k]), fmt.from_float(x[:, spec.k:])
    c = fmt.from_float(rng.standard_normal(50))
    ours = tc.instruction(name).dot_bits(a, b, c)
    for i in range(50):
        acc = Fraction(float(fmt.to_float(c[i:i + 1])[0]))
        for k in range(spec.k):
            p = Fraction(float(fmt.to_float(a[i, k:k + 1])[0])) * Fraction(float(fmt.to_float(b[i, k:k + 1])[0]))
            acc = Fraction(float(fmt.to_float(fmt.from_float(np.array([float(acc + p)])))[0])) if fmt.name == "fp32" \
                else Fraction(oracle.value_of(fmt, oracle.round_exact(acc + p, fmt, "rne", "ieee", True)))
        assert Fraction(float(fmt.to_float(ours[i:i + 1])[0])) == acc


def _bits(fmt, values):
    return fmt.from_float(np.asarray(values, dtype=np.float64))


@pytest.mark.parametrize("name,group", [("volta.mma.m8n8k4.f32.f16.f16.f32", 4),
                                        ("turing.mma.m16n8k8.f32.f16.f16.f32", 8),
                                        ("ampere.mma.m16n8k16.f32.f16.f16.f32", 8),
                                        ("blackwell.tcgen05.mma.kind::f16.f32.f16.f16", 16)])
def test_group_size_vector(name, group):
    # NUMERICS.md 5: a0=b0=1, one product 2**-23 (2**-12 * 2**-11) at position j, c=1+2**-23:
    # inside the first group the exact 2+2**-22 survives; from position L on the first
    # group's RZ result 2 swallows the late 2**-23, so the first j that loses it is L
    inst = tc.instruction(name)
    f16, f32 = tc.get_format("fp16"), tc.get_format("fp32")
    first_off = None
    for j in range(1, inst.k):
        a, b = np.zeros(inst.k), np.zeros(inst.k)
        a[0] = b[0] = 1.0
        a[j], b[j] = 2.0**-12, 2.0**-11
        d = inst.dot_bits(_bits(f16, a), _bits(f16, b), _bits(f32, [1 + 2.0**-23]))
        if float(f32.to_float(d)) != 2 + 2.0**-22:
            first_off = j
            break
    assert first_off == (group if group < inst.k else None)


def test_volta_has_no_guard_bit():
    # NUMERICS.md 5: a=b=1, c=-(1-2**-24): V100 gives 2**-23 (no guard bit); Hopper 2**-24
    f16, f32 = tc.get_format("fp16"), tc.get_format("fp32")
    a = _bits(f16, [1, 0, 0, 0])
    c = _bits(f32, [-(1 - 2.0**-24)])
    assert float(f32.to_float(tc.instruction("volta.mma.m8n8k4.f32.f16.f16.f32").dot_bits(a, a, c))) == 2.0**-23
    hopper = tc.instruction("hopper.mma.m16n8k16.f32.f16.f16.f32")
    a16 = _bits(f16, [1] + [0] * 15)
    assert float(f32.to_float(hopper.dot_bits(a16, a16, c))) == 2.0**-24


def test_ada_fp8_output_is_e8m13():
    inst = tc.instruction("ada.mma.m16n8k32.f32.e4m3.e4m3.f32")
    e4m3, f32 = tc.get_format("e4m3"), tc.get_format("fp32")
    a = _bits(e4m3, [1.0, 1.0] + [0.0] * 30)
    d = inst.dot_bits(a, a, _bits(f32, [2.0**-12 + 2.0**-13 + 2.0**-20]))
    # F = 13 keeps 2**-13 below 2**0 (drops 2**-20); the E8M13 output then cuts 2+2**-12+2**-13 to 2+2**-12
    assert float(f32.to_float(d)) == 2 + 2.0**-12


def test_cdna_exact_and_flushing_semantics():
    f16, bf16, f32 = (tc.get_format(n) for n in ("fp16", "bf16", "fp32"))
    # CDNA1: exact sum, one RNE rounding: 1 + 2**-24 + 2**-24 = 1 + 2**-23 exactly
    cdna1 = tc.instruction("cdna1.mfma.f32_4x4x4f16")
    d = cdna1.dot_bits(_bits(f16, [2.0**-12, 2.0**-12, 0, 0]), _bits(f16, [2.0**-12, 2.0**-12, 0, 0]),
                       _bits(f32, [1.0]))
    assert float(f32.to_float(d)) == 1 + 2.0**-23
    # CDNA2: a subnormal input is flushed (BF16 2**-130 contributes nothing)
    cdna2 = tc.instruction("cdna2.mfma.f32_4x4x4bf16_1k")
    d = cdna2.dot_bits(_bits(bf16, [2.0**-130, 0, 0, 0]), _bits(bf16, [2.0**100, 0, 0, 0]), _bits(f32, [0.0]))
    assert float(f32.to_float(d)) == 0.0
    cdna3 = tc.instruction("cdna3.mfma.f32_16x16x16_bf16")
    d = cdna3.dot_bits(_bits(bf16, [2.0**-130] + [0] * 15), _bits(bf16, [2.0**100] + [0] * 15), _bits(f32, [0.0]))
    assert float(f32.to_float(d)) == 2.0**-30  # CDNA3 keeps subnormal inputs


def test_catalog_covers_the_issue_names():
    names = set(tc.instructions())
    for n in ["volta.mma.m8n8k4.f32.f16.f16.f32", "turing.mma.m16n8k8.f32.f16.f16.f32",
              "ampere.mma.m16n8k16.f32.bf16.bf16.f32", "ada.mma.m16n8k32.f32.e4m3.e4m3.f32",
              "rtx-blackwell.mma.m16n8k32.kind::f8f6f4.f32.e4m3.e4m3.f32", "blackwell.tcgen05.mma.kind::f16.f32.bf16.bf16",
              "cdna1.mfma.f32_32x32x8f16", "cdna2.mfma.f32_32x32x8bf16_1k", "cdna3.mfma.f32_16x16x16_f16",
              "cdna3.mfma.f32_16x16x32_fp8_fp8", "cdna3.mfma.f32_16x16x8_xf32", "cdna2.mfma.f64_16x16x4f64",
              "volta.wmma.m16n16k16.f16.f16.f16.f16", "ampere.mma.m8n8k4.f64.f64.f64.f64",
              "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3",
              "rtx-blackwell.mma.m16n8k32.kind::mxf8f6f4.block32.f32.e2m1.e3m2.f32.ue8m0"]:
        assert n in names, n
    for n in names:
        spec = tc.instruction(n).spec
        assert spec.provenance, f"{n} has no provenance"


def test_volta_wmma_is_four_m8n8k4_steps():
    wmma = tc.instruction("volta.wmma.m16n16k16.f32.f16.f16.f32")
    step = tc.instruction("volta.mma.m8n8k4.f32.f16.f16.f32")
    rng = np.random.default_rng(2)
    f16 = tc.get_format("fp16")
    a = f16.from_float(rng.standard_normal((200, 16)))
    b = f16.from_float(rng.standard_normal((200, 16)))
    c = tc.get_format("fp32").from_float(rng.standard_normal(200))
    acc = c
    for s in range(4):
        acc = step.dot_bits(a[:, 4 * s:4 * s + 4], b[:, 4 * s:4 * s + 4], acc)
    assert np.array_equal(wmma.dot_bits(a, b, c), acc)


class TestBlockScale:
    NV = "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"
    MX = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"

    def test_scales_multiply_blocks(self):
        e4m3 = tc.get_format("e4m3")
        a = np.tile(_bits(e4m3, [1.0]), (1, 32))
        one = np.array([[127]], np.uint8)
        d = blockscale.dot_bits(self.MX, a, a, np.zeros(1, np.uint32), scale_a=np.array([[130]], np.uint8),
                                scale_b=one)
        assert float(d.view(np.float32)[0]) == 32 * 8

    def test_nan_and_zero_scales(self):
        a = np.full((1, 64), 0x2, np.uint8)
        ones = np.full((1, 4), 0x38, np.uint8)
        c = np.zeros(1, np.uint32)
        nan = blockscale.dot_bits(self.NV, a, a, c, scale_a=np.array([[0x38, 0x7F, 0x38, 0x38]], np.uint8),
                                  scale_b=ones)
        assert int(nan[0]) == 0x7FFFFFFF
        zero = blockscale.dot_bits(self.NV, a, a, c, scale_a=np.array([[0, 0, 0, 0]], np.uint8), scale_b=ones)
        assert int(zero[0]) == 0
        signless = blockscale.dot_bits(self.NV, a, a, c, scale_a=ones | 0x80, scale_b=ones)
        assert float(signless.view(np.float32)[0]) == 64.0

    def test_packed_fp4_equals_unpacked(self):
        rng = np.random.default_rng(1)
        a = rng.integers(0, 16, (20, 64)).astype(np.uint8)
        b = rng.integers(0, 16, (20, 64)).astype(np.uint8)
        s = rng.integers(0x30, 0x48, (20, 4)).astype(np.uint8)
        c = np.zeros(20, np.uint32)
        unpacked = blockscale.dot_bits(self.NV, a, b, c, scale_a=s, scale_b=s)
        packed = blockscale.dot_bits(self.NV, blockscale.pack_fp4(a), blockscale.pack_fp4(b), c, scale_a=s, scale_b=s)
        assert np.array_equal(unpacked, packed)

    def test_bad_input_names_the_argument(self):
        a = np.zeros((2, 64), np.uint8)
        c = np.zeros(2, np.uint32)
        with pytest.raises(ValueError, match="scale_a"):
            blockscale.dot_bits(self.NV, a, a, c, scale_a=np.zeros((2, 3), np.uint8), scale_b=np.zeros((2, 3), np.uint8))
        with pytest.raises(ValueError, match="scale_a, scale_b"):
            blockscale.dot_bits(self.NV, a, a, c, scale_a=np.zeros((2, 4), np.uint8), scale_b=np.zeros((2, 2), np.uint8))
        with pytest.raises(TypeError, match="scale_a"):
            blockscale.dot_bits(self.NV, a, a, c, scale_a=np.zeros((2, 4)), scale_b=np.zeros((2, 4), np.uint8))
        with pytest.raises(ValueError, match="not block-scaled"):
            blockscale.dot_bits("ampere.mma.m16n8k16.f32.bf16.bf16.f32", a, a, c, scale_a=a, scale_b=a)

    def test_mma_matches_dot_bits(self):
        rng = np.random.default_rng(4)
        A = rng.integers(0, 16, (3, 64)).astype(np.uint8)
        B = rng.integers(0, 16, (64, 2)).astype(np.uint8)
        sa = rng.integers(0x30, 0x40, (3, 4)).astype(np.uint8)
        sb = rng.integers(0x30, 0x40, (4, 2)).astype(np.uint8)
        D = blockscale.mma(self.NV, A, B, scale_a=sa, scale_b=sb)
        d01 = blockscale.dot_bits(self.NV, A[0:1], B[:, 1][None, :], np.zeros(1, np.uint32), scale_a=sa[0:1],
                                  scale_b=sb[:, 1][None, :])
        assert D[0, 1] == d01.view(np.float32)[0]

    RTX_FP4_FP6 = "rtx-blackwell.mma.m16n8k32.kind::mxf8f6f4.block32.f32.e2m1.e3m2.f32.ue8m0"

    @pytest.mark.parametrize("name", [NV, MX, RTX_FP4_FP6])
    def test_mma_is_dot_bits_of_every_pair(self, name):
        """blockscale.mma (a plan the interpreter runs) writes dot_bits' bits for each (row of A, column of B),
        from C[i, j] or +0; packed FP4 reads the same values."""
        spec = tc.instruction(name).spec
        blk, fmt = spec.model.scale_block, spec.model.scale_format
        rng = np.random.default_rng(6)
        M, K, N = 3, 2 * spec.k, 4
        A = rng.integers(0, 1 << spec.a_format.width, (M, K)).astype(np.uint8)
        B = rng.integers(0, 1 << spec.b_format.width, (K, N)).astype(np.uint8)
        one = int(fmt.from_float(np.array([1.0]))[0])
        sa = (one + rng.integers(-3, 4, (M, K // blk))).astype(np.uint8)
        sb = (one + rng.integers(-3, 4, (K // blk, N))).astype(np.uint8)
        C = rng.standard_normal((M, N)).astype(np.float32)
        C[0, 0] = np.nan
        for c in (None, C):
            D = blockscale.mma(name, A, B, c, scale_a=sa, scale_b=sb).view(np.uint32)
            c_bits = np.zeros((M, N), np.uint32) if c is None else c.view(np.uint32)
            pairs = np.array([[blockscale.dot_bits(name, A[i:i + 1], B[:, j][None, :], c_bits[i, j:j + 1],
                                                   scale_a=sa[i:i + 1], scale_b=sb[:, j][None, :])[0]
                               for j in range(N)] for i in range(M)])
            assert np.array_equal(D, pairs)
            if spec.model.algorithm == "subgroup_scaled":
                packed = blockscale.mma(name, blockscale.pack_fp4(A), blockscale.pack_fp4(B.T).T, c, scale_a=sa,
                                        scale_b=sb)
                assert np.array_equal(packed.view(np.uint32), D)

    def test_mma_bad_input_names_the_argument(self):
        A, B = np.zeros((2, 64), np.uint8), np.zeros((64, 3), np.uint8)
        sa, sb = np.zeros((2, 4), np.uint8), np.zeros((4, 3), np.uint8)
        with pytest.raises(ValueError, match="A, B: expected"):
            blockscale.mma(self.NV, A, B[:-1], scale_a=sa, scale_b=sb)
        with pytest.raises(ValueError, match="scale_b: expected a 2-D"):
            blockscale.mma(self.NV, A, B, scale_a=sa, scale_b=sb[0])
        with pytest.raises(ValueError, match="C: expected shape"):
            blockscale.mma(self.NV, A, B, np.zeros((2, 4), np.float32), scale_a=sa, scale_b=sb)
        with pytest.raises(ValueError, match="scale_a, scale_b"):
            blockscale.mma(self.NV, A, B, scale_a=sa[:, :3], scale_b=sb)
        with pytest.raises(ValueError, match="not block-scaled"):
            blockscale.mma("ampere.mma.m16n8k16.f32.bf16.bf16.f32", A, B, scale_a=sa, scale_b=sb)
