"""A unit recipe's batched matmul (an attention bmm's heads at once) gives the per-item loop's bits."""

import numpy as np
import pytest

pytest.importorskip("torch")
from tcnumerics.torch.unit import UnitRecipe  # noqa: E402

E4M3 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


@pytest.mark.parametrize("options", [
    dict(instruction=E4M3, scaling="tensor", promote_every=128),
    dict(instruction=E4M3, scaling="row"),
    dict(instruction=E4M3, scaling="tensor", split_k=2),
    dict(instruction=BF16),
    dict(instruction=BF16, operand_format="e4m3", scaling="tensor"),
    dict(instruction=E4M3, scaling="tensor", rounding="stochastic", seed=5),
], ids=str)
def test_batched_matmul_equals_the_loop(options):
    rng = np.random.default_rng(1)
    batch, M, K, N = 5, 9, 300, 7
    scales = np.exp2(rng.integers(-20, 20, (batch, 1, 1)))  # items far apart: per-item scales matter
    A = rng.standard_normal((batch, M, K)) * scales
    B = rng.standard_normal((batch, K, N))
    A[2] = 0.0  # an all-zero item (amax 0)
    A[3, 1, 4] = np.inf
    recipe = UnitRecipe.create(**options)
    got = recipe.matmul_batch(A, B, call_index=7)
    want = np.stack([recipe.matmul(A[i], B[i], call_index=7 + i) for i in range(batch)])
    assert got.shape == (batch, M, N)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64)) or \
        np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))


def test_batched_matmul_names_bad_shapes():
    recipe = UnitRecipe.create(instruction=BF16)
    with pytest.raises(ValueError, match=r"\[batch, M, K\]"):
        recipe.matmul_batch(np.ones((2, 3, 4)), np.ones((3, 4, 5)))
