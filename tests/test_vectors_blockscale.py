"""Golden vectors for block-scaled instructions: scale_a / scale_b in the file formats,
generation with scales, replay with scales, validation and tamper detection."""

import json
import os

import numpy as np
import pytest

from tcnumerics.cli import main
from tcnumerics.vectors.families import expected_d, families_for, generate_scaled, scale_extremes
from tcnumerics.vectors.io import VectorFileError, VectorReader, VectorSet, load, read_hex, save, write_hex
from tcnumerics.vectors.verify import verify_file

MX = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e5m2.ue8m0"
NV = "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"
DENSE = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def make_set(name=MX, n=24, seed=0, family="normal", k=None):
    a, b, c, sa, sb = generate_scaled(name, family, n, np.random.default_rng(seed), k=k)
    with np.errstate(all="ignore"):
        d = expected_d(name, a, b, c, scale_a=sa, scale_b=sb, engine="reference")
    return VectorSet(a, b, c, d, {"instruction": name, "K": a.shape[1]},
                     {"family": np.full(n, family), "scale_a": sa, "scale_b": sb})


def same_set(x: VectorSet, y: VectorSet) -> None:
    for key in ("a", "b", "c", "d", "scale_a", "scale_b"):
        got, want = x.arrays()[key], y.arrays()[key]
        assert got.dtype == want.dtype and np.array_equal(got, want), key


# --------------------------------------------------------------------------------------------
# file formats

@pytest.mark.parametrize("name", [MX, NV])
def test_npz_round_trip_keeps_scales_and_describes_them(tmp_path, name):
    vs = make_set(name)
    path = tmp_path / "v.npz"
    save(path, vs)
    back = load(path)
    same_set(back, vs)
    assert back.scale_a.dtype == np.uint8 and back.scale_a.shape == vs.scale_a.shape
    assert back.block_scaled and back.meta["block_scaled"] is True
    block = 32 if name == MX else 16
    assert back.meta["scale_block"] == block and back.meta["scale_format"] == ("ue8m0" if name == MX else "ue4m3")
    assert back.scale_a.shape == (vs.n, vs.K // block)
    # streamed reading hands the scales out row by row like every per-vector key
    with VectorReader(path) as r:
        chunks = list(r.chunks(5))
    assert np.array_equal(np.concatenate([ch["scale_b"] for ch in chunks]), vs.scale_b)
    assert all(len(ch["scale_a"]) == len(ch["c"]) for ch in chunks)


@pytest.mark.parametrize("name", [MX, NV])
def test_hex_round_trip_keeps_scales(tmp_path, name):
    vs = make_set(name, family="special")
    hexpath = tmp_path / "v.hex"
    write_hex(hexpath, vs)
    text = hexpath.read_text()
    nb = vs.scale_a.shape[1]
    assert f"scale_a[0..{nb - 1}] scale_b[0..{nb - 1}]" in text and "scale_a=8 scale_b=8" in text
    back = read_hex(hexpath)
    same_set(back, vs)
    # the last 2*nb fields of a line are the scales, as two-digit hex
    first = [line for line in text.splitlines() if not line.startswith("#")][0].split()
    assert first[-2 * nb:] == [format(int(v), "02x") for v in np.concatenate([vs.scale_a[0], vs.scale_b[0]])]
    assert verify_file(hexpath, engine="reference").mismatches == 0


def test_hex_with_a_missing_scale_field_is_refused(tmp_path):
    vs = make_set(NV, n=3)
    hexpath = tmp_path / "v.hex"
    write_hex(hexpath, vs)
    lines = hexpath.read_text().splitlines()
    lines[-1] = lines[-1].rsplit(" ", 1)[0]  # drop the last scale_b field
    bad = tmp_path / "bad.hex"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(VectorFileError, match="fields, expected"):
        read_hex(bad)


def _raw_npz(path, **arrays):
    meta = arrays.pop("meta")
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)


@pytest.mark.parametrize("change,pattern", [
    (lambda d: d.pop("scale_a"), "block-scaled but there is no 'scale_a'"),
    (lambda d: (d.pop("scale_a"), d.pop("scale_b")), "no 'scale_a' and no 'scale_b'"),
    (lambda d: d.update(scale_b=d["scale_b"][:, :1]), r"key 'scale_b' has shape \(24, 1\), expected \(24, 2\)"),
    (lambda d: d.update(scale_a=d["scale_a"][:-1]), r"key 'scale_a' has shape \(23, 2\)"),
    (lambda d: d.update(scale_a=d["scale_a"].astype(np.float32)), "key 'scale_a' has dtype float32, expected unsigned"),
    (lambda d: d.update(scale_b=d["scale_b"].astype(np.int16)), "key 'scale_b' has dtype int16"),
    (lambda d: d.update(scale_a=d["scale_a"].astype(np.uint16) + 256), "wider than 8 bits"),
    (lambda d: d["meta"].update(scale_block=16), "meta 'scale_block' is 16, but .* takes 32"),
    (lambda d: d["meta"].update(scale_format="ue4m3"), "meta 'scale_format' is 'ue4m3', but .* takes 'ue8m0'"),
])
def test_bad_scales_are_refused_by_every_reader_and_writer(tmp_path, change, pattern):
    vs = make_set(MX, n=24, k=64)  # two scale blocks per vector
    arrays = {**vs.arrays(), "meta": dict(vs.meta)}
    change(arrays)
    meta = arrays.pop("meta")
    # writing
    extra = {k: v for k, v in arrays.items() if k not in ("a", "b", "c", "d")}
    with pytest.raises(VectorFileError, match=pattern):
        save(tmp_path / "w.npz", VectorSet(arrays["a"], arrays["b"], arrays["c"], arrays["d"], meta, extra))
    assert not (tmp_path / "w.npz").exists()
    with pytest.raises(VectorFileError, match=pattern):
        write_hex(tmp_path / "w.hex", VectorSet(arrays["a"], arrays["b"], arrays["c"], arrays["d"], meta, extra))
    # reading a file written behind the library's back
    raw = tmp_path / "raw.npz"
    _raw_npz(raw, meta=meta, **arrays)
    with pytest.raises(VectorFileError, match=pattern) as exc:
        load(raw)
    assert isinstance(exc.value, ValueError) and "\n" not in str(exc.value) and str(raw) in str(exc.value)


def test_scales_on_a_dense_unscaled_instruction_are_refused(tmp_path):
    a = np.full((2, 16), 0x3F80, np.uint16)
    vs = VectorSet(a, a, np.zeros(2, np.uint32), np.full(2, 0x41800000, np.uint32), {"instruction": DENSE, "K": 16},
                   {"scale_a": np.full((2, 1), 127, np.uint8), "scale_b": np.full((2, 1), 127, np.uint8)})
    with pytest.raises(VectorFileError, match="key 'scale_a' given, but .* is not a block-scaled instruction"):
        save(tmp_path / "x.npz", vs)
    raw = tmp_path / "raw.npz"
    _raw_npz(raw, meta={"instruction": DENSE, "K": 16}, a=a, b=a, c=vs.c, d=vs.d, scale_b=vs.extra["scale_b"])
    with pytest.raises(VectorFileError, match="key 'scale_b' given, but"):
        load(raw)
    _raw_npz(raw := tmp_path / "raw2.npz", meta={"instruction": DENSE, "K": 16, "block_scaled": True},
             a=a, b=a, c=vs.c, d=vs.d)
    with pytest.raises(VectorFileError, match="meta says block_scaled but"):
        load(raw)
    # the same file without scales is fine, and its meta does not grow scale keys
    plain = VectorSet(a, a, vs.c, vs.d, {"instruction": DENSE, "K": 16})
    save(tmp_path / "ok.npz", plain)
    assert "block_scaled" not in load(tmp_path / "ok.npz").meta


def test_cli_reports_bad_scale_files_in_one_line(tmp_path, capsys):
    vs = make_set(MX, n=4)
    raw = tmp_path / "noscale.npz"
    _raw_npz(raw, meta=dict(vs.meta), a=vs.a, b=vs.b, c=vs.c, d=vs.d)
    code, out, err = run(capsys, "vectors", "verify", str(raw))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no 'scale_a'" in err and "Traceback" not in err


# --------------------------------------------------------------------------------------------
# generation and replay

def test_families_make_the_extreme_scales():
    rng = np.random.default_rng(7)
    for name, want in ((MX, {0x00, 0xFE, 0xFF}), (NV, {0x00, 0x01, 0x7E, 0x7F, 0x80, 0xB8})):
        assert set(scale_extremes(name)) == want
        _a, _b, _c, sa, sb = generate_scaled(name, "special", 200, rng)
        assert want <= set(np.unique(np.concatenate([sa.ravel(), sb.ravel()])).tolist())
        _a, _b, _c, sa, sb = generate_scaled(name, "normal", 400, rng)
        unit = 127 if name == MX else 0x38
        assert np.mean(sa == unit) > 0.3  # mostly moderate: unit scales are the commonest
        assert set(np.unique(sa).tolist()) - want  # and others besides the extremes


def test_generate_scaled_refuses_an_unscaled_instruction():
    with pytest.raises(ValueError, match="not block-scaled"):
        generate_scaled(DENSE, "normal", 2, np.random.default_rng(0))
    a = np.zeros((1, 16), np.uint16)
    with pytest.raises(ValueError, match="not a block-scaled instruction"):
        expected_d(DENSE, a, a, np.zeros(1, np.uint32), scale_a=np.zeros((1, 1), np.uint8),
                   scale_b=np.zeros((1, 1), np.uint8))


def test_scales_change_d():
    """A test of the plumbing: the same operands with other scales give other results."""
    vs = make_set(MX, n=50, family="normal")
    with np.errstate(all="ignore"):
        unit = expected_d(MX, vs.a, vs.b, vs.c, engine="reference")
    assert np.mean(unit != vs.d) > 0.3


@pytest.fixture(scope="module", params=[MX, NV])
def generated(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("gen") / "g.npz"
    assert main(["vectors", "generate", "--instruction", request.param, "--count", "40", "-o", str(path),
                 "--seed", "3", "--k", "64", "--engine", "reference"]) == 0
    return request.param, path


def test_generate_writes_scales_and_verify_replays_them(generated, capsys):
    name, path = generated
    vs = load(path)
    assert vs.instruction == name and vs.K == 64 and vs.n == 40 * len(families_for(name))
    block = vs.meta["scale_block"]
    assert vs.scale_a.shape == vs.scale_b.shape == (vs.n, 64 // block) and vs.scale_a.dtype == np.uint8
    assert vs.meta["block_scaled"] is True
    for engine in ("reference", "auto", "fast"):
        code, out, err = run(capsys, "vectors", "verify", str(path), "--engine", engine, "--rows", "33")
        assert code == 0 and "all match" in out and err == "", (engine, out, err)
    hexpath = path.with_suffix(".hex")
    assert run(capsys, "vectors", "export", "--hex", str(path), "-o", str(hexpath))[0] == 0
    code, out, _ = run(capsys, "vectors", "verify", str(hexpath))
    assert code == 0 and "all match" in out
    back = path.with_name("back.npz")
    assert run(capsys, "vectors", "import", str(hexpath), "-o", str(back))[0] == 0
    same_set(load(back), vs)


def test_generated_d_matches_the_exact_oracle(generated):
    name, path = generated
    vs = load(path)
    rng = np.random.default_rng(0)
    rows = np.sort(np.concatenate([np.flatnonzero(vs.family == f)[:3] for f in np.unique(vs.family)]
                                  + [rng.choice(vs.n, 6, replace=False)]))
    with np.errstate(all="ignore"):
        exact = expected_d(name, vs.a[rows], vs.b[rows], vs.c[rows], scale_a=vs.scale_a[rows],
                           scale_b=vs.scale_b[rows], engine="exact")
    assert np.array_equal(exact, vs.d[rows])


def test_corrupted_d_or_scale_is_a_mismatch(generated, tmp_path, capsys):
    name, path = generated
    vs = load(path)
    normal = np.flatnonzero(vs.family == "normal")
    # d: flip a low bit of two vectors
    d = vs.d.copy()
    d[normal[:2]] ^= 1
    bad_d = tmp_path / "bad_d.npz"
    save(bad_d, VectorSet(vs.a, vs.b, vs.c, d, vs.meta, vs.extra))
    code, out, _ = run(capsys, "vectors", "verify", str(bad_d), "--engine", "reference")
    assert code == 1 and "2 MISMATCH" in out and "normal 2/40" in out
    # a scale: double one block's scale of A (one exponent step / the next power of two)
    # in vectors whose d is finite and nonzero, so the result must move
    dv = vs.d.view(np.float32)
    rows = [i for i in normal if np.isfinite(dv[i]) and dv[i] != 0][:3]
    assert len(rows) == 3
    sa = vs.scale_a.copy()
    unit = 127 if vs.meta["scale_format"] == "ue8m0" else 0x38
    for i in rows:
        a_vals = vs.a[i]
        blk = int(np.argmax([np.any(a_vals[j * vs.meta["scale_block"]:(j + 1) * vs.meta["scale_block"]] & 0x7F)
                             for j in range(sa.shape[1])]))
        sa[i, :] = unit
        sa[i, blk] = unit + (1 if unit == 127 else 8)  # 2.0 in the block holding a nonzero A
    extra = dict(vs.extra, scale_a=sa)
    # the recorded d came from other scales; with every block at 1 but one at 2, d must differ
    with np.errstate(all="ignore"):
        moved = expected_d(name, vs.a[rows], vs.b[rows], vs.c[rows], scale_a=sa[rows], scale_b=vs.scale_b[rows],
                           engine="reference")
    changed = int(np.sum(moved != vs.d[rows]))
    assert changed >= 1
    bad_s = tmp_path / "bad_scale.npz"
    save(bad_s, VectorSet(vs.a, vs.b, vs.c, vs.d, vs.meta, extra))
    report = verify_file(bad_s, engine="reference")
    assert report.mismatches == changed and not report.ok
    assert {m.index for m in report.first} <= set(rows)


def test_corrupted_scale_to_nan_is_a_mismatch(generated, tmp_path):
    name, path = generated
    vs = load(path)
    dv = vs.d.view(np.float32)
    i = int(np.flatnonzero((vs.family == "int") & np.isfinite(dv))[0])
    sa = vs.scale_a.copy()
    sa[i, 0] = 0xFF if vs.meta["scale_format"] == "ue8m0" else 0x7F  # the NaN code: d must become NaN
    save(tmp_path / "nan.npz", VectorSet(vs.a, vs.b, vs.c, vs.d, vs.meta, dict(vs.extra, scale_a=sa)))
    report = verify_file(tmp_path / "nan.npz", engine="reference")
    assert report.mismatches == 1 and report.first[0].index == i
    assert np.isnan(np.array([report.first[0].model], np.uint32).view(np.float32)[0])


def test_generate_is_reproducible_with_scales(tmp_path, generated):
    name, path = generated
    again = tmp_path / "again.npz"
    assert main(["vectors", "generate", "--instruction", name, "--count", "40", "-o", str(again),
                 "--seed", "3", "--k", "64", "--engine", "reference"]) == 0
    same_set(load(again), load(path))


def test_generate_never_overwrites(generated, capsys):
    name, path = generated
    before = os.path.getmtime(path), path.read_bytes()
    code, out, err = run(capsys, "vectors", "generate", "--instruction", name, "--count", "2", "-o", str(path))
    assert code == 2 and "already exists" in err and err.count("\n") == 1
    assert (os.path.getmtime(path), path.read_bytes()) == before
