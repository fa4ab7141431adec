#!/bin/bash
# Issue 23: the H200's launch survey, one device call on an nvidia-h200 machine (~8 minutes; run_gpu_survey.sh says
# what it measures and which files come back).  Then, on the CPU:
#   python3 lab/device_library/fold_gpu.py --gpu h200 --out-dir OUT_DIR [--reference-out H100_OUT_DIR]
exec bash lab/device_library/run_gpu_survey.sh h200
