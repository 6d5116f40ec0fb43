#!/usr/bin/env bash
# Builds and runs the tests in BUILD_DIR (default "build"), again in an
# AddressSanitizer + UBSan build (ASAN_BUILD_DIR, default "build-asan"), and
# the blocking facade and client tests in a ThreadSanitizer build
# (TSAN_BUILD_DIR, default "build-tsan"; skipped when arguments pick tests),
# and the options tests in a build without OpenSSL (NOTLS_BUILD_DIR, default
# "build-notls", -Dtls=disabled; skipped likewise).
# Arguments go to `meson test` (e.g. a suite: scripts/test.sh unit); without
# them it also runs the chaos checker and the fencing model check
# (scripts/model-check.sh, a few minutes on one core).
# REDLOCK_TEST_TIMEOUT_MULTIPLIER reaches the tests and also scales meson's
# per-test timeouts; unset, it is 1 for the plain build, 2 under ASan and 4
# under TSan (their slowdown, which a busy machine makes worse). With no
# arguments it also runs the chaos checker (also against docker-compose.yml's
# containers when Docker can run), the consumer checks
# (scripts/consumers.sh), the API reference (scripts/docs.sh) and the C++
# snippets of the docs (scripts/check-snippets.sh). The last
# line is "N passed, N failed", after a list of what failed; the exit status
# is non-zero when anything failed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export BUILD_DIR=${BUILD_DIR:-build}
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
TSAN_BUILD_DIR=${TSAN_BUILD_DIR:-build-tsan}
NOTLS_BUILD_DIR=${NOTLS_BUILD_DIR:-build-notls}

meson_test_args=(--print-errorlogs --no-rebuild)
if [[ -n ${REDLOCK_TEST_TIMEOUT_MULTIPLIER:-} ]]; then
  export REDLOCK_TEST_TIMEOUT_MULTIPLIER
  meson_test_args+=(--timeout-multiplier "$REDLOCK_TEST_TIMEOUT_MULTIPLIER")
fi

# Tests stop their own servers (and the servers die with the test process). As
# a safety net, kill redis-servers that appeared during this run and run in a
# test server directory (redis-server chdirs to its --dir, redlock-test-*).
redis_pids() { pgrep -x redis-server | sort || true; }
pids_before=$(redis_pids)
check_leftover_servers() {
  local pid cwd
  for pid in $(comm -13 <(echo "$pids_before") <(redis_pids)); do
    cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null || true)
    if [[ $(basename "$cwd") == redlock-test-* ]]; then
      echo "test.sh: warning: a test left redis-server $pid running (in $cwd); killing it" >&2
      kill -9 "$pid" 2>/dev/null || true
    else
      echo "test.sh: note: redis-server $pid started during the run, not by a test; left alone" >&2
    fi
  done
}
trap check_leftover_servers EXIT

total_passed=0
total_failed=0
failures=()  # "suite: what failed", recalled just before the last line

# run_suite NAME DIR [MESON TEST ARGS...]: builds DIR (only NINJA_TARGETS when
# set) and runs meson test there (the script's own arguments when none are
# given); adds to the totals.
run_suite() {
  local name=$1 dir=$2 log status=0
  shift 2
  local args=("$@")
  ((${#args[@]} > 0)) || args=("${test_args[@]}")
  log=$(mktemp)
  local started=$SECONDS
  echo "=== $name: building $dir"
  # shellcheck disable=SC2086 # NINJA_TARGETS is a list of words
  if ! ninja -C "$dir" -j2 ${NINJA_TARGETS:-}; then
    echo "=== $name: build failed"
    failures+=("$name: the build of $dir")
    total_failed=$((total_failed + 1))
    rm -f "$log"
    return
  fi
  echo "=== $name: built in $((SECONDS - started)) s; meson test"
  meson test -C "$dir" "${meson_test_args[@]}" "${args[@]}" 2>&1 | tee "$log" || status=$?

  # The summary ends meson's output; take the last value of each label.
  local counts ok expected_fail fail unexpected_pass skipped timeout
  counts=$(awk '
    /^Ok:/ { ok = $2 } /^Expected Fail:/ { xf = $3 } /^Fail:/ { f = $2 }
    /^Unexpected Pass:/ { up = $3 } /^Skipped:/ { sk = $2 } /^Timeout:/ { to = $2 }
    END { if (ok == "") print "none"; else print ok+0, xf+0, f+0, up+0, sk+0, to+0 }' "$log")
  # meson's result lines: " 7/32 redlock:redis / keep   FAIL   16.43s   exit status 1"
  local line
  while IFS= read -r line; do
    failures+=("$name: $line")
  done < <(grep -E '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS) ' "$log" | sed -E 's/^ +//; s/ +/ /g' || true)
  rm -f "$log"
  if [[ $counts == none ]]; then
    if ((status != 0)); then
      echo "=== $name: meson test failed (status $status) without a summary"
      failures+=("$name: meson test failed without a summary")
      total_failed=$((total_failed + 1))
    else
      echo "=== $name: no tests ran"
    fi
    return
  fi
  read -r ok expected_fail fail unexpected_pass skipped timeout <<<"$counts"
  local passed=$((ok + expected_fail)) failed=$((fail + unexpected_pass + timeout))
  if ((failed == 0 && status != 0)); then
    failed=1  # meson failed for a reason its counts do not show
    failures+=("$name: meson test exited $status")
  fi
  echo "=== $name: $passed passed, $failed failed, $skipped skipped ($((SECONDS - started)) s with the build)"
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
}

test_args=("$@")

if bash scripts/setup.sh; then
  run_suite plain "$BUILD_DIR"

  if [[ -f $ASAN_BUILD_DIR/build.ninja ]] ||
    meson setup "$ASAN_BUILD_DIR" -Db_sanitize=address,undefined -Db_lundef=false; then
    REDLOCK_TEST_TIMEOUT_MULTIPLIER=${REDLOCK_TEST_TIMEOUT_MULTIPLIER:-2} ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      run_suite sanitizers "$ASAN_BUILD_DIR"
  else
    echo "=== sanitizers: meson setup $ASAN_BUILD_DIR failed"
    failures+=("sanitizers: meson setup $ASAN_BUILD_DIR")
    total_failed=$((total_failed + 1))
  fi

  # The multi-threaded parts (blocking facade, fault proxy): ThreadSanitizer,
  # which builds only these tests.
  tsan_tests=(blocking mutex cancel guard client proxy stats wait shared election)
  if ((${#test_args[@]} == 0)); then
    if [[ -f $TSAN_BUILD_DIR/build.ninja ]] ||
      meson setup "$TSAN_BUILD_DIR" -Db_sanitize=thread -Db_lundef=false -Dexamples=disabled -Dbench=disabled; then
      REDLOCK_TEST_TIMEOUT_MULTIPLIER=${REDLOCK_TEST_TIMEOUT_MULTIPLIER:-4} TSAN_OPTIONS=halt_on_error=1 \
        NINJA_TARGETS="${tsan_tests[*]/#/test/test_}" run_suite threads "$TSAN_BUILD_DIR" "${tsan_tests[@]}"
    else
      echo "=== threads: meson setup $TSAN_BUILD_DIR failed"
      failures+=("threads: meson setup $TSAN_BUILD_DIR")
      total_failed=$((total_failed + 1))
    fi
  fi

  # Without OpenSSL (-Dtls=disabled): the library builds, and rediss:// is
  # refused at construction (test_options), the CLI parses as before.
  if ((${#test_args[@]} == 0)); then
    if [[ -f $NOTLS_BUILD_DIR/build.ninja ]] ||
      meson setup "$NOTLS_BUILD_DIR" -Dtls=disabled -Dexamples=disabled -Dbench=disabled; then
      NINJA_TARGETS="test/test_options test/test_cli_args" run_suite no-tls "$NOTLS_BUILD_DIR" options cli_args
    else
      echo "=== no-tls: meson setup $NOTLS_BUILD_DIR failed"
      failures+=("no-tls: meson setup $NOTLS_BUILD_DIR")
      total_failed=$((total_failed + 1))
    fi
  fi
else
  echo "=== setup.sh failed"
  failures+=("setup.sh")
  total_failed=$((total_failed + 1))
fi

# run_chaos NAME CHAOS.SH ARGS...: runs scripts/chaos.sh; each run in its
# summary table counts as a test.
run_chaos() {
  local name=$1 chaos_log status=0 chaos_ok chaos_failed started=$SECONDS
  shift
  echo "=== $name: scripts/chaos.sh $*"
  chaos_log=$(mktemp)
  bash scripts/chaos.sh "$@" --build-dir "$BUILD_DIR" 2>&1 | tee "$chaos_log" || status=$?
  chaos_ok=$(awk '/^redlock-chaos summary/ { table = 1; next } table && $NF == "ok" { n++ } END { print n + 0 }' "$chaos_log")
  chaos_failed=$(awk '/^redlock-chaos summary/ { table = 1; next } table && $NF == "FAIL" { n++ } END { print n + 0 }' "$chaos_log")
  if ((status != 0 && chaos_failed == 0)); then
    chaos_failed=1  # chaos.sh failed before its table
  fi
  ((chaos_failed == 0)) || failures+=("$name: $chaos_failed of its runs (the table above)")
  rm -f "$chaos_log"
  echo "=== $name: $chaos_ok passed, $chaos_failed failed ($((SECONDS - started)) s)"
  total_passed=$((total_passed + chaos_ok))
  total_failed=$((total_failed + chaos_failed))
}

# The mutual-exclusion checker: every fault mode briefly, plus the negative
# control that must find overlaps (scripts/chaos.sh); each run counts as a test.
if ((${#test_args[@]} == 0)) && [[ -x $BUILD_DIR/test/chaos/redlock-chaos ]]; then
  run_chaos chaos --seconds "${CHAOS_SECONDS:-8}"

  # The same against docker-compose.yml's containers, briefly, when Docker can
  # run here (scripts/compose.sh starts dockerd, asked to by --start-dockerd,
  # and builds a local image if it must); said and skipped when it cannot.
  echo "=== compose: scripts/compose.sh up --start-dockerd"
  status=0
  bash scripts/compose.sh up --start-dockerd || status=$?
  if ((status == 3)); then
    echo "=== compose: SKIPPED (the reason is above)"
  elif ((status != 0)); then
    echo "=== compose: scripts/compose.sh up failed"
    failures+=("compose: scripts/compose.sh up")
    total_failed=$((total_failed + 1))
  else
    run_chaos compose --compose --seconds "${COMPOSE_SECONDS:-15}" --only none,kill,stop
  fi
  bash scripts/compose.sh down || true
fi

# The library as a user takes it: installed and found with pkg-config and
# CMake, and as a Meson subproject (scripts/consumers.sh); each check counts.
if ((${#test_args[@]} == 0)); then
  echo "=== consumers: scripts/consumers.sh"
  started=$SECONDS
  consumers_log=$(mktemp)
  status=0
  BUILD_DIR=$BUILD_DIR bash scripts/consumers.sh 2>&1 | tee "$consumers_log" || status=$?
  consumers_ok=$(grep -c '^consumer .*: ok$' "$consumers_log" || true)
  consumers_failed=$(grep -c '^consumer .*: FAIL' "$consumers_log" || true)
  if ((status != 0 && consumers_failed == 0)); then
    consumers_failed=1  # consumers.sh failed before its checks
  fi
  ((consumers_failed == 0)) || failures+=("consumers: $consumers_failed (the lines marked FAIL above)")
  rm -f "$consumers_log"
  echo "=== consumers: $consumers_ok passed, $consumers_failed failed ($((SECONDS - started)) s)"
  total_passed=$((total_passed + consumers_ok))
  total_failed=$((total_failed + consumers_failed))

  # The Debian packages: built with dpkg-buildpackage and lintian-clean
  # (scripts/deb.sh), then installed, used as a user would and purged
  # (scripts/deb-test.sh); one test each.
  for step in deb deb-test; do
    echo "=== $step: scripts/$step.sh"
    started=$SECONDS
    if DEB_DIR=$(pwd)/debs bash "scripts/$step.sh"; then
      echo "=== $step: passed ($((SECONDS - started)) s)"
      total_passed=$((total_passed + 1))
    else
      failures+=("$step: scripts/$step.sh")
      total_failed=$((total_failed + 1))
    fi
  done

  # Every relative link and anchor in README.md and docs/*.md resolves.
  echo "=== links: scripts/check-links.sh"
  if bash scripts/check-links.sh; then
    total_passed=$((total_passed + 1))
  else
    failures+=("links: scripts/check-links.sh")
    total_failed=$((total_failed + 1))
  fi

  # Every C++ snippet in README.md and docs/*.md compiles under -Wall -Wextra
  # -Wshadow -Werror, and the check reports the broken snippets it is fed.
  echo "=== snippets: scripts/check-snippets.sh"
  if BUILD_DIR=$BUILD_DIR bash scripts/check-snippets.sh &&
    BUILD_DIR=$BUILD_DIR bash scripts/check-snippets.sh --self-test; then
    total_passed=$((total_passed + 1))
  else
    failures+=("snippets: scripts/check-snippets.sh")
    total_failed=$((total_failed + 1))
  fi

  # The API reference builds without a Doxygen warning.
  echo "=== docs: scripts/docs.sh"
  if BUILD_DIR=$BUILD_DIR bash scripts/docs.sh; then
    total_passed=$((total_passed + 1))
  else
    failures+=("docs: scripts/docs.sh")
    total_failed=$((total_failed + 1))
  fi
fi

# The fencing-token model (scripts/model-check.sh): the scheme holds and each
# negative variant finds its counter-example; each check counts as a test.
if ((${#test_args[@]} == 0)); then
  echo "=== model: scripts/model-check.sh"
  model_log=$(mktemp)
  status=0
  bash scripts/model-check.sh 2>&1 | tee "$model_log" || status=$?
  model_ok=$(awk '/^model-check summary/ { table = 1; next } table && $NF == "ok" { n++ } END { print n + 0 }' "$model_log")
  model_failed=$(awk '/^model-check summary/ { table = 1; next } table && $NF == "FAIL" { n++ } END { print n + 0 }' "$model_log")
  if ((status != 0 && model_failed == 0)); then
    model_failed=1  # model-check.sh failed before its table
  fi
  ((model_failed == 0)) || failures+=("model: $model_failed of its checks")
  rm -f "$model_log"
  echo "=== model: $model_ok passed, $model_failed failed"
  total_passed=$((total_passed + model_ok))
  total_failed=$((total_failed + model_failed))
fi

# Done here rather than only in the trap so that the summary stays the last line.
check_leftover_servers
trap - EXIT
if ((${#failures[@]} > 0)); then
  echo "=== what failed:"
  printf '  %s\n' "${failures[@]}"
fi
echo "=== the whole run took $((SECONDS / 60)) min $((SECONDS % 60)) s"
echo "$total_passed passed, $total_failed failed"
((total_failed == 0))
