"""Vector files: round trips, safe writing, and one clear error for every kind of broken file."""

import json
import os
import pickle
import zipfile

import numpy as np
import pytest

from tcnumerics.vectors.families import expected_d, generate
from tcnumerics.vectors.io import (HEX_MAGIC, VectorFileError, VectorReader, VectorSet, is_hex_file, load,
                                   read_hex, save, write_hex)

NAME = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


def _set(n=40, name=NAME, fam="normal", seed=0):
    a, b, c = generate(name, fam, n, np.random.default_rng(seed))
    d = expected_d(name, a, b, c, engine="reference")
    meta = {"instruction": name, "K": a.shape[1], "device": "test"}
    return VectorSet(a, b, c, d, meta, {"family": np.array([fam] * n), "row_id": np.arange(n, dtype=np.int64)})


def _same(x: VectorSet, y: VectorSet):
    assert x.meta == y.meta
    assert set(x.arrays()) == set(y.arrays())
    for k, v in x.arrays().items():
        assert np.array_equal(v, y.arrays()[k]), k


class Boom:
    """Unpickling this would create a marker file: proof that nothing is ever unpickled."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_round_trip_keeps_extra_keys(tmp_path):
    vs = _set()
    save(tmp_path / "v.npz", vs)
    back = load(tmp_path / "v.npz")
    _same(vs, back)
    assert back.extra["family"].dtype.kind == "U" and back.path.endswith("v.npz")


def test_streamed_chunks_equal_whole(tmp_path):
    vs = _set(n=101)
    save(tmp_path / "v.npz", vs)
    with VectorReader(tmp_path / "v.npz") as r:
        assert r.n == 101 and r.K == 16 and r.spec.name == NAME
        parts = list(r.chunks(7))
    assert len(parts) == 15
    for key in ("a", "b", "c", "d", "family", "row_id"):
        assert np.array_equal(np.concatenate([p[key] for p in parts]), vs.arrays()[key])


def test_uncompressed_and_wider_containers_are_read(tmp_path):
    vs = _set()
    np.savez(tmp_path / "w.npz", a=vs.a.astype(np.uint32), b=vs.b, c=vs.c.astype(np.uint64), d=vs.d,
             meta=np.array(json.dumps(vs.meta)))
    back = load(tmp_path / "w.npz")
    assert back.a.dtype == np.uint16 and np.array_equal(back.a, vs.a) and back.c.dtype == np.uint32


def test_big_endian_members_are_read(tmp_path):
    vs = _set()
    np.savez(tmp_path / "be.npz", a=vs.a.astype(">u2"), b=vs.b, c=vs.c.astype(">u4"), d=vs.d,
             meta=np.array(json.dumps(vs.meta)))
    back = load(tmp_path / "be.npz")
    assert np.array_equal(back.a, vs.a) and np.array_equal(back.c, vs.c)


def test_never_overwrites_unless_asked(tmp_path):
    vs = _set()
    path = tmp_path / "v.npz"
    save(path, vs)
    before = path.read_bytes()
    with pytest.raises(VectorFileError, match="already exists"):
        save(path, _set(seed=1))
    assert path.read_bytes() == before
    save(path, _set(seed=1), overwrite=True)
    assert path.read_bytes() != before
    with pytest.raises(VectorFileError, match="input files"):
        save(path, vs, overwrite=True, protect=[str(path)])
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".part")]  # no temporary left behind


def test_save_validates_before_writing(tmp_path):
    vs = _set()
    bad = VectorSet(vs.a[:, :8], vs.b, vs.c, vs.d, vs.meta)
    with pytest.raises(VectorFileError, match="key 'a' has shape"):
        save(tmp_path / "x.npz", bad)
    with pytest.raises(VectorFileError, match="unknown instruction"):
        save(tmp_path / "x.npz", VectorSet(vs.a, vs.b, vs.c, vs.d, {"instruction": "nope", "K": 16}))
    with pytest.raises(VectorFileError, match="end in .npz"):
        save(tmp_path / "x.bin", vs)
    assert os.listdir(tmp_path) == []


def test_hex_round_trip_and_header(tmp_path):
    vs = _set(name="hopper.wgmma.m64n8k8.f32.tf32.tf32", fam="tf32", n=30)
    write_hex(tmp_path / "v.hex", vs)
    text = (tmp_path / "v.hex").read_text()
    lines = text.splitlines()
    assert lines[0] == HEX_MAGIC and is_hex_file(tmp_path / "v.hex")
    assert "# K: 8" in lines and "# count: 30" in lines
    body = [ln for ln in lines if not ln.startswith("#")]
    assert len(body) == 30 and len(body[0].split()) == 3 + 8 + 8
    assert all(len(tok) == 8 for tok in body[0].split()[1:])  # 32-bit containers: 8 hex digits
    assert body[0].split()[3] == format(int(vs.a[0, 0]), "08x")
    back = read_hex(tmp_path / "v.hex")
    assert np.array_equal(back.a, vs.a) and np.array_equal(back.d, vs.d)
    assert list(back.family) == list(vs.family)
    assert back.meta["hex_dropped_keys"] if "hex_dropped_keys" in back.meta else True
    assert "row_id" in json.loads(next(ln for ln in lines if ln.startswith("# meta:"))[7:])["hex_dropped_keys"]
    assert load(tmp_path / "v.hex").n == 30  # load() reads either form


def test_hex_errors(tmp_path):
    vs = _set(n=5)
    write_hex(tmp_path / "v.hex", vs)
    lines = (tmp_path / "v.hex").read_text().splitlines()
    (tmp_path / "short.hex").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(VectorFileError, match="says 5 vectors, found 4"):
        read_hex(tmp_path / "short.hex")
    bad = lines[:-1] + [lines[-1].replace(lines[-1].split()[3], "zz", 1)]
    (tmp_path / "bad.hex").write_text("\n".join(bad) + "\n")
    with pytest.raises(VectorFileError, match="not a hex number"):
        read_hex(tmp_path / "bad.hex")
    (tmp_path / "plain.txt").write_text("hello\n")
    with pytest.raises(VectorFileError, match="not a hex vector file"):
        read_hex(tmp_path / "plain.txt")
    with pytest.raises(VectorFileError, match="already exists"):
        write_hex(tmp_path / "v.hex", vs)


# --- broken files: each one a VectorFileError naming the file, one line, nothing executed ------

def _broken_files(tmp_path):
    vs = _set()
    good = tmp_path / "good.npz"
    save(good, vs)
    marker = tmp_path / "PWNED"
    arrays = {k: v for k, v in vs.arrays().items() if k in ("a", "b", "c", "d")}
    meta = np.array(json.dumps(vs.meta))
    cases = {}

    p = tmp_path / "text.npz"
    p.write_text("not a zip at all\n")
    cases["not_zip"] = (p, "not an .npz archive")

    p = tmp_path / "pickle.npz"
    with open(p, "wb") as fh:
        pickle.dump(Boom(str(marker)), fh)
    cases["pickle"] = (p, "pickled data")

    p = tmp_path / "objects.npz"
    np.savez(p, a=np.array([Boom(str(marker))], dtype=object), b=vs.b, c=vs.c, d=vs.d, meta=meta)
    cases["object_array"] = (p, "pickled Python objects")

    p = tmp_path / "truncated.npz"
    p.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    cases["truncated"] = (p, "not an .npz archive|truncated|corrupt")

    raw = bytearray(good.read_bytes())
    with zipfile.ZipFile(good) as z:
        info = z.getinfo("a.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 20
    raw[start] ^= 0xFF
    p = tmp_path / "crc.npz"
    p.write_bytes(bytes(raw))
    cases["corrupt"] = (p, "corrupt|truncated")

    p = tmp_path / "missing.npz"
    np.savez(p, a=vs.a, b=vs.b, c=vs.c, meta=meta)
    cases["missing_d"] = (p, "missing key 'd'")

    p = tmp_path / "nometa.npz"
    np.savez(p, **arrays)
    cases["missing_meta"] = (p, "missing key 'meta'")

    p = tmp_path / "badjson.npz"
    np.savez(p, meta=np.array("{instruction: oops"), **arrays)
    cases["bad_json"] = (p, "not valid JSON")

    p = tmp_path / "noinst.npz"
    np.savez(p, meta=np.array(json.dumps({"K": 16})), **arrays)
    cases["no_instruction"] = (p, "no 'instruction'")

    p = tmp_path / "unknown.npz"
    np.savez(p, meta=np.array(json.dumps({"instruction": "hopper.mma.m99.f32", "K": 16})), **arrays)
    cases["unknown_instruction"] = (p, "unknown instruction")

    p = tmp_path / "kmult.npz"
    np.savez(p, a=vs.a[:, :12], b=vs.b[:, :12], c=vs.c, d=vs.d,
             meta=np.array(json.dumps({"instruction": NAME, "K": 12})))
    cases["k_not_multiple"] = (p, "K=12 is not a multiple")

    p = tmp_path / "kmeta.npz"
    np.savez(p, meta=np.array(json.dumps({"instruction": NAME, "K": 32})), **arrays)
    cases["k_disagrees"] = (p, "key 'a' has shape")

    p = tmp_path / "dtype.npz"
    np.savez(p, a=vs.a.astype(np.int16), b=vs.b, c=vs.c, d=vs.d, meta=meta)
    cases["signed_dtype"] = (p, "dtype int16")

    p = tmp_path / "float.npz"
    np.savez(p, a=vs.a, b=vs.b, c=vs.c.view(np.float32), d=vs.d, meta=meta)
    cases["float_dtype"] = (p, "dtype float32")

    p = tmp_path / "narrow.npz"
    np.savez(p, a=vs.a, b=vs.b, c=vs.c.astype(np.uint16), d=vs.d, meta=meta)
    cases["narrow_dtype"] = (p, "dtype uint16")

    p = tmp_path / "wide.npz"
    np.savez(p, a=vs.a.astype(np.uint32) | 0x10000, b=vs.b, c=vs.c, d=vs.d, meta=meta)
    cases["values_too_wide"] = (p, "wider than 16 bits")

    p = tmp_path / "shape.npz"
    np.savez(p, a=vs.a, b=vs.b, c=vs.c, d=vs.d[:-1], meta=meta)
    cases["short_d"] = (p, "key 'd' has shape")

    p = tmp_path / "fam.npz"
    np.savez(p, family=np.arange(len(vs.c)), meta=meta, **arrays)
    cases["family_not_strings"] = (p, "key 'family' has dtype")

    p = tmp_path / "single.npz"
    np.save(tmp_path / "single.npy", vs.a)
    os.replace(tmp_path / "single.npy", p)
    cases["npy"] = (p, "single .npy array")

    p = tmp_path / "empty.npz"
    p.write_bytes(b"")
    cases["empty"] = (p, "is empty")

    cases["absent"] = (tmp_path / "absent.npz", "no such file")
    cases["directory"] = (tmp_path, "directory")

    p = tmp_path / "stranger.npz"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("readme.txt", "hi")
    cases["foreign_member"] = (p, "unexpected member")

    p = tmp_path / "sparse_dense.npz"
    np.savez(p, meta=np.array(json.dumps({"instruction": NAME, "K": 16, "sparse": True})), **arrays)
    cases["sparse_flag_on_dense"] = (p, "not a structured-sparse instruction")

    p = tmp_path / "sparse_noindex.npz"
    sp = "hopper.mma.sp.m16n8k32.f32.bf16.bf16.f32"
    np.savez(p, a=vs.a, b=np.concatenate([vs.b, vs.b], axis=1), c=vs.c, d=vs.d,
             meta=np.array(json.dumps({"instruction": sp, "K": 32})))
    cases["sparse_without_index"] = (p, "no 'sparse_index'")
    return cases, marker


def test_every_broken_file_gets_one_clear_error(tmp_path):
    cases, marker = _broken_files(tmp_path)
    for label, (path, pattern) in cases.items():
        with pytest.raises(VectorFileError) as info:
            load(path)
        msg = str(info.value)
        assert isinstance(info.value, ValueError)
        assert "\n" not in msg, label
        assert str(path) in msg, label
        import re

        assert re.search(pattern, msg), f"{label}: {msg}"
    assert not marker.exists(), "a pickle was executed"


def test_sparse_file_round_trip(tmp_path):
    from tcnumerics import sparse

    name = "hopper.mma.sp.m16n8k32.f32.f16.f16.f32"
    spec = sparse.get_sparse(name)
    rng = np.random.default_rng(3)
    a, b_sel, c = generate(name, "normal", 20, rng)
    idx = np.sort(np.stack([rng.permutation(4)[:2] for _ in range(20 * spec.k // 2)]), axis=1)
    idx = idx.reshape(20, spec.k).astype(np.uint8)
    b = generate(name, "normal", 20, rng, k=2 * spec.k)[0].astype(np.uint16)
    cols = (np.arange(spec.k) // 2 * 4)[None, :] + idx
    np.put_along_axis(b, cols.astype(np.int64), b_sel, axis=1)
    d = expected_d(name, a, b, c, sparse_index=idx)
    assert np.array_equal(d, expected_d(name, a, b_sel, c))  # the unit only sees the selected B
    vs = VectorSet(a, b, c, d, {"instruction": name, "K": 2 * spec.k, "sparse": True}, {"sparse_index": idx})
    save(tmp_path / "sp.npz", vs)
    _same(vs, load(tmp_path / "sp.npz"))
    write_hex(tmp_path / "sp.hex", vs)
    _same(vs, read_hex(tmp_path / "sp.hex"))
