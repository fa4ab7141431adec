#!/bin/bash
# Fourth device call (2026-11-26): bits of held-out capture 5 and of the third survey's sample (the first call's
# copies did not come back: at most 8 files per call), then the FPRev-style probes of the SIMT M = 1 / largek
# kernels and of the TF32 kernels the captures could not identify.  Every result goes into a few archives.
set -o pipefail
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/log.txt
for s in holdout5 ksample3; do
  timeout 150 python3 lab/device_library/survey_ops.py --set $s 2>&1 | grep -v USDT | tail -2 | tee -a $OUT/log.txt
done
tar czf $OUT/bits.tgz -C $OUT holdout5 ksample3 && rm -r $OUT/holdout5 $OUT/ksample3
mkdir -p /tmp/probes
timeout 150 python3 lab/device_library/probe_simt_device.py /tmp/probes/simt 2>&1 | grep -v USDT | tail -15 | tee -a $OUT/log.txt
[ -f lab/device_library/probe_tf32_device.py ] && \
  timeout 200 python3 lab/device_library/probe_tf32_device.py /tmp/probes/tf32 2>&1 | grep -v USDT | tail -15 | tee -a $OUT/log.txt
tar czf $OUT/probes.tgz -C /tmp/probes .
ls -la $OUT
