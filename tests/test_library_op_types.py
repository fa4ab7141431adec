"""Every library op refuses operand types it does not take with a TypeError naming the argument, never a
bare KeyError from deep inside the selection (FP8 in matmul: torch refuses it too; scaled_mm takes it)."""

import ml_dtypes
import numpy as np
import pytest

from tcnumerics import library as lib

E4M3 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16


def _ops(dtype_a, dtype_b=None):
    """(name, call) for every non-scaled op with A of dtype_a and B of dtype_b (default: the same)."""
    dtype_b = dtype_b or dtype_a
    A, B = np.ones((16, 32), dtype_a), np.ones((32, 16), dtype_b)
    C = np.zeros((16, 16), np.float32)
    return [
        ("matmul", lambda: lib.matmul(A, B)),
        ("linear", lambda: lib.linear(A, np.ascontiguousarray(B.T))),
        ("addmm", lambda: lib.addmm(C, A, B)),
        ("bmm", lambda: lib.bmm(A[None], B[None])),
        ("baddbmm", lambda: lib.baddbmm(C[None], A[None], B[None])),
        ("matmul.plan", lambda: lib.matmul.plan(A, B)),
    ]


@pytest.mark.parametrize("fp8", [E4M3, ml_dtypes.float8_e5m2])
@pytest.mark.parametrize("index", range(6))
def test_fp8_operands_point_to_scaled_mm(fp8, index):
    name, call = _ops(fp8)[index]
    with pytest.raises(TypeError, match=r"^(A|x): float8_e[45]m[23].*scaled_mm"):
        call()


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.float64, np.bool_, np.complex64])
@pytest.mark.parametrize("index", range(6))
def test_other_types_are_named(dtype, index):
    name, call = _ops(dtype)[index]
    with pytest.raises(TypeError, match=rf"^(A|x): expected bfloat16, float16 or float32 .*got {np.dtype(dtype)}"):
        call()


@pytest.mark.parametrize("index", range(6))
def test_mismatched_operands_are_refused(index):
    name, call = _ops(BF16, np.float16)[index]
    with pytest.raises(TypeError, match="bfloat16 and float16"):
        call()


def test_scaled_mm_takes_fp8_and_refuses_the_rest():
    A = np.ones((16, 32), E4M3)
    B = np.ones((16, 32), E4M3).T  # column-major B, as torch._scaled_mm wants it
    one = np.float32(1.0)
    assert lib.scaled_mm(A, B, one, one).dtype == BF16
    assert lib.scaled_mm(A, B, one, one)[0, 0] == 32
    with pytest.raises(TypeError, match=r"^A: expected float8_e4m3fn or float8_e5m2 .*got int64"):
        lib.scaled_mm(np.ones((16, 32), np.int64), B, one, one)
    with pytest.raises(TypeError, match="_scaled_mm takes float8"):
        lib.scaled_mm(np.ones((16, 32), BF16), B, one, one)


@pytest.mark.filterwarnings("ignore::tcnumerics.library.NotModelledWarning")  # small FP32 shapes: best guesses
def test_the_valid_types_still_compute():
    # the checks refuse only what they should: every op runs on BF16, FP16 and FP32
    for dtype in (BF16, np.float16, np.float32):
        for name, call in _ops(dtype):
            out = call()
            if name != "matmul.plan":
                assert np.all(np.asarray(out, np.float64) == 32), name
