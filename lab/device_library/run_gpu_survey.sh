#!/bin/bash
# Issue 23: one GPU model's launch survey, in one device call (<= 9 minutes wall, at most 7 files in $OUT).
#   bash lab/device_library/run_gpu_survey.sh h200    # the full survey (run_h200_survey.sh), ~8 minutes
#   bash lab/device_library/run_gpu_survey.sh h100    # the H100 companion: the training sets, the dense long-K
#                                                         # survey, and bits (longk2, held-out set 12), ~7 minutes
# Foreground: graph_survey.py in P processes over the training-step GEMMs of every published configuration
# (train_calls.py: forward, input and weight gradients, 1..16384 tokens, split-K-prone calls first) and, on a model
# other than the H100, a sample of the H100 table's own calls (agreement measured on every call kind).  Background
# (the GPU is idle: a graph capture runs nothing): bits of the issue's cases + a train_splitk sample (train_bits) and
# of holdout11 (BITS), their launches; then the autograd check (train_check.py).  $OUT then holds: log.txt, env.json,
# <set>.npz per dense set (train_splitk, train_rest[, h100_counterparts]), bits.tgz, autograd_check.json.
# Next, on the CPU: lab/device_library/fold_gpu.py (docs/gemm.md, "Per GPU model").
set -o pipefail
GPU=${1:?usage: run_gpu_survey.sh h200|h100 (the GPU model this device is)}
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
START=$(date +%s)
WALL=${WALL:-500}  # seconds to the end of the surveys; merging follows
P=${P:-14}
case $GPU in
  h100) SETS=${SETS:-"dense_longk train_splitk train_rest"}; BITS=${BITS:-"train_bits holdout11 longk2 holdout12"} ;;
  *) SETS=${SETS:-"train_splitk train_rest h100_counterparts"}; BITS=${BITS:-"train_bits holdout11"} ;;
esac
DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "run_gpu_survey.sh $GPU on '$DEVICE': sets $SETS, bits $BITS, $P processes, surveys until +$((WALL - 70)) s" | tee $OUT/log.txt
python3 - > $OUT/env.json <<PY
import json, subprocess, torch
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().splitlines()[0].split(", ")
def cublas_runtime():
    """cuBLAS's own MAJOR.MINOR.PATCH (cublasGetProperty of the library torch loaded)."""
    import ctypes
    torch.matmul(torch.ones(8, 8, device="cuda"), torch.ones(8, 8, device="cuda"))  # loads cuBLAS
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            lib = ctypes.CDLL(name)
            v = [ctypes.c_int() for _ in range(3)]
            if all(lib.cublasGetProperty(i, ctypes.byref(v[i])) == 0 for i in range(3)):
                return ".".join(str(x.value) for x in v)
        except OSError:
            continue
    return "unknown"
try:
    from importlib.metadata import version
    cublas = version("nvidia-cublas")  # the form the H100's provenance has (13.1.0.3)
except Exception:
    cublas = cublas_runtime()
print(json.dumps(dict(gpu="$GPU", device=torch.cuda.get_device_name(0), driver=smi[1], memory=smi[2],
                      torch=torch.__version__, cuda=torch.version.cuda, cublas=cublas, cublas_runtime=cublas_runtime(),
                      sms=torch.cuda.get_device_properties(0).multi_processor_count,
                      capability=list(torch.cuda.get_device_capability(0)), sets="$SETS")))
PY
cat $OUT/env.json | tee -a $OUT/log.txt
case "$DEVICE" in
  *H100*) [ "$GPU" = h100 ] || echo "WARNING: the device is '$DEVICE', not a $GPU" | tee -a $OUT/log.txt ;;
  *H200*) [ "$GPU" = h200 ] || echo "WARNING: the device is '$DEVICE', not a $GPU" | tee -a $OUT/log.txt ;;
esac
(
  mkdir -p $OUT/bits
  for s in $BITS; do
    OUT=$OUT/bits timeout 100 python3 lab/device_library/survey_ops.py --set $s 2>&1 | grep -v USDT | tail -2
  done
  OUT=$OUT/bits timeout 80 python3 lab/device_library/graph_survey.py --sets $(echo $BITS | tr ' ' ,) --budget 50 \
      2>&1 | grep -v USDT | tail -2
) > $OUT/side.log 2>&1 &
SIDE=$!
LEFT=$(( WALL - 70 - ($(date +%s) - START) ))
# (run_dense_survey.sh appends its own lines -- ranges, each slice's last lines, the merges -- to log.txt)
SETS="$SETS" P=$P SECONDS_FOR_SURVEY=$LEFT bash lab/device_library/run_dense_survey.sh > $OUT/dense.log 2>&1
wait $SIDE
# the autograd check runs alone: beside 14 survey processes it ran out of GPU memory (H100, 2026-11-27)
timeout 100 python3 lab/device_library/train_check.py 2>&1 | grep -v USDT | tail -4 >> $OUT/side.log
{ echo "== bits, launches, autograd check"; cat $OUT/side.log; } >> $OUT/log.txt
mv $OUT/bits/kernels $OUT/bits/launches 2>/dev/null
tar czf $OUT/bits.tgz -C $OUT bits && rm -r $OUT/bits
rm -f $OUT/side.log $OUT/dense.log $OUT/ranges.txt
echo "done in $(( $(date +%s) - START )) s" | tee -a $OUT/log.txt
ls -la $OUT | tee -a $OUT/log.txt
