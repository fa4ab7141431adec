"""The IEEE per-operation contrast models: oracle agreement, IEEE corner cases, and the
difference from fused hardware they exist to show."""

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.engines import oracle

NAMES = tc.instructions("contrast")


def test_names_are_stable():
    assert "contrast.ieee.fp16.f16.f16.f16" in NAMES
    assert "contrast.ieee.fp32.f32.bf16.bf16" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_random_bits_match_oracle(name):
    inst = tc.instruction(name, engine="reference")
    spec = inst.spec
    rng = np.random.default_rng(7)
    k = 8
    fa, fc = spec.a_format, spec.c_format
    a = rng.integers(0, 1 << fa.width, (120, k)).astype(np.uint64) << np.uint64(fa.pad_bits)
    b = rng.integers(0, 1 << fa.width, (120, k)).astype(np.uint64) << np.uint64(fa.pad_bits)
    c = rng.integers(0, 1 << fc.width, 120).astype(np.uint64) << np.uint64(fc.pad_bits)
    # small-exponent rows to exercise rounding rather than NaN/inf
    a[:60] &= np.uint64(~(1 << (fa.width - 2) << fa.pad_bits) & ((1 << fa.container_bits) - 1))
    a, b, c = a.astype(fa.container_dtype), b.astype(fa.container_dtype), c.astype(fc.container_dtype)
    d = inst.dot_bits(a, b, c)
    assert np.array_equal(d, oracle.dot_bits(spec, a, b, c))


def test_fp16_pipeline_is_ieee_per_operation():
    inst = tc.instruction("contrast.ieee.fp16.f16.f16.f16")
    f = tc.get_format("fp16")
    rng = np.random.default_rng(3)
    A = rng.standard_normal((200, 16)).astype(np.float16)
    B = rng.standard_normal((200, 16)).astype(np.float16)
    C = rng.standard_normal(200).astype(np.float16)
    acc = C.copy()
    for k in range(16):  # numpy float16 arithmetic is IEEE RNE per operation
        acc = (acc + (A[:, k] * B[:, k]).astype(np.float16)).astype(np.float16)
    d = inst.dot_bits(f.bits_of(A), f.bits_of(B), f.bits_of(C))
    assert np.array_equal(d, acc.view(np.uint16))


def test_signed_zeros_and_specials():
    inst = tc.instruction("contrast.ieee.fp16.f16.f16.f16")
    neg0, one, inf = 0x8000, 0x3C00, 0x7C00
    assert int(inst.dot_bits(np.array([neg0], np.uint16), np.array([one], np.uint16), np.uint16(neg0))) == neg0
    assert int(inst.dot_bits(np.array([neg0], np.uint16), np.array([one], np.uint16), np.uint16(0))) == 0
    assert int(inst.dot_bits(np.array([inf], np.uint16), np.array([0], np.uint16), np.uint16(0))) == 0x7E00
    assert int(inst.dot_bits(np.array([inf, 0xFC00], np.uint16), np.array([one, one], np.uint16),
                             np.uint16(0))) == 0x7E00
    # 65504 * 2 overflows to inf under RNE
    assert int(inst.dot_bits(np.array([0x7BFF], np.uint16), np.array([0x4000], np.uint16), np.uint16(0))) == inf


def test_differs_from_fused_hardware():
    # NUMERICS.md 5: a=[2**-24]*2, b=[1,1], c=1: a fused unit keeps both tiny products
    # (1 + 2**-23); per-operation FP32 rounding loses each one in turn (1.0)
    naive = tc.instruction("contrast.ieee.fp32.f32.f16.f16")
    fused = tc.instruction("hopper.mma.m16n8k16.f32.f16.f16.f32")
    a = np.zeros(16, np.uint16)
    a[:2] = tc.get_format("fp16").from_float(np.array([2.0**-24] * 2))
    b = np.zeros(16, np.uint16); b[:2] = 0x3C00
    c = np.uint32(0x3F800000)
    assert int(naive.dot_bits(a, b, c)) == 0x3F800000
    assert int(fused.dot_bits(a, b, c)) == 0x3F800001
