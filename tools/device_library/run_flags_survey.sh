#!/bin/bash
# Issue 33 ("flags that cry wolf"): one device call per GPU model, at most ~6 minutes wall.
#   bash tools/device_library/run_flags_survey.sh h200|h100
# Foreground: graph_survey.py over train_calls.train_grid_calls (a training step's GEMM kinds on a generic grid of
# projection / LM-head / attention shapes at 128..4,096 tokens; a graph capture runs nothing, so the GPU is idle).
# Beside it (after it on an H100): the self-check of CHECK_SET_3 (tools/device_models/check_training.py --set 3,
# T = 256 and 2,048), the held-out models drawn before this survey first ran, checked against the tables in the tree
# (on 2026-11-28: as they were before the survey's fold; the capture keeps each call's kernels, grid and whether the
# bits matched, so the fold's effect is re-evaluated on the CPU: tools/device_library/flag_precision.py).
# $OUT: log.txt, env.json, train_grid.npz, check.jsonl, check_<gpu>_set3.json, check_<gpu>_set3_calls.json.gz.
set -o pipefail
GPU=${1:?usage: run_flags_survey.sh h200|h100}
export PYTHONPATH=src:tools/device_library PYTHONUNBUFFERED=1
START=$(date +%s)
P=${P:-8}
DEVICE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
echo "run_flags_survey.sh $GPU on '$DEVICE': train_grid in $P processes for ${SURVEY_S:-200} s, CHECK_SET_3 beside" | tee $OUT/log.txt
python3 - > $OUT/env.json <<PY
import json, torch
from importlib.metadata import version
print(json.dumps(dict(gpu="$GPU", device=torch.cuda.get_device_name(0), smi="$DEVICE", torch=torch.__version__,
                      cuda=torch.version.cuda, cublas=version("nvidia-cublas"),
                      sms=torch.cuda.get_device_properties(0).multi_processor_count)))
PY
cat $OUT/env.json | tee -a $OUT/log.txt
check() {
  timeout ${CHECK_S:-300} python3 tools/device_models/check_training.py --set 3 --tokens 256 2048 2>&1 \
      | grep -v USDT | grep '^{' > $OUT/check.jsonl
  echo "check done at +$(( $(date +%s) - START )) s" >> $OUT/log.txt
}
# beside the survey where memory allows (an H200: 141 GB); after it on an H100, where it ran out of memory beside
# 8 survey processes (2026-11-28)
case "$DEVICE" in *H200*) BESIDE=${BESIDE:-1} ;; *) BESIDE=${BESIDE:-0} ;; esac
[ "$BESIDE" = 1 ] && { check & CHECK=$!; }
SETS=train_grid P=$P SECONDS_FOR_SURVEY=${SURVEY_S:-200} bash tools/device_library/run_dense_survey.sh > /dev/null 2>&1
echo "survey done at +$(( $(date +%s) - START )) s" | tee -a $OUT/log.txt
if [ "$BESIDE" = 1 ]; then wait $CHECK; else check; fi
tail -1 $OUT/check.jsonl | tee -a $OUT/log.txt
rm -f $OUT/ranges.txt
echo "done in $(( $(date +%s) - START )) s" | tee -a $OUT/log.txt
ls -la $OUT | tee -a $OUT/log.txt
