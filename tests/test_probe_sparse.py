"""The structured-sparse model (tcnumerics.sparse) and its catalog entries, on the CPU."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tcnumerics as tc
from tcnumerics import sparse
from tcnumerics.engines.oracle import true_dot
from tcnumerics.probe.runtime import random_sparse_index
from tcnumerics.vectors.families import generate

SPARSE = [n for n in tc.instructions("hopper") if ".mma.sp." in n]


def test_sparse_entries_are_catalogued_with_compressed_k():
    assert len(SPARSE) >= 26  # f16/bf16 k16, k32; s8/u8 k32, k64 (+satfinite); FP8 k64
    for name in SPARSE:
        spec = sparse.get_sparse(name)
        shape_k = int(name.split(".m16n8k")[1].split(".")[0])
        assert sparse.logical_k(spec) == shape_k and spec.provenance.startswith("measured")


def _vectors(name, family, n, seed, noisy=True):
    rng = np.random.default_rng(seed)
    spec = sparse.get_sparse(name)
    a, b_sel, c = generate(spec, family, n, rng)
    idx = random_sparse_index(rng, n, 2 * spec.k)
    fill = rng.integers(0, 1 << spec.b_format.container_bits, size=(n, 2 * spec.k), dtype=np.uint64)
    b = fill.astype(spec.b_format.container_dtype) if noisy else np.zeros((n, 2 * spec.k), spec.b_format.container_dtype)
    cols = (np.arange(spec.k) // 2 * 4)[None, :] + idx.astype(np.int64)
    np.put_along_axis(b, cols, b_sel, axis=1)
    return spec, a, b, c, idx, b_sel


@pytest.mark.parametrize("name", ["hopper.mma.sp.m16n8k32.f32.f16.f16.f32", "hopper.mma.sp.m16n8k16.f16.f16.f16.f16",
                                  "hopper.mma.sp.m16n8k64.s32.s8.u8.s32", "hopper.mma.sp.m16n8k64.f32.e5m2.e4m3.f32"])
def test_integer_family_is_exact_and_unselected_b_is_never_read(name):
    spec, a, b, c, idx, b_sel = _vectors(name, "int", 64, 1)
    d = sparse.dot_bits(spec, a, b, c, idx)
    # exact: the dense expansion of A against the whole B (garbage where A is zero is skipped)
    exact = true_dot(spec, a, b_sel, c)
    fmt = spec.d_format
    got = fmt.decode_int(d) if isinstance(fmt, tc.IntFormat) else fmt.to_float(d)
    assert [float(x) for x in exact] == [float(x) for x in got]
    zeros = _vectors(name, "int", 64, 1, noisy=False)
    assert (sparse.dot_bits(spec, zeros[1], zeros[2], zeros[3], zeros[4]) == d).all()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), family=st.sampled_from(["bits", "special", "cancel", "align"]))
def test_sparse_equals_dense_datapath_on_selected_products(seed, family):
    name = "hopper.mma.sp.m16n8k32.f32.bf16.bf16.f32"
    spec, a, b, c, idx, b_sel = _vectors(name, family, 16, seed)
    with np.errstate(all="ignore"):
        d = sparse.dot_bits(spec, a, b, c, idx)
        # measured: the 16 selected products form one group, exactly as dense m16n8k16 does
        dense = tc.instruction("hopper.mma.m16n8k16.f32.bf16.bf16.f32").dot_bits(a, b_sel, c)
    assert (d == dense).all()


def test_chained_sparse_k():
    spec, a, b, c, idx, _ = _vectors("hopper.mma.sp.m16n8k32.f32.f16.f16.f32", "normal", 8, 3)
    d1 = sparse.dot_bits(spec, a, b, c, idx)
    d2 = sparse.dot_bits(spec, np.hstack([a, a]), np.hstack([b, b]), c, np.hstack([idx, idx]))
    assert (sparse.dot_bits(spec, a, b, d1, idx) == d2).all()


@pytest.mark.parametrize("bad_index, message", [
    (lambda i: i.astype(float), "integer"),
    (lambda i: i[:, :-2], "shape"),
    (lambda i: np.where(i == 0, 4, i).astype(np.uint8), "0..3"),
    (lambda i: i[:, ::-1].copy(), "increasing"),
])
def test_bad_sparse_index_is_refused(bad_index, message):
    spec, a, b, c, idx, _ = _vectors("hopper.mma.sp.m16n8k16.f32.f16.f16.f32", "normal", 4, 0)
    with pytest.raises((ValueError, TypeError), match=message):
        sparse.dot_bits(spec, a, b, c, bad_index(idx))


def test_bad_shapes_and_dense_names_are_refused():
    spec, a, b, c, idx, _ = _vectors("hopper.mma.sp.m16n8k16.f32.f16.f16.f32", "normal", 4, 0)
    with pytest.raises(ValueError, match="b: expected shape"):
        sparse.dot_bits(spec, a, b[:, :8], c, idx)
    with pytest.raises(ValueError, match="not a structured-sparse"):
        sparse.dot_bits("hopper.mma.m16n8k16.f32.f16.f16.f32", a, b, c, idx)


def test_compress_expand_round_trip_and_refusal():
    rng = np.random.default_rng(5)
    idx = random_sparse_index(rng, 6, 32)
    a = rng.integers(1, 0x7C00, size=(6, 16)).astype(np.uint16)
    comp, idx2 = sparse.compress_a(sparse.expand_a(a, idx))
    assert (comp == a).all() and (idx2 == idx).all()
    dense = np.ones((1, 8), np.uint16)
    with pytest.raises(ValueError, match="more than 2"):
        sparse.compress_a(dense)
    half = np.zeros((1, 4), np.uint16); half[0, 2] = 7   # one non-zero: padded with the lowest free slot
    comp, idx = sparse.compress_a(half)
    assert comp.tolist() == [[0, 7]] and idx.tolist() == [[0, 2]]
