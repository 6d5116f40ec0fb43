#!/usr/bin/env bash
# Contended locking (issue 8): redlock's lock(wait), the floor (raw commands,
# bench/contended_floor.hpp), redlock polling with try_lock, node-redlock
# with its defaults and with retryDelay 10 ms, all on
# the same 5 local masters; 1 (the serial bound), 2 and 8 processes; N = 1, 3, 5;
# repetitions interleaved. Writes bench/results/contended-DATE.jsonl (every
# run, then the medians and the targets) and bench/results/handoff.png.
#
#   scripts/bench-contended.sh
#
# Environment (all optional):
#   BUILD_DIR          build folder (default build)
#   OUT                JSONL written here (default bench/results/contended-DATE.jsonl)
#   PLOT               PNG written here (default bench/results/handoff.png)
#   REPS               repetitions (default 3)
#   NS                 numbers of masters (default "1 3 5")
#   KS                 numbers of processes (default "1,2,8"; 1 is the serial bound)
#   IMPLS              default "redlock floor redlock-polling node-redlock node-redlock-10ms"
#   DURATION_MS        each contended run (default 10000); SERIAL_MS the serial bound (10000: its rate is the denominator of the targets, so as long)
#   QUIET_WAIT         seconds to wait for a quiet machine before each run (default 3600)
#   REDLOCK_PEERS_DIR  where node-redlock is installed (default /tmp/redlock-peers)
#   BASE_PORT          first master port (default: a free run of ports in 20000-32709,
#                      below the ephemeral ports clients get)
#   RESUME             a JSONL of an interrupted run: its (impl, N, K, rep) lines are kept
#                      and those runs not made again
#
# Measures only on a quiet machine: before every run it waits until no build or
# test suite runs (pgrep -f 'scripts/test.sh|ninja|meson test'), and gives up
# after QUIET_WAIT seconds rather than measure under load; a run during which
# one started, or in which other processes used more than FOREIGN_MAX (default
# 0.03) of the machine's CPU time, is dropped and made again (RETRIES, default 5).
# Each line also says how much the hypervisor stole (steal_cpu): this machine
# is a VM, and its neighbours' load is seen only there.
# Masters are pinned to CPU 1, every worker to CPU 0. Every master started here
# is stopped by pid on exit; bench_contended stops its workers by pid.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"

build_dir=${BUILD_DIR:-build}
day=$(date +%F)
out=${OUT:-bench/results/contended-$day.jsonl}
plot=${PLOT:-bench/results/handoff.png}
reps=${REPS:-3}
ns=${NS:-1 3 5}
ks=${KS:-1,2,8}
impls=${IMPLS:-redlock floor redlock-polling node-redlock node-redlock-10ms}
duration_ms=${DURATION_MS:-10000}
serial_ms=${SERIAL_MS:-10000}
quiet_wait=${QUIET_WAIT:-3600}
peers_dir=${REDLOCK_PEERS_DIR:-/tmp/redlock-peers}
n_masters=$(tr ' ' '\n' <<<"$ns" | sort -n | tail -1)
bench=$build_dir/bench/bench_contended

note() { echo "bench-contended: $*" >&2; }
die() {
  note "$*"
  exit 1
}

# ---- tools -----------------------------------------------------------------
apt_updated=0
apt_install() {
  if ((apt_updated == 0)); then
    apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
command -v redis-server >/dev/null 2>&1 || die "redis-server is missing (scripts/setup.sh)"
command -v taskset >/dev/null 2>&1 || die "taskset is missing (apt-get install util-linux)"
command -v python3 >/dev/null 2>&1 || apt_install python3
command -v gnuplot >/dev/null 2>&1 || apt_install gnuplot-nox
if grep -q node <<<"$impls"; then
  # node-redlock and ioredis, installed outside the repository.
  REDLOCK_PEERS_DIR=$peers_dir bash scripts/bench-peers.sh --install-only
fi
ninja -C "$build_dir" -j"${JOBS:-1}" bench/bench_contended >&2

# ---- quiet machine -----------------------------------------------------------
busy() { pgrep -f 'scripts/test.sh|ninja|meson test' >/dev/null; }
wait_quiet() {
  local waited=0
  while busy; do
    ((waited == 0)) && note "machine busy ($(pgrep -fa 'scripts/test.sh|ninja|meson test' | head -3 | tr '\n' ';')); waiting"
    ((waited >= quiet_wait)) && die "still busy after ${quiet_wait} s; not measuring under load"
    sleep 10 &
    wait $! || true
    waited=$((waited + 10))
  done
  # Quiet for a few more seconds (a suite between two of its steps).
  sleep 3 &
  wait $! || true
  busy && wait_quiet
  ((waited == 0)) || note "quiet after ${waited} s"
  return 0
}

# ---- masters ---------------------------------------------------------------
export REDLOCK_MASTERS_DIR
REDLOCK_MASTERS_DIR=$(mktemp -d /tmp/redlock-bench-contended-masters.XXXXXX)
tmp_out=$(mktemp /tmp/redlock-bench-contended-out.XXXXXX)
child=

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [[ -n $child ]]; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  if [[ -d $REDLOCK_MASTERS_DIR ]]; then
    "$repo/scripts/masters.sh" stop >/dev/null 2>&1 || note "masters.sh stop failed; see $REDLOCK_MASTERS_DIR"
    local f pid
    for f in "$REDLOCK_MASTERS_DIR"/*/pid; do
      [[ -f $f ]] || continue
      pid=$(<"$f")
      if [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$(dirname "$f")" ]]; then
        kill -9 "$pid" 2>/dev/null || true
      fi
    done
    rm -rf "$REDLOCK_MASTERS_DIR"
  fi
  rm -f "$tmp_out" "$tmp_out.run"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_base_port() {
  local base i ok
  for _ in $(seq 1 50); do
    base=$((20000 + (RANDOM % 1270) * 10))  # below the ephemeral ports (32768-)
    ok=1
    for ((i = 0; i < n_masters; i++)); do
      port_free $((base + i)) || ok=0
    done
    if ((ok)); then
      echo "$base"
      return 0
    fi
  done
  return 1
}
base_port=${BASE_PORT:-$(pick_base_port)} || die "no free run of $n_masters ports found"
"$repo/scripts/masters.sh" start "$n_masters" "$base_port" >&2
ports=$(seq -s, "$base_port" $((base_port + n_masters - 1)))
if (($(nproc) >= 2)); then
  for ((i = 1; i <= n_masters; i++)); do
    taskset -a -cp 1 "$(<"$REDLOCK_MASTERS_DIR/$i/pid")" >/dev/null
  done
  note "masters on CPU 1 (ports $ports), workers on CPU 0"
fi

# ---- runs ------------------------------------------------------------------
# Runs one bench_contended call on a quiet machine. A build or test suite that
# starts during the call (sampled every second) spoils it: its lines are
# dropped and the call is made again, at most RETRIES times.
retries=${RETRIES:-5}
foreign_max=${FOREIGN_MAX:-0.03}
run_one() {
  local label=$1 status attempt disturbed
  shift
  for ((attempt = 1; ; attempt++)); do
    wait_quiet
    note "run: $label"
    status=0
    disturbed=0
      # One run: DURATION_MS (or SERIAL_MS) plus start-up and the workers' exit.
    timeout -k 5 $((duration_ms / 1000 + 90)) "$@" >"$tmp_out.run" &
    child=$!
    while kill -0 "$child" 2>/dev/null; do
      busy && disturbed=1
      sleep 1 &
      wait $! || true
    done
    wait "$child" || status=$?
    child=
    ((status == 0)) || die "$label exited with status $status"
    # Other processes' CPU time during the run (bench_contended measures it).
    if python3 -c 'import json, sys
sys.exit(any(json.loads(l).get("foreign_cpu", 0) > float(sys.argv[2]) for l in open(sys.argv[1]) if l.startswith("{")))' \
      "$tmp_out.run" "$foreign_max"; then
      :
    else
      note "other processes used more than $foreign_max of the CPU time during $label"
      disturbed=1
    fi
    if ((disturbed == 0)); then
      grep '^{' "$tmp_out.run" >>"$tmp_out" || true
      rm -f "$tmp_out.run"
      return 0
    fi
    rm -f "$tmp_out.run"
    note "a build or test suite ran during $label; its figures are dropped"
    ((attempt < retries)) || die "$label disturbed $retries times; not measuring under load"
  done
}

resume=${RESUME:-}
done_before() { # impl n k rep: that run is in RESUME already
  [[ -n $resume ]] && grep -q "\"impl\":\"$1\",\"masters\":$2,\"processes\":$3,\"rep\":$4," "$resume"
}
if [[ -n $resume ]]; then
  grep '^{' "$resume" | grep -v '"rep":"median"' | grep -v '"bench":"targets"' >>"$tmp_out" || true
fi

# One call per run (short calls: a build that starts meanwhile spoils less).
started=$SECONDS
for ((rep = 1; rep <= reps; rep++)); do
  for n in $ns; do
    for impl in $impls; do
      for k in ${ks//,/ }; do
        if done_before "$impl" "$n" "$k" "$rep"; then
          continue
        fi
        run_one "$impl N=$n K=$k, repetition $rep/$reps" \
          "$bench" --ports "$ports" --masters "$n" --processes "$k" --impls "$impl" \
          --duration-ms "$duration_ms" --serial-duration-ms "$serial_ms" --rep "$rep" --node-modules "$peers_dir"
      done
    done
  done
done
note "runs took $((SECONDS - started)) s"

mkdir -p "$(dirname "$out")"
cp "$tmp_out" "$out"
python3 bench/contended_report.py "$out" --append
python3 bench/plot_handoff.py "$out" "$plot"
note "wrote $out and $plot"
