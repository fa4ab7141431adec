"""TF32 (1:2) and s4/u4 (pairwise 4:8) structured-sparse ``mma.sp``: metadata as PTX defines
it, every new Hopper and Ampere entry against the exact oracle, the probe path through a
CPU stand-in, and the committed H200 captures."""

import glob
import itertools
import json
import os

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics import sparse
from tcnumerics.engines.oracle import true_dot
from tcnumerics.probe import layouts
from tcnumerics.probe.capture import capture_entry, file_stem
from tcnumerics.probe.runtime import Probe, discover_metadata
from tcnumerics.probe.targets import target
from tcnumerics.vectors.families import expected_d, families_for, generate
from tcnumerics.vectors.verify import verify_file

HOPPER_TF32 = [f"hopper.mma.sp.m16n8k{k}.f32.tf32.tf32.f32" for k in (8, 16)]
HOPPER_INT4 = [f"hopper.mma.sp.m16n8k{k}{s}.s32.{a}.{b}.s32" for k in (64, 128) for s in ("", ".satfinite")
               for a in ("s4", "u4") for b in ("s4", "u4")]
NEW_HOPPER = HOPPER_TF32 + HOPPER_INT4
NEW = NEW_HOPPER + [n.replace("hopper.", "ampere.", 1) for n in NEW_HOPPER]
ROOT = os.path.join(os.path.dirname(__file__), "..", "vectors", "hopper")


def _vectors(name, family, n, seed, noisy=True, k=None):
    """Compressed A, dense B (unselected elements arbitrary bits or zero), C, positions."""
    rng = np.random.default_rng(seed)
    spec = sparse.get_sparse(name)
    a, b_sel, c = generate(spec, family, n, rng, k=k)
    kk = 2 * a.shape[1]
    idx = sparse.random_index(rng, n, kk, spec)
    width = spec.b_format.bits if spec.b_format.is_integer else spec.b_format.container_bits
    fill = rng.integers(0, 1 << width, size=(n, kk), dtype=np.uint64).astype(spec.b_format.container_dtype)
    b = fill if noisy else np.zeros_like(fill)
    np.put_along_axis(b, sparse.positions(idx, spec), b_sel, axis=1)
    return spec, a, b, c, idx, b_sel


# -- catalog ------------------------------------------------------------------------------------

def test_new_entries_are_catalogued():
    names = set(tc.instructions())
    assert set(NEW) <= names and len(NEW) == 36
    for name in NEW:
        spec = sparse.get_sparse(name)
        assert sparse.logical_k(spec) == int(name.split(".m16n8k")[1].split(".")[0])
        assert name.split(".")[0] != "hopper" or spec.provenance.startswith("measured")
        scheme = sparse.sparsity(spec)
        assert scheme.name == ("1:2" if "tf32" in name else "4:8 pairwise") and scheme.name in spec.notes


def test_grouping_follows_the_dense_unit_of_the_same_product_count():
    for arch, (g8, g16) in {"hopper": (4, 8), "ampere": (4, 4)}.items():
        assert tc.instruction(f"{arch}.mma.sp.m16n8k8.f32.tf32.tf32.f32").spec.model.group_size == g8
        assert tc.instruction(f"{arch}.mma.sp.m16n8k16.f32.tf32.tf32.f32").spec.model.group_size == g16
    assert tc.instruction("ampere.mma.sp.m16n8k16.f32.tf32.tf32.f32").spec.model.frac_bits == 24


@pytest.mark.parametrize("arch", ["hopper", "ampere"])
@pytest.mark.parametrize("k, dense_k", [(8, 4), (16, 8)])
def test_tf32_sparse_is_the_dense_datapath_on_the_selected_products(arch, k, dense_k):
    name = f"{arch}.mma.sp.m16n8k{k}.f32.tf32.tf32.f32"
    dense = tc.instruction(f"{arch}.mma.m16n8k{dense_k}.f32.tf32.tf32.f32")
    for family in ("bits", "cancel", "align", "special", "tf32"):
        spec, a, b, c, idx, b_sel = _vectors(name, family, 48, k)
        with np.errstate(all="ignore"):
            assert (sparse.dot_bits(spec, a, b, c, idx) == dense.dot_bits(a, b_sel, c)).all(), family


# -- every new entry against the exact oracle ---------------------------------------------------

@pytest.mark.parametrize("name", NEW)
def test_entry_matches_exact_oracle_on_random_and_adversarial_vectors(name):
    spec = sparse.get_sparse(name)
    for i, family in enumerate(families_for(spec)):
        _, a, b, c, idx, _ = _vectors(name, family, 12, 100 + i)
        with np.errstate(all="ignore"):
            want = sparse.dot_bits(spec, a, b, c, idx, engine="exact")
            assert (sparse.dot_bits(spec, a, b, c, idx, engine="reference") == want).all(), family
            assert (sparse.dot_bits(spec, a, b, c, idx) == want).all(), family


@pytest.mark.parametrize("name", [n for n in NEW if ".s4." in n or ".u4." in n])
def test_integer_entries_are_exact_with_wrap_or_saturation(name):
    spec = sparse.get_sparse(name)
    kc = spec.k
    rng = np.random.default_rng(kc)
    af, bf = spec.a_format, spec.b_format
    # adversarial: every product at its extreme, C at the int32 edges, so the sum leaves int32
    a_ext = np.full((4, kc), af.min_value if af.min_value < 0 else af.max_value, np.int64)
    b_ext = np.full((4, 2 * kc), bf.min_value if bf.min_value < 0 else bf.max_value, np.int64)
    c_int = np.array([2**31 - 1, -(2**31), 2**31 - 1, 0], np.int64)
    a_rand = rng.integers(af.min_value, af.max_value + 1, (60, kc))
    b_rand = rng.integers(bf.min_value, bf.max_value + 1, (60, 2 * kc))
    c_rand = rng.integers(-(2**31), 2**31, 60)
    a_vals, b_vals = np.vstack([a_ext, a_rand]), np.vstack([b_ext, b_rand])
    c_vals = np.concatenate([c_int, c_rand])
    n = len(c_vals)
    idx = sparse.random_index(rng, n, 2 * kc, spec)
    d = sparse.dot_bits(spec, af.encode_int(a_vals), bf.encode_int(b_vals), spec.c_format.encode_int(c_vals), idx)
    chosen = sparse.select_b(b_vals, idx, spec)
    for row in range(n):
        total = sum(int(x) * int(y) for x, y in zip(a_vals[row], chosen[row])) + int(c_vals[row])
        if spec.model.saturate:
            want = min(max(total, -(2**31)), 2**31 - 1)
        else:
            want = (total + 2**31) % 2**32 - 2**31
        assert int(spec.d_format.decode_int(d[row:row + 1])[0]) == want, row


@pytest.mark.parametrize("name", HOPPER_TF32)
def test_tf32_integer_family_is_exact_and_unselected_b_is_never_read(name):
    spec, a, b, c, idx, b_sel = _vectors(name, "int", 64, 7)
    d = sparse.dot_bits(spec, a, b, c, idx)
    assert [float(x) for x in true_dot(spec, a, b_sel, c)] == [float(x) for x in spec.d_format.to_float(d)]
    zeros = _vectors(name, "int", 64, 7, noisy=False)
    assert (sparse.dot_bits(spec, zeros[1], zeros[2], zeros[3], zeros[4]) == d).all()


@pytest.mark.parametrize("name", ["hopper.mma.sp.m16n8k16.f32.tf32.tf32.f32", "hopper.mma.sp.m16n8k64.s32.s4.u4.s32"])
def test_longer_k_chains_instructions(name):
    spec, a, b, c, idx, _ = _vectors(name, "normal", 8, 3)
    d1 = sparse.dot_bits(spec, a, b, c, idx)
    d2 = sparse.dot_bits(spec, np.hstack([a, a]), np.hstack([b, b]), c, np.hstack([idx, idx]))
    assert (sparse.dot_bits(spec, a, b, d1, idx) == d2).all()


# -- metadata as PTX defines it ------------------------------------------------------------------

def test_schemes_follow_the_operand_type():
    assert sparse.sparsity("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32") is sparse.SPARSE_1_2
    assert sparse.sparsity("ampere.mma.sp.m16n8k128.s32.u4.s4.s32") is sparse.PAIRWISE_4_8
    assert sparse.sparsity("hopper.mma.sp.m16n8k64.f32.e4m3.e5m2.f32") is sparse.SPARSE_2_4
    with pytest.raises(ValueError, match="no structured sparsity"):
        sparse.sparsity_for_format("fp64")
    with pytest.raises(ValueError, match="not a structured-sparse"):
        sparse.sparsity("hopper.mma.m16n8k8.f32.tf32.tf32.f32")
    for bits, fmt in ((32, "tf32"), (16, "fp16"), (8, "s8"), (4, "s4")):   # the probe's copy agrees
        assert layouts.CHUNK_ELEMENTS[bits] == sparse.sparsity_for_format(fmt).chunk


@pytest.mark.parametrize("scheme", [sparse.SPARSE_2_4, sparse.SPARSE_1_2, sparse.PAIRWISE_4_8])
def test_every_legal_pattern_has_exactly_one_defined_code(scheme):
    combos = scheme.combinations()
    codes = sparse.metadata_codes(combos.reshape(len(combos), scheme.kept), scheme)[:, 0]
    assert sorted(codes.tolist()) == sorted(scheme.codes)   # a bijection onto PTX's defined codes
    back = sparse.index_from_metadata(codes[:, None], scheme)
    assert (back == combos).all()
    for code in sorted(set(range(16)) - set(scheme.codes)):
        with pytest.raises(ValueError, match="undefined"):
            sparse.index_from_metadata(np.array([[code]]), scheme)


def test_ptx_codes():
    # TF32: 0b0100 keeps the first element of a pair, 0b1110 the second; nothing else is defined
    assert sparse.metadata_codes(np.array([[0, 1]]), sparse.SPARSE_1_2).tolist() == [[0b0100, 0b1110]]
    # s4/u4: the code names the two aligned pairs (2-bit indices 0..3) of a chunk of 8
    idx = np.array([[2, 3, 6, 7, 0, 1, 4, 5]])
    assert sparse.metadata_codes(idx, sparse.PAIRWISE_4_8).tolist() == [[0b1101, 0b1000]]


def _tiled(pattern):
    return lambda i: np.tile(np.array(pattern, np.uint8), (i.shape[0], i.shape[1] // len(pattern)))


@pytest.mark.parametrize("name, bad, message", [
    ("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32", lambda i: np.where(i == 0, 2, i).astype(np.uint8),
     r"0\.\.1 within each chunk of 2"),
    ("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32", lambda i: i.astype(float), "integer"),
    ("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32", lambda i: i[:, :-1], "shape"),
    ("hopper.mma.sp.m16n8k64.s32.s4.s4.s32", lambda i: np.where(i == 0, 8, i).astype(np.uint8),
     r"0\.\.7 within each chunk of 8"),
    ("hopper.mma.sp.m16n8k64.s32.s4.s4.s32", _tiled([0, 2, 4, 6]), "aligned runs"),      # not pairs
    ("hopper.mma.sp.m16n8k64.s32.s4.s4.s32", _tiled([1, 2, 5, 6]), "aligned runs"),      # unaligned pairs
    ("hopper.mma.sp.m16n8k64.s32.s4.s4.s32", _tiled([4, 5, 0, 1]), "increasing"),
    ("ampere.mma.sp.m16n8k128.s32.u4.u4.s32", _tiled([2, 3, 2, 3]), "increasing"),       # one pair twice
])
def test_bad_positions_are_refused(name, bad, message):
    spec, a, b, c, idx, _ = _vectors(name, "int", 4, 0)
    with pytest.raises((ValueError, TypeError), match=message):
        sparse.dot_bits(spec, a, b, c, bad(idx))


def test_index_helpers_refuse_bad_input():
    with pytest.raises(ValueError, match="whole chunks"):
        sparse.check_index(np.zeros((1, 6), np.uint8), 1, 6, sparse.PAIRWISE_4_8)
    with pytest.raises(TypeError, match="codes"):
        sparse.index_from_metadata(np.zeros(3, np.uint8), sparse.SPARSE_1_2)
    with pytest.raises(ValueError, match="multiple of the 4:8 pairwise chunk"):
        sparse.random_index(np.random.default_rng(0), 1, 12, sparse.PAIRWISE_4_8)


# -- compress / expand ----------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", [sparse.SPARSE_2_4, sparse.SPARSE_1_2, sparse.PAIRWISE_4_8])
def test_compress_expand_round_trip(scheme):
    rng = np.random.default_rng(5)
    idx = sparse.random_index(rng, 7, 64, scheme)
    a = rng.integers(1, 15, size=(7, 32)).astype(np.uint8)   # no zero: every kept value shows
    dense = sparse.expand_a(a, idx, scheme)
    assert (dense != 0).sum() == a.size and (sparse.select_b(dense, idx, scheme) == a).all()
    comp, idx2 = sparse.compress_a(dense, pattern=scheme)
    assert (comp == a).all() and (idx2 == idx).all()
    assert (sparse.check_index(idx2, 7, 32, scheme) == idx).all()


def test_compress_pads_and_refuses_per_scheme():
    comp, idx = sparse.compress_a(np.array([[0, 0, 9, 0]], np.uint32), pattern=sparse.SPARSE_1_2)
    assert comp.tolist() == [[0, 9]] and idx.tolist() == [[0, 0]]      # an all-zero pair keeps position 0
    with pytest.raises(ValueError, match="more than 1 non-zeros"):
        sparse.compress_a(np.array([[1, 2]], np.uint32), pattern=sparse.SPARSE_1_2)
    row = np.zeros((1, 8), np.uint8); row[0, 5] = 3                    # one value in pair 2: pairs 0 and 2
    comp, idx = sparse.compress_a(row, pattern=sparse.PAIRWISE_4_8)
    assert comp.tolist() == [[0, 0, 0, 3]] and idx.tolist() == [[0, 1, 4, 5]]
    row[0, [0, 2]] = 1                                                 # pairs 0, 1 and 2 used
    with pytest.raises(ValueError, match="more than 2 non-zero aligned pairs"):
        sparse.compress_a(row, pattern=sparse.PAIRWISE_4_8)
    with pytest.raises(ValueError, match="multiple of 8"):
        sparse.compress_a(np.ones((1, 4), np.uint8), pattern=sparse.PAIRWISE_4_8)


# -- the probe path, with the GPU replaced by the catalog model -----------------------------------

class SparseCpuUnit(Probe):
    """``Probe`` whose kernel launch is the catalog model reading the same register images
    (fragments and metadata nibbles through the target's layouts)."""

    def __init__(self, name):
        self.target = target(name)
        self.lead_bytes = self.stride_bytes = 128
        self.swap_fields = False
        self._sass = {"HMMA.SP": 1}
        self.spec = tc.instruction(name).spec

    def _execute(self, a_regs, b_data, c_regs, e):
        t, spec = self.target, self.spec
        A = t.a.unpack(a_regs, (t.m, t.a_k))
        B = t.b.unpack(b_data, (t.n, t.k))
        C = t.c_fragment.unpack(c_regs, (t.m, t.n))
        T = A.shape[0]
        scheme = t.sparsity
        nib = np.zeros((T, t.m, t.k // scheme.chunk), np.uint32)
        for lane, j in zip(*np.nonzero(t.metadata.coords[..., 0] >= 0)):
            r, ch = t.metadata.coords[lane, j]
            nib[:, r, ch] = (e[:, lane] >> np.uint32(4 * j)) & 0xF
        idx = sparse.index_from_metadata(np.repeat(nib, t.n, axis=1).reshape(T * t.m * t.n, -1), scheme)
        a = np.repeat(A, t.n, axis=1).reshape(-1, t.a_k).astype(spec.a_format.container_dtype)
        b = np.tile(B, (1, t.m, 1)).reshape(-1, t.k).astype(spec.b_format.container_dtype)
        c = C.reshape(-1).astype(spec.c_format.container_dtype)
        with np.errstate(all="ignore"):
            d = expected_d(spec, a, b, c, sparse_index=idx).reshape(T, t.m, t.n)
        return t.cd.pack(d)


@pytest.mark.parametrize("name", ["hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32", "hopper.mma.sp.m16n8k16.f32.tf32.tf32.f32",
                                  "hopper.mma.sp.m16n8k64.s32.u4.s4.s32",
                                  "hopper.mma.sp.m16n8k128.satfinite.s32.s4.s4.s32"])
def test_probe_self_check_metadata_discovery_and_capture(name):
    unit = SparseCpuUnit(name)
    assert unit.self_check(tiles=2).ok
    assert (discover_metadata(unit) == unit.target.metadata.coords).all()
    vs = capture_entry(name, 6, np.random.default_rng(2), probe=unit, device="cpu stand-in")
    assert (expected_d(name, vs["a"], vs["b"], vs["c"], sparse_index=vs["sparse_index"]) == vs["d"]).all()
    scheme = unit.target.sparsity
    assert f"chunk of {scheme.chunk} ({scheme.name})" in vs["meta"]["sparse_note"]
    sparse.check_index(vs["sparse_index"], len(vs["c"]), vs["a"].shape[1], scheme)


class _CountingUnit(SparseCpuUnit):
    """``SparseCpuUnit`` that counts the tiles it is asked to run."""

    calls = 0

    def dot(self, *args, **kwargs):
        type(self).calls += 1
        return super().dot(*args, **kwargs)


@pytest.fixture
def cpu_gpu_dot(monkeypatch):
    """``GpuDot`` with the GPU replaced by the register-level CPU stand-in (no CuPy needed)."""
    import tcnumerics.probe.runtime as runtime
    from tcnumerics.probe import GpuDot

    monkeypatch.setattr(runtime, "Probe", _CountingUnit)
    monkeypatch.setattr(_CountingUnit, "calls", 0)
    return GpuDot


@pytest.mark.parametrize("name", ["hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32", "hopper.mma.sp.m16n8k64.s32.s4.u4.s32",
                                  "hopper.mma.sp.m16n8k32.f32.f16.f16.f32"])
def test_gpu_dot_takes_positions_in_the_entrys_scheme(cpu_gpu_dot, name):
    dot = cpu_gpu_dot(name)                                 # self-checked on the stand-in
    spec = sparse.get_sparse(name)
    scheme = sparse.sparsity(spec)
    _, a, b, c, idx, _ = _vectors(name, "int", 12, 21, k=2 * spec.k)   # K' = 2 instructions, chained
    assert idx.max() == scheme.chunk - 1                    # TF32: 1 in a chunk of 2; s4/u4: 6, 7 of 8
    assert (dot(a, b, c, idx) == sparse.dot_bits(spec, a, b, c, idx)).all()
    assert _CountingUnit.calls == 2


@pytest.mark.parametrize("name, bad, message", [
    ("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32", lambda i: np.where(i == 0, 2, i).astype(np.uint8),
     r"0\.\.1 within each chunk of 2"),
    ("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32", lambda i: i[:, :-1], "shape"),
    ("hopper.mma.sp.m16n8k8.f32.tf32.tf32.f32", lambda i: None, "needs the positions"),
    ("hopper.mma.sp.m16n8k64.s32.s4.u4.s32", lambda i: np.where(i == 0, 8, i).astype(np.uint8),
     r"0\.\.7 within each chunk of 8"),
    ("hopper.mma.sp.m16n8k64.s32.s4.u4.s32", _tiled([1, 2, 5, 6]), "aligned runs"),
    ("hopper.mma.sp.m16n8k64.s32.s4.u4.s32", _tiled([4, 5, 0, 1]), "increasing"),
    ("hopper.mma.sp.m16n8k32.f32.f16.f16.f32", lambda i: np.where(i == 0, 4, i).astype(np.uint8),
     r"0\.\.3 within each chunk of 4"),
    ("hopper.mma.sp.m16n8k32.f32.f16.f16.f32", _tiled([1, 0]), "increasing"),
])
def test_gpu_dot_refuses_bad_positions_before_the_gpu(cpu_gpu_dot, name, bad, message):
    dot = cpu_gpu_dot(name, check=False)
    _, a, b, c, idx, _ = _vectors(name, "int", 4, 0)
    with pytest.raises((ValueError, TypeError), match=message):
        dot(a, b, c, bad(idx))
    assert _CountingUnit.calls == 0                         # refused by GpuDot itself, nothing launched


def test_gpu_dot_refuses_positions_for_a_dense_entry(cpu_gpu_dot):
    dot = cpu_gpu_dot("hopper.mma.m16n8k8.f32.tf32.tf32.f32", check=False)
    a = np.full((2, 8), 0x3F800000, np.uint32)
    with pytest.raises(ValueError, match="not a structured-sparse"):
        dot(a, a, np.zeros(2, np.uint32), np.zeros((2, 4), np.uint8))
    assert _CountingUnit.calls == 0


def test_metadata_layouts_cover_each_chunk_once():
    for bits, ks in ((32, (8, 16)), (4, (64, 128))):
        for k in ks:
            meta = layouts.sparse_metadata(16, k, elem_bits=bits)
            used = meta.coords[meta.coords[..., 0] >= 0]
            chunks = k // layouts.CHUNK_ELEMENTS[bits]
            assert sorted(map(tuple, used.tolist())) == [(r, c) for r in range(16) for c in range(chunks)]
    with pytest.raises(ValueError, match="unsupported"):
        layouts.sparse_metadata(16, 64, elem_bits=32)
    with pytest.raises(ValueError, match="no structured sparsity"):
        layouts.sparse_metadata(16, 16, elem_bits=64)


# -- the committed H200 captures ------------------------------------------------------------------

@pytest.mark.parametrize("name", NEW_HOPPER)
def test_committed_capture_replays(name):
    path = os.path.join(ROOT, file_stem(name) + ".npz")
    assert os.path.exists(path), f"no H200 capture for {name}"
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        assert meta["instruction"] == name and meta["sparse"] is True and "H200" in meta["device"]
        assert set(np.unique(z["family"]).tolist()) == set(families_for(name))
        sparse.check_index(z["sparse_index"], len(z["c"]), z["a"].shape[1], sparse.sparsity(name))
    report = verify_file(path, engine="reference")
    assert report.mismatches == 0, f"{report.mismatches} of {report.n} differ: {report.first}"


def test_no_stray_sparse_captures():
    stems = {file_stem(n) for n in tc.instructions("hopper")}
    for path in glob.glob(os.path.join(ROOT, "mma_sp_*.npz")):
        stem = os.path.basename(path)[:-4]
        assert stem in stems or stem.rsplit("_run", 1)[0] in stems, path


def test_all_pairs_codes_are_the_ordered_ones():
    # mma.sp::ordered_metadata: the two slot indices increase, so 6 of the 16 codes are defined
    assert sorted(sparse.SPARSE_2_4.codes) == sorted(lo | hi << 2 for lo, hi in itertools.combinations(range(4), 2))
