"""The GPU engine's FFMA chain kernel equals the library's FFMA chain (exact FP32 FMAs in order), bit for bit."""

import numpy as np
import pytest

from tcnumerics.engines import _cuda_build, cuda
from tcnumerics.library.structure import Structure, ffma_partials, slice_columns


def _hard(rng, shape):
    """FP32 values over the whole range: subnormals, huge values (overflow to inf), zeros of both signs, inf, NaN."""
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-140, 120, shape))).astype(np.float32)
    x[rng.random(shape) < 0.05] = 0.0
    x[rng.random(shape) < 0.05] = -0.0
    x.flat[::97] = np.float32(2.0 ** -149)
    return x


@pytest.mark.parametrize("where", ["host build", "gpu"])
def test_ffma_kernel_equals_the_library_chain(where):
    if where == "host build" and _cuda_build.host_compiler() is None:
        pytest.skip("no host C++ compiler")
    if where == "gpu" and not cuda.available():
        pytest.skip("no GPU here")
    rng = np.random.default_rng(2)
    a, b = _hard(rng, (23, 50)), _hard(rng, (50, 19))
    b[3, 4], a[5, 6] = np.inf, np.nan
    tiny = (rng.standard_normal((23, 50)) * 2.0 ** -70).astype(np.float32)  # products in the subnormal range
    for A in (a, tiny):
        for s in (Structure("ffma"), Structure("ffma split", split_k=(20, 20, 10)),
                  Structure("ffma interleaved", split_interleave=3, k_tile=4)):
            want = ffma_partials(s, A, b)
            cols = slice_columns(s, 50)
            for c, w in zip(cols, want):
                if where == "gpu":
                    import cupy

                    got = cupy.asnumpy(cuda.ffma_chain(cupy.asarray(A), cupy.asarray(np.ascontiguousarray(b.T)),
                                                       cupy.asarray(c)))
                else:
                    got = cuda.host_ffma_chain(A, np.ascontiguousarray(b.T), c)
                w32 = w.astype(np.float32)  # exact: FP32 values (host cast, IEEE)
                same = (got.view(np.uint32) == w32.view(np.uint32)) | (np.isnan(got) & np.isnan(w32))
                assert same.all(), f"{s.family}: {int((~same).sum())} differ"
