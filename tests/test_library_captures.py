"""Silicon truth at the library level: committed torch captures (H200) replay through the presets.

Each file of ``vectors/library/`` holds sampled rows/columns of real torch.matmul /
torch._scaled_mm calls with the kernel names torch.profiler recorded.  Every call whose
kernel the presets model must replay bit for bit; the kernel families the presets predict
must agree with the names recorded; the calls not modelled are exactly the documented ones.
"""

import glob
import json
import os
import warnings

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.library.presets import h200_presets

HERE = os.path.dirname(__file__)
FILES = sorted(p for p in glob.glob(os.path.join(HERE, "..", "vectors", "library", "*.npz"))
               if not os.path.basename(p).startswith("hopper_op_"))  # op survey + holdout: test_library_survey.py
TORCH_FMT = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "e4m3": "e4m3"}


def _calls():
    for path in FILES:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            arrays = {k: z[k] for k in z.files if k != "meta"}
        for rec in meta["records"]:
            yield os.path.basename(path), rec, arrays


CALLS = list(_calls())


def _preset(rec):
    if rec["op"] == "torch._scaled_mm":
        return h200_presets("torch._scaled_mm", dtype=rec["fmt"], fast_accum=rec["options"]["use_fast_accum"])
    return h200_presets("torch.matmul", dtype="tf32" if rec["fmt"] == "fp32" else rec["fmt"])


def _scale_kind(rec):
    kind = rec["options"].get("scales", "unit")
    return {"unit": "tensor", "tensor": "tensor", "rowwise": "rowwise"}.get(kind, "blockwise")


def _replay(rec, arrays):
    """The preset's prediction for the sampled rows x columns, as output bits."""
    tag = rec["operands"]
    fmt = TORCH_FMT[rec["fmt"]]
    A = tc.get_format(fmt).to_array(arrays[f"a_{tag}"])
    B = tc.get_format(fmt).to_array(arrays[f"b_{tag}"])
    M, N, K = rec["shape"]
    lg = _preset(rec)
    plan = lg.plan(M, N, K, scales=_scale_kind(rec)) if rec["op"] == "torch._scaled_mm" else lg.plan(M, N, K)
    kw = {}
    i = rec["id"]
    if f"scale_a_{i}" in arrays:
        sa = arrays[f"scale_a_{i}"].view(np.float32)
        sb = arrays[f"scale_b_{i}"].view(np.float32)
        rows, cols = arrays[f"rows_{tag}"], arrays[f"cols_{tag}"]
        kind = rec["options"]["scales"]
        if kind == "tensor":
            kw = dict(scale_a=sa.reshape(()), scale_b=sb.reshape(()))
        elif kind == "rowwise":
            kw = dict(scale_a=sa.reshape(-1)[rows], scale_b=sb.reshape(-1)[cols])
        else:  # block-wise: A's [M, K/128] rows; B's 128x128 blocks expanded to the sampled columns
            kw = dict(scale_a=sa.reshape(M, -1)[rows], scale_b=sb.reshape(-1, -(-N // 128))[:, cols // 128])
    C = tc.get_format(fmt).to_array(arrays[f"c_{tag}"]) if f"c_{tag}" in arrays else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = lg(A, B, C, out_dtype=rec["out"], plan=plan, **kw)
    return plan, tc.get_format(rec["out"]).bits_of(got)


@pytest.mark.skipif(not FILES, reason="vectors/library not present")
@pytest.mark.parametrize("name,rec,arrays", CALLS, ids=[f"{n[:-4]}-{r['id']}" for n, r, _ in CALLS])
def test_capture_replays_bit_exactly(name, rec, arrays):
    lg = _preset(rec)
    M, N, K = rec["shape"]
    plan = lg.plan(M, N, K, scales=_scale_kind(rec)) if rec["op"] == "torch._scaled_mm" else lg.plan(M, N, K)
    if not plan.modelled:
        pytest.skip(f"not modelled: {plan.kernel} ({plan.reason})")
    plan, got = _replay(rec, arrays)
    expected = arrays[f"d_{rec['id']}"]
    bad = np.argwhere(got != expected)
    assert bad.size == 0, f"{rec['op']} {rec['fmt']} {rec['shape']} {rec['options']} ({rec['kernels'][-1][:60]}): " \
                          f"{len(bad)} of {expected.size} outputs differ, first at {bad[:3].tolist()}"


def _recorded_family(rec):
    names = " ".join(rec["kernels"])
    return {"split": "splitKreduce" in names, "cutlass": "cutlass" in names or "sm80_xmma" in names,
            "promoted": "algo2" in names}


@pytest.mark.skipif(not FILES, reason="vectors/library not present")
def test_predicted_kernel_families_match_the_recorded_kernels():
    wrong = []
    for name, rec, _ in CALLS:
        M, N, K = rec["shape"]
        lg = _preset(rec)
        plan = lg.plan(M, N, K, scales=_scale_kind(rec)) if rec["op"] == "torch._scaled_mm" else lg.plan(M, N, K)
        fam = _recorded_family(rec)
        if fam["cutlass"]:
            if "cutlass" not in plan.kernel:
                wrong.append((rec["id"], f"recorded a CUTLASS kernel, predicted {plan.kernel}"))
            continue
        if "cutlass" in plan.kernel:
            wrong.append((rec["id"], f"predicted {plan.kernel}, recorded {rec['kernels'][-1][:50]}"))
        if plan.modelled and (plan.split_k is not None) != fam["split"]:
            wrong.append((rec["id"], f"split-K predicted {plan.split_k is not None}, recorded {fam['split']}"))
        if rec["op"] == "torch._scaled_mm" and (plan.structure.promote_every is not None) != fam["promoted"]:
            wrong.append((rec["id"], f"promotion predicted {plan.structure.promote_every}, kernel {rec['kernels'][-1][:50]}"))
    assert not wrong, wrong


@pytest.mark.skipif(not FILES, reason="vectors/library not present")
def test_unmodelled_calls_are_the_documented_kernels():
    unmodelled = {}
    for name, rec, _ in CALLS:
        M, N, K = rec["shape"]
        lg = _preset(rec)
        plan = lg.plan(M, N, K, scales=_scale_kind(rec)) if rec["op"] == "torch._scaled_mm" else lg.plan(M, N, K)
        if not plan.modelled:
            unmodelled[rec["id"]] = " ".join(rec["kernels"])
    # docs/gemm.md lists these: CUTLASS fallbacks (K not a multiple of 8, TF32 below 1024x1024)
    # and block-wise scaled FP8 with split-K
    odd = {i: k[:80] for i, k in unmodelled.items() if not any(f in k for f in ("cutlass", "sm80_xmma", "Ablk128"))}
    assert not odd, odd
    assert 0 < len(unmodelled) <= 40, sorted(unmodelled)
