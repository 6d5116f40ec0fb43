#!/usr/bin/env bash
# Model-checks the fencing-token scheme (test/model/fencing.pml) with Spin:
# the scheme must hold in every state of each bounded configuration, and each
# negative variant must find its counter-example. Exhaustive search, one core,
# each run capped at MODEL_SECONDS (default 240). Prints one line per check,
# "<name> ok" or "<name> FAIL", then "N passed, N failed"; the exit status is
# non-zero when anything failed. Needs spin and a C compiler (scripts/setup.sh).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
model=$PWD/test/model/fencing.pml
seconds=${MODEL_SECONDS:-240}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0

# check NAME EXPECT DEFINES...: EXPECT is "holds" (no error, search complete)
# or "violated" (an assertion violation found).
check() {
  local name=$1 expect=$2 dir=$work/$1 status=0 result
  shift 2
  mkdir -p "$dir"
  cp "$model" "$dir/"
  if ! (cd "$dir" && spin -a "$@" fencing.pml >spin.log 2>&1 && cc -w -O2 -DSAFETY -DCOLLAPSE -o pan pan.c); then
    echo "$name FAIL (spin or cc failed)"
    cat "$dir/spin.log"
    failed=$((failed + 1))
    return
  fi
  (cd "$dir" && timeout "$seconds" ./pan -m100000 >pan.log 2>&1) || status=$?
  local errors states
  errors=$(awk '/errors:/ { print $NF }' "$dir/pan.log")
  states=$(awk '/states, stored/ { print $1 }' "$dir/pan.log")
  if [[ $expect == holds ]]; then
    if ((status == 0)) && [[ $errors == 0 ]] && ! grep -q "max search depth too small" "$dir/pan.log"; then
      result=ok
    else
      result=FAIL
    fi
  else
    if [[ -n $errors && $errors != 0 ]] && grep -q "assertion violated" "$dir/pan.log"; then
      result=ok
    else
      result=FAIL
    fi
  fi
  echo "$name $expect: ${states:-?} states, ${errors:-no result} errors (spin $*) $result"
  if [[ $result == ok ]]; then
    passed=$((passed + 1))
  else
    [[ $expect == violated ]] || grep -E "assertion violated|pan:|timeout" "$dir/pan.log" || true
    ((status != 124)) || echo "  (cut off after $seconds s)"
    failed=$((failed + 1))
  fi
}

if ! command -v spin >/dev/null; then
  echo "model-check: spin is not installed (scripts/setup.sh installs it)"
  echo "0 passed, 1 failed"
  exit 1
fi

echo "model-check summary"
check two-clients holds -DNC=2 -DATTEMPTS=1 -DFAULTS=1
check no-second-round violated -DONE_ROUND -DNO_RESTART -DNC=2 -DATTEMPTS=2 -DFAULTS=1
check no-clock-floor violated -DNO_FLOOR -DNC=2 -DATTEMPTS=1 -DFAULTS=1
check counter-forgets holds -DFORGET -DNC=2 -DATTEMPTS=1 -DFAULTS=1
check forgotten-counter-from-zero violated -DFORGET -DFORGET_TO_ZERO -DNO_RESTART -DNC=2 -DATTEMPTS=2 -DFAULTS=1
echo "$passed passed, $failed failed"
((failed == 0))
