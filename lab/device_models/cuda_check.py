"""Device check: emulate() on CUDA tensors runs the GPU engine (engine="cuda"), stays on the device and
returns the same bits as on CPU tensors (and, in library mode at a modelled shape, as native cuBLAS).

    PYTHONPATH=src python3 lab/device_models/cuda_check.py
"""

import warnings

import torch

import tcnumerics.torch as tct
from tcnumerics.torch.devices import gpu_engine_usable


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().view(torch.int16)


def check(label: str, make, x: torch.Tensor, w: torch.Tensor) -> None:
    mode = make()
    engines = []
    execute = mode.backend.execute
    mode.backend.execute = lambda call, **o: (engines.append(o.get("engine")), execute(call, **o))[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with mode as run:
            y_cpu = x @ w
            y_gpu = x.cuda() @ w.cuda()
    native = x.cuda() @ w.cuda()
    print(f"[{label}] engines per call (cpu, cuda): {engines}; cuda result: {y_gpu.device} {y_gpu.dtype}")
    print(f"[{label}] cuda == cpu bits: {torch.equal(bits(y_cpu), bits(y_gpu))}; "
          f"== native cuBLAS bits: {torch.equal(bits(y_gpu), bits(native))} "
          f"(mismatches {int((bits(y_gpu) != bits(native)).sum())} of {native.numel()})")
    print(f"[{label}] copy warnings: {[str(c.message)[:60] for c in caught if 'copied' in str(c.message)]}")
    print(run.report())


print("gpu_engine_usable:", gpu_engine_usable(), torch.cuda.get_device_name())
torch.manual_seed(0)
check("unit bf16 wgmma", lambda: tct.emulate(instruction="hopper.wgmma.m64n8k16.f32.bf16.bf16"),
      torch.randn(64, 96, dtype=torch.bfloat16), torch.randn(96, 40, dtype=torch.bfloat16))
check("library hopper 256^3 bf16", lambda: tct.emulate("hopper"),
      torch.randn(256, 256, dtype=torch.bfloat16), torch.randn(256, 256, dtype=torch.bfloat16))
check("library hopper 512x384x1024 fp16", lambda: tct.emulate("hopper"),
      torch.randn(512, 1024, dtype=torch.float16), torch.randn(1024, 384, dtype=torch.float16))
