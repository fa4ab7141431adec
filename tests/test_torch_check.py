"""The self-check (emulate("hopper", check=True)): classification, report, capture file; end to end on a GPU."""

import json

import pytest

torch = pytest.importorskip("torch")

import tcnumerics.torch as tct  # noqa: E402
from tcnumerics.torch.check import Checker  # noqa: E402

ROW = dict(op="mm", phase="forward", shape=(4, 3, 8), dtypes="bfloat16xbfloat16->bfloat16", layout="NN",
           predicted="nvjet_x", modelled=True)


def _checker_with(results):
    c = Checker()
    for i, (modelled, native, emulated) in enumerate(results):
        c.compare(i, ("mm",), dict(ROW, modelled=modelled), native, emulated)
    return c


def test_calls_are_exact_flagged_or_silent():
    a = torch.ones(4, 3, dtype=torch.bfloat16)
    b = a.clone()
    b[0, 0] = 2
    c = _checker_with([(True, a, a), (False, a, b), (True, a, b), (False, a, a)])
    (site,) = c.report()
    assert (site.calls, site.exact, site.flagged, site.silent) == (4, 2, 1, 1)
    assert site.verdict == "silent" and site.max_fraction_differing == pytest.approx(1 / 12)
    assert "1 silently wrong" in str(c.report())


def test_negative_zero_and_nan_payloads_count_as_different_bits():
    a = torch.zeros(2, dtype=torch.float32)
    c = _checker_with([(True, a, -a)])
    assert c.report()[0].silent == 1


def test_the_capture_file_is_the_librarys_and_never_overwritten(tmp_path):
    from tcnumerics.library import Call
    from tcnumerics.library.check import read_capture

    a = torch.ones(2, 2)
    c = Checker()
    call = Call("matmul", "bf16", "bf16", 2, 2, 64)
    c.compare(0, ("mm",), ROW, a, a, call=call)
    c.compare(1, ("mm",), ROW, a, -a, call=call)
    c.kernels.update({0: ["nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT"], 1: ["nvjet_sm90_tst_64x8_64x16_4x1_v_bz_NNT"]})
    c.gpu = "NVIDIA H200"
    path = tmp_path / "check.json"
    assert c.save(str(path)) == 2
    env, seen = read_capture(str(path))
    assert env["device"] == "NVIDIA H200" and [o.bits_match for o in seen] == [True, False]
    assert seen[0].call == call and seen[1].verdict() in ("silent", "flagged")
    assert json.loads(json.dumps(c.summary()))["sites"][0]["verdict"] == "silent"
    with pytest.raises(FileExistsError):
        c.save(str(path))


def test_check_is_for_library_mode_only():
    with pytest.raises(ValueError, match="library mode"):
        tct.emulate(instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16", check=True)
    with pytest.raises(ValueError, match="check=True"):
        tct.emulate("hopper").check_report()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_check_on_a_gpu_finds_a_planted_silent_miss(monkeypatch):
    x = torch.randn(256, 4096, device="cuda").to(torch.bfloat16)
    w = torch.randn(4096, 1024, device="cuda").to(torch.bfloat16)
    with tct.emulate("hopper", check=True) as run:
        x @ w
    (site,) = run.check_report()
    assert site.calls == 1 and site.native_kernels, "the profiler saw no cuBLAS kernel"
    assert site.exact == 1 or not site.modelled  # a modelled call must be exact on the GPU it was measured on
    backend = run.backend
    real = backend.execute

    def off_by_one_ulp(call, **kw):  # a prediction that claims to be modelled and is one ulp off
        from tcnumerics import interop
        from tcnumerics.torch.backends import CallInfo

        out, info = real(call, **kw)
        t = tct._tensors.to_tensor(out, call.a.device)
        return interop.from_torch((t.view(torch.int16) ^ 1).view(torch.bfloat16)), CallInfo(info.kernel, True, "")
    monkeypatch.setattr(backend, "execute", off_by_one_ulp)
    with run:
        x @ w
    assert run.check_report()[0].silent == 1


def test_a_gpu_model_without_tables_flags_every_call():
    x = torch.randn(64, 256).to(torch.bfloat16)
    w = torch.randn(256, 128).to(torch.bfloat16)
    with pytest.warns(tct.NotModelledWarning, match="a100"):
        with tct.emulate("hopper", gpu="a100") as run:
            y = x @ w
            torch.nn.functional.linear(x, w.T)
    assert run.report().calls == 2 and run.report().not_modelled == 2
    with tct.emulate("hopper") as default:  # CPU tensors: the H100's tables, which measured this call
        assert torch.equal(x @ w, y)
    assert default.report().not_modelled == 0
    with pytest.raises(ValueError, match="library mode"):
        tct.emulate(instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16", gpu="h100")


def test_saved_calls_carry_the_launch_grids_the_trace_gave(tmp_path):
    """The grids from the profiler's trace reach the capture file (fold_gpu.py folds only launches with a grid)."""
    import gzip

    from tcnumerics.library.calls import Call
    from tcnumerics.torch.check import Checker

    checker = Checker()
    call = Call("matmul", "bf16", "bf16", 256, 4096, 14336)
    checker.calls[0] = (call, False, 0.004, ("mm", "forward"))
    checker.kernels[0] = ["nvjet_sm90_tst_128x128_64x6_2x1_v_bz_splitK_TNT", "Memset (Device)"]
    checker.grids[0] = {"nvjet_sm90_tst_128x128_64x6_2x1_v_bz_splitK_TNT": (64, 1, 3)}
    obs = checker.observations()
    assert obs[0].grids == ((64, 1, 3), None) and obs[0].main_grid == (64, 1, 3)
    checker.gpu = "NVIDIA H100 80GB HBM3"
    path = str(tmp_path / "calls.json.gz")
    assert checker.save(path) == 1
    saved = json.load(gzip.open(path))
    assert saved["calls"]["0"][0][1] == [64, 1, 3] and saved["calls"]["0"][1][1] is None
