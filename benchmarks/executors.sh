#!/bin/bash
# Issue 26 (BENCHMARKS.md "Campaign executors"): the same reproductions with --jobs 1, --jobs 2 and
# --executor ray, back to back, each in a fresh folder and SQLite store; wall and CPU time (/usr/bin/time),
# load average, the verdict lines; then every cell compared bit for bit with the --jobs 1 run.
#   bash benchmarks/executors.sh OUT_DIR [subsets|full]
set -u
OUT=$(realpath -m "${1:?output folder}"); WHICH=${2:-subsets}
BIN=${BIN:-$(dirname "$(command -v distrepro)")}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ "$WHICH" = subsets ]; then
  CHAO="--arms equal-1to2,adaptive-1to2,equal-1124,adaptive-1124 --seeds 0,1"
  ACID="--arms g16-base-r1,g16-base-r2,g16-acid-r1,idle-ar,idle-acid --seeds 0,1 --set torch_threads=1"
else  # full chao; acid's gossip and idle arms, seeds 0,1
  CHAO=""
  ACID="--arms g8-base-r1,g8-base-r2,g8-acid-r1,g16-base-r1,g16-base-r2,g16-acid-r1,g32-base-r1,g32-base-r2"
  ACID="$ACID,g32-acid-r1,g64-base-r1,g64-base-r2,g64-acid-r1,idle-ar,idle-acid --seeds 0,1 --set torch_threads=1"
fi
mkdir -p "$OUT"
for paper in chao acid; do
  if [ $paper = chao ]; then SEL=$CHAO; else SEL=$ACID; fi
  for variant in jobs1 jobs2 ray; do
    case $variant in jobs1) EX="--jobs 1";; jobs2) EX="--jobs 2";; ray) EX="--executor ray";; esac
    d=$OUT/$paper-$variant; rm -rf "$d"; mkdir -p "$d"; cd "$d" || exit 1
    echo "== $paper $variant start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log.txt"
    # shellcheck disable=SC2086
    MLFLOW_TRACKING_URI=sqlite:///$d/mlflow.db /usr/bin/time -f "TIME wall %e user %U sys %S" \
      "$BIN/distrepro" reproduce $paper $SEL $EX --no-progress > stdout.txt 2> stderr.txt
    echo "rc $? $(grep TIME stderr.txt) end load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log.txt"
    grep -A200 "^verdicts" stdout.txt | grep -v "^report\|^        " > verdicts.txt
  done
  for variant in jobs2 ray; do
    cmp -s "$OUT/$paper-jobs1/verdicts.txt" "$OUT/$paper-$variant/verdicts.txt" && same=same || same=DIFFERENT
    echo "$paper $variant: verdicts $same; cells: $("$BIN/python" "$HERE/executor_equality.py" \
      "sqlite:///$OUT/$paper-jobs1/mlflow.db" "sqlite:///$OUT/$paper-$variant/mlflow.db" 2>/dev/null)" \
      | tee -a "$OUT/log.txt"
  done
done
