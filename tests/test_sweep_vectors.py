"""Sharded golden vectors on the sweep executors: manifest, checksums, replay, resume, refusals."""

import json
import os

import numpy as np
import pytest

from tcnumerics.cli import main
from tcnumerics.vectors.io import VectorSet, load, save
from tcnumerics.vectors.shards import generate_shards

NAME = "hopper.wgmma.m64n8k16.f32.bf16.bf16"


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("shards") / "g"
    assert main(["vectors", "generate", "--instruction", NAME, "--families", "normal,special,overflow",
                 "--count", "200", "--shards", "3", "-o", str(out), "--workers", "2", "--seed", "4"]) == 0
    return out


def _manifest(d):
    return json.loads((d / "manifest.json").read_text())


def test_manifest_lists_every_shard_with_seed_and_checksums(shard_dir):
    m = _manifest(shard_dir)
    assert m["total"] == 600 and m["shards"] == 3 and m["instruction"] == NAME
    assert [f["seed"] for f in m["files"]] == [[4, 0], [4, 1], [4, 2]]
    assert [f["n"] for f in m["files"]] == [201, 201, 198]  # 67, 67, 66 per family
    shard = load(shard_dir / "shard-00000.npz")
    assert shard.meta["seed"] == [4, 0] and list(np.unique(shard.family)) == ["normal", "overflow", "special"]


def test_content_does_not_depend_on_the_worker_count(shard_dir, tmp_path):
    m = generate_shards(NAME, ["normal", "special", "overflow"], 200, 3, tmp_path / "one", seed=4, workers=1)
    assert [f["content_sha256"] for f in m["files"]] == [f["content_sha256"] for f in _manifest(shard_dir)["files"]]


def test_verify_replays_every_shard(shard_dir, capsys):
    assert main(["vectors", "verify", str(shard_dir), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "3 shards, 600 vectors: 0 mismatches" in out and "peak RSS per worker" in out


def _copy(src, dst):
    dst.mkdir()
    for name in os.listdir(src):
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


def test_a_corrupted_d_or_a_missing_shard_fails(shard_dir, tmp_path, capsys):
    bad = _copy(shard_dir, tmp_path / "bad")
    vs = load(bad / "shard-00001.npz")
    d = vs.d.copy()
    d[5] ^= 1
    os.unlink(bad / "shard-00001.npz")
    save(bad / "shard-00001.npz", VectorSet(vs.a, vs.b, vs.c, d, vs.meta, vs.extra))
    assert main(["vectors", "verify", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "shard-00001.npz: 201 vectors: 1 MISMATCH, checksum differs from manifest" in out
    os.unlink(bad / "shard-00002.npz")
    assert main(["vectors", "verify", str(bad)]) == 2


def test_an_interrupted_generation_resumes_with_the_same_content(shard_dir, tmp_path):
    part = _copy(shard_dir, tmp_path / "part")
    for name in ("shard-00002.npz", "shard-00002.json", "manifest.json"):  # as if stopped before the last shard
        os.unlink(part / name)
    keep = (part / "shard-00000.npz").stat().st_mtime_ns
    m = generate_shards(NAME, ["normal", "special", "overflow"], 200, 3, part, seed=4, workers=1)
    assert (part / "shard-00000.npz").stat().st_mtime_ns == keep  # finished shards are not redone
    assert m["files"] == _manifest(shard_dir)["files"][:2] + [m["files"][2]]
    assert m["files"][2]["content_sha256"] == _manifest(shard_dir)["files"][2]["content_sha256"]


@pytest.mark.parametrize("argv, message", [
    (["--shards", "3", "--seed", "5"], "holds a finished shard set"),
    (["--shards", "900"], "would leave shards empty"),
    (["--workers", "2"], "--workers, --scheduler: only with --shards"),
])
def test_refusals_are_one_line(shard_dir, capsys, argv, message):
    target = str(shard_dir) if "--shards" in argv else str(shard_dir) + ".npz"
    assert main(["vectors", "generate", "--instruction", NAME, "--families", "normal", "--count", "200",
                 "-o", target] + argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
