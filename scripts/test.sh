#!/usr/bin/env bash
# The whole suite in two lanes: two pytest processes on disjoint sets of test
# directories, side by side. Most tests wait on daemons, the Pulumi and
# OpenTofu CLIs or packets rather than compute, so two lanes on two cores take
# little more than the longer lane. Every test directory runs in exactly one
# lane: lane 1 is the tools' (Pulumi, OpenTofu, sites, provider, unit, bench),
# lane 2 everything else, found on disk, so a new directory is never left out.
#
# Each lane's output goes to its own log (shown when it ends, prefixed); the
# run fails if either lane fails, including a lane that collects no test
# (pytest's exit code 5). Extra arguments go to both pytest processes.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}

lane1=(tests/e2e tests/tofu tests/sites tests/provider tests/unit tests/bench)
lane2=()
for d in tests/*/; do
  d=${d%/}
  [ -n "$(find "$d" -name 'test_*.py' -print -quit)" ] || continue
  case " ${lane1[*]} " in *" $d "*) ;; *) lane2+=("$d") ;; esac
done
for d in "${lane1[@]}"; do
  [ -d "$d" ] || { echo "test.sh: $d is named in lane 1 but does not exist" >&2; exit 2; }
done

logs=$(mktemp -d)
progress=
trap 'touch "$logs/stop" 2>/dev/null; [ -n "$progress" ] && wait "$progress" 2>/dev/null; rm -rf "$logs"' EXIT
start=$(date +%s)
run_lane() {  # name, directories...
  local name=$1; shift
  "$PY" -m pytest -q -rfEs "$@" > "$logs/$name.log" 2>&1
  echo $? > "$logs/$name.rc"
}
echo "test.sh: lane 1: ${lane1[*]}" >&2
echo "test.sh: lane 2: ${lane2[*]}" >&2
run_lane lane1 "${lane1[@]}" "$@" &
pid1=$!
run_lane lane2 "${lane2[@]}" "$@" &
pid2=$!

# Progress while the lanes run: tests done so far per lane, every minute.
(
  last=$start
  while [ ! -e "$logs/stop" ]; do
    sleep 2
    [ $(( $(date +%s) - last )) -ge 60 ] || continue
    last=$(date +%s)
    line="test.sh: $(( last - start )) s:"
    for lane in lane1 lane2; do
      [ -e "$logs/$lane.rc" ] && { line+=" $lane done;"; continue; }
      marks=$(grep -v '^\[' "$logs/$lane.log" 2>/dev/null | grep -oE '^[.FEsx]+' | tr -d '\n')
      failed=$(printf '%s' "$marks" | tr -d '.sx' | wc -c)
      line+=" $lane ${#marks} tests ($failed failed);"
    done
    echo "$line" >&2
  done
) &
progress=$!

status=0
for lane in lane1 lane2; do
  if [ "$lane" = lane1 ]; then wait "$pid1"; else wait "$pid2"; fi
  rc=$(cat "$logs/$lane.rc")
  echo "== $lane (exit $rc, $(( $(date +%s) - start )) s since the start)"
  sed "s/^/[$lane] /" "$logs/$lane.log"
  echo
  [ "$rc" = 0 ] || status=1
done
touch "$logs/stop"; wait "$progress" 2>/dev/null
echo "test.sh: both lanes done in $(( $(date +%s) - start )) s; $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
