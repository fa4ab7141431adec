"""The self-check's library side (tcnumerics.library.check): observed launches against plans, capture files."""

import gzip
import json
import os
from dataclasses import replace

import pytest

from tcnumerics.library import check, launches, select
from tcnumerics.library.calls import Call, call_from_record, call_record

SPLIT = "nvjet_sm90_tst_64x16_64x16_2x1_v_bz_splitK_TNT"
REDUCE = "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float>(...)"
LINEAR = Call("linear", "bf16", "bf16", 16, 1024, 14336, b_t=True)  # measured on the H100: split 8 ways


CALLS = [Call("matmul", "bf16", "bf16", 7, 2048, 11008), Call("mm_out", "fp16", "fp32", 64, 512, 512, a_t=True),
         Call("linear", "fp16", "fp16", 3, 50257, 768, b_t=True, bias=True, gpu="h200"),
         Call("linear", "bf16", "bf16", 3, 64, 64, a_t=True, b_t=False),
         Call("addmm", "bf16", "bf16", 100, 3072, 3072, c_kind="row", beta=1.0),
         Call("addmm", "bf16", "bf16", 10, 30, 40, c_kind="full", alpha=0.5, beta=2.0, gpu="a100"),
         Call("addmm", "fp32", "fp32", 10, 30, 40, c_kind="none", prec="high"),
         Call("bmm", "fp32", "fp32", 1, 2048, 64, b=32, prec="highest"),
         Call("baddbmm", "bf16", "bf16", 5, 7, 9, b=3, c_kind="full", alpha=0.125, beta=1.0),
         Call("scaled_mm", "e4m3", "fp32", 64, 4096, 4096, b_fmt="e5m2", scales="rowwise", fast_accum=True),
         Call("scaled_mm", "e5m2", "bf16", 16, 16, 16384, b_fmt="e4m3", scales="blockwise")]


@pytest.mark.parametrize("call", CALLS, ids=lambda c: f"{c.op}-{c.fmt}-{c.gpu}")
def test_records_round_trip(call):
    rec = call_record(call)
    assert json.loads(json.dumps(rec)) == rec  # JSON-ready
    assert call_from_record(rec) == call
    assert call_from_record(rec, gpu="h100").gpu == "h100"


def test_survey_records_read_as_before():
    """The records of the device surveys (no gpu, ``out`` or ``out_dtype``, ``c_1d``, matmul_bcast)."""
    lin = call_from_record(dict(op="linear", fmt="bf16", out="bf16", M=5, N=64, K=32, bias=True, prec="highest"))
    assert (lin.b_t, lin.a_t, lin.bias, lin.gpu) == (True, False, True, "h100")
    mm = call_from_record(dict(op="mm_out", fmt="bf16", M=5, N=64, K=32, out_dtype="fp32", prec="highest"))
    assert mm.out == "fp32"
    row = call_from_record(dict(op="addmm", fmt="bf16", M=5, N=64, K=32, c_1d=True, beta=1, alpha=1, prec="highest"))
    assert row.c_kind == "row" and row.key().split("|")[10] == "bias"
    with pytest.raises(ValueError, match="unknown op"):
        call_from_record(dict(op="conv2d", fmt="bf16", M=1, N=1, K=1))


# --- compare_launch ------------------------------------------------------------------------------------------

def _grid(L):
    return (L.ctas // L.grid_z, 1, L.grid_z)


@pytest.mark.parametrize("call", [LINEAR, Call("linear", "bf16", "bf16", 16, 4096, 4096, b_t=True),
                                  Call("matmul", "bf16", "bf16", 96, 80, 333),
                                  Call("matmul", "fp32", "fp32", 17, 33, 65)],
                         ids=["nvjet-split", "nvjet", "cutlass", "fp32"])
def test_the_measured_launch_agrees_with_its_plan(call):
    L = launches.measured_launch(call)
    if L is None:
        pytest.skip("launch not in the installed table")
    r = check.compare_launch(call, L.kernels, grid=_grid(L))
    plan = select(call)
    assert plan.modelled and r.agrees is True and r.planned == plan.family, r
    assert r.verdict(True) == "exact"


def test_a_launch_whose_order_is_a_guess_is_not_called_agreeing():
    """The in-place FP32 xmma kernel (slices land in the order their CTAs finish): flagged, and the comparison
    does not claim agreement either."""
    call = Call("matmul", "fp32", "fp32", 16, 28672, 2048)
    L = launches.measured_launch(call)
    if L is None:
        pytest.skip("launch not in the installed table")
    r = check.compare_launch(call, L.kernels, grid=_grid(L))
    assert not r.modelled and r.agrees is None and "not identified here" in r.reason, r
    assert r.verdict(False) == "flagged"


def test_another_split_count_is_a_disagreement():
    r = check.compare_launch(LINEAR, (SPLIT, REDUCE), grid=(64, 1, 1))  # 16 tiles x 4 slices
    assert r.agrees is False and "x4" in r.observed and "x8" in r.planned, r
    assert r.verdict(False) == "silent" and r.verdict(True) == "exact"
    assert "another launch" in r.explain(False)


def test_without_a_grid_an_unsplit_nvjet_kernel_still_says_everything():
    r = check.compare_launch(LINEAR, ("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_TNT",))
    assert r.agrees is False, r  # planned split 8 ways, ran unsplit
    plain = Call("linear", "bf16", "bf16", 16, 4096, 4096, b_t=True)
    L = launches.measured_launch(plain)
    if L is not None and "splitK" not in L.main:
        assert check.compare_launch(plain, L.kernels).agrees is True


def test_without_a_grid_a_split_kernel_cannot_say_its_count():
    r = check.compare_launch(LINEAR, (SPLIT, REDUCE))
    assert r.agrees is None and "grid" in r.reason
    unsplit_plan = replace(select(LINEAR), structure=select(LINEAR).structure.with_(split_k=None), launch=None)
    assert check.compare_launch(LINEAR, (SPLIT, REDUCE), plan=unsplit_plan).agrees is False


def test_an_unidentified_family_is_left_to_the_bits():
    r = check.compare_launch(LINEAR, ("void some_new_kernel<float>(...)",), grid=(4, 1, 1))
    assert r.agrees is None and "not identified" in r.reason
    assert r.verdict(None) == "unchecked"


@pytest.mark.parametrize("kernels, grid", [((), None), ((SPLIT,), (1, 1)), ((SPLIT,), (0, 1, 1)), ((3,), None)])
def test_bad_observations_are_refused(kernels, grid):
    with pytest.raises(ValueError):
        check.compare_launch(LINEAR, kernels, grid=grid)


def test_verdicts():
    assert [check.verdict(m, b) for m in (True, False) for b in (True, False, None)] == \
        ["exact", "silent", "unchecked", "exact", "flagged", "unchecked"]


# --- capture files -------------------------------------------------------------------------------------------

def _observations():
    on_h200 = replace(LINEAR, gpu="NVIDIA H200")
    return [check.observation(on_h200, (SPLIT, REDUCE), [(64, 1, 1), (8, 1, 1)], bits_match=False, differing=0.004,
                              device="NVIDIA H200", site="model.layers.0.mlp.down_proj"),
            check.observation(CALLS[4], ("Memset (Device)", "nvjet_sm90_tst_64x56_64x14_4x2_h_bz_bias_NNT"),
                              [None, (120, 1, 1)], bits_match=True, device="NVIDIA H100 80GB HBM3"),
            check.observation(CALLS[0], ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT",), None)]


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_captures_round_trip(tmp_path, suffix):
    obs = _observations()
    path = str(tmp_path / f"selfcheck{suffix}")
    env = dict(device="NVIDIA H200", torch="2.11.0+cu130", cuda="13.0", cublas="13.1.0.3", driver="580.159.04")
    assert check.write_capture(path, obs, env) == 3
    env2, back = check.read_capture(path)
    assert env2 == env and back == obs
    assert back[0].call.gpu == "h200" and back[0].main_grid == (64, 1, 1) and back[0].verdict() == "flagged"
    assert back[0].launch().ctas == 64 and back[2].launch() is None
    opener = gzip.open if suffix.endswith(".gz") else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    # the kernel surveys' layout: names interned, calls id -> [[name index, grid, block]]
    assert doc["names"][doc["calls"]["0"][0][0]] == SPLIT and doc["calls"]["0"][0][1] == [64, 1, 1]
    assert doc["records"]["1"]["bits_match"] is True and doc["records"]["0"]["site"].endswith("down_proj")


def test_capture_files_are_checked(tmp_path):
    with pytest.raises(ValueError, match="JSON"):
        check.write_capture(str(tmp_path / "x.npz"), _observations())
    with pytest.raises(TypeError, match="Observation"):
        check.write_capture(str(tmp_path / "x.json"), [LINEAR])
    survey = tmp_path / "kernels.json"
    survey.write_text(json.dumps(dict(names=[], calls={}, errors={}, env={})))
    with pytest.raises(ValueError, match="not a capture file"):
        check.read_capture(str(survey))
    with pytest.raises(ValueError, match="grids"):
        check.Observation(LINEAR, (SPLIT,), ((1, 1, 1), (1, 1, 1)))
    assert not os.path.exists(tmp_path / "x.npz")
