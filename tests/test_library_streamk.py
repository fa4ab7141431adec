"""TF32 stream-K (``sm90_xmma_gemm_*tf32*_segment_k_on`` after a Memset) replays the H100 bit captures.

Every captured call of the family (30 in the 7 ``hopper_op_*_h100.npz`` files) through
``tcnumerics.library.streamk.streamk_tf32`` with the launch's CTA count, the kernel name's tile and the
band width in ``FITTED_SWIZZLE``: all 16 x 16 sampled outputs of every call, bit-exact
(alternatives scored by ``tools/device_library/probe_tf32.py``).
The full 16 x 16 samples and the alternatives are scored by ``tools/device_library/probe_tf32.py``.
"""

import glob
import os
import sys
import warnings

import numpy as np
import pytest

from tcnumerics.formats import get_format
from tcnumerics.library.streamk import FITTED_SWIZZLE, pair_tree, parse_tile, plan, segment_lengths, streamk_tf32

HERE = os.path.dirname(__file__)
FILES = sorted(glob.glob(os.path.join(HERE, "..", "vectors", "library", "hopper_op_*_h100.npz")))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "device_library"))


def _calls():
    from replay_survey import load
    for path in FILES:
        index, data = load(path)
        for rec in index["records"]:
            if any("segment_k_on" in k for k in rec.get("kernels") or []):
                yield os.path.basename(path), rec, data


CALLS = list(_calls()) if FILES else []


def test_family_present():
    if not FILES:
        pytest.skip("H100 captures not present")
    assert len(CALLS) == 30


@pytest.mark.parametrize("name,rec,data", CALLS, ids=[f"{n[10:-9]}-{r['id']}" for n, r, _ in CALLS])
def test_streamk_capture(name, rec, data):
    from fit_table import call_of
    from replay_survey import operands
    from tcnumerics.library.launches import measured_launch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = call_of(rec)
        launch = measured_launch(c)
    ops = operands(rec, data)  # all 16 x 16 sampled outputs
    got = streamk_tf32(ops["A"][0], ops["B"][0], ops["rows"], ops["cols"], M=c.M, N=c.N, K=c.K, ctas=launch.ctas,
                       tile=parse_tile(launch.main), swizzle=FITTED_SWIZZLE.get((c.M, c.N, c.K), 1),
                       reduce_kernel="execute_split_k" in launch.text, engine="fast")
    bits = get_format("fp32").bits_of(got)
    np.testing.assert_array_equal(bits, ops["expected"][0])


def test_plan_pieces():
    assert pair_tree(2) == (0, 1) and pair_tree(5) == (0, ((1, 2), (3, 4)))
    assert segment_lengths(2048, 13) == [157] * 6 + [158] * 7
    p = plan(448, 5632, 4608, 132, (128, 128, 32), swizzle=2)
    assert (p.tiles, p.shared, p.splits) == (176, 44, 3)
    # band 16 (m-tiles 32, 33) runs upward: its upper half of n-tiles is shared
    assert p.segments(32, 1) == [(0, 144)] and p.segments(32, 2) == [(0, 48), (48, 96), (96, 144)]
