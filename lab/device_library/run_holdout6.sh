#!/bin/bash
# Fifth device call (2026-11-26): held-out capture 6 (bits + launches), drawn after holdout 5 was replayed and the
# method settled -- a second honest estimate on models no survey saw.
set -o pipefail
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 150 python3 lab/device_library/survey_ops.py --set holdout6 2>&1 | grep -v USDT | tail -2 | tee -a $OUT/log.txt
timeout 120 python3 lab/device_library/kernel_survey.py --sets holdout6 --budget 60 2>&1 | grep -v USDT | grep -v "^  " | tail -2 | tee -a $OUT/log.txt
tar czf $OUT/holdout6.tgz -C $OUT holdout6 kernels && rm -r $OUT/holdout6 $OUT/kernels
ls -la $OUT
