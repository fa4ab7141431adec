#!/usr/bin/env bash
# One device call: the composition on real CuPy (tests), then bench_torch.py's cases, each under its own
# timeout so a slow one cannot take the rest with it.  Outputs under $OUT (tests.txt, bench.jsonl).
#   bash benchmarks/run_gpu_speed.sh [quick|full]
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, cupy, numba, transformers; print(torch.__version__, cupy.__version__, numba.__version__, transformers.__version__)" | tee -a "$OUT/gpu.txt"
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_device_composition.py tests/test_torch_gpu.py \
    tests/test_torch_check.py tests/test_casts.py 2>&1 | tail -25 | tee "$OUT/tests.txt"
B="python3 benchmarks/bench_torch.py"
run() { echo "+ $*" | tee -a "$OUT/bench.log"; timeout "$1" "${@:2}" 2>>"$OUT/bench.log" | tee -a "$OUT/bench.jsonl"; }
run 120 $B --gemm 8192
run 200 $B --model llama-1b --layers 2 --tokens 1024 --what forward fp8 --profile
if [ "${1:-quick}" = full ]; then
    run 300 $B --model llama3-8b --tokens 2048 --what forward
fi
tail -5 "$OUT/bench.log"
