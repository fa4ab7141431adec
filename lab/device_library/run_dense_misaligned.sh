#!/bin/bash
# 2026-11-26 (third session): the fourth dense survey, dense_calls.dense_misaligned_calls (one side of (N, K) off
# every multiple of 8), after holdout10's misses at Jais-13B's FFN of 13,653.
set -o pipefail
SETS="dense_misaligned" P=14 SECONDS_FOR_SURVEY=${SECONDS_FOR_SURVEY:-300} bash lab/device_library/run_dense_survey.sh
