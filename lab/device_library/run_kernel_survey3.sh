#!/bin/bash
# Third device call (2026-11-26): held-out capture 5 (bits; replayed only once the method is settled), bits for a
# sample of the third kernel survey, then the third survey itself in 4 parallel slices (each process is bound by
# torch.profiler and Python launch overhead, not by the GPU) beside the last calls of the second survey.
set -o pipefail
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-240}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
for s in holdout5 ksample3; do
  timeout 150 python3 lab/device_library/survey_ops.py --set $s 2>&1 | grep -v USDT | tail -2 | tee -a $OUT/log.txt
done
N=$(python3 -c "from kernel_calls import kernel_calls3; print(len(kernel_calls3()))")
Q=$(( (N + 3) / 4 ))
for i in 0 1 2 3; do
  timeout $((BUDGET + 120)) python3 lab/device_library/kernel_survey.py --sets kernels3 --start $((i * Q)) --limit $Q \
      --chunk 1000 --budget $BUDGET > $OUT/kernels3_$i.log 2>&1 &
done
(timeout 100 python3 lab/device_library/kernel_survey.py --sets holdout5 --budget 60 && \
 timeout $((BUDGET + 60)) python3 lab/device_library/kernel_survey.py --sets kernels2 --start 540000 --chunk 1000 \
    --budget $((BUDGET - 40))) > $OUT/kernels2_tail.log 2>&1 &
wait
for f in $OUT/kernels3_*.log $OUT/kernels2_tail.log; do echo "== $f"; grep -v USDT $f | grep -v "^  " | tail -2; done | tee -a $OUT/log.txt
tar czf $OUT/kernels3.tgz -C $OUT kernels && rm -r $OUT/kernels
ls -la $OUT $OUT/*/
