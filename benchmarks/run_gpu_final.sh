#!/usr/bin/env bash
# Final device call (one GPU): the self-check of CHECK_SET_1 again (after the H200 tables were folded in), then the
# speed cases of issue 22 with the final code (integer conversions on the device).
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
echo "+ check_training" > "$OUT/bench.log"
timeout 200 python3 lab/device_models/check_training.py --tokens 256 2048 2>>"$OUT/bench.log" | tee "$OUT/check.jsonl"
B="python3 benchmarks/bench_torch.py"
run() { echo "+ $*" | tee -a "$OUT/bench.log"; timeout "$1" "${@:2}" 2>>"$OUT/bench.log" | tee -a "$OUT/bench.jsonl"; }
run 50 $B --gemm 8192
run 60 $B --model llama-1b --layers 2 --tokens 1024 --what forward fp8
run 80 $B --model llama3-8b --tokens 2048 --what forward
run 120 $B --model llama3-8b --tokens 1024 --what train
grep -v "Warning\|warn\|return self\|^  " "$OUT/bench.log" | tail -6
