#!/usr/bin/env bash
# One device run (H100) of the 2026-11-25 session, parts in order of need; each part has its own
# time cap and writes under $OUT/<part>/.  From the repo root:  bash benchmarks/gpu/burst_2026-11-25.sh
# (.whl/ carries numpy 2.4.6 for part 4: the CPU side regenerates the inputs with numpy 2.4.x).
set -u
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/holdout2" "$OUT/nvfp4" "$OUT/equiv"
log() { echo "== $(date +%T) $*"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import numpy, cupy, torch; print('numpy', numpy.__version__, 'cupy', cupy.__version__, 'torch', torch.__version__)"

log "1. library holdout2 capture (issue 15)"
PYTHONPATH=src:tools/device_library timeout 120 python3 tools/device_library/survey_ops.py --set holdout2 2>&1 | tail -5

log "2. NVFP4/MXFP4 tiled kernel: bits and speed (issue 13)"
export PYTHONPATH=src
{ for e in blackwell.tcgen05.mma.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3 blackwell.tcgen05.mma.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0; do
    timeout 25 python3 benchmarks/gpu_equivalence.py --count 262144 --only "$e"; done
  timeout 67 python3 benchmarks/bench_gpu.py --only subgroup,mx --size 8192 --scaled-seconds 40 --json "$OUT/nvfp4/bench.json"
} > "$OUT/nvfp4/log.txt" 2>&1
tail -25 "$OUT/nvfp4/log.txt"

log "3. 1,048,576 vectors per non-Hopper datapath, GPU engine digests (issue 13)"
timeout 170 python3 benchmarks/gpu_equivalence.py --skip-arch hopper --count 1048576 --per-family 2048 --workers 14 \
    --deadline 130 --quiet --digest "$OUT/equiv/digest_nonhopper_1M.json" 2>&1 | tail -8

log "4. the same with numpy 2.4.6 (in case generation differs between numpy 2.5 and 2.4)"
if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl; then
  PYTHONPATH=/tmp/site:src timeout 120 python3 benchmarks/gpu_equivalence.py --skip-arch hopper --count 1048576 \
      --per-family 2048 --workers 14 --deadline 80 --quiet --digest "$OUT/equiv/digest_nonhopper_1M_np246.json" 2>&1 | tail -4
fi
log "done"
