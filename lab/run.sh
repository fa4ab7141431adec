#!/bin/bash
# The lab's one device runner: every GPU measurement the tables and captures came from, as one command per kind.
# Run from the repository root on the device machine, with $OUT the folder whose files come back:
#
#   bash lab/run.sh gpu-survey h100|h200        one GPU model's launch survey (training sets, bits, autograd check)
#   bash lab/run.sh dense SET[:FIRST:LAST[:I]]...   dense kernel surveys (graph_survey.py) in $P processes, merged
#   bash lab/run.sh capture SET                 a held-out capture: bits and launches of SET, into $OUT/SET.tgz
#   bash lab/run.sh bits SET...                 bits only (survey_ops.py), one folder per set
#   bash lab/run.sh kernels SETS [SLICES]       profiler kernel survey (kernel_survey.py, SETS comma-separated)
#   bash lab/run.sh probes                      the FPRev-style SIMT / TF32 order probes
#   bash lab/run.sh env GPU                     $OUT/env.json: device, driver, torch, CUDA, cuBLAS, SMs
#   bash lab/run.sh flags-survey h100|h200      issue 33: the training-grid survey and CHECK_SET_3's self-check
#                                               (GRID=train_grid_fine CHECK_SET=5: the grid's supplement, the 5th set)
#   SETS=train_grid_heads run.sh env h200; P=6 run.sh dense train_grid_heads   the large LM heads (8 GiB operands)
#   P=6 BESIDE=0 GRID=train_grid_large CHECK_SET=7 run.sh flags-survey h200   the large grid, then the 7th set
#
# Environment: P (dense processes, 14), SECONDS_FOR_SURVEY (dense, 470), WALL (gpu-survey, 500), BUDGET (kernels,
# 240), SETS / BITS (gpu-survey's lists).  lab/README.md says which command produced which table or capture, and
# what runs next on the CPU (python -m lab fold_gpu ..., replay_survey ...).
set -o pipefail
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
LIB=lab/device_library
: "${OUT:?set OUT to the folder whose files come back}"

quiet() { grep -v USDT; }  # CUPTI's USDT probe warnings, one per process

device_line() { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/log.txt"; }

cmd_env() {  # GPU: the environment a survey ran in, $OUT/env.json
  local gpu=${1:?usage: run.sh env GPU}
  GPU_NAME=$gpu SETS_RUN="${SETS:-}" python3 - > "$OUT/env.json" <<'PY'
import json, os, subprocess, torch
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().splitlines()[0].split(", ")
def cublas_runtime():
    """cuBLAS's own MAJOR.MINOR.PATCH (cublasGetProperty of the library torch loaded)."""
    import ctypes
    torch.matmul(torch.ones(8, 8, device="cuda"), torch.ones(8, 8, device="cuda"))  # loads cuBLAS
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so"):
        try:
            lib = ctypes.CDLL(name)
            v = [ctypes.c_int() for _ in range(3)]
            if all(lib.cublasGetProperty(i, ctypes.byref(v[i])) == 0 for i in range(3)):
                return ".".join(str(x.value) for x in v)
        except OSError:
            continue
    return "unknown"
try:
    from importlib.metadata import version
    cublas = version("nvidia-cublas")  # the form the H100's provenance has (13.1.0.3)
except Exception:
    cublas = cublas_runtime()
print(json.dumps(dict(gpu=os.environ["GPU_NAME"], device=torch.cuda.get_device_name(0), driver=smi[1], memory=smi[2],
                      torch=torch.__version__, cuda=torch.version.cuda, cublas=cublas, cublas_runtime=cublas_runtime(),
                      sms=torch.cuda.get_device_properties(0).multi_processor_count,
                      capability=list(torch.cuda.get_device_capability(0)), sets=os.environ["SETS_RUN"])))
PY
  tee -a "$OUT/log.txt" < "$OUT/env.json"
}

cmd_bits() {  # SET...: each set's calls run on the GPU, their bits under $OUT/SET/
  for s in "$@"; do
    timeout "${BITS_S:-150}" python3 $LIB/survey_ops.py --set "$s" 2>&1 | quiet | tail -2 | tee -a "$OUT/log.txt"
  done
}

cmd_capture() {  # SET: a held-out capture (bits and launches), replayed once the method is settled
  local set=${1:?usage: run.sh capture SET}
  device_line
  BITS_S=200 cmd_bits "$set"
  timeout 240 python3 $LIB/graph_survey.py --sets "$set" --budget 180 2>&1 | quiet | tail -2 | tee -a "$OUT/log.txt"
  mv "$OUT/kernels/graph_$set.json.gz" "$OUT/kernels/$set.json.gz"
  tar czf "$OUT/$set.tgz" -C "$OUT" "$set" kernels && rm -r "${OUT:?}/$set" "$OUT/kernels"
  ls -la "$OUT"
}

cmd_kernels() {  # SETS [SLICES]: the torch.profiler kernel survey (kernel names and grids), in SLICES processes
  local sets=${1:?usage: run.sh kernels SETS [SLICES]} slices=${2:-1} budget=${BUDGET:-240} n q i
  device_line
  n=$(python3 -c "import kernel_survey as k; print(max(len(k.SETS[s]()) for s in '$sets'.split(',')))")
  q=$(( (n + slices - 1) / slices ))
  for i in $(seq 0 $((slices - 1))); do
    timeout $((budget + 120)) python3 $LIB/kernel_survey.py --sets "$sets" --start $((i * q)) --limit $q \
        --chunk 1000 --budget "$budget" > "$OUT/kernels_$i.log" 2>&1 &
  done
  wait
  for f in "$OUT"/kernels_*.log; do echo "== $f"; quiet < "$f" | grep -v "^  " | tail -2; done | tee -a "$OUT/log.txt"
  tar czf "$OUT/kernels.tgz" -C "$OUT" kernels && rm -r "$OUT/kernels" "$OUT"/kernels_*.log
  ls -la "$OUT"
}

cmd_dense() {  # SET[:FIRST:LAST[:I]]...: graph_survey.py in P processes, each a slice of every set, merged per set
  # SET:FIRST:LAST is a range of the set's calls; SET:FIRST:LAST:I a range process I takes whole (the rest of a
  # slice an earlier run did not finish).  Calls a slice did not reach keep signature -1 in $OUT/<set>.npz.
  local P=${P:-14} deadline=$(( $(date +%s) + ${SECONDS_FOR_SURVEY:-470} )) spec name first last proc total i
  local slices=()
  device_line
  mkdir -p "$OUT/slices"
  : > "$OUT/ranges.txt"
  for spec in "$@"; do
    IFS=: read -r name first last proc <<< "$spec"
    total=$(python3 -c "from train_calls import ALL_DENSE_SETS; print(len(ALL_DENSE_SETS['$name']()))")
    first=${first:-0}; last=${last:-$total}
    echo "$name: calls $first..$last of $total" | tee -a "$OUT/log.txt"
    echo "$name $first $last $proc" >> "$OUT/ranges.txt"
  done
  for i in $(seq 0 $((P - 1))); do
    (
      while read -r name first last proc; do
        local start q left
        if [ -n "$proc" ]; then
          [ "$proc" = "$i" ] || continue
          start=$first; q=$(( last - first ))
        else
          q=$(( (last - first + P - 1) / P )); start=$(( first + i * q ))
        fi
        left=$(( deadline - $(date +%s) ))
        [ $left -le 5 ] && break
        OUT=$OUT/slices python3 $LIB/graph_survey.py --sets "$name" --start $start \
            --limit $q --chunk 1000 --budget $left 2>&1 | quiet
      done < "$OUT/ranges.txt"
    ) > "$OUT/slice_$i.log" 2>&1 &
    slices+=($!)
  done
  wait "${slices[@]}"
  tail -q -n 2 "$OUT"/slice_*.log | tee -a "$OUT/log.txt"
  for name in $(printf '%s\n' "$@" | cut -d: -f1 | sort -u); do
    python3 $LIB/graph_survey.py --sets "$name" --merge "$OUT/slices/kernels" 2>&1 | tee -a "$OUT/log.txt"
  done
  rm -r "$OUT/slices" "$OUT"/slice_*.log "$OUT/ranges.txt"
  ls -la "$OUT"
}

cmd_gpu_survey() {  # h100|h200: one GPU model's launch survey in one device call (<= 9 minutes, <= 7 files)
  # Foreground: the dense training-step sets (train_calls.py: forward, input and weight gradients, 1..16384 tokens,
  # split-K-prone calls first) and, on a model other than the H100, a sample of the H100 table's own calls.
  # Background (a graph capture runs nothing, the GPU is idle): bits of BITS and their launches; then the autograd
  # check.  $OUT: log.txt, env.json, <set>.npz per dense set, bits.tgz.  Next, on the CPU: python -m lab fold_gpu.
  local GPU=${1:?usage: run.sh gpu-survey h200|h100} START WALL=${WALL:-500} P=${P:-14} DEVICE SIDE LEFT
  START=$(date +%s)
  case $GPU in
    h100) SETS=${SETS:-"dense_longk train_splitk train_rest"}; BITS=${BITS:-"train_bits holdout11 longk2 holdout12"} ;;
    *) SETS=${SETS:-"train_splitk train_rest h100_counterparts"}; BITS=${BITS:-"train_bits holdout11"} ;;
  esac
  DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  echo "run.sh gpu-survey $GPU on '$DEVICE': sets $SETS, bits $BITS, $P processes, surveys until +$((WALL - 70)) s" \
      | tee "$OUT/log.txt"
  SETS="$SETS" cmd_env "$GPU"
  case "$DEVICE" in
    *H100*) [ "$GPU" = h100 ] || echo "WARNING: the device is '$DEVICE', not a $GPU" | tee -a "$OUT/log.txt" ;;
    *H200*) [ "$GPU" = h200 ] || echo "WARNING: the device is '$DEVICE', not a $GPU" | tee -a "$OUT/log.txt" ;;
  esac
  (
    mkdir -p "$OUT/bits"
    for s in $BITS; do
      OUT=$OUT/bits timeout 100 python3 $LIB/survey_ops.py --set $s 2>&1 | quiet | tail -2
    done
    OUT=$OUT/bits timeout 80 python3 $LIB/graph_survey.py --sets "$(echo $BITS | tr ' ' ,)" --budget 50 \
        2>&1 | quiet | tail -2
  ) > "$OUT/side.log" 2>&1 &
  SIDE=$!
  LEFT=$(( WALL - 70 - ($(date +%s) - START) ))
  # shellcheck disable=SC2086
  P=$P SECONDS_FOR_SURVEY=$LEFT cmd_dense $SETS > "$OUT/dense.log" 2>&1
  wait $SIDE
  # the autograd check runs alone: beside 14 survey processes it ran out of GPU memory (H100, 2026-11-27)
  timeout 100 python3 $LIB/train_check.py 2>&1 | quiet | tail -4 >> "$OUT/side.log"
  { echo "== bits, launches, autograd check"; cat "$OUT/side.log"; } >> "$OUT/log.txt"
  mv "$OUT/bits/kernels" "$OUT/bits/launches" 2>/dev/null
  tar czf "$OUT/bits.tgz" -C "$OUT" bits && rm -r "$OUT/bits"
  rm -f "$OUT/side.log" "$OUT/dense.log"
  echo "done in $(( $(date +%s) - START )) s" | tee -a "$OUT/log.txt"
  ls -la "$OUT" | tee -a "$OUT/log.txt"
}

cmd_flags_survey() {  # h100|h200: issue 33 ("flags that cry wolf"), one device call per GPU model, ~6 minutes
  # Foreground: graph_survey.py over train_calls.train_grid_calls (a training step's GEMM kinds on a generic grid of
  # projection / LM-head / attention shapes at 128..4,096 tokens; a graph capture runs nothing, so the GPU is idle).
  # Beside it (after it on an H100): the self-check of CHECK_SET_3 (lab/device_models/check_training.py --set 3,
  # T = 256 and 2,048), the held-out models drawn before this survey first ran, checked against the tables in the
  # tree (on 2026-11-28: as they were before the survey's fold; the capture keeps each call's kernels, grid and
  # whether the bits matched, so the fold's effect is re-evaluated on the CPU: lab/device_library/flag_precision.py).
  # $OUT: log.txt, env.json, train_grid.npz, check.jsonl, check_<gpu>_set3.json, check_<gpu>_set3_calls.json.gz.
  local GPU=${1:?usage: run.sh flags-survey h200|h100} START P=${P:-8} DEVICE CHECK  # BESIDE: the caller's
  START=$(date +%s)
  DEVICE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
  local GRID=${GRID:-train_grid} CHECK_SET=${CHECK_SET:-3}
  echo "run.sh flags-survey $GPU on '$DEVICE': $GRID in $P processes for ${SURVEY_S:-200} s, CHECK_SET_$CHECK_SET" \
      | tee "$OUT/log.txt"
  SETS=$GRID cmd_env "$GPU"
  flags_check() {
    # stderr kept apart (its last lines): a check that stops early says why (2026-11-29's stopped after 4 models)
    timeout "${CHECK_S:-300}" python3 lab/device_models/check_training.py --set "$CHECK_SET" --tokens 256 2048 \
        2> >(quiet | tail -40 > "$OUT/check.err") | grep '^{' > "$OUT/check.jsonl"
    echo "check done at +$(( $(date +%s) - START )) s" >> "$OUT/log.txt"
  }
  # beside the survey where memory allows (an H200: 141 GB); after it on an H100, where it ran out of memory beside
  # 8 survey processes (2026-11-28)
  # (BESIDE=0 keeps it after the survey: beside 6 processes of 8 GiB operands it ran out of memory, 2026-11-29)
  local beside
  case "$DEVICE" in *H200*) beside=${BESIDE:-1} ;; *) beside=${BESIDE:-0} ;; esac
  [ "$beside" = 1 ] && { flags_check & CHECK=$!; }
  P=$P SECONDS_FOR_SURVEY=${SURVEY_S:-200} cmd_dense "$GRID" > /dev/null 2>&1
  echo "survey done at +$(( $(date +%s) - START )) s" | tee -a "$OUT/log.txt"
  if [ "$beside" = 1 ]; then wait "$CHECK"; else flags_check; fi
  tail -1 "$OUT/check.jsonl" | tee -a "$OUT/log.txt"
  echo "done in $(( $(date +%s) - START )) s" | tee -a "$OUT/log.txt"
  ls -la "$OUT" | tee -a "$OUT/log.txt"
}

cmd_probes() {  # the FPRev-style order probes of the SIMT M = 1 / large-K and the TF32 kernels
  device_line
  mkdir -p /tmp/probes
  timeout 150 python3 $LIB/probe_simt_device.py /tmp/probes/simt 2>&1 | quiet | tail -15 | tee -a "$OUT/log.txt"
  timeout 200 python3 $LIB/probe_tf32_device.py /tmp/probes/tf32 2>&1 | quiet | tail -15 | tee -a "$OUT/log.txt"
  tar czf "$OUT/probes.tgz" -C /tmp/probes .
  ls -la "$OUT"
}

command=${1:-}
shift || true
case "$command" in
  gpu-survey) cmd_gpu_survey "$@" ;;
  dense) cmd_dense "$@" ;;
  capture) cmd_capture "$@" ;;
  bits) device_line; cmd_bits "$@" ;;
  kernels) cmd_kernels "$@" ;;
  probes) cmd_probes ;;
  env) cmd_env "$@" ;;
  flags-survey) cmd_flags_survey "$@" ;;
  *) sed -n '2,16p' "$0" | cut -c3- >&2; exit 2 ;;
esac
