#!/bin/bash
# First device call of 2026-11-26 (second session): does a CUDA-graph capture of a torch GEMM call get the launches
# torch.profiler measured?  One process over samples of every profiled set (graph_survey.py --compare on the CPU
# afterwards), then 8 processes side by side for the aggregate rate.
set -o pipefail
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
which c++filt cu++filt | tee -a $OUT/log.txt
timeout 330 python3 lab/device_library/graph_survey.py --budget 240 \
    --sets survey,holdout5,holdout6,kernels4@5,kernels3@10,kernels@10,kernels2@40 2>&1 | grep -v USDT | tee $OUT/check.log | tail -40
N=$(python3 -c "from kernel_calls import kernel_calls3; print(len(kernel_calls3()))")
Q=$(( (N + 7) / 8 ))
mkdir -p $OUT/par
for i in 0 1 2 3 4 5 6 7; do
  OUT=$OUT/par timeout 150 python3 lab/device_library/graph_survey.py --sets kernels3 --start $((i * Q)) --limit $Q \
      --budget 40 > $OUT/par_$i.log 2>&1 &
done
wait
for f in $OUT/par_*.log; do grep -v USDT $f | tail -2; done | tee -a $OUT/log.txt
tar czf $OUT/graph_check.tgz -C $OUT kernels par && rm -r $OUT/kernels $OUT/par
ls -la $OUT
