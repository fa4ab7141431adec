"""gemm_tcalign (the GPU engine's kernel that lets the tensor core align: BF16 mma.sync truncates the FP8 chain's
products onto the unit's grid) through its host build, whose mma is the measured unit model: every output equal to
the CPU fast engine, on its fast path and on the slow path it takes for blocks outside its checked range -- for
one-byte operands and for BF16 ones (the wide form)."""

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction
from tcnumerics.engines import _cuda_build as build
from tcnumerics.engines import _cuda_tcalign_build as tcalign_build
from tcnumerics.engines import cuda, fast
from tcnumerics.model import InstructionSpec, UnitModel

from own_kernel_checks import check, finite_codes

pytestmark = pytest.mark.skipif(build.host_compiler() is None, reason="no host C++ compiler for the kernels' host build")

E4M3 = "hopper.wgmma.m64n128k32.f32.e4m3.e4m3"
E5M2 = "hopper.wgmma.m64n128k32.f32.e5m2.e5m2"
MIXED = "hopper.wgmma.m64n128k32.f32.e4m3.e5m2"


def _custom(group_size: int, frac_bits: int, a="e4m3", b="e4m3") -> InstructionSpec:
    return InstructionSpec(name=f"custom.{a}x{b}.L{group_size}.F{frac_bits}.rz", k=32, model=UnitModel(
        a_format=a, b_format=b, c_format="fp32", d_format="fp32", group_size=group_size, frac_bits=frac_bits,
        output_rounding="rz"))


def _finite_codes(spec, shape, rng, side):
    return finite_codes(spec, shape, rng, side)


def _check(spec, a, b, c, k0=0, k1=None) -> int:
    return check(spec, "tcalign", a, b, c, k0, k1)


def test_which_units_it_runs():
    reason = lambda s: tcalign_build.tcalign_reason(cuda._plan(s), s)  # noqa: E731
    assert reason(get_instruction(E4M3)) is None
    assert reason(get_instruction("ada.mma.m16n8k32.f32.e4m3.e4m3.f32")) is None
    assert reason(_custom(32, 16)) is None and reason(_custom(16, 8)) is None
    assert reason(_custom(32, 17)) == "terms truncated onto more than 16 fraction bits"
    assert reason(_custom(8, 13)) == "groups other than 16 or 32 long"
    assert reason(get_instruction("hopper.wgmma.m64n8k16.f32.f16.f16")) == "operands neither one byte wide nor BF16"
    assert reason(get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")) == (  # F = 25: gemm_native's
        "terms truncated onto more than 16 fraction bits")
    assert reason(_custom(8, 16, "bf16", "bf16")) is None and reason(_custom(32, 0, "bf16", "bf16")) is None
    assert reason(get_instruction("hopper.wgmma.m64n128k32.f32.e5m2.e5m2")) is None  # eight products a power sum


@pytest.mark.parametrize("name", [E4M3, E5M2, MIXED, "ada", "custom32F16", "custom16F8"])
def test_tcalign_fast_path_equals_fast_engine(name):
    spec = {"ada": get_instruction("ada.mma.m16n8k32.f32.e4m3.e4m3.f32"), "custom32F16": _custom(32, 16),
            "custom16F8": _custom(16, 8)}.get(name) or get_instruction(name)
    rng = np.random.default_rng(7)
    M, N, K = 70, 135, 96  # partial blocks in both directions, three groups of 32
    a, b = _finite_codes(spec, (M, K), rng, "a"), _finite_codes(spec, (N, K), rng, "b")
    c = (rng.standard_normal((M, N)) * 50).astype(np.float32)
    c[0, :4] = [0.0, -0.0, 1e-30, -3e-20]  # zeros and tiny (normal) C stay on the fast path
    c[1, :3] = [1e30, -2e33, 3e-38]        # large C too: below 2**(EMAX + 1)
    a[2, :] = 0                            # an all-zero row: C alone decides E
    assert _check(spec, a, b, c.view(np.uint32)) == 0


def test_tcalign_cancellation_and_wide_spans():
    """Groups built to cancel to a few grid steps and to span every exponent: truncation, not rounding, at F."""
    spec = get_instruction(E4M3)
    rng = np.random.default_rng(11)
    M, N, K = 64, 128, 64
    a = _finite_codes(spec, (M, K), rng, "a")
    b = _finite_codes(spec, (N, K), rng, "b")
    b[:, 1::2] = b[:, 0::2]
    a[:, 1::2] = a[:, 0::2] ^ 0x80  # each product followed by its negation...
    a[:, 3::8] = rng.integers(0, 8, (M, K // 8), dtype=np.uint8)  # ...but a few tiny subnormal ones
    c = np.zeros((M, N), np.float32)
    assert _check(spec, a, b, c.view(np.uint32)) == 0


def test_tcalign_slow_path_blocks_equal_fast_engine():
    """A NaN operand, a subnormal C, a C above the anchors' range and an infinite C send exactly their blocks to
    the slow path; every output (theirs and the others') is the unit's."""
    spec = get_instruction(E4M3)
    rng = np.random.default_rng(3)
    M, N, K = 128, 384, 64  # 2 x 3 blocks of 64 x 128
    a, b = _finite_codes(spec, (M, K), rng, "a"), _finite_codes(spec, (N, K), rng, "b")
    c = rng.standard_normal((M, N)).astype(np.float32)
    a[5, 7] = 0x7F                  # a NaN in row 5: blocks (0, 0), (0, 1), (0, 2)
    c[70, 10] = np.float32(1e-40)   # block (1, 0): subnormal C
    c[100, 200] = np.float32(3e38)  # block (1, 1): above 2**(EMAX + 1)
    assert _check(spec, a, b, c.view(np.uint32)) == 5
    c[70, 10] = c[100, 200] = 1.0
    c[64, 300] = np.inf             # block (1, 2): an infinite C
    a[5, 7] = 0x38
    assert _check(spec, a, b, c.view(np.uint32)) == 1


def test_a_wrong_anchor_is_caught(monkeypatch):
    """The anchor's offset is what makes the host mma truncate onto the unit's grid: one bit off and the outputs
    differ (the equality above can fail)."""
    spec = get_instruction(E4M3)
    plan = cuda._plan(spec)
    header = tcalign_build.tcalign_header(spec, plan)
    monkeypatch.setattr(tcalign_build, "tcalign_header", lambda s, p: header.replace(
        "#define TCALIGN 1", "#define TCALIGN 1\n#undef F_BITS\n#define F_BITS 12"))
    rng = np.random.default_rng(5)
    a, b = _finite_codes(spec, (64, 64), rng, "a"), _finite_codes(spec, (128, 64), rng, "b")
    c = np.zeros((64, 128), np.uint32)
    got = cuda.host_accumulate_bits(spec, a, b, c.copy(), kernel="tcalign")
    want = fast.accumulate_bits(spec, a, b, c.copy(), 0, 64)
    assert np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)) > 100


def test_tcalign_byte_stage_for_a_permuted_k_order():
    """A unit whose K order is not natural stages code by code (the unit's order) instead of four codes a load; its
    groups (16 of an instruction's 32, interleaved) come out as the unit's."""
    base = _custom(16, 13)
    order = tuple(k for q in range(8) for k in (2 * q, 2 * q + 1, 16 + 2 * q, 17 + 2 * q))
    spec = InstructionSpec(name="custom.e4m3.L16.F13.interleaved", k=32, model=base.model, k_order=order)
    assert not cuda._plan(spec).natural_order
    assert tcalign_build.tcalign_reason(cuda._plan(spec), spec) is None
    rng = np.random.default_rng(13)
    a, b = _finite_codes(spec, (64, 96), rng, "a"), _finite_codes(spec, (128, 96), rng, "b")
    c = (rng.standard_normal((64, 128)) * 8).astype(np.float32)
    assert _check(spec, a, b, c.view(np.uint32)) == 0


def test_tcalign_k_sub_range_continues_the_chain():
    """accumulate_bits over K columns 32:96 of 128 (the engine's split-K slices and promotion blocks call it so):
    the unit's chain from the given C over exactly those groups."""
    spec = get_instruction(E4M3)
    rng = np.random.default_rng(17)
    a, b = _finite_codes(spec, (70, 128), rng, "a"), _finite_codes(spec, (135, 128), rng, "b")
    c = (rng.standard_normal((70, 135)) * 20).astype(np.float32)
    assert _check(spec, a, b, c.view(np.uint32), 32, 96) == 0


def _bf16_codes(rng, shape, lo=100, hi=154):
    """BF16 codes with exponent fields in [lo, hi), every sign and fraction, one in eight a zero."""
    x = (rng.integers(0, 2, shape) << 15 | rng.integers(lo, hi, shape) << 7 | rng.integers(0, 128, shape))
    x = x.astype(np.uint16)
    x[rng.random(shape) < 1 / 8] = 0
    return x


@pytest.mark.parametrize("group_size,frac_bits", [(8, 16), (16, 13), (32, 7), (8, 0)])
def test_tcalign_wide_bf16_equals_fast_engine(group_size, frac_bits):
    """BF16 operands (the wide form: values as they are, the exponent pass on CUDA cores, E checked per group):
    partial blocks, zero rows, zeros and wide C, cancellation down to the grid -- all on the fast path."""
    spec = _custom(group_size, frac_bits, "bf16", "bf16")
    rng = np.random.default_rng(group_size + frac_bits)
    M, N, K = 70, 135, 96
    a, b = _bf16_codes(rng, (M, K)), _bf16_codes(rng, (N, K))
    a[3, 1::2] = a[3, 0::2] ^ 0x8000  # row 3: each product followed by its negation (same B codes)...
    b[:, 1::2] = b[:, 0::2]
    a[3, 3::8] = _bf16_codes(rng, (K // 8,), 60, 80)  # ...but for a few tiny ones
    a[2, :] = 0
    c = (rng.standard_normal((M, N)) * np.exp2(rng.integers(-40, 40, (M, N)))).astype(np.float32)
    c[0, :2] = [0.0, -0.0]
    assert _check(spec, a, b, c.view(np.uint32)) == 0
    assert _check(spec, a, b, c.view(np.uint32), 32, 64) == 0  # a K sub-range continues the chain


def test_tcalign_wide_slow_path_blocks_equal_fast_engine():
    """What the wide form cannot bound statically sends exactly its block to the slow path: a subnormal operand, a
    product exponent above EMAX, a group grid below FP32's normal range, an infinity; every output is the unit's."""
    spec = _custom(8, 16, "bf16", "bf16")
    rng = np.random.default_rng(23)
    M, N, K = 128, 512, 32  # 2 x 4 blocks of 64 x 128
    a, b = _bf16_codes(rng, (M, K)), _bf16_codes(rng, (N, K))
    c = rng.standard_normal((M, N)).astype(np.float32)
    assert _check(spec, a, b, c.view(np.uint32)) == 0
    a[5, 7] = 0x0003                 # a subnormal in row 5: blocks (0, 0..3)
    b[130, 9] = 0x7E00 | (b[130, 9] & 0x807F)  # column 130, exponent 125: products far above EMAX: block (1, 1)?
    a[70, 9] = 0x3F80                # row 70 meets it: block (1, 1)
    a[100, :8] = 0x0880              # row 100, first group: 2**-110 * ~1 -> grid below 2**-126: block (1, 2)
    b[300, :8] = 0x3F80
    b[450, 20] = 0x7F80              # an infinity in column 450: blocks (0, 3), (1, 3)
    assert _check(spec, a, b, c.view(np.uint32)) == 4 + 1 + 1 + 1
