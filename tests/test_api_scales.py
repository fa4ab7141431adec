"""Block-scaled entries take their scales through the common Instruction.dot_bits API."""

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics import blockscale


@pytest.mark.parametrize("name", blockscale.block_scaled_instructions()[:4])
def test_instruction_dot_bits_forwards_scales(name):
    inst = tc.instruction(name)
    block = inst.model.scale_block
    rng = np.random.default_rng(5)
    a = rng.integers(0, 1 << inst.a_format.width, (6, inst.k)).astype(inst.a_format.container_dtype)
    b = rng.integers(0, 1 << inst.b_format.width, (6, inst.k)).astype(inst.b_format.container_dtype)
    c = np.zeros(6, np.uint32)
    one = int(inst.model.scale_format.from_float(np.array([1.0]))[0])
    sa = np.full((6, inst.k // block), one, inst.model.scale_format.container_dtype)
    sb = sa.copy()
    sa[:, 0] = inst.model.scale_format.from_float(np.array([4.0]))[0]
    got = inst.dot_bits(a, b, c, scale_a=sa, scale_b=sb)
    assert np.array_equal(got, blockscale.dot_bits(name, a, b, c, scale_a=sa, scale_b=sb))
    # omitted scales mean unit scales
    assert np.array_equal(inst.dot_bits(a, b, c), blockscale.dot_bits(name, a, b, c, scale_a=sb, scale_b=sb))
    with pytest.raises(ValueError, match="both"):
        inst.dot_bits(a, b, c, scale_a=sa)


def test_scales_refused_for_unscaled_instructions():
    inst = tc.instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    z = np.zeros((1, 16), np.uint16)
    with pytest.raises(ValueError, match="not a block-scaled"):
        inst.dot_bits(z, z, np.zeros(1, np.uint32), scale_a=np.zeros((1, 1), np.uint8), scale_b=np.zeros((1, 1), np.uint8))
