"""Bad input gets a clear error naming the argument; the CLI answers with one line and a
non-zero exit, never a traceback; pickles are never unpickled; inputs are never written over;
big inputs go through in bounded memory."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import pickle
import subprocess
import sys
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.cli import main
from tcnumerics.engines import reference

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
S8 = "hopper.mma.m16n8k32.s32.s8.s8.s32"


# ---------------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------------
def _u16(shape, value=0x3F80):
    return np.full(shape, value, np.uint16)


def _zeros32(n):
    return np.zeros(n, np.uint32)


API_CASES = [
    # (label, call, exception type, words the message must contain)
    ("unknown instruction", lambda: tc.instruction("hopper.wgmma.nope"), (ValueError, KeyError), ["instruction", "nope"]),
    ("instruction not a string", lambda: tc.instruction(16), TypeError, ["instruction"]),
    ("unknown engine", lambda: tc.instruction(BF16, engine="gpu"), ValueError, ["engine", "gpu"]),
    ("float arrays as bits", lambda: tc.instruction(BF16).dot_bits(np.ones((2, 16)), _u16((2, 16)), _zeros32(2)),
     TypeError, ["a:", "float64"]),
    ("float accumulator as bits", lambda: tc.instruction(BF16).dot_bits(_u16((2, 16)), _u16((2, 16)), np.zeros(2)),
     TypeError, ["c:"]),
    ("object arrays", lambda: tc.instruction(BF16).dot_bits(np.ones((2, 16), object), _u16((2, 16)), _zeros32(2)),
     TypeError, ["a:"]),
    ("bit patterns too wide", lambda: tc.instruction(BF16).dot_bits(np.full((2, 16), 70000), _u16((2, 16)),
                                                                  _zeros32(2)), ValueError, ["a:", "70000"]),
    ("negative bit patterns", lambda: tc.instruction(BF16).dot_bits(np.full((2, 16), -1), _u16((2, 16)), _zeros32(2)),
     ValueError, ["a:"]),
    ("a and b shapes differ", lambda: tc.instruction(BF16).dot_bits(_u16((2, 16)), _u16((3, 16)), _zeros32(2)),
     ValueError, ["a, b", "(3, 16)"]),
    ("c does not match N", lambda: tc.instruction(BF16).dot_bits(_u16((2, 16)), _u16((2, 16)), _zeros32(3)),
     ValueError, ["c:"]),
    ("K not a multiple", lambda: tc.instruction(BF16).dot_bits(_u16((2, 24)), _u16((2, 24)), _zeros32(2)),
     ValueError, ["K=24", "16"]),
    ("3-D operands", lambda: tc.instruction(BF16).dot_bits(_u16((2, 2, 16)), _u16((2, 2, 16)), _zeros32(2)),
     ValueError, ["2-D"]),
    ("mma inner dimensions", lambda: tc.instruction(BF16).mma(np.ones((2, 16), ml_dtypes.bfloat16),
                                                              np.ones((32, 3), ml_dtypes.bfloat16)),
     ValueError, ["inner"]),
    ("mma K not a multiple", lambda: tc.instruction(BF16).mma(np.ones((2, 24)), np.ones((24, 3))), ValueError,
     ["A:", "K=24"]),
    ("mma C shape", lambda: tc.instruction(BF16).mma(np.ones((2, 16)), np.ones((16, 3)), np.zeros((3, 3), np.float32)),
     ValueError, ["C:"]),
    ("mma strings", lambda: tc.instruction(BF16).mma(np.full((2, 16), "x"), np.ones((16, 3))), TypeError, ["A:"]),
    ("mma integer values out of range", lambda: tc.instruction(S8).mma(np.full((2, 32), 300), np.ones((32, 2), np.int8)),
     ValueError, ["A:", "-128"]),
    ("mma floats for an integer unit", lambda: tc.instruction(S8).mma(np.full((2, 32), 1.5), np.ones((32, 2), np.int8)),
     TypeError, ["A:"]),
    ("gemm inner dimensions", lambda: tc.gemm(np.ones((2, 16)), np.ones((32, 3)), instruction=BF16), ValueError,
     ["inner"]),
    ("gemm unknown instruction", lambda: tc.gemm(np.ones((2, 16)), np.ones((16, 3)), instruction="nope"),
     (ValueError, KeyError), ["instruction"]),
    ("gemm C shape", lambda: tc.gemm(np.ones((2, 16)), np.ones((16, 3)), np.zeros((2, 2)), instruction=BF16),
     ValueError, ["C:"]),
    ("gemm unknown out_format", lambda: tc.gemm(np.ones((2, 16)), np.ones((16, 3)), instruction=BF16,
                                                out_format="fp17"), ValueError, ["format", "fp17"]),
    ("gemm 1-D operands", lambda: tc.gemm(np.ones(16), np.ones(16), instruction=BF16), ValueError, ["A, B"]),
    ("unknown format", lambda: tc.get_format("fp17"), ValueError, ["format", "fp17"]),
    ("format not a string", lambda: tc.get_format(3), TypeError, ["format"]),
    ("unknown rounding", lambda: tc.get_format("bf16").from_float(np.ones(2), "up"), ValueError, ["rounding"]),
    ("unknown overflow", lambda: tc.get_format("bf16").from_float(np.ones(2), overflow="wrap"), ValueError,
     ["overflow"]),
    ("strings to round", lambda: tc.get_format("bf16").from_float(np.array(["1.0"])), TypeError, ["values"]),
    ("floats as bits", lambda: tc.get_format("bf16").to_float(np.ones(2)), TypeError, ["bits"]),
    ("float magnitudes", lambda: tc.get_format("bf16").encode(np.zeros(1, bool), np.array([1.5]), np.array([0])),
     TypeError, ["magnitude"]),
    ("negative magnitudes", lambda: tc.get_format("bf16").encode(np.zeros(1, bool), np.array([-1]), np.array([0])),
     ValueError, ["magnitude"]),
    ("stochastic rounding without bits", lambda: tc.get_format("bf16").from_float(np.ones(2), "sr"), ValueError,
     ["random_bits"]),
    ("floats into an integer format", lambda: tc.get_format("s8").encode_int(np.ones(2)), TypeError, ["values"]),
    ("integer overflow refused", lambda: tc.get_format("s8").encode_int(np.array([200]), "error"), ValueError,
     ["values", "200"]),
    ("group_size zero", lambda: tc.UnitModel("bf16", "bf16", "fp32", "fp32", group_size=0), ValueError,
     ["group_size"]),
    ("group_size not an integer", lambda: tc.UnitModel("bf16", "bf16", "fp32", "fp32", group_size=2.5), TypeError,
     ["group_size"]),
    ("frac_bits out of range", lambda: tc.UnitModel("bf16", "bf16", "fp32", "fp32", frac_bits=99), ValueError,
     ["frac_bits"]),
    ("unknown output_overflow", lambda: tc.UnitModel("bf16", "bf16", "fp32", "fp32", output_overflow="wrap"),
     ValueError, ["output_overflow"]),
    ("unknown algorithm", lambda: tc.UnitModel("bf16", "bf16", "fp32", "fp32", algorithm="magic"), ValueError,
     ["algorithm"]),
    ("k zero", lambda: tc.InstructionSpec("x", 0, tc.UnitModel("bf16", "bf16", "fp32", "fp32")), ValueError, ["k:"]),
    ("model not a UnitModel", lambda: tc.InstructionSpec("x", 16, "fused"), TypeError, ["model"]),
    ("unknown c_entry", lambda: tc.InstructionSpec("x", 16, tc.UnitModel("bf16", "bf16", "fp32", "fp32"),
                                                   c_entry="late"), ValueError, ["c_entry"]),
    ("k_order not a permutation", lambda: tc.InstructionSpec("x", 4, tc.UnitModel("bf16", "bf16", "fp32", "fp32"),
                                                             k_order=(0, 1, 1, 2)), ValueError, ["k_order"]),
    ("unknown architecture", lambda: tc.instructions("pascal"), ValueError, ["arch", "pascal"]),
    ("illegal wgmma N", lambda: tc.instruction("hopper.wgmma.m64n7k16.f32.bf16.bf16"), ValueError, ["N"]),
]


@pytest.mark.parametrize("label, call, error, words", API_CASES, ids=[c[0] for c in API_CASES])
def test_api_rejects_bad_input_clearly(label, call, error, words):
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, f"{label}: {message!r} does not mention {word!r}"
    assert "\n" not in message


def test_gemm_scales_that_are_nan_or_zero_are_refused():
    A, B = np.ones((2, 32), ml_dtypes.float8_e4m3fn), np.ones((32, 3), ml_dtypes.float8_e4m3fn)
    inst = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
    try:
        tc.gemm(A, B, instruction=inst, scale_a=1.0, scale_b=1.0)
    except TypeError:
        pytest.skip("this gemm takes no scales")
    for bad in (np.nan, 0.0, np.inf):
        for name in ("scale_a", "scale_b"):
            with pytest.raises(ValueError, match=name):
                tc.gemm(A, B, instruction=inst, **{name: bad})


def test_valid_input_still_works():
    # the checks above are not refusing everything: the same calls with good input succeed
    inst = tc.instruction(BF16)
    assert inst.dot_bits(_u16((2, 16)), _u16((2, 16)), _zeros32(2)).tolist() == [0x41800000] * 2
    assert tc.gemm(np.ones((2, 16)), np.ones((16, 3)), instruction=BF16).tolist() == [[16.0] * 3] * 2
    assert tc.instruction(S8).mma(np.full((1, 32), -128), np.full((32, 1), 127)).tolist() == [[-128 * 127 * 32]]


def test_dot_bits_runs_in_bounded_memory():
    # 262,144 vectors of K=32: the engines' temporaries for all rows at once would take over 1 GB
    n, k = 1 << 18, 32
    inst = tc.instruction(BF16, engine="reference")
    rng = np.random.default_rng(5)
    a = rng.integers(0, 1 << 16, (n, k), dtype=np.uint16)
    b = np.full((n, k), 0x3F80, np.uint16)
    c = np.zeros(n, np.uint32)
    tracemalloc.start()
    try:
        d = inst.dot_bits(a, b, c)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    inputs = a.nbytes + b.nbytes + c.nbytes
    assert peak < 400 << 20, f"peak {peak >> 20} MiB for {inputs >> 20} MiB of input"
    spot = rng.integers(0, n, 64)
    assert np.array_equal(d[spot], reference.dot_bits(inst.spec, a[spot], b[spot], c[spot]))


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------
def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line_error(code, err, *words):
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error:"), err
    assert "Traceback" not in err
    for w in words:
        assert w.lower() in lines[0].lower(), (w, lines[0])


@pytest.mark.parametrize("argv, words", [
    (["describe", "hopper.nope"], ["nope"]),
    (["instructions", "--arch", "pascal"], ["pascal"]),
    (["no-such-command"], []),
    (["describe"], []),
])
def test_cli_bad_arguments_give_one_line(argv, words, capsys):
    code, _, err = _run(argv, capsys)
    _assert_one_line_error(code, err, *words)


def test_cli_unexpected_exceptions_still_give_one_line(monkeypatch, capsys):
    import tcnumerics.cli as cli

    def boom(args):
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(cli, "_cmd_instructions", boom)
    monkeypatch.delenv("TCNUMERICS_DEBUG", raising=False)
    code, _, err = _run(["instructions"], capsys)
    _assert_one_line_error(code, err, "RuntimeError", "second line")


# --- vector files: what `tcnumerics vectors verify` must refuse ------------------------------------
def _vectors_verify_available() -> bool:
    try:
        import tcnumerics.vectors.cli  # noqa: F401
    except ImportError:
        return False
    return True


needs_vectors = pytest.mark.skipif(not _vectors_verify_available(), reason="tcnumerics vectors is not built")


def _valid_arrays(n=5, name=BF16, k=16):
    rng = np.random.default_rng(0)
    spec = tc.instruction(name).spec
    a = rng.integers(0, 1 << 16, (n, k), dtype=np.uint16) & 0xBFFF  # finite bf16 of moderate size
    b = np.full((n, k), 0x3F80, np.uint16)
    c = np.zeros(n, np.uint32)
    d = reference.dot_bits(spec, a, b, c)
    meta = {"instruction": name, "K": k, "a_format": "bf16", "b_format": "bf16", "c_format": "fp32",
            "d_format": "fp32"}
    return {"a": a, "b": b, "c": c, "d": d, "family": np.array(["normal"] * n), "meta": np.array(json.dumps(meta))}


def _write_npz(path: pathlib.Path, arrays: dict) -> pathlib.Path:
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


class _Tripwire:
    """Unpickling this creates a file: proof that a loader executed the pickle."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def _bad_files(tmp: pathlib.Path, marker: str) -> dict:
    files = {}
    good = _valid_arrays()
    files["valid"] = _write_npz(tmp / "valid.npz", good)
    # a pickled object array inside the archive, in place of d
    evil = np.empty(1, dtype=object)
    evil[0] = _Tripwire(marker)
    files["pickled member"] = _write_npz(tmp / "pickled.npz", {**good, "d": evil})
    # a raw pickle named .npz, and a pickled .npy
    files["raw pickle"] = tmp / "raw.npz"
    files["raw pickle"].write_bytes(pickle.dumps({"d": _Tripwire(marker)}))
    buf = io.BytesIO()
    np.save(buf, evil, allow_pickle=True)
    files["pickled npy"] = tmp / "pickled.npy"
    files["pickled npy"].write_bytes(buf.getvalue())
    whole = files["valid"].read_bytes()
    files["truncated"] = tmp / "truncated.npz"
    files["truncated"].write_bytes(whole[: len(whole) // 2])
    files["no d"] = _write_npz(tmp / "no_d.npz", {k: v for k, v in good.items() if k != "d"})
    meta = json.loads(str(good["meta"]))
    files["unknown instruction"] = _write_npz(
        tmp / "unknown.npz", {**good, "meta": np.array(json.dumps({**meta, "instruction": "hopper.wgmma.nope"}))})
    short = {k: (v[:, :12] if k in ("a", "b") else v) for k, v in good.items()}
    files["K not a multiple"] = _write_npz(tmp / "k12.npz", {**short, "meta": np.array(json.dumps({**meta, "K": 12}))})
    files["broken JSON"] = _write_npz(tmp / "json.npz", {**good, "meta": np.array('{"instruction": "hopper.')})
    files["not npz"] = tmp / "notes.npz"
    files["not npz"].write_text("this is not an archive\n")
    files["empty"] = tmp / "empty.npz"
    files["empty"].write_bytes(b"")
    files["missing"] = tmp / "does-not-exist.npz"
    files["directory"] = tmp / "adir.npz"
    files["directory"].mkdir()
    files["float bits"] = _write_npz(tmp / "float.npz", {**good, "a": good["a"].astype(np.float64)})
    files["d of the wrong width"] = _write_npz(tmp / "wide.npz", {**good, "d": good["d"].astype(np.uint16)})
    return files


def _fingerprint(path: pathlib.Path):
    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


@needs_vectors
def test_vectors_verify_accepts_a_valid_file(tmp_path, capsys):
    path = _write_npz(tmp_path / "valid.npz", _valid_arrays())
    code, out, err = _run(["vectors", "verify", str(path)], capsys)
    assert code == 0, err


@needs_vectors
def test_vectors_verify_refuses_bad_files_in_one_line(tmp_path, capsys):
    marker = str(tmp_path / "PICKLE-WAS-EXECUTED")
    files = _bad_files(tmp_path, marker)
    before = {k: _fingerprint(p) for k, p in files.items()}
    for label, path in files.items():
        if label == "valid":
            continue
        code, out, err = _run(["vectors", "verify", str(path)], capsys)
        assert code == 2, f"{label}: exit {code}, stderr {err!r}"
        _assert_one_line_error(code, err)
        assert "Traceback" not in out
    assert not os.path.exists(marker), "a pickle was executed"
    assert {k: _fingerprint(p) for k, p in files.items()} == before, "an input file was modified"
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in files.values() if p.exists()), "stray files written"


@needs_vectors
def test_vectors_verify_reports_a_mismatch_with_exit_1(tmp_path, capsys):
    arrays = _valid_arrays()
    arrays["d"] = arrays["d"].copy()
    arrays["d"][2] ^= 1
    path = _write_npz(tmp_path / "wrong.npz", arrays)
    code, out, err = _run(["vectors", "verify", str(path)], capsys)
    assert code == 1, (out, err)


@needs_vectors
def test_vectors_generate_never_overwrites(tmp_path, capsys):
    path = _write_npz(tmp_path / "keep.npz", _valid_arrays())
    before = _fingerprint(path)
    code, _, err = _run(["vectors", "generate", "--instruction", BF16, "--count", "2", "-o", str(path)], capsys)
    _assert_one_line_error(code, err)
    assert _fingerprint(path) == before


@needs_vectors
def test_cli_process_exits_cleanly_on_a_pickle(tmp_path):
    # the real process: exit status, one line on stderr, no traceback, the pickle not run
    marker = tmp_path / "PICKLE-WAS-EXECUTED"
    files = _bad_files(tmp_path, str(marker))
    for label in ("pickled member", "truncated"):
        proc = subprocess.run([sys.executable, "-m", "tcnumerics", "vectors", "verify", str(files[label])],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (label, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not marker.exists()
