#!/bin/bash
# Sixth device call (2026-11-26): the fourth kernel survey (kernel_calls4: transposed views, odd vocabulary widths,
# FP32/TF32 at larger shapes) in 4 parallel slices.
set -o pipefail
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-150}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
N=$(python3 -c "from kernel_calls import kernel_calls4; print(len(kernel_calls4()))")
Q=$(( (N + 3) / 4 ))
for i in 0 1 2 3; do
  timeout $((BUDGET + 120)) python3 lab/device_library/kernel_survey.py --sets kernels4 --start $((i * Q)) --limit $Q \
      --chunk 1000 --budget $BUDGET > $OUT/kernels4_$i.log 2>&1 &
done
wait
for f in $OUT/kernels4_*.log; do echo "== $f"; grep -v USDT $f | grep -v "^  " | tail -2; done | tee -a $OUT/log.txt
tar czf $OUT/kernels4.tgz -C $OUT kernels && rm -r $OUT/kernels $OUT/kernels4_*.log
ls -la $OUT
