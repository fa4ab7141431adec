#!/bin/bash
# Held-out capture 9 (2026-11-26, second session): bits (survey_ops.py) and launches (graph_survey.py) of ten more models,
# drawn after holdout 8's replay with the method settled; replayed once.
set -o pipefail
export PYTHONPATH=src:tools/device_library PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
timeout 200 python3 tools/device_library/survey_ops.py --set holdout9 2>&1 | grep -v USDT | tail -2 | tee -a $OUT/log.txt
timeout 120 python3 tools/device_library/graph_survey.py --sets holdout9 --budget 60 2>&1 | grep -v USDT | tail -2 | tee -a $OUT/log.txt
mv $OUT/kernels/graph_holdout9.json.gz $OUT/kernels/holdout9.json.gz
tar czf $OUT/holdout9.tgz -C $OUT holdout9 kernels && rm -r $OUT/holdout9 $OUT/kernels
ls -la $OUT
