#!/usr/bin/env bash
# Device call 2 (H100): GPU tests again (FP32 adds in float32, cached kernels), the FP8 recipe, the 8B training
# step and FP8 forward, then the self-check of CHECK_SET_1's training steps (first comparison).
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -x -p no:cacheprovider -k "gpu or check" tests/test_device_composition.py \
    tests/test_torch_gpu.py tests/test_torch_check.py 2>&1 | tail -4 | tee "$OUT/tests.txt"
B="python3 benchmarks/bench_torch.py"
run() { echo "+ $*" | tee -a "$OUT/bench.log"; timeout "$1" "${@:2}" 2>>"$OUT/bench.log" | tee -a "$OUT/bench.jsonl"; }
run 150 $B --model llama-1b --layers 2 --tokens 1024 --what forward fp8 --profile
run 200 $B --model llama3-8b --tokens 1024 --what train
run 120 $B --model llama3-8b --tokens 2048 --what fp8
echo "+ check_training" >> "$OUT/bench.log"
timeout 280 python3 tools/device_models/check_training.py --tokens 256 2048 2>>"$OUT/bench.log" | tee "$OUT/check.jsonl"
grep -v "Warning\|warn\|return self" "$OUT/bench.log" | tail -8
