"""One vocabulary of input families: strategies and golden vectors answer to the same names; the strategies'
earlier names still work, with a DeprecationWarning, and draw exactly what the new names draw."""
import numpy as np
import pytest

pytest.importorskip("hypothesis")

from tcnumerics import strategies as tcs  # noqa: E402
from tcnumerics.family_names import DEPRECATED_NAMES, FAMILY_NAMES  # noqa: E402
from tcnumerics.vectors.families import FAMILIES as VECTOR_FAMILIES, generate  # noqa: E402

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


def test_both_generators_use_only_the_one_vocabulary():
    assert set(tcs.FAMILIES) <= set(FAMILY_NAMES) and set(VECTOR_FAMILIES) <= set(FAMILY_NAMES)
    assert set(DEPRECATED_NAMES.values()) <= set(tcs.FAMILIES) & set(VECTOR_FAMILIES)


@pytest.mark.parametrize("old, new", sorted(DEPRECATED_NAMES.items()))
def test_an_old_name_warns_and_draws_what_the_new_name_draws(old, new):
    with pytest.warns(DeprecationWarning, match=f"now called '{new}'"):
        before = tcs.sample_dot_products(BF16, 64, seed=5, family=old)
    after = tcs.sample_dot_products(BF16, 64, seed=5, family=new)
    assert np.array_equal(before.a, after.a) and np.array_equal(before.c, after.c)
    assert set(after.family) == {new}
    with pytest.warns(DeprecationWarning):
        old_vectors = generate(BF16, old, 16, np.random.default_rng(3))
    new_vectors = generate(BF16, new, 16, np.random.default_rng(3))
    assert all(np.array_equal(x, y) for x, y in zip(old_vectors, new_vectors))


def test_an_unknown_family_is_refused_by_name():
    with pytest.raises(ValueError, match="'wide' does not apply"):
        tcs.sample_dot_products(BF16, 4, family="wide")
    with pytest.raises(ValueError, match="unknown 'wide'"):
        generate(BF16, "wide", 4, np.random.default_rng(0))
