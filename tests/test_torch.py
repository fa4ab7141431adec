"""tcnumerics.torch: unit-mode semantics, autograd, convolutions, bad input, torch.compile."""

import warnings

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tcnumerics as tc  # noqa: E402
import tcnumerics.torch as tct  # noqa: E402
from tcnumerics.model import UnitModel  # noqa: E402

BF16 = "hopper.wgmma.m64n8k16.f32.bf16.bf16"
FP8 = "hopper.wgmma.m64n8k32.f32.e4m3.e4m3"
MXFP8 = "blackwell.tcgen05.mma.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
NVFP4 = "blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"


def _bf16(t):
    return t.detach().to(torch.bfloat16).view(torch.int16).numpy().view(ml_dtypes.bfloat16)


def test_fp32_operands_are_rounded_to_the_unit_format_and_chained():
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(24, 80, generator=g), torch.randn(80, 40, generator=g)
    with tct.emulate(instruction=BF16) as run:
        y = x @ w
    want = tc.gemm(_bf16(x), _bf16(w), instruction=BF16)  # FP32 chain of k16 groups from +0
    assert y.dtype == torch.float32
    assert np.array_equal(y.numpy().view(np.uint32), want.view(np.uint32))
    assert run.report().calls == 1 and run.report()[0].kernel == BF16


def test_bf16_tensors_get_one_rne_conversion_of_the_fp32_result():
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(8, 64, generator=g).bfloat16(), torch.randn(64, 16, generator=g).bfloat16()
    with tct.emulate(instruction=BF16):
        y = torch.mm(x, w)
    acc = tc.gemm(_bf16(x), _bf16(w), instruction=BF16)
    assert y.dtype == torch.bfloat16
    assert np.array_equal(_bf16(y).view(np.uint16), acc.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_epilogue_alpha_then_beta_c_each_one_fp32_rounding():
    g = torch.Generator().manual_seed(11)
    A, B = torch.randn(32, 48, generator=g), torch.randn(48, 32, generator=g)
    C = torch.randn(32, 32, generator=g)
    alpha, beta = 0.3, -1.7
    with tct.emulate(instruction=BF16):
        y = torch.addmm(C, A, B, beta=beta, alpha=alpha).numpy()
    f = np.float32
    acc = tc.gemm(_bf16(A), _bf16(B), instruction=BF16)
    want = f(alpha) * acc + f(beta) * C.numpy()  # numpy float32: each product and the sum one IEEE RNE operation
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))
    fused = (np.float64(f(alpha)) * acc + np.float64(f(beta)) * C.numpy().astype(np.float64)).astype(np.float32)
    assert not np.array_equal(fused, want)  # one rounding of the exact expression would differ


def test_linear_bias_is_added_in_fp32_before_the_output_conversion():
    x = torch.ones(1, 16, dtype=torch.bfloat16)
    x[0, 0] = 1.0625  # the accumulator is 16.0625: a BF16 tie between 16 and 16.125
    w = torch.ones(4, 16, dtype=torch.bfloat16)
    b = torch.full((4,), 0.0625, dtype=torch.bfloat16)
    with tct.emulate(instruction=BF16):
        y = torch.nn.functional.linear(x, w, b)
    # FP32 epilogue: 16.0625 + 0.0625 = 16.125 exactly; adding after a BF16 conversion would give 16.0
    assert y.tolist() == [[16.125] * 4]


def test_tensor_scaling_matches_a_transformer_engine_style_recipe():
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(32, 128, generator=g), torch.randn(128, 24, generator=g)
    with tct.emulate(instruction=FP8, scaling="tensor", promote_every=128):
        y = x @ w
    sx = np.float32(448) / np.float32(x.abs().max().item())
    sw = np.float32(448) / np.float32(w.abs().max().item())
    xq = (x * float(sx)).to(torch.float8_e4m3fn).view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
    wq = (w * float(sw)).to(torch.float8_e4m3fn).view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
    want = tc.gemm(xq, wq, instruction=FP8, promote_every=128, scale_a=np.float32(1) / sx,
                   scale_b=np.float32(1) / sw)
    assert np.array_equal(y.numpy().view(np.uint32), want.view(np.uint32))


def test_fast_accumulation_and_promotion_differ_and_promotion_is_closer():
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(16, 4096, generator=g) + 0.5, torch.randn(4096, 8, generator=g) + 0.5
    exact = (x.double() @ w.double())
    out = {}
    for promote in (None, 128):
        with tct.emulate(instruction=FP8, scaling="tensor", promote_every=promote):
            out[promote] = (x @ w).double()
    err = {k: ((v - exact).abs() / exact.abs()).mean().item() for k, v in out.items()}
    assert not torch.equal(out[None], out[128])
    assert err[128] < err[None]


def test_row_mx_and_nvfp4_scaling_stay_close_to_the_exact_product():
    g = torch.Generator().manual_seed(4)
    x, w = torch.randn(8, 64, generator=g), torch.randn(64, 8, generator=g)
    exact = x.double() @ w.double()
    scale = exact.abs().max().item()
    for kwargs, tol in ((dict(instruction=FP8, scaling="row"), 0.05), (dict(instruction=MXFP8, scaling="mx"), 0.05),
                        (dict(instruction=NVFP4, scaling="nvfp4"), 0.3)):
        with tct.emulate(**kwargs) as run:
            y = x @ w
        assert (y.double() - exact).abs().max().item() / scale < tol, kwargs
        assert run.report()[0].kernel.startswith(kwargs["instruction"])


def test_mx_scaling_is_exact_for_values_the_block_format_holds():
    x = torch.tensor([[2.0**e for e in range(-6, 26)]])  # one 32-element block spanning 32 binades: E4M3 cannot
    w = torch.ones(32, 1)
    with tct.emulate(instruction=MXFP8, scaling="mx"):
        y = (x @ w).item()
    assert y != float(x.sum())  # small elements underflow after the shared scale
    x2 = torch.tensor([[1.5, -2.0, 0.75, 3.0] * 8])
    with tct.emulate(instruction=MXFP8, scaling="mx"):
        y2 = (x2 @ w).item()
    assert y2 == float(x2.sum())


def test_stochastic_rounding_is_reproducible_under_a_seed():
    g = torch.Generator().manual_seed(5)
    x, w = torch.randn(8, 64, generator=g), torch.randn(64, 8, generator=g)
    runs = []
    for seed in (7, 7, 8):
        with tct.emulate(instruction=BF16, rounding="stochastic", seed=seed):
            runs.append(x @ w)
    with tct.emulate(instruction=BF16):
        rne = x @ w
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])
    assert not torch.equal(runs[0], rne)


def test_operand_format_narrower_than_the_unit():
    x = torch.tensor([[1.0 + 2**-5] * 16])  # exact in BF16, rounds to 1.0 in E4M3 (3 fraction bits)
    w = torch.ones(16, 1)
    with tct.emulate(instruction=BF16, operand_format="e4m3"):
        assert (x @ w).item() == 16.0
    with tct.emulate(instruction=BF16):
        assert (x @ w).item() == 16.5


def test_custom_unit_with_a_narrow_accumulator():
    unit = UnitModel("bf16", "bf16", "fp16", "fp16", group_size=1, frac_bits=11, zero_exponent=-21,
                     output_rounding="rne")
    x = torch.ones(1, 4096)
    w = torch.ones(4096, 1)
    with tct.emulate(unit=unit) as run:
        y = (x @ w).item()
    assert y == 2048.0  # a sequential FP16 accumulator stops at 2048: 2048 + 1 rounds back to 2048
    assert "custom" in run.report()[0].kernel


def test_autograd_runs_backward_gemms_through_the_backward_instruction():
    g = torch.Generator().manual_seed(6)
    lin = torch.nn.Linear(32, 16)
    x = torch.randn(8, 32, generator=g, requires_grad=True)
    with tct.emulate(instruction=BF16, backward_instruction="hopper.wgmma.m64n8k8.f32.tf32.tf32") as run:
        lin(x).square().sum().backward()
    phases = {(r.phase, r.kernel) for r in run.report()}
    assert ("forward", BF16) in phases
    assert ("backward", "hopper.wgmma.m64n8k8.f32.tf32.tf32") in phases
    # dx = g_out @ W, through the TF32 unit: recompute it from the same upstream gradient
    y = torch.nn.functional.linear(x, lin.weight, lin.bias)
    with tct.emulate(instruction=BF16):
        y = torch.nn.functional.linear(x.detach(), lin.weight.detach(), lin.bias.detach())
    g_out = (2 * y).detach()
    tf32 = tc.get_format("tf32")
    want = tc.gemm(tf32.to_array(tf32.from_float(g_out.numpy())), tf32.to_array(tf32.from_float(
        lin.weight.detach().numpy())), instruction="hopper.wgmma.m64n8k8.f32.tf32.tf32")
    assert np.array_equal(x.grad.numpy().view(np.uint32), want.view(np.uint32))


def test_convolutions_are_implicit_gemms_with_the_right_geometry():
    g = torch.Generator().manual_seed(7)
    fp64 = "ampere.mma.m8n8k4.f64.f64.f64.f64"  # sequential FMAs: results near the native ones
    for conv, shape in ((torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2), (2, 4, 9, 7)),
                        (torch.nn.Conv2d(3, 4, (2, 3), stride=(1, 2), padding=(2, 0), dilation=2), (1, 3, 8, 9)),
                        (torch.nn.Conv1d(4, 6, 3, padding=2, dilation=2), (2, 4, 11))):
        conv = conv.double()
        x = torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)
        with tct.emulate(instruction=fp64) as run:
            out = conv(x)
            out.square().sum().backward()
        grads = (x.grad.clone(), conv.weight.grad.clone(), conv.bias.grad.clone())
        ops = {r.op for r in run.report()}
        assert ops == {"conv", "conv_dgrad", "conv_wgrad"}, ops
        x.grad = None
        conv.zero_grad()
        ref = conv(x)
        ref.square().sum().backward()
        assert torch.allclose(out, ref, rtol=1e-12, atol=1e-12)
        for got, want in zip(grads, (x.grad, conv.weight.grad, conv.bias.grad)):
            assert torch.allclose(got, want, rtol=1e-11, atol=1e-11)


def test_conv_forward_is_one_gemm_per_group_on_unfolded_input():
    g = torch.Generator().manual_seed(8)
    x, w = torch.randn(1, 3, 6, 6, generator=g), torch.randn(5, 3, 3, 3, generator=g)
    with tct.emulate(instruction=BF16):
        y = torch.nn.functional.conv2d(x, w, padding=1)
    cols = torch.nn.functional.unfold(x, 3, padding=1)[0].t()  # [L, C*9], K order (c, kh, kw)
    want = tc.gemm(_bf16(cols), _bf16(w.reshape(5, 27).t()), instruction=BF16)
    assert np.array_equal(y[0].permute(1, 2, 0).reshape(36, 5).numpy().view(np.uint32), want.view(np.uint32))


def test_einsum_matmul_and_eager_attention_are_intercepted():
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(2, 4, 8, 16, generator=g) for _ in range(3))
    with tct.emulate(instruction=BF16) as run:
        torch.einsum("bhqd,bhkd->bhqk", q, k)
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
        torch.mv(q[0, 0], k[0, 0, 0])
        torch.dot(q[0, 0, 0], k[0, 0, 0])
        torch.addbmm(torch.zeros(8, 8), q[0], k[0].transpose(1, 2))
    calls = {}
    for r in run.report():
        calls[r.op] = calls.get(r.op, 0) + r.count
    assert calls == {"bmm": 3, "mv": 1, "dot": 1, "addbmm": 4}, calls  # einsum 1, SDPA (math) 2; addbmm per entry


def test_integer_matmul_runs_natively():
    a = torch.ones(3, 4, dtype=torch.int64)
    with tct.emulate(instruction=BF16) as run:
        assert (a @ a.t()).tolist() == [[4] * 3] * 3
    assert run.report().calls == 0


def test_torch_compile_runs_under_emulation_with_the_same_bits():
    def f(x, w):
        return torch.relu(x @ w).sum(0)

    g = torch.Generator().manual_seed(10)
    x, w = torch.randn(8, 32, generator=g), torch.randn(32, 16, generator=g)
    compiled = torch.compile(f)
    with tct.emulate(instruction=BF16) as run:
        got = compiled(x, w)
        want = f(x, w)
    assert torch.equal(got, want)
    assert run.report().calls == 2
    assert not torch.equal(want, f(x, w))  # native FP32 differs: the emulation did run


@pytest.mark.parametrize("kwargs, message", [
    (dict(instruction="no.such.instruction"), "no.such"),
    (dict(instruction=BF16, scaling="mx"), "block-scaled"),
    (dict(instruction=MXFP8), "scaling"),
    (dict(instruction=BF16, scaling="blocks"), "scaling"),
    (dict(instruction=BF16, rounding="up"), "rounding"),
    (dict(instruction=BF16, promote_every=24), "promote_every"),
    (dict(), "pass a library"),
    (dict(instruction=BF16, unit=UnitModel("bf16", "bf16", "fp32", "fp32")), "exactly one"),
])
def test_bad_options_are_refused_clearly(kwargs, message):
    with pytest.raises((ValueError, KeyError, TypeError), match=message):
        tct.emulate(**kwargs)


def test_library_mode_refuses_unknown_architectures_and_unit_options():
    with pytest.raises(ValueError, match="only 'hopper'"):
        tct.emulate("ampere")
    with pytest.raises(ValueError, match="no unit options"):
        tct.emulate("hopper", scaling="tensor")


def test_cuda_tensors_without_a_gpu_engine_warn_once_and_come_back_on_the_device():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here; lab/device_models/cuda_check.py is the device check")
    x = torch.randn(8, 16, device="cuda")
    with warnings.catch_warnings(record=True) as caught, tct.emulate(instruction=BF16):
        warnings.simplefilter("always")
        y = x @ x.t()
    assert y.device.type == "cuda"
    assert sum("copied to the CPU" in str(c.message) for c in caught) <= 1
