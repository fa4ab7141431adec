"""Device check: emulate() on CUDA tensors returns the same bits as on CPU tensors, and stays on the device."""

import warnings

import torch

import tcnumerics.torch as tct

torch.manual_seed(0)
x = torch.randn(64, 96, dtype=torch.bfloat16)
w = torch.randn(96, 40, dtype=torch.bfloat16)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with tct.emulate(instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16") as run:
        y_cpu = x @ w
        y_gpu = x.cuda() @ w.cuda()
print("cuda result device:", y_gpu.device, "equal bits:", torch.equal(y_cpu.view(torch.int16),
                                                                        y_gpu.cpu().view(torch.int16)))
print("warnings:", [str(c.message)[:80] for c in caught])
native = (x.cuda() @ w.cuda()).cpu()
print("emulated == native cuBLAS bits:", torch.equal(native.view(torch.int16), y_cpu.view(torch.int16)),
      "(unit mode: one wgmma chain, as cuBLAS nvjet runs for this shape)")
print(run.report())
