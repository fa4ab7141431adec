#!/bin/bash
# Second device call (H100): held-out capture 4 (bits, drawn after the launch-table method was settled), then the
# second kernel survey (holdout 4's launches, then kernel_calls2) cut at a time budget.
set -o pipefail
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
BUDGET=${BUDGET:-420}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
[ "${START:-0}" = 0 ] && timeout 120 python3 lab/device_library/survey_ops.py --set holdout4 2>&1 | grep -v USDT | tail -2 | tee -a $OUT/log.txt
timeout $((BUDGET + 100)) python3 lab/device_library/kernel_survey.py --sets ${SETS:-holdout4,kernels2} --start ${START:-0} --chunk 1000 \
    --budget $BUDGET 2>&1 | grep -v USDT | tee -a $OUT/log.txt | grep -v "^  " | awk 'NR % 20 == 1'
tail -2 $OUT/log.txt
tar czf $OUT/kernels2.tgz -C $OUT kernels && rm -r $OUT/kernels
ls -la $OUT $OUT/*/
