#!/usr/bin/env bash
# Runs the mutual-exclusion checker (redlock-chaos) once per fault mode, then
# the negative control, and prints a summary table.
#
#   scripts/chaos.sh [--seconds S] [--only NAMES] [--build-dir DIR] [--compose | --masters-sh] [-- ARGS...]
#
#   --seconds S     how long each mode runs (default 10; 60 with --compose)
#   --only NAMES    comma-separated run names from the table (e.g. stop,negative-control)
#   --build-dir DIR where redlock-chaos was built (default build; the binary is
#                   DIR/test/chaos/redlock-chaos, or $REDLOCK_CHAOS if set)
#   --compose       drive the same schedule against the docker compose services
#                   master1..master5 of docker-compose.yml (127.0.0.1:7001-7005,
#                   or from $REDLOCK_BASE_PORT on, as for scripts/compose.sh):
#                   docker compose (or docker-compose) kill/pause/unpause/start.
#                   Start them first: scripts/compose.sh up (it builds a local
#                   redis image when it has to).
#                   Docker is slow to kill and start containers, so the TTL is
#                   5 s and the quarantine 6 s there.
#   --masters-sh    the same, against local masters started with scripts/masters.sh
#                   (ports 7401-7405, state in /tmp/redlock-chaos-masters); TTL 2 s,
#                   quarantine 2.5 s, 20 s per mode
#   -- ARGS...      passed to every redlock-chaos run (e.g. --processes 4)
#
# Modes: none, stop, kill, restart (with the quarantine), latency, blackhole,
# reply-drop, mixed (with the quarantine, so that it restarts masters too),
# kill and mixed again with long holds kept alive by renewals (--holds kept),
# clock (masters' clocks jumped within the drift allowance), clock-large (a
# majority's clocks jumped by 1-4 TTLs: overlaps are Redlock's stated limit
# there, and the fenced register must refuse every stale write), pause-client
# (a worker SIGSTOPped past its validity), partition (some workers cut from a
# minority, then a majority, of masters, or delayed past the command timeout,
# through proxies of their own). Every holder writes its fencing
# token to a register that refuses a lower one; the checker replays it.
# Negative controls, each of which must find a violation: negative-control
# (restart without the quarantine: overlaps), control-clock-unfenced and
# control-pause-unfenced (the same faults with a register that ignores tokens:
# stale writes accepted). The exit status is non-zero if any run found a
# violation or failed, or if a control found none. Each run's output is kept
# in $CHAOS_LOG_DIR (default: a new directory under /tmp).
#
# cancel: the mixed faults while waits are cancelled at random (each worker
# cancels one of its threads' waits every 0.25-1 ttl): a cancelled attempt
# that won must have been released, or a second holder would overlap.
# permit: 24 workers share one semaphore of 3 permits (lock_permit) under the
# mixed faults: never more than 3 holders, never two of one permit; and its
# control, control-permit-counter: the same semaphore as a counter per master,
# which must be caught over-admitting.
#
# shared: two acquisitions in three are shared (lock_shared), the others
# exclusive, under the mixed faults: no exclusive holder beside anyone; and its
# control, control-shared-apart: readers lock another name, so the checker
# must see writers beside them.
#
# liveness: waits cancelled at random with no faults, failing on a stall (a
# resource free of recorded holders for over ttl/2 while a call waited: a
# lock nobody knows they hold, as a cancel that won and did not release
# would leave); every run reports its stalls. Its control, control-stranded:
# one acquisition in four is left held and recorded as canceled.
# liveness-slow-retry: the same check with a 1 s retry_delay, so a waiter
# that relies on its timer stalls: releases must wake waiters (an unlock
# publishes only where a listener marked the key). Its control,
# control-markers-lost: each worker deletes the markers as they are written,
# and the checker must see stalls. liveness-all: the same for lock_all, whose
# call stalls only where all its resources were free together (one of two
# free while the other is held is no stall: it can take neither); its
# control, control-all-stranded, strands one acquisition in four.
# all: half the acquisitions take two of 3 resources at once (lock_all, named
# in a random order), the others one, under the mixed faults; checked per
# resource. Its control, control-all-first-only, takes only the first of the
# two: the checker must see it beside holders of the second.
#
# election: candidates in every worker campaign (Leadership) for 2 elections
# and lead for 0.5-4 ttls under the mixed faults, checked as the lock is
# (one leader at a time within its validity, terms growing, the fenced
# register); its control, control-election-late: a leader acts
# on for a ttl after resigning, beside the next one. Every worker also
# observes each election (Leadership::observe); the checker: no observer
# reports a lower term after a higher, and none still reports a leader a ttl
# and a round trip after its tenure ended (resigned, or its validity ran out)
# while a majority was healthy. Their controls: control-observer-order
# records every third report with term 1; control-observer-late records
# nothing after an observer's first leader.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
root=$(cd "$here/.." && pwd -P)
self="$here/$(basename "${BASH_SOURCE[0]}")"
masters_sh_base_port=7401
compose_base_port=${REDLOCK_BASE_PORT:-7001}
masters_sh_dir=/tmp/redlock-chaos-masters
ping_timeout_seconds=30

die() {
  echo "chaos.sh: $*" >&2
  exit 2
}

usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2
  exit 2
}

# PING through bash's /dev/tcp, so that no redis-cli is needed on the host.
answers_ping() {
  local port=$1 reply=""
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'PING\r\n' >&3
  IFS= read -r -t 1 reply <&3 || true
  exec 3<&- 3>&-
  [[ $reply == "+PONG"* ]]
}

wait_ping() {
  local base=$1 n port deadline
  shift
  for n in "$@"; do
    port=$((base + n - 1))
    deadline=$((SECONDS + ping_timeout_seconds))
    until answers_ping "$port" 2>/dev/null; do
      ((SECONDS < deadline)) || die "master $n (127.0.0.1:$port) does not answer PING"
      sleep 0.05
    done
  done
}

# --- fault commands (see CHAOS_FAULT_BACKEND below) ---

# docker compose or docker-compose 1.29, whichever is installed (compose.sh picks).
compose() { "$here/compose.sh" compose "$@"; }

fault_compose() {
  local action=$1 n services=()
  shift
  for n in "$@"; do services+=("master$n"); done
  case $action in
    pause) compose pause "${services[@]}" ;;
    resume) compose unpause "${services[@]}" ;;
    kill) compose kill -s SIGKILL "${services[@]}" ;;
    # The container's redis-server starts afresh; with persistence off it is empty.
    start)
      compose start "${services[@]}"
      wait_ping "$compose_base_port" "$@"
      ;;
    restart)
      compose kill -s SIGKILL "${services[@]}"
      compose start "${services[@]}"
      wait_ping "$compose_base_port" "$@"
      ;;
    *) die "unknown fault action: $action" ;;
  esac >/dev/null
}

fault_masters_sh() {
  local action=$1
  shift
  export REDLOCK_MASTERS_DIR=$masters_sh_dir
  case $action in
    pause) "$here/masters.sh" pause "$@" ;;
    resume) "$here/masters.sh" resume "$@" ;;
    kill) "$here/masters.sh" kill "$@" ;;
    start | restart)
      # masters.sh restart kills each one first (a no-op when already killed),
      # starts it empty and waits for PONG; kill them all first for one burst.
      [[ $action == restart ]] && "$here/masters.sh" kill "$@"
      "$here/masters.sh" restart "$@"
      ;;
    *) die "unknown fault action: $action" ;;
  esac >/dev/null
}

# redlock-chaos runs the --fault-command as `chaos.sh ACTION N...`; the
# environment says which backend the run is using.
if [[ -n ${CHAOS_FAULT_BACKEND:-} && ${1:-} =~ ^(pause|resume|kill|start|restart)$ ]]; then
  case $CHAOS_FAULT_BACKEND in
    compose) fault_compose "$@" ;;
    masters-sh) fault_masters_sh "$@" ;;
    *) die "unknown CHAOS_FAULT_BACKEND: $CHAOS_FAULT_BACKEND" ;;
  esac
  exit 0
fi

# --- the runs ---

seconds=""
only=""
build_dir=build
backend=local
extra=()
while (($# > 0)); do
  case $1 in
    --seconds)
      [[ ${2:-} =~ ^[0-9]+$ ]] || die "--seconds wants a number"
      seconds=$2
      shift 2
      ;;
    --only)
      [[ -n ${2:-} ]] || die "--only wants run names"
      only=",$2,"
      shift 2
      ;;
    --build-dir)
      [[ -n ${2:-} ]] || die "--build-dir wants a directory"
      build_dir=$2
      shift 2
      ;;
    --compose)
      backend=compose
      shift
      ;;
    --masters-sh)
      backend=masters-sh
      shift
      ;;
    --)
      shift
      extra=("$@")
      break
      ;;
    -h | --help) usage ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

chaos=${REDLOCK_CHAOS:-}
if [[ -z $chaos ]]; then
  [[ $build_dir == /* ]] || build_dir="$root/$build_dir"
  chaos="$build_dir/test/chaos/redlock-chaos"
fi
[[ -x $chaos ]] || die "no redlock-chaos at $chaos (ninja -C build test/chaos/redlock-chaos)"

# Timing: docker kills and starts containers in about a second, so the TTL has
# to be long enough that a lock is still held when a restarted majority is back.
ttl=400
quarantine=500
backend_args=()
case $backend in
  local) ;;
  compose)
    command -v docker >/dev/null || die "--compose needs docker"
    compose ps --services --filter status=running 2>/dev/null | grep -qx master5 ||
      die "the compose masters are not running: scripts/compose.sh up"
    wait_ping "$compose_base_port" 1 2 3 4 5
    ttl=5000
    quarantine=6000
    seconds=${seconds:-60}
    backend_args=(--external-ports "$(seq -s, "$compose_base_port" $((compose_base_port + 4)))" --fault-command "$self"
      --retry-delay-ms 500)
    ;;
  masters-sh)
    REDLOCK_MASTERS_DIR=$masters_sh_dir "$here/masters.sh" start 5 "$masters_sh_base_port" >/dev/null
    trap 'REDLOCK_MASTERS_DIR=$masters_sh_dir "$here/masters.sh" stop >/dev/null' EXIT
    # masters.sh takes ~0.1 s per master to kill and start again (it polls
    # with redis-cli), so a burst of three takes ~0.3 s: the TTL must leave the
    # holder inside its lock for longer than that.
    ttl=2000
    quarantine=2500
    seconds=${seconds:-20}
    backend_args=(--external-ports "$(seq -s, "$masters_sh_base_port" $((masters_sh_base_port + 4)))"
      --fault-command "$self" --retry-delay-ms 200)
    ;;
esac
seconds=${seconds:-10}
[[ $backend == local ]] || export CHAOS_FAULT_BACKEND=$backend

log_dir=${CHAOS_LOG_DIR:-$(mktemp -d /tmp/redlock-chaos-logs-XXXXXX)}
mkdir -p "$log_dir"

# name | arguments (the negative control passes only if it finds overlaps)
runs=(
  "none|--mode none"
  "stop|--mode stop"
  "kill|--mode kill"
  "restart+quarantine|--mode restart --quarantine-ms $quarantine"
  "latency|--mode latency"
  "blackhole|--mode blackhole"
  "reply-drop|--mode reply-drop"
  "mixed+quarantine|--mode mixed --quarantine-ms $quarantine"
  "keep+kill|--mode kill --holds kept"
  "keep+mixed|--mode mixed --quarantine-ms $quarantine --holds kept"
  "negative-control|--mode restart --quarantine-ms 0 --expect-overlap"
  "clock|--mode clock"
  "keep+clock|--mode clock --holds kept"
  "clock-large|--mode clock-large"
  "pause-client|--mode pause-client --resources 6 --threads 8"
  "partition|--mode partition"
  "permit|--mode mixed --quarantine-ms $quarantine --permits 3 --resources 1 --threads 8"
  "cancel|--mode mixed --quarantine-ms $quarantine --cancel"
  "shared|--mode mixed --quarantine-ms $quarantine --shared --resources 2"
  "control-shared-apart|--mode none --shared --shared-apart --resources 2 --register none --expect-overlap"
  "all|--mode mixed --quarantine-ms $quarantine --all --resources 3"
  "election|--mode mixed --quarantine-ms $quarantine --election --resources 2"
  "control-observer-order|--mode none --election --observer-misreports --resources 1 --register none --expect-observer-regression"
  "control-observer-late|--mode none --election --observer-freezes --resources 1 --register none --expect-late-report"
  "control-election-late|--mode none --election --election-acts-after-resign --resources 1 --register none --expect-overlap"
  "control-all-first-only|--mode none --all --all-first-only --resources 3 --register none --expect-overlap"
  "liveness|--mode none --cancel --check-stalls"
  "liveness-slow-retry|--mode none --retry-delay-ms 1000 --check-stalls"
  "control-stranded|--mode none --strand --register none --expect-stall"
  "control-markers-lost|--mode none --retry-delay-ms 1000 --steal-markers --register none --expect-stall"
  "liveness-all|--mode none --all --resources 3 --retry-delay-ms 1000 --check-stalls"
  "control-all-stranded|--mode none --all --resources 3 --strand --register none --expect-stall"
  "control-clock-unfenced|--mode clock-large --register unfenced --expect-stale"
  "control-pause-unfenced|--mode pause-client --resources 6 --threads 8 --register unfenced --expect-stale"
  "control-permit-counter|--mode none --permits 3 --resources 1 --threads 16 --counter-semaphore --register none --expect-over-admission"
)
# The third layer's runs, until its primitives exist.
not_built=()
# The clock shim preloads into masters this script starts itself.
local_only=(clock clock-large control-clock-unfenced)

# A flat JSON field of the checker's last line (numbers or null).
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$2"; }
# A field inside the "errors" object.
error_field() { grep -o '"errors":{[^}]*}' <<<"$2" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
ms() { [[ $1 =~ ^[0-9]+$ ]] && awk -v us="$1" 'BEGIN { printf "%.1f", us / 1000 }' || echo "-"; }

row() { printf '%-23s %5s %6s %8s %8s %5s %11s %8s %6s %6s %9s %9s %8s %7s  %s' "$@"; }

failures=0
table=()
for name in "${not_built[@]}"; do
  [[ -n $only && $only == *",$name,"* ]] || continue
  echo "== $name: not built yet (the third layer's primitives do not exist yet)"
  table+=("$(row "$name" - - - - - - - - - - - - - FAIL)")
  failures=$((failures + 1))
done
for run in "${runs[@]}"; do
  IFS='|' read -r name args <<<"$run"
  [[ -z $only || $only == *",$name,"* ]] || continue
  if [[ $backend != local && " ${local_only[*]} " == *" $name "* ]]; then
    echo "== $name: skipped (jumps the clocks of local masters only)"
    continue
  fi
  read -r -a words <<<"$args"
  log="$log_dir/$name.log"
  cmd=("$chaos" "${words[@]}" --seconds "$seconds" --ttl-ms "$ttl" --list-faults "${backend_args[@]}" "${extra[@]}")
  echo "== $name: ${cmd[*]}"
  status=0
  "${cmd[@]}" >"$log" 2>&1 || status=$?
  # The fault list stays in the log.
  grep -v -e '^{' -e '^  fault ' "$log" | sed 's/^/   /' || true
  json=$(grep '^{' "$log" | tail -n 1 || true)
  if ((status == 0)); then
    verdict=ok
  else
    verdict=FAIL
    failures=$((failures + 1))
  fi
  if [[ -n $json ]]; then
    rate=$(field success_rate_healthy "$json")
    [[ $rate == null || -z $rate ]] && rate="-" || rate=$(awk -v r="$rate" 'BEGIN { printf "%.1f%%", 100 * r }')
    table+=("$(row "$name" "$status" "$(field faults "$json")" "$(field acquisitions "$json")" \
      "$(field overlaps "$json")" "$(field over_admissions "$json")" \
      "$(field tokens_checked "$json")/$(field token_inversions "$json")" \
      "$(field overruns "$json")" "$(field stale_accepted "$json")" "$(field writes_refused "$json")" \
      "$(ms "$(field p50_acquire_us "$json")")" "$(ms "$(field p99_acquire_us "$json")")" "$rate" \
      "$(error_field unavailable "$json")" "$verdict")")
  else
    table+=("$(row "$name" "$status" - - - - - - - - - - - - "$verdict")")
  fi
done

echo
echo "redlock-chaos summary ($backend, ${seconds} s per mode, ttl $ttl ms, logs in $log_dir)"
row run exit faults acquired overlaps over "tokens/inv" overruns stale refused "p50 ms" "p99 ms" "ok/hlth" unavail verdict
echo
for line in "${table[@]}"; do echo "$line"; done
((${#table[@]} > 0)) || die "--only matched no run"
if ((failures > 0)); then
  echo "chaos.sh: $failures of ${#table[@]} runs failed"
  exit 1
fi
echo "chaos.sh: all ${#table[@]} runs passed"
