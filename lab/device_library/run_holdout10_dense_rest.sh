#!/bin/bash
# 2026-11-26 (third session), one device call: held-out capture 10, then the 14 slices of dense_grid_extra the
# third dense survey left unreached (one process each; merged into dense_grid_extra.npz, kept locally as
# dense_grid_extra.part2.npz beside the first file).
set -o pipefail
bash lab/device_library/run_holdout_graph.sh holdout10
RANGES="202000:239644 430642:479284 674284:718926 917926:958568 1161568:1198210 1377210:1437852 1637852:1677494
1874494:1917136 2114136:2156778 2352778:2396420 2584420:2636062 2818062:2875704 3076704:3115346 3326346:3354976"
SETS=$(i=0; for r in $RANGES; do echo -n "dense_grid_extra:$r:$i "; i=$((i + 1)); done)
SETS="$SETS" P=14 SECONDS_FOR_SURVEY=${SECONDS_FOR_SURVEY:-240} bash lab/device_library/run_dense_survey.sh
