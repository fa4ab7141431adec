"""Ampere mma.sp entries: the sparse path evaluates the selected products through the dense datapath."""

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics import sparse
from tcnumerics.engines import oracle

NAMES = [n for n in tc.instructions("ampere") if ".mma.sp." in n]


def test_ampere_sparse_entries_exist():
    assert "ampere.mma.sp.m16n8k32.f32.f16.f16.f32" in NAMES
    assert "ampere.mma.sp.m16n8k64.satfinite.s32.s8.u8.s32" in NAMES
    spec = tc.instruction("ampere.mma.sp.m16n8k32.f32.bf16.bf16.f32").spec
    assert (spec.k, spec.model.group_size, spec.model.frac_bits) == (16, 8, 24)


@pytest.mark.parametrize("name", NAMES[::3])
def test_sparse_equals_oracle_on_selected_products(name):
    spec = tc.instruction(name).spec
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    n, kc = 64, spec.k
    if spec.a_format.is_integer:
        a = rng.integers(0, 1 << spec.a_format.bits, (n, kc)).astype(np.uint8)
        b = rng.integers(0, 1 << spec.b_format.bits, (n, 2 * kc)).astype(np.uint8)
        c = spec.c_format.encode_int(rng.integers(-(2**31), 2**31 - 1, n))
    else:
        a = spec.a_format.from_float(rng.standard_normal((n, kc)) * np.exp2(rng.integers(-12, 12, (n, kc))))
        b = spec.b_format.from_float(rng.standard_normal((n, 2 * kc)))
        c = spec.c_format.from_float(rng.standard_normal(n))
    scheme = sparse.sparsity(spec)   # 2:4, TF32 1:2 or s4/u4 pairwise 4:8
    table = scheme.combinations()
    index = table[rng.integers(0, len(table), n * kc // scheme.kept)].reshape(n, kc)
    got = sparse.dot_bits(name, a, b, c, index)
    chosen = np.take_along_axis(b, (np.arange(kc) // scheme.kept) * scheme.chunk + index, axis=1)
    assert np.array_equal(got, oracle.dot_bits(spec, a, chosen, c))
