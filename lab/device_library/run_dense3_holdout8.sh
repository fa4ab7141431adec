#!/bin/bash
# 2026-11-26 (second session), third dense device call: held-out capture 8 first, then the third dense survey
# (run_dense_survey.sh) in the time left.
set -o pipefail
bash lab/device_library/run_holdout_graph.sh holdout8
SETS="dense_models_more dense_attention_more dense_grid_extra" P=14 SECONDS_FOR_SURVEY=${SECONDS_FOR_SURVEY:-400} \
    bash lab/device_library/run_dense_survey.sh
