"""Silicon truth: every vector of the public H200 sample replays bit for bit."""

import glob
import json
import os

import numpy as np
import pytest

import tcnumerics as tc

HERE = os.path.dirname(__file__)
SAMPLE = sorted(glob.glob(os.path.join(HERE, "..", "..", "shared", "hw-vectors", "*.npz")))


@pytest.mark.skipif(not SAMPLE, reason="../shared/hw-vectors not beside this checkout")
@pytest.mark.parametrize("path", SAMPLE, ids=os.path.basename)
@pytest.mark.parametrize("engine", ["reference", "auto"])
def test_public_h200_sample_replays_exactly(path, engine):
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        inst = tc.instruction(meta["instruction"], engine=engine)
        d = inst.dot_bits(z["a"], z["b"], z["c"])
        expected = z["d"]
    mismatches = np.flatnonzero(d != expected)
    assert mismatches.size == 0, f"{meta['instruction']}: {mismatches.size} of {len(d)} differ, first at {mismatches[:5]}"


def test_sample_is_present_in_ci():
    # CI runs with shared/ beside the clone; a silently skipped replay would hide regressions
    if os.environ.get("CI"):
        assert SAMPLE, "the public H200 sample is missing"
