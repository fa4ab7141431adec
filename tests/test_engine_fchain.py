"""gemm_fchain (the GPU engine's register-resident kernel for FP8 chains) through its host build: every output equal
to the CPU fast engine, on its fast path and on the slow path it takes for blocks outside its checked range."""

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction
from tcnumerics.engines import _cuda_build as build
from tcnumerics.engines import _cuda_fchain_build as fchain_build
from tcnumerics.engines import cuda, fast
from tcnumerics.model import InstructionSpec, UnitModel

from own_kernel_checks import check, finite_codes

pytestmark = pytest.mark.skipif(build.host_compiler() is None, reason="no host C++ compiler for the kernels' host build")

E4M3 = "hopper.wgmma.m64n128k32.f32.e4m3.e4m3"
E5M2 = "hopper.wgmma.m64n128k32.f32.e5m2.e5m2"
MIXED = "hopper.wgmma.m64n128k32.f32.e4m3.e5m2"


def _custom(group_size: int, frac_bits: int) -> InstructionSpec:
    return InstructionSpec(name=f"custom.e4m3xe5m2.L{group_size}.F{frac_bits}.rz", k=32, model=UnitModel(
        a_format="e4m3", b_format="e5m2", c_format="fp32", d_format="fp32", group_size=group_size,
        frac_bits=frac_bits, output_rounding="rz"))


def _finite_codes(spec, shape, rng, side):
    return finite_codes(spec, shape, rng, side)


def _check(spec, a, b, c, k0=0, k1=None) -> int:
    return check(spec, "fchain", a, b, c, k0, k1)


@pytest.mark.parametrize("name", [E4M3, E5M2, MIXED, "custom16", "custom4"])
def test_fchain_fast_path_equals_fast_engine(name):
    spec = {"custom16": _custom(16, 10), "custom4": _custom(4, 6)}.get(name) or get_instruction(name)
    assert fchain_build.fchain_reason(cuda._plan(spec), spec) is None
    rng = np.random.default_rng(7)
    M, N, K = 70, 135, 96  # partial blocks in both directions, three groups of 32
    a, b = _finite_codes(spec, (M, K), rng, "a"), _finite_codes(spec, (N, K), rng, "b")
    c = (rng.standard_normal((M, N)) * 50).astype(np.float32)
    c[0, :4] = [0.0, -0.0, 1e-30, -3e-20]  # zeros and tiny C still on the fast path (above 2**CMIN)
    assert _check(spec, a, b, c.view(np.uint32)) == 0


def test_fchain_slow_path_blocks_equal_fast_engine():
    """One block each with a NaN operand, a subnormal C, a C too large for the grid's range and an infinite C:
    exactly those four blocks take the slow path, and every output (theirs and the others') is the unit's."""
    spec = get_instruction(E4M3)
    rng = np.random.default_rng(3)
    M, N, K = 128, 384, 64  # 2 x 3 blocks of 64 x 128
    a, b = _finite_codes(spec, (M, K), rng, "a"), _finite_codes(spec, (N, K), rng, "b")
    c = rng.standard_normal((M, N)).astype(np.float32)
    a[5, 7] = 0x7F                  # block (0, *): a NaN operand row -> blocks (0, 0), (0, 1), (0, 2)
    c[70, 10] = np.float32(1e-40)   # block (1, 0): subnormal C
    c[100, 200] = np.float32(1e30)  # block (1, 1): above the grid's range
    b[300, 40] = 0x38               # block (1, 2) stays on the fast path
    assert _check(spec, a, b, c.view(np.uint32)) == 5
    c[70, 10] = c[100, 200] = 1.0
    c[64, 300] = np.inf             # block (1, 2): an infinite C
    a[5, 7] = 0x38
    assert _check(spec, a, b, c.view(np.uint32)) == 1


def test_fchain_k_range_and_groups_of_16():
    spec = _custom(16, 10)
    rng = np.random.default_rng(11)
    a, b = _finite_codes(spec, (64, 160), rng, "a"), _finite_codes(spec, (96, 160), rng, "b")
    c = rng.standard_normal((64, 96)).astype(np.float32).view(np.uint32)
    assert _check(spec, a, b, c, k0=32, k1=128) == 0


def test_fchain_reason_names_the_units_it_leaves():
    f16_acc = get_instruction("hopper.wgmma.m64n8k16.f16.f16.f16")
    assert "C, D and the output" in fchain_build.fchain_reason(cuda._plan(f16_acc), f16_acc)
    s8 = get_instruction("hopper.mma.m8n8k16.s32.s8.s8.s32")
    assert "not a fused unit" in fchain_build.fchain_reason(cuda._plan(s8), s8)
    with pytest.raises(ValueError, match="gemm_fchain does not run it"):
        cuda.host_accumulate_bits(f16_acc, np.zeros((2, 16), np.uint16), np.zeros((2, 16), np.uint16),
                                  np.zeros((2, 2), np.uint16), kernel="fchain")


WIDE = ["hopper.wgmma.m64n8k16.f32.bf16.bf16", "hopper.wgmma.m64n8k16.f32.f16.f16", "hopper.wgmma.m64n8k8.f32.tf32.tf32",
        "ampere.mma.m16n8k16.f32.bf16.bf16.f32", "volta.mma.m8n8k4.f32.f16.f16.f32"]


def _values(spec, shape, rng, scale=1.0):
    """Bit patterns of N(0, scale**2) values in the unit's operand format (RNE through ml_dtypes / numpy)."""
    import ml_dtypes

    x = rng.standard_normal(shape) * scale
    dt = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "tf32": np.float32}[spec.a_format.name]
    return x.astype(dt).view(spec.a_format.container_dtype)


@pytest.mark.parametrize("name", WIDE)
def test_fchain_wide_units_equal_fast_engine(name):
    """The FP64 form (BF16, FP16, TF32 operands): every code of the format (NaN and infinity codes included: their
    blocks take the slow path) and normal data (no block does), partial blocks, a chain of several groups."""
    spec = get_instruction(name)
    assert fchain_build.fchain_reason(cuda._plan(spec), spec) is None
    rng = np.random.default_rng(13)
    M, N, K = 70, 135, 64
    dtype = spec.a_format.container_dtype
    top = 1 << min(np.dtype(dtype).itemsize * 8, 32)
    a = rng.integers(0, top, (M, K), dtype=np.uint64).astype(dtype)
    b = rng.integers(0, top, (N, K), dtype=np.uint64).astype(dtype)
    c = (rng.standard_normal((M, N)) * 10).astype(np.float32).view(np.uint32)
    _check(spec, a, b, c)
    assert _check(spec, _values(spec, (M, K), rng), _values(spec, (N, K), rng), c) == 0


def test_fchain_wide_slow_path_for_subnormal_and_overflowing_results():
    spec = get_instruction("hopper.wgmma.m64n8k16.f32.bf16.bf16")
    rng = np.random.default_rng(17)
    a, b = _values(spec, (128, 32), rng), _values(spec, (256, 32), rng)
    c = np.zeros((128, 256), np.uint32)
    a[70:72] = _values(spec, (2, 32), rng, 3e-39)  # block (1, *): results ~3e-39 -> subnormal FP32 -> slow path
    b[200] = _values(spec, (1, 32), rng, 1e30)     # column 200 with rows ~1: ~1e30, still finite: fast
    assert _check(spec, a, b, c) == 2
    a[5] = _values(spec, (1, 32), rng, 1e30)       # row 5 x column 200: ~1e60 overflows to inf -> slow path
    assert _check(spec, a, b, c) == 3


def test_fchain_special_operands_of_either_side_take_the_slow_path():
    spec = get_instruction(MIXED)  # E4M3 x E5M2: each side its own special codes
    rng = np.random.default_rng(5)
    a, b = _finite_codes(spec, (64, 64), rng, "a"), _finite_codes(spec, (256, 64), rng, "b")
    c = np.zeros((64, 256), np.uint32)
    b[200, 3] = 0x7C  # E5M2 infinity in the second block's columns
    assert _check(spec, a, b, c) == 1
    b[200, 3] = 0x7B
    a[0, 0] = 0xFF    # E4M3 NaN: both blocks
    assert _check(spec, a, b, c) == 2


def test_jump_tables_route_each_row_by_its_sign():
    """The device jump tables' text (the host build runs plain loops instead): every case pairs a >= 0 rows' P with
    b's positive part (FP8) or rounds their b+ products toward zero (wide), and the other way for a < 0."""
    from tcnumerics.engines._cuda_fchain_source import rows8_chained, rows_dispatch

    narrow, wide = rows8_chained(), rows8_chained(wide=True)
    assert narrow.count("fma.rz.f32") == 32 * 4 * 4 * 2 and "f64" not in narrow
    assert wide.count("fma.rz.f64") == wide.count("fma.rp.f64") == 32 * 4 * 4
    # case L5 (rows 0 and 2 negative): row 0's P (operand %0) takes bn (%76 = 64 + 8 + 4) in FP8
    case = narrow.split("L5_%=:")[1].split("brx.idx.uni")[0]
    assert "fma.rz.f32 %0, %64, %76, %0;" in case and "fma.rz.f32 %4, %65, %72, %4;" in case
    assert rows_dispatch(3).count("L7_%=:") == 1 and rows_dispatch(3).count("fma.rz.f32") == 8 * 3 * 4 * 2


def test_fchain_host_check_catches_a_wrong_rounding_mode(monkeypatch):
    """The host build's FMAs are the device's only under the rounding mode they set: the same kernel with the host
    FMA rounding downward instead of toward zero differs from the unit (so the equality tests above can fail)."""
    spec = get_instruction(E4M3)
    rng = np.random.default_rng(19)
    a, b = _finite_codes(spec, (64, 64), rng, "a"), _finite_codes(spec, (128, 64), rng, "b")
    c = np.zeros((64, 128), np.uint32)
    prelude = build.HOST_PRELUDE
    wrong = prelude.replace("return tc_in_mode(FE_TOWARDZERO, [&] { return std::fma(a, b, c); });",
                            "return tc_in_mode(FE_DOWNWARD, [&] { return std::fma(a, b, c); });")
    assert wrong != prelude
    monkeypatch.setattr(build, "HOST_PRELUDE", wrong)
    build.host_library.cache_clear()
    try:
        got = cuda.host_accumulate_bits(spec, a, b, c.copy(), kernel="fchain")
    finally:
        build.host_library.cache_clear()
    want = fast.accumulate_bits(spec, a, b, c.copy(), 0, 64)
    assert not np.array_equal(got.view(np.uint32), want.view(np.uint32))
