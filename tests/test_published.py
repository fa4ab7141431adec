"""Silicon beyond Hopper: Khattak & Mikaitis' published captures replay through the catalog.

``vectors/published/*.npz``: their V100, A100, A2, L40S, H100, H200 and B200 sets (BSD-2-Clause,
converted by lab/device/published_import.py); ``vectors/published/device/``: our H100 runs of
FP8 ``mma.sync`` under ptxas 12.4-13.5 and of their FP8 benches (lab/device/published_*.py).
"""

import glob
import json
import os

import numpy as np
import pytest

import tcnumerics as tc
from tcnumerics.catalog import get_instruction
from tcnumerics.catalog.verified import PUBLISHED_CAPTURES
from tcnumerics.model import InstructionSpec
from tcnumerics.vectors.families import expected_d
from tcnumerics.vectors.io import load
from tcnumerics.vectors.verify import verify_file

ROOT = os.path.join(os.path.dirname(__file__), "..", "vectors", "published")
FILES = sorted(glob.glob(os.path.join(ROOT, "*.npz")))
DEVICE = sorted(glob.glob(os.path.join(ROOT, "device", "*.npz")))
GPUS = ("V100", "A100", "A2", "L40S", "H100", "H200", "B200")


def _meta(path):
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["meta"]))


def _gpu(meta):
    return next(g for g in GPUS if f"NVIDIA {g}" in meta["device"])


def test_all_published_sets_are_committed():
    # V100 2, A100 4, A2 4, L40S (their Ada/ = L40S/) 8, H100 8, H200 8, B200 8
    assert len(FILES) == 42
    counts = {g: sum(_gpu(_meta(p)) == g for p in FILES) for g in GPUS}
    assert counts == {"V100": 2, "A100": 4, "A2": 4, "L40S": 8, "H100": 8, "H200": 8, "B200": 8}


@pytest.mark.parametrize("path", FILES + DEVICE, ids=lambda p: os.path.relpath(p, ROOT))
def test_replays_bit_exactly(path):
    report = verify_file(path)
    assert report.n > 0 and report.mismatches == 0, f"{report.instruction}: {report.mismatches} of {report.n} differ"


def test_provenance_table_matches_the_files():
    seen = set()
    for path in FILES:
        meta = _meta(path)
        gpu = _gpu(meta)
        assert gpu in PUBLISHED_CAPTURES[meta["instruction"]], path
        assert meta["vectors_in_set"] == 5000 and meta["replayed_in_full"] == "5000 of 5000 bit-exact at conversion"
        seen.add((meta["instruction"], gpu))
    table = {(name, g) for name, gpus in PUBLISHED_CAPTURES.items() for g in gpus}
    assert seen == table, f"table entries without files: {sorted(table - seen)}; files not in table: {sorted(seen - table)}"
    for name, gpus in PUBLISHED_CAPTURES.items():
        assert f"verified against Khattak & Mikaitis' {', '.join(gpus)} captures, 5,000 vectors" in \
            tc.instruction(name).provenance


def test_copyright_notice_travels_with_the_data():
    with open(os.path.join(ROOT, "LICENCE-MATLAB-tensor-core")) as fh:
        text = fh.read()
    assert "Copyright (c) 2025, Faizan A. Khattak and Mantas Mikaitis" in text and "BSD 2-Clause" in text
    for path in FILES:
        meta = _meta(path)
        assert "Khattak and Mantas Mikaitis" in meta["licence"] and meta["bench"].split()[0].endswith(".cu") or \
            meta["bench"].startswith("not model_validation/CUDA/mma_fp8_output_fp32.cu")


def test_hopper_fp8_fp32_sets_are_wgmma_with_zero_accumulator():
    # their d is not what their own mma.sync bench returns with their C (we rebuilt and ran it) ...
    for t in ("e4m3", "e5m2"):
        theirs = load(os.path.join(ROOT, f"h100_{t}_fp32.npz"))
        bench = load(os.path.join(ROOT, "device", f"h100_bench_nvcc13_{t}_fp32.npz"))
        n = len(bench.d)
        assert np.array_equal(theirs.a[:n], bench.a) and np.array_equal(theirs.extra["c_file"][:n], bench.c)
        assert (theirs.d[:n] != bench.d).all()
        assert bench.meta["their_d_differs"] == bench.meta["vectors_in_set"] == 5000
        # ... nor the mma.sync lowering with C = 0, but wgmma FP8 with a zero accumulator, every vector
        mma = expected_d(f"hopper.mma.m16n8k32.f32.{t}.{t}.f32", theirs.a, theirs.b, theirs.c)
        assert (mma != theirs.d).sum() > len(theirs.d) // 4
        assert theirs.meta["instruction"] == f"hopper.wgmma.m64n8k32.f32.{t}.{t}" and not theirs.c.any()
    # and H100 silicon: our wgmma kernel on their inputs gives their d with D = 0, not with their C
    with open(os.path.join(ROOT, "device", "h100_wgmma_vs_published_fp32.json")) as fh:
        run = json.load(fh)
    for key in ("H100/e4m3", "H100/e5m2", "H200/e4m3", "H200/e5m2"):
        assert run[key] == {"differ_with_zero_accumulator": 0, "differ_with_their_c": 5000, "vectors": 5000}


@pytest.mark.parametrize("form", [f"m16n8k32.f32.{a}.{b}.f32" for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")])
def test_ptxas_release_changes_the_bits(form):
    old = load(os.path.join(ROOT, "device", f"h100_ptxas12_4-12_6_mma_{form.replace('.', '_')}.npz"))
    new = load(os.path.join(ROOT, "device", f"h100_ptxas12_8-13_5_mma_{form.replace('.', '_')}.npz"))
    assert np.array_equal(old.a, new.a) and np.array_equal(old.c, new.c)
    differ = int((old.d != new.d).sum())
    assert differ == old.meta["differs_from_other_lowering"] > 100
    # each lowering's entry explains its own captures and not the other's
    assert (expected_d(f"hopper.mma.{form}", old.a, old.b, old.c) != old.d).sum() == differ
    assert (expected_d(f"hopper-ptxas12_4-12_6.mma.{form}", new.a, new.b, new.c) != new.d).sum() == differ


def test_sass_of_each_release_is_recorded():
    with open(os.path.join(ROOT, "device", "sass.json")) as fh:
        sass = json.load(fh)
    ops = sass["fp8_opcodes"]
    for release in ("12.4.131", "12.5.82", "12.6.85", "12.8.93", "12.9.86", "13.0.88", "13.5.37"):
        k32 = ops[f"{release}/sm_90/m16n8k32.f32.e4m3.e4m3.f32"]
        assert k32["HMMA.16816.F32"] == 2 and k32["FADD"] == (8 if release < "12.8" else 4)
        if release >= "12.8":
            assert ops[f"{release}/sm_100/m16n8k32.f32.e4m3.e4m3.f32"]["FADD"] == 4
        else:  # m16n8k16 and FP16 output arrived with PTX ISA 8.7 (CUDA 12.8)
            assert "refused" in ops[f"{release}/sm_90/m16n8k16.f32.e4m3.e4m3.f32"]
    assert any("HMMA.16816.F32" in line for line in sass["bench_sass_lines"])
    # their wmma bench (nvcc 13.0): TF32 m16n16k8 is chained HMMA.1684 (hence the m16n8k4 entries), FP16 HMMA.16816
    with open(os.path.join(ROOT, "device", "wmma_sass.txt")) as fh:
        blocks = {b.split("\n", 1)[0]: b for b in fh.read().split("===== wmma bench ")[1:]}
    for arch in ("sm_80", "sm_89", "sm_90", "sm_100"):
        assert blocks[f"TF32 {arch}"].count("HMMA.1684.F32.TF32") == 4
        assert blocks[f"FP16 {arch}"].count("HMMA.16816.F32") == 2 and blocks[f"BF16 {arch}"].count("HMMA.16816") == 2


def test_blackwell_fp8_mma_sync_rows():
    names = [f"blackwell.mma.m16n8k{k}.{d}.{a}.{b}.{d}" for k in (16, 32) for d in ("f32", "f16")
             for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")]
    for name in names:
        spec = get_instruction(name)
        assert spec.c_entry == "ieee_add" and spec.chunk == spec.k // 2 and "sm_100 SASS" in spec.provenance


def test_chunk_combine_needs_c_added_last():
    spec = get_instruction("hopper.mma.m16n8k32.f32.e4m3.e4m3.f32")
    with pytest.raises(ValueError, match="chunk_combine"):
        InstructionSpec(name="x", k=32, model=spec.model, chunk=16, chunk_combine="ieee_add")
    with pytest.raises(ValueError, match="chunk_combine"):
        InstructionSpec(name="x", k=32, model=spec.model, chunk=16, c_entry="ieee_add", chunk_combine="sum")
