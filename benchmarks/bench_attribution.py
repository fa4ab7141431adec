"""How much slower a training step is with error attribution on: ``emulate(..., attribution=True)`` against the
same emulation without it, timed in the same run (median of ``--repeat`` steps after one warm-up step each).

    python benchmarks/bench_attribution.py                 # CPU tensors
    python benchmarks/bench_attribution.py --device cuda   # CUDA tensors (the GPU engine when CuPy sees a GPU)

The model is the fp8-training study's GPT (``tcnumerics reproduce fp8-training``'s defaults); the step is one forward
and backward.  Prints one line per mode: seconds per step off, on, and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import tcnumerics.torch as tct
from tcnumerics.experiments.fp8_training import FP8, GPT


def _step(model, x, y, emulation):
    model.zero_grad()
    with emulation:
        model(x, y).backward()
    if x.is_cuda:
        torch.cuda.synchronize()


def _time(model, x, y, make, repeat: int) -> float:
    _step(model, x, y, make())  # warm-up (plans, kernels)
    times = []
    for _ in range(repeat):
        emulation = make()
        t0 = time.perf_counter()
        _step(model, x, y, emulation)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--width", type=int, default=64)
    args = p.parse_args(argv)
    torch.manual_seed(0)
    model = GPT(2, args.width, 2, 32).to(args.device)
    x = torch.randint(0, 256, (args.batch, 32), device=args.device)
    y = torch.randint(0, 256, (args.batch, 32), device=args.device)
    modes = {"unit FP8 tensor-scaled": dict(instruction=FP8, scaling="tensor"),
             "unit FP8 promote 128": dict(instruction=FP8, scaling="tensor", promote_every=128)}
    print(f"torch {torch.__version__}, device {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else "")
          + f", GPT 2 blocks width {args.width}, batch {args.batch} x 32, median of {args.repeat}")
    for name, kw in modes.items():
        off = _time(model, x, y, lambda: tct.emulate(**kw), args.repeat)
        on = _time(model, x, y, lambda: tct.emulate(**kw, attribution=True), args.repeat)
        print(f"{name:<24} off {off:8.3f} s/step   on {on:8.3f} s/step   ratio {on / off:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
