"""cuBLAS gemmSN (SIMT small-M) kernels: the captured H100 calls replayed bit for bit through library.simt.

Every captured call whose main kernel is ``gemmSN_NN_kernel`` / ``gemmSN_TN_kernel`` (all seven capture
files) is replayed on a corner of its sampled outputs (``SIDE`` rows x columns) with the kernel name the
profiler recorded; the full search is ``tools/device_library/probe_simt.py``.
"""

import glob
import json
import os
import sys

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.library.simt import gemmsn_nn_tiles, is_simt_kernel, parse, simt_gemm, simt_reduce

HERE = os.path.dirname(__file__)
CAPTURES = sorted(glob.glob(os.path.join(HERE, "..", "vectors", "library", "hopper_op_*_h100.npz")))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "device_library"))
SIDE = 4


def _calls():
    out = []
    for path in CAPTURES:
        with np.load(path, allow_pickle=False) as z:
            records = json.loads(str(z["meta"]))["records"]
        for r in records:
            if "error" in r:
                continue
            name = next((k for k in r["kernels"] if is_simt_kernel(k)), None)
            if name is not None:
                out.append((path, r, name))
    return out


CALLS = _calls()


def _replay(path, r, name):
    from replay_survey import load, operands

    _, data = load(path)
    ops = operands(r, data, side=SIDE)
    fmt = tc.get_format(r["out"])
    got = []
    for b in range(len(ops["batches"])):
        C = ops["C"][b] if ops["C"] else None
        y = simt_gemm(name, ops["A"][b], ops["B"][b], out_format=r["out"], alpha=float(r.get("alpha", 1) or 1),
                      beta=float(r.get("beta", 0) or 0), C=C, bias=ops["bias"])
        got.append(fmt.bits_of(np.asarray(y, np.float64)))
    return np.stack(got).reshape(ops["expected"].shape), ops["expected"]


def test_every_captured_gemmsn_call_is_collected():
    assert len(CALLS) >= 30
    assert sum("gemmSN_TN" in n for _, _, n in CALLS) >= 7
    assert sum(r["out"] == "fp32" for _, r, _ in CALLS) >= 23  # the calls that can tell orders apart


@pytest.mark.parametrize("path,r,name", CALLS, ids=[f"{os.path.basename(p)[10:-9]}#{r['id']}" for p, r, _ in CALLS])
def test_captured_call_reproduces_bit_exactly(path, r, name):
    got, expected = _replay(path, r, name)
    assert (got == expected).all(), f"{int((got != expected).sum())}/{expected.size} outputs differ"


def test_nn_tiles_cover_k_in_contiguous_thread_ranges():
    for K in (1, 7, 9, 600, 1023, 11008):
        for threads in (2, 4):
            tiles = [seg for th in gemmsn_nn_tiles(K, threads) for seg in th]
            assert [s for s, _ in tiles] == sorted(s for s, _ in tiles)
            assert sum(e - s for s, e in tiles) == K and all(e - s <= 512 // threads for s, e in tiles)


def test_order_is_not_a_plain_chain():
    # 2**24 + 1 rounds back to 2**24 (a tie to even): a left-to-right FFMA chain loses every 1.0 term after
    # 2**24 and then cancels it to 0; the identified orders sum the 1.0 terms in a fresh tile chain first
    K = 1024
    a = np.ones((1, K), np.float32)
    nn = np.zeros((K, 1), np.float32)
    nn[0, 0], nn[128:144, 0], nn[256, 0] = 2.0**24, 1.0, -(2.0**24)  # P = 4: thread 0 tiles [0,128), [128,256)
    assert simt_reduce("gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, false, x>", a, nn)[0, 0] == 16.0
    tn = np.zeros((K, 1), np.float32)
    tn[0, 0], tn[256:512:16, 0], tn[513, 0] = 2.0**24, 1.0, -(2.0**24)  # lane 0: group 0 {0}, group 1 {256, ..}
    assert simt_reduce("gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true, x>", a, tn)[0, 0] == 16.0
    chain = np.float32(0)
    for k in range(K):
        chain = np.float32(chain + nn[k, 0])
    assert chain == 0.0


def test_parse_rejects_other_kernels():
    with pytest.raises(ValueError):
        parse("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT")
    assert parse("void gemmSN_NN_kernel<float, 128, 2, 4, 8, 3, 4, false, y>").tile == 256
