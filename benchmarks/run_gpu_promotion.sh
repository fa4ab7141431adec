#!/usr/bin/env bash
# Device calls of 2026-11-27 (second session): promotion inside the kernels and the FP8 quantisation path.
#   bash benchmarks/run_gpu_promotion.sh all     # GPU tests, the FP8 cases, then check
#   bash benchmarks/run_gpu_promotion.sh regress # the GPU engine's tests, vectors/hopper through --engine cuda
#   bash benchmarks/run_gpu_promotion.sh speed   # real-CuPy tests, then issue 22's speed cases, FP8 recipe included
#   bash benchmarks/run_gpu_promotion.sh check   # CHECK_SET_2's training steps under the self-check (issue 23)
#   bash benchmarks/run_gpu_promotion.sh h200    # check, then the Llama-3-8B forward in library mode and FP8
# Outputs under $OUT: gpu.txt, tests.txt, bench.jsonl, bench.log, check.jsonl, check_<gpu>_set2.json.
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/gpu.txt"
B="python3 benchmarks/bench_torch.py"
run() { echo "+ $*" | tee -a "$OUT/bench.log"; timeout "$1" "${@:2}" 2>>"$OUT/bench.log" | tee -a "$OUT/bench.jsonl"; }
check() {
    echo "+ check_training --set 2" | tee -a "$OUT/bench.log"
    timeout "$1" python3 lab/device_models/check_training.py --set 2 --tokens 256 2048 2>>"$OUT/bench.log" \
        | tee -a "$OUT/check.jsonl"
}
case "${1:-speed}" in
all)  # H100: the GPU tests of promotion and batching, the FP8 cases, then the check
    timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/test_promotion.py tests/test_device_composition.py \
        -k "gpu and (promot or scaled or recipe)" 2>&1 | tail -4 | tee -a "$OUT/tests.txt"
    run 60 $B --model llama-1b --layers 2 --tokens 1024 --what fp8
    run 180 $B --model llama3-8b --tokens 2048 --what forward fp8
    check 300
    ;;
regress)  # the GPU engine's own tests and the Hopper vectors through it, after the kernels' new arguments
    timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_engine_cuda.py tests/test_torch_gpu.py \
        tests/test_torch_check.py tests/test_interop.py 2>&1 | grep -v "^  \|Warning" | tail -8 | tee -a "$OUT/tests.txt"
    echo "+ vectors verify --engine cuda" | tee -a "$OUT/bench.log"
    timeout 240 python3 -m tcnumerics vectors verify vectors/hopper --engine cuda 2>>"$OUT/bench.log" \
        | tail -6 | tee "$OUT/verify_cuda.txt"
    ;;
speed)
    timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_promotion.py tests/test_device_composition.py \
        -k "gpu or promot or scaled or recipe" 2>&1 | tail -6 | tee "$OUT/tests.txt"
    run 60 $B --gemm 8192
    run 60 $B --model llama-1b --layers 2 --tokens 1024 --what forward fp8
    run 200 $B --model llama3-8b --tokens 2048 --what forward fp8
    run 130 $B --model llama3-8b --tokens 1024 --what train
    ;;
check)
    check 540
    ;;
h200)
    check 330
    run 200 $B --model llama3-8b --tokens 2048 --what forward fp8
    ;;
esac
grep -v "Warning\|warn\|return self\|^  " "$OUT/bench.log" | tail -4
