#!/bin/bash
# A held-out capture (2026-11-26: holdout7 to holdout10): bits (survey_ops.py) and launches
# (graph_survey.py) of the set named by $1, into $OUT/$1.tgz; replayed once, when the method is settled.
set -o pipefail
SET=${1:?usage: run_holdout_graph.sh SET}
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/${SET}_log.txt
timeout 200 python3 lab/device_library/survey_ops.py --set $SET 2>&1 | grep -v USDT | tail -2 | tee -a $OUT/${SET}_log.txt
timeout 240 python3 lab/device_library/graph_survey.py --sets $SET --budget 180 2>&1 | grep -v USDT | tail -2 | tee -a $OUT/${SET}_log.txt
mv $OUT/kernels/graph_$SET.json.gz $OUT/kernels/$SET.json.gz
tar czf $OUT/$SET.tgz -C $OUT $SET kernels && rm -r $OUT/$SET $OUT/kernels
ls -la $OUT
