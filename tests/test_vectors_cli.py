"""``tcnumerics vectors``: generate -> verify -> export/import, exit codes, one-line errors."""

import glob
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from tcnumerics.cli import main
from tcnumerics.vectors.io import load, save, VectorSet

NAME = "hopper.wgmma.m64n8k32.f32.e4m3.e5m2"
HERE = os.path.dirname(__file__)
SAMPLE = sorted(glob.glob(os.path.join(HERE, "..", "..", "shared", "hw-vectors", "*.npz")))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    path = tmp_path_factory.mktemp("gen") / "g.npz"
    assert main(["vectors", "generate", "--instruction", NAME, "--count", "64", "-o", str(path), "--seed", "5",
                 "--engine", "reference"]) == 0
    return path


def test_generate_writes_every_family(generated):
    vs = load(generated)
    fams, counts = np.unique(vs.family, return_counts=True)
    assert set(fams) == {"int", "normal", "bits", "cancel", "align", "cdom", "special", "overflow"}
    assert set(counts) == {64}
    assert vs.meta["instruction"] == NAME and vs.meta["K"] == 32 and vs.meta["seed"] == 5
    assert "not captured from hardware" in vs.meta["source"]


def test_generate_is_reproducible(tmp_path, generated):
    out = tmp_path / "again.npz"
    assert main(["vectors", "generate", "--instruction", NAME, "--count", "64", "-o", str(out), "--seed", "5",
                 "--engine", "reference"]) == 0
    x, y = load(generated), load(out)
    assert all(np.array_equal(x.arrays()[k], y.arrays()[k]) for k in x.arrays())


def test_verify_passes_then_detects_tampering(tmp_path, capsys, generated):
    code, out, err = run(capsys, "vectors", "verify", str(generated), "--engine", "reference")
    assert code == 0 and "all match" in out and "cdom 0/64" in out and err == ""
    vs = load(generated)
    d = vs.d.copy()
    normal = np.flatnonzero(vs.family == "normal")[:3]
    special = np.flatnonzero(vs.family == "special")[:1]
    d[normal] ^= 1
    d[special] ^= 1 << 22
    bad = tmp_path / "tampered.npz"
    save(bad, VectorSet(vs.a, vs.b, vs.c, d, vs.meta, vs.extra))
    code, out, err = run(capsys, "vectors", "verify", str(bad), "--engine", "reference")
    assert code == 1
    assert "4 MISMATCH" in out and "normal 3/64" in out and "special 1/64" in out
    assert f"vector {normal[0]} (normal)" in out


def test_chained_k_and_family_subset(tmp_path, capsys):
    out = tmp_path / "k.npz"
    code, o, e = run(capsys, "vectors", "generate", "--instruction", "hopper.wgmma.m64n8k16.f32.bf16.bf16",
                     "--families", "normal,cdom", "--count", "10", "--k", "64", "-o", str(out), "--engine", "reference")
    assert code == 0, e
    vs = load(out)
    assert vs.a.shape == (20, 64) and vs.meta["K"] == 64
    assert run(capsys, "vectors", "verify", str(out), "--engine", "reference")[0] == 0


@pytest.mark.parametrize("argv,pattern", [
    (["--instruction", "hopper.nope", "--count", "3"], "unknown name"),
    (["--instruction", NAME, "--count", "3", "--families", "tf32"], "does not apply"),
    (["--instruction", NAME, "--count", "3", "--families", "normal,normal"], "listed twice"),
    (["--instruction", NAME, "--count", "0"], "--count"),
    (["--instruction", NAME, "--count", "3", "--k", "48"], "not a positive multiple"),
    (["--instruction", NAME, "--count", "3", "--engine", "warp"], "engine"),
])
def test_generate_bad_input(tmp_path, capsys, argv, pattern):
    out = tmp_path / "x.npz"
    code, o, err = run(capsys, "vectors", "generate", *argv, "-o", str(out))
    assert code == 2 and pattern in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_generate_refuses_existing_output(tmp_path, capsys, generated):
    before = generated.read_bytes()
    code, o, err = run(capsys, "vectors", "generate", "--instruction", NAME, "--count", "3", "-o", str(generated))
    assert code == 2 and "already exists" in err
    assert generated.read_bytes() == before


def test_verify_broken_files_exit_2_one_line_each(tmp_path, capsys, generated):
    marker = tmp_path / "PWNED"

    class Boom:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    pk = tmp_path / "evil.npz"
    pk.write_bytes(pickle.dumps(Boom()))
    obj = tmp_path / "objects.npz"
    np.savez(obj, a=np.array([Boom()], dtype=object), b=np.zeros(1), c=np.zeros(1), d=np.zeros(1),
             meta=np.array("{}"))
    junk = tmp_path / "junk.npz"
    junk.write_text("garbage")
    code, out, err = run(capsys, "vectors", "verify", str(generated), str(pk), str(obj), str(junk),
                         str(tmp_path / "missing.npz"), "--engine", "reference")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("error: ") for line in lines)
    assert "Traceback" not in err and not marker.exists()
    assert "all match" in out  # the good file was still replayed


def test_export_import_round_trip(tmp_path, capsys, generated):
    hexfile = tmp_path / "g.hex"
    code, o, e = run(capsys, "vectors", "export", "--hex", str(generated), "-o", str(hexfile))
    assert code == 0, e
    assert run(capsys, "vectors", "verify", str(hexfile), "--engine", "reference")[0] == 0
    back = tmp_path / "back.npz"
    assert run(capsys, "vectors", "import", str(hexfile), "-o", str(back))[0] == 0
    x, y = load(generated), load(back)
    for k in ("a", "b", "c", "d", "family"):
        assert np.array_equal(x.arrays()[k], y.arrays()[k])
    code, o, err = run(capsys, "vectors", "export", "--hex", str(generated), "-o", str(generated), "--overwrite")
    assert code == 2 and "input files" in err
    code, o, err = run(capsys, "vectors", "export", "--hex", str(generated), "-o", str(hexfile))
    assert code == 2 and "already exists" in err


def test_show_and_families(capsys, generated):
    code, out, err = run(capsys, "vectors", "show", str(generated))
    assert code == 0 and "cdom 64" in out and NAME in out
    code, out, err = run(capsys, "vectors", "families", "--instruction", "hopper.wgmma.m64n8k8.f32.tf32.tf32")
    assert code == 0 and "tf32" in out.split()


@pytest.mark.skipif(not SAMPLE, reason="../shared/hw-vectors not beside this checkout")
def test_before_stop_hook_command_passes():
    # exactly what the hook runs, as a subprocess: exit 0 on the public H200 sample
    r = subprocess.run([sys.executable, "-m", "tcnumerics", "vectors", "verify", *SAMPLE],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("all match") == len(SAMPLE)


@pytest.mark.skipif(not SAMPLE, reason="../shared/hw-vectors not beside this checkout")
def test_sample_silicon_disagrees_with_a_wrong_model(tmp_path, capsys):
    # the replay really compares: relabel the bf16 capture as the Ampere unit (F=24, L=8) and it must fail
    src = next(p for p in SAMPLE if p.endswith("wg_bf16_f32.npz"))
    vs = load(src)
    meta = dict(vs.meta, instruction="ampere.mma.m16n8k16.f32.bf16.bf16.f32")
    wrong = tmp_path / "relabelled.npz"
    save(wrong, VectorSet(vs.a, vs.b, vs.c, vs.d, meta, vs.extra))
    code, out, err = run(capsys, "vectors", "verify", str(wrong), "--engine", "reference")
    assert code == 1 and "MISMATCH" in out


def test_verify_takes_a_directory(tmp_path, capsys, generated):
    folder = tmp_path / "set"
    folder.mkdir()
    for name in ("one.npz", "two.npz"):
        (folder / name).write_bytes(generated.read_bytes())
    code, out, err = run(capsys, "vectors", "verify", str(folder), "--engine", "reference")
    assert code == 0 and out.count("all match") == 2 and "2 files" in out and err == ""
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run(capsys, "vectors", "verify", str(empty))
    assert code != 0 and "no .npz vector files" in err and len(err.strip().splitlines()) == 1
