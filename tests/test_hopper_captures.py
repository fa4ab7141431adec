"""Silicon truth from our own probe: every committed H200 capture replays bit for bit.

``vectors/hopper/*.npz`` were captured on an NVIDIA H200 by ``tcnumerics.probe``
(lab/device/capture_hopper.py): one file per Hopper catalog entry, every applicable
input family, a subsample of what was replayed in full on the device.
"""

import glob
import json
import os

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.vectors.families import families_for
from tcnumerics.vectors.verify import verify_file

ROOT = os.path.join(os.path.dirname(__file__), "..", "vectors", "hopper")
FILES = sorted(glob.glob(os.path.join(ROOT, "*.npz")))


def _meta(path):
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["meta"]))


def test_captures_are_committed():
    assert len(FILES) >= 100, "vectors/hopper holds the H200 captures; are they missing?"


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_capture_replays_exactly(path):
    # the reference engine (the specification) needs no JIT warm-up; the fast engine is
    # held equal to it elsewhere
    report = verify_file(path, engine="reference")
    assert report.mismatches == 0, f"{report.instruction}: {report.mismatches} of {report.n} differ: {report.first}"


def test_every_hopper_entry_is_captured_with_every_family():
    captured = {}
    for path in FILES:
        meta = _meta(path)
        with np.load(path, allow_pickle=False) as z:
            captured[meta["instruction"]] = set(np.unique(z["family"]).tolist())
        assert "H200" in meta["device"] and meta["probe"].startswith("tcnumerics-probe")
    missing = [n for n in tc.instructions("hopper") if n not in captured]
    assert not missing, f"Hopper entries without silicon captures: {missing}"
    thin = {n: sorted(set(families_for(n)) - fams) for n, fams in captured.items()
            if n in tc.instructions("hopper") and set(families_for(n)) - fams}
    assert not thin, f"captures lacking families: {thin}"


def test_sparse_captures_carry_metadata():
    sparse_files = [p for p in FILES if os.path.basename(p).startswith("mma_sp_")]
    assert sparse_files
    for path in sparse_files:
        meta = _meta(path)
        with np.load(path, allow_pickle=False) as z:
            assert meta["sparse"] is True and z["a"].shape[1] * 2 == z["b"].shape[1] == meta["K"]
            assert z["sparse_index"].shape == z["a"].shape


def test_a_tampered_capture_is_caught(tmp_path):
    # the replay must be able to fail: flip one result bit and it reports exactly that vector
    from tcnumerics.vectors.io import load, save

    vs = load(FILES[0])
    vs.d = vs.d.copy()
    vs.d[3] ^= 1
    bad = tmp_path / "tampered.npz"
    save(bad, vs)
    report = verify_file(bad, engine="reference")
    assert report.mismatches == 1 and report.first[0].index == 3
