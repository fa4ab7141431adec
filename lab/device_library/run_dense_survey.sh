#!/bin/bash
# The dense kernel surveys (2026-11-26, second session): graph_survey.py in P processes side by side, each taking
# one slice of every set named in SETS (SET or SET:FIRST:LAST, a range of the set's calls; SET:FIRST:LAST:I, a range
# process I takes whole: the rest of a slice an earlier run did not finish), until DEADLINE seconds;
# then each set's slices merged into $OUT/<set>.npz (calls a slice did not reach keep signature -1).
set -o pipefail
export PYTHONPATH=src:lab/device_library PYTHONUNBUFFERED=1
P=${P:-14}
DEADLINE=$(( $(date +%s) + ${SECONDS_FOR_SURVEY:-470} ))
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $OUT/log.txt
mkdir -p $OUT/slices
for spec in $SETS; do
  IFS=: read -r name first last proc <<< "$spec"
  total=$(python3 -c "from train_calls import ALL_DENSE_SETS; print(len(ALL_DENSE_SETS['$name']()))")
  first=${first:-0}; last=${last:-$total}
  echo "$name: calls $first..$last of $total" | tee -a $OUT/log.txt
  echo "$name $first $last $proc" >> $OUT/ranges.txt
done
for i in $(seq 0 $((P - 1))); do
  (
    while read -r name first last proc; do
      if [ -n "$proc" ]; then
        [ "$proc" = "$i" ] || continue
        start=$first; q=$(( last - first ))
      else
        q=$(( (last - first + P - 1) / P )); start=$(( first + i * q ))
      fi
      left=$(( DEADLINE - $(date +%s) ))
      [ $left -le 5 ] && break
      OUT=$OUT/slices python3 lab/device_library/graph_survey.py --sets $name --start $start \
          --limit $q --chunk 1000 --budget $left 2>&1 | grep -v USDT
    done < $OUT/ranges.txt
  ) > $OUT/slice_$i.log 2>&1 &
done
wait
tail -q -n 2 $OUT/slice_*.log | tee -a $OUT/log.txt
for name in $(echo $SETS | tr ' ' '\n' | cut -d: -f1 | sort -u); do
  python3 lab/device_library/graph_survey.py --sets $name --merge $OUT/slices/kernels 2>&1 | tee -a $OUT/log.txt
done
rm -r $OUT/slices $OUT/slice_*.log
ls -la $OUT
