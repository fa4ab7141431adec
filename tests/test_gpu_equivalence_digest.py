"""The GPU digest pipeline (benchmarks/gpu_equivalence.py --digest, gpu_digest_check.py) on the CPU.

The engine under test is the host build of the CUDA kernel source (g++), not a GPU: these
tests cover generation, hashing, regeneration and the chunk comparison.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from tcnumerics.catalog import get_instruction
from tcnumerics.engines import _cuda_build

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import gpu_digest_check as dc  # noqa: E402
import gpu_equivalence as ge  # noqa: E402

needs_cxx = pytest.mark.skipif(_cuda_build.host_compiler() is None, reason="no host C++ compiler")

PLAIN = "blackwell.tcgen05.mma.kind::f8f6f4.f16.e3m2.e3m2"  # FP16 results
SCALED = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e2m1.ue8m0"


def test_inputs_depend_on_seed_and_name_only():
    spec = get_instruction(PLAIN)
    first = ge.generate_inputs(spec, 3000, 64, seed=7)
    ge.generate_inputs(get_instruction(SCALED), 100, 8, seed=7)  # another datapath generated in between
    again = ge.generate_inputs(spec, 3000, 64, seed=7)
    assert first.digest() == again.digest()
    assert ge.generate_inputs(spec, 3000, 64, seed=8).digest() != first.digest()
    other = get_instruction("blackwell.tcgen05.mma.kind::f8f6f4.f16.e3m2.e4m3")
    assert ge.datapath_rng(7, other.name).integers(0, 1 << 62) != ge.datapath_rng(7, spec.name).integers(0, 1 << 62)


def test_vectors_are_the_pool_then_recombined_rows_and_chunks_slice_them():
    spec = get_instruction(SCALED)
    inp = ge.generate_inputs(spec, 2000, 16, seed=3)
    a, b, c, sa, sb = inp.vectors()
    pool = len(inp.a0)
    assert inp.count == 2000 and a.shape == (2000, inp.k) and sa.shape[0] == 2000
    assert np.array_equal(a[:pool], inp.a0) and np.array_equal(sb[:pool], inp.sb0)
    assert np.array_equal(a[pool:], inp.a0[inp.rows_a[pool:]]) and np.array_equal(c[pool:], inp.c0[inp.rows_c[pool:]])
    part = inp.vectors(500, 900)
    for whole, piece in zip((a, b, c, sa, sb), part):
        assert np.array_equal(whole[500:900], piece)
    A, B, C, SA, SB = inp.gemm()
    assert A.shape == (min(pool, ge.GEMM_M), inp.k) and C.shape == (A.shape[0], B.shape[0]) and SA.shape[0] == A.shape[0]


def test_hash_covers_dtype_shape_and_bits():
    x = np.arange(6, dtype=np.uint16)
    assert ge.bits_hash(x) == ge.bits_hash(x.copy())
    assert ge.bits_hash(x) != ge.bits_hash(x.astype(np.uint32))
    assert ge.bits_hash(x) != ge.bits_hash(x.reshape(2, 3))
    y = x.copy()
    y[5] ^= 1
    assert ge.bits_hash(x) != ge.bits_hash(y)
    assert ge.bits_hash(x) == ge.bits_hash(x.astype(">u2"))  # byte order does not leak into the hash


def _digest(tmp_path, extra=()):
    path = str(tmp_path / "d.json")
    rc = ge.main(["--arch", "blackwell", "--backend", "host", "--digest", path, "--count", "3000",
                  "--per-family", "32", "--chunk", "1024", "--only", f"{PLAIN},{SCALED}", *extra])
    return rc, path


@needs_cxx
def test_host_digest_checks_equal_and_names_a_bad_chunk(tmp_path, capsys):
    rc, path = _digest(tmp_path, ["--dump", f"{PLAIN}:2"])
    assert rc == 0
    digest = dc.load_digest(path)
    assert digest["complete"] and [r["entry"] for r in digest["records"]] == digest["datapaths"]
    assert all(len(r["dot_chunks"]) == 3 for r in digest["records"])
    assert dc.main([path]) == 0

    plain = next(r for r in digest["records"] if r["entry"] == PLAIN)
    bits = bytearray.fromhex(plain["dumps"]["2"])
    bits[2 * 100] ^= 1  # vector 2 * 1024 + 100, low byte of its FP16 result
    plain["dumps"]["2"] = bits.hex()
    plain["dot_chunks"][2] = ge.bits_hash(np.frombuffer(bytes(bits), "<u2"))
    scaled = next(r for r in digest["records"] if r["entry"] == SCALED)
    scaled["gemm_hash"] = "0" * 32
    with open(path, "w") as f:
        json.dump(digest, f)
    capsys.readouterr()
    assert dc.main([path]) == 1
    out = capsys.readouterr().out
    assert "unequal chunks [2]" in out and "vector 2148:" in out and "gemm UNEQUAL" in out


@needs_cxx
def test_generation_difference_is_not_called_an_engine_mismatch(tmp_path, capsys):
    rc, path = _digest(tmp_path, ["--limit", "1"])
    with open(path) as f:
        digest = json.load(f)
    digest["records"][0]["input_hash"] = "1" * 32
    with open(path, "w") as f:
        json.dump(digest, f)
    assert dc.main([path]) == 2
    assert "1 generated differently" in capsys.readouterr().out


def test_datapath_list_is_deterministic_and_checked():
    names = ge.select_names(ge.parser().parse_args(["--arch", "volta"]))
    assert names and names == ge.select_names(ge.parser().parse_args(["--arch", "volta"]))
    header = dict(arch="volta", skip_arch=None, only=None, limit=0, skip_first=0, datapaths=names)
    assert dc.selection_problems(header) == []
    assert dc.selection_problems(dict(header, datapaths=names[::-1])) == ["same datapaths in another order"]
    assert dc.selection_problems(dict(header, datapaths=names + ["x"])) == ["only in the digest: x"]


def test_bad_digest_file_is_named(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a tcnumerics-gpu-digest-1 file"):
        dc.load_digest(str(path))
    path.write_text(json.dumps({"format": ge.DIGEST_FORMAT, "seed": 1}))
    with pytest.raises(ValueError, match="header lacks backend"):
        dc.load_digest(str(path))


def test_datapaths_past_the_deadline_are_skipped_and_reported(tmp_path, capsys):
    record = ge.digest_datapath(PLAIN, 100, 8, 1, 64, "host", deadline=0.0)
    assert record == dict(entry=PLAIN, skipped="deadline")
    path = str(tmp_path / "d.json")
    header = dict(format=ge.DIGEST_FORMAT, backend="host", device="-", seed=1, count=100, per_family=8, chunk=64,
                  arch="blackwell", skip_arch=None, only=PLAIN, limit=0, skip_first=0, numpy=np.__version__,
                  datapaths=[PLAIN])
    ge.write_digest(path, header, {0: record}, 1.0)
    assert dc.load_digest(path)["complete"] is False
    assert dc.main([path]) == 2
    assert "1 skipped at the device deadline" in capsys.readouterr().out
