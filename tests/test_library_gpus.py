"""The GPU model is part of the key: per-model tables, ``gpu=`` on every op, flags where a model's tables are silent.

A model with no table flags every call; a model's own measured launch wins over another model's; a call kind may
use another model's tables only where the manifest says every launch both measured agreed (a measured statement).
The H200 tables used here are synthetic (a handful of launches written in the test): what is tested is the keying
and the flags, not the H200's data (``docs/gemm.md``, "Per GPU model").
"""

import copy
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

from tcnumerics import library as lib
from tcnumerics.library import gpus, launches, measured, unseen
from tcnumerics.library.calls import Call
from tcnumerics.library.presets import h200_presets

BF16 = ml_dtypes.bfloat16
LINEAR_KIND = "linear|bf16||bf16|0|1|plain|1|||0"
MATMUL_KIND = "matmul|bf16||bf16|0|0|plain|1|||0"
SPLIT_8 = ("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_splitK_TNT",
           "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float>(...)")
UNSPLIT = ("nvjet_sm90_tst_64x16_64x16_2x1_v_bz_TNT",)


def _ops_calls(gpu):
    """One call of every op, each modelled on the H100 (checked below), planned for ``gpu``."""
    x = np.ones((16, 64), BF16)
    w = np.ones((32, 64), BF16)
    a3, b3 = np.ones((2, 16, 64), BF16), np.ones((2, 64, 32), BF16)
    f8a, f8b = np.ones((16, 64), ml_dtypes.float8_e4m3fn), np.asfortranarray(np.ones((64, 32), ml_dtypes.float8_e4m3fn))
    one = np.float32(1.0)
    return [(lib.matmul, (x, w.T.copy()), dict(gpu=gpu)),
            (lib.linear, (x, w), dict(gpu=gpu)),
            (lib.addmm, (np.ones(32, BF16), x, w.T.copy()), dict(gpu=gpu)),
            (lib.bmm, (a3, b3), dict(gpu=gpu)),
            (lib.baddbmm, (np.ones((2, 16, 32), BF16), a3, b3), dict(gpu=gpu)),
            (lib.scaled_mm, (f8a, f8b, one, one), dict(gpu=gpu, use_fast_accum=True))]


# --- names ---------------------------------------------------------------------------------------------------

def test_device_names_map_to_model_keys():
    assert gpus.model_key("NVIDIA H100 80GB HBM3") == "h100"
    assert gpus.model_key("NVIDIA H200") == gpus.model_key("h200") == gpus.model_key(" H200 ") == "h200"
    # another H100 is another SM count and heuristic: not the model that was measured
    assert gpus.model_key("NVIDIA H100 PCIe") == "h100-pcie"
    assert gpus.model_key("NVIDIA A100-SXM4-80GB") == "a100-sxm4-80gb" and gpus.model_key("L40S") == "l40s"


@pytest.mark.parametrize("bad, err", [(None, TypeError), (100, TypeError), ("", ValueError), ("  ", ValueError),
                                      ("hopper", ValueError), ("---", ValueError)])
def test_bad_gpu_names_are_refused(bad, err):
    with pytest.raises(err, match="gpu"):
        gpus.model_key(bad)


def test_a_call_carries_its_model_outside_its_table_key():
    a = Call("linear", "bf16", "bf16", 8, 64, 64, b_t=True, gpu="NVIDIA H200")
    b = Call("linear", "bf16", "bf16", 8, 64, 64, b_t=True, gpu="h200")
    c = Call("linear", "bf16", "bf16", 8, 64, 64, b_t=True)
    assert a == b and hash(a) == hash(b) and a.gpu == "h200"
    assert c.gpu == gpus.DEFAULT_GPU == gpus.default_gpu() == "h100" and c != a  # a cache keyed by Call sees the GPU
    assert a.key() == c.key() and a.kind() == c.kind()  # each model's tables use the same keys


# --- the op functions' gpu= and arch= -----------------------------------------------------------------------

def test_default_is_the_h100_and_arch_names_a_model():
    A, B = np.ones((16, 64), BF16), np.ones((64, 8), BF16)
    assert lib.matmul.plan(A, B).call.gpu == "h100"
    assert lib.matmul.plan(A, B, gpu="NVIDIA H100 80GB HBM3") == lib.matmul.plan(A, B)
    assert lib.matmul.plan(A, B, arch="h200").call.gpu == "h200"
    assert lib.matmul.plan(A, B, arch="h200", gpu="NVIDIA H200").call.gpu == "h200"
    with pytest.raises(ValueError, match="different GPU models"):
        lib.matmul.plan(A, B, arch="h100", gpu="h200")
    with pytest.raises(ValueError, match="arch"):
        lib.matmul.plan(A, B, arch="ampere")


@pytest.mark.parametrize("gpu", ["a100", "b200", "l40s", "NVIDIA H100 PCIe"])
def test_a_model_without_tables_flags_every_call(gpu):
    key = gpus.model_key(gpu)
    for fn, args, kw in _ops_calls(gpu):
        on_h100 = fn.plan(*args, **dict(kw, gpu="h100"))
        assert on_h100.modelled, (fn, on_h100.reason)  # so the flag below is the GPU's doing
        plan = fn.plan(*args, **kw)
        assert not plan.modelled and plan.reason.startswith(f"gpu {key!r}: no table measured"), plan.reason
        assert plan.structure == on_h100.structure  # the best guess is the reference model's choice
        with pytest.warns(lib.NotModelledWarning, match=key):
            fn(*args, **kw)


def test_the_h200_without_its_tables_flags_every_call():
    """Until the H200's survey is folded in, nothing is claimed for it (the H200 presets are another matter)."""
    if gpus.model("h200").launches or gpus.model("h200").measured:
        pytest.skip("the H200's tables are installed: test_library_gpus' synthetic tests cover the keying")
    for fn, args, kw in _ops_calls("h200"):
        plan = fn.plan(*args, **kw)
        assert not plan.modelled and "'h200' (NVIDIA H200): no table measured on it yet" in plan.reason, plan.reason


# --- a model with tables of its own (synthetic) --------------------------------------------------------------

def _tiny_table(rows):
    """A launch table of ``rows`` (kind, M, N, K, kernels, ctas, grid z), one launch per run."""
    sigs = sorted({" | ".join(r[4]) for r in rows})
    kinds = {}
    for kind in sorted({r[0] for r in rows}):
        rs = sorted((r for r in rows if r[0] == kind), key=lambda r: launches.pack_key(r[1], r[2], r[3], 1))
        sig = np.array([sigs.index(" | ".join(r[4])) for r in rs])
        kinds[kind] = launches.KindRuns(
            launches.pack_keys([r[2] for r in rs], [r[3] for r in rs], [1] * len(rs), [r[1] for r in rs]),
            np.array([r[1] for r in rs], np.int64), np.ones(len(rs), np.int64), sig, np.array([r[6] for r in rs]),
            np.zeros(len(rs), np.int8), np.array([r[5] for r in rs], np.int64),
            launches.signature_params(sigs)[sig])
    return {"kinds": kinds, "signatures": sigs, "grid": ([], []), "launch_count": len(rows)}


def _agreement(compared, same):
    return {"compared": compared, "same_launch": same, "same_structure": same}


@pytest.fixture
def h200_tables():
    """An H200 entry with a launch table of its own (two launches) and an agreement list, installed for the test."""
    m = copy.deepcopy(gpus.manifest())
    m["models"]["h200"].update(launches="h200_launches.npz", kinds=[LINEAR_KIND], agrees_with={"h100": {
        MATMUL_KIND: _agreement(5000, 5000),  # every compared launch agreed: may use the H100's table
        "mm_out|bf16||fp32|0|0|plain|1|||0": _agreement(5000, 4999),  # one differed: may not
        "matmul|fp16||fp16|0|0|plain|1|||0": _agreement(gpus.MIN_AGREEING - 1, gpus.MIN_AGREEING - 1)}})  # too few
    gpus.set_manifest(m)
    launches.set_table("h200", _tiny_table([(LINEAR_KIND, 16, 1024, 14336, UNSPLIT, 16, 1),
                                            (LINEAR_KIND, 24, 1024, 14336, SPLIT_8, 128, 1)]))
    measured.set_table("h200", None)
    yield
    gpus.set_manifest(None)
    launches.set_table("h200", None)


def test_a_models_own_launch_wins_over_the_reference_models(h200_tables):
    """The synthetic H200 ran 16 x 1024 x 14336 unsplit where the H100 split it 8 ways: each model gets its own."""
    x, w = np.ones((16, 14336), BF16), np.ones((1024, 14336), BF16)
    on_h100, on_h200 = lib.linear.plan(x, w), lib.linear.plan(x, w, gpu="h200")
    assert on_h100.modelled and len(on_h100.structure.split_k) == 8
    assert on_h200.modelled and on_h200.structure.split_k is None, on_h200
    assert on_h200.reason.startswith("launch measured (on the H200"), on_h200.reason
    assert launches.find_launch(on_h200.call)[1] == "h200"


def test_an_unmeasured_shape_of_an_own_kind_is_predicted_from_the_models_own_launches(h200_tables):
    """M = 20 lies between the synthetic H200's two launches (which disagree): a prediction from the H200's own
    table, flagged -- never the H100's launch at that shape."""
    call = Call("linear", "bf16", "bf16", 20, 1024, 14336, b_t=True, gpu="h200")
    assert launches.measured_launch(call) is None
    assert launches.measured_launch(Call("linear", "bf16", "bf16", 20, 1024, 14336, b_t=True)) is not None
    assert unseen.voting_table(call) == "h200"
    plan = lib.select(call)
    assert not plan.modelled, plan


def test_a_kind_shown_to_agree_uses_the_reference_table(h200_tables):
    A, B = np.ones((64, 1024), BF16), np.ones((1024, 4096), BF16)
    on_h100, on_h200 = lib.matmul.plan(A, B), lib.matmul.plan(A, B, gpu="h200")
    assert on_h100.modelled and on_h200.modelled and on_h200.structure == on_h100.structure
    assert "shown to agree on the h200" in on_h200.reason, on_h200.reason
    assert gpus.coverage("h200", MATMUL_KIND).tables == ("h100",)


@pytest.mark.parametrize("kind, why", [("mm_out|bf16||fp32|0|0|plain|1|||0", "one launch differed"),
                                       ("matmul|fp16||fp16|0|0|plain|1|||0", "too few compared"),
                                       ("bmm|bf16||bf16|0|0|plain|1|||0", "never compared")])
def test_a_kind_not_shown_to_agree_is_flagged(h200_tables, kind, why):
    cov = gpus.coverage("h200", kind)
    assert not cov.covered and cov.tables == ("h100",), why
    assert "neither measured on it" in cov.reason and "'h200'" in cov.reason
    A, B = np.ones((64, 1024), BF16), np.ones((1024, 4096), BF16)
    fmt = np.float16 if "fp16" in kind else BF16
    if kind.startswith("bmm"):
        plan = lib.bmm.plan(A[None].astype(fmt), B[None].astype(fmt), gpu="h200")
    else:
        plan = lib.matmul.plan(A.astype(fmt), B.astype(fmt), gpu="h200",
                               out_dtype="fp32" if kind.startswith("mm_out") else None)
    assert plan.call.kind() == kind and not plan.modelled and plan.reason.startswith("gpu 'h200'"), plan.reason
    assert lib.select(replace(plan.call, gpu="h100")).modelled  # the same call on the H100: modelled


def test_the_reference_model_covers_every_kind():
    for kind in (LINEAR_KIND, MATMUL_KIND, "never|seen|kind"):
        cov = gpus.coverage("h100", kind)
        assert cov.covered and cov.tables == ("h100",)


def test_manifests_are_checked():
    with pytest.raises(ValueError, match="missing"):
        gpus.set_manifest({"default": "h100"})
    with pytest.raises(ValueError, match="no entry"):
        gpus.set_manifest({"default": "x", "reference": "h100", "models": {"h100": {}}})
    assert gpus.manifest()["default"] == "h100"  # a refused manifest leaves the installed one


# --- the H200 presets (h200_presets) -------------------------------------------------------------------------

def test_the_presets_are_the_h200s_and_flag_other_models():
    h200 = h200_presets("torch.matmul", dtype="bf16")
    assert h200.gpu == "h200" and h200_presets("torch.matmul", dtype="bf16", arch="h200").gpu == "h200"
    plan = h200.plan(64, 64, 8192)
    assert plan.modelled and plan.split_k
    for gpu in ("h100", "NVIDIA A100-SXM4-80GB"):
        other = h200_presets("torch.matmul", dtype="bf16", gpu=gpu).plan(64, 64, 8192)
        assert not other.modelled and other.reason.startswith(f"gpu {gpus.model_key(gpu)!r}"), other.reason
        assert other.split_k == plan.split_k  # the same guess, flagged
    with pytest.raises(ValueError, match="different GPU models"):
        h200_presets("torch.matmul", arch="h200", gpu="h100")
    A, B = np.ones((4, 32), BF16), np.ones((32, 8), BF16)
    with pytest.warns(UserWarning, match="presets' kernel choices were measured on an H200"):
        h200_presets("torch.matmul", gpu="h100")(A, B)


def test_replacing_a_table_changes_the_epoch_a_plan_cache_keys_on():
    e0 = gpus.tables_epoch()
    launches.set_table("h200", {})
    e1 = gpus.tables_epoch()
    measured.set_table("h200", None)
    e2 = gpus.tables_epoch()
    gpus.set_manifest(None)
    launches.set_table("h200", None)
    assert e0 < e1 < e2 < gpus.tables_epoch()


def test_the_op_functions_plan_cache_follows_the_tables(h200_tables):
    """ops caches plans per call; a replaced manifest or table must not be answered from that cache."""
    x, w = np.ones((16, 14336), BF16), np.ones((1024, 14336), BF16)
    with_table = lib.linear.plan(x, w, gpu="h200")
    assert with_table.modelled and with_table.structure.split_k is None
    bare = copy.deepcopy(gpus.manifest())  # the H200 with no tables at all (the real ones now exist)
    bare["models"]["h200"].update(launches=None, measured=None, kinds=[], agrees_with={})
    gpus.set_manifest(bare)
    launches.set_table("h200", None)
    without = lib.linear.plan(x, w, gpu="h200")
    assert not without.modelled and len(without.structure.split_k) == 8  # the H100's choice, flagged


def test_per_gpu_facts_are_read_from_the_manifest():
    """issue 30: the SM count, the clustered wave and stream-K's band widths are data (gpus.json), read through
    ``gpus.fact``; a model lacking one gets the reference model's; the presets' split cap follows ``sms``."""
    from tcnumerics.library import streamk

    m = copy.deepcopy(gpus.manifest())
    assert gpus.clustered_wave("h100") == m["models"]["h100"]["clustered_wave"] < gpus.sms("h100")
    assert gpus.fact("NVIDIA L40S", "clustered_wave") == gpus.clustered_wave(gpus.reference_gpu())
    assert streamk.BASE_SWIZZLE == gpus.streamk_swizzle(gpus.reference_gpu())
    assert streamk.DOUBLED_SWIZZLE == gpus.streamk_swizzle_doubled(gpus.reference_gpu()) == {120}
    assert gpus.streamk_swizzle_doubled("h200") == gpus.streamk_swizzle_doubled(gpus.reference_gpu())  # borrowed
    assert gpus.wave_slices(9, "h100") == gpus.sms("h100") // 9 and \
        gpus.wave_slices(9, "h100", cluster=8) == gpus.clustered_wave("h100") // 9
    with pytest.raises(ValueError, match="gives 'no_such_fact'"):
        gpus.fact("h100", "no_such_fact")
    mm = h200_presets("torch.matmul", dtype="bf16")
    assert len(mm.plan(192, 192, 16384).split_k) == 12  # floor(3 * 256 / 64), within one wave of 9 tiles
    m["models"]["h200"]["sms"] = 66
    gpus.set_manifest(m)
    try:
        assert gpus.sms("h200") == 66 and len(mm.plan(192, 192, 16384).split_k) == 66 // 9
    finally:
        gpus.set_manifest(None)
