#!/bin/bash
# 2026-11-26 (second session), third dense device call: held-out capture 8 (bits with survey_ops.py, launches with
# graph_survey.py) first, then the third dense survey (run_dense_survey.sh) in the time left.
set -o pipefail
export PYTHONPATH=src:tools/device_library PYTHONUNBUFFERED=1
timeout 200 python3 tools/device_library/survey_ops.py --set holdout8 2>&1 | grep -v USDT | tail -2 | tee $OUT/holdout8_log.txt
timeout 120 python3 tools/device_library/graph_survey.py --sets holdout8 --budget 60 2>&1 | grep -v USDT | tail -2 | tee -a $OUT/holdout8_log.txt
mv $OUT/kernels/graph_holdout8.json.gz $OUT/kernels/holdout8.json.gz
tar czf $OUT/holdout8.tgz -C $OUT holdout8 kernels && rm -r $OUT/holdout8 $OUT/kernels
SETS="dense_models_more dense_attention_more dense_grid_extra" P=14 SECONDS_FOR_SURVEY=${SECONDS_FOR_SURVEY:-400} \
    bash tools/device_library/run_dense_survey.sh
