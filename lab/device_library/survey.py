"""Kernel survey: which cuBLAS kernel (split-K or not) runs across a grid of shapes, with sampled outputs.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/survey.py

Reuses capture.py's recording (kernel names from torch.profiler, determinism, output bits
sampled on 16 rows x 16 columns) over M = N in 16..1024 and K in 1024..16384 for BF16
torch.matmul and E4M3 torch._scaled_mm (fast and slow accumulation), plus torch.addmm in
FP16 and with FP32 output, to fit the split-K rule of the presets.
"""

import json
import os

import numpy as np
import torch

import capture
from inputs import operand_bits

capture.FULL_LIMIT = 0
capture.SAMPLE = 16


def main() -> int:
    os.makedirs(capture.OUT, exist_ok=True)
    sides = (16, 32, 64, 128, 192, 256, 384, 512, 1024)
    ks = (1024, 2048, 3072, 4096, 6144, 8192, 16384)
    shapes = [(m, m, k) for m in sides for k in ks] + [(64, 4096, 4096), (4096, 64, 4096), (8, 8192, 8192)]
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    for M, N, K in shapes:
        sa, sb = capture.seeds_for("survey", M, N, K)
        A = capture.to_gpu(operand_bits("bf16", sa, (M, K)), "bf16")
        B = capture.to_gpu(operand_bits("bf16", sb, (K, N)), "bf16")
        base = dict(op="torch.mm", fmt="bf16", shape=[M, N, K], a_seed=sa, b_seed=sb, dist="normal_like",
                    options={"out_dtype": "float32"})
        capture.capture("survey_bf16", base, lambda: torch.mm(A, B, out_dtype=torch.float32), "fp32")
        a8, b8 = operand_bits("e4m3", sa, (M, K)), operand_bits("e4m3", sb, (K, N))
        A8 = capture.to_gpu(a8, "e4m3")
        Bt = capture.to_gpu(np.ascontiguousarray(b8.T), "e4m3")
        one = torch.tensor(1.0, device="cuda")
        for fast in (True, False):
            capture.capture("survey_e4m3", dict(base, op="torch._scaled_mm", fmt="e4m3",
                                                options={"use_fast_accum": fast, "scales": "unit"}),
                            lambda: torch._scaled_mm(A8, Bt.t(), one, one, out_dtype=torch.float32,
                                                     use_fast_accum=fast), "fp32")
    # addmm: FP16 and FP32-output variants of the measured BF16 epilogue
    for fmt in ("fp16", "bf16"):
        M, N, K = 256, 256, 512
        sa, sb = capture.seeds_for("addmm" + fmt, M, N, K)
        A = capture.to_gpu(operand_bits(fmt, sa, (M, K)), fmt)
        B = capture.to_gpu(operand_bits(fmt, sb, (K, N)), fmt)
        C = capture.to_gpu(operand_bits(fmt, sa + 7, (M, N), scale=8.0), fmt)
        rec = dict(op="torch.addmm", fmt=fmt, shape=[M, N, K], a_seed=sa, b_seed=sb, c_seed=sa + 7, c_scale=8.0,
                   dist="normal_like")
        capture.FULL_LIMIT = M * N
        capture.capture("survey_addmm", rec, lambda: torch.addmm(C, A, B), fmt)
        capture.capture("survey_addmm", dict(rec, options={"out_dtype": "float32"}),
                        lambda: torch.addmm(C.float(), A, B, out_dtype=torch.float32), "fp32")
        capture.FULL_LIMIT = 0
    for group, store in capture.arrays.items():
        np.savez_compressed(os.path.join(capture.OUT, f"{group}.npz"), **store)
    with open(os.path.join(capture.OUT, "index.json"), "w") as fh:
        json.dump(dict(records=capture.records), fh, indent=1)
    print(f"{len(capture.records)} records, {sum('error' in r for r in capture.records)} failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
