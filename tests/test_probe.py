"""GPU probe, checked without a GPU: names -> PTX, fragment layouts against the PTX ISA's
own tables, kernel sources (compiled when nvcc is present), and the whole capture path
through a register-level CPU stand-in for the matrix unit."""

import shutil

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics import sparse
from tcnumerics.probe import layouts
from tcnumerics.probe.capture import capture_entry, file_stem, subsample
from tcnumerics.probe.kernels import kernel_source
from tcnumerics.probe.runtime import Probe, chunk_codes, random_sparse_index
from tcnumerics.probe.targets import target
from tcnumerics.vectors.families import expected_d

HOPPER = tc.instructions("hopper")


# -- fragment layouts: spot values from the PTX ISA fragment tables ---------------------------

def test_mma_m16n8k16_f16_a_matches_ptx_table():
    frag = layouts.mma_a(16, 16, 16)
    # PTX: a0,a1: (groupID, tig*2 + i); a2,a3: row + 8; a4..a7: column + 8
    lane = 4 * 3 + 2  # groupID 3, tig 2
    assert frag.coords[lane, 0].tolist() == [[3, 4], [3, 5]]
    assert frag.coords[lane, 1].tolist() == [[11, 4], [11, 5]]
    assert frag.coords[lane, 2].tolist() == [[3, 12], [3, 13]]
    assert frag.coords[lane, 3].tolist() == [[11, 12], [11, 13]]


def test_tf32_and_int8_fragments_match_ptx_tables():
    a = layouts.mma_a(16, 8, 32)  # tf32 m16n8k8: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
    assert a.coords[5, :, 0].tolist() == [[1, 1], [9, 1], [1, 5], [9, 5]]
    b = layouts.mma_b(32, 8)  # s8 m16n8k32 B: b0..b3 k = 4t..4t+3, b4..b7 k = 4t+16.., n = g
    assert b.coords[6, 1].tolist() == [[1, 24], [1, 25], [1, 26], [1, 27]]
    cd = layouts.mma_cd(16, 32)  # c0,c1 (g, 2t + i), c2,c3 (g + 8, ...)
    assert cd.coords[7, :, 0].tolist() == [[1, 6], [1, 7], [9, 6], [9, 7]]
    m8 = layouts.mma_a(8, 16, 8)  # m8n8k16: one register, row g, k 4t..4t+3
    assert m8.coords[9, 0].tolist() == [[2, 4], [2, 5], [2, 6], [2, 7]]


@pytest.mark.parametrize("frag,shape", [
    (layouts.mma_a(16, 16, 16), (16, 16)), (layouts.mma_a(16, 256, 1), (16, 256)),
    (layouts.mma_a(16, 64, 4), (16, 64)), (layouts.mma_b(32, 16), (8, 32)), (layouts.mma_cd(16, 16), (16, 8)),
    (layouts.wgmma_a(32, 8), (64, 32)), (layouts.wgmma_cd(64, 32), (64, 64)), (layouts.wgmma_cd(16, 16), (64, 16)),
])
def test_fragments_cover_every_element_once_and_round_trip(frag, shape):
    flat = frag.coords[..., 0] * shape[1] + frag.coords[..., 1]
    assert sorted(flat.ravel().tolist()) == list(range(shape[0] * shape[1]))
    rng = np.random.default_rng(0)
    tiles = rng.integers(0, 1 << frag.elem_bits, size=(3,) + shape).astype(np.uint32)
    assert (frag.unpack(frag.pack(tiles), shape) == tiles).all()


def test_wgmma_b_image_places_core_matrices():
    B = np.arange(16 * 16, dtype=np.uint32).reshape(1, 16, 16)  # n = 16, k = 16 f16
    img = layouts.wgmma_b_image(B, 16, lead_bytes=128, stride_bytes=256).view(np.uint16)[0]
    assert img[0:8].tolist() == list(range(8))          # row n=0, k 0..7: first core matrix
    assert img[64:72].tolist() == list(range(8, 16))    # k 8..15 one leading offset on
    assert img[128:136].tolist() == list(range(128, 136))  # n = 8: one stride offset on


def test_sparse_metadata_layout_covers_each_chunk_once():
    for k in (16, 32, 64):
        meta = layouts.sparse_metadata(16, k)
        used = meta.coords[meta.coords[..., 0] >= 0]
        assert sorted(map(tuple, used.tolist())) == [(r, c) for r in range(16) for c in range(k // 4)]


# -- targets and kernel sources -----------------------------------------------------------------

def test_target_ptx_strings():
    assert target("hopper.mma.sp.m16n8k32.f32.f16.f16.f32").ptx == \
        "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
    assert target("hopper.mma.m16n8k256.s32.b1.b1.s32.xor.popc").ptx == \
        "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc"
    assert target("hopper.mma.m8n8k16.satfinite.s32.u8.s8.s32").ptx == \
        "mma.sync.aligned.m8n8k16.row.col.satfinite.s32.u8.s8.s32"
    assert target("hopper.wgmma.m64n8k16.f32.bf16.bf16", n=64).ptx.startswith("wgmma.mma_async.sync.aligned.m64n64k16")


@pytest.mark.parametrize("bad", ["ampere.mma.m16n8k16.f32.bf16.bf16.f32", "hopper.mma.m16n8k16.f32.q9.bf16.f32",
                                 "hopper.wgmma.m32n8k16.f32.f16.f16", "hopper.mma.mXnYkZ.f32.f16.f16.f32"])
def test_target_rejects_bad_names(bad):
    with pytest.raises(ValueError, match="name"):
        target(bad)


def test_every_hopper_entry_has_a_one_instruction_kernel():
    for name in HOPPER:
        src = kernel_source(target(name))
        assert src.count("asm volatile(\"" + target(name).ptx.split(".")[0]) + src.count("wgmma.mma_async") >= 1
        assert src.count(target(name).ptx + " ") == 1, name


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_kernels_compile_for_sm90a(tmp_path, monkeypatch):
    from tcnumerics.probe.runtime import build_cubin

    monkeypatch.setenv("TCNUMERICS_PROBE_CACHE", str(tmp_path))
    for name in ("hopper.mma.sp.m16n8k64.s32.s8.u8.s32", "hopper.wgmma.m64n8k32.f32.e4m3.e5m2"):
        assert build_cubin(kernel_source(target(name))).endswith(".cubin")


# -- the capture path through a register-level CPU stand-in ----------------------------------------

class CpuUnit(Probe):
    """The probe with the GPU replaced by the catalog model, working on register images.

    Every output element of every tile is computed from operands unpacked out of the
    same register images the kernel would get, so packing, diagonal placement, metadata
    and unpacking are all exercised."""

    def __init__(self, name):
        self.target = target(name)
        self.lead_bytes = 128
        self.stride_bytes = 128
        self.swap_fields = False
        self._sass = {"HMMA.16816.F32": 1}
        self.spec = tc.instruction(name).spec

    def _execute(self, a_regs, b_data, c_regs, e):
        t = self.target
        A = t.a.unpack(a_regs, (t.m, t.a_k))
        B = t.b.unpack(b_data, (t.n, t.k))
        C = t.c_fragment.unpack(c_regs, (t.m, t.n))
        T = A.shape[0]
        a = np.repeat(A, t.n, axis=1).reshape(-1, t.a_k).astype(self.spec.a_format.container_dtype)
        b = np.tile(B, (1, t.m, 1)).reshape(-1, t.k).astype(self.spec.b_format.container_dtype)
        c = C.reshape(-1).astype(self.spec.c_format.container_dtype)
        idx = None
        if t.kind == "mma.sp":
            nib = np.zeros((T, t.m, t.k // 4), np.uint32)
            used = t.metadata.coords[..., 0] >= 0
            for lane, j in zip(*np.nonzero(used)):
                r, ch = t.metadata.coords[lane, j]
                nib[:, r, ch] = (e[:, lane] >> np.uint32(4 * j)) & 0xF
            codes = np.repeat(nib, t.n, axis=1).reshape(-1, t.k // 4)
            idx = np.stack([codes & 3, codes >> 2], axis=-1).reshape(-1, t.a_k)
        d = expected_d(self.spec, a, b, c, sparse_index=idx).reshape(T, t.m, t.n)
        return t.cd.pack(d)


@pytest.mark.parametrize("name", ["hopper.mma.m16n8k16.f16.f16.f16.f16", "hopper.mma.m8n8k32.s32.s4.u4.s32",
                                  "hopper.mma.sp.m16n8k32.f32.bf16.bf16.f32", "hopper.mma.m16n8k256.s32.b1.b1.s32.xor.popc"])
def test_self_check_and_capture_through_cpu_unit(name):
    unit = CpuUnit(name)
    assert unit.self_check(tiles=4).ok
    vs = capture_entry(name, 8, np.random.default_rng(3), probe=unit, device="cpu stand-in")
    model = expected_d(name, vs["a"], vs["b"], vs["c"], sparse_index=vs.get("sparse_index"))
    assert (model == vs["d"]).all()
    assert vs["meta"]["instruction"] == name and vs["meta"].get("sparse", False) == (".sp." in name)
    small = subsample(vs, 2, np.random.default_rng(0))
    assert len(small["c"]) == 2 * len(set(vs["family"]))


def test_self_check_catches_a_wrong_layout():
    unit = CpuUnit("hopper.mma.m16n8k16.f32.f16.f16.f32")
    good = unit.target
    swapped = layouts.Fragment(good.a.coords[:, [1, 0, 3, 2]], 16)  # rows g and g+8 exchanged
    object.__setattr__(unit, "target", good.__class__(**{**good.__dict__, "a": swapped}))
    # the stand-in unpacks with the true layout: a probe packing with the wrong one must fail
    unit._execute = lambda a, b, c, e, t=good, u=CpuUnit(good.name): u._execute(a, b, c, e)
    assert not unit.self_check(tiles=2).ok


def test_sparse_helpers_agree():
    rng = np.random.default_rng(1)
    idx = random_sparse_index(rng, 5, 32)
    assert (idx[:, 0::2] < idx[:, 1::2]).all()
    codes = chunk_codes(idx)
    assert ((codes & 3) == idx[:, 0::2]).all() and ((codes >> 2) == idx[:, 1::2]).all()
    assert file_stem("hopper.mma.sp.m16n8k32.f32.f16.f16.f32") == "mma_sp_m16n8k32_f32_f16_f16_f32"
    a = rng.integers(1, 0x7C00, size=(5, 16)).astype(np.uint16)
    dense = sparse.expand_a(a, idx)
    comp, idx2 = sparse.compress_a(dense)
    assert (comp == a).all() and (idx2 == idx).all()


@pytest.mark.parametrize("name", ["hopper.mma.sp.m16n8k16.f32.f16.f16.f32", "hopper.mma.sp.m16n8k64.s32.s8.s8.s32"])
def test_metadata_discovery_recovers_the_layout_of_the_unit(name):
    from tcnumerics.probe.runtime import discover_metadata

    unit = CpuUnit(name)
    assert (discover_metadata(unit) == unit.target.metadata.coords).all()
