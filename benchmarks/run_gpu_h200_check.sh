#!/usr/bin/env bash
# Device call on an H200: the casts probe, the Llama-1B forward (bits vs native), then the self-check of
# CHECK_SET_1's training steps -- the H200's first comparison, before any H200 survey is folded in.
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import cupy, numpy as np; from tcnumerics import _casts; print('host', _casts.probe(np)); print('gpu', _casts.probe(cupy))" | tee -a "$OUT/gpu.txt"
echo "+ bench" > "$OUT/bench.log"
timeout 100 python3 benchmarks/bench_torch.py --model llama-1b --layers 2 --tokens 1024 --what forward fp8 2>>"$OUT/bench.log" | tee "$OUT/bench.jsonl"
echo "+ check_training" >> "$OUT/bench.log"
timeout 400 python3 lab/device_models/check_training.py --tokens 256 2048 2>>"$OUT/bench.log" | tee "$OUT/check.jsonl"
grep -v "Warning\|warn\|return self\|^  " "$OUT/bench.log" | tail -5
