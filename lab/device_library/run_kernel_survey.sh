#!/bin/bash
# One device call (H100): held-out capture 3 (bits), a bit-captured sample of the kernel survey, then the
# kernel survey itself (kernel names + launch grids of the earlier captures' calls, holdout 3's and the dense
# list), cut at a time budget.  Everything under $OUT; the kernel files packed into one archive.
set -o pipefail
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-380}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 120 python3 lab/device_library/survey_ops.py --set holdout3 2>&1 | grep -v USDT | tail -3 | tee -a $OUT/log.txt
timeout 150 python3 lab/device_library/survey_ops.py --set ksample 2>&1 | grep -v USDT | tail -3 | tee -a $OUT/log.txt
timeout $((BUDGET + 90)) python3 lab/device_library/kernel_survey.py --sets survey,holdout,holdout2,holdout3,kernels \
    --budget $BUDGET 2>&1 | grep -v USDT | tee -a $OUT/log.txt | grep -v "^  " | awk 'NR % 10 == 1'
tar czf $OUT/kernels.tgz -C $OUT kernels && rm -r $OUT/kernels
ls -la $OUT $OUT/*/ | tee -a $OUT/log.txt
